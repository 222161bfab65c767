//! The Priority admission plugin: a new pod's `priority` and `preemptionPolicy` come from its
//! PriorityClass, or from the global default class when it names none (0 and
//! `PreemptLowerPriority` without one), never from the pod itself; and at most one class is
//! the global default.

use serde_json::{json, Value};

use crate::model::priority::{global_default, value_and_policy, PREEMPT_LOWER_PRIORITY};

/// Gives a new pod its priority from `classes`; why it is forbidden otherwise.
pub(crate) fn admit_pod(classes: &[Value], pod: &mut Value) -> Result<(), String> {
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let named = spec.get("priorityClassName").and_then(Value::as_str).filter(|n| !n.is_empty());
    let (default_name, priority, policy) = match named {
        Some(name) => {
            let class = classes
                .iter()
                .find(|class| class["metadata"]["name"] == name)
                .ok_or_else(|| format!("no PriorityClass with name {name} was found"))?;
            let (priority, policy) = value_and_policy(class);
            (None, priority, policy.to_string())
        }
        None => match global_default(classes) {
            Some(class) => {
                let (priority, policy) = value_and_policy(class);
                (class["metadata"]["name"].as_str(), priority, policy.to_string())
            }
            None => (None, 0, PREEMPT_LOWER_PRIORITY.to_string()),
        },
    };
    if let Some(given) = spec.get("priority").filter(|p| !p.is_null()) {
        if given.as_i64() != Some(priority) {
            return Err(format!(
                "the integer value of priority ({given}) must not be provided in pod spec; \
                 priority admission controller computed {priority} from the given \
                 PriorityClass name"
            ));
        }
    }
    if let Some(given) = spec.get("preemptionPolicy").and_then(Value::as_str) {
        if given != policy {
            return Err(format!(
                "the string value of PreemptionPolicy ({given}) must not be provided in pod \
                 spec; priority admission controller computed {policy} from the given \
                 PriorityClass name"
            ));
        }
    }
    if let Some(name) = default_name {
        spec.insert("priorityClassName".into(), json!(name));
    }
    spec.insert("priority".into(), json!(priority));
    spec.insert("preemptionPolicy".into(), json!(policy));
    Ok(())
}

/// An updated pod keeps the priority it was admitted with, when the update leaves it out (a
/// change is refused by the pod's validation).
pub(crate) fn keep_on_update(old: &Value, new: &mut Value) {
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else { return };
    for field in ["priority", "preemptionPolicy"] {
        if let Some(kept) = old["spec"].get(field) {
            spec.entry(field).or_insert_with(|| kept.clone());
        }
    }
}

/// A PriorityClass written (created, or updated): only one class may be the global default.
pub(crate) fn admit_class(classes: &[Value], class: &Value) -> Result<(), String> {
    if class["globalDefault"] != true {
        return Ok(());
    }
    match global_default(classes) {
        Some(default) if default["metadata"]["name"] != class["metadata"]["name"] => {
            let name = default["metadata"]["name"].as_str().unwrap_or("");
            Err(format!(
                "PriorityClass {name} is already marked as default. Only one default can exist"
            ))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, value: i64, default: bool, policy: &str) -> Value {
        json!({"metadata": {"name": name}, "value": value, "globalDefault": default,
            "preemptionPolicy": policy})
    }

    fn admitted(classes: &[Value], spec: Value) -> Result<Value, String> {
        let mut pod = json!({"spec": spec});
        admit_pod(classes, &mut pod).map(|()| pod["spec"].clone())
    }

    #[test]
    fn a_pod_gets_its_class_s_priority_or_the_default_s() {
        let high = class("high", 1000, false, "Never");
        let spec =
            admitted(std::slice::from_ref(&high), json!({"priorityClassName": "high"})).unwrap();
        assert_eq!((&spec["priority"], &spec["preemptionPolicy"]), (&json!(1000), &json!("Never")));
        let spec = admitted(std::slice::from_ref(&high), json!({})).unwrap();
        assert_eq!(spec, json!({"priority": 0, "preemptionPolicy": "PreemptLowerPriority"}));
        let low = class("low", -5, true, PREEMPT_LOWER_PRIORITY);
        let spec = admitted(&[high.clone(), low], json!({})).unwrap();
        assert_eq!((&spec["priorityClassName"], &spec["priority"]), (&json!("low"), &json!(-5)));
        // Given the value it would get: admitted.
        assert!(admitted(
            std::slice::from_ref(&high),
            json!({"priorityClassName": "high", "priority": 1000})
        )
        .is_ok());
    }

    #[test]
    fn a_missing_class_or_a_pod_s_own_priority_is_forbidden() {
        let high = class("high", 1000, false, PREEMPT_LOWER_PRIORITY);
        let missing = admitted(&[], json!({"priorityClassName": "nope"})).unwrap_err();
        assert_eq!(missing, "no PriorityClass with name nope was found");
        let own = admitted(
            std::slice::from_ref(&high),
            json!({"priorityClassName": "high", "priority": 7}),
        );
        assert!(own.unwrap_err().starts_with("the integer value of priority (7) must not be"));
        let policy = admitted(
            &[high],
            json!({"priorityClassName": "high",
            "preemptionPolicy": "Never"}),
        );
        assert!(policy.unwrap_err().contains("computed PreemptLowerPriority"));
    }

    #[test]
    fn only_one_class_is_the_global_default() {
        let first = class("first", 1, true, PREEMPT_LOWER_PRIORITY);
        assert!(admit_class(&[], &first).is_ok());
        assert!(admit_class(std::slice::from_ref(&first), &first).is_ok(), "itself, updated");
        let second = class("second", 2, true, PREEMPT_LOWER_PRIORITY);
        let refused = admit_class(std::slice::from_ref(&first), &second).unwrap_err();
        assert_eq!(
            refused,
            "PriorityClass first is already marked as default. Only one default can exist"
        );
        assert!(admit_class(&[first], &class("third", 3, false, "Never")).is_ok());
    }

    #[test]
    fn an_update_keeps_the_admitted_priority() {
        let old = json!({"spec": {"priority": 5, "preemptionPolicy": "Never"}});
        let mut new = json!({"spec": {"containers": []}});
        keep_on_update(&old, &mut new);
        assert_eq!(new["spec"]["priority"], 5);
        assert_eq!(new["spec"]["preemptionPolicy"], "Never");
    }
}
