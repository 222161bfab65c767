//! The in-process `ApiClient`: calls the API core directly, no HTTP and no JSON re-encoding of
//! requests.

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::Value;

use super::{object_name, ApiClient, ClientEvent, ClientList, ClientWatch};
use crate::core::{
    ApiCore, ApiError, DeleteOptions, ListOptions, ObjectView, PatchType, WatchFrame, WatchOptions,
    WriteOptions,
};
use crate::model::{ResourceType, StoredObject};

#[async_trait]
impl ApiClient for ApiCore {
    async fn get(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        Ok(ApiCore::get(self, resource, namespace, name).await?.to_value())
    }

    async fn list(
        &self,
        resource: &'static ResourceType,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ClientList, ApiError> {
        let list = ApiCore::list(self, resource, namespace, options).await?;
        let value = object_form(options.view);
        Ok(ClientList {
            resource_version: list.resource_version.to_string(),
            items: list.items.iter().map(|o| value(o)).collect(),
            continue_token: list.continue_token,
        })
    }

    async fn create(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        object: Value,
    ) -> Result<Value, ApiError> {
        Ok(ApiCore::create(self, resource, namespace, object, &WriteOptions::default())
            .await?
            .to_value())
    }

    async fn update(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        object: Value,
    ) -> Result<Value, ApiError> {
        let name = object_name(&object).to_string();
        Ok(ApiCore::update(self, resource, namespace, &name, object, &WriteOptions::default())
            .await?
            .to_value())
    }

    async fn update_status(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        object: Value,
    ) -> Result<Value, ApiError> {
        let name = object_name(&object).to_string();
        Ok(ApiCore::update_status(
            self,
            resource,
            namespace,
            &name,
            object,
            &WriteOptions::default(),
        )
        .await?
        .to_value())
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
        let options = WriteOptions::default();
        let patched = ApiCore::patch(
            self,
            resource,
            namespace,
            name,
            patch_type,
            patch,
            status_only,
            &options,
        )
        .await?;
        Ok(patched.to_value())
    }

    async fn finalize(&self, namespace: Value) -> Result<Value, ApiError> {
        let name = object_name(&namespace).to_string();
        let options = WriteOptions::default();
        Ok(ApiCore::finalize(self, &name, namespace, &options).await?.to_value())
    }

    async fn bind(&self, namespace: &str, name: &str, binding: Value) -> Result<(), ApiError> {
        ApiCore::bind(self, namespace, name, &binding, false).await
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

    async fn request_token(
        &self,
        namespace: &str,
        name: &str,
        request: Value,
    ) -> Result<Value, ApiError> {
        ApiCore::request_token(self, namespace, name, request).await
    }

    async fn watch(
        &self,
        resource: &'static ResourceType,
        namespace: Option<&str>,
        options: &WatchOptions,
    ) -> Result<ClientWatch, ApiError> {
        let stream = ApiCore::watch(self, resource, namespace, options).await?;
        let value = object_form(options.view);
        Ok(stream
            .map(move |frame| match frame {
                WatchFrame::Event(t, object) => ClientEvent::Object(t, value(&object)),
                WatchFrame::Bookmark { resource_version, .. } => {
                    ClientEvent::Bookmark { resource_version: resource_version.to_string() }
                }
                WatchFrame::Error(e) => ClientEvent::Error(e),
            })
            .boxed())
    }
}

/// How objects reach the client: whole, or only as much of their metadata as it needs.
fn object_form(view: ObjectView) -> fn(&StoredObject) -> Value {
    match view {
        ObjectView::Whole => StoredObject::to_value,
        ObjectView::Metadata => StoredObject::metadata_value,
        ObjectView::Ownership => StoredObject::ownership_value,
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use serde_json::json;

    use super::*;
    use crate::model::resources::find;

    #[actix::test]
    async fn components_see_the_api_through_the_trait() {
        let core = crate::testing::core().await;
        let client: &dyn ApiClient = &core;
        let pods = find("", "v1", "pods").unwrap();
        let watch_options =
            WatchOptions { resource_version: Some("1".into()), ..Default::default() };
        let mut watch = client.watch(pods, Some("default"), &watch_options).await.unwrap();
        let pod = json!({"metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}]}});
        let created = client.create(pods, "default", pod).await.unwrap();
        assert_eq!(created["spec"]["restartPolicy"], "Always");
        let mut changed = created.clone();
        changed["metadata"]["labels"] = json!({"a": "b"});
        let updated = client.update(pods, "default", changed).await.unwrap();
        let mut status = updated.clone();
        status["status"]["phase"] = json!("Running");
        status["spec"]["nodeName"] = json!("ignored");
        let after = client.update_status(pods, "default", status).await.unwrap();
        assert_eq!(after["status"]["phase"], "Running");
        assert!(after["spec"].get("nodeName").is_none(), "a status write leaves spec alone");
        let list = client.list(pods, None, &ListOptions::default()).await.unwrap();
        assert_eq!(list.items.len(), 1);
        client.delete(pods, "default", "p", &DeleteOptions::default()).await.unwrap();
        let types: Vec<String> = watch
            .by_ref()
            .take(5)
            .map(|e| match e {
                ClientEvent::Object(t, _) => t.as_str().to_string(),
                other => format!("{other:?}"),
            })
            .collect()
            .await;
        // A pod is marked deleted (grace 0: it is on no node) before it goes, as in Kubernetes.
        assert_eq!(types, ["ADDED", "MODIFIED", "MODIFIED", "MODIFIED", "DELETED"]);
        let missing = client.get(pods, "default", "p").await.unwrap_err();
        assert!(matches!(missing, ApiError::NotFound { .. }));
    }

    #[actix::test]
    async fn finalizers_hold_deletion_until_removed() {
        let core = crate::testing::core().await;
        let cms = find("", "v1", "configmaps").unwrap();
        let cm = json!({"metadata":{"name":"f","finalizers":["example.com/hold"]}});
        ApiClient::create(&core, cms, "default", cm).await.unwrap();
        let marked =
            ApiClient::delete(&core, cms, "default", "f", &DeleteOptions::default()).await.unwrap();
        assert!(marked["metadata"]["deletionTimestamp"].is_string());
        let mut released = ApiClient::get(&core, cms, "default", "f").await.unwrap();
        released["metadata"]["finalizers"] = json!([]);
        ApiClient::update(&core, cms, "default", released).await.unwrap();
        assert!(ApiClient::get(&core, cms, "default", "f").await.is_err());
    }
}
