//! Test support shared by the unit tests of several modules: an in-memory API core and a
//! wait-until helper.

use std::time::{Duration, Instant};

use crate::core::ApiCore;
use crate::store::{Store, StoreOptions};
use crate::watch::{HubOptions, WatchHub};

/// A bootstrapped API core over an in-memory store with a roomy watch window.
pub async fn core() -> ApiCore {
    let hub = WatchHub::start(HubOptions {
        window_events: 100_000,
        buffer: 100_000,
        bookmark_interval: Duration::from_secs(60),
    });
    let store = Store::open(&StoreOptions { shards: 2, data_dir: None }, &hub).unwrap();
    let core = ApiCore::new(store, hub);
    core.bootstrap().await.unwrap();
    core
}

/// Polls `check` until it returns something, or fails after 30 s.
pub async fn eventually<T>(what: &str, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
