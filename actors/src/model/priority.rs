//! Pod priority: the PriorityClasses every cluster has, the limits on the others, and which
//! class is the global default.

use serde_json::{json, Value};

/// The preemption policy of a class (and of a pod) that names none.
pub const PREEMPT_LOWER_PRIORITY: &str = "PreemptLowerPriority";
/// The preemption policies a class may have.
pub const PREEMPTION_POLICIES: [&str; 2] = ["Never", PREEMPT_LOWER_PRIORITY];
/// The highest value of a class whose name does not start with [`SYSTEM_PREFIX`].
pub const HIGHEST_USER_DEFINABLE: i64 = 1_000_000_000;
/// Names with this prefix are the system classes' only.
pub const SYSTEM_PREFIX: &str = "system-";

/// The system classes (name, value, description), created at start as kube-apiserver does.
pub const SYSTEM_CLASSES: [(&str, i64, &str); 2] = [
    (
        "system-node-critical",
        2_000_001_000,
        "Used for system critical pods that must not be moved from their current node.",
    ),
    (
        "system-cluster-critical",
        2_000_000_000,
        "Used for system critical pods that must run in the cluster, but can be moved to \
         another node if necessary.",
    ),
];

/// A system class as it is created.
pub fn system_class(name: &str, value: i64, description: &str) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": name}, "value": value, "description": description,
        "preemptionPolicy": PREEMPT_LOWER_PRIORITY})
}

/// The class pods that name none get: of those marked `globalDefault`, the one of lowest
/// value (there is one but for a race between two creates, as in Kubernetes).
pub fn global_default(classes: &[Value]) -> Option<&Value> {
    classes
        .iter()
        .filter(|class| class["globalDefault"] == true)
        .min_by_key(|class| class["value"].as_i64().unwrap_or(0))
}

/// A class's value and preemption policy.
pub fn value_and_policy(class: &Value) -> (i64, &str) {
    let policy = class["preemptionPolicy"].as_str().unwrap_or(PREEMPT_LOWER_PRIORITY);
    (class["value"].as_i64().unwrap_or(0), policy)
}
