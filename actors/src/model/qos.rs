//! A pod's quality-of-service class, from its containers' cpu and memory requests and limits:
//! what the API server writes into `status.qosClass` and quota scopes select pods by, and
//! the `oom_score_adj` the node agent gives each container by it.

use serde_json::Value;

use super::quantity;

/// The pod's quality of service, as Kubernetes' `GetPodQOS` decides it from the cpu and memory
/// of its containers and init containers (after a limit without a request requested it):
/// `Guaranteed` when every container limits both and the pod's requests equal its limits,
/// `BestEffort` when nothing is requested or limited, `Burstable` otherwise. Zero and
/// unreadable quantities count as unset (validation rejects the unreadable ones).
pub fn qos_class(spec: &Value) -> &'static str {
    const COMPUTE: [&str; 2] = ["cpu", "memory"];
    let (mut requests, mut limits) = ([0i64; 2], [0i64; 2]);
    let mut guaranteed = true;
    for list in ["containers", "initContainers"] {
        for c in spec.get(list).and_then(Value::as_array).into_iter().flatten() {
            let resources = c.get("resources");
            let (container_requests, container_limits) = (
                resources.and_then(|r| r.get("requests")),
                resources.and_then(|r| r.get("limits")),
            );
            for (i, name) in COMPUTE.iter().enumerate() {
                let request = amount(container_requests, name);
                let limit = amount(container_limits, name);
                requests[i] = requests[i].saturating_add(request);
                limits[i] = limits[i].saturating_add(limit);
                guaranteed &= limit > 0;
            }
        }
    }
    if requests == [0, 0] && limits == [0, 0] {
        "BestEffort"
    } else if guaranteed && requests == limits {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// The amount of `name` in a list of requests or limits (millicores for `cpu`, else units);
/// 0 when not set, not positive or not a quantity.
fn amount(list: Option<&Value>, name: &str) -> i64 {
    let text: std::borrow::Cow<'_, str> = match list.and_then(|l| l.get(name)) {
        Some(Value::String(text)) => text.into(),
        Some(number @ Value::Number(_)) => number.to_string().into(),
        _ => return 0,
    };
    let parsed = if name == "cpu" { quantity::milli_value(&text) } else { quantity::value(&text) };
    parsed.unwrap_or(0).max(0)
}

/// The OOM score adjustment of a Guaranteed pod's containers (and a node-critical pod's).
const GUARANTEED_OOM_SCORE_ADJ: i64 = -997;
/// That of a BestEffort pod's containers: killed first when the node runs out of memory.
const BEST_EFFORT_OOM_SCORE_ADJ: i64 = 1000;

/// The `oom_score_adj` of `container` of the pod with `spec`, on a node of `memory_capacity`
/// bytes, as the kubelet's `GetContainerOOMScoreAdjust` works it out: -997 for a Guaranteed
/// (or node-critical) pod, 1000 for a BestEffort one; for a Burstable one, 1000 less the
/// thousandths of the node's memory the container requests, kept within 3..=999 (a sidecar's
/// no higher than that of the pod's smallest regular container), so that the kernel kills
/// BestEffort containers first and Guaranteed ones last.
pub fn oom_score_adj(spec: &Value, container: &Value, memory_capacity: u64) -> i64 {
    if spec.get("priorityClassName").and_then(Value::as_str) == Some("system-node-critical") {
        return GUARANTEED_OOM_SCORE_ADJ;
    }
    match qos_class(spec) {
        "Guaranteed" => return GUARANTEED_OOM_SCORE_ADJ,
        "BestEffort" => return BEST_EFFORT_OOM_SCORE_ADJ,
        _ => {}
    }
    let capacity = i64::try_from(memory_capacity).unwrap_or(i64::MAX).max(1);
    let request = |c: &Value| amount(c.pointer("/resources/requests"), "memory");
    let score =
        |request: i64| 1000 - (1000i128 * i128::from(request) / i128::from(capacity)) as i64;
    let mut adjust = score(request(container));
    let sidecar = container.get("restartPolicy").and_then(Value::as_str) == Some("Always");
    if sidecar {
        let regular = spec.get("containers").and_then(Value::as_array).into_iter().flatten();
        let smallest = regular.map(request).min().unwrap_or(0);
        if smallest != 0 {
            adjust = adjust.min(score(smallest));
        }
    }
    if adjust < 1000 + GUARANTEED_OOM_SCORE_ADJ {
        1000 + GUARANTEED_OOM_SCORE_ADJ
    } else if adjust == BEST_EFFORT_OOM_SCORE_ADJ {
        adjust - 1
    } else {
        adjust
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn oom_score_adjustments_follow_the_qos_class_and_the_memory_requested() {
        const GIB: u64 = 1 << 30;
        let container = |requests: Value, limits: Value| json!({"name": "c", "resources": {"requests": requests, "limits": limits}});
        let spec = |c: &Value| json!({"containers": [c]});
        let guaranteed =
            container(json!({"memory": "1Gi", "cpu": "1"}), json!({"memory": "1Gi", "cpu": "1"}));
        assert_eq!(oom_score_adj(&spec(&guaranteed), &guaranteed, 4 * GIB), -997);
        let best_effort = json!({"name": "c"});
        assert_eq!(oom_score_adj(&spec(&best_effort), &best_effort, 4 * GIB), 1000);
        // A quarter of the node's memory: 1000 - 250.
        let burstable = container(json!({"memory": "1Gi"}), json!({}));
        assert_eq!(oom_score_adj(&spec(&burstable), &burstable, 4 * GIB), 750);
        // Kept within 3..=999.
        let huge = container(json!({"memory": "8Gi"}), json!({}));
        assert_eq!(oom_score_adj(&spec(&huge), &huge, 4 * GIB), 3);
        let cpu_only = container(json!({"cpu": "1"}), json!({}));
        assert_eq!(oom_score_adj(&spec(&cpu_only), &cpu_only, 4 * GIB), 999);
        // A sidecar's is no higher than the smallest regular container's.
        let mut sidecar = container(json!({"memory": "512Mi"}), json!({}));
        sidecar["restartPolicy"] = json!("Always");
        let pod = json!({"initContainers": [sidecar.clone()], "containers": [burstable]});
        assert_eq!(oom_score_adj(&pod, &sidecar, 4 * GIB), 750);
        let critical = json!({"priorityClassName": "system-node-critical",
            "containers": [best_effort.clone()]});
        assert_eq!(oom_score_adj(&critical, &best_effort, 4 * GIB), -997);
    }
}
