//! The scheduler's filters: whether a pod can go on a node at all, and the Kubernetes
//! "0/3 nodes are available: ..." message when it can go on none.
//!
//! Each filter is a small function over a [`PodInfo`] and a [`NodeInfo`] that neither parses
//! nor allocates when the pod fits; [`filter`] runs them in kube-scheduler's order and, as
//! kube-scheduler does, stops at the first filter that rejects the node, so the message
//! names the same reasons Kubernetes would.

use std::collections::HashMap;
use std::fmt;

use super::node_info::{NodeInfo, PodInfo};
use crate::model::taints::{Taint, TaintEffect};

/// Why a node cannot take a pod.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FitFailure {
    /// The node's Ready condition is not True.
    /// The node is cordoned (`spec.unschedulable`).
    Unschedulable,
    /// Not enough of a resource left: "cpu", "memory", "ephemeral-storage" or "pods".
    Insufficient(&'static str),
    /// Not enough left of a scalar resource (an extended resource, huge pages), named.
    InsufficientScalar(String),
    /// The node does not match the pod's nodeSelector or required node affinity.
    NodeSelectorMismatch,
    /// The pod's required node affinity names other nodes (left out before filtering).
    NotNamed,
    /// The node has a NoSchedule or NoExecute taint the pod does not tolerate (the first).
    UntoleratedTaint {
        /// The taint key.
        key: String,
        /// The taint value.
        value: String,
        /// The taint effect.
        effect: String,
    },
    /// A host port the pod needs is in use on the node.
    HostPortConflict,
    /// Placing the pod on the node would skew a `DoNotSchedule` spread constraint too far.
    SpreadConstraintsNotMatch,
    /// The node lacks the topology key of a `DoNotSchedule` spread constraint.
    SpreadMissingLabel,
    /// No pod the pod's required affinity selects is in the node's topology domain.
    PodAffinityRulesNotMatch,
    /// A pod the pod's required anti-affinity selects is in the node's topology domain.
    PodAntiAffinityRulesNotMatch,
    /// A pod in the node's topology domain has required anti-affinity to this pod.
    ExistingPodsAntiAffinityRulesNotMatch,
    /// A volume of the pod's bound claims may not be used on the node (its node affinity).
    VolumeNodeAffinityConflict,
    /// A `ReadWriteOncePod` claim of the pod's is in use by another pod.
    ReadWriteOncePodConflict,
}

/// The reason as it appears in kube-scheduler's messages.
impl fmt::Display for FitFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FitFailure::Unschedulable => f.write_str("node(s) were unschedulable"),
            FitFailure::Insufficient("pods") => f.write_str("Too many pods"),
            FitFailure::Insufficient(resource) => write!(f, "Insufficient {resource}"),
            FitFailure::InsufficientScalar(resource) => write!(f, "Insufficient {resource}"),
            FitFailure::NodeSelectorMismatch => {
                f.write_str("node(s) didn't match Pod's node affinity/selector")
            }
            FitFailure::NotNamed => f.write_str("node(s) didn't satisfy plugin(s) [NodeAffinity]"),
            FitFailure::UntoleratedTaint { key, value, .. } => {
                write!(f, "node(s) had untolerated taint {{{key}: {value}}}")
            }
            FitFailure::HostPortConflict => {
                f.write_str("node(s) didn't have free ports for the requested pod ports")
            }
            FitFailure::SpreadConstraintsNotMatch => {
                f.write_str("node(s) didn't match pod topology spread constraints")
            }
            FitFailure::SpreadMissingLabel => f.write_str(
                "node(s) didn't match pod topology spread constraints (missing required label)",
            ),
            FitFailure::PodAffinityRulesNotMatch => {
                f.write_str("node(s) didn't match pod affinity rules")
            }
            FitFailure::PodAntiAffinityRulesNotMatch => {
                f.write_str("node(s) didn't match pod anti-affinity rules")
            }
            FitFailure::ExistingPodsAntiAffinityRulesNotMatch => {
                f.write_str("node(s) didn't satisfy existing pods anti-affinity rules")
            }
            FitFailure::VolumeNodeAffinityConflict => {
                f.write_str("node(s) had volume node affinity conflict")
            }
            FitFailure::ReadWriteOncePodConflict => f.write_str(
                "node has pod using PersistentVolumeClaim with the same name and \
                 ReadWriteOncePod access mode",
            ),
        }
    }
}

/// Runs the filters in kube-scheduler's order (NodeUnschedulable, TaintToleration,
/// NodeAffinity, NodePorts, NodeResourcesFit) and returns the reasons of the first one that
/// rejects the node. A node that is not Ready is refused only by its `not-ready` or
/// `unreachable` taint, as kube-scheduler refuses it (it has no readiness filter since 1.17):
/// a pod that tolerates the taint, or a node nothing has tainted, takes pods.
pub fn filter(pod: &PodInfo, node: &NodeInfo) -> Result<(), Vec<FitFailure>> {
    let single = |r: Result<(), FitFailure>| r.map_err(|f| vec![f]);
    single(node_unschedulable(pod, node))?;
    single(taint_toleration(pod, node))?;
    single(node_affinity(pod, node))?;
    single(node_ports(pod, node))?;
    resources_fit(pod, node)
}

/// The node must not be cordoned, unless the pod tolerates the
/// `node.kubernetes.io/unschedulable` NoSchedule taint.
pub fn node_unschedulable(pod: &PodInfo, node: &NodeInfo) -> Result<(), FitFailure> {
    if !node.unschedulable || pod.tolerates_unschedulable {
        Ok(())
    } else {
        Err(FitFailure::Unschedulable)
    }
}

/// Every NoSchedule and NoExecute taint of the node must be tolerated; the first one that
/// is not is reported.
pub fn taint_toleration(pod: &PodInfo, node: &NodeInfo) -> Result<(), FitFailure> {
    let effects = [TaintEffect::NoSchedule, TaintEffect::NoExecute];
    match untolerated_taint(pod, node, &effects) {
        None => Ok(()),
        Some(taint) => Err(FitFailure::UntoleratedTaint {
            key: taint.key.clone(),
            value: taint.value.clone(),
            effect: taint.effect.as_str().to_owned(),
        }),
    }
}

/// The first taint of the node with one of `effects` that the pod does not tolerate.
pub fn untolerated_taint<'n>(
    pod: &PodInfo,
    node: &'n NodeInfo,
    effects: &[TaintEffect],
) -> Option<&'n Taint> {
    node.taints.iter().find(|taint| {
        effects.contains(&taint.effect) && !pod.tolerations.iter().any(|t| t.tolerates(taint))
    })
}

/// The node's labels must carry every pair of the pod's nodeSelector, and the node must
/// match one term of the required node affinity, if any.
pub fn node_affinity(pod: &PodInfo, node: &NodeInfo) -> Result<(), FitFailure> {
    let selector_ok =
        pod.node_selector.iter().all(|(k, v)| node.labels.get(k).is_some_and(|x| x == v));
    let affinity_ok =
        pod.required_affinity.as_ref().is_none_or(|s| s.matches(&node.name, &node.labels));
    if selector_ok && affinity_ok {
        Ok(())
    } else {
        Err(FitFailure::NodeSelectorMismatch)
    }
}

/// No host port of the pod may be in use on the node (an address of 0.0.0.0 on either side
/// conflicts with every address).
pub fn node_ports(pod: &PodInfo, node: &NodeInfo) -> Result<(), FitFailure> {
    if pod.host_ports.iter().any(|p| node.host_port_conflict(p)) {
        Err(FitFailure::HostPortConflict)
    } else {
        Ok(())
    }
}

/// The node must have room for one more pod and, for each resource the pod requests, enough
/// of it left unrequested. A pod requesting no cpu, memory or storage only needs the room.
pub fn resources_fit(pod: &PodInfo, node: &NodeInfo) -> Result<(), Vec<FitFailure>> {
    let (req, used, alloc) = (&pod.requests, &node.requested, &node.allocatable);
    let pods_full = node.pod_count() as i64 + 1 > alloc.pods;
    let cpu = short(req.milli_cpu, used.milli_cpu, alloc.milli_cpu);
    let memory = short(req.memory, used.memory, alloc.memory);
    let storage = short(req.ephemeral_storage, used.ephemeral_storage, alloc.ephemeral_storage);
    let (scalar_used, scalar_have) = (&node.requested_scalar, &node.allocatable_scalar);
    let mut scalar_short = pod
        .scalar_requests
        .iter()
        .filter(|(name, want)| short(*want, scalar_used.get(name), scalar_have.get(name)))
        .peekable();
    if !(pods_full || cpu || memory || storage) && scalar_short.peek().is_none() {
        return Ok(());
    }
    let failures =
        [(pods_full, "pods"), (cpu, "cpu"), (memory, "memory"), (storage, "ephemeral-storage")]
            .into_iter()
            .filter(|(short, _)| *short)
            .map(|(_, resource)| FitFailure::Insufficient(resource))
            .chain(scalar_short.map(|(name, _)| FitFailure::InsufficientScalar(name.to_string())))
            .collect();
    Err(failures)
}

/// Whether `want` of a resource (none: fits) exceeds what is left of `have` after `used`.
fn short(want: i64, used: i64, have: i64) -> bool {
    want > 0 && want > have.saturating_sub(used)
}

/// The FailedScheduling message of kube-scheduler for a pod that fits none of `total_nodes`
/// nodes, `failures` holding the reasons of each node: "0/3 nodes are available: 1 node(s)
/// didn't match Pod's node affinity/selector, 2 Insufficient cpu." Each reason is counted
/// over the nodes and the "<count> <reason>" entries are sorted as strings, as Kubernetes
/// sorts them.
pub fn unschedulable_message(total_nodes: usize, failures: &[Vec<FitFailure>]) -> String {
    if total_nodes == 0 {
        return "no nodes available to schedule pods".to_owned();
    }
    reasons_message(total_nodes, failures.iter().flatten().map(ToString::to_string))
}

/// "0/3 nodes are available: 1 A, 2 B.": each of `reasons` (one per node and reason) counted,
/// the counted entries sorted as strings.
pub fn reasons_message(total_nodes: usize, reasons: impl IntoIterator<Item = String>) -> String {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for reason in reasons {
        *counts.entry(reason).or_default() += 1;
    }
    let mut entries: Vec<String> =
        counts.into_iter().map(|(reason, count)| format!("{count} {reason}")).collect();
    entries.sort();
    let mut message = format!("0/{total_nodes} nodes are available:");
    if !entries.is_empty() {
        message.push(' ');
        message.push_str(&entries.join(", "));
        message.push('.');
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::node_info::tests::{node, pod};
    use crate::scheduler::node_info::NodeInfo;
    use k8s_openapi::api::core::v1::Node;
    use serde_json::{json, Value};

    fn pod_info(spec: Value) -> PodInfo {
        PodInfo::new(&pod("p", spec))
    }

    fn node_info(labels: Value) -> NodeInfo {
        NodeInfo::new(&node("n1", "4", "8Gi", labels))
    }

    fn tainted(taints: Value) -> NodeInfo {
        let mut n: Node = node("n1", "4", "8Gi", json!({}));
        n.spec = Some(serde_json::from_value(json!({"taints": taints})).unwrap());
        NodeInfo::new(&n)
    }

    fn with_requests(requests: Value) -> PodInfo {
        pod_info(json!({"containers": [{"name": "c", "resources": {"requests": requests}}]}))
    }

    #[test]
    fn cordoned_nodes_are_rejected_unless_tolerated() {
        let mut n = node_info(json!({}));
        let p = pod_info(json!({}));
        assert_eq!(node_unschedulable(&p, &n), Ok(()));
        n.unschedulable = true;
        assert_eq!(node_unschedulable(&p, &n), Err(FitFailure::Unschedulable));
        let tolerant = pod_info(json!({"tolerations": [{"operator": "Exists"}]}));
        assert_eq!(node_unschedulable(&tolerant, &n), Ok(()));
        let wrong_effect = pod_info(json!({"tolerations": [
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
             "effect": "NoExecute"}]}));
        assert_eq!(node_unschedulable(&wrong_effect, &n), Err(FitFailure::Unschedulable));
    }

    #[test]
    fn no_schedule_and_no_execute_taints_must_be_tolerated() {
        let n = tainted(json!([
            {"key": "soft", "effect": "PreferNoSchedule"},
            {"key": "gpu", "value": "yes", "effect": "NoSchedule"},
            {"key": "evict", "effect": "NoExecute"},
        ]));
        assert_eq!(
            taint_toleration(&pod_info(json!({})), &n),
            Err(FitFailure::UntoleratedTaint {
                key: "gpu".into(),
                value: "yes".into(),
                effect: "NoSchedule".into()
            })
        );
        let gpu_only = pod_info(json!({"tolerations": [{"key": "gpu", "value": "yes"}]}));
        assert!(matches!(
            taint_toleration(&gpu_only, &n),
            Err(FitFailure::UntoleratedTaint { key, .. }) if key == "evict"
        ));
        let both = pod_info(json!({"tolerations": [
            {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "evict", "operator": "Exists"},
        ]}));
        assert_eq!(taint_toleration(&both, &n), Ok(()));
        let everything = pod_info(json!({"tolerations": [{"operator": "Exists"}]}));
        assert_eq!(taint_toleration(&everything, &n), Ok(()));
        let wrong_value = pod_info(json!({"tolerations": [
            {"key": "gpu", "value": "no"}, {"key": "evict", "operator": "Exists"}]}));
        assert!(taint_toleration(&wrong_value, &n).is_err());
    }

    #[test]
    fn node_selector_must_match_labels() {
        let n = node_info(json!({"disk": "ssd", "zone": "a"}));
        let p = |sel: Value| pod_info(json!({"nodeSelector": sel}));
        assert_eq!(node_affinity(&p(json!({})), &n), Ok(()));
        assert_eq!(node_affinity(&p(json!({"disk": "ssd", "zone": "a"})), &n), Ok(()));
        assert_eq!(
            node_affinity(&p(json!({"disk": "hdd"})), &n),
            Err(FitFailure::NodeSelectorMismatch)
        );
        assert_eq!(
            node_affinity(&p(json!({"gpu": "1"})), &n),
            Err(FitFailure::NodeSelectorMismatch)
        );
    }

    fn required(terms: Value) -> PodInfo {
        pod_info(json!({"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}))
    }

    fn expr(key: &str, operator: &str, values: Value) -> Value {
        json!({"key": key, "operator": operator, "values": values})
    }

    #[test]
    fn required_affinity_terms_are_ored_and_expressions_anded() {
        let n = node_info(json!({"zone": "a", "cores": "8"}));
        let ok = |terms: Value| node_affinity(&required(terms), &n).is_ok();
        assert!(ok(json!([{"matchExpressions": [expr("zone", "In", json!(["a", "b"]))]}])));
        assert!(!ok(json!([{"matchExpressions": [expr("zone", "In", json!(["b"]))]}])));
        assert!(ok(json!([{"matchExpressions": [expr("zone", "NotIn", json!(["b"]))]}])));
        assert!(ok(json!([{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}])));
        assert!(ok(json!([{"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}])));
        assert!(ok(json!([{"matchExpressions": [expr("cores", "Gt", json!(["4"]))]}])));
        assert!(!ok(json!([{"matchExpressions": [expr("cores", "Lt", json!(["4"]))]}])));
        // ANDed within a term
        assert!(!ok(json!([{"matchExpressions": [
            expr("zone", "In", json!(["a"])), expr("cores", "Gt", json!(["16"]))]}])));
        // ORed across terms
        assert!(ok(json!([
            {"matchExpressions": [expr("zone", "In", json!(["b"]))]},
            {"matchExpressions": [expr("cores", "Gt", json!(["4"]))]},
        ])));
        // an empty term, an invalid term and an empty list match nothing
        assert!(!ok(json!([{}])));
        assert!(!ok(json!([{"matchExpressions": [expr("cores", "Gt", json!(["x"]))]}])));
        assert!(!ok(json!([])));
    }

    #[test]
    fn required_affinity_match_fields_on_node_name() {
        let n = node_info(json!({}));
        let field = |op: &str, name: &str| {
            required(json!([{"matchFields": [
                {"key": "metadata.name", "operator": op, "values": [name]}]}]))
        };
        assert_eq!(node_affinity(&field("In", "n1"), &n), Ok(()));
        assert!(node_affinity(&field("In", "n2"), &n).is_err());
        assert_eq!(node_affinity(&field("NotIn", "n2"), &n), Ok(()));
        assert!(node_affinity(&field("Exists", "n1"), &n).is_err());
    }

    #[test]
    fn host_ports_must_be_free() {
        let port_pod = |uid: &str, ip: &str, port: i32, protocol: &str| {
            PodInfo::new(&pod(
                uid,
                json!({"containers": [{"name": "c", "ports": [
                    {"containerPort": 1, "hostPort": port, "hostIP": ip, "protocol": protocol}]}]}),
            ))
        };
        let mut n = node_info(json!({}));
        n.add_pod(port_pod("a", "10.0.0.1", 8080, "TCP"));
        assert_eq!(node_ports(&pod_info(json!({})), &n), Ok(()));
        assert_eq!(
            node_ports(&port_pod("b", "10.0.0.1", 8080, "TCP"), &n),
            Err(FitFailure::HostPortConflict)
        );
        assert_eq!(
            node_ports(&port_pod("b", "0.0.0.0", 8080, "TCP"), &n),
            Err(FitFailure::HostPortConflict)
        );
        assert_eq!(node_ports(&port_pod("b", "10.0.0.2", 8080, "TCP"), &n), Ok(()));
        assert_eq!(node_ports(&port_pod("b", "10.0.0.1", 8080, "UDP"), &n), Ok(()));
        n.add_pod(port_pod("c", "", 9090, "TCP"));
        assert_eq!(
            node_ports(&port_pod("b", "10.0.0.7", 9090, "TCP"), &n),
            Err(FitFailure::HostPortConflict)
        );
    }

    #[test]
    fn resources_must_fit() {
        let mut n = NodeInfo::new(&node("n1", "2", "1Gi", json!({})));
        n.add_pod(with_requests(json!({"cpu": "1500m", "memory": "512Mi"})));
        assert_eq!(resources_fit(&with_requests(json!({"cpu": "500m"})), &n), Ok(()));
        assert_eq!(
            resources_fit(&with_requests(json!({"cpu": "501m", "memory": "1Gi"})), &n),
            Err(vec![FitFailure::Insufficient("cpu"), FitFailure::Insufficient("memory")])
        );
        assert_eq!(
            resources_fit(&with_requests(json!({"ephemeral-storage": "1"})), &n),
            Err(vec![FitFailure::Insufficient("ephemeral-storage")])
        );
    }

    #[test]
    fn extended_resources_must_fit_what_the_node_advertises() {
        let mut advertising: Node = node("n1", "4", "8Gi", json!({}));
        let capacity = advertising.status.as_mut().unwrap().capacity.get_or_insert_default();
        let quantity = k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        capacity.insert("example.com/dongle".into(), quantity("4".into()));
        let mut n = NodeInfo::new(&advertising);
        // A limit alone is the request (extended resources are not overcommitted).
        let limited = |amount: &str| {
            pod_info(json!({"containers": [{"name": "c",
                "resources": {"limits": {"example.com/dongle": amount}}}]}))
        };
        n.add_pod(limited("3"));
        assert_eq!(n.requested_scalar.get("example.com/dongle"), 3);
        assert_eq!(resources_fit(&with_requests(json!({"example.com/dongle": "1"})), &n), Ok(()));
        assert_eq!(
            resources_fit(&limited("2"), &n),
            Err(vec![FitFailure::InsufficientScalar("example.com/dongle".into())])
        );
        // One the node does not have at all; and cpu named before it, as Kubernetes does.
        assert_eq!(
            resources_fit(&with_requests(json!({"cpu": "5", "example.com/zzz": "1"})), &n),
            Err(vec![
                FitFailure::Insufficient("cpu"),
                FitFailure::InsufficientScalar("example.com/zzz".into())
            ])
        );
        assert_eq!(
            FitFailure::InsufficientScalar("example.com/zzz".into()).to_string(),
            "Insufficient example.com/zzz"
        );
        let uid = n.pods().next().unwrap().uid.clone();
        n.remove_pod(&uid);
        assert_eq!(resources_fit(&limited("4"), &n), Ok(()));
    }

    #[test]
    fn zero_request_pods_only_need_room_for_a_pod() {
        let mut full: Node = node("n1", "0", "0", json!({}));
        full.status.as_mut().unwrap().allocatable.as_mut().unwrap().insert(
            "pods".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("1".into()),
        );
        let mut n = NodeInfo::new(&full);
        let best_effort = pod_info(json!({}));
        assert_eq!(resources_fit(&best_effort, &n), Ok(()));
        n.add_pod(PodInfo::new(&pod("other", json!({}))));
        assert_eq!(resources_fit(&best_effort, &n), Err(vec![FitFailure::Insufficient("pods")]));
    }

    #[test]
    fn filter_reports_the_first_failing_filter() {
        let mut n = NodeInfo::new(&node("n1", "1", "1Gi", json!({"disk": "hdd"})));
        let p = pod_info(json!({
            "nodeSelector": {"disk": "ssd"},
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "memory": "2Gi"}}}],
        }));
        assert_eq!(filter(&p, &n), Err(vec![FitFailure::NodeSelectorMismatch]));
        n.labels.insert("disk".into(), "ssd".into());
        assert_eq!(
            filter(&p, &n),
            Err(vec![FitFailure::Insufficient("cpu"), FitFailure::Insufficient("memory")])
        );
        n.unschedulable = true;
        assert_eq!(filter(&p, &n), Err(vec![FitFailure::Unschedulable]));
        n.unschedulable = false;
        // A node not Ready is refused by its taint, in kube's words, and only by it: a pod
        // that tolerates the taint fits.
        n.taints.push(crate::model::taints::Taint {
            key: crate::model::taints::NOT_READY.into(),
            value: String::new(),
            effect: TaintEffect::NoSchedule,
        });
        let refused = filter(&p, &n).unwrap_err();
        assert_eq!(
            refused[0].to_string(),
            "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
        );
        let not_ready = NodeInfo::new(&serde_json::from_value(json!({
            "metadata": {"name": "n2"},
            "spec": {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"},
                "conditions": [{"type": "Ready", "status": "Unknown"}]},
        }))
        .unwrap());
        let tolerant = pod_info(json!({"tolerations": [
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists"}]}));
        assert_eq!(filter(&tolerant, &not_ready), Ok(()));
        // A node made by hand (no conditions, no taints) takes pods at once.
        let bare = serde_json::from_value(json!({"metadata": {"name": "bare"},
            "status": {"allocatable": {"cpu": "1", "memory": "1Gi", "pods": "10"}}}));
        assert_eq!(filter(&pod_info(json!({})), &NodeInfo::new(&bare.unwrap())), Ok(()));
        assert_eq!(filter(&pod_info(json!({})), &node_info(json!({}))), Ok(()));
    }

    #[test]
    fn reason_texts_are_kubernetes_texts() {
        let text = |f: FitFailure| f.to_string();
        assert_eq!(text(FitFailure::Unschedulable), "node(s) were unschedulable");
        assert_eq!(text(FitFailure::Insufficient("cpu")), "Insufficient cpu");
        assert_eq!(
            text(FitFailure::Insufficient("ephemeral-storage")),
            "Insufficient ephemeral-storage"
        );
        assert_eq!(text(FitFailure::Insufficient("pods")), "Too many pods");
        assert_eq!(
            text(FitFailure::NodeSelectorMismatch),
            "node(s) didn't match Pod's node affinity/selector"
        );
        assert_eq!(
            text(FitFailure::UntoleratedTaint {
                key: "k".into(),
                value: "v".into(),
                effect: "NoSchedule".into()
            }),
            "node(s) had untolerated taint {k: v}"
        );
        assert_eq!(
            text(FitFailure::HostPortConflict),
            "node(s) didn't have free ports for the requested pod ports"
        );
    }

    #[test]
    fn message_counts_reasons_and_sorts_entries() {
        let failures = vec![
            vec![FitFailure::Insufficient("cpu")],
            vec![FitFailure::NodeSelectorMismatch],
            vec![FitFailure::Insufficient("cpu")],
        ];
        assert_eq!(
            unschedulable_message(3, &failures),
            "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, \
             2 Insufficient cpu."
        );
        // Entries sort as whole strings, count included, as Kubernetes' sort.Strings does.
        let mut many = vec![vec![FitFailure::Unschedulable]; 2];
        many.extend(vec![
            vec![FitFailure::Insufficient("cpu"), FitFailure::Insufficient("memory")];
            10
        ]);
        assert_eq!(
            unschedulable_message(12, &many),
            "0/12 nodes are available: 10 Insufficient cpu, 10 Insufficient memory, \
             2 node(s) were unschedulable."
        );
        assert_eq!(unschedulable_message(0, &[]), "no nodes available to schedule pods");
    }
}
