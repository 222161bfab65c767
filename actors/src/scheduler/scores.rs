//! The scheduler's scores: how good each feasible node is for a pod, and the pick among the
//! best.
//!
//! Each plugin gives every node 0..=[`MAX_NODE_SCORE`] as its kube-scheduler counterpart
//! does: least allocated (NodeResourcesFit), balanced allocation
//! (NodeResourcesBalancedAllocation), selector spread (SelectorSpread: fewer pods of the same
//! services and controller on the node and in its zone), taint toleration (fewer untolerated
//! PreferNoSchedule taints) and preferred node affinity. Plugins that compare nodes with
//! each other are normalised over the candidate nodes given. [`score_nodes`] sums them with
//! kube-scheduler's default weights, with the scores of the plugins that count pods across the
//! cluster (a pod's own spread constraints, inter-pod affinity) given in the [`ScoreContext`].

use std::collections::{BTreeMap, HashMap};

use rand::Rng;

use super::node_info::{LabelGroups, NodeInfo, PodInfo};
use crate::model::taints::{tolerates, TaintEffect};

/// The highest score a plugin gives a node.
pub const MAX_NODE_SCORE: i64 = 100;
/// Weight of [`least_allocated`] in [`score_nodes`].
pub const LEAST_ALLOCATED_WEIGHT: i64 = 1;
/// Weight of [`balanced_allocation`] in [`score_nodes`].
pub const BALANCED_ALLOCATION_WEIGHT: i64 = 1;
/// Weight of [`selector_spread`] in [`score_nodes`] (that of PodTopologySpread, which took
/// its place in kube-scheduler's default profile).
pub const SELECTOR_SPREAD_WEIGHT: i64 = 2;
/// Weight of [`taint_toleration`] in [`score_nodes`].
pub const TAINT_TOLERATION_WEIGHT: i64 = 3;
/// Weight of [`node_affinity`] in [`score_nodes`].
pub const NODE_AFFINITY_WEIGHT: i64 = 2;
/// Weight of a pod's own spread constraints ([`super::topology_spread::scores`]).
pub const POD_TOPOLOGY_SPREAD_WEIGHT: i64 = 2;
/// Weight of inter-pod affinity ([`super::pod_affinity::scores`]).
pub const INTER_POD_AFFINITY_WEIGHT: i64 = 2;

/// Share of the zone count in the selector spread score when nodes have zones.
const ZONE_WEIGHTING: f64 = 2.0 / 3.0;

/// What scoring needs beyond the pod and the nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScoreContext {
    /// The label groups (see [`LabelGroups`]) matched by the services and the controller that
    /// select the pod, their selectors ANDed as kube-scheduler's DefaultSelector does; empty
    /// when nothing selects it.
    pub spread_groups: Vec<u64>,
    /// The scores of the pod's own topology spread constraints, one per node scored, which
    /// replace the selector spread; `None` for a pod without constraints.
    pub topology_spread: Option<Vec<i64>>,
    /// The inter-pod affinity scores, one per node scored; `None` when there are none.
    pub inter_pod_affinity: Option<Vec<i64>>,
}

impl ScoreContext {
    /// The context of a pod in `namespace` selected by `selectors`.
    pub fn new(
        namespace: &str,
        selectors: &[BTreeMap<String, String>],
        groups: &LabelGroups,
    ) -> Self {
        let spread_groups = groups.matching(namespace, selectors);
        Self { spread_groups, ..Self::default() }
    }
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
    match &ctx.topology_spread {
        None => add(SELECTOR_SPREAD_WEIGHT, &selector_spread(nodes, &ctx.spread_groups)),
        Some(scores) => add(POD_TOPOLOGY_SPREAD_WEIGHT, scores),
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

/// kube-scheduler's SelectorSpread: nodes with fewer pods (of the pod's namespace, not
/// terminating) matching the merged `selectors` score higher, relative to the most loaded
/// candidate; when nodes have zone labels, the zone's count weighs two thirds.
pub fn selector_spread(nodes: &[&NodeInfo], groups: &[u64]) -> Vec<i64> {
    let counts: Vec<i64> =
        nodes.iter().map(|n| groups.iter().map(|g| n.group_count(*g)).sum()).collect();

    let max_node = counts.iter().copied().max().unwrap_or(0);
    let mut zone_counts: HashMap<&str, i64> = HashMap::new();
    for (node, &count) in nodes.iter().zip(&counts) {
        if !node.zone.is_empty() {
            *zone_counts.entry(node.zone.as_str()).or_default() += count;
        }
    }
    let max_zone = zone_counts.values().copied().max().unwrap_or(0);
    let max = MAX_NODE_SCORE as f64;
    let relative = |count: i64, max_count: i64| {
        if max_count > 0 {
            max * (max_count - count) as f64 / max_count as f64
        } else {
            max
        }
    };
    nodes
        .iter()
        .zip(&counts)
        .map(|(node, &count)| {
            let mut score = relative(count, max_node);
            if let Some(&zone_count) = zone_counts.get(node.zone.as_str()) {
                score = score * (1.0 - ZONE_WEIGHTING)
                    + ZONE_WEIGHTING * relative(zone_count, max_zone);
            }
            score as i64
        })
        .collect()
}

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
    use k8s_openapi::api::core::v1::Node;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use serde_json::{json, Value};

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

    #[test]
    fn selector_spread_prefers_nodes_with_fewer_matching_pods() {
        let mut nodes = [plain_node("n0"), plain_node("n1"), plain_node("n2")];
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
            selector_spread(
                &refs,
                &ScoreContext::new(&p.namespace, selectors, &groups).spread_groups,
            )
        };
        // service app=web and controller rc=1 are ANDed: n0's rc=2 pod does not count
        let selectors = vec![sel(&[("app", "web")]), sel(&[("app", "web"), ("rc", "1")])];
        assert_eq!(spread(&selectors), vec![100, 50, 0]);
        // the service alone counts every app=web pod: 1, 1, 2
        assert_eq!(spread(&selectors[..1]), vec![50, 50, 0]);
        // no selectors: no preference
        assert_eq!(spread(&[]), vec![100, 100, 100]);
    }

    #[test]
    fn selector_spread_weighs_zones() {
        let zoned = |name: &str, zone: &str| {
            NodeInfo::new(&node(name, "4", "8Gi", json!({"topology.kubernetes.io/zone": zone})))
        };
        let mut nodes = [zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b")];
        nodes[0].add_pod(labelled("x", json!({"app": "web"})));
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        let p = labelled("p", json!({"app": "web"}));
        let selectors = vec![[("app".to_owned(), "web".to_owned())].into_iter().collect()];
        let ctx = ScoreContext::new(&p.namespace, &selectors, &registry(&refs));
        // a1: node 0/1 -> 0, zone a 0 -> 0; a2: node 100, zone 0 -> 33; b1: node 100, zone 100
        assert_eq!(selector_spread(&refs, &ctx.spread_groups), vec![0, 33, 100]);
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
        let mut nodes = [plain_node("n0"), plain_node("n1")];
        nodes[1].add_pod(labelled("r1", json!({"app": "web"})));
        let refs: Vec<&NodeInfo> = nodes.iter().collect();
        let selectors = vec![[("app".to_owned(), "web".to_owned())].into_iter().collect()];
        let ctx = ScoreContext::new("default", &selectors, &registry(&refs));
        let scores = score_nodes(&labelled("r2", json!({"app": "web"})), &refs, &ctx);
        assert!(scores[0] > scores[1], "{scores:?}");
        assert!(score_nodes(&p, &[], &ctx).is_empty());
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
