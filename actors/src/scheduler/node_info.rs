//! What the scheduler knows of one pod ([`PodInfo`]) and of one node with the pods bound to it
//! ([`NodeInfo`]), in the form the filters and scores read.
//!
//! Everything costly (quantity parsing, compiling selectors and tolerations, summing requests)
//! happens once, in [`PodInfo::new`] and [`NodeInfo::new`]; a node's aggregates (requested
//! resources, host ports in use, label groups for spreading) are updated as pods are added
//! and removed, so a scheduling decision only reads integers and compares borrowed strings.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, Node, NodeSelectorRequirement, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::pod_affinity::PodAffinity;
use super::topology_spread::SpreadConstraint;
use crate::model::taints::{self, Taint, TaintEffect, Toleration};
use crate::model::{quantity, LabelSelector};

/// CPU counted for a container without a cpu request when spreading by allocation (100m).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// Memory counted for a container without a memory request when spreading by allocation.
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;
/// The one field node selector terms may match on (`matchFields`).
pub const FIELD_NODE_NAME: &str = "metadata.name";

const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
const LABEL_ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
const LABEL_REGION: &str = "topology.kubernetes.io/region";
const LABEL_REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";

// === impl Resources ===

/// Amounts of the resources the scheduler accounts for.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Resources {
    /// CPU in millicores.
    pub milli_cpu: i64,
    /// Memory in bytes.
    pub memory: i64,
    /// Local ephemeral storage in bytes.
    pub ephemeral_storage: i64,
    /// Number of pods.
    pub pods: i64,
}

impl Resources {
    /// Each field the larger of `self`'s and `other`'s.
    pub fn component_max(self, other: Resources) -> Resources {
        Resources {
            milli_cpu: self.milli_cpu.max(other.milli_cpu),
            memory: self.memory.max(other.memory),
            ephemeral_storage: self.ephemeral_storage.max(other.ephemeral_storage),
            pods: self.pods.max(other.pods),
        }
    }

    /// True when cpu, memory and ephemeral storage are all zero (the pod count is ignored).
    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0 && self.memory == 0 && self.ephemeral_storage == 0
    }

    /// The resources of a Kubernetes resource list (`requests`, `allocatable`, ...); unknown
    /// names are ignored and unparseable quantities count as 0.
    pub fn from_list(list: &BTreeMap<String, Quantity>) -> Resources {
        let get = |name: &str, parse: fn(&str) -> Result<i64, quantity::QuantityError>| {
            list.get(name).and_then(|q| parse(&q.0).ok()).unwrap_or(0)
        };
        Resources {
            milli_cpu: get("cpu", quantity::milli_value),
            memory: get("memory", quantity::value),
            ephemeral_storage: get("ephemeral-storage", quantity::value),
            pods: get("pods", quantity::value),
        }
    }
}

// Saturating, so that absurd quantities can never panic the scheduler.
impl Add for Resources {
    type Output = Resources;

    fn add(self, rhs: Resources) -> Resources {
        Resources {
            milli_cpu: self.milli_cpu.saturating_add(rhs.milli_cpu),
            memory: self.memory.saturating_add(rhs.memory),
            ephemeral_storage: self.ephemeral_storage.saturating_add(rhs.ephemeral_storage),
            pods: self.pods.saturating_add(rhs.pods),
        }
    }
}

impl Sub for Resources {
    type Output = Resources;

    fn sub(self, rhs: Resources) -> Resources {
        Resources {
            milli_cpu: self.milli_cpu.saturating_sub(rhs.milli_cpu),
            memory: self.memory.saturating_sub(rhs.memory),
            ephemeral_storage: self.ephemeral_storage.saturating_sub(rhs.ephemeral_storage),
            pods: self.pods.saturating_sub(rhs.pods),
        }
    }
}

impl AddAssign for Resources {
    fn add_assign(&mut self, rhs: Resources) {
        *self = *self + rhs;
    }
}

impl SubAssign for Resources {
    fn sub_assign(&mut self, rhs: Resources) {
        *self = *self - rhs;
    }
}

/// What `pod` requests, as Kubernetes computes it: per resource, the larger of the sum over
/// the containers (plus restartable init containers, "sidecars") and of what each init
/// container needs while it runs; plus `spec.overhead`; `pods` is 1.
///
/// A resource with a limit but no request counts its limit, as API defaulting would have set
/// it. Unparseable quantities count as 0 (validation rejects them before they get here).
pub fn pod_requests(pod: &Pod) -> Resources {
    compute_requests(pod, None)
}

/// [`pod_requests`] where a container that requests no cpu (memory) counts
/// [`DEFAULT_MILLI_CPU_REQUEST`] ([`DEFAULT_MEMORY_REQUEST`]): what kube-scheduler uses to
/// score by allocation, so that pods without requests still spread.
pub fn pod_non_zero_requests(pod: &Pod) -> Resources {
    compute_requests(pod, Some((DEFAULT_MILLI_CPU_REQUEST, DEFAULT_MEMORY_REQUEST)))
}

fn compute_requests(pod: &Pod, defaults: Option<(i64, i64)>) -> Resources {
    let Some(spec) = &pod.spec else {
        return Resources { pods: 1, ..Resources::default() };
    };
    let mut total = pod_total(spec, |container| container_requests(container, defaults));
    total.pods = 1;
    total
}

/// What `pod` requests of the [`ScalarResources`] (extended resources, huge pages), computed
/// as [`pod_requests`] is.
pub fn pod_scalar_requests(pod: &Pod) -> ScalarResources {
    pod.spec.as_ref().map(|spec| pod_total(spec, container_scalar_requests)).unwrap_or_default()
}

/// Per-resource amounts that add up and take maxima: what a pod's requests are summed in.
trait Amounts: Clone + Default {
    fn add(&mut self, other: &Self);
    fn max_with(&mut self, other: &Self);
    fn of_list(list: &BTreeMap<String, Quantity>) -> Self;
}

impl Amounts for Resources {
    fn add(&mut self, other: &Self) {
        *self += *other;
    }

    fn max_with(&mut self, other: &Self) {
        *self = self.component_max(*other);
    }

    fn of_list(list: &BTreeMap<String, Quantity>) -> Self {
        Resources::from_list(list)
    }
}

/// A pod's total of what each container needs, as Kubernetes sums requests: the containers
/// and the restartable init containers ("sidecars") together, or what each init container
/// needs while it runs beside the sidecars started before it, whichever is more; plus
/// `spec.overhead`.
fn pod_total<A: Amounts>(spec: &PodSpec, container: impl Fn(&Container) -> A) -> A {
    let mut total = A::default();
    for c in &spec.containers {
        total.add(&container(c));
    }
    let mut sidecars = A::default();
    let mut init_peak = A::default();
    for c in spec.init_containers.iter().flatten() {
        let mut running = container(c);
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars.add(&running);
            running = sidecars.clone();
        } else {
            running.add(&sidecars);
        }
        init_peak.max_with(&running);
    }
    total.add(&sidecars);
    total.max_with(&init_peak);
    if let Some(overhead) = &spec.overhead {
        total.add(&A::of_list(overhead));
    }
    total
}

fn container_requests(container: &Container, defaults: Option<(i64, i64)>) -> Resources {
    let resources = container.resources.as_ref();
    let requests = resources.and_then(|r| r.requests.as_ref());
    let limits = resources.and_then(|r| r.limits.as_ref());
    let get = |name: &str| requests.and_then(|l| l.get(name)).or_else(|| limits?.get(name));
    let parse = |q: Option<&Quantity>, f: fn(&str) -> Result<i64, quantity::QuantityError>| {
        q.map(|q| f(&q.0).unwrap_or(0))
    };
    let (default_cpu, default_memory) = defaults.map_or((None, None), |(c, m)| (Some(c), Some(m)));
    Resources {
        milli_cpu: parse(get("cpu"), quantity::milli_value).or(default_cpu).unwrap_or(0),
        memory: parse(get("memory"), quantity::value).or(default_memory).unwrap_or(0),
        ephemeral_storage: parse(get("ephemeral-storage"), quantity::value).unwrap_or(0),
        pods: 0,
    }
}

/// A container's requests of scalar resources: each one's request, or its limit when it has
/// no request (as API defaulting would have set it).
fn container_scalar_requests(container: &Container) -> ScalarResources {
    let resources = container.resources.as_ref();
    let requests = resources.and_then(|r| r.requests.as_ref());
    let limits = resources.and_then(|r| r.limits.as_ref());
    let mut scalar = requests.map(ScalarResources::of_list).unwrap_or_default();
    for (name, amount) in limits.map(ScalarResources::of_list).unwrap_or_default().0 {
        scalar.0.entry(name).or_insert(amount);
    }
    scalar
}

// === impl ScalarResources ===

/// Amounts of the resources a node advertises and pods request by name, besides cpu, memory,
/// ephemeral storage and pods: extended resources (`example.com/dongle`), huge pages. Kept
/// apart from [`Resources`] so that the common case, none, costs nothing.
#[derive(Clone, Default, Debug, PartialEq, Eq)]
pub struct ScalarResources(BTreeMap<String, i64>);

impl ScalarResources {
    /// Whether `name` is one of them rather than a resource [`Resources`] accounts for (or
    /// `storage`, a claim's).
    pub fn is_scalar(name: &str) -> bool {
        !matches!(name, "cpu" | "memory" | "ephemeral-storage" | "pods" | "storage")
    }

    /// The scalar resources of a resource list; unparseable quantities count as 0.
    pub fn of_list(list: &BTreeMap<String, Quantity>) -> Self {
        let scalar = list.iter().filter(|(name, _)| Self::is_scalar(name));
        Self(scalar.map(|(name, q)| (name.clone(), quantity::value(&q.0).unwrap_or(0))).collect())
    }

    /// The amount of `name` (0 when absent).
    pub fn get(&self, name: &str) -> i64 {
        self.0.get(name).copied().unwrap_or(0)
    }

    /// Each resource with its amount, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        self.0.iter().map(|(name, amount)| (name.as_str(), *amount))
    }

    fn subtract(&mut self, other: &Self) {
        for (name, amount) in &other.0 {
            let left = self.0.entry(name.clone()).or_default();
            *left = left.saturating_sub(*amount);
            if *left == 0 {
                self.0.remove(name);
            }
        }
    }
}

impl Amounts for ScalarResources {
    fn add(&mut self, other: &Self) {
        for (name, amount) in &other.0 {
            let sum = self.0.entry(name.clone()).or_default();
            *sum = sum.saturating_add(*amount);
        }
    }

    fn max_with(&mut self, other: &Self) {
        for (name, amount) in &other.0 {
            let max = self.0.entry(name.clone()).or_default();
            *max = (*max).max(*amount);
        }
    }

    fn of_list(list: &BTreeMap<String, Quantity>) -> Self {
        ScalarResources::of_list(list)
    }
}

// === Node selectors ===

/// A compiled node selector requirement operator, with its values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SelectorOperator {
    /// The value is one of these.
    In(Vec<String>),
    /// The key is absent or its value is none of these.
    NotIn(Vec<String>),
    /// The key is present.
    Exists,
    /// The key is absent.
    DoesNotExist,
    /// The value is an integer greater than this one.
    Gt(i64),
    /// The value is an integer less than this one.
    Lt(i64),
}

/// One requirement of a node selector term.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectorRequirement {
    /// The label (or field) key.
    pub key: String,
    /// What its value must be.
    pub operator: SelectorOperator,
}

impl SelectorRequirement {
    /// Compiles a label requirement; `None` when it is invalid (and so matches nothing).
    fn label(r: &NodeSelectorRequirement) -> Option<SelectorRequirement> {
        let values = r.values.as_deref().unwrap_or(&[]);
        let single_int = || match values {
            [v] => v.parse::<i64>().ok(),
            _ => None,
        };
        let operator = match r.operator.as_str() {
            "In" if !values.is_empty() => SelectorOperator::In(values.to_vec()),
            "NotIn" if !values.is_empty() => SelectorOperator::NotIn(values.to_vec()),
            "Exists" if values.is_empty() => SelectorOperator::Exists,
            "DoesNotExist" if values.is_empty() => SelectorOperator::DoesNotExist,
            "Gt" => SelectorOperator::Gt(single_int()?),
            "Lt" => SelectorOperator::Lt(single_int()?),
            _ => return None,
        };
        Some(SelectorRequirement { key: r.key.clone(), operator })
    }

    /// Compiles a field requirement: only `metadata.name` with `In`/`NotIn` and one value.
    fn field(r: &NodeSelectorRequirement) -> Option<SelectorRequirement> {
        let values = r.values.as_deref().unwrap_or(&[]);
        if r.key != FIELD_NODE_NAME || values.len() != 1 {
            return None;
        }
        match r.operator.as_str() {
            "In" | "NotIn" => SelectorRequirement::label(r),
            _ => None,
        }
    }

    /// Whether a key whose value is `value` (`None`: absent) satisfies the requirement.
    pub fn matches(&self, value: Option<&str>) -> bool {
        match (&self.operator, value) {
            (SelectorOperator::In(values), Some(v)) => values.iter().any(|x| x == v),
            (SelectorOperator::In(_), None) => false,
            (SelectorOperator::NotIn(values), Some(v)) => !values.iter().any(|x| x == v),
            (SelectorOperator::NotIn(_), None) => true,
            (SelectorOperator::Exists, v) => v.is_some(),
            (SelectorOperator::DoesNotExist, v) => v.is_none(),
            (SelectorOperator::Gt(bound), Some(v)) => v.parse::<i64>().is_ok_and(|v| v > *bound),
            (SelectorOperator::Lt(bound), Some(v)) => v.parse::<i64>().is_ok_and(|v| v < *bound),
            (SelectorOperator::Gt(_) | SelectorOperator::Lt(_), None) => false,
        }
    }
}

/// A compiled node selector term: all its requirements must hold (ANDed).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSelectorTerm {
    /// Requirements on node labels.
    pub match_expressions: Vec<SelectorRequirement>,
    /// Requirements on node fields (`metadata.name`).
    pub match_fields: Vec<SelectorRequirement>,
}

impl NodeSelectorTerm {
    /// Compiles a term; `None` for a term that can match no node (empty, or with an invalid
    /// requirement), which Kubernetes treats the same way.
    pub fn new(term: &k8s_openapi::api::core::v1::NodeSelectorTerm) -> Option<NodeSelectorTerm> {
        let expressions = term.match_expressions.as_deref().unwrap_or(&[]);
        let fields = term.match_fields.as_deref().unwrap_or(&[]);
        if expressions.is_empty() && fields.is_empty() {
            return None;
        }
        Some(NodeSelectorTerm {
            match_expressions: expressions
                .iter()
                .map(SelectorRequirement::label)
                .collect::<Option<_>>()?,
            match_fields: fields.iter().map(SelectorRequirement::field).collect::<Option<_>>()?,
        })
    }

    /// Whether the node named `name` with `labels` satisfies every requirement.
    pub fn matches(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.match_expressions.iter().all(|r| r.matches(labels.get(&r.key).map(String::as_str)))
            && self.match_fields.iter().all(|r| r.matches(Some(name)))
    }
}

/// A required node selector: the node must match one of the terms (ORed); with no
/// (valid) terms it matches no node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeSelector {
    /// The terms that can match, invalid ones left out.
    pub terms: Vec<NodeSelectorTerm>,
    /// Some terms were left out (an empty one, one with an invalid requirement): they name
    /// no nodes.
    left_out: bool,
}

impl NodeSelector {
    /// Compiles a selector (a pod's required node affinity, a volume's node affinity).
    pub fn new(selector: &k8s_openapi::api::core::v1::NodeSelector) -> NodeSelector {
        let raw = &selector.node_selector_terms;
        let terms: Vec<NodeSelectorTerm> = raw.iter().filter_map(NodeSelectorTerm::new).collect();
        NodeSelector { left_out: terms.len() < raw.len(), terms }
    }

    /// Whether the node named `name` with `labels` matches one of the terms.
    pub fn matches(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.terms.iter().any(|t| t.matches(name, labels))
    }

    /// The only nodes that may match, when every term names its nodes (`matchFields`
    /// `metadata.name In`, a DaemonSet's pods' way): kube-scheduler's NodeAffinity PreFilter,
    /// which leaves the others out without filtering them. `None` when a term names none (any
    /// node may do, the filter judges them: an empty term matches none); empty when the names of each term's requirements have none in common.
    pub fn named_nodes(&self) -> Option<BTreeSet<String>> {
        if self.left_out {
            return None;
        }
        let mut named = BTreeSet::new();
        for term in &self.terms {
            let mut term_names: Option<BTreeSet<String>> = None;
            for requirement in &term.match_fields {
                let SelectorOperator::In(values) = &requirement.operator else { continue };
                let values: BTreeSet<String> = values.iter().cloned().collect();
                term_names = Some(match term_names {
                    Some(names) => names.intersection(&values).cloned().collect(),
                    None => values,
                });
            }
            named.extend(term_names?);
        }
        Some(named)
    }
}

/// A preferred node affinity term and its weight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreferredTerm {
    /// Added to a node's score when the term matches (1..=100).
    pub weight: i64,
    /// The term.
    pub term: NodeSelectorTerm,
}

// === Host ports ===

/// The protocol of a host port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// TCP (the default).
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl Protocol {
    /// The protocol named `s`; "" and unknown names (rejected by validation) are TCP.
    pub fn parse(s: &str) -> Protocol {
        match s {
            "UDP" => Protocol::Udp,
            "SCTP" => Protocol::Sctp,
            _ => Protocol::Tcp,
        }
    }
}

/// The host IP that means "every address".
pub const BIND_ALL_HOST_IP: &str = "0.0.0.0";

/// A port a container binds on its node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostPort {
    /// The address, [`BIND_ALL_HOST_IP`] when unset.
    pub host_ip: String,
    /// The protocol.
    pub protocol: Protocol,
    /// The port number (> 0).
    pub port: i32,
}

// === impl PodInfo ===

/// What the scheduler needs of one pod, computed once from the object.
#[derive(Clone, Debug)]
pub struct PodInfo {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// See [`pod_requests`].
    pub requests: Resources,
    /// See [`pod_non_zero_requests`].
    pub non_zero_requests: Resources,
    /// See [`pod_scalar_requests`].
    pub scalar_requests: ScalarResources,
    /// Host ports of the containers (those with `hostPort` > 0).
    pub host_ports: Vec<HostPort>,
    /// `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// Required node affinity, if any.
    pub required_affinity: Option<NodeSelector>,
    /// Preferred node affinity terms (invalid ones left out).
    pub preferred_affinity: Vec<PreferredTerm>,
    /// Tolerations (those that cannot tolerate anything left out).
    pub tolerations: Vec<Toleration>,
    /// Inter-pod affinity and anti-affinity terms, if any.
    pub pod_affinity: Option<Arc<PodAffinity>>,
    /// `spec.topologySpreadConstraints`.
    pub spread: Vec<SpreadConstraint>,
    /// uid of the controller owner (a ReplicationController, ReplicaSet, ...), if any.
    pub owner_uid: Option<String>,
    /// kind of the controller owner, if any.
    pub owner_kind: Option<String>,
    /// name of the controller owner, if any.
    pub owner_name: Option<String>,
    /// `spec.priority` (0 when unset).
    pub priority: i32,
    /// `spec.preemptionPolicy` is `Never`: it waits rather than preempting.
    pub preempt_never: bool,
    /// `status.nominatedNodeName`: the node its preemption made room on.
    pub nominated_node: Option<String>,
    /// Being deleted by a preemption (a `DisruptionTarget` condition, `PreemptionByScheduler`).
    pub preempted: bool,
    /// `status.startTime`: when its node took it (unset: not yet, which counts as now).
    pub start_time: Option<chrono::DateTime<chrono::Utc>>,
    /// The `lastTransitionTime` (perhaps null) of its `PodScheduled=False` condition, if it has
    /// one: a later Unschedulable keeps it, as the status did not change.
    pub unscheduled_since: Option<serde_json::Value>,
    /// Identifies the pod's label group: its namespace and labels (see [`LabelGroups`]).
    pub group: u64,
    /// The pod is being deleted (`metadata.deletionTimestamp` set); such pods still use
    /// resources and ports but are not counted when spreading.
    pub terminating: bool,
    /// The pod tolerates the NoSchedule taint standing for `spec.unschedulable`.
    pub tolerates_unschedulable: bool,
    /// The PersistentVolumeClaims its volumes name (in its namespace).
    pub claims: Vec<String>,
}

impl PodInfo {
    /// Precomputes everything the filters and scores read of `pod`.
    pub fn new(pod: &Pod) -> PodInfo {
        let meta = &pod.metadata;
        let spec = pod.spec.as_ref();
        let tolerations: Vec<Toleration> = spec
            .and_then(|s| s.tolerations.as_ref())
            .into_iter()
            .flatten()
            .filter_map(Toleration::new)
            .collect();
        let tolerates_key = |key: &str| {
            tolerations.iter().any(|t| t.tolerates_parts(key, "", TaintEffect::NoSchedule))
        };
        let tolerates_unschedulable = tolerates_key(taints::UNSCHEDULABLE);

        let host_ports = spec
            .into_iter()
            .flat_map(|s| &s.containers)
            .flat_map(|c| c.ports.iter().flatten())
            .filter_map(|p| {
                let port = p.host_port.filter(|&port| port > 0)?;
                let host_ip = match p.host_ip.as_deref() {
                    None | Some("") => BIND_ALL_HOST_IP.to_owned(),
                    Some(ip) => ip.to_owned(),
                };
                Some(HostPort {
                    host_ip,
                    protocol: Protocol::parse(p.protocol.as_deref().unwrap_or("")),
                    port,
                })
            })
            .collect();

        let node_affinity = spec.and_then(|s| s.affinity.as_ref()?.node_affinity.as_ref());
        let required_affinity = node_affinity
            .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
            .map(NodeSelector::new);
        let preferred_affinity = node_affinity
            .and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref())
            .into_iter()
            .flatten()
            .filter(|p| p.weight != 0)
            .filter_map(|p| {
                Some(PreferredTerm {
                    weight: i64::from(p.weight),
                    term: NodeSelectorTerm::new(&p.preference)?,
                })
            })
            .collect();

        let owner = meta.owner_references.iter().flatten().find(|o| o.controller == Some(true));
        let claims = spec
            .and_then(|s| s.volumes.as_ref())
            .into_iter()
            .flatten()
            .filter_map(|v| Some(v.persistent_volume_claim.as_ref()?.claim_name.clone()))
            .collect();

        let namespace = meta.namespace.clone().unwrap_or_default();
        let labels = meta.labels.clone().unwrap_or_default();
        PodInfo {
            uid: meta.uid.clone().unwrap_or_default(),
            group: label_group(&namespace, &labels),
            namespace,
            name: meta.name.clone().unwrap_or_default(),
            labels,
            requests: pod_requests(pod),
            non_zero_requests: pod_non_zero_requests(pod),
            scalar_requests: pod_scalar_requests(pod),
            host_ports,
            node_selector: spec.and_then(|s| s.node_selector.clone()).unwrap_or_default(),
            required_affinity,
            preferred_affinity,
            tolerations,
            pod_affinity: PodAffinity::of(pod).map(Arc::new),
            spread: SpreadConstraint::of(pod),
            owner_uid: owner.map(|o| o.uid.clone()),
            owner_kind: owner.map(|o| o.kind.clone()),
            owner_name: owner.map(|o| o.name.clone()),
            priority: spec.and_then(|s| s.priority).unwrap_or(0),
            preempt_never: spec.and_then(|s| s.preemption_policy.as_deref()) == Some("Never"),
            nominated_node: (pod.status.as_ref())
                .and_then(|s| s.nominated_node_name.clone())
                .filter(|n| !n.is_empty()),
            preempted: meta.deletion_timestamp.is_some()
                && (pod.status.as_ref().and_then(|s| s.conditions.as_ref()).into_iter().flatten())
                    .any(|c| {
                        c.type_ == "DisruptionTarget"
                            && c.reason.as_deref() == Some("PreemptionByScheduler")
                    }),
            start_time: pod.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| t.0),
            unscheduled_since: (pod.status.as_ref().and_then(|s| s.conditions.as_ref()))
                .into_iter()
                .flatten()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")
                .map(|c| serde_json::to_value(&c.last_transition_time).unwrap_or_default()),
            terminating: meta.deletion_timestamp.is_some(),
            tolerates_unschedulable,
            claims,
        }
    }
}

// === Selectors and topology domains of the cluster-wide plugins ===

/// A (topology key, value) pair, borrowed from a node's labels: one topology domain.
pub type TopologyPair<'a> = (&'a str, &'a str);

/// A pod's label selector (an affinity term's, a spread constraint's) compiled, with the
/// owner's values of the labels `keys` names required equal (`matchLabelKeys`), or different
/// when not `equal` (`mismatchLabelKeys`). `None` for no selector, or one that cannot be read
/// (which validation refuses): it selects nothing.
pub fn owned_selector(
    selector: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    owner: &Pod,
    keys: &[(Option<&Vec<String>>, bool)],
) -> Option<LabelSelector> {
    let mut selector = LabelSelector::from_object(&serde_json::to_value(selector?).ok()?).ok()?;
    let labels = owner.metadata.labels.as_ref();
    for (keys, equal) in keys {
        for key in keys.iter().copied().flatten() {
            if let Some(value) = labels.and_then(|l| l.get(key)) {
                selector.require(key, value, *equal);
            }
        }
    }
    Some(selector)
}

// === impl NodeInfo ===

/// The label group of a pod: a hash of its namespace and labels. Pods of one controller
/// usually share their labels, so spreading counts groups, not pods.
fn label_group(namespace: &str, labels: &BTreeMap<String, String>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    namespace.hash(&mut hasher);
    labels.hash(&mut hasher);
    hasher.finish()
}

/// The label groups of the pods on nodes, by namespace: resolves a spread selector to the
/// groups it matches once per pod, so that counting matching pods on a node is a lookup per
/// group. A group goes with its last pod.
#[derive(Debug, Default)]
pub struct LabelGroups {
    by_namespace: HashMap<String, HashMap<u64, LabelGroup>>,
    /// The namespace and group of every registered pod, by uid.
    pods: HashMap<String, (String, u64)>,
}

#[derive(Debug)]
struct LabelGroup {
    labels: BTreeMap<String, String>,
    pods: usize,
}

impl LabelGroups {
    /// Counts `pod` in its group (again registering a pod only moves it if its group changed).
    pub fn register(&mut self, pod: &PodInfo) {
        if self.pods.get(&pod.uid).is_some_and(|(ns, g)| *ns == pod.namespace && *g == pod.group) {
            return;
        }
        self.unregister(&pod.uid);
        self.pods.insert(pod.uid.clone(), (pod.namespace.clone(), pod.group));
        let groups = self.by_namespace.entry(pod.namespace.clone()).or_default();
        let group = groups
            .entry(pod.group)
            .or_insert_with(|| LabelGroup { labels: pod.labels.clone(), pods: 0 });
        group.pods += 1;
    }

    /// Forgets the pod `uid`; its group goes if it was the last one in it.
    pub fn unregister(&mut self, uid: &str) {
        let Some((namespace, group)) = self.pods.remove(uid) else { return };
        let Some(groups) = self.by_namespace.get_mut(&namespace) else { return };
        if let Some(entry) = groups.get_mut(&group) {
            entry.pods -= 1;
            if entry.pods == 0 {
                groups.remove(&group);
            }
        }
        if groups.is_empty() {
            self.by_namespace.remove(&namespace);
        }
    }

    /// The groups of `namespace` whose labels match every selector (ANDed, as kube-scheduler's
    /// default spreading does); none for no selectors.
    pub fn matching(&self, namespace: &str, selectors: &[BTreeMap<String, String>]) -> Vec<u64> {
        if selectors.iter().all(BTreeMap::is_empty) {
            return Vec::new();
        }
        self.by_namespace
            .get(namespace)
            .into_iter()
            .flatten()
            .filter(|(_, g)| selectors.iter().flatten().all(|(k, v)| g.labels.get(k) == Some(v)))
            .map(|(group, _)| *group)
            .collect()
    }

    /// How many groups are known (all namespaces).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_namespace.values().map(HashMap::len).sum()
    }
}

/// A node as the scheduler sees it, with the pods bound (or assumed bound) to it.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `status.allocatable`, each resource falling back to `status.capacity`.
    pub allocatable: Resources,
    /// Sum of the [`PodInfo::requests`] of the pods on the node (`pods` is their count).
    pub requested: Resources,
    /// Sum of the [`PodInfo::non_zero_requests`] of the pods on the node.
    pub non_zero_requested: Resources,
    /// The scalar resources of `status.allocatable`, falling back to `status.capacity`.
    pub allocatable_scalar: ScalarResources,
    /// Sum of the [`PodInfo::scalar_requests`] of the pods on the node.
    pub requested_scalar: ScalarResources,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// `spec.taints` with a known effect.
    pub taints: Vec<Taint>,
    /// Region and zone labels as one key (empty when neither is set), for zone spreading.
    pub zone: String,
    pods: HashMap<String, PodInfo>,
    /// (protocol, port) -> [(host IP, number of pods using it)].
    used_ports: HashMap<(Protocol, i32), Vec<(String, u32)>>,
    /// Pods (not terminating) per label group.
    label_groups: HashMap<u64, i64>,
    /// uids of the pods with inter-pod affinity or anti-affinity terms.
    with_affinity: HashSet<String>,
}

impl NodeInfo {
    /// A node with no pods yet.
    pub fn new(node: &Node) -> NodeInfo {
        let mut info = NodeInfo {
            name: String::new(),
            labels: BTreeMap::new(),
            allocatable: Resources::default(),
            requested: Resources::default(),
            non_zero_requested: Resources::default(),
            allocatable_scalar: ScalarResources::default(),
            requested_scalar: ScalarResources::default(),
            unschedulable: false,
            taints: Vec::new(),
            zone: String::new(),
            pods: HashMap::new(),
            used_ports: HashMap::new(),
            label_groups: HashMap::new(),
            with_affinity: HashSet::new(),
        };
        info.set_node(node);
        info
    }

    /// Takes the new version of the node object; the pods and their aggregates are kept.
    pub fn set_node(&mut self, node: &Node) {
        let meta = &node.metadata;
        let spec = node.spec.as_ref();
        let status = node.status.as_ref();
        self.name = meta.name.clone().unwrap_or_default();
        self.labels = meta.labels.clone().unwrap_or_default();

        let allocatable = status.and_then(|s| s.allocatable.as_ref());
        let capacity = status.and_then(|s| s.capacity.as_ref());
        let resource = |name: &str, parse: fn(&str) -> Result<i64, quantity::QuantityError>| {
            allocatable
                .and_then(|l| l.get(name))
                .or_else(|| capacity?.get(name))
                .and_then(|q| parse(&q.0).ok())
                .unwrap_or(0)
        };
        self.allocatable = Resources {
            milli_cpu: resource("cpu", quantity::milli_value),
            memory: resource("memory", quantity::value),
            ephemeral_storage: resource("ephemeral-storage", quantity::value),
            pods: resource("pods", quantity::value),
        };
        let mut scalar = allocatable.map(ScalarResources::of_list).unwrap_or_default();
        for (name, amount) in capacity.map(ScalarResources::of_list).unwrap_or_default().0 {
            scalar.0.entry(name).or_insert(amount);
        }
        self.allocatable_scalar = scalar;

        self.unschedulable = spec.and_then(|s| s.unschedulable).unwrap_or(false);
        self.taints = spec
            .and_then(|s| s.taints.as_ref())
            .into_iter()
            .flatten()
            .filter_map(Taint::new)
            .collect();

        let label = |a: &str, b: &str| {
            self.labels.get(a).or_else(|| self.labels.get(b)).map_or("", String::as_str)
        };
        let (zone, region) =
            (label(LABEL_ZONE, LABEL_ZONE_BETA), label(LABEL_REGION, LABEL_REGION_BETA));
        self.zone = if zone.is_empty() && region.is_empty() {
            String::new()
        } else {
            format!("{region}:\0:{zone}")
        };
    }

    /// Accounts `pod` on this node; a pod with the same uid already there is replaced.
    pub fn add_pod(&mut self, pod: PodInfo) {
        self.remove_pod(&pod.uid);
        self.requested += pod.requests;
        self.non_zero_requested += pod.non_zero_requests;
        self.requested_scalar.add(&pod.scalar_requests);
        for hp in &pod.host_ports {
            let ips = self.used_ports.entry((hp.protocol, hp.port)).or_default();
            match ips.iter_mut().find(|(ip, _)| *ip == hp.host_ip) {
                Some((_, count)) => *count += 1,
                None => ips.push((hp.host_ip.clone(), 1)),
            }
        }
        if !pod.terminating {
            *self.label_groups.entry(pod.group).or_default() += 1;
        }
        if pod.pod_affinity.is_some() {
            self.with_affinity.insert(pod.uid.clone());
        }
        self.pods.insert(pod.uid.clone(), pod);
    }

    /// Removes the pod with this uid and its share of the aggregates.
    pub fn remove_pod(&mut self, uid: &str) -> Option<PodInfo> {
        let pod = self.pods.remove(uid)?;
        self.with_affinity.remove(uid);
        self.requested -= pod.requests;
        self.non_zero_requested -= pod.non_zero_requests;
        self.requested_scalar.subtract(&pod.scalar_requests);
        for hp in &pod.host_ports {
            if let Some(ips) = self.used_ports.get_mut(&(hp.protocol, hp.port)) {
                if let Some(i) = ips.iter().position(|(ip, _)| *ip == hp.host_ip) {
                    ips[i].1 -= 1;
                    if ips[i].1 == 0 {
                        ips.swap_remove(i);
                    }
                }
                if ips.is_empty() {
                    self.used_ports.remove(&(hp.protocol, hp.port));
                }
            }
        }
        if !pod.terminating {
            if let Some(count) = self.label_groups.get_mut(&pod.group) {
                *count -= 1;
                if *count <= 0 {
                    self.label_groups.remove(&pod.group);
                }
            }
        }
        Some(pod)
    }

    /// The pods on this node, in no particular order.
    pub fn pods(&self) -> impl Iterator<Item = &PodInfo> {
        self.pods.values()
    }

    /// The pods on this node with inter-pod affinity or anti-affinity terms.
    pub fn pods_with_affinity(&self) -> impl Iterator<Item = &PodInfo> {
        self.with_affinity.iter().filter_map(|uid| self.pods.get(uid))
    }

    /// The pod with this uid, if it is on this node.
    pub fn pod(&self, uid: &str) -> Option<&PodInfo> {
        self.pods.get(uid)
    }

    /// Number of pods on this node.
    pub fn pod_count(&self) -> usize {
        self.pods.len()
    }

    /// Whether a pod binding `port` would conflict with a port in use on this node: same
    /// protocol and port, and the same IP or either side bound to every address.
    pub fn host_port_conflict(&self, port: &HostPort) -> bool {
        let Some(ips) = self.used_ports.get(&(port.protocol, port.port)) else {
            return false;
        };
        port.host_ip == BIND_ALL_HOST_IP
            || ips.iter().any(|(ip, _)| ip == BIND_ALL_HOST_IP || *ip == port.host_ip)
    }

    /// The topology domain this node is in for `key`, if it has that label.
    pub fn domain(&self, key: &str) -> Option<TopologyPair<'_>> {
        let (key, value) = self.labels.get_key_value(key)?;
        Some((key.as_str(), value.as_str()))
    }

    /// Pods of `group` on this node (not counting terminating ones).
    pub fn group_count(&self, group: u64) -> i64 {
        self.label_groups.get(&group).copied().unwrap_or(0)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A pod from its JSON form, with a uid and namespace set.
    pub(crate) fn pod(uid: &str, mut spec: serde_json::Value) -> Pod {
        if spec.get("containers").is_none() {
            spec["containers"] = json!([{"name": "c"}]);
        }
        serde_json::from_value(json!({
            "metadata": {"name": uid, "namespace": "default", "uid": uid},
            "spec": spec,
        }))
        .unwrap()
    }

    /// A ready node with `cpu`, `memory` and 110 pods allocatable, and these labels.
    pub(crate) fn node(name: &str, cpu: &str, memory: &str, labels: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "status": {
                "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }))
        .unwrap()
    }

    fn container(requests: serde_json::Value) -> serde_json::Value {
        json!({"name": "c", "resources": {"requests": requests}})
    }

    #[test]
    fn requests_sum_containers_and_count_one_pod() {
        let p = pod(
            "a",
            json!({"containers": [
                container(json!({"cpu": "100m", "memory": "128Mi"})),
                container(json!({"cpu": "0.5", "ephemeral-storage": "1Gi"})),
            ]}),
        );
        assert_eq!(
            pod_requests(&p),
            Resources { milli_cpu: 600, memory: 128 << 20, ephemeral_storage: 1 << 30, pods: 1 }
        );
    }

    #[test]
    fn requests_take_the_largest_init_container() {
        let p = pod(
            "a",
            json!({
                "containers": [container(json!({"cpu": "100m", "memory": "1Gi"}))],
                "initContainers": [
                    container(json!({"cpu": "2", "memory": "10Mi"})),
                    container(json!({"cpu": "1"})),
                ],
            }),
        );
        let r = pod_requests(&p);
        assert_eq!((r.milli_cpu, r.memory), (2000, 1 << 30));
    }

    #[test]
    fn sidecars_add_to_containers_and_to_later_init_containers() {
        let mut sidecar = container(json!({"cpu": "200m"}));
        sidecar["restartPolicy"] = json!("Always");
        let p = pod(
            "a",
            json!({
                "containers": [container(json!({"cpu": "100m"}))],
                "initContainers": [sidecar, container(json!({"cpu": "1"}))],
            }),
        );
        // max(100m + 200m, 200m + 1) = 1200m
        assert_eq!(pod_requests(&p).milli_cpu, 1200);
    }

    #[test]
    fn overhead_and_limits_only_containers() {
        let p = pod(
            "a",
            json!({
                "containers": [
                    {"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
                ],
                "overhead": {"cpu": "250m", "memory": "120Mi"},
            }),
        );
        let r = pod_requests(&p);
        assert_eq!((r.milli_cpu, r.memory), (1250, (1 << 30) + (120 << 20)));
    }

    #[test]
    fn unparseable_quantities_count_as_zero() {
        let p =
            pod("a", json!({"containers": [container(json!({"cpu": "lots", "memory": "1Ki"}))]}));
        let r = pod_requests(&p);
        assert_eq!((r.milli_cpu, r.memory), (0, 1024));
    }

    #[test]
    fn non_zero_requests_default_missing_cpu_and_memory() {
        let p = pod("a", json!({"containers": [container(json!({"cpu": "300m"})), {"name": "d"}]}));
        let r = pod_non_zero_requests(&p);
        assert_eq!(r.milli_cpu, 300 + DEFAULT_MILLI_CPU_REQUEST);
        assert_eq!(r.memory, 2 * DEFAULT_MEMORY_REQUEST);
        assert_eq!(pod_requests(&p).memory, 0);
    }

    #[test]
    fn pod_info_compiles_the_spec() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {
                "name": "web-1", "namespace": "ns", "uid": "u1", "labels": {"app": "web"},
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Service", "name": "s", "uid": "x"},
                    {"apiVersion": "v1", "kind": "ReplicationController", "name": "web",
                     "uid": "rc1", "controller": true},
                ],
            },
            "spec": {
                "containers": [{"name": "c", "ports": [
                    {"containerPort": 80, "hostPort": 8080},
                    {"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"},
                    {"containerPort": 9090},
                ]}],
                "priority": 7,
                "nodeSelector": {"disk": "ssd"},
                "tolerations": [
                    {"key": crate::model::taints::UNSCHEDULABLE, "operator": "Exists", "effect": "NoSchedule"},
                    {"key": "k", "operator": "Bogus"},
                ],
                "affinity": {"nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]},
                        {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}]},
                        {},
                    ]},
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 5, "preference": {"matchExpressions": [
                            {"key": "b", "operator": "Exists"}]}},
                    ],
                }},
            },
        }))
        .unwrap();
        let info = PodInfo::new(&p);
        assert_eq!(
            (info.uid.as_str(), info.namespace.as_str(), info.name.as_str()),
            ("u1", "ns", "web-1")
        );
        assert_eq!(info.labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(info.owner_uid.as_deref(), Some("rc1"));
        assert_eq!(info.owner_kind.as_deref(), Some("ReplicationController"));
        assert_eq!(info.priority, 7);
        assert_eq!(
            info.host_ports,
            vec![
                HostPort { host_ip: BIND_ALL_HOST_IP.into(), protocol: Protocol::Tcp, port: 8080 },
                HostPort { host_ip: "10.0.0.1".into(), protocol: Protocol::Udp, port: 53 },
            ]
        );
        assert_eq!(info.tolerations.len(), 1);
        assert!(info.tolerates_unschedulable);
        assert_eq!(info.required_affinity.as_ref().map(|s| s.terms.len()), Some(1));
        assert_eq!(info.preferred_affinity.len(), 1);
        assert_eq!(info.requests.pods, 1);
    }

    #[test]
    fn requirement_operators() {
        let req = |op: SelectorOperator| SelectorRequirement { key: "k".into(), operator: op };
        let in_ = req(SelectorOperator::In(vec!["a".into(), "b".into()]));
        assert!(in_.matches(Some("b")) && !in_.matches(Some("c")) && !in_.matches(None));
        let not_in = req(SelectorOperator::NotIn(vec!["a".into()]));
        assert!(not_in.matches(Some("b")) && !not_in.matches(Some("a")) && not_in.matches(None));
        let exists = req(SelectorOperator::Exists);
        assert!(exists.matches(Some("")) && !exists.matches(None));
        let absent = req(SelectorOperator::DoesNotExist);
        assert!(absent.matches(None) && !absent.matches(Some("x")));
        let gt = req(SelectorOperator::Gt(5));
        assert!(gt.matches(Some("6")) && !gt.matches(Some("5")) && !gt.matches(Some("x")));
        assert!(!gt.matches(None));
        let lt = req(SelectorOperator::Lt(5));
        assert!(lt.matches(Some("-1")) && !lt.matches(Some("5")) && !lt.matches(None));
    }

    #[test]
    fn node_info_reads_the_node() {
        let n: Node = serde_json::from_value(json!({
            "metadata": {"name": "n1", "labels": {"topology.kubernetes.io/zone": "z1"}},
            "spec": {"unschedulable": true, "taints": [
                {"key": "a", "value": "b", "effect": "NoSchedule"},
                {"key": "c", "effect": "Weird"},
            ]},
            "status": {
                "allocatable": {"cpu": "3500m"},
                "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "False"}],
            },
        }))
        .unwrap();
        let info = NodeInfo::new(&n);
        assert_eq!(info.name, "n1");
        assert_eq!(
            info.allocatable,
            Resources { milli_cpu: 3500, memory: 8 << 30, ephemeral_storage: 0, pods: 110 }
        );
        assert!(info.unschedulable);
        assert_eq!(info.taints.len(), 1);
        assert_eq!(info.zone, ":\0:z1");
    }

    #[test]
    fn aggregates_follow_add_and_remove() {
        let mut n = NodeInfo::new(&node("n1", "4", "8Gi", json!({})));
        let a = PodInfo::new(&pod("a", json!({"containers": [container(json!({"cpu": "1"}))]})));
        let b = PodInfo::new(&pod("b", json!({"containers": [container(json!({"cpu": "500m"}))]})));
        n.add_pod(a.clone());
        n.add_pod(b);
        n.add_pod(a); // re-adding replaces
        assert_eq!(n.pod_count(), 2);
        assert_eq!(n.requested.milli_cpu, 1500);
        assert_eq!(n.requested.pods, 2);
        assert_eq!(n.non_zero_requested.memory, 2 * DEFAULT_MEMORY_REQUEST);
        assert_eq!(n.remove_pod("a").map(|p| p.uid), Some("a".to_owned()));
        assert!(n.remove_pod("a").is_none());
        assert_eq!(n.requested.milli_cpu, 500);
        assert_eq!(n.pods().map(|p| p.uid.as_str()).collect::<Vec<_>>(), ["b"]);
        n.set_node(&node("n1", "8", "8Gi", json!({"new": "label"})));
        assert_eq!((n.allocatable.milli_cpu, n.requested.milli_cpu), (8000, 500));
        assert_eq!(n.labels.len(), 1);
    }

    #[test]
    fn host_ports_in_use() {
        let with_port = |uid: &str, ip: &str, port: i32| {
            PodInfo::new(&pod(
                uid,
                json!({"containers": [{"name": "c", "ports": [
                    {"containerPort": 1, "hostPort": port, "hostIP": ip}]}]}),
            ))
        };
        let hp = |ip: &str, protocol, port| HostPort { host_ip: ip.into(), protocol, port };
        let mut n = NodeInfo::new(&node("n1", "4", "8Gi", json!({})));
        n.add_pod(with_port("a", "10.0.0.1", 80));
        assert!(n.host_port_conflict(&hp("10.0.0.1", Protocol::Tcp, 80)));
        assert!(n.host_port_conflict(&hp(BIND_ALL_HOST_IP, Protocol::Tcp, 80)));
        assert!(!n.host_port_conflict(&hp("10.0.0.2", Protocol::Tcp, 80)));
        assert!(!n.host_port_conflict(&hp("10.0.0.1", Protocol::Udp, 80)));
        assert!(!n.host_port_conflict(&hp("10.0.0.1", Protocol::Tcp, 81)));
        n.add_pod(with_port("b", "", 443));
        assert!(n.host_port_conflict(&hp("10.0.0.9", Protocol::Tcp, 443)));
        n.add_pod(with_port("c", "10.0.0.1", 80));
        n.remove_pod("a");
        assert!(n.host_port_conflict(&hp("10.0.0.1", Protocol::Tcp, 80)));
        n.remove_pod("c");
        n.remove_pod("b");
        assert!(!n.host_port_conflict(&hp(BIND_ALL_HOST_IP, Protocol::Tcp, 80)));
        assert!(!n.host_port_conflict(&hp(BIND_ALL_HOST_IP, Protocol::Tcp, 443)));
    }

    #[test]
    fn matching_pods_are_counted_by_label_group() {
        let labelled = |uid: &str, ns: &str, labels: serde_json::Value, deleting: bool| {
            let mut p = pod(uid, json!({}));
            p.metadata.namespace = Some(ns.into());
            p.metadata.labels = serde_json::from_value(labels).unwrap();
            if deleting {
                p.metadata.deletion_timestamp =
                    Some(serde_json::from_value(json!("2024-01-01T00:00:00Z")).unwrap());
            }
            PodInfo::new(&p)
        };
        let mut n = NodeInfo::new(&node("n1", "4", "8Gi", json!({})));
        n.add_pod(labelled("a", "ns", json!({"app": "web", "v": "1"}), false));
        n.add_pod(labelled("b", "ns", json!({"app": "web", "v": "1"}), false));
        n.add_pod(labelled("c", "ns", json!({"app": "web", "v": "2"}), false));
        n.add_pod(labelled("d", "other", json!({"app": "web"}), false));
        n.add_pod(labelled("e", "ns", json!({"app": "web"}), true));
        let mut groups = LabelGroups::default();
        for p in n.pods() {
            groups.register(p);
        }
        let sel = |pairs: &[(&str, &str)]| -> Vec<BTreeMap<String, String>> {
            vec![pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()]
        };
        let count = |n: &NodeInfo, pairs: &[(&str, &str)]| -> i64 {
            groups.matching("ns", &sel(pairs)).iter().map(|g| n.group_count(*g)).sum()
        };
        assert_eq!(count(&n, &[("app", "web")]), 3);
        assert_eq!(count(&n, &[("app", "web"), ("v", "1")]), 2);
        assert_eq!(count(&n, &[]), 0);
        n.remove_pod("a");
        n.remove_pod("e");
        assert_eq!(count(&n, &[("app", "web"), ("v", "1")]), 1);
        n.remove_pod("b");
        assert_eq!(count(&n, &[("v", "1")]), 0);

        // Groups go with their last pod; registering a pod again counts it once.
        assert_eq!(groups.len(), 4);
        let c = n.pod("c").unwrap().clone();
        groups.register(&c);
        for uid in ["a", "b", "e"] {
            groups.unregister(uid);
        }
        assert_eq!(groups.len(), 2, "ns/{{app: web, v: 2}} and other/{{app: web}} stay");
        groups.unregister("c");
        assert_eq!(groups.matching("ns", &sel(&[("app", "web")])), Vec::<u64>::new());
        groups.unregister("d");
        assert_eq!(groups.len(), 0);
    }
}
