//! The node's admission of a pod bound to it, as the kubelet's predicate admit handler does it:
//! a pod that does not fit beside the pods the node already runs (bound by its creator, not by
//! the scheduler, or to a node that changed since) is rejected, with the reason and message of
//! the first check it fails, and never runs.

use crate::model::taints::TaintEffect;
use crate::scheduler::filters::{self, FitFailure};
use crate::scheduler::node_info::{NodeInfo, PodInfo};

/// Why the node refuses a pod: the pod's status `reason` and the message after "Pod was
/// rejected: " (also the `Warning` event's reason and message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reason: String,
    pub message: String,
}

/// Whether `pod` fits the node `info` describes, with the pods it runs and has not finished
/// (kept by the agent as pods come and go: a simulated node runs thousands), checked in the
/// kubelet's order: resources (room for a pod first, then cpu, memory and ephemeral storage),
/// the node selector and required node affinity, host ports, and the node's NoExecute taints
/// (NoSchedule ones are the scheduler's business).
pub fn admit(pod: &PodInfo, info: &NodeInfo) -> Result<(), Rejection> {
    if let Err(failures) = filters::resources_fit(pod, info) {
        let resource = match failures.first() {
            Some(FitFailure::Insufficient(resource)) => *resource,
            Some(FitFailure::InsufficientScalar(resource)) => resource.as_str(),
            _ => unreachable!("resources_fit fails with Insufficient only"),
        };
        let (req, used, alloc) = (&pod.requests, &info.requested, &info.allocatable);
        let (requested, used, capacity) = match resource {
            "pods" => (1, info.pod_count() as i64, alloc.pods),
            "cpu" => (req.milli_cpu, used.milli_cpu, alloc.milli_cpu),
            "memory" => (req.memory, used.memory, alloc.memory),
            "ephemeral-storage" => {
                (req.ephemeral_storage, used.ephemeral_storage, alloc.ephemeral_storage)
            }
            scalar => (
                pod.scalar_requests.get(scalar),
                info.requested_scalar.get(scalar),
                info.allocatable_scalar.get(scalar),
            ),
        };
        return Err(Rejection {
            reason: format!("OutOf{resource}"),
            message: format!(
                "Node didn't have enough resource: {resource}, requested: {requested}, \
                 used: {used}, capacity: {capacity}"
            ),
        });
    }
    let predicate = |name: &str, failure: FitFailure| Rejection {
        reason: name.to_string(),
        message: format!("Predicate {name} failed: {failure}"),
    };
    if let Err(failure) = filters::node_affinity(pod, info) {
        return Err(predicate("NodeAffinity", failure));
    }
    if let Err(failure) = filters::node_ports(pod, info) {
        return Err(predicate("NodePorts", failure));
    }
    if filters::untolerated_taint(pod, info, &[TaintEffect::NoExecute]).is_some() {
        return Err(Rejection {
            reason: "TaintToleration".into(),
            message: "Predicate TaintToleration failed: node(s) had taints that the pod didn't \
                      tolerate"
                .into(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{Node, Pod};
    use serde_json::json;

    use super::*;

    /// [`super::admit`] on `node` running `admitted`.
    fn admit<'a>(
        pod: &PodInfo,
        node: &Node,
        admitted: impl IntoIterator<Item = &'a PodInfo>,
    ) -> Result<(), Rejection> {
        let mut info = NodeInfo::new(node);
        admitted.into_iter().for_each(|other| info.add_pod(other.clone()));
        super::admit(pod, &info)
    }

    fn pod(name: &str, spec: serde_json::Value) -> PodInfo {
        let mut spec = spec;
        if spec.get("containers").is_none() {
            spec["containers"] = json!([{"name": "c"}]);
        }
        let pod: Pod = serde_json::from_value(json!({"metadata": {"name": name,
            "namespace": "default", "uid": name}, "spec": spec}))
        .unwrap();
        PodInfo::new(&pod)
    }

    fn node(extra: serde_json::Value) -> Node {
        let mut node = json!({"metadata": {"name": "n", "labels": {"disk": "hdd"}},
            "status": {"allocatable": {"cpu": "4", "memory": "1Gi", "pods": "3"},
                "conditions": [{"type": "Ready", "status": "True"}]}});
        if let Some(spec) = extra.get("spec") {
            node["spec"] = spec.clone();
        }
        serde_json::from_value(node).unwrap()
    }

    fn requesting(cpu: &str) -> serde_json::Value {
        json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]})
    }

    #[test]
    fn a_pod_is_refused_in_the_kubelet_s_words_for_the_first_check_it_fails() {
        let node = node(json!({}));
        let running = [pod("a", requesting("1")), pod("b", requesting("500m"))];
        assert_eq!(admit(&pod("fits", requesting("2")), &node, &running), Ok(()));
        assert_eq!(
            admit(&pod("big", requesting("10")), &node, &running),
            Err(Rejection {
                reason: "OutOfcpu".into(),
                message: "Node didn't have enough resource: cpu, requested: 10000, used: 1500, \
                          capacity: 4000"
                    .into()
            })
        );
        let dongles = json!({"containers": [{"name": "c",
            "resources": {"limits": {"example.com/dongle": "2"}}}]});
        assert_eq!(
            admit(&pod("dongles", dongles), &node, &running),
            Err(Rejection {
                reason: "OutOfexample.com/dongle".into(),
                message: "Node didn't have enough resource: example.com/dongle, requested: 2, \
                          used: 0, capacity: 0"
                    .into()
            })
        );
        // Room for a pod comes first.
        let full = ["a", "b", "c"].map(|n| pod(n, json!({})));
        let refused = admit(&pod("big", requesting("10")), &node, &full).unwrap_err();
        assert_eq!(refused.reason, "OutOfpods");
        assert_eq!(
            refused.message,
            "Node didn't have enough resource: pods, requested: 1, used: 3, capacity: 3"
        );
        let selective = pod("ssd", json!({"nodeSelector": {"disk": "ssd"}}));
        assert_eq!(
            admit(&selective, &node, &running).unwrap_err().message,
            "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
        );
        let port = |name: &str| {
            pod(
                name,
                json!({"containers": [{"name": "c", "ports": [{"containerPort": 80,
                "hostPort": 8080, "protocol": "TCP"}]}]}),
            )
        };
        let holder = [port("holder")];
        assert_eq!(admit(&port("second"), &node, &holder).unwrap_err().reason, "NodePorts");
    }

    #[test]
    fn only_untolerated_no_execute_taints_refuse_a_pod() {
        let tainted = |effect: &str| {
            node(json!({"spec": {"taints": [{"key": "k", "value": "v", "effect": effect}]}}))
        };
        let plain = pod("p", json!({}));
        assert_eq!(admit(&plain, &tainted("NoSchedule"), []), Ok(()));
        assert_eq!(
            admit(&plain, &tainted("NoExecute"), []),
            Err(Rejection {
                reason: "TaintToleration".into(),
                message: "Predicate TaintToleration failed: node(s) had taints that the pod \
                          didn't tolerate"
                    .into()
            })
        );
        let tolerant = pod("t", json!({"tolerations": [{"key": "k", "operator": "Exists"}]}));
        assert_eq!(admit(&tolerant, &tainted("NoExecute"), []), Ok(()));
    }
}
