//! The RuntimeClass admission plugin, as Kubernetes enables it by default, for a cluster with
//! no RuntimeClass: kplane serves none (its node agents have one way of running a container),
//! so a pod created naming one, or naming an overhead that only a RuntimeClass may set, is
//! refused as Kubernetes refuses it when the class does not exist.

use serde_json::Value;

use crate::model::json;

/// Why `pod` may not be created for the class it names, in the plugin's words (its mutating
/// step, before validation); `None` when it names none.
pub(crate) fn class_refusal(pod: &Value) -> Option<String> {
    let class = json::at(pod, "/spec/runtimeClassName").and_then(Value::as_str)?;
    Some(format!("pod rejected: RuntimeClass {class:?} not found"))
}

/// Why `pod` may not be created for the overhead it names without a class (the plugin's
/// validating step, after PodSecurity's); `None` when it names none.
pub(crate) fn overhead_refusal(pod: &Value) -> Option<String> {
    let overhead = json::at(pod, "/spec/overhead").filter(|o| !o.is_null());
    overhead.map(|_| {
        "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead".into()
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_pod_may_name_no_runtime_class_and_no_overhead() {
        let plain = json!({"spec": {"containers": []}});
        assert_eq!((class_refusal(&plain), overhead_refusal(&plain)), (None, None));
        let named = json!({"spec": {"runtimeClassName": "gvisor", "overhead": {"cpu": "1"}}});
        let refused = class_refusal(&named).unwrap();
        assert_eq!(refused, "pod rejected: RuntimeClass \"gvisor\" not found");
        let overhead = json!({"spec": {"overhead": {"cpu": "100m"}}});
        assert_eq!(class_refusal(&overhead), None);
        assert!(overhead_refusal(&overhead)
            .unwrap()
            .ends_with("without corresponding RuntimeClass defined Overhead"));
    }
}
