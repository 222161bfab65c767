//! The metadata-only forms kube-apiserver answers in when `Accept` asks for
//! `as=PartialObjectMetadata` or `as=PartialObjectMetadataList` (client-go's metadata client
//! and its informers): each object's whole `metadata` under kind `PartialObjectMetadata` of
//! `meta.k8s.io`.

use bytes::Bytes;
use kplane_actors::core::ObjectList;
use kplane_actors::model::{ResourceType, StoredObject};
use serde_json::{json, Value};

use crate::error::HttpError;

/// `object` as a `PartialObjectMetadata` of `meta.k8s.io` `version`.
pub fn of_object(object: &StoredObject, version: &str) -> Value {
    of_metadata(metadata(object), version)
}

/// A `PartialObjectMetadata` holding `metadata` (a watch's bookmark has no stored object).
pub fn of_metadata(metadata: Value, version: &str) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": format!("meta.k8s.io/{version}"),
        "metadata": metadata})
}

/// `list` as a `PartialObjectMetadataList` of `meta.k8s.io` `version`.
pub fn of_list(list: &ObjectList, version: &str) -> Bytes {
    let mut metadata = json!({"resourceVersion": list.resource_version.to_string()});
    if let Some(token) = &list.continue_token {
        metadata["continue"] = Value::String(token.clone());
    }
    if let Some(remaining) = list.remaining_item_count {
        metadata["remainingItemCount"] = remaining.into();
    }
    let items: Vec<Value> = list.items.iter().map(|item| of_object(item, version)).collect();
    let list = json!({"kind": "PartialObjectMetadataList",
        "apiVersion": format!("meta.k8s.io/{version}"), "metadata": metadata, "items": items});
    Bytes::from(list.to_string())
}

/// Kubernetes' 406 for a list asked for as one object's metadata.
pub fn list_refused(resource: &ResourceType) -> HttpError {
    refused(format!(
        "you requested PartialObjectMetadata, but the requested object is a list (*{}.{})",
        go_package(resource),
        resource.list_kind
    ))
}

/// Kubernetes' 406 for one object asked for as a list's metadata.
pub fn object_refused(resource: &ResourceType) -> HttpError {
    refused(format!(
        "you requested PartialObjectMetadataList, but the requested object is not a list \
         (*{}.{})",
        go_package(resource),
        resource.kind
    ))
}

fn refused(message: String) -> HttpError {
    HttpError::NotConvertible(message)
}

/// The Go package of kube-apiserver's internal type for `resource`, which its messages name:
/// `core` for the core group, else the group's first label (`coordination`, `rbac`, ...).
fn go_package(resource: &ResourceType) -> &str {
    match resource.group {
        "" => "core",
        group => group.split('.').next().unwrap_or(group),
    }
}

fn metadata(object: &StoredObject) -> Value {
    #[derive(serde::Deserialize)]
    struct Metadata {
        #[serde(default)]
        metadata: Value,
    }
    let parsed: Result<Metadata, _> = serde_json::from_slice(&object.raw);
    parsed.map(|m| m.metadata).unwrap_or_default()
}
