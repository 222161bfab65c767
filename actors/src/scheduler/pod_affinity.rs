//! Inter-pod affinity and anti-affinity, as kube-scheduler's InterPodAffinity plugin places
//! pods: a pod's required terms (`podAffinity` / `podAntiAffinity`
//! `requiredDuringSchedulingIgnoredDuringExecution`) and the required anti-affinity of the pods
//! already placed filter nodes; preferred terms, on both sides, score them.
//!
//! A term selects pods (its label selector, in its namespaces) and names a topology key: the
//! pods it counts are those on nodes whose label under that key has the same value as the
//! candidate node's (the same node for `kubernetes.io/hostname`, the same zone for
//! `topology.kubernetes.io/zone`). Counts are kept per topology pair (key, value) over every
//! node, once per pod being scheduled ([`AffinityFilter::new`], [`scores`]).

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{Pod, PodAffinityTerm, WeightedPodAffinityTerm};

use super::filters::FitFailure;
use super::node_info::{owned_selector, NodeInfo, PodInfo, TopologyPair};
use super::scores::MAX_NODE_SCORE;
use crate::model::LabelSelector;

/// The labels of every namespace, by name (for terms with a `namespaceSelector`).
pub type NamespaceLabels = HashMap<String, BTreeMap<String, String>>;

/// The weight kube-scheduler gives an existing pod's required affinity term when scoring
/// (`hardPodAffinityWeight`, 1 by default).
const HARD_POD_AFFINITY_WEIGHT: i64 = 1;

/// One compiled pod (anti-)affinity term.
#[derive(Clone, Debug)]
pub struct AffinityTerm {
    /// Namespaces whose pods it selects: those listed, or the pod's own when neither these nor
    /// a namespace selector are given.
    namespaces: Vec<String>,
    /// Namespaces whose labels match this are selected too; `None` (no selector) selects none
    /// beyond the list, and an empty selector every namespace.
    namespace_selector: Option<LabelSelector>,
    /// Pods whose labels match this are selected; `None` (no selector, or one that cannot be
    /// read) selects none.
    selector: Option<LabelSelector>,
    /// The node label that defines the topology domain.
    topology_key: String,
    /// A preferred term's weight (1-100); 0 for a required term.
    weight: i64,
}

impl AffinityTerm {
    fn new(owner: &Pod, term: &PodAffinityTerm, weight: i32) -> AffinityTerm {
        let owner_namespace = owner.metadata.namespace.as_deref().unwrap_or_default();
        let listed = term.namespaces.as_deref().unwrap_or_default();
        let namespaces = if listed.is_empty() && term.namespace_selector.is_none() {
            vec![owner_namespace.to_string()]
        } else {
            listed.to_vec()
        };
        // `matchLabelKeys` / `mismatchLabelKeys`: the owner's values of those labels join the
        // selector (as the API server merges them into it when the pod is created).
        let keys =
            [(term.match_label_keys.as_ref(), true), (term.mismatch_label_keys.as_ref(), false)];
        let selector = owned_selector(term.label_selector.as_ref(), owner, &keys);
        AffinityTerm {
            namespaces,
            namespace_selector: owned_selector(term.namespace_selector.as_ref(), owner, &[]),
            selector,
            topology_key: term.topology_key.clone(),
            weight: i64::from(weight),
        }
    }

    /// Whether the term selects `pod` (kube-scheduler's `AffinityTerm.Matches`).
    fn matches(&self, pod: &PodInfo, namespace_labels: &NamespaceLabels) -> bool {
        // A namespace whose labels are not known (yet) has none.
        let no_labels = BTreeMap::new();
        let in_namespace = self.namespaces.contains(&pod.namespace)
            || self.namespace_selector.as_ref().is_some_and(|s| {
                s.matches_map(namespace_labels.get(&pod.namespace).unwrap_or(&no_labels))
            });
        in_namespace && self.selector.as_ref().is_some_and(|s| s.matches_map(&pod.labels))
    }

    /// The topology pair of `node` under this term's key, if the node has that label.
    fn pair<'n>(&self, node: &'n NodeInfo) -> Option<TopologyPair<'n>> {
        node.domain(&self.topology_key)
    }
}

/// A pod's inter-pod affinity and anti-affinity terms, compiled once.
#[derive(Clone, Debug, Default)]
pub struct PodAffinity {
    required_affinity: Vec<AffinityTerm>,
    required_anti_affinity: Vec<AffinityTerm>,
    preferred_affinity: Vec<AffinityTerm>,
    preferred_anti_affinity: Vec<AffinityTerm>,
}

impl PodAffinity {
    /// The terms of `pod`; `None` when it has none.
    pub fn of(pod: &Pod) -> Option<PodAffinity> {
        let affinity = pod.spec.as_ref()?.affinity.as_ref()?;
        let required = |terms: Option<&Vec<PodAffinityTerm>>| -> Vec<AffinityTerm> {
            terms.into_iter().flatten().map(|t| AffinityTerm::new(pod, t, 0)).collect()
        };
        let preferred = |terms: Option<&Vec<WeightedPodAffinityTerm>>| -> Vec<AffinityTerm> {
            let weighted = terms.into_iter().flatten().filter(|w| w.weight != 0);
            weighted.map(|w| AffinityTerm::new(pod, &w.pod_affinity_term, w.weight)).collect()
        };
        let (near, far) = (affinity.pod_affinity.as_ref(), affinity.pod_anti_affinity.as_ref());
        let terms = PodAffinity {
            required_affinity: required(
                near.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref()),
            ),
            required_anti_affinity: required(
                far.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref()),
            ),
            preferred_affinity: preferred(
                near.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()),
            ),
            preferred_anti_affinity: preferred(
                far.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()),
            ),
        };
        let none = terms.required_affinity.is_empty()
            && terms.required_anti_affinity.is_empty()
            && !terms.has_preferred();
        (!none).then_some(terms)
    }

    /// Whether one of the required affinity terms selects `pod` (whose placement may then
    /// let this pod in).
    pub fn requires(&self, pod: &PodInfo, namespaces: &NamespaceLabels) -> bool {
        self.required_affinity.iter().any(|t| t.matches(pod, namespaces))
    }

    /// Whether one of the required anti-affinity terms selects `pod` (whose going, or new
    /// labels, may then let this pod in).
    pub fn refuses(&self, pod: &PodInfo, namespaces: &NamespaceLabels) -> bool {
        self.required_anti_affinity.iter().any(|t| t.matches(pod, namespaces))
    }

    fn has_preferred(&self) -> bool {
        !self.preferred_affinity.is_empty() || !self.preferred_anti_affinity.is_empty()
    }

    /// Whether `pod` matches every one of `terms` (kube-scheduler's
    /// `podMatchesAllAffinityTerms`: false for no terms).
    fn matches_all(terms: &[AffinityTerm], pod: &PodInfo, namespaces: &NamespaceLabels) -> bool {
        !terms.is_empty() && terms.iter().all(|t| t.matches(pod, namespaces))
    }
}

fn count<'a>(counts: &mut HashMap<TopologyPair<'a>, i64>, pair: Option<TopologyPair<'a>>) {
    if let Some(pair) = pair {
        *counts.entry(pair).or_default() += 1;
    }
}

/// What the filter needs of the whole cluster for one pod (kube-scheduler's PreFilter):
/// topology pairs holding pods that the pod's required terms select, and those holding pods
/// whose required anti-affinity selects the pod.
pub struct AffinityFilter<'a> {
    pod: &'a PodInfo,
    /// Pairs with pods matching all of the pod's required affinity terms, per term's key.
    affinity: HashMap<TopologyPair<'a>, i64>,
    /// Pairs with pods matching one of the pod's required anti-affinity terms.
    anti_affinity: HashMap<TopologyPair<'a>, i64>,
    /// Pairs with pods whose required anti-affinity terms match the pod.
    existing_anti_affinity: HashMap<TopologyPair<'a>, i64>,
    /// No pod matches the pod's affinity, and the pod matches its own terms: it may start a
    /// group that has affinity to itself.
    first_of_its_group: bool,
}

impl<'a> AffinityFilter<'a> {
    /// The counts for `pod` over `nodes`; `None` when nothing can reject a node (the pod has
    /// no required terms and no placed pod has required anti-affinity).
    pub fn new(
        pod: &'a PodInfo,
        nodes: &'a [NodeInfo],
        namespaces: &NamespaceLabels,
    ) -> Option<AffinityFilter<'a>> {
        let own = pod.pod_affinity.as_deref();
        let required = own.map(|a| &a.required_affinity[..]).unwrap_or_default();
        let required_anti = own.map(|a| &a.required_anti_affinity[..]).unwrap_or_default();
        let mut filter = AffinityFilter {
            pod,
            affinity: HashMap::new(),
            anti_affinity: HashMap::new(),
            existing_anti_affinity: HashMap::new(),
            first_of_its_group: false,
        };
        let mut any_existing_anti = false;
        for node in nodes {
            for existing in node.pods_with_affinity() {
                let terms = existing.pod_affinity.as_deref().map(|a| &a.required_anti_affinity);
                for term in terms.into_iter().flatten() {
                    any_existing_anti = true;
                    if term.matches(pod, namespaces) {
                        count(&mut filter.existing_anti_affinity, term.pair(node));
                    }
                }
            }
            if required.is_empty() && required_anti.is_empty() {
                continue;
            }
            for existing in node.pods() {
                if PodAffinity::matches_all(required, existing, namespaces) {
                    for term in required {
                        count(&mut filter.affinity, term.pair(node));
                    }
                }
                for term in required_anti.iter().filter(|t| t.matches(existing, namespaces)) {
                    count(&mut filter.anti_affinity, term.pair(node));
                }
            }
        }
        if required.is_empty() && required_anti.is_empty() && !any_existing_anti {
            return None;
        }
        filter.first_of_its_group =
            filter.affinity.is_empty() && PodAffinity::matches_all(required, pod, namespaces);
        Some(filter)
    }

    /// kube-scheduler's InterPodAffinity filter for `node`: the pod's affinity, then its
    /// anti-affinity, then the placed pods' anti-affinity.
    pub fn check(&self, node: &NodeInfo) -> Result<(), FitFailure> {
        let own = self.pod.pod_affinity.as_deref();
        let mut affinity_found = true;
        for term in own.map(|a| &a.required_affinity[..]).unwrap_or_default() {
            // Every topology key of the terms must be on the node.
            let Some(pair) = term.pair(node) else {
                return Err(FitFailure::PodAffinityRulesNotMatch);
            };
            affinity_found &= self.affinity.get(&pair).is_some_and(|n| *n > 0);
        }
        if !affinity_found && !self.first_of_its_group {
            return Err(FitFailure::PodAffinityRulesNotMatch);
        }
        for term in own.map(|a| &a.required_anti_affinity[..]).unwrap_or_default() {
            if term.pair(node).is_some_and(|pair| self.anti_affinity.contains_key(&pair)) {
                return Err(FitFailure::PodAntiAffinityRulesNotMatch);
            }
        }
        if !self.existing_anti_affinity.is_empty()
            && node
                .labels
                .iter()
                .any(|(k, v)| self.existing_anti_affinity.contains_key(&(k.as_str(), v.as_str())))
        {
            return Err(FitFailure::ExistingPodsAntiAffinityRulesNotMatch);
        }
        Ok(())
    }
}

/// kube-scheduler's InterPodAffinity score of each of `candidates`, normalised to
/// 0..=[`MAX_NODE_SCORE`] over them: the pod's preferred terms count the pods they select
/// (anti-affinity negatively), and the placed pods' terms that select the pod count too (their
/// required affinity with weight 1), each in the topology domain of the node the selected or
/// selecting pod is on. `None` when there is nothing to score (no preferred terms, no placed
/// pod with affinity).
pub fn scores(
    pod: &PodInfo,
    candidates: &[&NodeInfo],
    nodes: &[NodeInfo],
    namespaces: &NamespaceLabels,
) -> Option<Vec<i64>> {
    let own = pod.pod_affinity.as_deref().filter(|a| a.has_preferred());
    let mut by_pair: HashMap<TopologyPair, i64> = HashMap::new();
    let mut any = own.is_some();
    let add = |by_pair: &mut HashMap<_, _>, term: &AffinityTerm, weight: i64, node| {
        if let Some(pair) = term.pair(node) {
            *by_pair.entry(pair).or_insert(0) += weight;
        }
    };
    for node in nodes.iter().filter(|n| !n.labels.is_empty()) {
        let existing: Box<dyn Iterator<Item = &PodInfo>> = match own {
            Some(_) => Box::new(node.pods()),
            None => Box::new(node.pods_with_affinity()),
        };
        for existing in existing {
            if let Some(own) = own {
                for term in &own.preferred_affinity {
                    if term.matches(existing, namespaces) {
                        add(&mut by_pair, term, term.weight, node);
                    }
                }
                for term in &own.preferred_anti_affinity {
                    if term.matches(existing, namespaces) {
                        add(&mut by_pair, term, -term.weight, node);
                    }
                }
            }
            let Some(theirs) = existing.pod_affinity.as_deref() else { continue };
            any = true;
            let weighted = theirs
                .required_affinity
                .iter()
                .map(|t| (t, HARD_POD_AFFINITY_WEIGHT))
                .chain(theirs.preferred_affinity.iter().map(|t| (t, t.weight)))
                .chain(theirs.preferred_anti_affinity.iter().map(|t| (t, -t.weight)));
            for (term, weight) in weighted {
                if term.matches(pod, namespaces) {
                    add(&mut by_pair, term, weight, node);
                }
            }
        }
    }
    if !any {
        return None;
    }
    let raw: Vec<i64> = candidates
        .iter()
        .map(|node| {
            node.labels.iter().filter_map(|(k, v)| by_pair.get(&(k.as_str(), v.as_str()))).sum()
        })
        .collect();
    let (min, max) =
        (raw.iter().copied().min().unwrap_or(0), raw.iter().copied().max().unwrap_or(0));
    Some(
        raw.iter()
            .map(|score| {
                if max > min {
                    (MAX_NODE_SCORE as f64 * (score - min) as f64 / (max - min) as f64) as i64
                } else {
                    0
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::node_info::tests::{node, pod};
    use serde_json::{json, Value};

    /// A pod of `namespace` with `labels` and `spec`.
    fn placed(uid: &str, namespace: &str, labels: Value, spec: Value) -> PodInfo {
        let mut p = pod(uid, spec);
        p.metadata.namespace = Some(namespace.to_string());
        p.metadata.labels = serde_json::from_value(labels).unwrap();
        PodInfo::new(&p)
    }

    fn nodes(labels: &[(&str, Value)]) -> Vec<NodeInfo> {
        labels.iter().map(|(name, l)| NodeInfo::new(&node(name, "4", "8Gi", l.clone()))).collect()
    }

    fn host(name: &str) -> (&str, Value) {
        (name, json!({"kubernetes.io/hostname": name}))
    }

    fn zoned(name: &'static str, zone: &str) -> (&'static str, Value) {
        (name, json!({"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}))
    }

    /// A spec with `kind` (`podAffinity` / `podAntiAffinity`) required terms.
    fn requiring(kind: &str, terms: Value) -> Value {
        json!({"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": terms}}})
    }

    fn term(labels: Value, key: &str) -> Value {
        json!({"labelSelector": {"matchLabels": labels}, "topologyKey": key})
    }

    fn checks(pod: &PodInfo, nodes: &[NodeInfo]) -> Vec<Result<(), FitFailure>> {
        let filter = AffinityFilter::new(pod, nodes, &NamespaceLabels::new()).expect("a filter");
        nodes.iter().map(|n| filter.check(n)).collect()
    }

    const HOSTNAME: &str = "kubernetes.io/hostname";
    const ZONE: &str = "topology.kubernetes.io/zone";

    #[test]
    fn required_anti_affinity_keeps_a_pod_off_the_domains_of_the_pods_it_selects() {
        let mut cluster = nodes(&[host("n0"), host("n1"), ("bare", json!({}))]);
        cluster[0].add_pod(placed("web-0", "default", json!({"app": "web"}), json!({})));
        // The same labels in another namespace are not selected.
        cluster[1].add_pod(placed("web-1", "other", json!({"app": "web"}), json!({})));
        let spec = requiring("podAntiAffinity", json!([term(json!({"app": "web"}), HOSTNAME)]));
        let p = placed("p", "default", json!({"app": "web"}), spec);
        assert_eq!(
            checks(&p, &cluster),
            // A node without the key is no domain of a selected pod.
            vec![Err(FitFailure::PodAntiAffinityRulesNotMatch), Ok(()), Ok(())]
        );
    }

    #[test]
    fn a_placed_pods_anti_affinity_keeps_the_pods_it_selects_out_of_its_domain() {
        let mut cluster = nodes(&[zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b")]);
        let spec = requiring("podAntiAffinity", json!([term(json!({"app": "db"}), ZONE)]));
        cluster[0].add_pod(placed("guard", "default", json!({"app": "guard"}), spec));
        let db = placed("db", "default", json!({"app": "db"}), json!({}));
        let existing = Err(FitFailure::ExistingPodsAntiAffinityRulesNotMatch);
        assert_eq!(checks(&db, &cluster), vec![existing.clone(), existing, Ok(())]);
        // A pod it does not select goes anywhere, and no filter is needed for it... unless a
        // placed pod has required anti-affinity: then every pod is checked.
        let web = placed("web", "default", json!({"app": "web"}), json!({}));
        assert_eq!(checks(&web, &cluster), vec![Ok(()), Ok(()), Ok(())]);
        let empty = nodes(&[zoned("a1", "a")]);
        assert!(AffinityFilter::new(&web, &empty, &NamespaceLabels::new()).is_none());
    }

    #[test]
    fn required_affinity_needs_a_selected_pod_in_the_domain_and_the_key_on_the_node() {
        let mut cluster =
            nodes(&[zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b"), host("nozone")]);
        cluster[0].add_pod(placed("cache", "default", json!({"app": "cache"}), json!({})));
        let spec = requiring("podAffinity", json!([term(json!({"app": "cache"}), ZONE)]));
        let p = placed("p", "default", json!({"app": "web"}), spec);
        let no = Err(FitFailure::PodAffinityRulesNotMatch);
        assert_eq!(checks(&p, &cluster), vec![Ok(()), Ok(()), no.clone(), no]);
    }

    #[test]
    fn the_first_pod_of_a_group_with_affinity_to_itself_goes_anywhere_with_the_key() {
        let cluster = nodes(&[zoned("a1", "a"), host("nozone")]);
        let spec = requiring("podAffinity", json!([term(json!({"app": "web"}), ZONE)]));
        let first = placed("p", "default", json!({"app": "web"}), spec.clone());
        let no = Err(FitFailure::PodAffinityRulesNotMatch);
        assert_eq!(checks(&first, &cluster), vec![Ok(()), no.clone()]);
        // A pod that does not match its own terms waits for one that does.
        let other = placed("q", "default", json!({"app": "api"}), spec);
        assert_eq!(checks(&other, &cluster), vec![no.clone(), no]);
    }

    #[test]
    fn terms_select_namespaces_by_list_and_by_selector() {
        let mut cluster = nodes(&[host("n0"), host("n1"), host("n2")]);
        cluster[0].add_pod(placed("a", "team-a", json!({"app": "db"}), json!({})));
        cluster[1].add_pod(placed("b", "team-b", json!({"app": "db"}), json!({})));
        cluster[2].add_pod(placed("c", "default", json!({"app": "db"}), json!({})));
        let namespaces: NamespaceLabels = [
            ("team-a".to_string(), [("team".to_string(), "yes".to_string())].into()),
            ("team-b".to_string(), BTreeMap::new()),
        ]
        .into();
        let anti = |extra: Value| {
            let mut t = term(json!({"app": "db"}), HOSTNAME);
            t.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            placed("p", "default", json!({}), requiring("podAntiAffinity", json!([t])))
        };
        let blocked = |p: &PodInfo| -> Vec<bool> {
            let filter = AffinityFilter::new(p, &cluster, &namespaces).unwrap();
            cluster.iter().map(|n| filter.check(n).is_err()).collect()
        };
        assert_eq!(blocked(&anti(json!({"namespaces": ["team-b"]}))), [false, true, false]);
        let by_label = json!({"namespaceSelector": {"matchLabels": {"team": "yes"}}});
        assert_eq!(blocked(&anti(by_label)), [true, false, false]);
        let every = json!({"namespaceSelector": {}, "namespaces": ["default"]});
        assert_eq!(blocked(&anti(every)), [true, true, true]);
    }

    #[test]
    fn match_label_keys_narrow_a_term_to_the_pods_own_values() {
        let mut cluster = nodes(&[host("n0"), host("n1")]);
        cluster[0].add_pod(placed("v1", "default", json!({"app": "web", "v": "1"}), json!({})));
        cluster[1].add_pod(placed("v2", "default", json!({"app": "web", "v": "2"}), json!({})));
        let mut t = term(json!({"app": "web"}), HOSTNAME);
        t["matchLabelKeys"] = json!(["v"]);
        let spec = requiring("podAntiAffinity", json!([t]));
        let p = placed("p", "default", json!({"app": "web", "v": "2"}), spec);
        let anti = Err(FitFailure::PodAntiAffinityRulesNotMatch);
        assert_eq!(checks(&p, &cluster), vec![Ok(()), anti]);
    }

    #[test]
    fn preferred_terms_on_both_sides_score_the_domains() {
        let mut cluster = nodes(&[zoned("a1", "a"), zoned("a2", "a"), zoned("b1", "b")]);
        cluster[0].add_pod(placed("cache", "default", json!({"app": "cache"}), json!({})));
        let refs: Vec<&NodeInfo> = cluster.iter().collect();
        let preferred = |kind: &str| {
            json!({"affinity": {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "podAffinityTerm": term(json!({"app": "cache"}), ZONE)}]}}})
        };
        let near = placed("p", "default", json!({}), preferred("podAffinity"));
        let no_terms = NamespaceLabels::new();
        assert_eq!(scores(&near, &refs, &cluster, &no_terms), Some(vec![100, 100, 0]));
        let far = placed("p", "default", json!({}), preferred("podAntiAffinity"));
        assert_eq!(scores(&far, &refs, &cluster, &no_terms), Some(vec![0, 0, 100]));
        // Nothing to score for a pod without terms while no placed pod has any...
        let plain = placed("q", "default", json!({"app": "web"}), json!({}));
        assert_eq!(scores(&plain, &refs, &cluster, &no_terms), None);
        // ...and a placed pod's required affinity to it draws it into its domain.
        let spec = requiring("podAffinity", json!([term(json!({"app": "web"}), ZONE)]));
        cluster[2].add_pod(placed("friend", "default", json!({}), spec));
        let refs: Vec<&NodeInfo> = cluster.iter().collect();
        assert_eq!(scores(&plain, &refs, &cluster, &no_terms), Some(vec![0, 0, 100]));
    }
}
