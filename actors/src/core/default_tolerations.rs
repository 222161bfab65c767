//! The DefaultTolerationSeconds admission plugin, as Kubernetes enables it by default: a pod
//! created without a toleration of the `not-ready` or `unreachable` NoExecute taints gets one
//! for 300 seconds, so that its node's going silent evicts it after five minutes rather than
//! at once (the taint eviction controller reads these).

use std::sync::LazyLock;

use serde_json::{json, Value};

use crate::model::taints::{NOT_READY, UNREACHABLE};

/// How long a pod tolerates its node being not ready or unreachable, unless it says.
const DEFAULT_TOLERATION_SECONDS: i64 = 300;

/// The tolerations added, built once: a create clones them (half the cost of building them).
static DEFAULTS: LazyLock<[(&str, Value); 2]> = LazyLock::new(|| {
    [NOT_READY, UNREACHABLE].map(|key| {
        let toleration = json!({"key": key, "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": DEFAULT_TOLERATION_SECONDS});
        (key, toleration)
    })
});

/// Adds the default tolerations `pod` lacks. They are valid: the core adds them after
/// validation, which they would pass.
pub(crate) fn admit(pod: &mut Value) {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return; // validation names what is missing
    };
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    let Some(tolerations) = tolerations.as_array_mut() else {
        return; // validation refuses it
    };
    // A toleration of the key (or of every key) with the NoExecute effect (or every effect),
    // whatever its operator, value and seconds: Kubernetes' plugin looks no further.
    let tolerates = |key: &str| {
        tolerations.iter().any(|t| {
            let field = |name: &str| t.get(name).and_then(Value::as_str).unwrap_or("");
            let tolerated_key = field("key");
            (tolerated_key.is_empty() || tolerated_key == key)
                && matches!(field("effect"), "" | "NoExecute")
        })
    };
    let missing: [bool; 2] = DEFAULTS.each_ref().map(|(key, _)| !tolerates(key));
    for ((_, toleration), missing) in DEFAULTS.iter().zip(missing) {
        if missing {
            tolerations.push(toleration.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitted(tolerations: Value) -> Value {
        let mut pod = json!({"spec": {"containers": [], "tolerations": tolerations}});
        admit(&mut pod);
        pod["spec"]["tolerations"].clone()
    }

    fn default(key: &str) -> Value {
        json!({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
    }

    #[test]
    fn pods_tolerate_silent_nodes_for_five_minutes_unless_they_say() {
        let mut pod = json!({"spec": {"containers": []}});
        admit(&mut pod);
        assert_eq!(pod["spec"]["tolerations"], json!([default(NOT_READY), default(UNREACHABLE)]));
        let own = json!({"key": UNREACHABLE, "operator": "Exists", "tolerationSeconds": 2});
        assert_eq!(admitted(json!([own])), json!([own, default(NOT_READY)]));
        let everything = json!({"operator": "Exists"});
        assert_eq!(admitted(json!([everything])), json!([everything]));
        let no_execute = json!({"operator": "Exists", "effect": "NoExecute"});
        assert_eq!(admitted(json!([no_execute])), json!([no_execute]));
        // Another effect tolerates nothing here.
        let no_schedule = json!({"key": NOT_READY, "operator": "Exists", "effect": "NoSchedule"});
        let expected = json!([no_schedule, default(NOT_READY), default(UNREACHABLE)]);
        assert_eq!(admitted(json!([no_schedule])), expected);
        // Not an array: left to validation.
        assert_eq!(admitted(json!("x")), json!("x"));
    }
}
