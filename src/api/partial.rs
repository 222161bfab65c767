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

/// Kubernetes' 406 for a list of `resource` asked for as one object's metadata.
pub fn list_refused(resource: &ResourceType) -> HttpError {
    HttpError::NotConvertible(format!(
        "you requested PartialObjectMetadata, but the requested object is a list (*{})",
        go_type(resource.group, resource.list_kind)
    ))
}

/// Kubernetes' 406 for one object of `kind` in `group` asked for as a list's metadata.
pub fn object_refused(group: &str, kind: &str) -> HttpError {
    HttpError::NotConvertible(format!(
        "you requested PartialObjectMetadataList, but the requested object is not a list (*{})",
        go_type(group, kind)
    ))
}

/// kube-apiserver's internal Go type of `kind` in `group`, as its messages name it: package
/// `core` for the core group, else the group's first label (`coordination.Lease`).
fn go_type(group: &str, kind: &str) -> String {
    let package = match group {
        "" => "core",
        group => group.split('.').next().unwrap_or(group),
    };
    format!("{package}.{kind}")
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
