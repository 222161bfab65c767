//! Preemption (kube-scheduler's DefaultPreemption): for a pod that fits no node, the pods of
//! lower priority whose removal lets it fit on one node, that node chosen as kube-scheduler
//! chooses it; or why preemption cannot help, in kube-scheduler's words.

use std::cmp::Ordering;
use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::filters::{self, FitFailure};
use super::node_info::{NodeInfo, PodInfo};
use crate::model::LabelSelector;

/// A node's status when removing pods cannot make the pod fit there.
const NOT_HELPFUL: &str = "Preemption is not helpful for scheduling";
/// A node's status when it has no pod of lower priority than the pod.
const NO_VICTIMS: &str = "No preemption victims found for incoming pod";

/// Where the pod is to go once `victims` are gone.
#[derive(Debug)]
pub struct Plan {
    /// The index of the node.
    pub node: usize,
    pub victims: Vec<PodInfo>,
    /// How many of the victims go against a PodDisruptionBudget.
    violations: usize,
}

/// A PodDisruptionBudget, as preemption weighs it: the pods it covers and how many more of
/// them may go (`status.disruptionsAllowed`), not counting those it has seen go.
#[derive(Debug, Clone)]
pub struct Budget {
    pub namespace: String,
    pub selector: LabelSelector,
    pub allowed: i64,
    /// `status.disruptedPods`: already counted.
    pub disrupted: Vec<String>,
}

/// Which of `pods` (most important first) would go against a budget if they all went, as
/// kube-scheduler counts it: each budget's allowance used up by the pods it covers, in order.
fn violating(pods: &[PodInfo], budgets: &[Budget]) -> Vec<bool> {
    let mut allowed: HashMap<usize, i64> = HashMap::new();
    pods.iter()
        .map(|pod| {
            let mut violates = false;
            for (i, budget) in budgets.iter().enumerate() {
                // A budget with an empty selector covers nothing here.
                if budget.namespace != pod.namespace
                    || budget.selector.is_empty()
                    || !budget.selector.matches_map(&pod.labels)
                    || budget.disrupted.contains(&pod.name)
                {
                    continue;
                }
                let left = allowed.entry(i).or_insert(budget.allowed);
                *left -= 1;
                violates |= *left < 0;
            }
            violates
        })
        .collect()
}

/// When a pod started, as kube-scheduler reads it: one not started yet counts as now, after
/// any that has.
fn started(pod: &PodInfo) -> DateTime<Utc> {
    pod.start_time.unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// kube-scheduler's order of importance: higher priority first, then the longer running (a
/// pod's name settles the rest, for a stable order).
fn more_important(a: &PodInfo, b: &PodInfo) -> Ordering {
    (b.priority.cmp(&a.priority))
        .then_with(|| started(a).cmp(&started(b)))
        .then_with(|| a.name.cmp(&b.name))
}

/// Whether a node's reason for refusing the pod may go with pods removed from it, as
/// kube-scheduler's filters tell (resources, host ports, anti-affinity, spread skew; not the
/// node's own taints, labels or state, nor a missing pod the pod's affinity needs).
fn resolvable(failure: &FitFailure) -> bool {
    matches!(
        failure,
        FitFailure::Insufficient(_)
            | FitFailure::InsufficientScalar(_)
            | FitFailure::HostPortConflict
            | FitFailure::PodAntiAffinityRulesNotMatch
            | FitFailure::ExistingPodsAntiAffinityRulesNotMatch
            | FitFailure::SpreadConstraintsNotMatch
            | FitFailure::ReadWriteOncePodConflict
    )
}

/// Why a pod preempts no one, in kube-scheduler's words.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The pod may not preempt (yet): "not eligible due to preemptionPolicy=Never.". A node
    /// it was nominated to stays its own.
    NotEligible(String),
    /// No node would do: "0/2 nodes are available: 2 Preemption is not helpful for
    /// scheduling.". A node it was nominated to is no longer held for it.
    NoCandidate(String),
}

impl Refusal {
    pub fn message(&self) -> &str {
        match self {
            Refusal::NotEligible(message) | Refusal::NoCandidate(message) => message,
        }
    }
}

/// `pod` may never preempt (its `preemptionPolicy` is `Never`).
fn policy_refusal(pod: &PodInfo) -> Option<Refusal> {
    let message = "not eligible due to preemptionPolicy=Never.";
    pod.preempt_never.then(|| Refusal::NotEligible(message.into()))
}

/// Why preemption cannot help a pod that none of `total_nodes` may take whatever pods they
/// run (kube-scheduler's PreFilter failures, such as a missing claim).
pub fn refusal_everywhere(pod: &PodInfo, total_nodes: usize) -> Refusal {
    policy_refusal(pod).unwrap_or_else(|| {
        let reasons = (0..total_nodes).map(|_| NOT_HELPFUL.to_string());
        Refusal::NoCandidate(filters::reasons_message(total_nodes, reasons))
    })
}

/// The fewest candidate nodes looked for before one is chosen, and the share of the nodes
/// (kube-scheduler's `minCandidateNodesAbsolute` and `minCandidateNodesPercentage`).
const MIN_CANDIDATES: usize = 100;
const CANDIDATES_PERCENT: usize = 10;

/// The preemption for `pod`, which fits none of `nodes` (`failures` holds each node's reasons,
/// by index, in the order to look at them); `nominated` is the node a preemption of its own
/// made room on; `fits` says whether the pod fits the node of an index, as given.
pub fn plan(
    pod: &PodInfo,
    nominated: Option<&str>,
    nodes: &[NodeInfo],
    failures: &[(usize, Vec<FitFailure>)],
    budgets: &[Budget],
    fits: impl Fn(usize, &NodeInfo) -> Result<(), Vec<FitFailure>>,
) -> Result<Plan, Refusal> {
    if let Some(refusal) = policy_refusal(pod) {
        return Err(refusal);
    }
    // A pod whose victims are still going waits for them rather than preempting again, unless
    // its node now refuses it for a reason no preemption can remove.
    let held = nominated.and_then(|name| {
        let i = nodes.iter().position(|n| n.name == name)?;
        let helpless = failures.iter().any(|(at, f)| *at == i && !f.iter().all(resolvable));
        (!helpless).then_some(&nodes[i])
    });
    if held.is_some_and(|node| node.pods().any(|p| p.preempted && p.priority < pod.priority)) {
        let message = "not eligible due to a terminating pod on the nominated node.";
        return Err(Refusal::NotEligible(message.into()));
    }
    let wanted = MIN_CANDIDATES.max(nodes.len() * CANDIDATES_PERCENT / 100);
    let mut reasons: Vec<String> = Vec::new();
    let mut candidates: Vec<Plan> = Vec::new();
    for (i, node_failures) in failures {
        if !node_failures.iter().all(resolvable) {
            reasons.push(NOT_HELPFUL.into());
            continue;
        }
        let node = &nodes[*i];
        let mut lower: Vec<PodInfo> =
            node.pods().filter(|p| p.priority < pod.priority).cloned().collect();
        if lower.is_empty() {
            reasons.push(NO_VICTIMS.into());
            continue;
        }
        let mut reduced = node.clone();
        for victim in &lower {
            reduced.remove_pod(&victim.uid);
        }
        if let Err(failures) = fits(*i, &reduced) {
            reasons.extend(failures.iter().map(ToString::to_string));
            continue;
        }
        // Given back their place while the pod still fits: those a budget protects first,
        // then the others, the most important first in each.
        lower.sort_by(more_important);
        let protected = violating(&lower, budgets);
        let mut in_turn: Vec<(PodInfo, bool)> = lower.into_iter().zip(protected).collect();
        // (A stable sort: each group keeps its order.)
        in_turn.sort_by_key(|(_, protected)| !protected);
        let mut victims = Vec::new();
        let mut violations = 0;
        for (candidate, protected) in in_turn {
            reduced.add_pod(candidate.clone());
            if fits(*i, &reduced).is_err() {
                reduced.remove_pod(&candidate.uid);
                violations += usize::from(protected);
                victims.push(candidate);
            }
        }
        if victims.is_empty() {
            // (It fits as things are: nothing to preempt for.)
            reasons.push(NO_VICTIMS.into());
            continue;
        }
        candidates.push(Plan { node: *i, victims, violations });
        if candidates.len() >= wanted {
            break;
        }
    }
    // As kube-scheduler picks: the fewest budgets broken, then the lowest highest victim
    // priority, then the lowest sum of priorities, then the fewest victims, then the latest
    // start among the victims of the highest priority; the first of equals.
    let key = |plan: &Plan| {
        let highest = plan.victims.iter().map(|v| v.priority).max().unwrap_or(i32::MIN);
        let sum: i64 = plan.victims.iter().map(|v| i64::from(v.priority) + (1 << 31)).sum();
        let earliest = (plan.victims.iter().filter(|v| v.priority == highest)).map(started).min();
        (plan.violations, highest, sum, plan.victims.len(), std::cmp::Reverse(earliest))
    };
    let best = candidates.into_iter().enumerate().min_by_key(|(order, plan)| (key(plan), *order));
    match best {
        Some((_, plan)) => Ok(plan),
        None => Err(Refusal::NoCandidate(filters::reasons_message(failures.len(), reasons))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::node_info::tests::{node, pod};
    use serde_json::json;

    fn info(name: &str, priority: i32, cpu: &str) -> PodInfo {
        PodInfo::new(&pod(
            name,
            json!({"priority": priority, "containers": [{"name": "c",
                "resources": {"requests": {"cpu": cpu}}}]}),
        ))
    }

    fn node_info(name: &str, cpu: &str) -> NodeInfo {
        NodeInfo::new(&node(name, cpu, "64Gi", json!({})))
    }

    fn plan_for(pod: &PodInfo, nodes: &[NodeInfo]) -> Result<Plan, String> {
        let failures: Vec<(usize, Vec<FitFailure>)> = (nodes.iter().enumerate())
            .filter_map(|(i, n)| Some((i, filters::filter(pod, n).err()?)))
            .collect();
        plan(pod, None, nodes, &failures, &[], |_, node| filters::filter(pod, node))
            .map_err(|refusal| refusal.message().to_string())
    }

    #[test]
    fn the_fewest_and_least_important_pods_make_room() {
        let mut a = node_info("a", "2");
        a.add_pod(info("a-low", 1, "1"));
        a.add_pod(info("a-mid", 5, "1"));
        let mut b = node_info("b", "2");
        b.add_pod(info("b-low", 1, "500m"));
        b.add_pod(info("b-lower", 0, "500m"));
        b.add_pod(info("b-high", 100, "1"));
        let nodes = [a, b];
        // On a, the pod of priority 1 must go (the one of 5 keeps its place); on b, both small
        // ones: the same highest victim priority, 1, but a's victims sum to less.
        let plan = plan_for(&info("new", 10, "1"), &nodes).unwrap();
        assert_eq!(plan.node, 0);
        let names: Vec<&str> = plan.victims.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["a-low"]);
        // Nothing of lower priority anywhere (equal is not lower): no victims.
        let why = plan_for(&info("low", 0, "1"), &nodes).unwrap_err();
        assert_eq!(why, "0/2 nodes are available: 2 No preemption victims found for incoming pod.");
        let mut never = info("never", 10, "1");
        never.preempt_never = true;
        assert_eq!(
            plan_for(&never, &nodes).unwrap_err(),
            "not eligible due to preemptionPolicy=Never."
        );
        // More than a whole node: removing every pod does not help.
        assert_eq!(
            plan_for(&info("huge", 1000, "3"), &nodes).unwrap_err(),
            "0/2 nodes are available: 2 Insufficient cpu."
        );
    }

    fn started_at(mut pod: PodInfo, time: &str) -> PodInfo {
        pod.start_time = Some(time.parse().unwrap());
        pod
    }

    #[test]
    fn the_youngest_of_equals_go_and_the_node_of_the_youngest_is_chosen() {
        // Of two pods of one priority, the one running longer keeps its place.
        let mut a = node_info("a", "2");
        a.add_pod(started_at(info("z-old", 1, "1"), "2026-01-01T10:00:00Z"));
        a.add_pod(started_at(info("a-young", 1, "1"), "2026-01-01T11:00:00Z"));
        let plan = plan_for(&info("new", 10, "1"), &[a]).unwrap();
        let names: Vec<&str> = plan.victims.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["a-young"]);
        // One victim of one priority on each node: the node whose victim started last; a pod
        // not started yet counts as started now.
        let one = |node: &str, start: Option<&str>| {
            let mut n = node_info(node, "1");
            let victim = info(&format!("{node}-low"), 1, "1");
            n.add_pod(match start {
                Some(time) => started_at(victim, time),
                None => victim,
            });
            n
        };
        let nodes = [
            one("a", Some("2026-01-01T10:00:00Z")),
            one("b", Some("2026-01-01T12:00:00Z")),
            one("c", Some("2026-01-01T11:00:00Z")),
        ];
        assert_eq!(plan_for(&info("new", 10, "1"), &nodes).unwrap().node, 1);
        let nodes = [one("a", Some("2026-01-01T10:00:00Z")), one("b", None)];
        assert_eq!(plan_for(&info("new", 10, "1"), &nodes).unwrap().node, 1);
    }

    #[test]
    fn a_node_where_no_budget_is_broken_is_preferred() {
        let guarded = |name: &str| {
            let mut p = info(name, 1, "1");
            p.labels.insert("app".into(), "db".into());
            p
        };
        let mut a = node_info("a", "1");
        a.add_pod(guarded("db-0"));
        let mut b = node_info("b", "1");
        b.add_pod(info("b-low", 5, "1"));
        let nodes = [a, b];
        let pod = info("new", 10, "1");
        let failures: Vec<(usize, Vec<FitFailure>)> =
            (0..2).map(|i| (i, filters::filter(&pod, &nodes[i]).unwrap_err())).collect();
        let budget = |allowed| Budget {
            namespace: "default".into(),
            selector: LabelSelector::parse("app=db").unwrap(),
            allowed,
            disrupted: Vec::new(),
        };
        let fits = |_: usize, node: &NodeInfo| filters::filter(&pod, node);
        // Without a budget, the victim of lowest priority (on a); with one that allows no
        // disruption, the other node's, of higher priority.
        assert_eq!(plan(&pod, None, &nodes, &failures, &[], fits).unwrap().node, 0);
        assert_eq!(plan(&pod, None, &nodes, &failures, &[budget(1)], fits).unwrap().node, 0);
        let chosen = plan(&pod, None, &nodes, &failures, &[budget(0)], fits).unwrap();
        assert_eq!((chosen.node, chosen.violations), (1, 0));
    }

    #[test]
    fn a_pod_waits_for_its_victims_unless_its_node_no_longer_helps() {
        let mut a = node_info("a", "1");
        let mut going = info("going", 0, "1");
        going.terminating = true;
        going.preempted = true;
        a.add_pod(going);
        let nodes = [a];
        let pod = info("new", 10, "1");
        let failures = vec![(0, filters::filter(&pod, &nodes[0]).unwrap_err())];
        let fits = |_: usize, node: &NodeInfo| filters::filter(&pod, node);
        let waiting = plan(&pod, Some("a"), &nodes, &failures, &[], fits).unwrap_err();
        assert_eq!(
            waiting,
            Refusal::NotEligible(
                "not eligible due to a terminating pod on the nominated node.".into()
            )
        );
        // Cordoned meanwhile: no preemption can help there, so it may look elsewhere.
        let cordoned = vec![(0, vec![FitFailure::Unschedulable])];
        let elsewhere = plan(&pod, Some("a"), &nodes, &cordoned, &[], fits).unwrap_err();
        assert_eq!(
            elsewhere,
            Refusal::NoCandidate(
                "0/1 nodes are available: 1 Preemption is not helpful for scheduling.".into()
            )
        );
    }

    #[test]
    fn a_node_the_pod_may_not_use_is_not_helped_by_preemption() {
        let mut tainted = node_info("t", "1");
        tainted.add_pod(info("t-low", 0, "1"));
        tainted.unschedulable = true;
        let nodes = [tainted];
        assert_eq!(
            plan_for(&info("new", 10, "1"), &nodes).unwrap_err(),
            "0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        );
    }
}
