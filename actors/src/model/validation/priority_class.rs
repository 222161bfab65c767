//! PriorityClasses, as Kubernetes checks them: a `system-` name only for the system classes
//! as they are, a user class's value at most one billion, a known preemption policy; the value
//! and the preemption policy never change.

use serde_json::Value;

use super::FieldError;
use crate::model::priority::{
    HIGHEST_USER_DEFINABLE, PREEMPTION_POLICIES, SYSTEM_CLASSES, SYSTEM_PREFIX,
};

pub(super) fn validate(class: &Value, errors: &mut Vec<FieldError>) {
    let name = class["metadata"]["name"].as_str().unwrap_or("");
    let value = class["value"].as_i64().unwrap_or(0);
    if name.starts_with(SYSTEM_PREFIX) {
        let why = match SYSTEM_CLASSES.iter().find(|(known, ..)| *known == name) {
            None => Some(format!("{name} is not a known system priority class")),
            Some((_, expected, _)) if *expected != value => {
                Some(format!("value of {name} PriorityClass must be {expected}"))
            }
            Some(_) if class["globalDefault"] == true => {
                Some(format!("globalDefault of {name} PriorityClass must be false"))
            }
            Some(_) => None,
        };
        if let Some(why) = why {
            let message = format!(
                "priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system use \
                 only. error: {why}"
            );
            errors.push(FieldError::forbidden("metadata.name", message));
        }
    } else if value > HIGHEST_USER_DEFINABLE {
        let message =
            format!("maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE}");
        errors.push(FieldError::forbidden("value", message));
    }
    if let Some(policy) = class["preemptionPolicy"].as_str() {
        if !PREEMPTION_POLICIES.contains(&policy) {
            errors.push(FieldError::not_supported(
                "preemptionPolicy",
                policy,
                &PREEMPTION_POLICIES,
            ));
        }
    }
}

pub(super) fn validate_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if old["value"] != new["value"] {
        errors.push(FieldError::forbidden("value", "may not be changed in an update."));
    }
    if old["preemptionPolicy"] != new["preemptionPolicy"] {
        let policy = new["preemptionPolicy"].as_str().unwrap_or("");
        errors.push(FieldError::invalid("preemptionPolicy", policy, "field is immutable"));
    }
    errors
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn checked(class: Value) -> Vec<String> {
        let mut errors = Vec::new();
        validate(&class, &mut errors);
        errors.into_iter().map(|e| format!("{}: {}", e.field, e.message)).collect()
    }

    #[test]
    fn system_names_are_reserved_and_user_values_bounded() {
        let class = |name: &str, value: i64| json!({"metadata": {"name": name}, "value": value});
        assert!(checked(class("high", 1_000_000_000)).is_empty());
        assert_eq!(
            checked(class("high", 1_000_000_001)),
            ["value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]
        );
        assert!(checked(class("system-node-critical", 2_000_001_000)).is_empty());
        let wrong = checked(class("system-node-critical", 5));
        assert!(
            wrong[0].ends_with("value of system-node-critical PriorityClass must be 2000001000")
        );
        let unknown = checked(class("system-mine", 5));
        assert!(unknown[0].starts_with("metadata.name: Forbidden: priority class names with"));
        assert!(unknown[0].ends_with("system-mine is not a known system priority class"));
        let mut default = class("system-cluster-critical", 2_000_000_000);
        default["globalDefault"] = json!(true);
        assert!(checked(default)[0].ends_with("must be false"));
        let mut policy = class("p", 1);
        policy["preemptionPolicy"] = json!("Sometimes");
        assert_eq!(checked(policy).len(), 1);
    }

    #[test]
    fn value_and_preemption_policy_are_immutable() {
        let old = json!({"metadata": {"name": "p"}, "value": 1, "preemptionPolicy": "Never"});
        let mut new = old.clone();
        new["description"] = json!("changed");
        assert!(validate_update(&old, &new).is_empty());
        new["value"] = json!(2);
        new["preemptionPolicy"] = json!("PreemptLowerPriority");
        let fields: Vec<String> =
            validate_update(&old, &new).into_iter().map(|e| e.field).collect();
        assert_eq!(fields, ["value", "preemptionPolicy"]);
    }
}
