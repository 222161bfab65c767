//! Recording core/v1 Events about pods, as components (the scheduler, node agents) report what
//! they did: `kubectl get events` and `kubectl describe pod` show them.

use serde_json::json;

use super::ApiClient;
use crate::model::resources;

/// The pod an event is about.
#[derive(Debug, Clone)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// `Normal` or `Warning`, as Kubernetes types events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Normal,
    Warning,
}

/// Writes one event; a failure is logged, never returned (events are best effort).
pub async fn record(
    client: &dyn ApiClient,
    pod: &PodRef,
    kind: EventKind,
    reason: &str,
    message: &str,
    component: &str,
) {
    let time = crate::model::now();
    let suffix: u64 = rand::random();
    let event = json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{}.{suffix:016x}", pod.name), "namespace": pod.namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": pod.namespace,
            "name": pod.name, "uid": pod.uid},
        "reason": reason,
        "message": message,
        "type": if kind == EventKind::Normal { "Normal" } else { "Warning" },
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
        "firstTimestamp": time,
        "lastTimestamp": time,
        "count": 1,
    });
    let events = resources::find("", "v1", "events").expect("events are served");
    if let Err(error) = client.create(events, &pod.namespace, event).await {
        tracing::debug!(pod = %pod.name, %error, "recording an event");
    }
}
