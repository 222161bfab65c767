//! PodDisruptionBudgets' arithmetic, shared by their validation, the disruption controller and
//! the pods' `eviction` subresource: amounts given as a count or a percentage, and the healthy
//! pods a budget needs.

use serde_json::Value;

use super::{json, LabelSelector};

/// `minAvailable` or `maxUnavailable`: a number of pods, or a percentage of the pods expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOrPercent {
    Count(i64),
    Percent(i64),
}

impl IntOrPercent {
    /// Reads an int-or-string field; `Err` says why it is not one, as Kubernetes' validation
    /// words it.
    pub fn of(value: &Value) -> Result<Self, &'static str> {
        const NOT_ONE: &str = "must be an integer or percentage (e.g '5%')";
        match value {
            Value::Number(n) => n.as_i64().map(IntOrPercent::Count).ok_or(NOT_ONE),
            Value::String(s) => s
                .strip_suffix('%')
                .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|digits| digits.parse().ok())
                .map(IntOrPercent::Percent)
                .ok_or(NOT_ONE),
            _ => Err(NOT_ONE),
        }
    }

    /// The number of pods it means out of `total`: a percentage rounds up or down as asked
    /// (Kubernetes' `GetScaledValueFromIntOrPercent`).
    pub fn scaled(self, total: i64, round_up: bool) -> i64 {
        match self {
            IntOrPercent::Count(n) => n,
            IntOrPercent::Percent(p) if round_up => (p * total + 99) / 100,
            IntOrPercent::Percent(p) => p * total / 100,
        }
    }
}

/// A budget's pod selector: none when it has none, or one validation would have refused (it
/// selects no pods then).
pub fn pod_selector(budget: &Value) -> Option<LabelSelector> {
    json::at(budget, "/spec/selector").and_then(|s| LabelSelector::from_object(s).ok())
}

/// What a budget allows, worked out from its pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Budget {
    /// The pods its selector's controllers want (or, with an integer `minAvailable`, the pods
    /// it selects).
    pub expected_pods: i64,
    /// The healthy pods it must keep.
    pub desired_healthy: i64,
    /// The pods now healthy: ready, not being deleted, not just evicted.
    pub current_healthy: i64,
}

impl Budget {
    /// How many more pods may be disrupted now: none unless some are expected and more are
    /// healthy than desired.
    pub fn disruptions_allowed(&self) -> i64 {
        let allowed = self.current_healthy - self.desired_healthy;
        if self.expected_pods <= 0 || allowed <= 0 {
            0
        } else {
            allowed
        }
    }

    /// Whether a budget's `spec` counts the pods its pods' controllers want (a
    /// `maxUnavailable`, or a `minAvailable` percentage), as Kubernetes' controller does,
    /// rather than the pods it selects.
    pub fn needs_controllers(spec: &Value) -> bool {
        spec.get("maxUnavailable").is_some()
            || spec.get("minAvailable").is_some_and(|min| matches!(min, Value::String(_)))
    }

    /// The expected and desired counts of a budget's `spec` for `selected` pods, which their
    /// controllers want `wanted` of (asked for only when it [needs
    /// them](Budget::needs_controllers)).
    pub fn of_spec(
        spec: &Value,
        selected: i64,
        wanted: impl FnOnce() -> Result<i64, String>,
    ) -> Result<(i64, i64), String> {
        let amount = |field: &str| spec.get(field).map(IntOrPercent::of).transpose();
        if let Some(max_unavailable) = amount("maxUnavailable")? {
            let expected = wanted()?;
            let unavailable = max_unavailable.scaled(expected, true);
            return Ok((expected, (expected - unavailable).max(0)));
        }
        match amount("minAvailable")? {
            Some(IntOrPercent::Count(min)) => Ok((selected, min)),
            Some(percent) => {
                let expected = wanted()?;
                Ok((expected, percent.scaled(expected, true)))
            }
            None => Ok((0, 0)),
        }
    }
}

/// Sets a budget's `DisruptionAllowed` condition (a `metav1.Condition`) as its `status` says:
/// True `SufficientPods` while disruptions are allowed, else False `InsufficientPods`; False
/// `SyncFailed` with the message of a `failure` to work it out. The transition time moves only
/// when the status does.
pub fn set_allowed_condition(status: &mut serde_json::Map<String, Value>, failure: Option<&str>) {
    let allowed = status.get("disruptionsAllowed").and_then(Value::as_i64).unwrap_or(0) > 0;
    let (state, reason, message) = match failure {
        Some(message) => ("False", "SyncFailed", message),
        None if allowed => ("True", "SufficientPods", ""),
        None => ("False", "InsufficientPods", ""),
    };
    let observed = status.get("observedGeneration").cloned().unwrap_or(Value::from(0));
    let condition = serde_json::json!({"type": "DisruptionAllowed", "status": state,
        "reason": reason, "message": message, "observedGeneration": observed});
    super::put_condition(status, condition);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn counts_and_percentages() {
        assert_eq!(IntOrPercent::of(&json!(3)), Ok(IntOrPercent::Count(3)));
        assert_eq!(IntOrPercent::of(&json!("50%")), Ok(IntOrPercent::Percent(50)));
        for bad in [json!("50"), json!("%"), json!("5.5%"), json!(true), json!(1.5)] {
            assert!(IntOrPercent::of(&bad).is_err(), "{bad}");
        }
        assert_eq!(IntOrPercent::Percent(50).scaled(3, true), 2);
        assert_eq!(IntOrPercent::Percent(50).scaled(3, false), 1);
        assert_eq!(IntOrPercent::Count(2).scaled(10, true), 2);
    }

    #[test]
    fn budgets_as_kubernetes_works_them_out() {
        let no_controllers = || Err("no controllers".to_string());
        let of =
            |spec: Value, selected, wanted: i64| Budget::of_spec(&spec, selected, || Ok(wanted));
        assert_eq!(Budget::of_spec(&json!({"minAvailable": 2}), 3, no_controllers), Ok((3, 2)));
        assert_eq!(of(json!({"minAvailable": "50%"}), 3, 5), Ok((5, 3)));
        assert_eq!(of(json!({"maxUnavailable": 1}), 3, 4), Ok((4, 3)));
        assert_eq!(of(json!({"maxUnavailable": "10%"}), 3, 4), Ok((4, 3)));
        assert_eq!(of(json!({"maxUnavailable": 9}), 3, 4), Ok((4, 0)));
        assert_eq!(of(json!({}), 3, 4), Ok((0, 0)));
        assert!(Budget::of_spec(&json!({"maxUnavailable": 1}), 3, no_controllers).is_err());
        assert!(Budget::needs_controllers(&json!({"minAvailable": "50%"})));
        assert!(!Budget::needs_controllers(&json!({"minAvailable": 2})));
        let budget = Budget { expected_pods: 3, desired_healthy: 2, current_healthy: 3 };
        assert_eq!(budget.disruptions_allowed(), 1);
        assert_eq!(Budget { current_healthy: 1, ..budget }.disruptions_allowed(), 0);
        assert_eq!(Budget { expected_pods: 0, ..budget }.disruptions_allowed(), 0);
    }
}
