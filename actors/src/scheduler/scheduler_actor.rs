//! The scheduler actor: list-watch caches of nodes, pods, services and replication controllers;
//! the scheduling queue; for each pending pod, filter and score the nodes and bind it to the best
//! through `pods/{name}/binding`. A bind is asynchronous: the pod is assumed on its node at once
//! so the next decision counts it, and un-assumed and retried if the bind fails.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use k8s_openapi::api::core::v1::{Node, Pod};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Value};

use super::filters::{self, FitFailure};
use super::node_info::{LabelGroups, NodeInfo, NodeSelector, PodInfo};
use super::pod_affinity::{self, AffinityFilter, NamespaceLabels};
use super::preemption::{self, Budget, Plan, Refusal};
use super::queue::SchedulingQueue;
use super::scores::{self, ScoreContext};
use super::topology_spread::{self, SpreadConstraint, SpreadFilter};
use crate::client::events::{self, Action, EventKind, ObjectRef};
use crate::client::informer::{self, Feed};
use crate::client::ApiClient;
use crate::core::{ApiError, DeleteOptions, PatchType};
use crate::model::{now, resources, ResourceType};
use crate::watch::EventType;

/// The component name events carry.
const COMPONENT: &str = "default-scheduler";

/// The scheduler's settings.
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// Pods naming this scheduler (or none) are scheduled.
    pub name: String,
    /// Binds in flight at once.
    pub max_in_flight_binds: usize,
    /// Share of nodes to find feasible before scoring (kube-scheduler's
    /// percentageOfNodesToScore); `None` adapts to the cluster size as kube-scheduler does.
    pub percentage_of_nodes_to_score: Option<u32>,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            name: "default-scheduler".into(),
            max_in_flight_binds: 256,
            percentage_of_nodes_to_score: None,
        }
    }
}

/// Counters of what the scheduler did (for tests and benchmarks).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchedulerStats {
    pub bound: u64,
    pub bind_failures: u64,
    pub unschedulable: u64,
    pub pending: usize,
    pub nodes: usize,
}

/// What the scheduler has done so far.
#[derive(Message)]
#[rtype(result = "SchedulerStats")]
pub struct GetStats;

/// Stops the scheduler (its list-watches end with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopScheduler;

impl Handler<StopScheduler> for Scheduler {
    type Result = ();

    fn handle(&mut self, _: StopScheduler, ctx: &mut Context<Self>) {
        ctx.stop();
        if self.own_thread {
            // Its thread goes with it.
            Arbiter::current().stop();
        }
    }
}

/// A feed of one of the watched resources.
#[derive(Message)]
#[rtype(result = "()")]
struct Informed(Watched, Feed);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Watched {
    Nodes,
    Pods,
    Services,
    ReplicationControllers,
    Claims,
    Volumes,
    Namespaces,
    Budgets,
}

const ALL_WATCHED: [Watched; 8] = [
    Watched::Nodes,
    Watched::Pods,
    Watched::Services,
    Watched::ReplicationControllers,
    Watched::Claims,
    Watched::Volumes,
    Watched::Namespaces,
    Watched::Budgets,
];

impl Watched {
    /// The resource watched (its group and plural), and the field selector the list-watch
    /// uses.
    fn source(self) -> (&'static str, &'static str, Option<&'static str>) {
        match self {
            Watched::Nodes => ("", "nodes", None),
            Watched::Pods => ("", "pods", Some("status.phase!=Succeeded,status.phase!=Failed")),
            Watched::Services => ("", "services", None),
            Watched::ReplicationControllers => ("", "replicationcontrollers", None),
            Watched::Claims => ("", "persistentvolumeclaims", None),
            Watched::Volumes => ("", "persistentvolumes", None),
            Watched::Namespaces => ("", "namespaces", None),
            Watched::Budgets => ("policy", "poddisruptionbudgets", None),
        }
    }
}

#[derive(Message)]
#[rtype(result = "()")]
struct BindDone {
    uid: String,
    node: String,
    result: Result<(), ApiError>,
}

#[derive(Message)]
#[rtype(result = "()")]
struct Schedule;

/// The selectors of the services and RCs of one namespace, by (kind, name).
type SelectorsByOwner = HashMap<(Watched, String), BTreeMap<String, String>>;

/// The scheduler actor.
pub struct Scheduler {
    client: Arc<dyn ApiClient>,
    config: SchedulerConfig,
    nodes: Vec<NodeInfo>,
    node_index: HashMap<String, usize>,
    /// Node of every pod known to be on one (bound, or assumed while its bind is in flight).
    pod_node: HashMap<String, String>,
    queue: SchedulingQueue,
    /// Every label group of the pods on nodes (resolves spread selectors).
    groups: LabelGroups,
    /// Equality selectors of services and RCs, by namespace, for spreading.
    selectors: HashMap<String, SelectorsByOwner>,
    /// What each PersistentVolumeClaim (by namespace and name) is to the pods using it.
    claims: HashMap<(String, String), ClaimState>,
    /// The volume each bound claim names.
    claim_volumes: HashMap<(String, String), String>,
    /// The claims whose access modes include `ReadWriteOncePod`: one pod at a time uses each.
    once_per_pod: HashSet<(String, String)>,
    /// The nodes each PersistentVolume with a required node affinity may be used on.
    volume_affinity: HashMap<String, NodeSelector>,
    /// The labels of each namespace (for affinity terms' namespace selectors).
    namespace_labels: NamespaceLabels,
    /// Where the next search for feasible nodes starts (round robin, as kube-scheduler).
    next_start: usize,
    in_flight: usize,
    schedule_queued: bool,
    /// What has been listed at least once: nothing is scheduled before everything has been
    /// (kube-scheduler waits for its caches to sync), or a pod seen before the nodes would be
    /// found unschedulable.
    listed: HashSet<Watched>,
    rng: StdRng,
    stats: SchedulerStats,
    /// Started on an arbiter thread of its own, which it stops when it stops.
    own_thread: bool,
    /// The unschedulable pods with inter-pod affinity or spread constraints, which a pod
    /// placed elsewhere may let in (some may have left the queue since).
    waiting_on_pods: HashSet<String>,
    /// A namespace's labels changed since the last informer message: pods waiting on affinity
    /// terms with namespace selectors may fit now.
    namespaces_changed: bool,
    /// The pods that preempted others, by uid, with the node they made room on: pods of no
    /// higher priority count them there until they are placed (or gone).
    nominated: HashMap<String, (String, PodInfo)>,
    /// Pods bound to a node not known yet, by node name then uid: counted on it once it is.
    before_their_node: HashMap<String, HashMap<String, PodInfo>>,
    /// The PodDisruptionBudgets, by namespace and name, which preemption tries not to break.
    budgets: HashMap<(String, String), Budget>,
}

fn resource(group: &str, plural: &str) -> &'static ResourceType {
    resources::find(group, "v1", plural).expect("served resource")
}

impl Scheduler {
    /// Starts a scheduler on its own arbiter thread, so that scheduling does not wait behind
    /// other actors.
    pub fn start_in_own_thread(
        client: Arc<dyn ApiClient>,
        config: SchedulerConfig,
    ) -> Addr<Scheduler> {
        let arbiter = Arbiter::new();
        Scheduler::start_in_arbiter(&arbiter.handle(), move |_| {
            crate::threads::name_current("kplane-sched");
            Scheduler { own_thread: true, ..Scheduler::new(client, config) }
        })
    }

    pub fn new(client: Arc<dyn ApiClient>, config: SchedulerConfig) -> Self {
        Self {
            client,
            config,
            nodes: Vec::new(),
            node_index: HashMap::new(),
            pod_node: HashMap::new(),
            queue: SchedulingQueue::default(),
            groups: LabelGroups::default(),
            selectors: HashMap::new(),
            claims: HashMap::new(),
            claim_volumes: HashMap::new(),
            once_per_pod: HashSet::new(),
            volume_affinity: HashMap::new(),
            namespace_labels: HashMap::new(),
            next_start: 0,
            in_flight: 0,
            schedule_queued: false,
            listed: HashSet::new(),
            rng: StdRng::from_entropy(),
            stats: SchedulerStats::default(),
            own_thread: false,
            waiting_on_pods: HashSet::new(),
            namespaces_changed: false,
            nominated: HashMap::new(),
            budgets: HashMap::new(),
            before_their_node: HashMap::new(),
        }
    }

    fn kick(&mut self, ctx: &mut Context<Self>) {
        let synced = ALL_WATCHED.iter().all(|w| self.listed.contains(w));
        if synced && !self.schedule_queued {
            self.schedule_queued = true;
            ctx.notify(Schedule);
        }
    }

    /// How many feasible nodes to find before scoring (kube-scheduler's rule: all nodes up to
    /// 100, then an adaptive share, never fewer than 100).
    fn nodes_to_find(&self) -> usize {
        let all = self.nodes.len();
        if all <= 100 {
            return all;
        }
        let percentage = self
            .config
            .percentage_of_nodes_to_score
            .unwrap_or_else(|| (50i64 - all as i64 / 125).max(5) as u32)
            .clamp(1, 100) as usize;
        (all * percentage / 100).max(100)
    }

    fn upsert_node(&mut self, node: &Node) -> bool {
        let name = node.metadata.name.clone().unwrap_or_default();
        match self.node_index.get(&name) {
            Some(&i) => {
                let before = relevant(&self.nodes[i]);
                self.nodes[i].set_node(node);
                before != relevant(&self.nodes[i])
            }
            None => {
                let mut info = NodeInfo::new(node);
                for (_, pod) in self.before_their_node.remove(&name).into_iter().flatten() {
                    info.add_pod(pod);
                }
                self.node_index.insert(name, self.nodes.len());
                self.nodes.push(info);
                true
            }
        }
    }

    fn remove_node(&mut self, name: &str) {
        let Some(i) = self.node_index.remove(name) else { return };
        let removed = self.nodes.swap_remove(i);
        if i < self.nodes.len() {
            self.node_index.insert(self.nodes[i].name.clone(), i);
        }
        // Its pods stay counted for it, as kube-scheduler's cache keeps a deleted node's pods
        // until they go: a node of that name again (its agent registering anew, before the
        // pod garbage collector's quarantine is over) has them at once.
        let pods = removed.pods().map(|pod| (pod.uid.clone(), pod.clone()));
        self.before_their_node.entry(name.to_string()).or_default().extend(pods);
    }

    fn node_mut(&mut self, name: &str) -> Option<&mut NodeInfo> {
        let i = *self.node_index.get(name)?;
        self.nodes.get_mut(i)
    }

    /// Takes a pod off the node it was counted on; true when it was on one.
    fn unassign(&mut self, uid: &str) -> bool {
        self.groups.unregister(uid);
        let Some(node) = self.pod_node.remove(uid) else { return false };
        if let Some(info) = self.node_mut(&node) {
            info.remove_pod(uid);
        }
        if let Some(waiting) = self.before_their_node.get_mut(&node) {
            waiting.remove(uid);
            if waiting.is_empty() {
                self.before_their_node.remove(&node);
            }
        }
        true
    }

    /// A pod from the API; true when capacity may have been freed. A placed pod new to the
    /// scheduler, or with new labels, retries the pods waiting for one like it.
    fn upsert_pod(&mut self, value: Value) -> bool {
        if self.already_counted(&value) {
            return false;
        }
        let unbound =
            value.pointer("/spec/nodeName").and_then(Value::as_str).unwrap_or("").is_empty();
        let fingerprint = if unbound { super::queue::fingerprint(&value) } else { 0 };
        let Ok(pod) = serde_json::from_value::<Pod>(value) else { return false };
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let spec = pod.spec.as_ref();
        let node = spec.and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty());
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            self.queue.remove(&uid);
            return self.unassign(&uid);
        }
        match node {
            Some(node) => {
                self.queue.remove(&uid);
                self.nominated.remove(&uid);
                let info = PodInfo::new(&pod);
                // What it was counted as on this node, if its labels were others.
                let relabelled = match self.pod_node.get(&uid) == Some(&node) {
                    true => {
                        let counted = self.counted_on(&node, &uid);
                        counted.filter(|p| p.labels != info.labels).cloned()
                    }
                    false => None,
                };
                if self.pod_node.get(&uid) != Some(&node) {
                    self.unassign(&uid);
                    self.pod_node.insert(uid.clone(), node.clone());
                }
                self.groups.register(&info);
                self.retry_waiting_for(&info, relabelled.as_ref());
                match self.node_mut(&node) {
                    Some(node_info) => node_info.add_pod(info),
                    // Counted once its node is known (the pods may be listed first).
                    None => {
                        self.before_their_node.entry(node).or_default().insert(uid, info);
                    }
                }
                false
            }
            None => {
                let ours = spec
                    .and_then(|s| s.scheduler_name.as_deref())
                    .is_none_or(|n| n.is_empty() || n == self.config.name);
                let in_flight = self.pod_node.contains_key(&uid);
                // A pod with scheduling gates is not tried until they are all removed.
                let gated =
                    spec.and_then(|s| s.scheduling_gates.as_ref()).is_some_and(|g| !g.is_empty());
                // Nor is one being deleted (kube-scheduler's `skipPodSchedule`), even if it
                // was waiting in the queue already.
                let deleting = pod.metadata.deletion_timestamp.is_some();
                if gated || deleting {
                    self.queue.remove(&uid);
                    if deleting {
                        self.nominated.remove(&uid); // the room a preemption made is let go
                    }
                } else if ours && !in_flight {
                    let info = PodInfo::new(&pod);
                    // The room a preemption made is held as the pod's status says (also what
                    // a scheduler before this one nominated).
                    match &info.nominated_node {
                        Some(node) => {
                            self.nominated.insert(uid.clone(), (node.clone(), info.clone()));
                        }
                        None => {
                            self.nominated.remove(&uid);
                        }
                    }
                    self.queue.add_or_update(info, fingerprint, Instant::now());
                }
                false
            }
        }
    }

    /// True for a new version of a pod already counted on its node that changes nothing the
    /// scheduler uses (a status update, its own bind): no need to read the whole pod again.
    fn already_counted(&self, value: &Value) -> bool {
        let text = |pointer: &str| value.pointer(pointer).and_then(Value::as_str);
        let (Some(uid), Some(node)) = (text("/metadata/uid"), text("/spec/nodeName")) else {
            return false;
        };
        if self.pod_node.get(uid).map(String::as_str) != Some(node)
            || matches!(text("/status/phase"), Some("Succeeded" | "Failed"))
        {
            return false;
        }
        let Some(known) = self.node_index.get(node).and_then(|i| self.nodes[*i].pod(uid)) else {
            return false;
        };
        let terminating = value.pointer("/metadata/deletionTimestamp").is_some();
        let labels = value.pointer("/metadata/labels").and_then(Value::as_object);
        let same_labels = labels.map_or(0, |l| l.len()) == known.labels.len()
            && labels
                .into_iter()
                .flatten()
                .all(|(k, v)| known.labels.get(k).map(String::as_str) == v.as_str());
        known.terminating == terminating && same_labels
    }

    fn remove_pod(&mut self, value: &Value) -> bool {
        let uid = value.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("");
        self.queue.remove(uid);
        self.nominated.remove(uid);
        self.unassign(uid)
    }

    /// Keeps (`present`) or drops a service's or RC's equality selector; a namespace left
    /// without any is dropped too.
    fn set_selector(&mut self, kind: Watched, object: &Value, present: bool) {
        let namespace = object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("");
        let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
        let key = (kind, name.to_string());
        let selector: BTreeMap<String, String> = object
            .pointer("/spec/selector")
            .and_then(Value::as_object)
            .map(|s| {
                s.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect()
            })
            .unwrap_or_default();
        if present && !selector.is_empty() {
            self.selectors.entry(namespace.to_string()).or_default().insert(key, selector);
        } else if let Some(entries) = self.selectors.get_mut(namespace) {
            entries.remove(&key);
            if entries.is_empty() {
                self.selectors.remove(namespace);
            }
        }
    }

    /// Replaces the selectors of every object of `kind` with those of `items`.
    fn relist_selectors(&mut self, kind: Watched, items: &[Value]) {
        self.selectors.retain(|_, entries| {
            entries.retain(|(k, _), _| *k != kind);
            !entries.is_empty()
        });
        for item in items {
            self.set_selector(kind, item, true);
        }
    }

    /// The label groups of the pods that spread `pod` by default, as kube-scheduler's
    /// `DefaultSelector` merges them: the selectors of the services that select it and of the
    /// ReplicationController that controls it.
    fn default_spread_groups(&self, pod: &PodInfo) -> Vec<u64> {
        let controller = |kind: &Watched, name: &str| {
            *kind == Watched::ReplicationControllers
                && pod.owner_kind.as_deref() == Some("ReplicationController")
                && pod.owner_name.as_deref() == Some(name)
        };
        let selectors: Vec<BTreeMap<String, String>> = self
            .selectors
            .get(&pod.namespace)
            .into_iter()
            .flatten()
            .filter(|((kind, name), selector)| match kind {
                Watched::Services => selector.iter().all(|(k, v)| pod.labels.get(k) == Some(v)),
                _ => controller(kind, name),
            })
            .map(|(_, selector)| selector.clone())
            .collect();
        self.groups.matching(&pod.namespace, &selectors)
    }

    /// The pod `uid` as it is counted on `node` (known or not yet).
    fn counted_on(&self, node: &str, uid: &str) -> Option<&PodInfo> {
        let known = self.node_index.get(node).and_then(|i| self.nodes[*i].pod(uid));
        known.or_else(|| self.before_their_node.get(node)?.get(uid))
    }

    /// Retries the unschedulable pods that `placed`, a pod now on a node, may let in: those
    /// whose required affinity or spread constraints select it, and, when it was `before`
    /// with other labels, those whose required anti-affinity or spread constraints selected
    /// it then (kube-scheduler's queueing hints for an assigned pod; one kept out by
    /// anti-affinity otherwise waits for a pod to go).
    fn retry_waiting_for(&mut self, placed: &PodInfo, before: Option<&PodInfo>) {
        if self.waiting_on_pods.is_empty() {
            return;
        }
        let queue = &self.queue;
        self.waiting_on_pods.retain(|uid| queue.get(uid).is_some());
        let (waiting, namespaces) = (&self.waiting_on_pods, &self.namespace_labels);
        let affinity = |pod: &PodInfo| {
            pod.pod_affinity.as_ref().is_some_and(|a| {
                a.requires(placed, namespaces) || before.is_some_and(|b| a.refuses(b, namespaces))
            })
        };
        let spread = |pod: &PodInfo| {
            let counted = |c: &SpreadConstraint| {
                c.counts(pod, placed) || before.is_some_and(|b| c.counts(pod, b))
            };
            pod.spread.iter().any(counted)
        };
        let drawn = |pod: &PodInfo| waiting.contains(&pod.uid) && (affinity(pod) || spread(pod));
        self.queue.move_unschedulable_if(Instant::now(), drawn);
    }

    /// Why `pod` cannot be placed on any node for its claims (kube-scheduler's VolumeBinding
    /// pre-filter: a claim that does not exist, or is not bound yet), if so.
    fn unready_claims(&self, pod: &PodInfo) -> Option<String> {
        let mut unbound = false;
        for claim in &pod.claims {
            match self.claims.get(&(pod.namespace.clone(), claim.clone())) {
                None => return Some(format!("persistentvolumeclaim \"{claim}\" not found")),
                Some(ClaimState::Deleting) => {
                    return Some(format!("persistentvolumeclaim \"{claim}\" is being deleted"))
                }
                Some(ClaimState::Unbound) => unbound = true,
                Some(ClaimState::Bound) => {}
            }
        }
        unbound.then(|| "pod has unbound immediate PersistentVolumeClaims".to_string())
    }

    /// The pods other than `pod` that use one of its `ReadWriteOncePod` claims, by node index
    /// and uid (kube-scheduler's VolumeRestrictions counts them across the cluster).
    fn claim_holders(&self, pod: &PodInfo) -> Vec<(usize, String)> {
        let exclusive =
            |claim: &String| self.once_per_pod.contains(&(pod.namespace.clone(), claim.clone()));
        let claims: Vec<&String> = pod.claims.iter().filter(|c| exclusive(c)).collect();
        if claims.is_empty() {
            return Vec::new();
        }
        let mut holders = Vec::new();
        for (i, node) in self.nodes.iter().enumerate() {
            for other in node.pods() {
                let shares = other.namespace == pod.namespace
                    && other.uid != pod.uid
                    && other.claims.iter().any(|c| claims.contains(&c));
                if shares {
                    holders.push((i, other.uid.clone()));
                }
            }
        }
        holders
    }

    /// The node affinities of the volumes `pod`'s bound claims name (kube-scheduler's
    /// VolumeBinding filter checks each node against them).
    fn volume_affinities(&self, pod: &PodInfo) -> Vec<&NodeSelector> {
        let claims = pod.claims.iter().map(|claim| (pod.namespace.clone(), claim.clone()));
        claims
            .filter_map(|key| self.claim_volumes.get(&key))
            .filter_map(|volume| self.volume_affinity.get(volume))
            .collect()
    }

    /// Schedules one pod: the best feasible node, assumed at once and bound in the background.
    fn schedule_one(&mut self, pod: Arc<PodInfo>, ctx: &mut Context<Self>) {
        let total = self.nodes.len();
        let named = pod.required_affinity.as_ref().and_then(NodeSelector::named_nodes);
        let conflict = named.as_ref().is_some_and(BTreeSet::is_empty);
        let prefilter_failure = match conflict {
            true => Some("pod affinity terms conflict".to_string()),
            false => self.unready_claims(&pod),
        };
        if let Some(why) = prefilter_failure {
            // No node can help, nor preemption (kube-scheduler's PreFilter failure).
            let mut message = format!("0/{total} nodes are available: {why}.");
            if total > 0 {
                let refusal = preemption::refusal_everywhere(&pod, total);
                message.push_str(&format!(" preemption: {}.", refusal.message()));
            }
            self.stats.unschedulable += 1;
            self.report_unschedulable(&pod, message, Nomination::Keep, ctx);
            return;
        }
        let wanted = self.nodes_to_find();
        let mut feasible: Vec<usize> = Vec::with_capacity(wanted.min(total));
        let mut failures: Vec<(usize, Vec<FitFailure>)> = Vec::new();
        let mut examined = 0;
        // The filters that count pods across the cluster, prepared once for this pod.
        let spread = SpreadFilter::new(&pod, &self.nodes);
        let affinity = AffinityFilter::new(&pod, &self.nodes, &self.namespace_labels);
        let cluster_wide = |node: &NodeInfo| {
            spread.as_ref().map_or(Ok(()), |f| f.check(node))?;
            affinity.as_ref().map_or(Ok(()), |f| f.check(node))
        };
        // Its volumes' node affinity, after the node's own filters, as VolumeBinding runs.
        let volumes = self.volume_affinities(&pod);
        let volumes_allow = |node: &NodeInfo| match volumes
            .iter()
            .all(|selector| selector.matches(&node.name, &node.labels))
        {
            true => Ok(()),
            false => Err(vec![FitFailure::VolumeNodeAffinityConflict]),
        };
        // A `ReadWriteOncePod` claim another pod uses: no node will do while it does (only
        // preemption of every such pod, all on one node, makes room).
        let holders = self.claim_holders(&pod);
        let claim_free = |at: Option<usize>, node: &NodeInfo| {
            let held =
                |(i, uid): &(usize, String)| at != Some(*i) || node.pods().any(|p| p.uid == *uid);
            match holders.iter().any(held) {
                true => Err(vec![FitFailure::ReadWriteOncePodConflict]),
                false => Ok(()),
            }
        };
        let fits = |node: &NodeInfo| {
            filters::filter(&pod, node)
                .and_then(|()| claim_free(None, node))
                .and_then(|()| volumes_allow(node))
                .and_then(|()| cluster_wide(node).map_err(|f| vec![f]))
        };
        // Room made by a preemption is kept for the pod that made it from pods of no higher
        // priority (kube-scheduler's nominated pods).
        let reserved = |node: &NodeInfo| -> Option<NodeInfo> {
            let mut holders = (self.nominated.iter())
                .filter(|(uid, (at, holder))| {
                    *at == node.name && **uid != pod.uid && holder.priority >= pod.priority
                })
                .peekable();
            holders.peek()?;
            let mut with_holders = node.clone();
            for (_, (_, holder)) in holders {
                with_holders.add_pod(holder.clone());
            }
            Some(with_holders)
        };
        let fit_at = |node: &NodeInfo| match reserved(node) {
            _ if named.as_ref().is_some_and(|named| !named.contains(&node.name)) => {
                Err(vec![FitFailure::NotNamed])
            }
            Some(with_holders) => fits(&with_holders),
            None => fits(node),
        };
        // The node a preemption made room on is tried first, and taken if the pod fits there
        // (kube-scheduler's `evaluateNominatedNode`): the room was made for it.
        let nominated_fit = self
            .nominated_node(&pod)
            .and_then(|name| self.nodes.iter().position(|node| node.name == name))
            .filter(|&i| fit_at(&self.nodes[i]).is_ok());
        for step in 0..if nominated_fit.is_some() { 0 } else { total } {
            let i = (self.next_start + step) % total;
            examined = step + 1;
            match fit_at(&self.nodes[i]) {
                Ok(()) => feasible.push(i),
                Err(reasons) => failures.push((i, reasons)),
            }
            if feasible.len() >= wanted {
                break;
            }
        }
        feasible.extend(nominated_fit);
        if total > 0 {
            self.next_start = (self.next_start + examined) % total;
        }
        if feasible.is_empty() {
            let reasons: Vec<Vec<FitFailure>> = failures.iter().map(|(_, f)| f.clone()).collect();
            let mut message = filters::unschedulable_message(total, &reasons);
            let mut nomination = Nomination::Keep;
            let mut plan = None;
            if total > 0 {
                let budgets: Vec<Budget> = self.budgets.values().cloned().collect();
                // Whether the pod fits node `i` with some of its pods gone (`reduced`): the
                // room held for others counted, and the pods across the cluster counted again
                // without those gone when the pod's placement depends on them.
                let fits_without = |i: usize, reduced: &NodeInfo| {
                    let held = reserved(reduced);
                    let reduced = held.as_ref().unwrap_or(reduced);
                    filters::filter(&pod, reduced)?;
                    claim_free(Some(i), reduced)?;
                    if spread.is_none() && affinity.is_none() {
                        return Ok(());
                    }
                    let mut view = self.nodes.clone();
                    view[i] = reduced.clone();
                    let spread = SpreadFilter::new(&pod, &view);
                    let affinity = AffinityFilter::new(&pod, &view, &self.namespace_labels);
                    spread.as_ref().map_or(Ok(()), |f| f.check(&view[i])).map_err(|f| vec![f])?;
                    affinity.as_ref().map_or(Ok(()), |f| f.check(&view[i])).map_err(|f| vec![f])
                };
                let nominated = self.nominated_node(&pod);
                let preempting = preemption::plan(
                    &pod,
                    nominated,
                    &self.nodes,
                    &failures,
                    &budgets,
                    fits_without,
                );
                match preempting {
                    Ok(found) => plan = Some(found),
                    Err(refusal) => {
                        message.push_str(&format!(" preemption: {}.", refusal.message()));
                        // No node would do: the one held for it is let go.
                        if matches!(refusal, Refusal::NoCandidate(_)) && nominated.is_some() {
                            nomination = Nomination::Clear;
                        }
                    }
                }
            }
            drop((spread, affinity));
            if let Some(plan) = plan {
                nomination = Nomination::Set(self.preempt(&pod, plan));
            }
            if nomination == Nomination::Clear {
                self.nominated.remove(&pod.uid);
            }
            self.stats.unschedulable += 1;
            self.report_unschedulable(&pod, message, nomination, ctx);
            return;
        }
        drop((spread, affinity));
        let candidates: Vec<&NodeInfo> = feasible.iter().map(|i| &self.nodes[*i]).collect();
        // A pod's own spread constraints, or else the system defaults.
        let topology_spread = match pod.spread.is_empty() {
            true => {
                let groups = self.default_spread_groups(&pod);
                topology_spread::default_scores(&pod, &groups, &candidates, &self.nodes)
            }
            false => topology_spread::scores(&pod, &candidates, &self.nodes),
        };
        let inter_pod_affinity =
            pod_affinity::scores(&pod, &candidates, &self.nodes, &self.namespace_labels);
        let context = ScoreContext { topology_spread, inter_pod_affinity };
        let scores = scores::score_nodes(&pod, &candidates, &context);
        let best = scores::pick_best(&scores, &mut self.rng).unwrap_or(0);
        let node = self.nodes[feasible[best]].name.clone();
        // Assume: the next decision already counts this pod on its node.
        self.nominated.remove(&pod.uid);
        self.groups.register(&pod);
        self.retry_waiting_for(&pod, None);
        self.nodes[feasible[best]].add_pod((*pod).clone());
        self.pod_node.insert(pod.uid.clone(), node.clone());
        self.in_flight += 1;
        let client = self.client.clone();
        let binding = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        });
        let (uid, namespace, name) = (pod.uid.clone(), pod.namespace.clone(), pod.name.clone());
        let addr = ctx.address();
        actix::spawn(async move {
            let result = client.bind(&namespace, &name, binding).await;
            let bound = result.is_ok();
            addr.do_send(BindDone { uid: uid.clone(), node: node.clone(), result });
            if bound {
                let note = format!("Successfully assigned {namespace}/{name} to {node}");
                let pod = ObjectRef::pod(namespace, name, uid);
                let (kind, reason, action) = (EventKind::Normal, "Scheduled", "Binding");
                let what = Action { kind, reason, action, note: &note };
                events::record_action(client.as_ref(), &pod, None, what, COMPONENT).await;
            }
        });
    }

    /// Writes why `pod` fits nowhere (and the node a preemption made room on for it, when
    /// `nominated`) and puts it aside until something changes.
    fn report_unschedulable(
        &mut self,
        pod: &PodInfo,
        message: String,
        nomination: Nomination,
        _ctx: &mut Context<Self>,
    ) {
        self.queue.unschedulable(&pod.uid, Instant::now());
        if pod.pod_affinity.is_some() || !pod.spread.is_empty() {
            self.waiting_on_pods.insert(pod.uid.clone());
        }
        let Some(queued) = self.queue.get_mut(&pod.uid) else { return };
        // The condition is written when it says something new; the event at every attempt, as
        // kube-scheduler records it (counted into its series), so that a pod pending for long
        // keeps a recent one.
        let news = queued.last_message.as_deref() != Some(message.as_str())
            || nomination != Nomination::Keep;
        queued.last_message = Some(message.clone());
        tracing::debug!(pod = %pod.name, %message, "unschedulable");
        let client = self.client.clone();
        let (uid, namespace, name) = (pod.uid.clone(), pod.namespace.clone(), pod.name.clone());
        // Already not scheduled (gated, or unschedulable before): the transition stands.
        let since = pod.unscheduled_since.clone().unwrap_or_else(|| json!(now()));
        actix::spawn(async move {
            let condition = json!({"type": "PodScheduled", "status": "False", "lastProbeTime": null,
                "lastTransitionTime": since, "reason": "Unschedulable", "message": message});
            // Merged by type: the pod's other conditions stay.
            let mut patch = json!({"status": {"conditions": [condition]}});
            match nomination {
                Nomination::Keep => {}
                Nomination::Set(node) => patch["status"]["nominatedNodeName"] = json!(node),
                Nomination::Clear => patch["status"]["nominatedNodeName"] = Value::Null,
            }
            let pods = resource("", "pods");
            let strategic = PatchType::StrategicMerge;
            let written = match news {
                true => client.patch(pods, &namespace, &name, strategic, &patch, true).await,
                false => Ok(Value::Null),
            };
            if let Err(error) = written {
                tracing::debug!(pod = %name, %error, "writing PodScheduled=False");
            }
            let pod = ObjectRef::pod(namespace, name, uid);
            let (kind, reason, action) = (EventKind::Warning, "FailedScheduling", "Scheduling");
            let what = Action { kind, reason, action, note: &truncated_note(&message) };
            events::record_action(client.as_ref(), &pod, None, what, COMPONENT).await;
        });
    }
}

/// An event's note cut to the 1,024 bytes events.k8s.io/v1 allows, ending in ` ...` when cut
/// (kube-scheduler's `truncateMessage`, for the reasons of many nodes).
fn truncated_note(message: &str) -> String {
    const MOST: usize = 1024;
    const SUFFIX: &str = " ...";
    if message.len() <= MOST {
        return message.to_string();
    }
    format!("{}{SUFFIX}", crate::model::text::prefix_within(message, MOST - SUFFIX.len()))
}

impl Scheduler {
    /// The node a preemption of `pod`'s made room on, if any (what the scheduler did, or what
    /// the pod's status says).
    fn nominated_node<'a>(&'a self, pod: &'a PodInfo) -> Option<&'a str> {
        let ours = self.nominated.get(&pod.uid).map(|(node, _)| node.as_str());
        ours.or(pod.nominated_node.as_deref())
    }

    /// Carries out a preemption for `pod`: each victim is marked (`DisruptionTarget`, reason
    /// `PreemptionByScheduler`), deleted with its grace period and told why (a `Preempted`
    /// event); the node keeps room for the pod. Returns the node's name, the pod's nominated
    /// node.
    fn preempt(&mut self, pod: &PodInfo, plan: Plan) -> String {
        let node = self.nodes[plan.node].name.clone();
        // Pods of lower priority the node was held for look again (kube-scheduler's
        // getLowerPriorityNominatedPods).
        let displaced: Vec<PodInfo> = (self.nominated.values())
            .filter(|(at, held)| *at == node && held.priority < pod.priority)
            .map(|(_, held)| held.clone())
            .collect();
        for held in displaced {
            self.nominated.remove(&held.uid);
            let client = self.client.clone();
            actix::spawn(async move {
                let patch = json!({"status": {"nominatedNodeName": null}});
                let pods = resource("", "pods");
                let (namespace, name) = (&held.namespace, &held.name);
                if let Err(error) =
                    client.patch(pods, namespace, name, PatchType::Merge, &patch, true).await
                {
                    tracing::debug!(pod = %name, %error, "clearing a nominated node");
                }
            });
        }
        self.nominated.insert(pod.uid.clone(), (node.clone(), pod.clone()));
        tracing::info!(pod = %pod.name, %node, victims = plan.victims.len(), "preempting");
        for victim in plan.victims {
            let client = self.client.clone();
            let message = format!("Preempted by pod {} on node {node}", pod.uid);
            let preemptor =
                ObjectRef::pod(pod.namespace.clone(), pod.name.clone(), pod.uid.clone());
            actix::spawn(async move {
                let (namespace, name, uid) = (victim.namespace, victim.name, victim.uid);
                let condition = json!({"type": "DisruptionTarget", "status": "True",
                    "reason": "PreemptionByScheduler",
                    "message": format!("{COMPONENT}: preempting to accommodate a higher priority pod"),
                    "lastTransitionTime": now()});
                let patch =
                    json!({"metadata": {"uid": uid}, "status": {"conditions": [condition]}});
                let pods = resource("", "pods");
                let strategic = PatchType::StrategicMerge;
                if let Err(error) =
                    client.patch(pods, &namespace, &name, strategic, &patch, true).await
                {
                    tracing::debug!(pod = %name, %error, "marking a preempted pod");
                }
                let options = DeleteOptions {
                    precondition_uid: Some(uid.clone()),
                    ..DeleteOptions::default()
                };
                match client.delete(pods, &namespace, &name, &options).await {
                    Ok(_) | Err(ApiError::NotFound { .. }) => {}
                    Err(error) => tracing::debug!(pod = %name, %error, "deleting a preempted pod"),
                }
                let victim = ObjectRef::pod(namespace, name, uid);
                let (kind, reason, action) = (EventKind::Normal, "Preempted", "Preempting");
                let what = Action { kind, reason, action, note: &message };
                let related = Some(&preemptor);
                events::record_action(client.as_ref(), &victim, related, what, COMPONENT).await;
            });
        }
        node
    }
}

/// What an unschedulable pod's `status.nominatedNodeName` becomes.
#[derive(Debug, PartialEq, Eq)]
enum Nomination {
    Keep,
    /// The node a preemption made room on.
    Set(String),
    /// None: no node would do.
    Clear,
}

/// A PodDisruptionBudget as preemption weighs it, by namespace and name.
fn budget(object: &Value) -> Option<((String, String), Budget)> {
    let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str).map(String::from);
    let (namespace, name) = (text("/metadata/namespace")?, text("/metadata/name")?);
    let disrupted = object.pointer("/status/disruptedPods").and_then(Value::as_object);
    let budget = Budget {
        namespace: namespace.clone(),
        selector: crate::model::disruption::pod_selector(object).unwrap_or_default(),
        allowed: object.pointer("/status/disruptionsAllowed").and_then(Value::as_i64).unwrap_or(0),
        disrupted: disrupted.into_iter().flatten().map(|(pod, _)| pod.clone()).collect(),
    };
    Some(((namespace, name), budget))
}

/// A namespace's name and labels.
fn namespace_labels(namespace: &Value) -> (String, BTreeMap<String, String>) {
    let name = namespace.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let labels = namespace.pointer("/metadata/labels").and_then(Value::as_object);
    let labels = labels.into_iter().flatten();
    let labels = labels.filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())));
    (name.to_string(), labels.collect())
}

fn claim_key(claim: &Value) -> (String, String) {
    let text = |pointer: &str| claim.pointer(pointer).and_then(Value::as_str).unwrap_or("");
    (text("/metadata/namespace").to_string(), text("/metadata/name").to_string())
}

/// Whether a claim's access modes include `ReadWriteOncePod`.
fn once_per_pod(claim: &Value) -> bool {
    let modes = claim.pointer("/spec/accessModes").and_then(Value::as_array);
    modes.into_iter().flatten().any(|m| m == "ReadWriteOncePod")
}

/// The volume a bound claim names.
fn bound_volume(claim: &Value) -> Option<String> {
    (ClaimState::of(claim) == ClaimState::Bound)
        .then(|| claim.pointer("/spec/volumeName").and_then(Value::as_str).map(String::from))
        .flatten()
}

/// A PersistentVolume's name and the nodes its required node affinity allows, when it has one.
fn volume_affinity(volume: &Value) -> Option<(String, NodeSelector)> {
    let required = volume.pointer("/spec/nodeAffinity/required")?;
    let required: k8s_openapi::api::core::v1::NodeSelector =
        serde_json::from_value(required.clone()).ok()?;
    let name = volume.pointer("/metadata/name").and_then(Value::as_str)?;
    Some((name.to_string(), NodeSelector::new(&required)))
}

/// What a claim is to the pods that use it (kube-scheduler's VolumeBinding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClaimState {
    /// Its volume is named and the binding completed: pods using it may be placed.
    Bound,
    Unbound,
    Deleting,
}

impl ClaimState {
    fn of(claim: &Value) -> Self {
        let text = |pointer: &str| claim.pointer(pointer).and_then(Value::as_str).unwrap_or("");
        let completed = claim.pointer("/metadata/annotations/pv.kubernetes.io~1bind-completed");
        if crate::model::is_being_deleted(claim) {
            ClaimState::Deleting
        } else if !text("/spec/volumeName").is_empty() && completed.is_some() {
            ClaimState::Bound
        } else {
            ClaimState::Unbound
        }
    }
}

/// What of a node can change where pods fit.
fn relevant(node: &NodeInfo) -> impl PartialEq {
    (node.allocatable, node.labels.clone(), node.taints.clone(), node.unschedulable)
}

impl Actor for Scheduler {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        for watched in ALL_WATCHED {
            let (group, plural, selector) = watched.source();
            let client = self.client.clone();
            let scope = selector.map(informer::Scope::fields).unwrap_or_default();
            let resource = resource(group, plural);
            informer::feed_actor(ctx, client, resource, scope, move |feed| Informed(watched, feed));
        }
        // Pods unschedulable for long are tried again whatever changed, as kube-scheduler
        // does after 5 minutes.
        ctx.run_interval(UNSCHEDULABLE_FLUSH_PERIOD, |scheduler, ctx| {
            scheduler.queue.flush_unschedulable(Instant::now(), LONGEST_UNSCHEDULABLE);
            scheduler.kick(ctx);
        });
    }
}

/// How long a pod stays unschedulable before it is tried again regardless.
const LONGEST_UNSCHEDULABLE: Duration = Duration::from_secs(300);
/// How often pods unschedulable for that long are looked for.
const UNSCHEDULABLE_FLUSH_PERIOD: Duration = Duration::from_secs(30);

impl Handler<Informed> for Scheduler {
    type Result = ();

    fn handle(&mut self, Informed(watched, feed): Informed, ctx: &mut Context<Self>) {
        let mut changed = false;
        if matches!(feed, Feed::Listed(_)) {
            self.listed.insert(watched);
        }
        match (watched, feed) {
            (Watched::Nodes, Feed::Listed(items)) => {
                let names: HashSet<String> = items
                    .iter()
                    .filter_map(|n| {
                        n.pointer("/metadata/name").and_then(Value::as_str).map(String::from)
                    })
                    .collect();
                let gone: Vec<String> = self
                    .nodes
                    .iter()
                    .map(|n| n.name.clone())
                    .filter(|n| !names.contains(n))
                    .collect();
                for name in gone {
                    self.remove_node(&name);
                }
                for item in items {
                    if let Ok(node) = serde_json::from_value::<Node>(item) {
                        changed |= self.upsert_node(&node);
                    }
                }
            }
            (Watched::Nodes, Feed::Changed(EventType::Deleted, item)) => {
                let name = item.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
                self.remove_node(name);
                // A domain gone may bring a spread back within its skew (kube-scheduler's
                // PodTopologySpread requeues on a node's deletion).
                let spread = |pod: &PodInfo| !pod.spread.is_empty();
                self.queue.move_unschedulable_if(Instant::now(), spread);
            }
            (Watched::Nodes, Feed::Changed(_, item)) => {
                if let Ok(node) = serde_json::from_value::<Node>(item) {
                    changed |= self.upsert_node(&node);
                }
            }
            (Watched::Pods, Feed::Listed(items)) => {
                let live: HashSet<String> = items
                    .iter()
                    .filter_map(|p| {
                        p.pointer("/metadata/uid").and_then(Value::as_str).map(String::from)
                    })
                    .collect();
                let gone: Vec<String> =
                    self.pod_node.keys().filter(|uid| !live.contains(*uid)).cloned().collect();
                for uid in gone {
                    changed |= self.unassign(&uid);
                    self.queue.remove(&uid);
                }
                self.nominated.retain(|uid, _| live.contains(uid));
                for item in items {
                    changed |= self.upsert_pod(item);
                }
            }
            (Watched::Pods, Feed::Changed(EventType::Deleted, item)) => {
                changed |= self.remove_pod(&item)
            }
            (Watched::Pods, Feed::Changed(_, item)) => changed |= self.upsert_pod(item),
            (_, Feed::Unavailable(_)) => {}
            (Watched::Claims, Feed::Listed(items)) => {
                self.claims = items.iter().map(|c| (claim_key(c), ClaimState::of(c))).collect();
                self.claim_volumes =
                    items.iter().filter_map(|c| Some((claim_key(c), bound_volume(c)?))).collect();
                self.once_per_pod =
                    items.iter().filter(|c| once_per_pod(c)).map(claim_key).collect();
                changed = true;
            }
            (Watched::Claims, Feed::Changed(EventType::Deleted, item)) => {
                self.claims.remove(&claim_key(&item));
                self.claim_volumes.remove(&claim_key(&item));
                self.once_per_pod.remove(&claim_key(&item));
            }
            (Watched::Claims, Feed::Changed(_, item)) => {
                // A claim that now exists, or is now bound, may be what a pod waits for.
                let state = ClaimState::of(&item);
                changed |= self.claims.insert(claim_key(&item), state) != Some(state);
                match once_per_pod(&item) {
                    true => self.once_per_pod.insert(claim_key(&item)),
                    false => self.once_per_pod.remove(&claim_key(&item)),
                };
                match bound_volume(&item) {
                    Some(volume) => self.claim_volumes.insert(claim_key(&item), volume),
                    None => self.claim_volumes.remove(&claim_key(&item)),
                };
            }
            (Watched::Volumes, Feed::Listed(items)) => {
                self.volume_affinity = items.iter().filter_map(volume_affinity).collect();
                changed = true;
            }
            (Watched::Volumes, Feed::Changed(EventType::Deleted, item)) => {
                let name = item.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
                changed |= self.volume_affinity.remove(name).is_some();
            }
            (Watched::Volumes, Feed::Changed(_, item)) => {
                let name = item.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
                let before = self.volume_affinity.remove(name);
                let now = volume_affinity(&item).map(|(_, selector)| selector);
                changed |= before != now;
                if let Some(selector) = now {
                    self.volume_affinity.insert(name.to_string(), selector);
                }
            }
            (Watched::Budgets, Feed::Listed(items)) => {
                self.budgets = items.iter().filter_map(budget).collect();
            }
            (Watched::Budgets, Feed::Changed(EventType::Deleted, item)) => {
                if let Some((key, _)) = budget(&item) {
                    self.budgets.remove(&key);
                }
            }
            (Watched::Budgets, Feed::Changed(_, item)) => {
                if let Some((key, value)) = budget(&item) {
                    self.budgets.insert(key, value);
                }
            }
            (Watched::Namespaces, Feed::Listed(items)) => {
                self.namespace_labels = items.iter().map(namespace_labels).collect();
                self.namespaces_changed = true;
            }
            (Watched::Namespaces, Feed::Changed(EventType::Deleted, item)) => {
                self.namespace_labels.remove(&namespace_labels(&item).0);
            }
            (Watched::Namespaces, Feed::Changed(_, item)) => {
                let (name, labels) = namespace_labels(&item);
                self.namespaces_changed |=
                    self.namespace_labels.insert(name, labels.clone()) != Some(labels);
            }
            (kind, Feed::Listed(items)) => self.relist_selectors(kind, &items),
            (kind, Feed::Changed(event, item)) => {
                self.set_selector(kind, &item, event != EventType::Deleted);
            }
        }
        if changed {
            self.queue.move_unschedulable(Instant::now());
        } else if self.namespaces_changed {
            let waiting = &self.waiting_on_pods;
            self.queue.move_unschedulable_if(Instant::now(), |p| waiting.contains(&p.uid));
        }
        self.namespaces_changed = false;
        self.kick(ctx);
    }
}

impl Handler<Schedule> for Scheduler {
    type Result = ();

    fn handle(&mut self, _: Schedule, ctx: &mut Context<Self>) {
        self.schedule_queued = false;
        let now = Instant::now();
        self.queue.flush_backoff(now);
        // A batch at a time, so informer events are handled in between.
        for _ in 0..64 {
            if self.in_flight >= self.config.max_in_flight_binds {
                break;
            }
            let Some(pod) = self.queue.pop() else { break };
            self.schedule_one(pod, ctx);
        }
        if self.queue.has_active() && self.in_flight < self.config.max_in_flight_binds {
            self.kick(ctx);
        } else if let Some(at) = self.queue.next_backoff() {
            ctx.run_later(
                at.saturating_duration_since(now) + Duration::from_millis(1),
                |act, ctx| act.kick(ctx),
            );
        }
    }
}

impl Handler<BindDone> for Scheduler {
    type Result = ();

    fn handle(&mut self, msg: BindDone, ctx: &mut Context<Self>) {
        self.in_flight -= 1;
        match msg.result {
            Ok(()) => {
                self.stats.bound += 1;
                self.queue.remove(&msg.uid);
            }
            Err(ApiError::NotFound { .. }) => {
                self.unassign(&msg.uid);
                self.queue.remove(&msg.uid);
            }
            Err(ApiError::Conflict { ref message, .. }) if message.contains("already assigned") => {
                // Someone else bound it; the pod watch brings where.
                self.unassign(&msg.uid);
                self.queue.remove(&msg.uid);
            }
            Err(error) => {
                tracing::warn!(pod = %msg.uid, node = %msg.node, %error, "bind failed; retrying");
                self.stats.bind_failures += 1;
                self.unassign(&msg.uid);
                self.queue.back_off(&msg.uid, Instant::now());
            }
        }
        self.kick(ctx);
    }
}

impl Handler<GetStats> for Scheduler {
    type Result = MessageResult<GetStats>;

    fn handle(&mut self, _: GetStats, _: &mut Context<Self>) -> Self::Result {
        let mut stats = self.stats.clone();
        stats.pending = self.queue.len();
        stats.nodes = self.nodes.len();
        MessageResult(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix::test]
    async fn a_namespace_whose_services_and_controllers_are_gone_leaves_no_selectors() {
        let core = crate::testing::core().await;
        let mut scheduler = Scheduler::new(Arc::new(core), SchedulerConfig::default());
        let owner = |namespace: &str, name: &str| {
            json!({"metadata": {"name": name, "namespace": namespace},
                "spec": {"selector": {"app": name}}})
        };
        scheduler.set_selector(Watched::Services, &owner("a", "web"), true);
        scheduler.set_selector(Watched::ReplicationControllers, &owner("a", "web"), true);
        scheduler.set_selector(Watched::Services, &owner("b", "db"), true);
        assert_eq!(scheduler.selectors.len(), 2);

        scheduler.set_selector(Watched::Services, &owner("a", "web"), false);
        assert_eq!(scheduler.selectors["a"].len(), 1, "the controller's selector stays");
        scheduler.set_selector(Watched::ReplicationControllers, &owner("a", "web"), false);
        assert!(!scheduler.selectors.contains_key("a"), "an emptied namespace is dropped");
        scheduler.set_selector(Watched::Services, &owner("c", "gone"), false);
        assert!(!scheduler.selectors.contains_key("c"), "a delete adds nothing");

        scheduler.relist_selectors(Watched::Services, &[]);
        assert!(scheduler.selectors.is_empty(), "a list without b's service empties b");
    }

    #[actix::test]
    async fn a_bound_pod_seen_again_is_read_again_only_when_something_the_scheduler_uses_changed() {
        let core = crate::testing::core().await;
        let mut scheduler = Scheduler::new(Arc::new(core), SchedulerConfig::default());
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}))
        .unwrap();
        scheduler.upsert_node(&node);
        let pod = json!({"metadata": {"name": "p", "namespace": "default", "uid": "u1",
            "labels": {"app": "a"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Pending"}});
        assert!(!scheduler.already_counted(&pod), "not counted before it was seen");
        scheduler.upsert_pod(pod.clone());
        assert!(scheduler.already_counted(&pod));

        let changed = |edit: fn(&mut Value)| {
            let mut pod = pod.clone();
            edit(&mut pod);
            pod
        };
        let running = changed(|p| p["status"]["phase"] = json!("Running"));
        assert!(scheduler.already_counted(&running), "a status update changes nothing here");
        for (what, other) in [
            ("a label's value", changed(|p| p["metadata"]["labels"]["app"] = json!("b"))),
            ("one more label", changed(|p| p["metadata"]["labels"]["tier"] = json!("x"))),
            ("no labels", changed(|p| p["metadata"]["labels"] = json!({}))),
            ("terminating", changed(|p| p["metadata"]["deletionTimestamp"] = json!("now"))),
            ("finished", changed(|p| p["status"]["phase"] = json!("Succeeded"))),
            ("another node", changed(|p| p["spec"]["nodeName"] = json!("n2"))),
            ("another pod", changed(|p| p["metadata"]["uid"] = json!("u2"))),
        ] {
            assert!(!scheduler.already_counted(&other), "{what}");
        }
    }

    #[actix::test]
    async fn a_pod_seen_before_its_node_is_counted_on_it_once_the_node_is_known() {
        let core = crate::testing::core().await;
        let mut scheduler = Scheduler::new(Arc::new(core), SchedulerConfig::default());
        let pod = |uid: &str| {
            json!({"metadata": {"name": uid, "namespace": "default", "uid": uid},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i",
                    "resources": {"requests": {"cpu": "1"}}}]},
                "status": {"phase": "Running"}})
        };
        scheduler.upsert_pod(pod("early"));
        scheduler.upsert_pod(pod("gone"));
        scheduler.remove_pod(&pod("gone"));
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}))
        .unwrap();
        scheduler.upsert_node(&node);
        let counted: Vec<&str> = scheduler.nodes[0].pods().map(|p| p.uid.as_str()).collect();
        assert_eq!(counted, ["early"]);
    }
}
