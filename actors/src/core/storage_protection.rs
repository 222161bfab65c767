//! The StorageObjectInUseProtection admission plugin: every new PersistentVolumeClaim gets the
//! `kubernetes.io/pvc-protection` finalizer and every new PersistentVolume the
//! `kubernetes.io/pv-protection` one, so that neither goes while in use: the
//! storage protection controller lets them go.

use serde_json::{json, Value};

pub const CLAIM_FINALIZER: &str = "kubernetes.io/pvc-protection";
pub const VOLUME_FINALIZER: &str = "kubernetes.io/pv-protection";

/// Adds the protection finalizer of `kind` to a new object, once.
pub(crate) fn admit(kind: &str, object: &mut Value) {
    let finalizer = match kind {
        "PersistentVolumeClaim" => CLAIM_FINALIZER,
        "PersistentVolume" => VOLUME_FINALIZER,
        _ => return,
    };
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let finalizers = metadata.entry("finalizers").or_insert_with(|| json!([]));
    if !finalizers.is_array() {
        *finalizers = json!([]);
    }
    let list = finalizers.as_array_mut().expect("made an array above");
    if !list.iter().any(|f| f == finalizer) {
        list.push(json!(finalizer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_and_volumes_are_protected_once_and_nothing_else() {
        let mut claim = json!({"metadata": {"name": "c", "finalizers": ["a.io/keep"]}});
        admit("PersistentVolumeClaim", &mut claim);
        admit("PersistentVolumeClaim", &mut claim);
        assert_eq!(claim["metadata"]["finalizers"], json!(["a.io/keep", CLAIM_FINALIZER]));
        let mut volume = json!({"metadata": {"name": "v"}});
        admit("PersistentVolume", &mut volume);
        assert_eq!(volume["metadata"]["finalizers"], json!([VOLUME_FINALIZER]));
        let mut pod = json!({"metadata": {"name": "p"}});
        admit("Pod", &mut pod);
        assert!(pod["metadata"].get("finalizers").is_none());
    }
}
