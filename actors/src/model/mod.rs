//! The API model: served resource types, stored objects, selectors and validation.

pub mod cidr;
pub mod disruption;
pub mod endpoints;
mod filter;
pub mod finalizers;
pub mod json;
pub mod lists;
mod object;
pub mod owners;
mod packed;
pub mod priority;
pub mod qos;
pub mod quantity;
pub mod quota;
pub mod resources;
mod selector;
pub mod service_traffic;
pub mod sysctl;
pub mod taints;
pub mod text;
pub mod validation;

pub use filter::ObjectFilter;
pub use object::{JsonField, ObjectKey, PreparedObject, StoredObject};
pub use quantity::QuantityError;
pub use resources::{ResourceType, Subresource};
pub use selector::{FieldSelector, FieldValues, LabelSelector, Labels, SelectorError};
pub use validation::FieldError;

/// A hash map for the write path's bookkeeping (a shard's accepted keys, the namespace table,
/// the garbage collector's graph, the hub's subscribers): foldhash, seeded per map, in place
/// of std's SipHash, whose hashing of each created object's keys showed in instruction counts.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
/// The set kept beside [`FastMap`]s.
pub type FastSet<T> = std::collections::HashSet<T, foldhash::fast::RandomState>;

/// Whether an object is being deleted (`metadata.deletionTimestamp` is set).
pub fn is_being_deleted(object: &serde_json::Value) -> bool {
    json::at(object, "/metadata/deletionTimestamp").is_some_and(|t| !t.is_null())
}

/// A claim's or volume's storage class, as Kubernetes reads it: the deprecated
/// `volume.beta.kubernetes.io/storage-class` annotation, else `spec.storageClassName`, else
/// none ("").
pub fn storage_class(object: &serde_json::Value) -> &str {
    let annotated = json::at(object, "/metadata/annotations")
        .and_then(|a| a.get("volume.beta.kubernetes.io/storage-class"));
    annotated
        .or_else(|| json::at(object, "/spec/storageClassName"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or("")
}

/// The annotation that tells which of a controller's pods to delete first, lowest first.
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// A pod's deletion cost (0 without the annotation); `Err` holds a value that is not a
/// 32-bit integer written plainly (no `+`, no leading zeros), which Kubernetes refuses.
pub fn pod_deletion_cost(pod: &serde_json::Value) -> Result<i32, &str> {
    let annotations = json::at(pod, "/metadata/annotations").and_then(|a| a.as_object());
    let Some(value) = annotations.and_then(|a| a.get(POD_DELETION_COST)) else { return Ok(0) };
    let text = value.as_str().unwrap_or("");
    let plain = match text.as_bytes() {
        [b'-', ..] | [b'1'..=b'9', ..] => true,
        first => first == b"0",
    };
    text.parse().ok().filter(|_| plain).ok_or(text)
}

/// Whether a pod or a node has the `Ready` condition `True`.
pub fn is_ready(object: &serde_json::Value) -> bool {
    let conditions = json::at(object, "/status/conditions").and_then(|c| c.as_array());
    conditions.into_iter().flatten().any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// Puts `condition` (its `type`, `status` and the rest) into the `conditions` list of a
/// status, replacing the one of its type; `lastTransitionTime` stays the old one's while the
/// status is the same, else it is now.
pub fn put_condition(
    status: &mut serde_json::Map<String, serde_json::Value>,
    mut condition: serde_json::Value,
) {
    let conditions = status.entry("conditions").or_insert_with(|| serde_json::json!([]));
    if !conditions.is_array() {
        *conditions = serde_json::json!([]);
    }
    let conditions = conditions.as_array_mut().expect("set to an array above");
    let previous = conditions.iter().position(|c| c["type"] == condition["type"]);
    condition["lastTransitionTime"] = match previous.map(|i| &conditions[i]) {
        Some(old) if old["status"] == condition["status"] => old["lastTransitionTime"].clone(),
        _ => serde_json::json!(now()),
    };
    match previous {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
}

/// The current time as Kubernetes writes timestamps (RFC 3339, whole seconds, UTC).
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Whole seconds from a timestamp (RFC 3339) to now; `None` for text that is no timestamp.
pub fn seconds_since(timestamp: &str) -> Option<i64> {
    let then = chrono::DateTime::parse_from_rfc3339(timestamp).ok()?;
    Some((chrono::Utc::now() - then.with_timezone(&chrono::Utc)).num_seconds())
}

/// The current time as Kubernetes writes a `MicroTime` (RFC 3339, six fractional digits, UTC).
pub fn now_micro() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}
