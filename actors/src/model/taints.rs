//! Node taints and pod tolerations, as the scheduler, the node lifecycle controller, the taint
//! eviction controller and the DefaultTolerationSeconds admission plugin read them, and the
//! taint keys Kubernetes' controllers put on nodes.

use std::time::Duration;

use k8s_openapi::api::core::v1 as api;
use serde_json::{json, Value};

use super::json;

/// A node whose Ready condition is False (NoSchedule; NoExecute evicts).
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
/// A node whose Ready condition is Unknown: its agent stopped reporting.
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// A node whose `spec.unschedulable` is set (`kubectl cordon`).
pub const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
/// A node under memory pressure.
pub const MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
/// A node under disk pressure.
pub const DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
/// A node short of process ids.
pub const PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
/// A node whose network is not configured.
pub const NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";

/// The TaintNodesByCondition admission plugin, as Kubernetes enables it by default: a node is
/// created with the `not-ready` NoSchedule taint (unless it has one of that key and effect),
/// so that no pod is scheduled to it before the node lifecycle controller has seen it Ready
/// and taken the taint off.
pub fn add_not_ready_taint(node: &mut Value) {
    let Some(spec) = node.as_object_mut().map(|n| n.entry("spec").or_insert_with(|| json!({})))
    else {
        return;
    };
    let Some(spec) = spec.as_object_mut() else { return };
    let Some(taints) = spec.entry("taints").or_insert_with(|| json!([])).as_array_mut() else {
        return; // validation refuses it
    };
    let text =
        |taint: &Value, field: &str| taint.get(field).and_then(Value::as_str).map(String::from);
    let tainted = taints.iter().any(|t| {
        text(t, "key").as_deref() == Some(NOT_READY)
            && text(t, "effect").as_deref() == Some("NoSchedule")
    });
    if !tainted {
        taints.push(json!({"key": NOT_READY, "effect": "NoSchedule"}));
    }
}

/// The effect of a taint; taints with other effects are ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaintEffect {
    /// New pods that do not tolerate the taint are not scheduled on the node.
    NoSchedule,
    /// The scheduler avoids the node for pods that do not tolerate the taint.
    PreferNoSchedule,
    /// Like NoSchedule, and running pods that do not tolerate it are evicted.
    NoExecute,
}

impl TaintEffect {
    /// The effect named `s`, if it is one of the three Kubernetes knows.
    pub fn parse(s: &str) -> Option<TaintEffect> {
        match s {
            "NoSchedule" => Some(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
            "NoExecute" => Some(TaintEffect::NoExecute),
            _ => None,
        }
    }

    /// The API spelling of the effect.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// A node taint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Taint {
    /// The taint key.
    pub key: String,
    /// The taint value ("" when absent).
    pub value: String,
    /// What the taint does.
    pub effect: TaintEffect,
}

/// How a toleration compares the taint value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TolerationOperator {
    /// The values must be equal (the default).
    Equal,
    /// Any value.
    Exists,
}

/// A pod toleration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Toleration {
    /// The taint key tolerated; "" matches every key.
    pub key: String,
    /// How the value is compared.
    pub operator: TolerationOperator,
    /// The value for [`TolerationOperator::Equal`].
    pub value: String,
    /// The effect tolerated; `None` matches every effect.
    pub effect: Option<TaintEffect>,
    /// How long a NoExecute taint is tolerated (`None`: for ever; 0 or less: not at all).
    pub seconds: Option<i64>,
}

impl Toleration {
    /// The toleration as the scheduler uses it; `None` for one that can tolerate no taint
    /// (an unknown operator or effect).
    pub fn new(t: &api::Toleration) -> Option<Toleration> {
        let operator = match t.operator.as_deref().unwrap_or("") {
            "" | "Equal" => TolerationOperator::Equal,
            "Exists" => TolerationOperator::Exists,
            _ => return None,
        };
        let effect = match t.effect.as_deref().unwrap_or("") {
            "" => None,
            other => Some(TaintEffect::parse(other)?),
        };
        Some(Toleration {
            key: t.key.clone().unwrap_or_default(),
            operator,
            value: t.value.clone().unwrap_or_default(),
            effect,
            seconds: t.toleration_seconds,
        })
    }

    /// Whether this toleration tolerates `taint` (Kubernetes' `ToleratesTaint`).
    pub fn tolerates(&self, taint: &Taint) -> bool {
        self.tolerates_parts(&taint.key, &taint.value, taint.effect)
    }

    pub(crate) fn tolerates_parts(&self, key: &str, value: &str, effect: TaintEffect) -> bool {
        if self.effect.is_some_and(|e| e != effect) {
            return false;
        }
        if !self.key.is_empty() && self.key != key {
            return false;
        }
        match self.operator {
            TolerationOperator::Exists => true,
            TolerationOperator::Equal => self.value == value,
        }
    }
}

/// Whether any of `tolerations` tolerates `taint`.
pub fn tolerates(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| t.tolerates(taint))
}

/// How long a pod with `tolerations` may stay on a node with the NoExecute taints `taints`, as
/// Kubernetes' taint eviction controller reckons it: each taint is matched by the first
/// toleration that tolerates it; one untolerated taint, or a matched toleration of 0 seconds
/// or less, is no time at all; otherwise the least of the matched tolerations' seconds. `None`
/// is for ever (no NoExecute taint, or none of the matched tolerations has a limit).
pub fn no_execute_grace(taints: &[Taint], tolerations: &[Toleration]) -> Option<Duration> {
    let mut least: Option<i64> = None;
    for taint in taints.iter().filter(|t| t.effect == TaintEffect::NoExecute) {
        let Some(matched) = tolerations.iter().find(|t| t.tolerates(taint)) else {
            return Some(Duration::ZERO);
        };
        if let Some(seconds) = matched.seconds {
            least = Some(least.map_or(seconds, |l| l.min(seconds)));
        }
    }
    least.map(|seconds| Duration::from_secs(seconds.max(0) as u64))
}

/// The items of the list at `pointer` in `object` that read as `T`, turned into `U`.
fn list_of<T: serde::de::DeserializeOwned, U>(
    object: &Value,
    pointer: &str,
    new: impl Fn(&T) -> Option<U>,
) -> Vec<U> {
    let items = json::at(object, pointer).and_then(Value::as_array);
    let typed = items.into_iter().flatten().filter_map(|t| T::deserialize(t).ok());
    typed.filter_map(|t| new(&t)).collect()
}

impl Toleration {
    /// A pod's tolerations (those that can tolerate a taint).
    pub fn of_pod(pod: &Value) -> Vec<Toleration> {
        list_of(pod, "/spec/tolerations", Toleration::new)
    }
}

impl Taint {
    /// A node's taints (those of a known effect).
    pub fn of_node(node: &Value) -> Vec<Taint> {
        list_of(node, "/spec/taints", Taint::new)
    }

    /// The taint as the scheduler and controllers use it; `None` for an unknown effect.
    pub fn new(t: &api::Taint) -> Option<Taint> {
        Some(Taint {
            key: t.key.clone(),
            value: t.value.clone().unwrap_or_default(),
            effect: TaintEffect::parse(&t.effect)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_node_is_not_ready_for_scheduling_once() {
        let mut bare = json!({"metadata": {"name": "n"}});
        add_not_ready_taint(&mut bare);
        assert_eq!(bare["spec"]["taints"], json!([{"key": NOT_READY, "effect": "NoSchedule"}]));
        let mut tainted = json!({"spec": {"taints": [
            {"key": NOT_READY, "effect": "NoExecute"},
            {"key": NOT_READY, "value": "x", "effect": "NoSchedule"}]}});
        let before = tainted.clone();
        add_not_ready_taint(&mut tainted);
        assert_eq!(tainted, before, "one of that key and effect is there");
    }

    #[test]
    fn toleration_semantics() {
        let taint = Taint { key: "k".into(), value: "v".into(), effect: TaintEffect::NoSchedule };
        let t = |json: serde_json::Value| Toleration::new(&serde_json::from_value(json).unwrap());
        let tolerates_taint = |json| t(json).unwrap().tolerates(&taint);
        assert!(tolerates_taint(json!({"key": "k", "value": "v", "effect": "NoSchedule"})));
        assert!(tolerates_taint(json!({"key": "k", "operator": "Equal", "value": "v"})));
        assert!(!tolerates_taint(json!({"key": "k", "value": "w"})));
        assert!(tolerates_taint(json!({"key": "k", "operator": "Exists"})));
        assert!(tolerates_taint(json!({"operator": "Exists"})));
        assert!(!tolerates_taint(json!({"operator": "Exists", "effect": "NoExecute"})));
        assert!(!tolerates_taint(json!({"key": "other", "operator": "Exists"})));
        assert!(t(json!({"key": "k", "operator": "Bogus"})).is_none());
        assert!(t(json!({"key": "k", "effect": "Bogus"})).is_none());
    }

    #[test]
    fn no_execute_grace_is_the_least_matched_limit() {
        let taint = |key: &str, effect| Taint { key: key.into(), value: String::new(), effect };
        let t = |json: serde_json::Value| {
            Toleration::new(&serde_json::from_value(json).unwrap()).unwrap()
        };
        let unreachable = taint(UNREACHABLE, TaintEffect::NoExecute);
        let not_ready = taint(NOT_READY, TaintEffect::NoExecute);
        let for_300 = t(json!({"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": 300}));
        let for_5 = t(json!({"key": NOT_READY, "operator": "Exists", "tolerationSeconds": 5}));
        let forever = t(json!({"operator": "Exists"}));
        let secs = |s| Some(Duration::from_secs(s));
        assert_eq!(no_execute_grace(&[], &[]), None, "no taint");
        let no_schedule = taint(UNREACHABLE, TaintEffect::NoSchedule);
        assert_eq!(no_execute_grace(&[no_schedule], &[]), None, "only NoExecute counts");
        assert_eq!(
            no_execute_grace(std::slice::from_ref(&unreachable), &[]),
            secs(0),
            "untolerated"
        );
        assert_eq!(
            no_execute_grace(std::slice::from_ref(&unreachable), std::slice::from_ref(&for_300)),
            secs(300)
        );
        let both = [unreachable.clone(), not_ready.clone()];
        assert_eq!(no_execute_grace(&both, &[for_300.clone(), for_5.clone()]), secs(5));
        assert_eq!(
            no_execute_grace(&both, std::slice::from_ref(&for_300)),
            secs(0),
            "one untolerated"
        );
        assert_eq!(no_execute_grace(&both, &[forever.clone(), for_5.clone()]), None);
        assert_eq!(no_execute_grace(&both, &[for_5.clone(), forever]), secs(5), "first match");
        let negative = t(json!({"operator": "Exists", "tolerationSeconds": -3}));
        assert_eq!(no_execute_grace(&[not_ready], &[negative]), secs(0));
    }
}
