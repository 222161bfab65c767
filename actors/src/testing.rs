//! Test support shared by the unit tests of several modules: an in-memory API core, a client
//! that lets a test step in before chosen calls, and a wait-until helper.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::future::BoxFuture;
use serde_json::Value;

use crate::client::{ApiClient, ClientList, ClientWatch};
use crate::core::{ApiCore, ApiError, DeleteOptions, ListOptions, PatchType, WatchOptions};
use crate::model::ResourceType;
use crate::store::{Store, StoreOptions};
use crate::watch::{HubOptions, WatchHub};

/// A roomy watch window.
fn roomy() -> HubOptions {
    HubOptions {
        window_events: 100_000,
        window_bytes: usize::MAX,
        buffer: 100_000,
        bookmark_interval: Duration::from_secs(60),
    }
}

/// A bootstrapped API core over an in-memory store with a roomy watch window.
pub async fn core() -> ApiCore {
    core_with(roomy()).await
}

/// A bootstrapped API core over an in-memory store, with these watch settings.
pub async fn core_with(options: HubOptions) -> ApiCore {
    core_of(options, StoreOptions { shards: 2, data_dir: None, ..Default::default() }).await
}

/// As [`core`], over a store that keeps only its last `changes` changes (and so lists at no
/// older revision).
pub async fn core_with_history(changes: usize) -> ApiCore {
    core_of(roomy(), StoreOptions { history_changes: changes, ..Default::default() }).await
}

async fn core_of(hub: HubOptions, store: StoreOptions) -> ApiCore {
    let hub = WatchHub::start(hub);
    let store = Store::open(&store, &hub).unwrap();
    let core = ApiCore::new(store, hub);
    core.bootstrap().await.unwrap();
    core
}

/// As [`core`], with the controllers node agents need: the node IPAM controller handing out
/// nodes' pod networks (agents wait for theirs), from the agent's default cluster CIDR, and
/// the node lifecycle controller, which takes a new node's `not-ready` taint off once it is
/// Ready.
pub async fn core_with_node_controllers() -> ApiCore {
    let core = core().await;
    let client = std::sync::Arc::new(core.clone());
    let cluster = crate::agent::DEFAULT_CLUSTER_CIDR;
    actix::Actor::start(crate::controllers::NodeIpamController::new(client.clone(), cluster));
    let lifecycle = crate::controllers::node_lifecycle::NodeLifecycleConfig::default();
    actix::Actor::start(crate::controllers::NodeLifecycleController::new(client, lifecycle));
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

/// A call a `Hooked` client is about to make.
#[derive(Debug, Clone)]
pub enum Call {
    List { resource: &'static ResourceType },
    Patch { resource: &'static ResourceType, namespace: String, name: String },
    Create { resource: &'static ResourceType, namespace: String },
    Delete { name: String },
}

type Hook = Box<dyn Fn(ApiCore, Call) -> BoxFuture<'static, ()> + Send + Sync>;

/// The in-process client, with a hook that runs (and is awaited) before each list, patch,
/// create and delete:
/// how a test puts another writer, or a wait, at an exact point of a component's work.
pub struct Hooked {
    core: ApiCore,
    before: Hook,
}

impl Hooked {
    pub fn new(
        core: &ApiCore,
        before: impl Fn(ApiCore, Call) -> BoxFuture<'static, ()> + Send + Sync + 'static,
    ) -> Self {
        Self { core: core.clone(), before: Box::new(before) }
    }
}

#[async_trait]
impl ApiClient for Hooked {
    async fn get(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        ApiClient::get(&self.core, resource, namespace, name).await
    }
    async fn list(
        &self,
        resource: &'static ResourceType,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ClientList, ApiError> {
        (self.before)(self.core.clone(), Call::List { resource }).await;
        ApiClient::list(&self.core, resource, namespace, options).await
    }
    async fn create(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        object: Value,
    ) -> Result<Value, ApiError> {
        (self.before)(self.core.clone(), Call::Create { resource, namespace: namespace.into() })
            .await;
        ApiClient::create(&self.core, resource, namespace, object).await
    }
    async fn update(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        object: Value,
    ) -> Result<Value, ApiError> {
        ApiClient::update(&self.core, resource, namespace, object).await
    }
    async fn update_status(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        object: Value,
    ) -> Result<Value, ApiError> {
        ApiClient::update_status(&self.core, resource, namespace, object).await
    }
    async fn patch(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        patch: &Value,
        status_only: bool,
    ) -> Result<Value, ApiError> {
        let call =
            Call::Patch { resource, namespace: namespace.to_string(), name: name.to_string() };
        (self.before)(self.core.clone(), call).await;
        ApiClient::patch(&self.core, resource, namespace, name, patch_type, patch, status_only)
            .await
    }
    async fn finalize(&self, namespace: Value) -> Result<Value, ApiError> {
        ApiClient::finalize(&self.core, namespace).await
    }
    async fn bind(&self, namespace: &str, name: &str, binding: Value) -> Result<(), ApiError> {
        ApiClient::bind(&self.core, namespace, name, binding).await
    }
    async fn delete(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        (self.before)(self.core.clone(), Call::Delete { name: name.to_string() }).await;
        ApiClient::delete(&self.core, resource, namespace, name, options).await
    }
    async fn request_token(
        &self,
        namespace: &str,
        name: &str,
        request: Value,
    ) -> Result<Value, ApiError> {
        ApiClient::request_token(&self.core, namespace, name, request).await
    }
    async fn watch(
        &self,
        resource: &'static ResourceType,
        namespace: Option<&str>,
        options: &WatchOptions,
    ) -> Result<ClientWatch, ApiError> {
        ApiClient::watch(&self.core, resource, namespace, options).await
    }
}
