//! The in-process `ApiClient`: calls the API core directly, no HTTP and no JSON re-encoding of
//! requests.

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{json, Value};

use super::{object_name, ApiClient, ClientEvent, ClientList, ClientWatch};
use crate::core::{ApiCore, ApiError, DeleteOptions, ListOptions, WatchFrame, WatchOptions};
use crate::model::ResourceType;

#[async_trait]
impl ApiClient for ApiCore {
    async fn get(&self, resource: &'static ResourceType, namespace: &str, name: &str) -> Result<Value, ApiError> {
        Ok(ApiCore::get(self, resource, namespace, name).await?.to_value())
    }

    async fn list(
        &self,
        resource: &'static ResourceType,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ClientList, ApiError> {
        let list = ApiCore::list(self, resource, namespace, options).await?;
        Ok(ClientList {
            resource_version: list.resource_version.to_string(),
            items: list.items.iter().map(|o| o.to_value()).collect(),
            continue_token: list.continue_token,
        })
    }

    async fn create(&self, resource: &'static ResourceType, namespace: &str, object: Value) -> Result<Value, ApiError> {
        Ok(ApiCore::create(self, resource, namespace, object, false).await?.to_value())
    }

    async fn update(&self, resource: &'static ResourceType, namespace: &str, object: Value) -> Result<Value, ApiError> {
        let name = object_name(&object).to_string();
        Ok(ApiCore::update(self, resource, namespace, &name, object, false).await?.to_value())
    }

    async fn update_status(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        object: Value,
    ) -> Result<Value, ApiError> {
        let name = object_name(&object).to_string();
        Ok(ApiCore::update_status(self, resource, namespace, &name, object, false).await?.to_value())
    }

    async fn delete(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        Ok(ApiCore::delete(self, resource, namespace, name, options).await?.to_value())
    }

    async fn watch(
        &self,
        resource: &'static ResourceType,
        namespace: Option<&str>,
        options: &WatchOptions,
    ) -> Result<ClientWatch, ApiError> {
        let stream = ApiCore::watch(self, resource, namespace, options).await?;
        let kind = resource.kind;
        let api_version = resource.api_version();
        Ok(stream
            .map(move |frame| match frame {
                WatchFrame::Event(t, object) => {
                    ClientEvent { event_type: t.as_str().into(), object: object.to_value() }
                }
                WatchFrame::Bookmark { resource_version, .. } => ClientEvent {
                    event_type: "BOOKMARK".into(),
                    object: json!({"kind": kind, "apiVersion": api_version,
                        "metadata": {"resourceVersion": resource_version.to_string()}}),
                },
                WatchFrame::Error(e) => ClientEvent {
                    event_type: "ERROR".into(),
                    object: json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "message": e.to_string()}),
                },
            })
            .boxed())
    }
}
