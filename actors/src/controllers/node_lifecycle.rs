//! The node lifecycle controller: a node whose agent stops reporting is no longer Ready, and
//! its pods leave it, as Kubernetes' controller has it. A node is heard from when its Lease in
//! `kube-node-lease` is renewed or its Ready condition's heartbeat moves; one not heard from
//! for the grace period (50 s, Kubernetes' default since 1.32) gets its conditions set to `Unknown`
//! ("Kubelet stopped posting node status.") and its pods' Ready condition set to False (so
//! services stop sending them traffic).
//!
//! It taints nodes by their conditions, as Kubernetes does: NoSchedule taints for a Ready
//! condition False (`not-ready`) or Unknown (`unreachable`), for memory, disk and pid pressure,
//! an unavailable network and `spec.unschedulable`, so the scheduler places nothing more there;
//! and the `not-ready` or `unreachable` NoExecute taint, so the taint eviction controller moves
//! the pods out once they stop tolerating it. NoExecute taints are added at most
//! `eviction_rate` nodes a second per zone (nodes grouped by their zone and region labels);
//! none in a zone of at most `large_cluster_size` nodes where `unhealthy_zone_threshold` of
//! them (and more than two) are not Ready; and when no node of any zone is Ready, the
//! controller takes it for its own trouble reaching them and removes them. When a node's
//! agent reports again, the agent sets Ready back and the taints go.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use serde_json::{json, Value};

use crate::client::events::{self, EventKind, ObjectRef};
use crate::client::informer::{self, Feed, Scope};
use crate::client::{object_name, object_uid, ApiClient};
use crate::core::ListOptions;
use crate::model::json;
use crate::model::resources::{self, leases, NODE_LEASE_NAMESPACE};
use crate::model::taints::{
    DISK_PRESSURE, MEMORY_PRESSURE, NETWORK_UNAVAILABLE, NOT_READY, PID_PRESSURE, UNREACHABLE,
    UNSCHEDULABLE,
};
use crate::watch::EventType;

/// The conditions an agent reports, set to Unknown when it goes silent.
const CONDITIONS: &[&str] = &["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];
/// The NoSchedule taint a condition other than Ready in the status True puts on its node.
const CONDITION_TAINTS: &[(&str, &str)] = &[
    ("MemoryPressure", MEMORY_PRESSURE),
    ("DiskPressure", DISK_PRESSURE),
    ("PIDPressure", PID_PRESSURE),
    ("NetworkUnavailable", NETWORK_UNAVAILABLE),
];
/// Every NoSchedule taint key this controller manages.
const NO_SCHEDULE_KEYS: &[&str] = &[
    NOT_READY,
    UNREACHABLE,
    MEMORY_PRESSURE,
    DISK_PRESSURE,
    PID_PRESSURE,
    NETWORK_UNAVAILABLE,
    UNSCHEDULABLE,
];
const ZONE_LABELS: [[&str; 2]; 2] = [
    ["failure-domain.beta.kubernetes.io/region", "topology.kubernetes.io/region"],
    ["failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/zone"],
];
const COMPONENT: &str = "node-controller";

/// How the controller judges nodes and paces evictions (Kubernetes' flags of these names).
#[derive(Debug, Clone)]
pub struct NodeLifecycleConfig {
    /// How long a node may go unheard from before it is not Ready
    /// (`--node-monitor-grace-period`).
    pub grace_period: Duration,
    /// The same for a node whose agent never posted its status (no Ready condition):
    /// Kubernetes' `--node-startup-grace-period`, a minute; not configurable here.
    pub startup_grace_period: Duration,
    /// Nodes a second given a NoExecute taint, per zone (`--node-eviction-rate`).
    pub eviction_rate: f64,
    /// The same in a large zone mostly not Ready (`--secondary-node-eviction-rate`).
    pub secondary_eviction_rate: f64,
    /// The share of a zone's nodes not Ready from which it is mostly down
    /// (`--unhealthy-zone-threshold`).
    pub unhealthy_zone_threshold: f64,
    /// Zones of at most this many nodes give no NoExecute taints while mostly down
    /// (`--large-cluster-size-threshold`).
    pub large_cluster_size: usize,
    /// How often every node is looked at (Kubernetes' `--node-monitor-period`, 5 s; at most
    /// half the grace period; not configurable here). A node's change is looked at as it
    /// comes.
    pub monitor_period: Duration,
}

impl Default for NodeLifecycleConfig {
    fn default() -> Self {
        Self {
            grace_period: Duration::from_secs(50),
            startup_grace_period: Duration::from_secs(60),
            eviction_rate: 0.1,
            secondary_eviction_rate: 0.01,
            unhealthy_zone_threshold: 0.55,
            large_cluster_size: 50,
            monitor_period: Duration::from_secs(5),
        }
    }
}

/// A zone's health, as Kubernetes' controller names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ZoneState {
    Normal,
    /// Mostly not Ready.
    PartialDisruption,
    /// No node Ready.
    FullDisruption,
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
    config: NodeLifecycleConfig,
    nodes: BTreeMap<String, Value>,
    heard: HashMap<String, Heard>,
    /// When each zone may give its next NoExecute taint.
    next_taint: HashMap<String, Instant>,
    /// Not-Ready nodes some of whose pods could not be marked not ready: tried again each
    /// round (Kubernetes' `nodesToRetry`).
    unmarked: BTreeSet<String>,
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
    pub fn new(client: Arc<dyn ApiClient>, config: NodeLifecycleConfig) -> Self {
        Self {
            client,
            config,
            nodes: BTreeMap::new(),
            heard: HashMap::new(),
            next_taint: HashMap::new(),
            unmarked: BTreeSet::new(),
        }
    }

    /// Records that the controller took up or let go of `node`, in the node controller's
    /// words ("Node a event: Registered Node a in Controller").
    fn node_event(&self, node: &Value, taken_up: bool, ctx: &mut Context<Self>) {
        let name = object_name(node);
        let (reason, event) = if taken_up {
            ("RegisteredNode", format!("Registered Node {name} in Controller"))
        } else {
            ("RemovingNode", format!("Removing Node {name} from Controller"))
        };
        let message = format!("Node {name} event: {event}");
        let reference = ObjectRef::of(resources::core("nodes"), node);
        let client = self.client.clone();
        ctx.spawn(
            async move {
                let kind = EventKind::Normal;
                events::record(client.as_ref(), &reference, kind, reason, &message, COMPONENT)
                    .await;
            }
            .into_actor(self),
        );
    }

    /// Notes what a node or its lease says now; a change is news from its agent.
    /// A node first heard of counts as heard at `since` (now, or, for a node that has never
    /// posted its status, its creation, as Kubernetes counts its startup grace).
    fn hear(
        &mut self,
        name: &str,
        lease_renewed: Option<Value>,
        heartbeat: Option<Value>,
        since: Instant,
    ) {
        let heard = self.heard.entry(name.to_string()).or_insert_with(|| Heard {
            at: since,
            lease_renewed: None,
            heartbeat: None,
        });
        let mut news = false;
        // A lease is news when renewed later than last seen (one moved back is not).
        let later = |renewed: &Value| match (renewed.as_str(), heard.lease_renewed.as_ref()) {
            (Some(now), Some(Value::String(before))) => now > before.as_str(),
            _ => heard.lease_renewed.as_ref() != Some(renewed),
        };
        if let Some(renewed) = lease_renewed.filter(later) {
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

    /// Notes what node leases say. Only a known node's: a lease left from before its node was
    /// created says nothing of the new one, whose startup grace counts from its own sighting.
    fn hear_leases(&mut self, leases: &[Value]) {
        for lease in leases {
            if !self.nodes.contains_key(object_name(lease)) {
                continue;
            }
            let renewed = json::at(lease, "/spec/renewTime").cloned();
            self.hear(object_name(lease), renewed, None, Instant::now());
        }
    }

    /// Marks the nodes gone silent, and taints each node as its conditions say.
    fn monitor(&mut self, ctx: &mut Context<Self>) {
        let states = self.zone_states();
        let all_down = Self::all_down(&states);
        for (name, node) in &self.nodes {
            let ready = condition_status(node, "Ready");
            let grace = match ready {
                Some(_) => self.config.grace_period,
                None => self.config.startup_grace_period,
            };
            let silent = self.heard.get(name).is_some_and(|h| h.at.elapsed() > grace);
            let update =
                (silent && ready.as_deref() != Some("Unknown")).then(|| unknown_status(node));
            let zone = zone_of(node);
            // A zone of nodes all left out of disruption checks has no state: it is tainted
            // at the normal rate, as Kubernetes' zone that never left its initial state.
            let state = states.get(&zone).copied().unwrap_or((ZoneState::Normal, 0));
            // One write a round: the status first (a zone's turn to taint is not spent on a
            // node whose taints wait for the next round).
            let (config, next_taint) = (&self.config, &mut self.next_taint);
            let retaint = match update {
                Some(_) => None,
                None => Self::retainted(node, all_down, || {
                    Self::may_taint(config, next_taint, zone, state)
                }),
            };
            // Pods left Ready on a node that is not are marked again.
            let remark = update.is_none()
                && self.unmarked.contains(name)
                && ready.as_deref() != Some("True");
            if ready.as_deref() == Some("True") {
                self.unmarked.remove(name);
            }
            let name = name.clone();
            let client = self.client.clone();
            // A node that was Ready and is no longer gets the controller's event, as in
            // Kubernetes' RecordNodeStatusChange.
            let was_ready = ready.as_deref() == Some("True");
            let work = async move {
                // Conflicts with the agent's own writes: looked at again next round.
                let mut marked = None;
                if let Some(node) = update {
                    let reference = ObjectRef::of(resources::core("nodes"), &node);
                    match client.update_status(resources::core("nodes"), "", node).await {
                        Ok(_) => {
                            if was_ready {
                                let message = format!("Node {name} status is now: NodeNotReady");
                                let (kind, reason) = (EventKind::Normal, "NodeNotReady");
                                let client = client.as_ref();
                                events::record(
                                    client, &reference, kind, reason, &message, COMPONENT,
                                )
                                .await;
                            }
                            // Its pods' readiness follows only when it was Ready: a node
                            // whose agent said NotReady had its pods judged by that agent.
                            if was_ready {
                                marked = Some(mark_pods_not_ready(client.as_ref(), &name).await);
                            }
                        }
                        Err(error) => tracing::debug!(%name, %error, "marking a silent node"),
                    }
                } else if let Some(node) = retaint {
                    if let Err(error) = client.update(resources::core("nodes"), "", node).await {
                        tracing::debug!(%name, %error, "tainting a node");
                    }
                }
                if remark {
                    marked = Some(mark_pods_not_ready(client.as_ref(), &name).await);
                }
                (name, marked)
            };
            ctx.spawn(work.into_actor(self).map(|(name, marked), controller, _| match marked {
                Some(true) => _ = controller.unmarked.remove(&name),
                Some(false) => _ = controller.unmarked.insert(name),
                None => {}
            }));
        }
    }

    /// Whether no zone has a Ready node: the controller then takes it for its own trouble
    /// reaching them, and gives no NoExecute taints.
    fn all_down(states: &HashMap<String, (ZoneState, usize)>) -> bool {
        !states.is_empty() && states.values().all(|(state, _)| *state == ZoneState::FullDisruption)
    }

    /// Each zone's state and size.
    fn zone_states(&self) -> HashMap<String, (ZoneState, usize)> {
        let mut counts: HashMap<String, (usize, usize)> = HashMap::new();
        // Nodes labelled to be left out of disruption checks are not counted (Kubernetes'
        // `node.kubernetes.io/exclude-disruption`).
        let counted = self.nodes.values().filter(|node| {
            let labels = json::at(node, "/metadata/labels").and_then(Value::as_object);
            !labels.is_some_and(|l| l.contains_key("node.kubernetes.io/exclude-disruption"))
        });
        for node in counted {
            let (ready, not_ready) = counts.entry(zone_of(node)).or_default();
            match condition_status(node, "Ready").as_deref() {
                Some("True") => *ready += 1,
                _ => *not_ready += 1,
            }
        }
        let threshold = self.config.unhealthy_zone_threshold;
        counts
            .into_iter()
            .map(|(zone, (ready, not_ready))| {
                let state = if ready == 0 && not_ready > 0 {
                    ZoneState::FullDisruption
                } else if not_ready > 2
                    && not_ready as f64 / (ready + not_ready) as f64 >= threshold
                {
                    ZoneState::PartialDisruption
                } else {
                    ZoneState::Normal
                };
                (zone, (state, ready + not_ready))
            })
            .collect()
    }

    /// Whether the zone may give a NoExecute taint now (and then not for a while), its next
    /// turn kept in `next_taint`.
    fn may_taint(
        config: &NodeLifecycleConfig,
        next_taint: &mut HashMap<String, Instant>,
        zone: String,
        (state, size): (ZoneState, usize),
    ) -> bool {
        let rate = match state {
            ZoneState::PartialDisruption if size <= config.large_cluster_size => 0.0,
            ZoneState::PartialDisruption => config.secondary_eviction_rate,
            ZoneState::Normal | ZoneState::FullDisruption => config.eviction_rate,
        };
        if rate <= 0.0 {
            return false;
        }
        let now = Instant::now();
        let next = next_taint.entry(zone).or_insert(now);
        if now < *next {
            return false;
        }
        let turn = Duration::try_from_secs_f64(1.0 / rate).unwrap_or(Duration::MAX);
        *next = now.checked_add(turn).unwrap_or(now + Duration::from_secs(365 * 24 * 3600));
        true
    }

    /// The node with the taints its conditions call for, when they are not those it has; a new
    /// NoExecute taint only when `may_taint` says its zone's turn has come.
    fn retainted(node: &Value, all_down: bool, may_taint: impl FnOnce() -> bool) -> Option<Value> {
        let ready = condition_status(node, "Ready");
        let ready_taint = match ready.as_deref() {
            Some("False") => Some(NOT_READY),
            Some("Unknown") => Some(UNREACHABLE),
            _ => None,
        };
        let mut no_schedule: Vec<&str> = ready_taint.into_iter().collect();
        for (condition, key) in CONDITION_TAINTS {
            if condition_status(node, condition).as_deref() == Some("True") {
                no_schedule.push(key);
            }
        }
        if json::at(node, "/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
            no_schedule.push(UNSCHEDULABLE);
        }
        let has = |key: &str, effect: &str| {
            taints(node).iter().any(|t| t["key"] == key && t["effect"] == effect)
        };
        // One already there is kept, or swapped for the other (not-ready for unreachable) at
        // once; a new one waits for its zone's turn.
        let tainted = has(NOT_READY, "NoExecute") || has(UNREACHABLE, "NoExecute");
        let no_execute = match ready_taint.filter(|_| !all_down) {
            Some(key) if tainted || may_taint() => Some(key),
            _ => None,
        };
        let managed = |t: &Value| match t["effect"].as_str() {
            Some("NoSchedule") => NO_SCHEDULE_KEYS.iter().any(|k| t["key"] == *k),
            Some("NoExecute") => t["key"] == NOT_READY || t["key"] == UNREACHABLE,
            _ => false,
        };
        let wanted = |t: &Value| match t["effect"].as_str() {
            Some("NoSchedule") => no_schedule.iter().any(|k| t["key"] == *k),
            Some("NoExecute") => no_execute.is_some_and(|k| t["key"] == k),
            _ => false,
        };
        let mut kept: Vec<Value> =
            taints(node).iter().filter(|t| !managed(t) || wanted(t)).cloned().collect();
        let wanted_taints = no_schedule
            .iter()
            .map(|key| (*key, "NoSchedule"))
            .chain(no_execute.map(|key| (key, "NoExecute")));
        let mut added = false;
        for (key, effect) in wanted_taints {
            if !kept.iter().any(|t| t["key"] == key && t["effect"] == effect) {
                kept.push(json!({"key": key, "effect": effect, "timeAdded": crate::model::now()}));
                added = true;
            }
        }
        if !added && kept.len() == taints(node).len() {
            return None;
        }
        let mut node = node.clone();
        if kept.is_empty() {
            if let Some(spec) = node.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("taints");
            }
        } else {
            node["spec"]["taints"] = Value::Array(kept);
        }
        Some(node)
    }
}

/// The zone a node is in: its region and zone labels, the deprecated beta ones first (as
/// Kubernetes' `GetZoneKey` reads them).
fn zone_of(node: &Value) -> String {
    let label = |[beta, ga]: [&str; 2]| {
        let labels = json::at(node, "/metadata/labels");
        let value = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        value(beta).or_else(|| value(ga)).unwrap_or("").to_string()
    };
    ZONE_LABELS.map(label).join(":\0:")
}

/// Sets the Ready condition of the pods bound to `node` to False, with a `NodeNotReady` event
/// for each (Kubernetes' `MarkPodsNotReady`): whether every one was.
async fn mark_pods_not_ready(client: &dyn ApiClient, node: &str) -> bool {
    let pods = resources::core("pods");
    let options = ListOptions {
        field_selector: Some(format!("spec.nodeName={node}")),
        ..ListOptions::default()
    };
    let listed = match client.list(pods, None, &options).await {
        Ok(listed) => listed.items,
        Err(error) => {
            tracing::debug!(%node, %error, "listing a silent node's pods");
            return false;
        }
    };
    let mut all = true;
    for mut pod in listed {
        let conditions = pod.pointer_mut("/status/conditions").and_then(Value::as_array_mut);
        let ready = conditions.and_then(|c| c.iter_mut().find(|c| c["type"] == "Ready"));
        let Some(ready) = ready.filter(|r| r["status"] != "False") else {
            continue;
        };
        ready["status"] = json!("False");
        ready["lastTransitionTime"] = json!(crate::model::now());
        let namespace = json::at(&pod, "/metadata/namespace").and_then(Value::as_str);
        let namespace = namespace.unwrap_or("").to_string();
        let (name, uid) = (object_name(&pod).to_string(), object_uid(&pod).to_string());
        let reference = ObjectRef::pod(namespace.clone(), name, uid);
        match client.update_status(pods, &namespace, pod).await {
            Ok(_) => {
                let (kind, reason) = (EventKind::Warning, "NodeNotReady");
                events::record(client, &reference, kind, reason, "Node is not ready", COMPONENT)
                    .await;
            }
            Err(error) => {
                tracing::debug!(pod = %reference.name, %error, "marking a pod not ready");
                all = false;
            }
        }
    }
    all
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

/// The node with its agent's conditions Unknown, as Kubernetes writes them: one its agent
/// never posted is added, its heartbeat the node's creation; one already Unknown is left as
/// it is.
fn unknown_status(node: &Value) -> Value {
    let now = crate::model::now();
    let mut node = node.clone();
    let created = json::at(&node, "/metadata/creationTimestamp").cloned();
    let mut conditions: Vec<Value> = conditions(&node).to_vec();
    for kind in CONDITIONS {
        match conditions.iter_mut().find(|c| c["type"] == *kind) {
            Some(condition) if condition["status"] == "Unknown" => {}
            Some(condition) => {
                condition["status"] = json!("Unknown");
                condition["reason"] = json!("NodeStatusUnknown");
                condition["message"] = json!("Kubelet stopped posting node status.");
                condition["lastTransitionTime"] = json!(now);
            }
            None => conditions.push(json!({"type": kind, "status": "Unknown",
                "reason": "NodeStatusNeverUpdated", "message": "Kubelet never posted node status.",
                "lastHeartbeatTime": created, "lastTransitionTime": now})),
        }
    }
    node["status"]["conditions"] = Value::Array(conditions);
    node
}

/// When `node` was created, as an instant of this process (now when unknown or to come).
fn created_at(node: &Value) -> Instant {
    let created = json::at(node, "/metadata/creationTimestamp").and_then(Value::as_str);
    let age = created.and_then(crate::model::seconds_since).unwrap_or(0).max(0);
    let now = Instant::now();
    now.checked_sub(Duration::from_secs(age as u64)).unwrap_or(now)
}

fn heartbeat(node: &Value) -> Option<Value> {
    let ready = conditions(node).iter().find(|c| c["type"] == "Ready")?;
    ready.get("lastHeartbeatTime").cloned()
}

impl Actor for NodeLifecycleController {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        informer::feed_actor(ctx, client, resources::core("nodes"), Scope::default(), Nodes);
        let scope = Scope::fields(format!("metadata.namespace={NODE_LEASE_NAMESPACE}"));
        let client = self.client.clone();
        informer::feed_actor(ctx, client, leases(), scope, Leases);
        let period = (self.config.monitor_period.min(self.config.grace_period / 2))
            .max(Duration::from_millis(50));
        ctx.run_interval(period, |controller, ctx| controller.monitor(ctx));
    }
}

impl Handler<Nodes> for NodeLifecycleController {
    type Result = ();

    fn handle(&mut self, Nodes(feed): Nodes, ctx: &mut Context<Self>) {
        let changed = match feed {
            Feed::Listed(items) => {
                let known = std::mem::take(&mut self.nodes);
                self.nodes = items.into_iter().map(|n| (object_name(&n).to_string(), n)).collect();
                self.heard.retain(|name, _| self.nodes.contains_key(name));
                for node in self.nodes.values().filter(|n| !known.contains_key(object_name(n))) {
                    self.node_event(node, true, ctx);
                }
                for node in known.values().filter(|n| !self.nodes.contains_key(object_name(n))) {
                    self.node_event(node, false, ctx);
                }
                self.nodes.values().cloned().collect()
            }
            Feed::Changed(EventType::Deleted, node) => {
                if self.nodes.remove(object_name(&node)).is_some() {
                    self.node_event(&node, false, ctx);
                }
                self.heard.remove(object_name(&node));
                Vec::new()
            }
            Feed::Changed(_, node) => {
                let name = object_name(&node).to_string();
                if self.nodes.insert(name, node.clone()).is_none() {
                    self.node_event(&node, true, ctx);
                }
                vec![node]
            }
            Feed::Unavailable(_) => Vec::new(),
        };
        // The zones' states matter only to a node not Ready (its NoExecute taint), and are
        // worked out once, for the first such node (not for every heartbeat).
        let mut zones_down = None;
        for node in changed {
            let since = match condition_status(&node, "Ready") {
                Some(_) => Instant::now(),
                None => created_at(&node),
            };
            self.hear(object_name(&node), None, heartbeat(&node), since);
            let not_ready =
                matches!(condition_status(&node, "Ready").as_deref(), Some("False" | "Unknown"));
            let all_down =
                not_ready && *zones_down.get_or_insert_with(|| Self::all_down(&self.zone_states()));
            // Its NoSchedule taints follow a change at once (a cordon, a condition); a new
            // NoExecute taint waits for the monitor and its zone's turn. Its beta labels go
            // with them, in one write.
            let labels = beta_labels(&node);
            let retainted = Self::retainted(&node, all_down, || false)
                .or_else(|| labels.is_some().then(|| node.clone()));
            if let Some(mut written) = retainted {
                for (key, value) in labels.into_iter().flatten() {
                    written["metadata"]["labels"][key] = value;
                }
                let client = self.client.clone();
                let name = object_name(&node).to_string();
                ctx.spawn(
                    async move {
                        // A conflict with another writer: looked at again next round.
                        let updated = client.update(resources::core("nodes"), "", written);
                        if let Err(error) = updated.await {
                            tracing::debug!(%name, %error, "tainting or labelling a node");
                        }
                    }
                    .into_actor(self),
                );
            }
        }
    }
}

/// The deprecated `beta.kubernetes.io/os` and `arch` labels a node lacks or has apart from
/// their stable names' values, which older manifests still select by (Kubernetes'
/// `reconcileNodeLabels`); none when they agree.
fn beta_labels(node: &Value) -> Option<serde_json::Map<String, Value>> {
    const PAIRS: [(&str, &str); 2] = [
        ("kubernetes.io/os", "beta.kubernetes.io/os"),
        ("kubernetes.io/arch", "beta.kubernetes.io/arch"),
    ];
    let labels = json::at(node, "/metadata/labels").and_then(Value::as_object)?;
    let missing: serde_json::Map<String, Value> = PAIRS
        .iter()
        .filter_map(|(stable, beta)| {
            let value = labels.get(*stable)?;
            (labels.get(*beta) != Some(value)).then(|| (beta.to_string(), value.clone()))
        })
        .collect();
    (!missing.is_empty()).then_some(missing)
}

impl Handler<Leases> for NodeLifecycleController {
    type Result = ();

    fn handle(&mut self, Leases(feed): Leases, _: &mut Context<Self>) {
        let leases = match feed {
            Feed::Listed(items) => items,
            Feed::Changed(EventType::Deleted, _) | Feed::Unavailable(_) => Vec::new(),
            Feed::Changed(_, lease) => vec![lease],
        };
        self.hear_leases(&leases);
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
    use crate::core::{DeleteOptions, ListOptions, PatchType, WatchOptions};
    use crate::testing::{core, eventually};

    /// A second's grace: rounds every half second, so that a node reported back is seen
    /// untainted before it can go silent again, even on a busy machine.
    fn fast() -> NodeLifecycleConfig {
        NodeLifecycleConfig {
            grace_period: Duration::from_secs(1),
            ..NodeLifecycleConfig::default()
        }
    }

    fn node(name: &str, ready: &str) -> Value {
        json!({"metadata": {"name": name}, "status": {"conditions": [
            {"type": "Ready", "status": ready, "reason": "KubeletReady",
                "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    }

    fn has(node: &Value, key: &str, effect: &str) -> bool {
        taints(node).iter().any(|t| t["key"] == key && t["effect"] == effect)
    }

    /// A cordon (and its undoing) is tainted at once, not at the next round: with rounds an
    /// hour apart, the taint still comes and goes.
    #[actix::test]
    async fn a_cordon_is_tainted_as_it_comes() {
        let core = core().await;
        let nodes = resources::core("nodes");
        ApiClient::create(&core, nodes, "", node("n1", "True")).await.unwrap();
        let config = NodeLifecycleConfig {
            monitor_period: Duration::from_secs(3600),
            grace_period: Duration::from_secs(7200),
            ..NodeLifecycleConfig::default()
        };
        NodeLifecycleController::new(Arc::new(core.clone()), config).start();
        let cordon = |unschedulable: bool| {
            let core = core.clone();
            async move {
                let patch = json!({"spec": {"unschedulable": unschedulable}});
                ApiClient::patch(&core, nodes, "", "n1", PatchType::Merge, &patch, false)
                    .await
                    .unwrap();
            }
        };
        let tainted = |wanted: bool| {
            let core = core.clone();
            async move {
                let node = ApiClient::get(&core, nodes, "", "n1").await.ok()?;
                (has(&node, UNSCHEDULABLE, "NoSchedule") == wanted).then_some(())
            }
        };
        cordon(true).await;
        eventually("the cordoned node is tainted", || tainted(true)).await;
        cordon(false).await;
        eventually("the uncordoned node is not", || tainted(false)).await;
        // The node was taken up (and is let go when deleted), in the node controller's words.
        let events = resources::core("events");
        let about = |reason: &str| {
            let core = core.clone();
            let options = ListOptions {
                field_selector: Some(format!("involvedObject.name=n1,reason={reason}")),
                ..ListOptions::default()
            };
            async move {
                let list = ApiClient::list(&core, events, Some("default"), &options).await.ok()?;
                list.items.into_iter().next()
            }
        };
        let registered = eventually("RegisteredNode", || about("RegisteredNode")).await;
        assert_eq!(registered["message"], "Node n1 event: Registered Node n1 in Controller");
        assert_eq!(registered["source"]["component"], "node-controller");
        ApiClient::delete(&core, nodes, "", "n1", &DeleteOptions::default()).await.unwrap();
        let removing = eventually("RemovingNode", || about("RemovingNode")).await;
        assert_eq!(removing["message"], "Node n1 event: Removing Node n1 from Controller");
    }

    /// A node is heard from through its lease once it is known, and when the lease is renewed
    /// later than before (not earlier).
    #[actix::test]
    async fn leases_speak_for_known_nodes_when_renewed_later() {
        let core = core().await;
        let mut controller = NodeLifecycleController::new(Arc::new(core), fast());
        let lease = |renewed: &str| {
            json!({"metadata": {"name": "n1", "namespace": NODE_LEASE_NAMESPACE},
                "spec": {"renewTime": renewed}})
        };
        controller.hear_leases(&[lease("2026-12-06T13:00:00.000000Z")]);
        assert!(controller.heard.is_empty(), "no node n1 yet");
        controller.nodes.insert("n1".into(), node("n1", "True"));
        controller.hear_leases(&[lease("2026-12-06T13:00:00.000000Z")]);
        let first = controller.heard["n1"].at;
        controller.hear_leases(&[lease("2026-12-06T12:59:00.000000Z")]);
        assert_eq!(controller.heard["n1"].at, first, "renewed earlier: no news");
        controller.hear_leases(&[lease("2026-12-06T13:00:10.000000Z")]);
        assert!(controller.heard["n1"].at > first);
    }

    /// A node whose agent never posted its status is judged after the startup grace, and
    /// its conditions say so, their heartbeat its creation.
    #[actix::test]
    async fn a_node_never_heard_from_is_unknown_after_the_startup_grace() {
        let core = core().await;
        let nodes = resources::core("nodes");
        let ghost = json!({"metadata": {"name": "ghost"}});
        let ghost = ApiClient::create(&core, nodes, "", ghost).await.unwrap();
        let config = NodeLifecycleConfig {
            grace_period: Duration::from_secs(3600),
            startup_grace_period: Duration::from_secs(1),
            ..fast()
        };
        let _controller = NodeLifecycleController::new(Arc::new(core.clone()), config).start();
        let marked = eventually("the node marked", || async {
            let node = ApiClient::get(&core, nodes, "", "ghost").await.ok()?;
            (conditions(&node).len() == 4).then_some(node)
        })
        .await;
        for condition in conditions(&marked) {
            assert_eq!(condition["status"], "Unknown", "{condition}");
            assert_eq!(condition["reason"], "NodeStatusNeverUpdated", "{condition}");
            assert_eq!(condition["message"], "Kubelet never posted node status.");
            assert_eq!(condition["lastHeartbeatTime"], ghost["metadata"]["creationTimestamp"]);
        }
    }

    /// A node's deprecated beta os and arch labels follow the stable ones (Kubernetes'
    /// `reconcileNodeLabels`): missing ones are added, differing ones set again.
    #[actix::test]
    async fn beta_os_and_arch_labels_follow_the_stable_ones() {
        let core = core().await;
        let nodes = resources::core("nodes");
        let mut old = node("old", "True");
        old["metadata"]["labels"] = json!({"kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64", "beta.kubernetes.io/arch": "arm64"});
        ApiClient::create(&core, nodes, "", old).await.unwrap();
        let _controller = NodeLifecycleController::new(Arc::new(core.clone()), fast()).start();
        let labels = eventually("the beta labels", || async {
            let node = ApiClient::get(&core, nodes, "", "old").await.ok()?;
            let labels = node["metadata"]["labels"].clone();
            (labels["beta.kubernetes.io/arch"] == "amd64").then_some(labels)
        })
        .await;
        assert_eq!(labels["beta.kubernetes.io/os"], "linux");
        assert!(beta_labels(&json!({"metadata": {"labels": labels}})).is_none());
        assert!(beta_labels(&json!({"metadata": {"labels": {"other": "x"}}})).is_none());
    }

    /// A node left out of disruption checks is judged all the same, also when its zone has
    /// no other node (its zone then has no disruption state).
    #[actix::test]
    async fn a_silent_node_left_out_of_disruption_checks_is_still_judged() {
        let core = core().await;
        let mut excluded = node("alone", "True");
        excluded["metadata"]["labels"] = json!({"node.kubernetes.io/exclude-disruption": ""});
        ApiClient::create(&core, resources::core("nodes"), "", excluded).await.unwrap();
        let _controller = NodeLifecycleController::new(Arc::new(core.clone()), fast()).start();
        eventually("the node unreachable", || async {
            let node = ApiClient::get(&core, resources::core("nodes"), "", "alone").await.ok()?;
            let unknown = condition_status(&node, "Ready").as_deref() == Some("Unknown");
            (unknown && has(&node, UNREACHABLE, "NoSchedule")).then_some(())
        })
        .await;
    }

    #[actix::test]
    async fn a_silent_node_is_not_ready_and_tainted_until_it_reports_again() {
        let core = core().await;
        ApiClient::create(&core, resources::core("nodes"), "", node("far", "True")).await.unwrap();
        let _controller = NodeLifecycleController::new(Arc::new(core.clone()), fast()).start();
        let get =
            || async { ApiClient::get(&core, resources::core("nodes"), "", "far").await.unwrap() };
        let silent = eventually("the node unreachable", || async {
            let node = get().await;
            let tainted = has(&node, UNREACHABLE, "NoSchedule");
            (tainted && condition_status(&node, "Ready").as_deref() == Some("Unknown"))
                .then_some(node)
        })
        .await;
        let ready = conditions(&silent).iter().find(|c| c["type"] == "Ready").unwrap().clone();
        assert_eq!(ready["reason"], "NodeStatusUnknown");
        assert_eq!(ready["message"], "Kubelet stopped posting node status.");
        assert_eq!(ready["lastHeartbeatTime"], "2026-01-01T00:00:00Z");
        assert_eq!(condition_status(&silent, "MemoryPressure").as_deref(), Some("Unknown"));
        // The only node, so every zone is down: the controller blames itself, not the node,
        // and evicts nothing (the NoExecute taint would have come with the NoSchedule one).
        assert!(!has(&silent, UNREACHABLE, "NoExecute"), "{silent}");
        // Ready before, not now: the controller's event about the node.
        let events = resources::core("events");
        let options = ListOptions {
            field_selector: Some("involvedObject.name=far,reason=NodeNotReady".into()),
            ..ListOptions::default()
        };
        let not_ready = eventually("a NodeNotReady event", || async {
            let list = ApiClient::list(&core, events, Some("default"), &options).await.ok()?;
            list.items.into_iter().next()
        })
        .await;
        assert_eq!(not_ready["message"], "Node far status is now: NodeNotReady");
        assert_eq!(not_ready["involvedObject"]["uid"], silent["metadata"]["uid"]);

        // Its agent reports again: Ready, and the taint goes (seen in the node's changes: it
        // goes silent again right after).
        let mut back = silent.clone();
        back["status"]["conditions"] = json!([{"type": "Ready", "status": "True",
            "reason": "KubeletReady", "lastHeartbeatTime": crate::model::now()}]);
        let back =
            ApiClient::update_status(&core, resources::core("nodes"), "", back).await.unwrap();
        let from = back["metadata"]["resourceVersion"].as_str().unwrap().to_string();
        let options = WatchOptions { resource_version: Some(from), ..WatchOptions::default() };
        let mut changes =
            ApiClient::watch(&core, resources::core("nodes"), None, &options).await.unwrap();
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

    #[actix::test]
    async fn a_silent_node_among_live_ones_gets_the_no_execute_taint_and_its_pods_go_unready() {
        let core = core().await;
        for name in ["near", "far"] {
            ApiClient::create(&core, resources::core("nodes"), "", node(name, "True"))
                .await
                .unwrap();
        }
        let pods = resources::core("pods");
        let pod = json!({"metadata": {"name": "p", "namespace": "default"},
            "spec": {"nodeName": "far", "containers": [{"name": "c", "image": "i"}]}});
        ApiClient::create(&core, pods, "default", pod).await.unwrap();
        let mut running = ApiClient::get(&core, pods, "default", "p").await.unwrap();
        running["status"] = json!({"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"}]});
        ApiClient::update_status(&core, pods, "default", running).await.unwrap();
        // `near`'s agent keeps renewing its lease.
        let renewing = core.clone();
        actix::spawn(async move {
            let lease = json!({"metadata": {"name": "near", "namespace": NODE_LEASE_NAMESPACE},
                "spec": {"holderIdentity": "near"}});
            let mut lease =
                ApiClient::create(&renewing, leases(), NODE_LEASE_NAMESPACE, lease).await.unwrap();
            loop {
                lease["spec"]["renewTime"] = json!(chrono::Utc::now().to_rfc3339());
                lease = ApiClient::update(&renewing, leases(), NODE_LEASE_NAMESPACE, lease)
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        let _controller = NodeLifecycleController::new(Arc::new(core.clone()), fast()).start();
        let far = eventually("far tainted NoExecute", || async {
            let node = ApiClient::get(&core, resources::core("nodes"), "", "far").await.unwrap();
            has(&node, UNREACHABLE, "NoExecute").then_some(node)
        })
        .await;
        assert!(has(&far, UNREACHABLE, "NoSchedule"), "{far}");
        assert_eq!(condition_status(&far, "Ready").as_deref(), Some("Unknown"));
        let near = ApiClient::get(&core, resources::core("nodes"), "", "near").await.unwrap();
        assert!(taints(&near).is_empty(), "{near}");
        eventually("its pod not ready", || async {
            let pod = ApiClient::get(&core, pods, "default", "p").await.unwrap();
            let ready = conditions(&pod).iter().find(|c| c["type"] == "Ready").cloned();
            ready.filter(|r| r["status"] == "False")
        })
        .await;
    }

    #[actix::test]
    async fn no_execute_taints_follow_zone_health_and_the_eviction_rate() {
        let core = core().await;
        let mut c = NodeLifecycleController::new(Arc::new(core), fast());
        let zone = |statuses: &[&str]| -> BTreeMap<String, Value> {
            let name = |i: usize| format!("n{i}");
            statuses
                .iter()
                .enumerate()
                .map(|(i, status)| (name(i), node(&name(i), status)))
                .collect()
        };
        let retaint = |c: &mut NodeLifecycleController, name: &str| {
            let states = c.zone_states();
            let all_down = states.values().all(|(s, _)| *s == ZoneState::FullDisruption);
            let node = c.nodes[name].clone();
            let zone = zone_of(&node);
            let state = states[&zone];
            NodeLifecycleController::retainted(&node, all_down, || {
                NodeLifecycleController::may_taint(&c.config, &mut c.next_taint, zone, state)
            })
        };
        // One of three not Ready: tainted at once; a second one waits for the zone's turn (one
        // node every ten seconds).
        c.nodes = zone(&["False", "True", "True"]);
        let tainted = retaint(&mut c, "n0").expect("tainted");
        assert!(has(&tainted, NOT_READY, "NoExecute") && has(&tainted, NOT_READY, "NoSchedule"));
        let mut second = node("n1", "Unknown");
        second["spec"] = json!({"unschedulable": true});
        c.nodes.insert("n1".into(), second);
        let waiting = retaint(&mut c, "n1").expect("NoSchedule taints");
        assert!(
            has(&waiting, UNREACHABLE, "NoSchedule") && has(&waiting, UNSCHEDULABLE, "NoSchedule")
        );
        assert!(!has(&waiting, UNREACHABLE, "NoExecute"), "{waiting}");
        // A NoExecute taint already there is kept, or swapped for the other at once.
        let mut swapped = node("n0", "Unknown");
        swapped["spec"]["taints"] = tainted["spec"]["taints"].clone();
        c.nodes.insert("n0".into(), swapped);
        let swapped = retaint(&mut c, "n0").expect("swapped");
        assert!(has(&swapped, UNREACHABLE, "NoExecute") && !has(&swapped, NOT_READY, "NoExecute"));
        // Three of five not Ready, in a small zone: mostly down, no NoExecute taint.
        c.next_taint.clear();
        c.nodes = zone(&["False", "False", "Unknown", "True", "True"]);
        let partial = retaint(&mut c, "n0").expect("NoSchedule taint");
        assert!(has(&partial, NOT_READY, "NoSchedule") && !has(&partial, NOT_READY, "NoExecute"));
        // The same in another zone, where all is well, is tainted.
        let mut elsewhere = node("n9", "False");
        elsewhere["metadata"]["labels"] = json!({"topology.kubernetes.io/zone": "b"});
        c.nodes.insert("n9".into(), elsewhere.clone());
        c.nodes.insert("n10".into(), {
            let mut ready = node("n10", "True");
            ready["metadata"]["labels"] = elsewhere["metadata"]["labels"].clone();
            ready
        });
        let other_zone = retaint(&mut c, "n9").expect("tainted");
        assert!(has(&other_zone, NOT_READY, "NoExecute"), "{other_zone}");
        // Ready again: every taint of this controller goes; others stay.
        let mut healed = node("n9", "True");
        healed["spec"]["taints"] = json!([other_zone["spec"]["taints"][0],
            {"key": "own", "effect": "NoExecute"}]);
        c.nodes.insert("n9".into(), healed);
        let healed = retaint(&mut c, "n9").expect("untainted");
        assert_eq!(healed["spec"]["taints"], json!([{"key": "own", "effect": "NoExecute"}]));
    }
}
