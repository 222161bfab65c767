//! The `ApiClient` trait: how components (controllers, the scheduler, node agents) reach
//! cluster state, in-process or over HTTP, without knowing which.

pub mod cache;
pub mod events;
mod in_process;
pub mod informer;

use async_trait::async_trait;
use serde_json::Value;

use crate::core::{ApiError, DeleteOptions, ListOptions, PatchType, WatchOptions};
use crate::model::{json, ResourceType};
use crate::watch::EventType;

/// A list as clients see it: its revision and items.
#[derive(Debug, Clone)]
pub struct ClientList {
    pub resource_version: String,
    pub items: Vec<Value>,
    pub continue_token: Option<String>,
}

/// A watch event as clients see it.
#[derive(Debug, Clone)]
pub enum ClientEvent {
    /// ADDED, MODIFIED or DELETED, with the object.
    Object(EventType, Value),
    /// Everything up to this resourceVersion has been delivered.
    Bookmark { resource_version: String },
    /// The watch ended with this error (410 Expired: re-list and watch again).
    Error(ApiError),
}

pub type ClientWatch = std::pin::Pin<Box<dyn futures::Stream<Item = ClientEvent> + Send>>;

/// Cluster state access for components. Objects are Kubernetes JSON.
#[async_trait]
pub trait ApiClient: Send + Sync {
    async fn get(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ApiError>;
    async fn list(
        &self,
        resource: &'static ResourceType,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ClientList, ApiError>;
    async fn create(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        object: Value,
    ) -> Result<Value, ApiError>;
    async fn update(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        object: Value,
    ) -> Result<Value, ApiError>;
    async fn update_status(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        object: Value,
    ) -> Result<Value, ApiError>;
    /// Patches an object, or only its status when `status_only`.
    async fn patch(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        patch: &Value,
        status_only: bool,
    ) -> Result<Value, ApiError>;
    /// Sets a namespace's `spec.finalizers` to those of `namespace` (PUT
    /// `namespaces/{name}/finalize`), with its resourceVersion, if any, as a precondition.
    async fn finalize(&self, namespace: Value) -> Result<Value, ApiError>;
    /// Binds a pod to a node (POST `pods/{name}/binding`); `binding` is a core/v1 `Binding`.
    async fn bind(&self, namespace: &str, name: &str, binding: Value) -> Result<(), ApiError>;
    async fn delete(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Value, ApiError>;
    /// Asks for a token of service account `name` (POST `serviceaccounts/{name}/token`);
    /// `request` is an `authentication.k8s.io/v1` TokenRequest, answered with its status.
    async fn request_token(
        &self,
        namespace: &str,
        name: &str,
        request: Value,
    ) -> Result<Value, ApiError>;
    async fn watch(
        &self,
        resource: &'static ResourceType,
        namespace: Option<&str>,
        options: &WatchOptions,
    ) -> Result<ClientWatch, ApiError>;
}

/// The name in an object's metadata (empty when missing).
pub fn object_name(object: &Value) -> &str {
    json::at(object, "/metadata/name").and_then(Value::as_str).unwrap_or("")
}

/// The namespace in an object's metadata (empty when missing).
pub fn object_namespace(object: &Value) -> &str {
    json::at(object, "/metadata/namespace").and_then(Value::as_str).unwrap_or("")
}

/// The uid in an object's metadata (empty when missing).
pub fn object_uid(object: &Value) -> &str {
    json::at(object, "/metadata/uid").and_then(Value::as_str).unwrap_or("")
}
