//! The node lifecycle controller: a node whose agent stops reporting is no longer Ready, as
//! Kubernetes' controller has it. A node is heard from when its Lease in `kube-node-lease` is
//! renewed or its Ready condition's heartbeat moves; one not heard from for the grace period
//! (40 s, Kubernetes' default) gets its conditions set to `Unknown` ("Kubelet stopped posting
//! node status.") and the `node.kubernetes.io/unreachable` NoSchedule taint, so the scheduler
//! places nothing more there. When its agent reports again, the agent sets Ready back and the
//! taint goes. (Pods are not evicted from such a node: there is no NoExecute eviction yet.)

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use serde_json::{json, Value};

use crate::client::informer::{self, Feed, Scope};
use crate::client::{object_name, ApiClient};
use crate::model::{json, resources, ResourceType};
use crate::watch::EventType;

/// How long a node may go unheard from before it is not Ready (Kubernetes'
/// `--node-monitor-grace-period`).
pub const GRACE_PERIOD: Duration = Duration::from_secs(40);
/// How often nodes are looked at (Kubernetes' `--node-monitor-period`).
const MONITOR_PERIOD: Duration = Duration::from_secs(5);

const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
const LEASE_NAMESPACE: &str = "kube-node-lease";
/// The conditions an agent reports, set to Unknown when it goes silent.
const CONDITIONS: &[&str] = &["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

fn nodes() -> &'static ResourceType {
    resources::find("", "v1", "nodes").expect("served")
}

fn leases() -> &'static ResourceType {
    resources::find("coordination.k8s.io", "v1", "leases").expect("served")
}

/// When a node was last heard from, and by what.
struct Heard {
    at: Instant,
    lease_renewed: Option<Value>,
    heartbeat: Option<Value>,
}

/// The node lifecycle controller actor.
pub struct NodeLifecycleController {
    client: Arc<dyn ApiClient>,
    grace: Duration,
    nodes: BTreeMap<String, Value>,
    heard: HashMap<String, Heard>,
}

/// A feed of nodes.
#[derive(Message)]
#[rtype(result = "()")]
struct Nodes(Feed);

/// A feed of the node leases.
#[derive(Message)]
#[rtype(result = "()")]
struct Leases(Feed);

/// Stops the controller (its list-watches end with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopNodeLifecycleController;

impl NodeLifecycleController {
    /// A controller that takes nodes unheard from for `grace` as unreachable.
    pub fn new(client: Arc<dyn ApiClient>, grace: Duration) -> Self {
        Self { client, grace, nodes: BTreeMap::new(), heard: HashMap::new() }
    }

    /// Notes what a node or its lease says now; a change is news from its agent.
    fn hear(&mut self, name: &str, lease_renewed: Option<Value>, heartbeat: Option<Value>) {
        let heard = self.heard.entry(name.to_string()).or_insert_with(|| Heard {
            at: Instant::now(),
            lease_renewed: None,
            heartbeat: None,
        });
        let mut news = false;
        if let Some(renewed) = lease_renewed.filter(|r| heard.lease_renewed.as_ref() != Some(r)) {
            heard.lease_renewed = Some(renewed);
            news = true;
        }
        if let Some(beat) = heartbeat.filter(|b| heard.heartbeat.as_ref() != Some(b)) {
            heard.heartbeat = Some(beat);
            news = true;
        }
        if news {
            heard.at = Instant::now();
        }
    }

    /// Marks the nodes gone silent, and clears the taint of those back.
    fn monitor(&mut self, ctx: &mut Context<Self>) {
        for (name, node) in &self.nodes {
            let silent = self.heard.get(name).is_some_and(|h| h.at.elapsed() > self.grace);
            let ready = condition_status(node, "Ready");
            let tainted = taints(node).iter().any(|t| t["key"] == UNREACHABLE);
            let update = if silent && ready.as_deref() != Some("Unknown") {
                Some(unknown_status(node))
            } else {
                None
            };
            let retaint = match (ready.as_deref() == Some("Unknown"), tainted) {
                (true, false) => Some(with_taint(node, true)),
                (false, true) => Some(with_taint(node, false)),
                _ => None,
            };
            let client = self.client.clone();
            let name = name.clone();
            ctx.spawn(
                async move {
                    // Conflicts with the agent's own writes: looked at again next round.
                    if let Some(node) = update {
                        if let Err(error) = client.update_status(nodes(), "", node).await {
                            tracing::debug!(%name, %error, "marking a silent node");
                        }
                    } else if let Some(node) = retaint {
                        if let Err(error) = client.update(nodes(), "", node).await {
                            tracing::debug!(%name, %error, "tainting a node");
                        }
                    }
                }
                .into_actor(self),
            );
        }
    }
}

fn conditions(node: &Value) -> &[Value] {
    json::at(node, "/status/conditions").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

fn condition_status(node: &Value, kind: &str) -> Option<String> {
    let condition = conditions(node).iter().find(|c| c["type"] == kind)?;
    condition["status"].as_str().map(str::to_string)
}

fn taints(node: &Value) -> &[Value] {
    json::at(node, "/spec/taints").and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// The node with its agent's conditions Unknown, as Kubernetes writes them.
fn unknown_status(node: &Value) -> Value {
    let now = crate::model::now();
    let mut node = node.clone();
    let mut conditions: Vec<Value> = conditions(&node).to_vec();
    for kind in CONDITIONS {
        let unknown = json!({"type": kind, "status": "Unknown", "reason": "NodeStatusUnknown",
            "message": "Kubelet stopped posting node status.", "lastTransitionTime": now});
        match conditions.iter_mut().find(|c| c["type"] == *kind) {
            Some(condition) => {
                let heartbeat = condition.get("lastHeartbeatTime").cloned();
                *condition = unknown;
                if let Some(heartbeat) = heartbeat {
                    condition["lastHeartbeatTime"] = heartbeat;
                }
            }
            None => conditions.push(unknown),
        }
    }
    node["status"]["conditions"] = Value::Array(conditions);
    node
}

/// The node with the unreachable taint added or removed.
fn with_taint(node: &Value, tainted: bool) -> Value {
    let mut node = node.clone();
    let mut taints: Vec<Value> =
        taints(&node).iter().filter(|t| t["key"] != UNREACHABLE).cloned().collect();
    if tainted {
        taints.push(json!({"key": UNREACHABLE, "effect": "NoSchedule",
            "timeAdded": crate::model::now()}));
    }
    if taints.is_empty() {
        if let Some(spec) = node.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("taints");
        }
    } else {
        node["spec"]["taints"] = Value::Array(taints);
    }
    node
}

fn heartbeat(node: &Value) -> Option<Value> {
    let ready = conditions(node).iter().find(|c| c["type"] == "Ready")?;
    ready.get("lastHeartbeatTime").cloned()
}

impl Actor for NodeLifecycleController {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let addr = ctx.address();
        let client = self.client.clone();
        actix::spawn(informer::list_watch(client, nodes(), Scope::default(), move |feed| {
            addr.do_send(Nodes(feed));
            addr.connected()
        }));
        let addr = ctx.address();
        let client = self.client.clone();
        let scope = Scope::fields(format!("metadata.namespace={LEASE_NAMESPACE}"));
        actix::spawn(informer::list_watch(client, leases(), scope, move |feed| {
            addr.do_send(Leases(feed));
            addr.connected()
        }));
        let period = MONITOR_PERIOD.min(self.grace / 2).max(Duration::from_millis(50));
        ctx.run_interval(period, |controller, ctx| controller.monitor(ctx));
    }
}

impl Handler<Nodes> for NodeLifecycleController {
    type Result = ();

    fn handle(&mut self, Nodes(feed): Nodes, _: &mut Context<Self>) {
        let changed = match feed {
            Feed::Listed(items) => {
                self.nodes = items.into_iter().map(|n| (object_name(&n).to_string(), n)).collect();
                self.heard.retain(|name, _| self.nodes.contains_key(name));
                self.nodes.values().cloned().collect()
            }
            Feed::Changed(EventType::Deleted, node) => {
                self.nodes.remove(object_name(&node));
                self.heard.remove(object_name(&node));
                Vec::new()
            }
            Feed::Changed(_, node) => {
                self.nodes.insert(object_name(&node).to_string(), node.clone());
                vec![node]
            }
            Feed::Unavailable(_) => Vec::new(),
        };
        for node in changed {
            self.hear(object_name(&node), None, heartbeat(&node));
        }
    }
}

impl Handler<Leases> for NodeLifecycleController {
    type Result = ();

    fn handle(&mut self, Leases(feed): Leases, _: &mut Context<Self>) {
        let leases = match feed {
            Feed::Listed(items) => items,
            Feed::Changed(EventType::Deleted, _) | Feed::Unavailable(_) => Vec::new(),
            Feed::Changed(_, lease) => vec![lease],
        };
        for lease in leases {
            let renewed = json::at(&lease, "/spec/renewTime").cloned();
            self.hear(object_name(&lease), renewed, None);
        }
    }
}

impl Handler<StopNodeLifecycleController> for NodeLifecycleController {
    type Result = ();

    fn handle(&mut self, _: StopNodeLifecycleController, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;

    use super::*;
    use crate::client::ClientEvent;
    use crate::core::WatchOptions;
    use crate::testing::{core, eventually};

    #[actix::test]
    async fn a_silent_node_is_not_ready_and_tainted_until_it_reports_again() {
        let core = core().await;
        let node = json!({"metadata": {"name": "far"}, "status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady",
                "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
        ApiClient::create(&core, nodes(), "", node).await.unwrap();
        let _controller =
            NodeLifecycleController::new(Arc::new(core.clone()), Duration::from_millis(300))
                .start();
        let get = || async { ApiClient::get(&core, nodes(), "", "far").await.unwrap() };
        let silent = eventually("the node unreachable", || async {
            let node = get().await;
            let tainted = taints(&node).iter().any(|t| t["key"] == UNREACHABLE);
            (tainted && condition_status(&node, "Ready").as_deref() == Some("Unknown"))
                .then_some(node)
        })
        .await;
        let ready = conditions(&silent).iter().find(|c| c["type"] == "Ready").unwrap().clone();
        assert_eq!(ready["reason"], "NodeStatusUnknown");
        assert_eq!(ready["message"], "Kubelet stopped posting node status.");
        assert_eq!(ready["lastHeartbeatTime"], "2026-01-01T00:00:00Z");
        assert_eq!(condition_status(&silent, "MemoryPressure").as_deref(), Some("Unknown"));

        // Its agent reports again: Ready, and the taint goes (seen in the node's changes: it
        // goes silent again right after).
        let mut back = silent.clone();
        back["status"]["conditions"] = json!([{"type": "Ready", "status": "True",
            "reason": "KubeletReady", "lastHeartbeatTime": crate::model::now()}]);
        let back = ApiClient::update_status(&core, nodes(), "", back).await.unwrap();
        let from = back["metadata"]["resourceVersion"].as_str().unwrap().to_string();
        let options = WatchOptions { resource_version: Some(from), ..WatchOptions::default() };
        let mut changes = ApiClient::watch(&core, nodes(), None, &options).await.unwrap();
        let untainted = tokio::time::timeout(Duration::from_secs(30), async {
            while let Some(change) = changes.next().await {
                if let ClientEvent::Object(_, node) = change {
                    if taints(&node).is_empty() {
                        return node;
                    }
                }
            }
            panic!("the watch ended")
        })
        .await
        .unwrap();
        assert_eq!(condition_status(&untainted, "Ready").as_deref(), Some("True"));
    }
}
