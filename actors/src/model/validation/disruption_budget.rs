//! PodDisruptionBudgets, as Kubernetes checks them on create and update: at most one of
//! `minAvailable` and `maxUnavailable`, each a count or a percentage of at most 100%, a
//! well-formed selector, a known unhealthy pod eviction policy, and counts that are not
//! negative in the status.

use serde_json::Value;

use super::{validate_label_selector, FieldError};
use crate::model::disruption::IntOrPercent;

const EVICTION_POLICIES: [&str; 2] = ["AlwaysAllow", "IfHealthyBudget"];
const STATUS_COUNTS: [&str; 4] =
    ["disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"];

pub(super) fn validate(budget: &Value, errors: &mut Vec<FieldError>) {
    let spec = budget.get("spec").unwrap_or(&Value::Null);
    let (min, max) = (spec.get("minAvailable"), spec.get("maxUnavailable"));
    if min.is_some() && max.is_some() {
        errors.push(FieldError::invalid(
            "spec",
            &spec.to_string(),
            "minAvailable and maxUnavailable cannot be both set",
        ));
    }
    for (field, value) in [("minAvailable", min), ("maxUnavailable", max)] {
        let Some(value) = value else { continue };
        let path = format!("spec.{field}");
        match IntOrPercent::of(value) {
            Err(why) => errors.push(FieldError::invalid(&path, &value.to_string(), why)),
            Ok(IntOrPercent::Count(n)) if n < 0 => errors.push(FieldError::invalid_number(
                &path,
                n,
                "must be greater than or equal to 0",
            )),
            Ok(IntOrPercent::Percent(p)) if p > 100 => errors.push(FieldError::invalid(
                &path,
                &format!("{p}%"),
                "must not be greater than 100%",
            )),
            Ok(_) => {}
        }
    }
    if let Some(selector) = spec.get("selector") {
        validate_label_selector(selector, "spec.selector", errors);
    }
    if let Some(policy) = spec.get("unhealthyPodEvictionPolicy").and_then(Value::as_str) {
        if !EVICTION_POLICIES.contains(&policy) {
            let field = "spec.unhealthyPodEvictionPolicy";
            errors.push(FieldError::not_supported(field, policy, &EVICTION_POLICIES));
        }
    }
    super::validate_conditions(budget.pointer("/status/conditions"), "status.conditions", errors);
    for field in STATUS_COUNTS {
        if let Some(n) = budget.pointer(&format!("/status/{field}")).and_then(Value::as_i64) {
            if n < 0 {
                let path = format!("status.{field}");
                errors.push(FieldError::invalid_number(
                    path,
                    n,
                    "must be greater than or equal to 0",
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    fn errors(budget: serde_json::Value) -> Vec<String> {
        let mut errors = Vec::new();
        super::validate(&budget, &mut errors);
        errors.into_iter().map(|e| format!("{}: {}", e.field, e.message)).collect()
    }

    #[test]
    fn budgets_as_kubernetes_checks_them() {
        assert!(errors(
            json!({"spec": {"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}}})
        )
        .is_empty());
        assert!(errors(json!({"spec": {"maxUnavailable": "100%"}})).is_empty());
        let both = errors(json!({"spec": {"minAvailable": 1, "maxUnavailable": 1}}));
        assert!(
            both[0].ends_with("minAvailable and maxUnavailable cannot be both set"),
            "{both:?}"
        );
        assert_eq!(
            errors(json!({"spec": {"minAvailable": -1}})),
            ["spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"]
        );
        assert_eq!(
            errors(json!({"spec": {"maxUnavailable": "120%"}})),
            ["spec.maxUnavailable: Invalid value: \"120%\": must not be greater than 100%"]
        );
        assert_eq!(errors(json!({"spec": {"minAvailable": "half"}})).len(), 1);
        let policy = errors(json!({"spec": {"unhealthyPodEvictionPolicy": "Never"}}));
        assert!(
            policy[0].starts_with("spec.unhealthyPodEvictionPolicy: Unsupported value"),
            "{policy:?}"
        );
        let selector =
            json!({"spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}});
        assert_eq!(errors(selector).len(), 1);
        assert_eq!(errors(json!({"status": {"expectedPods": -2}})).len(), 1);
    }

    #[test]
    fn status_conditions_are_checked_as_metav1_conditions() {
        let good = json!({"type": "DisruptionAllowed", "status": "True", "reason": "SufficientPods",
            "message": "", "lastTransitionTime": "2026-12-05T00:00:00Z", "observedGeneration": 1});
        assert!(errors(json!({"status": {"conditions": [good]}})).is_empty());
        let bad = json!({"type": "bad type!", "status": "Maybe", "reason": "no spaces",
            "message": "", "lastTransitionTime": "", "observedGeneration": -1});
        let twice = json!({"type": "bad type!", "status": "True", "reason": "",
            "message": "", "lastTransitionTime": "2026-12-05T00:00:00Z"});
        let found = errors(json!({"status": {"conditions": [bad, twice]}}));
        let at = "status.conditions";
        assert!(found[0].starts_with(&format!("{at}[0].type: Invalid value: \"bad type!\"")));
        let expected = [
            format!("{at}[0].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\""),
            format!("{at}[0].observedGeneration: Invalid value: -1: must be greater than or equal to zero"),
            format!("{at}[0].lastTransitionTime: Required value: must be set"),
        ];
        assert_eq!(found[1..4], expected, "{found:?}");
        assert!(found[4].starts_with(&format!(
            "{at}[0].reason: Invalid value: \"no spaces\": a condition reason must start"
        )));
        assert_eq!(found[5], format!("{at}[1].type: Duplicate value: \"bad type!\""));
        assert_eq!(found.last().unwrap(), &format!("{at}[1].reason: Required value: must be set"));
    }
}
