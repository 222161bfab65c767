//! Per-actor mailbox throughput: a store shard serving reads from its cache, a store shard
//! group-committing writes (in-memory engine), and the watch hub fanning events out to 1,000
//! subscribers. Prints the median of several runs and writes target/bench-results/mailbox.json.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kplane_actors::model::{resources, ObjectFilter, ObjectKey, StoredObject};
use kplane_actors::store::{Store, StoreOptions};
use kplane_actors::watch::{Bookmarks, EventType, HubOptions, Publish, WatchEvent, WatchHub};
use serde_json::json;

const RUNS: usize = 5;

async fn shard_reads(store: &Store, in_flight: usize, total: usize) -> f64 {
    let pods = resources::find("", "v1", "pods").unwrap();
    let key = ObjectKey::new(pods, "default", "p0");
    let started = Instant::now();
    let per_task = total / in_flight;
    let tasks: Vec<_> = (0..in_flight)
        .map(|_| {
            let store = store.clone();
            let key = key.clone();
            tokio::task::spawn_local(async move {
                for _ in 0..per_task {
                    assert!(store.get(&key).await.unwrap().is_some());
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    (per_task * in_flight) as f64 / started.elapsed().as_secs_f64()
}

async fn shard_writes(store: &Store, in_flight: usize, total: usize, run: usize) -> f64 {
    let cms = resources::find("", "v1", "configmaps").unwrap();
    let started = Instant::now();
    let per_task = total / in_flight;
    let tasks: Vec<_> = (0..in_flight)
        .map(|t| {
            let store = store.clone();
            tokio::task::spawn_local(async move {
                for i in 0..per_task {
                    let name = format!("r{run}-t{t}-{i}");
                    let key = ObjectKey::new(cms, "default", &name);
                    let object = json!({"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":name,"namespace":"default"}});
                    store.create(key, object).await.unwrap();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    (per_task * in_flight) as f64 / started.elapsed().as_secs_f64()
}

/// `subscribers` watchers each receive `events` events, published `per_batch` at a time (a
/// shard publishes one batch per group commit).
async fn hub_fanout(subscribers: usize, events: usize, per_batch: usize) -> f64 {
    let hub = WatchHub::start(HubOptions {
        window_events: 1000,
        window_bytes: usize::MAX,
        buffer: events + 16,
        bookmark_interval: Duration::from_secs(3600),
    });
    let pods = resources::find("", "v1", "pods").unwrap();
    let mut subs = Vec::with_capacity(subscribers);
    for _ in 0..subscribers {
        subs.push(hub.subscribe(pods, ObjectFilter::default(), 0, Bookmarks::None).await.unwrap());
    }
    let object = Arc::new(StoredObject::from_value(
        ObjectKey::new(pods, "default", "p"),
        json!({"metadata":{"name":"p","namespace":"default"}}),
        1,
    ));
    let batch: Vec<WatchEvent> = (0..events)
        .map(|i| {
            let mut o = (*object).clone();
            o.resource_version = i as u64 + 1;
            WatchEvent {
                kind: EventType::Modified,
                object: Arc::new(o),
                previous: Some(object.clone()),
            }
        })
        .collect();
    let publisher = hub.publisher();
    let started = Instant::now();
    for chunk in batch.chunks(per_batch) {
        publisher.do_send(Publish { events: chunk.to_vec() });
    }
    for sub in subs.iter_mut() {
        let mut n = 0;
        while n < events {
            sub.next().await.unwrap();
            n += 1;
        }
    }
    (subscribers * events) as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let system = actix::System::new();
    let results = system.block_on(async {
        let hub = WatchHub::start(HubOptions {
            window_events: 1000,
            window_bytes: usize::MAX,
            buffer: 10,
            bookmark_interval: Duration::from_secs(3600),
        });
        let store = Store::open(&StoreOptions { shards: 1, data_dir: None, ..Default::default() }, &hub).unwrap();
        let pods = resources::find("", "v1", "pods").unwrap();
        let pod =
            json!({"kind":"Pod","apiVersion":"v1","metadata":{"name":"p0","namespace":"default"}});
        store.create(ObjectKey::new(pods, "default", "p0"), pod).await.unwrap();
        let local = tokio::task::LocalSet::new();
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        let mut fanout = Vec::new();
        let mut fanout_single = Vec::new();
        // `cargo bench --bench mailbox -- reads` (or writes, fanout) runs only that part.
        let only: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
        let wanted = |part: &str| only.is_empty() || only.iter().any(|o| o == part);
        for run in 0..RUNS {
            if wanted("reads") {
                reads.push(local.run_until(shard_reads(&store, 256, 400_000)).await);
            }
            if wanted("writes") {
                writes.push(local.run_until(shard_writes(&store, 256, 100_000, run)).await);
            }
            if wanted("fanout") {
                fanout.push(hub_fanout(1000, 2000, 100).await);
                fanout_single.push(hub_fanout(1000, 2000, 1).await);
            }
        }
        let median = |runs: Vec<f64>| (!runs.is_empty()).then(|| common::median(runs));
        json!({
            "store_shard_reads_per_sec": median(reads),
            "store_shard_writes_per_sec_memory_engine": median(writes),
            "watch_hub_deliveries_per_sec_1000_subscribers": median(fanout),
            "watch_hub_deliveries_per_sec_1000_subscribers_one_event_per_commit": median(fanout_single),
            "runs": RUNS,
        })
    });
    if std::env::args().skip(1).any(|a| !a.starts_with('-')) {
        println!("{results:#} (a partial run: results not written)");
    } else {
        common::report("mailbox", &results);
    }
}
