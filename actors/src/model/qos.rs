//! A pod's quality-of-service class, from its containers' cpu and memory requests and limits:
//! what the API server writes into `status.qosClass` and quota scopes select pods by.

use serde_json::Value;

use super::quantity;

/// The pod's quality of service, as Kubernetes' `GetPodQOS` decides it from the cpu and memory
/// of its containers and init containers (after a limit without a request requested it):
/// `Guaranteed` when every container limits both and the pod's requests equal its limits,
/// `BestEffort` when nothing is requested or limited, `Burstable` otherwise. Zero and
/// unreadable quantities count as unset (validation rejects the unreadable ones).
pub fn qos_class(spec: &Value) -> &'static str {
    const COMPUTE: [&str; 2] = ["cpu", "memory"];
    let amount = |list: Option<&Value>, name: &str| -> i64 {
        let text: std::borrow::Cow<'_, str> = match list.and_then(|l| l.get(name)) {
            Some(Value::String(text)) => text.into(),
            Some(number @ Value::Number(_)) => number.to_string().into(),
            _ => return 0,
        };
        let parsed =
            if name == "cpu" { quantity::milli_value(&text) } else { quantity::value(&text) };
        parsed.unwrap_or(0).max(0)
    };
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
