//! The scheduler's scores: how good each feasible node is for a pod, and the pick among the
//! best.
//!
//! Each plugin gives every node 0..=[`MAX_NODE_SCORE`] as its kube-scheduler counterpart
//! does: least allocated (NodeResourcesFit), balanced allocation
//! (NodeResourcesBalancedAllocation), taint toleration (fewer untolerated PreferNoSchedule
//! taints) and preferred node affinity. Plugins that compare nodes with each other are
//! normalised over the candidate nodes given. [`score_nodes`] sums them with kube-scheduler's
//! default weights, with the scores of the plugins that count pods across the cluster (topology
//! spread, the pod's own constraints or the system defaults; inter-pod affinity) given in the
//! [`ScoreContext`].

use rand::Rng;

use super::node_info::{NodeInfo, PodInfo};
use crate::model::taints::{tolerates, TaintEffect};

/// The highest score a plugin gives a node.
pub const MAX_NODE_SCORE: i64 = 100;
/// Weight of [`least_allocated`] in [`score_nodes`].
pub const LEAST_ALLOCATED_WEIGHT: i64 = 1;
/// Weight of [`balanced_allocation`] in [`score_nodes`].
pub const BALANCED_ALLOCATION_WEIGHT: i64 = 1;
/// Weight of [`taint_toleration`] in [`score_nodes`].
pub const TAINT_TOLERATION_WEIGHT: i64 = 3;
/// Weight of [`node_affinity`] in [`score_nodes`].
pub const NODE_AFFINITY_WEIGHT: i64 = 2;
/// Weight of topology spread ([`super::topology_spread::scores`] and `default_scores`).
pub const POD_TOPOLOGY_SPREAD_WEIGHT: i64 = 2;
/// Weight of inter-pod affinity ([`super::pod_affinity::scores`]).
pub const INTER_POD_AFFINITY_WEIGHT: i64 = 2;

/// What scoring needs beyond the pod and the nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScoreContext {
    /// The topology spread scores, one per node scored (the pod's own constraints', or the
    /// system defaults'); `None` when there are none.
    pub topology_spread: Option<Vec<i64>>,
    /// The inter-pod affinity scores, one per node scored; `None` when there are none.
    pub inter_pod_affinity: Option<Vec<i64>>,
}

/// The total score of each node for `pod` (same order as `nodes`): the weighted sum of all
/// plugins. `nodes` should be the nodes that passed the filters, since the spreading, taint
/// and affinity plugins are normalised over them.
pub fn score_nodes(pod: &PodInfo, nodes: &[&NodeInfo], ctx: &ScoreContext) -> Vec<i64> {
    // kube-scheduler skips balanced allocation for pods without requests: scored on the
    // node's usage alone, it would pile such pods onto one node.
    let best_effort = pod.requests.milli_cpu == 0 && pod.requests.memory == 0;
    let mut totals: Vec<i64> = nodes
        .iter()
        .map(|node| {
            let mut total = LEAST_ALLOCATED_WEIGHT * least_allocated(pod, node);
            if !best_effort {
                total += BALANCED_ALLOCATION_WEIGHT * balanced_allocation(pod, node);
            }
            total
        })
        .collect();
    let mut add = |weight: i64, scores: &[i64]| {
        for (total, score) in totals.iter_mut().zip(scores) {
            *total += weight * score;
        }
    };
    if let Some(scores) = &ctx.topology_spread {
        add(POD_TOPOLOGY_SPREAD_WEIGHT, scores);
    }
    add(TAINT_TOLERATION_WEIGHT, &taint_toleration(pod, nodes));
    if !pod.preferred_affinity.is_empty() {
        add(NODE_AFFINITY_WEIGHT, &node_affinity(pod, nodes));
    }
    if let Some(scores) = &ctx.inter_pod_affinity {
        add(INTER_POD_AFFINITY_WEIGHT, scores);
    }
    totals
}

/// The index of the highest score, ties broken uniformly at random (reservoir sampling, one
/// pass); `None` when `scores` is empty.
pub fn pick_best(scores: &[i64], rng: &mut impl Rng) -> Option<usize> {
    let mut best: Option<(usize, i64)> = None;
    let mut ties = 0u32;
    for (i, &score) in scores.iter().enumerate() {
        match best {
            Some((_, top)) if score < top => {}
            Some((_, top)) if score == top => {
                ties += 1;
                if rng.gen_range(0..ties) == 0 {
                    best = Some((i, score));
                }
            }
            _ => {
                best = Some((i, score));
                ties = 1;
            }
        }
    }
    best.map(|(i, _)| i)
}

// === Resource plugins ===

/// kube-scheduler's LeastAllocated: the share of cpu and memory (weight 1 each) left free
/// once the pod is placed, counting [`PodInfo::non_zero_requests`] so pods without requests
/// still spread. Resources the node has none of are left out.
pub fn least_allocated(pod: &PodInfo, node: &NodeInfo) -> i64 {
    let requested = node.non_zero_requested + pod.non_zero_requests;
    let resources = [
        (requested.milli_cpu, node.allocatable.milli_cpu),
        (requested.memory, node.allocatable.memory),
    ];
    let (mut sum, mut weights) = (0, 0);
    for (requested, allocatable) in resources {
        if allocatable == 0 {
            continue;
        }
        let score = if requested > allocatable {
            0
        } else {
            (allocatable - requested) * MAX_NODE_SCORE / allocatable
        };
        sum += score;
        weights += 1;
    }
    if weights == 0 {
        0
    } else {
        sum / weights
    }
}

/// kube-scheduler's BalancedAllocation: high when the cpu and memory fractions requested
/// (with the pod) are close, `(1 - |cpu - memory| / 2) * 100`, each fraction capped at 1.
pub fn balanced_allocation(pod: &PodInfo, node: &NodeInfo) -> i64 {
    let requested = node.requested + pod.requests;
    let fraction = |requested: i64, allocatable: i64| {
        (allocatable != 0).then(|| (requested as f64 / allocatable as f64).min(1.0))
    };
    let cpu = fraction(requested.milli_cpu, node.allocatable.milli_cpu);
    let memory = fraction(requested.memory, node.allocatable.memory);
    let std = match (cpu, memory) {
        (Some(cpu), Some(memory)) => (cpu - memory).abs() / 2.0,
        _ => 0.0,
    };
    ((1.0 - std) * MAX_NODE_SCORE as f64) as i64
}

// === Normalised plugins ===

/// Number of PreferNoSchedule taints of `node` that `pod` does not tolerate.
pub fn untolerated_prefer_no_schedule(pod: &PodInfo, node: &NodeInfo) -> i64 {
    node.taints
        .iter()
        .filter(|t| t.effect == TaintEffect::PreferNoSchedule && !tolerates(&pod.tolerations, t))
        .count() as i64
}

/// kube-scheduler's TaintToleration score: fewer untolerated PreferNoSchedule taints score
/// higher, normalised over the candidates and reversed.
pub fn taint_toleration(pod: &PodInfo, nodes: &[&NodeInfo]) -> Vec<i64> {
    let mut scores: Vec<i64> =
        nodes.iter().map(|n| untolerated_prefer_no_schedule(pod, n)).collect();
    default_normalize(&mut scores, true);
    scores
}

/// Sum of the weights of the pod's preferred node affinity terms that `node` matches.
pub fn preferred_affinity_weight(pod: &PodInfo, node: &NodeInfo) -> i64 {
    pod.preferred_affinity
        .iter()
        .filter(|p| p.term.matches(&node.name, &node.labels))
        .map(|p| p.weight)
        .sum()
}

/// kube-scheduler's NodeAffinity score: the matched preferred weights, normalised over the
/// candidates (all 0 when no node matches a term).
pub fn node_affinity(pod: &PodInfo, nodes: &[&NodeInfo]) -> Vec<i64> {
    let mut scores: Vec<i64> = nodes.iter().map(|n| preferred_affinity_weight(pod, n)).collect();
    default_normalize(&mut scores, false);
    scores
}

/// kube-scheduler's DefaultNormalizeScore: scales `scores` so the highest is
/// [`MAX_NODE_SCORE`], then, if `reverse`, turns each into `MAX_NODE_SCORE - score`. When all
/// are 0 they stay 0, or all become [`MAX_NODE_SCORE`] if `reverse`.
pub fn default_normalize(scores: &mut [i64], reverse: bool) {
    let max = scores.iter().copied().max().unwrap_or(0);
    if max <= 0 {
        if reverse {
            scores.fill(MAX_NODE_SCORE);
        }
        return;
    }
    for score in scores {
        *score = MAX_NODE_SCORE * *score / max;
        if reverse {
            *score = MAX_NODE_SCORE - *score;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::node_info::tests::{node, pod};
    use crate::scheduler::node_info::LabelGroups;
    use k8s_openapi::api::core::v1::Node;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use serde_json::{json, Value};
    use std::collections::BTreeMap;

    fn requesting(uid: &str, cpu: &str, memory: &str) -> PodInfo {
        PodInfo::new(&pod(
            uid,
            json!({"containers": [
                {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}},
            ]}),
        ))
    }

    /// The label groups of the pods on `nodes`.
    fn registry(nodes: &[&NodeInfo]) -> LabelGroups {
        let mut groups = LabelGroups::default();
        nodes.iter().flat_map(|n| n.pods()).for_each(|p| groups.register(p));
        groups
    }

    fn labelled(uid: &str, labels: Value) -> PodInfo {
        let mut p = pod(uid, json!({}));
        p.metadata.labels = serde_json::from_value(labels).unwrap();
        PodInfo::new(&p)
    }

    fn plain_node(name: &str) -> NodeInfo {
        NodeInfo::new(&node(name, "4", "8Gi", json!({})))
    }

    #[test]
    fn least_allocated_prefers_free_nodes() {
        let p = requesting("p", "1", "2Gi");
        let mut n = plain_node("n1");
        assert_eq!(least_allocated(&p, &n), 75);
        n.add_pod(requesting("a", "2", "4Gi"));
        assert_eq!(least_allocated(&p, &n), 25);
        n.add_pod(requesting("b", "2", "4Gi"));
        assert_eq!(least_allocated(&p, &n), 0);
    }

    #[test]
    fn least_allocated_counts_defaults_for_pods_without_requests() {
        let best_effort = PodInfo::new(&pod("p", json!({})));
        let n = NodeInfo::new(&node("n1", "1", "1000Mi", json!({})));
        // cpu: (1000 - 100) * 100 / 1000 = 90; memory: (1000Mi - 200Mi) * 100 / 1000Mi = 80
        assert_eq!(least_allocated(&best_effort, &n), 85);
    }

    #[test]
    fn balanced_allocation_prefers_even_usage() {
        let n = plain_node("n1");
        assert_eq!(balanced_allocation(&requesting("p", "2", "4Gi"), &n), 100);
        // cpu 0.5, memory 0.25: 1 - 0.125
        assert_eq!(balanced_allocation(&requesting("p", "2", "2Gi"), &n), 87);
        // fractions are capped at 1: cpu 1, memory 0
        assert_eq!(balanced_allocation(&requesting("p", "8", "0"), &n), 50);
    }

    /// A node with its host name label and, if given, a zone.
    fn named_node(name: &str, zone: Option<&str>) -> NodeInfo {
        let mut labels = json!({"kubernetes.io/hostname": name});
        if let Some(zone) = zone {
            labels["topology.kubernetes.io/zone"] = json!(zone);
        }
        NodeInfo::new(&node(name, "4", "8Gi", labels))
    }

    #[test]
    fn default_spreading_prefers_nodes_with_fewer_pods_of_the_merged_selectors() {
        use crate::scheduler::topology_spread::default_scores;
        let mut nodes = [named_node("n0", None), named_node("n1", None), named_node("n2", None)];
        nodes[1].add_pod(labelled("a", json!({"app": "web", "rc": "1"})));
        nodes[2].add_pod(labelled("b", json!({"app": "web", "rc": "1"})));
        nodes[2].add_pod(labelled("c", json!({"app": "web", "rc": "1"})));
        nodes[0].add_pod(labelled("d", json!({"app": "web", "rc": "2"})));
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        let p = labelled("p", json!({"app": "web", "rc": "1"}));
        let sel = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let groups = registry(&refs);
        let spread = |selectors: &[BTreeMap<String, String>]| {
            let matched = groups.matching(&p.namespace, selectors);
            default_scores(&p, &matched, &refs, &nodes)
        };
        // Service app=web and controller rc=1 merged: n0's rc=2 pod does not count. Counts
        // 0, 1, 2 weighted by ln(3 + 2), plus maxSkew 3 - 1: 2, 4, 5, normalised.
        let selectors = vec![sel(&[("app", "web")]), sel(&[("app", "web"), ("rc", "1")])];
        assert_eq!(spread(&selectors), Some(vec![100, 60, 40]));
        // The service alone counts every app=web pod: 1, 1, 2.
        assert_eq!(spread(&selectors[..1]), Some(vec![100, 100, 80]));
        // Nothing selects it: no constraints, no score.
        assert_eq!(spread(&[]), None);
    }

    #[test]
    fn default_spreading_counts_zones_too() {
        use crate::scheduler::topology_spread::default_scores;
        let mut nodes =
            [named_node("a1", Some("a")), named_node("a2", Some("a")), named_node("b1", Some("b"))];
        nodes[0].add_pod(labelled("x", json!({"app": "web"})));
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        let p = labelled("p", json!({"app": "web"}));
        let selectors = vec![[("app".to_owned(), "web".to_owned())].into_iter().collect()];
        let matched = registry(&refs).matching(&p.namespace, &selectors);
        // a1: 1 ln 5 + 2 + 1 ln 4 + 4 = 9; a2: 2 + 1 ln 4 + 4 = 7; b1: 2 + 4 = 6.
        assert_eq!(default_scores(&p, &matched, &refs, &nodes), Some(vec![66, 88, 100]));
    }

    #[test]
    fn taint_toleration_prefers_fewer_untolerated_prefer_no_schedule_taints() {
        let tainted = |name: &str, taints: Value| {
            let mut n: Node = node(name, "4", "8Gi", json!({}));
            n.spec = Some(serde_json::from_value(json!({"taints": taints})).unwrap());
            NodeInfo::new(&n)
        };
        let soft = |key: &str| json!({"key": key, "effect": "PreferNoSchedule"});
        let nodes = [
            tainted("n0", json!([])),
            tainted("n1", json!([soft("a"), {"key": "hard", "effect": "NoSchedule"}])),
            tainted("n2", json!([soft("a"), soft("b")])),
        ];
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        let p = PodInfo::new(&pod("p", json!({})));
        assert_eq!(untolerated_prefer_no_schedule(&p, &nodes[2]), 2);
        assert_eq!(taint_toleration(&p, &refs), vec![100, 50, 0]);
        let tolerant = PodInfo::new(&pod(
            "p",
            json!({"tolerations": [
                {"key": "b", "operator": "Exists", "effect": "PreferNoSchedule"},
            ]}),
        ));
        assert_eq!(taint_toleration(&tolerant, &refs), vec![100, 0, 0]);
        let everything = PodInfo::new(&pod("p", json!({"tolerations": [{"operator": "Exists"}]})));
        assert_eq!(taint_toleration(&everything, &refs), vec![100, 100, 100]);
    }

    #[test]
    fn node_affinity_sums_matching_preferred_weights() {
        let p = PodInfo::new(&pod(
            "p",
            json!({"affinity": {"nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "preference": {"matchExpressions": [
                        {"key": "disk", "operator": "In", "values": ["ssd"]}]}},
                    {"weight": 30, "preference": {"matchExpressions": [
                        {"key": "gpu", "operator": "Exists"}]}},
                ],
            }}}),
        ));
        let nodes = [
            NodeInfo::new(&node("n0", "4", "8Gi", json!({}))),
            NodeInfo::new(&node("n1", "4", "8Gi", json!({"disk": "ssd"}))),
            NodeInfo::new(&node("n2", "4", "8Gi", json!({"disk": "ssd", "gpu": "1"}))),
        ];
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        assert_eq!(preferred_affinity_weight(&p, &nodes[2]), 40);
        assert_eq!(node_affinity(&p, &refs), vec![0, 25, 100]);
        assert_eq!(node_affinity(&p, &refs[..1]), vec![0]);
    }

    #[test]
    fn normalize_scales_and_reverses() {
        let mut s = [0, 2, 4];
        default_normalize(&mut s, false);
        assert_eq!(s, [0, 50, 100]);
        let mut s = [0, 1, 4];
        default_normalize(&mut s, true);
        assert_eq!(s, [100, 75, 0]);
        let mut s = [0, 0];
        default_normalize(&mut s, false);
        assert_eq!(s, [0, 0]);
        default_normalize(&mut s, true);
        assert_eq!(s, [100, 100]);
    }

    #[test]
    fn score_nodes_prefers_the_emptier_node_and_spreads_replicas() {
        let mut nodes = [plain_node("n0"), plain_node("n1")];
        nodes[0].add_pod(requesting("a", "2", "4Gi"));
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        let p = requesting("p", "1", "1Gi");
        let scores = score_nodes(&p, &refs, &ScoreContext::default());
        assert_eq!(scores.len(), 2);
        assert!(scores[1] > scores[0], "{scores:?}");

        // Best-effort replicas: the node without a replica wins although both are empty.
        let mut nodes = [named_node("n0", None), named_node("n1", None)];
        nodes[1].add_pod(labelled("r1", json!({"app": "web"})));
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        let selectors = vec![[("app".to_owned(), "web".to_owned())].into_iter().collect()];
        let r2 = labelled("r2", json!({"app": "web"}));
        let matched = registry(&refs).matching("default", &selectors);
        let spread =
            crate::scheduler::topology_spread::default_scores(&r2, &matched, &refs, &nodes);
        let ctx = ScoreContext { topology_spread: spread, ..ScoreContext::default() };
        let scores = score_nodes(&r2, &refs, &ctx);
        assert!(scores[0] > scores[1], "{scores:?}");
        assert!(score_nodes(&p, &[], &ScoreContext::default()).is_empty());
    }

    #[test]
    fn pick_best_takes_the_highest_and_breaks_ties_randomly() {
        let mut rng = StdRng::seed_from_u64(7);
        assert_eq!(pick_best(&[], &mut rng), None);
        assert_eq!(pick_best(&[5], &mut rng), Some(0));
        assert_eq!(pick_best(&[1, 9, 3], &mut rng), Some(1));
        let mut seen = [0; 5];
        for _ in 0..3000 {
            let i = pick_best(&[7, 9, 2, 9, 9], &mut rng).unwrap();
            seen[i] += 1;
        }
        assert_eq!((seen[0], seen[2]), (0, 0));
        for i in [1, 3, 4] {
            assert!((800..1200).contains(&seen[i]), "{seen:?}");
        }
    }
}
