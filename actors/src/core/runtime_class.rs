//! The RuntimeClass admission plugin, as Kubernetes enables it by default, for a cluster with
//! no RuntimeClass: kplane serves none (its node agents have one way of running a container),
//! so a pod created naming one, or naming an overhead that only a RuntimeClass may set, is
//! refused as Kubernetes refuses it when the class does not exist.

use serde_json::Value;

use crate::model::json;

/// Why `pod` may not be created, in the plugin's words; `None` when it may.
pub(crate) fn refusal(pod: &Value) -> Option<String> {
    let class = json::at(pod, "/spec/runtimeClassName").and_then(Value::as_str);
    if let Some(class) = class {
        return Some(format!("pod rejected: RuntimeClass {class:?} not found"));
    }
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
        assert_eq!(refusal(&json!({"spec": {"containers": []}})), None);
        let named = json!({"spec": {"runtimeClassName": "gvisor", "overhead": {"cpu": "1"}}});
        assert_eq!(refusal(&named).unwrap(), "pod rejected: RuntimeClass \"gvisor\" not found");
        let overhead = json!({"spec": {"overhead": {"cpu": "100m"}}});
        assert!(refusal(&overhead)
            .unwrap()
            .ends_with("without corresponding RuntimeClass defined Overhead"));
    }
}
