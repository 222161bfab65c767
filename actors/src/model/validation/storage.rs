//! Persistent volumes and their claims, as Kubernetes checks them on create and update.

use std::cmp::Ordering;

use serde_json::Value;

use super::FieldError;
use crate::model::{json, quantity};

const ACCESS_MODES: [&str; 4] =
    ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"];
const VOLUME_MODES: [&str; 2] = ["Block", "Filesystem"];
const RECLAIM_POLICIES: [&str; 3] = ["Delete", "Recycle", "Retain"];

/// The volume sources a persistent volume may name (exactly one).
const VOLUME_SOURCES: [&str; 22] = [
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "glusterfs",
    "hostPath",
    "iscsi",
    "local",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
];

/// A PersistentVolume: access modes, a capacity of storage only, one volume source, and known
/// reclaim policy and volume mode.
/// A storage class's name, when one is given (`""` asks for none): a DNS-1123 subdomain.
fn class_name(spec: Option<&Value>, errors: &mut Vec<FieldError>) {
    let class = spec.and_then(|s| s.get("storageClassName")).and_then(Value::as_str);
    if let Some(class) = class.filter(|c| !c.is_empty()) {
        for problem in super::dns1123_subdomain_errors(class) {
            errors.push(FieldError::invalid("spec.storageClassName", class, problem));
        }
    }
}

pub(super) fn validate_volume(volume: &Value, errors: &mut Vec<FieldError>) {
    let spec = volume.get("spec");
    access_modes(spec, FieldError::required("spec.accessModes"), errors);
    class_name(spec, errors);
    let capacity = spec.and_then(|s| s.get("capacity")).and_then(Value::as_object);
    match capacity {
        None => errors.push(FieldError::required("spec.capacity")),
        Some(capacity) if capacity.is_empty() => errors.push(FieldError::required("spec.capacity")),
        Some(capacity) if capacity.len() > 1 || !capacity.contains_key("storage") => {
            let names: Vec<&str> = capacity.keys().map(String::as_str).collect();
            errors.push(FieldError::not_supported("spec.capacity", &names.join(","), &["storage"]))
        }
        Some(_) => {}
    }
    for (resource, amount) in capacity.into_iter().flatten() {
        let amount = amount.as_str().unwrap_or_default();
        if quantity::compare(amount, "0") != Some(Ordering::Greater) {
            let field = format!("spec.capacity[{resource}]");
            errors.push(FieldError::invalid(field, amount, "must be greater than zero"));
        }
    }
    let sources: Vec<&str> = VOLUME_SOURCES
        .into_iter()
        .filter(|source| spec.and_then(|s| s.get(*source)).is_some_and(|v| !v.is_null()))
        .collect();
    match sources.as_slice() {
        [] => errors.push(FieldError::required_because("spec", "must specify a volume type")),
        [_] => {}
        [_, more @ ..] => {
            for source in more {
                let message = "may not specify more than 1 volume type";
                errors.push(FieldError::forbidden(format!("spec.{source}"), message));
            }
        }
    }
    let text = |field: &str| spec.and_then(|s| s.get(field)).and_then(Value::as_str);
    if let Some(policy) = text("persistentVolumeReclaimPolicy") {
        if !RECLAIM_POLICIES.contains(&policy) {
            let field = "spec.persistentVolumeReclaimPolicy";
            errors.push(FieldError::not_supported(field, policy, &RECLAIM_POLICIES));
        }
    }
    if let Some(host_path) = spec.and_then(|s| s.get("hostPath")).filter(|h| h.is_object()) {
        if sources.first() == Some(&"hostPath") {
            super::validate_host_path(host_path, "spec.hostPath", errors);
            // Recycling would empty the node's root.
            let path = host_path.get("path").and_then(Value::as_str).unwrap_or("");
            let root = std::path::Path::new(path)
                .components()
                .all(|c| matches!(c, std::path::Component::RootDir | std::path::Component::CurDir))
                && path.starts_with('/');
            if text("persistentVolumeReclaimPolicy") == Some("Recycle") && root {
                let message = "may not be 'recycle' for a hostPath mount of '/'";
                errors.push(FieldError::forbidden("spec.persistentVolumeReclaimPolicy", message));
            }
        }
    }
    let affinity = spec.and_then(|s| s.get("nodeAffinity")).filter(|a| !a.is_null());
    if let Some(local) = spec.and_then(|s| s.get("local")).filter(|l| l.is_object()) {
        if sources.first() == Some(&"local") {
            let path = local.get("path").and_then(Value::as_str).unwrap_or("");
            if path.is_empty() {
                errors.push(FieldError::required("spec.local.path"));
            } else if path.split('/').any(|part| part == "..") {
                errors.push(FieldError::invalid("spec.local.path", path, "must not contain '..'"));
            }
            if affinity.is_none() {
                let message = "Local volume requires node affinity";
                errors.push(FieldError::required_because("spec.nodeAffinity", message));
            }
        }
    }
    if let Some(affinity) = affinity {
        node_affinity(affinity, errors);
    }
    volume_mode(spec, errors);
}

/// A volume's `nodeAffinity`: its `required` node selector, with at least one term.
fn node_affinity(affinity: &Value, errors: &mut Vec<FieldError>) {
    let Some(required) = affinity.get("required").filter(|r| !r.is_null()) else {
        let message = "must specify required node constraints";
        errors.push(FieldError::required_because("spec.nodeAffinity.required", message));
        return;
    };
    let at = "spec.nodeAffinity.required.nodeSelectorTerms";
    let terms = required.get("nodeSelectorTerms").and_then(Value::as_array);
    let terms = terms.map(Vec::as_slice).unwrap_or_default();
    if terms.is_empty() {
        errors.push(FieldError::required_because(at, "must have at least one node selector term"));
    }
    for (i, term) in terms.iter().enumerate() {
        super::validate_node_selector_term(term, &format!("{at}[{i}]"), errors);
    }
}

/// A PersistentVolumeClaim: its selector, access modes, a storage request, a known volume
/// mode.
pub(super) fn validate_claim(spec: Option<&Value>, errors: &mut Vec<FieldError>) {
    if let Some(selector) = spec.and_then(|s| s.get("selector")).filter(|s| s.is_object()) {
        super::validate_label_selector(selector, "spec.selector", errors);
    }
    let required =
        FieldError::required_because("spec.accessModes", "at least 1 access mode is required");
    access_modes(spec, required, errors);
    class_name(spec, errors);
    match spec.and_then(|s| json::at(s, "/resources/requests/storage")) {
        None => errors.push(FieldError::required("spec.resources[storage]")),
        Some(storage) => {
            let storage = storage.as_str().unwrap_or_default();
            if quantity::compare(storage, "0") != Some(Ordering::Greater) {
                let field = "spec.resources[storage]";
                errors.push(FieldError::invalid(field, storage, "must be greater than zero"));
            }
        }
    }
    volume_mode(spec, errors);
}

/// What an update may not change in a volume's spec, as Kubernetes'
/// `ValidatePersistentVolumeUpdate`: its source (the `VOLUME_SOURCES` it names), its volume
/// mode, and its node affinity once set.
pub(super) fn validate_volume_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let spec_field = |pv: &Value, field: &str| {
        json::at(pv, "/spec").and_then(|s| s.get(field)).filter(|v| !v.is_null()).cloned()
    };
    let source = |pv: &Value| -> Vec<(&str, Value)> {
        let named = VOLUME_SOURCES.iter().map(|name| (*name, spec_field(pv, name)));
        named.filter_map(|(name, value)| Some((name, value?))).collect()
    };
    let mut new_source = source(new);
    // A CSI volume may be given the secret for its expansion later.
    let expand_secret = |pv: &Value| json::at(pv, "/spec/csi/controllerExpandSecretRef").is_some();
    if !expand_secret(old) && expand_secret(new) {
        for (name, value) in &mut new_source {
            if let (&mut "csi", Some(csi)) = (name, value.as_object_mut()) {
                csi.remove("controllerExpandSecretRef");
            }
        }
    }
    if source(old) != new_source {
        let message = "spec.persistentvolumesource is immutable after creation";
        errors.push(FieldError::forbidden("spec.persistentvolumesource", message));
    }
    let mode = spec_field(new, "volumeMode");
    if mode != spec_field(old, "volumeMode") {
        let mode = mode.as_ref().and_then(Value::as_str).unwrap_or("null");
        errors.push(FieldError::invalid("volumeMode", mode, "field is immutable"));
    }
    let affinity = spec_field(new, "nodeAffinity");
    let old_affinity = spec_field(old, "nodeAffinity");
    if old_affinity.is_some() && old_affinity != affinity {
        let printed = affinity.as_ref().map_or_else(|| "null".to_string(), Value::to_string);
        let message = "field is immutable, except for updating from beta label to GA";
        errors.push(FieldError::invalid_printed("nodeAffinity", &printed, message));
    }
    errors
}

/// The annotation that named a claim's class before `storageClassName`.
const BETA_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// What an update may change in a claim's spec: the storage it requests once bound (not
/// below its `status.capacity`), its volume attributes class, its volume name once, and its
/// class from none to one (a class given retroactively, or moved from the beta annotation);
/// the beta annotation itself never changes.
pub(super) fn validate_claim_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let annotation = |claim: &Value| {
        let annotations = claim.pointer("/metadata/annotations").and_then(Value::as_object);
        annotations.and_then(|a| a.get(BETA_CLASS)).and_then(Value::as_str).map(String::from)
    };
    let class = |claim: &Value| {
        json::at(claim, "/spec/storageClassName").and_then(Value::as_str).map(String::from)
    };
    let (old_annotation, new_annotation) = (annotation(old), annotation(new));
    let (old_class, new_class) = (class(old), class(new));
    // Kubernetes' `validateStorageClassUpgradeFromAnnotation` and `...FromNil`.
    let from_annotation = old_annotation.is_some()
        && (new_annotation.is_none() || new_annotation == old_annotation)
        && old_class.is_none()
        && new_class.is_some()
        && new_class == old_annotation;
    let from_nil = old_annotation.is_none()
        && old_class.is_none()
        && new_class.as_deref().is_some_and(|c| !c.is_empty());
    if !from_annotation && old_annotation != new_annotation {
        let field = format!("metadata.annotations.{BETA_CLASS}");
        let value = new_annotation.as_deref().unwrap_or("");
        errors.push(FieldError::invalid(field, value, "field is immutable"));
    }
    let class_set_now = from_annotation || from_nil;
    let storage = |claim: &Value| json::at(claim, "/spec/resources/requests/storage").cloned();
    let (old_storage, new_storage) = (storage(old), storage(new));
    let bound = json::at(new, "/status/phase").and_then(Value::as_str) == Some("Bound");
    let comparable = |claim: &Value, storage: Option<Value>| {
        let mut spec = claim.get("spec").cloned().unwrap_or(Value::Null);
        if let Some(spec) = spec.as_object_mut() {
            spec.remove("volumeAttributesClassName");
            if class_set_now {
                spec.remove("storageClassName");
            }
            let requests = spec.get_mut("resources").and_then(|r| r.get_mut("requests"));
            if let (Some(requests), Some(storage)) =
                (requests.and_then(Value::as_object_mut), storage)
            {
                requests.insert("storage".into(), storage);
            }
        }
        spec
    };
    let mut old_spec = comparable(old, None);
    let new_spec = comparable(new, if bound { old_storage.clone() } else { None });
    let old_volume = json::at(old, "/spec/volumeName").and_then(Value::as_str).unwrap_or("");
    if old_volume.is_empty() {
        // A volume name may be set once.
        if let (Some(old_spec), Some(name)) = (old_spec.as_object_mut(), new_spec.get("volumeName"))
        {
            old_spec.insert("volumeName".into(), name.clone());
        }
    }
    if old_spec != new_spec {
        errors.push(FieldError::forbidden(
            "spec",
            "spec is immutable after creation except resources.requests and \
             volumeAttributesClassName for bound claims",
        ));
    }
    let text = |q: &Option<Value>| q.as_ref().and_then(Value::as_str).map(String::from);
    if let (Some(old_storage), Some(new_storage)) = (text(&old_storage), text(&new_storage)) {
        // Less than asked before only while more than the volume has (Kubernetes 1.32's
        // RecoverVolumeExpansionFailure, on by default: an expansion that failed may be
        // taken back).
        let capacity = json::at(old, "/status/capacity/storage").and_then(Value::as_str);
        let above_capacity = capacity.is_some_and(|capacity| {
            quantity::compare(&new_storage, capacity) == Some(Ordering::Greater)
        });
        if quantity::compare(&new_storage, &old_storage) == Some(Ordering::Less) && !above_capacity
        {
            errors.push(FieldError::forbidden(
                "spec.resources.requests.storage",
                "field can not be less than status.capacity",
            ));
        }
    }
    errors
}

/// At least one access mode (else `missing`), each known, and ReadWriteOncePod alone.
fn access_modes(spec: Option<&Value>, missing: FieldError, errors: &mut Vec<FieldError>) {
    let modes = spec.and_then(|s| s.get("accessModes")).and_then(Value::as_array);
    let modes: Vec<&str> = modes.into_iter().flatten().filter_map(Value::as_str).collect();
    if modes.is_empty() {
        errors.push(missing);
    }
    for mode in &modes {
        if !ACCESS_MODES.contains(mode) {
            errors.push(FieldError::not_supported("spec.accessModes", mode, &ACCESS_MODES));
        }
    }
    if modes.len() > 1 && modes.contains(&"ReadWriteOncePod") {
        let message = "may not use ReadWriteOncePod with other access modes";
        errors.push(FieldError::forbidden("spec.accessModes", message));
    }
}

fn volume_mode(spec: Option<&Value>, errors: &mut Vec<FieldError>) {
    if let Some(mode) = spec.and_then(|s| s.get("volumeMode")).and_then(Value::as_str) {
        if !VOLUME_MODES.contains(&mode) {
            errors.push(FieldError::not_supported("spec.volumeMode", mode, &VOLUME_MODES));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::messages;
    use super::*;

    #[test]
    fn volumes_name_one_source_and_a_storage_capacity() {
        let mut errors = Vec::new();
        let good = json!({"spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
            "hostPath": {"path": "/tmp/v"}, "persistentVolumeReclaimPolicy": "Retain"}});
        validate_volume(&good, &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        let bad = json!({"spec": {"accessModes": ["ReadWriteSometimes"],
            "capacity": {"storage": "1Gi", "cpu": "1"}, "persistentVolumeReclaimPolicy": "Keep",
            "volumeMode": "Tape"}});
        validate_volume(&bad, &mut errors);
        assert_eq!(
            messages(&errors),
            [
                "spec.accessModes: Unsupported value: \"ReadWriteSometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
                "spec.capacity: Unsupported value: \"cpu,storage\": supported values: \"storage\"",
                "spec: Required value: must specify a volume type",
                "spec.persistentVolumeReclaimPolicy: Unsupported value: \"Keep\": supported values: \"Delete\", \"Recycle\", \"Retain\"",
                "spec.volumeMode: Unsupported value: \"Tape\": supported values: \"Block\", \"Filesystem\"",
            ]
        );
        let mut errors = Vec::new();
        let two = json!({"spec": {"accessModes": ["ReadWriteOncePod", "ReadOnlyMany"],
            "capacity": {"storage": "1Gi"}, "hostPath": {"path": "/a"}, "nfs": {"path": "/b"}}});
        validate_volume(&two, &mut errors);
        assert_eq!(
            messages(&errors),
            [
                "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes",
                "spec.nfs: Forbidden: may not specify more than 1 volume type",
            ]
        );
        let volume = |source: Value, extra: Value| {
            let mut spec =
                json!({"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}});
            spec.as_object_mut().unwrap().extend(source.as_object().unwrap().clone());
            spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            let mut errors = Vec::new();
            validate_volume(&json!({ "spec": spec }), &mut errors);
            messages(&errors)
        };
        assert_eq!(
            volume(json!({"local": {"path": "/tmp/../x"}}), json!({})),
            [
                "spec.local.path: Invalid value: \"/tmp/../x\": must not contain '..'",
                "spec.nodeAffinity: Required value: Local volume requires node affinity",
            ]
        );
        assert_eq!(
            volume(json!({"local": {"path": ""}}), json!({"nodeAffinity": {}})),
            [
                "spec.local.path: Required value",
                "spec.nodeAffinity.required: Required value: must specify required node constraints",
            ]
        );
        assert_eq!(
            volume(json!({"local": {"path": "/x"}}),
                json!({"nodeAffinity": {"required": {"nodeSelectorTerms": []}}})),
            ["spec.nodeAffinity.required.nodeSelectorTerms: Required value: must have at least one node selector term"]
        );
        assert_eq!(
            volume(json!({"hostPath": {"path": "/"}}),
                json!({"persistentVolumeReclaimPolicy": "Recycle"})),
            ["spec.persistentVolumeReclaimPolicy: Forbidden: may not be 'recycle' for a hostPath mount of '/'"]
        );
        assert!(volume(
            json!({"hostPath": {"path": "/srv"}}),
            json!({"persistentVolumeReclaimPolicy": "Recycle"})
        )
        .is_empty());
    }

    #[test]
    fn claims_change_only_their_storage_once_bound_and_never_down() {
        let claim = |storage: &str, phase: &str| {
            json!({"spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": storage}}}, "status": {"phase": phase}})
        };
        assert!(validate_claim_update(&claim("1Gi", "Bound"), &claim("2Gi", "Bound")).is_empty());
        let pending = validate_claim_update(&claim("1Gi", "Pending"), &claim("2Gi", "Pending"));
        assert_eq!(pending[0].field, "spec");
        let smaller = validate_claim_update(&claim("2Gi", "Bound"), &claim("1Gi", "Bound"));
        assert_eq!(
            messages(&smaller),
            ["spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"]
        );
        // Taken back from a failed expansion: less than asked, more than the volume has.
        let mut expanding = claim("5Gi", "Bound");
        expanding["status"]["capacity"] = json!({"storage": "1Gi"});
        assert!(validate_claim_update(&expanding, &claim("2Gi", "Bound")).is_empty());
        assert_eq!(validate_claim_update(&expanding, &claim("1Gi", "Bound")).len(), 1);
        let mut named = claim("1Gi", "Pending");
        named["spec"]["volumeName"] = json!("pv-1");
        assert!(validate_claim_update(&claim("1Gi", "Pending"), &named).is_empty());
        let mut renamed = named.clone();
        renamed["spec"]["volumeName"] = json!("pv-2");
        assert_eq!(validate_claim_update(&named, &renamed)[0].field, "spec");
        // A class given to a claim without one, or moved from the beta annotation; the
        // annotation itself is immutable.
        let mut classed = claim("1Gi", "Bound");
        classed["spec"]["storageClassName"] = json!("manual");
        assert!(validate_claim_update(&claim("1Gi", "Bound"), &classed).is_empty());
        let mut reclassed = classed.clone();
        reclassed["spec"]["storageClassName"] = json!("other");
        assert_eq!(validate_claim_update(&classed, &reclassed)[0].field, "spec");
        let mut annotated = claim("1Gi", "Bound");
        annotated["metadata"] = json!({"annotations": {BETA_CLASS: "gold"}});
        let mut moved = annotated.clone();
        moved["spec"]["storageClassName"] = json!("gold");
        assert!(validate_claim_update(&annotated, &moved).is_empty());
        let mut changed = annotated.clone();
        changed["metadata"]["annotations"][BETA_CLASS] = json!("silver");
        assert_eq!(
            messages(&validate_claim_update(&annotated, &changed)),
            ["metadata.annotations.volume.beta.kubernetes.io/storage-class: Invalid value: \"silver\": field is immutable"]
        );
        let mut errors = Vec::new();
        validate_claim(
            Some(&json!({"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "0"}}})),
            &mut errors,
        );
        assert_eq!(
            messages(&errors),
            ["spec.resources[storage]: Invalid value: \"0\": must be greater than zero"]
        );
    }
}
