//! A pod's `topologySpreadConstraints`, as kube-scheduler's PodTopologySpread plugin places
//! pods: the pods a constraint's selector matches (in the pod's namespace, not terminating)
//! are counted per topology domain (the nodes sharing a value of its `topologyKey`), and a
//! node may take the pod only if its domain's count, the pod included, exceeds the smallest
//! domain's by no more than `maxSkew` (`whenUnsatisfiable: DoNotSchedule`); the
//! `ScheduleAnyway` constraints score nodes in emptier domains higher instead.
//!
//! A pod with constraints of its own is spread by them alone; one without gets the plugin's
//! system defaults ([`default_scores`]): spread over nodes and zones from the pods of the
//! services and the controller that select it.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::{Pod, TopologySpreadConstraint};

use super::filters::{self, FitFailure};
use super::node_info::{owned_selector, NodeInfo, PodInfo, TopologyPair};
use super::scores::MAX_NODE_SCORE;
use crate::model::LabelSelector;

/// The label that names a node's own domain: its pods are counted on the node itself.
const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
/// The zone label of the system default constraints.
const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
/// The system default constraints' `maxSkew`: by node, then by zone (both `ScheduleAnyway`).
const DEFAULT_HOST_SKEW: i64 = 3;
const DEFAULT_ZONE_SKEW: i64 = 5;

/// One compiled spread constraint.
#[derive(Clone, Debug)]
pub struct SpreadConstraint {
    max_skew: i64,
    topology_key: String,
    /// `whenUnsatisfiable: ScheduleAnyway` (scored), else `DoNotSchedule` (filtered).
    schedule_anyway: bool,
    /// The pods counted, `matchLabelKeys` merged in; `None` (no selector) counts none.
    selector: Option<LabelSelector>,
    /// Fewer domains than this count the smallest as empty.
    min_domains: Option<i64>,
    /// `nodeAffinityPolicy: Honor` (the default): nodes the pod's node selector and required
    /// node affinity exclude are not counted.
    honor_node_affinity: bool,
    /// `nodeTaintsPolicy: Honor`: nodes with taints the pod does not tolerate are not counted.
    honor_taints: bool,
}

impl SpreadConstraint {
    fn new(pod: &Pod, constraint: &TopologySpreadConstraint) -> SpreadConstraint {
        let keys = [(constraint.match_label_keys.as_ref(), true)];
        let selector = owned_selector(constraint.label_selector.as_ref(), pod, &keys);
        let honor = |policy: &Option<String>, default: bool| {
            policy.as_deref().map_or(default, |p| p == "Honor")
        };
        SpreadConstraint {
            max_skew: i64::from(constraint.max_skew),
            topology_key: constraint.topology_key.clone(),
            schedule_anyway: constraint.when_unsatisfiable == "ScheduleAnyway",
            selector,
            min_domains: constraint.min_domains.map(i64::from),
            honor_node_affinity: honor(&constraint.node_affinity_policy, true),
            honor_taints: honor(&constraint.node_taints_policy, false),
        }
    }

    /// The constraints of `pod`, empty when it has none.
    pub fn of(pod: &Pod) -> Vec<SpreadConstraint> {
        let constraints = pod.spec.as_ref().and_then(|s| s.topology_spread_constraints.as_ref());
        constraints.into_iter().flatten().map(|c| SpreadConstraint::new(pod, c)).collect()
    }

    /// Whether `node` is counted for `pod` (kube-scheduler's node inclusion policies).
    fn includes(&self, pod: &PodInfo, node: &NodeInfo) -> bool {
        (!self.honor_node_affinity || filters::node_affinity(pod, node).is_ok())
            && (!self.honor_taints || filters::taint_toleration(pod, node).is_ok())
    }

    /// Whether this constraint of `owner` counts `pod` (whose placement may then let `owner`
    /// in).
    pub fn counts(&self, owner: &PodInfo, pod: &PodInfo) -> bool {
        let selector = self.selector.as_ref().filter(|s| !s.is_empty());
        pod.namespace == owner.namespace && selector.is_some_and(|s| s.matches_map(&pod.labels))
    }

    /// Pods on `node` this constraint counts for a pod of `namespace` (none for an empty
    /// selector, as kube-scheduler counts, though the pod itself still counts).
    fn count_on(&self, node: &NodeInfo, namespace: &str) -> i64 {
        let Some(selector) = self.selector.as_ref().filter(|s| !s.is_empty()) else { return 0 };
        let counted = node.pods().filter(|p| {
            !p.terminating && p.namespace == namespace && selector.matches_map(&p.labels)
        });
        counted.count() as i64
    }

    fn pair<'n>(&self, node: &'n NodeInfo) -> Option<TopologyPair<'n>> {
        node.domain(&self.topology_key)
    }
}

/// Whether `node` has the topology key of every one of `constraints`.
fn has_every_key<'c>(
    node: &NodeInfo,
    mut constraints: impl Iterator<Item = &'c SpreadConstraint>,
) -> bool {
    constraints.all(|c| node.labels.contains_key(&c.topology_key))
}

/// What the filter needs of the whole cluster for one pod (kube-scheduler's PreFilter): the
/// matching pods per domain of each `DoNotSchedule` constraint, and each key's smallest domain.
pub struct SpreadFilter<'a> {
    pod: &'a PodInfo,
    counts: HashMap<TopologyPair<'a>, i64>,
    /// Per topology key: the smallest domain's count and how many domains there are.
    smallest: HashMap<&'a str, (i64, i64)>,
}

impl<'a> SpreadFilter<'a> {
    /// The counts for `pod` over `nodes`; `None` when it has no `DoNotSchedule` constraint.
    pub fn new(pod: &'a PodInfo, nodes: &'a [NodeInfo]) -> Option<SpreadFilter<'a>> {
        let filtered = || pod.spread.iter().filter(|c| !c.schedule_anyway);
        filtered().next()?;
        let mut counts: HashMap<TopologyPair<'a>, i64> = HashMap::new();
        for node in nodes.iter().filter(|n| has_every_key(n, filtered())) {
            for constraint in filtered().filter(|c| c.includes(pod, node)) {
                let Some(pair) = constraint.pair(node) else { continue };
                *counts.entry(pair).or_default() += constraint.count_on(node, &pod.namespace);
            }
        }
        let mut smallest: HashMap<&str, (i64, i64)> = HashMap::new();
        for (&(key, _), &count) in &counts {
            let entry = smallest.entry(key).or_insert((count, 0));
            entry.0 = entry.0.min(count);
            entry.1 += 1;
        }
        Some(SpreadFilter { pod, counts, smallest })
    }

    /// kube-scheduler's PodTopologySpread filter for `node`: the node must have every
    /// constraint's key, and placing the pod there must keep each skew within `maxSkew`.
    pub fn check(&self, node: &NodeInfo) -> Result<(), FitFailure> {
        for constraint in self.pod.spread.iter().filter(|c| !c.schedule_anyway) {
            let Some(pair) = constraint.pair(node) else {
                return Err(FitFailure::SpreadMissingLabel);
            };
            let smallest = match self.smallest.get(pair.0) {
                Some(&(_, domains)) if constraint.min_domains.is_some_and(|m| domains < m) => 0,
                Some(&(count, _)) => count,
                // No domain counted: nothing to be skewed against.
                None if constraint.min_domains.is_some() => 0,
                None => continue,
            };
            let own = constraint.selector.as_ref().is_some_and(|s| s.matches_map(&self.pod.labels));
            let here = self.counts.get(&pair).copied().unwrap_or(0);
            if here + i64::from(own) - smallest > constraint.max_skew {
                return Err(FitFailure::SpreadConstraintsNotMatch);
            }
        }
        Ok(())
    }
}

/// kube-scheduler's PodTopologySpread score of each of `candidates` for a pod with spread
/// constraints, normalised to 0..=[`MAX_NODE_SCORE`]: fewer matching pods in the node's
/// domains score higher, each constraint's count weighted by the log of its number of domains.
/// `None` for a pod without constraints; all zeros when none of them is `ScheduleAnyway`.
pub fn scores(pod: &PodInfo, candidates: &[&NodeInfo], nodes: &[NodeInfo]) -> Option<Vec<i64>> {
    if pod.spread.is_empty() {
        return None;
    }
    let scored: Vec<&SpreadConstraint> = pod.spread.iter().filter(|c| c.schedule_anyway).collect();
    if scored.is_empty() {
        return Some(vec![0; candidates.len()]);
    }
    // Candidates lacking a key are left out; the domains of the rest are counted over all nodes.
    let ignored: Vec<bool> =
        candidates.iter().map(|n| !has_every_key(n, scored.iter().copied())).collect();
    let mut counts: HashMap<TopologyPair, i64> = HashMap::new();
    let mut domains = vec![0usize; scored.len()];
    for (node, _) in candidates.iter().zip(&ignored).filter(|(_, ignored)| !**ignored) {
        for (i, constraint) in scored.iter().enumerate() {
            if constraint.topology_key == LABEL_HOSTNAME {
                domains[i] += 1;
            } else if let Some(pair) = constraint.pair(node) {
                if counts.insert(pair, 0).is_none() {
                    domains[i] += 1;
                }
            }
        }
    }
    for node in nodes.iter().filter(|n| has_every_key(n, scored.iter().copied())) {
        for constraint in scored.iter().filter(|c| c.topology_key != LABEL_HOSTNAME) {
            if !constraint.includes(pod, node) {
                continue;
            }
            if let Some(count) = constraint.pair(node).and_then(|pair| counts.get_mut(&pair)) {
                *count += constraint.count_on(node, &pod.namespace);
            }
        }
    }
    let weights: Vec<f64> = domains.iter().map(|d| ((d + 2) as f64).ln()).collect();
    let raw: Vec<Option<i64>> = candidates
        .iter()
        .zip(&ignored)
        .map(|(node, ignored)| {
            if *ignored {
                return None;
            }
            let mut score = 0.0;
            for (constraint, weight) in scored.iter().zip(&weights) {
                let Some(pair) = constraint.pair(node) else { continue };
                let count = if constraint.topology_key == LABEL_HOSTNAME {
                    constraint.count_on(node, &pod.namespace)
                } else {
                    counts.get(&pair).copied().unwrap_or(0)
                };
                score += count as f64 * weight + (constraint.max_skew - 1) as f64;
            }
            Some(score.round() as i64)
        })
        .collect();
    Some(normalised(&raw))
}

/// kube-scheduler's PodTopologySpread score, with its system default constraints, of each of
/// `candidates` for a pod without constraints of its own: the pods of `groups` (the label
/// groups the merged selectors of its services and controlling ReplicationController match:
/// kube-scheduler's `DefaultSelector`) counted on each node (`kubernetes.io/hostname`,
/// maxSkew 3) and in each zone (`topology.kubernetes.io/zone`, maxSkew 5; the nodes without
/// one counted as one domain, and a node without one scored by its own count alone), over the
/// nodes the pod's node selector and required affinity allow. `None` when nothing selects the
/// pod (no constraints, no score).
pub fn default_scores(
    pod: &PodInfo,
    groups: &[u64],
    candidates: &[&NodeInfo],
    nodes: &[NodeInfo],
) -> Option<Vec<i64>> {
    if groups.is_empty() {
        return None;
    }
    let count = |node: &NodeInfo| groups.iter().map(|g| node.group_count(*g)).sum::<i64>();
    fn zone(node: &NodeInfo) -> &str {
        node.labels.get(LABEL_ZONE).map_or("", String::as_str)
    }
    // Zones count only for candidates in one: without any, the pass over every node is spared.
    let zoned = candidates.iter().any(|n| n.labels.contains_key(LABEL_ZONE));
    // (A list: a cluster has few zones, and comparing short names beats hashing them.)
    let mut zones: Vec<(&str, i64)> = Vec::new();
    let counted = |zones: &[(&str, i64)], name: &str| zones.iter().position(|(z, _)| *z == name);
    if zoned {
        for node in candidates {
            if counted(&zones, zone(node)).is_none() {
                zones.push((zone(node), 0));
            }
        }
        let unconstrained = pod.node_selector.is_empty() && pod.required_affinity.is_none();
        let allowed = |n: &&NodeInfo| unconstrained || filters::node_affinity(pod, n).is_ok();
        for node in nodes.iter().filter(allowed) {
            if let Some(i) = counted(&zones, zone(node)) {
                zones[i].1 += count(node);
            }
        }
    }
    let host_weight = ((candidates.len() + 2) as f64).ln();
    let zone_weight = ((zones.len() + 2) as f64).ln();
    let raw: Vec<Option<i64>> = candidates
        .iter()
        .map(|node| {
            let mut score = 0.0;
            if node.labels.contains_key(LABEL_HOSTNAME) {
                score += count(node) as f64 * host_weight + (DEFAULT_HOST_SKEW - 1) as f64;
            }
            if node.labels.contains_key(LABEL_ZONE) {
                let in_zone = counted(&zones, zone(node)).map_or(0, |i| zones[i].1);
                score += in_zone as f64 * zone_weight + (DEFAULT_ZONE_SKEW - 1) as f64;
            }
            Some(score.round() as i64)
        })
        .collect();
    Some(normalised(&raw))
}

/// PodTopologySpread's normalisation: the fewest matching pods score [`MAX_NODE_SCORE`];
/// ignored nodes (`None`) 0.
fn normalised(raw: &[Option<i64>]) -> Vec<i64> {
    let min = raw.iter().flatten().copied().min().unwrap_or(0);
    let max = raw.iter().flatten().copied().max().unwrap_or(0);
    raw.iter()
        .map(|score| match score {
            None => 0,
            Some(_) if max == 0 => MAX_NODE_SCORE,
            Some(score) => MAX_NODE_SCORE * (max + min - score) / max,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::node_info::tests::{node, pod};
    use serde_json::{json, Value};

    fn placed(uid: &str, labels: Value, spec: Value) -> PodInfo {
        let mut p = pod(uid, spec);
        p.metadata.labels = serde_json::from_value(labels).unwrap();
        PodInfo::new(&p)
    }

    fn zoned(name: &str, zone: &str) -> NodeInfo {
        let labels = json!({"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone});
        NodeInfo::new(&node(name, "4", "8Gi", labels))
    }

    /// A web pod spread over zones by `constraint` (merged into a zone constraint).
    fn spread(constraint: Value) -> PodInfo {
        let mut c = json!({"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}});
        c.as_object_mut().unwrap().extend(constraint.as_object().unwrap().clone());
        placed("p", json!({"app": "web"}), json!({"topologySpreadConstraints": [c]}))
    }

    fn web(uid: &str) -> PodInfo {
        placed(uid, json!({"app": "web"}), json!({}))
    }

    fn checks(pod: &PodInfo, nodes: &[NodeInfo]) -> Vec<Result<(), FitFailure>> {
        let filter = SpreadFilter::new(pod, nodes).expect("a filter");
        nodes.iter().map(|n| filter.check(n)).collect()
    }

    #[test]
    fn a_domain_may_not_get_more_than_max_skew_above_the_smallest() {
        let mut cluster = vec![zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b")];
        cluster[0].add_pod(web("w0"));
        cluster[1].add_pod(web("w1"));
        cluster[2].add_pod(web("w2"));
        // Zone a has 2, zone b 1: a third in a skews by 2.
        let skewed = Err(FitFailure::SpreadConstraintsNotMatch);
        assert_eq!(checks(&spread(json!({})), &cluster), vec![skewed.clone(), skewed, Ok(())]);
        assert_eq!(checks(&spread(json!({"maxSkew": 2})), &cluster), vec![Ok(()), Ok(()), Ok(())]);
        // Pods the selector does not match, terminating pods and other namespaces' pods are
        // not counted.
        let mut leaving = web("w3");
        leaving.terminating = true;
        cluster[2].add_pod(leaving);
        cluster[2].add_pod(placed("db", json!({"app": "db"}), json!({})));
        let mut elsewhere = web("w4");
        elsewhere.namespace = "other".into();
        cluster[2].add_pod(elsewhere);
        assert_eq!(checks(&spread(json!({})), &cluster)[2], Ok(()));
        // An empty selector counts no other pod, but the pod itself (kube-scheduler's rule).
        let mut everything = spread(json!({"labelSelector": {}}));
        everything.labels.clear();
        let filter = SpreadFilter::new(&everything, &cluster).unwrap();
        assert_eq!(filter.smallest.get("topology.kubernetes.io/zone"), Some(&(0, 2)));
        assert!(cluster.iter().all(|n| filter.check(n).is_ok()), "0 + 1 - 0 everywhere");
        // A pod its own selector does not match adds nothing to the skew.
        let mut db = spread(json!({}));
        db.labels = [("app".to_string(), "db".to_string())].into();
        assert_eq!(checks(&db, &cluster), vec![Ok(()), Ok(()), Ok(())]);
    }

    #[test]
    fn a_node_without_the_key_is_refused_and_min_domains_counts_missing_domains_as_empty() {
        let bare = NodeInfo::new(&node("bare", "4", "8Gi", json!({})));
        let mut cluster = vec![zoned("a1", "a"), zoned("b1", "b"), bare];
        cluster[0].add_pod(web("w0"));
        let checked = checks(&spread(json!({})), &cluster);
        assert_eq!(
            checked,
            vec![
                Err(FitFailure::SpreadConstraintsNotMatch),
                Ok(()),
                Err(FitFailure::SpreadMissingLabel)
            ]
        );
        // Two domains, three wanted: the smallest counts as 0, so b (0 + 1) is fine, a is not.
        cluster[1].add_pod(web("w1"));
        let wanting_three = spread(json!({"minDomains": 3}));
        let skewed = Err(FitFailure::SpreadConstraintsNotMatch);
        assert_eq!(checks(&wanting_three, &cluster)[..2], [skewed.clone(), skewed]);
        assert_eq!(checks(&spread(json!({})), &cluster)[..2], [Ok(()), Ok(())]);
    }

    #[test]
    fn nodes_the_pod_may_not_go_to_are_not_counted_unless_the_policy_says_so() {
        let pool = |name: &str, zone: &str, pool: &str| {
            let labels = json!({"topology.kubernetes.io/zone": zone, "pool": pool});
            NodeInfo::new(&node(name, "4", "8Gi", labels))
        };
        let mut cluster = vec![pool("a1", "a", "web"), pool("b1", "b", "batch")];
        cluster[1].add_pod(web("w0"));
        cluster[1].add_pod(web("w1"));
        let selecting = |policy: Value| {
            let mut p = spread(policy);
            p.node_selector = [("pool".to_string(), "web".to_string())].into();
            p
        };
        // The pod's nodeSelector excludes b1: zone b is no domain, and a (0 + 1 - 0) is fine.
        let honoring = selecting(json!({}));
        assert_eq!(checks(&honoring, &cluster)[0], Ok(()));
        // Counted all the same, zone b (2) is the... largest: a is still within the skew.
        let ignoring = selecting(json!({"nodeAffinityPolicy": "Ignore"}));
        assert_eq!(checks(&ignoring, &cluster)[0], Ok(()));
        // b1 itself, were the pod allowed there: 2 + 1 - 0 with b1 counted.
        assert_eq!(checks(&ignoring, &cluster)[1], Err(FitFailure::SpreadConstraintsNotMatch));
        // Honoring taints: a tainted node's domain is not counted.
        let mut tainted: k8s_openapi::api::core::v1::Node =
            node("t1", "4", "8Gi", json!({"topology.kubernetes.io/zone": "c", "pool": "web"}));
        tainted.spec = Some(
            serde_json::from_value(json!({"taints": [{"key": "gpu", "effect": "NoSchedule"}]}))
                .unwrap(),
        );
        let mut cluster = vec![pool("a1", "a", "web"), NodeInfo::new(&tainted)];
        cluster[0].add_pod(web("w2"));
        // (the smallest domain's count, how many domains)
        let smallest = |p: &PodInfo| {
            SpreadFilter::new(p, &cluster)
                .unwrap()
                .smallest
                .get("topology.kubernetes.io/zone")
                .copied()
        };
        assert_eq!(smallest(&selecting(json!({}))), Some((0, 2)));
        assert_eq!(smallest(&selecting(json!({"nodeTaintsPolicy": "Honor"}))), Some((1, 1)));
    }

    #[test]
    fn schedule_anyway_scores_emptier_domains_higher() {
        let mut cluster = vec![zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b")];
        cluster[0].add_pod(web("w0"));
        cluster[1].add_pod(web("w1"));
        let refs: Vec<&NodeInfo> = cluster.iter().collect();
        let soft = spread(json!({"whenUnsatisfiable": "ScheduleAnyway"}));
        assert!(SpreadFilter::new(&soft, &cluster).is_none());
        // Zone a: 2 pods x ln(4) = 2.77 -> 3; zone b: 0. Normalised: (3 + 0 - s) / 3.
        assert_eq!(scores(&soft, &refs, &cluster), Some(vec![0, 0, 100]));
        // Only DoNotSchedule constraints: no spreading score at all; no constraints: None.
        assert_eq!(scores(&spread(json!({})), &refs, &cluster), Some(vec![0, 0, 0]));
        assert_eq!(scores(&web("w"), &refs, &cluster), None);
    }
}
