//! The agent against a real in-process API core: registration, pods run through both runtimes,
//! restarts with back-off, graceful deletion.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use actix::Actor;
use serde_json::{json, Value};

use super::node_agent::StopAgent;
use super::runtime::{ProcessRuntime, Runtime, SimulatedRuntime};
use super::{AgentConfig, NodeAgent};
use crate::client::ApiClient;
use crate::core::{ApiCore, DeleteOptions, ListOptions, PatchType};
use crate::model::resources::find;
use crate::testing::{core_with_node_controllers as core, eventually};

fn config(name: &str, dir: &std::path::Path) -> AgentConfig {
    let mut config = AgentConfig::new(name, dir.to_path_buf());
    config.sync_period = Duration::from_millis(100);
    config.restart_backoff = Duration::from_millis(200);
    config.node_status_update_period = Duration::from_millis(500);
    config
}

async fn get(core: &ApiCore, plural: &str, ns: &str, name: &str) -> Option<Value> {
    let resource = find(if plural == "leases" { "coordination.k8s.io" } else { "" }, "v1", plural)?;
    ApiClient::get(core, resource, ns, name).await.ok()
}

/// Waits until the agent has recorded an event with `reason` about the pod `name`.
async fn event_about(core: &ApiCore, name: &str, reason: &str) -> Value {
    let events = find("", "v1", "events").unwrap();
    let options = ListOptions {
        field_selector: Some(format!("involvedObject.name={name},reason={reason}")),
        ..ListOptions::default()
    };
    eventually(&format!("a {reason} event about {name}"), || async {
        let list = ApiClient::list(core, events, Some("default"), &options).await.ok()?;
        list.items.into_iter().next()
    })
    .await
}

fn pod(name: &str, node: &str, container: Value) -> Value {
    json!({"metadata": {"name": name}, "spec": {"nodeName": node, "containers": [container],
        "terminationGracePeriodSeconds": 5}})
}

fn start_agent(
    core: &ApiCore,
    config: AgentConfig,
    runtime: Arc<dyn Runtime>,
) -> actix::Addr<NodeAgent> {
    NodeAgent::new(config, Arc::new(core.clone()), runtime).start()
}

/// A lease is made only owned by its node: none while the node is not there (deleted), which
/// would outlive it for good; one once it is.
#[actix::test]
async fn a_lease_is_made_only_for_a_node_that_is_there() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let config = config("gone", dir.path());
    super::node_lease::renew_lease(&config, &core, None).await.unwrap();
    assert!(get(&core, "leases", "kube-node-lease", "gone").await.is_none());
    let nodes = find("", "v1", "nodes").unwrap();
    let node = ApiClient::create(&core, nodes, "", json!({"metadata": {"name": "gone"}})).await;
    let uid = node.unwrap()["metadata"]["uid"].clone();
    super::node_lease::renew_lease(&config, &core, None).await.unwrap();
    let lease = get(&core, "leases", "kube-node-lease", "gone").await.expect("the lease");
    assert_eq!(lease["metadata"]["ownerReferences"][0]["uid"], uid);
}

/// The agent a lease names holds its node while the lease lasts: another agent does not
/// register the node meanwhile; the holder's restart (the same name) does; a holder that lets
/// go, or whose lease has expired, holds it no more.
#[actix::test]
async fn a_node_is_held_by_the_agent_whose_lease_lasts() {
    use super::node_agent::{register, RegisterError};
    use super::node_lease::{held_by_another, let_go, renew_lease, HOLDER_ANNOTATION};
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let named = |identity: &str| {
        let mut config = config("twin", dir.path());
        config.identity = Some(identity.to_string());
        config
    };
    let (first, second) = (named("first"), named("second"));
    let machine = super::node_status::Machine::simulated();
    register(&first, &core, &machine, "simulated").await.unwrap();
    renew_lease(&first, &core, None).await.unwrap();
    let holder = |lease: &Value| lease["metadata"]["annotations"][HOLDER_ANNOTATION].clone();
    let lease = get(&core, "leases", "kube-node-lease", "twin").await.unwrap();
    assert_eq!(holder(&lease), "first");

    let held = held_by_another(&second, &core).await.unwrap().expect("held by the first");
    assert!(held.to_string().starts_with("node twin is held by another agent"), "{held}");
    let refused = register(&second, &core, &machine, "simulated").await;
    assert!(matches!(refused, Err(RegisterError::Held(_))), "{refused:?}");
    assert!(held_by_another(&first, &core).await.unwrap().is_none(), "its own");
    register(&first, &core, &machine, "simulated").await.expect("the holder, restarted");
    let mut unnamed = named("");
    unnamed.identity = None;
    assert!(held_by_another(&unnamed, &core).await.unwrap().is_none());

    // Letting go is the holder's alone; then the node is free.
    let_go(&second, &core).await.unwrap();
    let lease = get(&core, "leases", "kube-node-lease", "twin").await.unwrap();
    assert_eq!(holder(&lease), "first");
    let_go(&first, &core).await.unwrap();
    let lease = get(&core, "leases", "kube-node-lease", "twin").await.unwrap();
    assert_eq!(holder(&lease), Value::Null, "{lease}");
    register(&second, &core, &machine, "simulated").await.expect("the node is free");
    renew_lease(&second, &core, None).await.unwrap();

    // An expired lease holds nothing.
    let leases = find("coordination.k8s.io", "v1", "leases").unwrap();
    let old = json!({"spec": {"renewTime": "2020-01-01T00:00:00.000000Z"}});
    ApiClient::patch(&core, leases, "kube-node-lease", "twin", PatchType::Merge, &old, false)
        .await
        .unwrap();
    assert!(held_by_another(&first, &core).await.unwrap().is_none(), "expired");
}

/// An agent that stops cleanly lets go of its node (its containers stopped), so that another
/// may take it at once.
#[actix::test]
async fn a_stopped_agent_lets_go_of_its_node() {
    use super::node_lease::HOLDER_ANNOTATION;
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let mut named = config("leaving", dir.path());
    named.identity = Some("leaving-agent".into());
    let agent = start_agent(&core, named, Arc::new(SimulatedRuntime::default()));
    let holder = |lease: &Value| lease["metadata"]["annotations"][HOLDER_ANNOTATION].clone();
    eventually("the lease names the agent", || async {
        get(&core, "leases", "kube-node-lease", "leaving")
            .await
            .filter(|lease| holder(lease) == "leaving-agent")
    })
    .await;
    agent.send(StopAgent).await.unwrap();
    let lease = get(&core, "leases", "kube-node-lease", "leaving").await.unwrap();
    assert_eq!(holder(&lease), Value::Null, "{lease}");
}

/// An agent named "first" (its lease renewed every 250 ms) of node `node`, running a pod
/// with one sleeping container, whose pid is returned with the agent.
async fn agent_running_a_sleeper(
    core: &ApiCore,
    node: &str,
    dir: &std::path::Path,
) -> (actix::Addr<NodeAgent>, u32) {
    let mut first = config(node, dir);
    first.identity = Some("first".into());
    first.lease_duration = Duration::from_secs(1);
    let agent = start_agent(core, first, Arc::new(ProcessRuntime::default()));
    let sleeper = pod(
        "sleeper",
        node,
        json!({"name": "c", "image": "i",
        "command": ["sleep", "1000"]}),
    );
    ApiClient::create(core, find("", "v1", "pods").unwrap(), "default", sleeper).await.unwrap();
    let running = eventually("the container runs", || async {
        let pod = get(core, "pods", "default", "sleeper").await?;
        let id = pod["status"]["containerStatuses"][0]["containerID"].as_str()?.to_string();
        id.rsplit('/').next()?.parse::<u32>().ok()
    })
    .await;
    (agent, running)
}

/// Waits until `agent` has given its node up, and checks that it runs no pod and that the
/// process `pid` has ended.
async fn given_up(agent: &actix::Addr<NodeAgent>, pid: u32) {
    let waited = Duration::from_secs(30);
    let given_up = tokio::time::timeout(waited, agent.send(super::node_agent::NodeGivenUp)).await;
    assert!(matches!(given_up, Ok(Ok(true))), "the agent did not give its node up");
    assert!(agent.send(super::node_agent::AgentPods).await.unwrap().is_empty());
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
    let alive = stat.is_ok_and(|stat| {
        stat.rsplit(')').next().is_some_and(|s| !s.trim_start().starts_with('Z'))
    });
    assert!(!alive, "the container {pid} still runs");
}

/// An agent whose node another agent registered anew (the node deleted under it, its lease
/// with it) gives the node up at its next renewal: it stops the node's containers and leaves
/// the other's lease alone, instead of the two running the same pods.
#[actix::test]
async fn an_agent_gives_up_its_node_to_one_that_registered_it_anew() {
    use super::node_lease::HOLDER_ANNOTATION;
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let (agent, running) = agent_running_a_sleeper(&core, "taken", dir.path()).await;
    let leases = find("coordination.k8s.io", "v1", "leases").unwrap();
    let renewed = json!({"metadata": {"annotations": {HOLDER_ANNOTATION: "second"}},
        "spec": {"renewTime": crate::model::now_micro(), "leaseDurationSeconds": 40}});
    ApiClient::patch(&core, leases, "kube-node-lease", "taken", PatchType::Merge, &renewed, false)
        .await
        .unwrap();
    given_up(&agent, running).await;
    let lease = get(&core, "leases", "kube-node-lease", "taken").await.unwrap();
    assert_eq!(lease["metadata"]["annotations"][HOLDER_ANNOTATION], "second");
}

/// An agent whose node was deleted and made again under its name (a new uid) gives it up at
/// its next renewal, quietly: it stops its containers and writes nothing more about their
/// pods (their status stays as it was), nor makes a lease for the other node.
#[actix::test]
async fn an_agent_gives_up_its_node_once_it_is_made_again() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let (agent, running) = agent_running_a_sleeper(&core, "remade", dir.path()).await;
    // The node deleted, its lease with it (the garbage collector's part), and made again.
    let (nodes, leases) =
        (find("", "v1", "nodes").unwrap(), find("coordination.k8s.io", "v1", "leases").unwrap());
    ApiClient::delete(&core, nodes, "", "remade", &DeleteOptions::default()).await.unwrap();
    let lease = ("kube-node-lease", "remade");
    let _ = ApiClient::delete(&core, leases, lease.0, lease.1, &DeleteOptions::default()).await;
    ApiClient::create(&core, nodes, "", json!({"metadata": {"name": "remade"}})).await.unwrap();
    given_up(&agent, running).await;
    // Not marked stopped, as a clean stop marks its containers.
    let after = get(&core, "pods", "default", "sleeper").await.unwrap();
    let state = &after["status"]["containerStatuses"][0]["state"];
    assert!(state["running"].is_object(), "{state}");
    assert!(get(&core, "leases", "kube-node-lease", "remade").await.is_none());
}

#[actix::test]
async fn a_simulated_node_registers_and_runs_pods_at_once() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let _agent =
        start_agent(&core, config("sim-0", dir.path()), Arc::new(SimulatedRuntime::default()));
    let node = eventually("the node", || async {
        get(&core, "nodes", "", "sim-0").await.filter(|n| n["status"]["conditions"].is_array())
    })
    .await;
    assert_eq!(node["metadata"]["labels"]["kubernetes.io/hostname"], "sim-0");
    assert!(node["spec"]["podCIDR"].as_str().unwrap().starts_with("127."));
    let ready = node["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["type"] == "Ready" && c["status"] == "True");
    assert!(ready, "{node}");
    // The lease is the node's, as the kubelet's: the garbage collector removes it with it.
    let lease = eventually("the lease, owned by the node", || async {
        get(&core, "leases", "kube-node-lease", "sim-0")
            .await
            .filter(|l| l["metadata"]["ownerReferences"].is_array())
    })
    .await;
    let owner = json!([{"apiVersion": "v1", "kind": "Node", "name": "sim-0",
        "uid": node["metadata"]["uid"]}]);
    assert_eq!(lease["metadata"]["ownerReferences"], owner);
    let pods = find("", "v1", "pods").unwrap();
    ApiClient::create(
        &core,
        pods,
        "default",
        pod("p", "sim-0", json!({"name": "c", "image": "anything"})),
    )
    .await
    .unwrap();
    let running = eventually("the pod running", || async {
        get(&core, "pods", "default", "p").await.filter(|p| p["status"]["phase"] == "Running")
    })
    .await;
    assert!(running["status"]["podIP"].as_str().unwrap().starts_with("127."));
    assert_eq!(running["status"]["containerStatuses"][0]["ready"], true);
    // Someone else's word on the status (the node controller's, while the node was out of
    // touch): the agent writes its own again, as the kubelet does.
    let not_ready = json!({"status": {"conditions": [{"type": "Ready", "status": "False",
        "reason": "NodeNotReady"}]}});
    let patched = ApiClient::patch(&core, pods, "default", "p", PatchType::Merge, &not_ready, true)
        .await
        .unwrap();
    assert_eq!(patched["status"]["conditions"].as_array().unwrap().len(), 1);
    eventually("the agent's status back", || async {
        let pod = get(&core, "pods", "default", "p").await?;
        let conditions = pod["status"]["conditions"].as_array()?.clone();
        // (Its own word whole: the reason the other writer gave is gone too.)
        let ready = conditions
            .iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True" && c.get("reason").is_none());
        (ready && conditions.len() == 5).then_some(())
    })
    .await;
    ApiClient::delete(&core, pods, "default", "p", &DeleteOptions::default()).await.unwrap();
    eventually("the pod gone", || async {
        get(&core, "pods", "default", "p").await.is_none().then_some(())
    })
    .await;
    // The node controller's word while the node was out of touch: the agent's next status
    // post says Ready again (at its next period, not its next periodic report minutes later).
    let nodes = find("", "v1", "nodes").unwrap();
    let unknown = json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown",
        "reason": "NodeStatusUnknown"}]}});
    let patch = PatchType::StrategicMerge;
    ApiClient::patch(&core, nodes, "", "sim-0", patch, &unknown, true).await.unwrap();
    eventually("the node Ready again", || async {
        let node = get(&core, "nodes", "", "sim-0").await?;
        let conditions = node["status"]["conditions"].as_array()?.clone();
        conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == "True").then_some(())
    })
    .await;
    // A deleted Node stays deleted while its agent runs, as the kubelet registers only when it
    // starts: four status periods go by without it.
    ApiClient::delete(&core, nodes, "", "sim-0", &DeleteOptions::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(get(&core, "nodes", "", "sim-0").await.is_none());
}

/// The condition of type `kind` of the pod `name`, once it has one.
async fn condition_of(core: &ApiCore, name: &str, kind: &str) -> Value {
    let pod = get(core, "pods", "default", name).await.unwrap_or_default();
    let conditions = pod["status"]["conditions"].as_array().cloned().unwrap_or_default();
    conditions.into_iter().find(|c| c["type"] == kind).unwrap_or_default()
}

#[actix::test]
async fn a_pod_is_ready_once_its_readiness_gates_hold() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let _agent =
        start_agent(&core, config("sim-0", dir.path()), Arc::new(SimulatedRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    let mut gated = pod("g", "sim-0", json!({"name": "c", "image": "anything"}));
    gated["spec"]["readinessGates"] = json!([{"conditionType": "a.io/x"}]);
    ApiClient::create(&core, pods, "default", gated).await.unwrap();
    let ready = eventually("g not ready for its gate", || async {
        let ready = condition_of(&core, "g", "Ready").await;
        (ready["reason"] == "ReadinessGatesNotReady").then_some(ready)
    })
    .await;
    assert_eq!(
        ready["message"],
        "corresponding condition of pod readiness gate \"a.io/x\" does not exist."
    );
    assert_eq!(condition_of(&core, "g", "ContainersReady").await["status"], "True");
    let gate =
        |status: &str| json!({"status": {"conditions": [{"type": "a.io/x", "status": status}]}});
    let patch = PatchType::StrategicMerge;
    ApiClient::patch(&core, pods, "default", "g", patch, &gate("False"), true).await.unwrap();
    eventually("the gate's status in the message", || async {
        let message = condition_of(&core, "g", "Ready").await["message"].clone();
        (message == "the status of pod readiness gate \"a.io/x\" is not \"True\", but False")
            .then_some(())
    })
    .await;
    ApiClient::patch(&core, pods, "default", "g", patch, &gate("True"), true).await.unwrap();
    eventually("g ready, its gate's condition kept", || async {
        let ready = condition_of(&core, "g", "Ready").await;
        let kept = condition_of(&core, "g", "a.io/x").await["status"] == "True";
        (ready["status"] == "True" && kept).then_some(())
    })
    .await;
    let ready = condition_of(&core, "g", "Ready").await;
    assert!(ready.get("reason").is_none() && ready.get("message").is_none(), "{ready}");
}

#[actix::test]
async fn the_node_s_events_are_the_kubelet_s() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let _agent =
        start_agent(&core, config("n-ev", dir.path()), Arc::new(ProcessRuntime::default()));
    let starting = event_about(&core, "n-ev", "Starting").await;
    assert_eq!(starting["message"], "Starting kubelet.");
    // About the node by name, its uid included and no apiVersion, as the kubelet's.
    assert_eq!(starting["involvedObject"]["uid"], "n-ev");
    assert!(starting["involvedObject"].get("apiVersion").is_none(), "{starting}");
    assert_eq!(starting["source"], json!({"component": "kubelet", "host": "n-ev"}));
    let ready = event_about(&core, "n-ev", "NodeReady").await;
    assert_eq!(ready["message"], "Node n-ev status is now: NodeReady");
    event_about(&core, "n-ev", "NodeHasSufficientMemory").await;
    let nodes = find("", "v1", "nodes").unwrap();
    let cordon = json!({"spec": {"unschedulable": true}});
    ApiClient::patch(&core, nodes, "", "n-ev", PatchType::Merge, &cordon, false).await.unwrap();
    let cordoned = event_about(&core, "n-ev", "NodeNotSchedulable").await;
    assert_eq!(cordoned["message"], "Node n-ev status is now: NodeNotSchedulable");
    // Set Unknown by the node controller while out of touch: Ready again from the server's
    // copy, a new transition and its event again (counted into the first).
    let unknown = json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    let patch = PatchType::StrategicMerge;
    ApiClient::patch(&core, nodes, "", "n-ev", patch, &unknown, true).await.unwrap();
    eventually("NodeReady again", || async {
        let ready = event_about(&core, "n-ev", "NodeReady").await;
        (ready["count"] == 2).then_some(())
    })
    .await;
    let node = get(&core, "nodes", "", "n-ev").await.unwrap();
    let conditions = node["status"]["conditions"].as_array().unwrap();
    let ready = conditions.iter().find(|c| c["type"] == "Ready").unwrap();
    assert_eq!(ready["status"], "True");
    assert_ne!(ready["lastTransitionTime"], "2026-01-01T00:00:00Z");
}

#[actix::test]
async fn a_node_that_was_there_gets_the_kubelet_s_labels_and_a_reboot_is_told() {
    let core = core().await;
    let nodes = find("", "v1", "nodes").unwrap();
    let there = json!({"metadata": {"name": "n-re", "labels": {"kubernetes.io/hostname": "wrong",
            "team": "a"}},
        "status": {"nodeInfo": {"bootID": "an-earlier-boot"}}});
    ApiClient::create(&core, nodes, "", there).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let _agent =
        start_agent(&core, config("n-re", dir.path()), Arc::new(ProcessRuntime::default()));
    let labelled = eventually("the default labels", || async {
        get(&core, "nodes", "", "n-re").await.filter(|n| {
            n["metadata"]["labels"]["kubernetes.io/hostname"] == "n-re"
                && n["metadata"]["labels"]["kubernetes.io/os"] == "linux"
        })
    })
    .await;
    assert_eq!(labelled["metadata"]["labels"]["team"], "a", "others' labels stay");
    let annotations = &labelled["metadata"]["annotations"];
    assert_eq!(annotations["volumes.kubernetes.io/controller-managed-attach-detach"], "true");
    let rebooted = event_about(&core, "n-re", "NodeRebooted").await;
    assert_eq!(rebooted["type"], "Warning");
    let message = rebooted["message"].as_str().unwrap();
    assert!(message.starts_with("Node n-re has been rebooted, boot id: "), "{message}");
    // Its operating system label, taken off, is put back with its status.
    let unlabel = json!({"metadata": {"labels": {"kubernetes.io/os": null}}});
    ApiClient::patch(&core, nodes, "", "n-re", PatchType::Merge, &unlabel, false).await.unwrap();
    eventually("the os label back", || async {
        let node = get(&core, "nodes", "", "n-re").await?;
        (node["metadata"]["labels"]["kubernetes.io/os"] == "linux").then_some(())
    })
    .await;
}

#[actix::test]
async fn a_pod_past_its_deadline_is_failed_only_once_its_containers_have_stopped() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let _agent =
        start_agent(&core, config("n-dl", dir.path()), Arc::new(ProcessRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    // It outlives SIGTERM: it stops at the grace period's SIGKILL, 5 s on.
    let stubborn = json!({"name": "c", "image": "none",
        "command": ["sh", "-c", "trap '' TERM; while true; do sleep 0.1; done"]});
    let mut bounded = pod("bounded", "n-dl", stubborn);
    bounded["spec"]["activeDeadlineSeconds"] = json!(1);
    ApiClient::create(&core, pods, "default", bounded).await.unwrap();
    // One that completes within its deadline stays Succeeded past it.
    let mut quick =
        pod("quick", "n-dl", json!({"name": "c", "image": "none", "command": ["true"]}));
    quick["spec"]["activeDeadlineSeconds"] = json!(1);
    quick["spec"]["restartPolicy"] = json!("Never");
    ApiClient::create(&core, pods, "default", quick).await.unwrap();
    let event = event_about(&core, "bounded", "DeadlineExceeded").await;
    assert_eq!(event["type"], "Normal");
    let seen_running = std::cell::Cell::new(false);
    eventually("bounded Failed", || async {
        let pod = get(&core, "pods", "default", "bounded").await?;
        let running = pod["status"]["containerStatuses"][0]["state"]["running"].is_object();
        let phase = pod["status"]["phase"].clone();
        assert!(!(running && phase == "Failed"), "Failed while running: {}", pod["status"]);
        seen_running.set(seen_running.get() || running);
        (phase == "Failed").then_some(())
    })
    .await;
    assert!(seen_running.get(), "the container ran on past the deadline");
    let failed = get(&core, "pods", "default", "bounded").await.unwrap();
    assert_eq!(failed["status"]["reason"], "DeadlineExceeded");
    // Its run's end is its end (SIGKILL's 137), not one the kubelet cannot account for, and
    // no restart is waited for.
    let status = &failed["status"]["containerStatuses"][0];
    assert_eq!(status["state"]["terminated"]["reason"], "Error", "{status}");
    assert_eq!(status["state"]["terminated"]["exitCode"], 137, "{status}");
    assert_eq!(status["lastState"], json!({}), "{status}");
    // (`bounded` took its grace period's 5 s to stop: `quick`'s deadline is long past.)
    let quick = get(&core, "pods", "default", "quick").await.unwrap();
    assert_eq!(quick["status"]["phase"], "Succeeded", "{}", quick["status"]);

    // A container that never ran is terminated too, as the kubelet reports one it cannot
    // account for (not left waiting in `ContainerCreating`).
    let mut unpulled =
        pod("unpulled", "n-dl", json!({"name": "c", "image": "kplane/no-such-image"}));
    unpulled["spec"]["activeDeadlineSeconds"] = json!(1);
    ApiClient::create(&core, pods, "default", unpulled).await.unwrap();
    let failed = eventually("unpulled Failed", || async {
        get(&core, "pods", "default", "unpulled").await.filter(|p| p["status"]["phase"] == "Failed")
    })
    .await;
    let state = &failed["status"]["containerStatuses"][0]["state"];
    assert_eq!(
        state,
        &json!({"terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown",
            "message": "The container could not be located when the pod was terminated"}})
    );

    // While it initializes: the init container that ran ended by the deadline; the next one
    // and the app container, which never started, still wait.
    let mut initializing =
        pod("initializing", "n-dl", json!({"name": "c", "image": "none", "command": ["true"]}));
    initializing["spec"]["initContainers"] = json!([
        {"name": "i1", "image": "none", "command": ["sleep", "1000"]},
        {"name": "i2", "image": "none", "command": ["true"]}]);
    initializing["spec"]["activeDeadlineSeconds"] = json!(1);
    initializing["spec"]["restartPolicy"] = json!("Never");
    initializing["spec"]["terminationGracePeriodSeconds"] = json!(1);
    ApiClient::create(&core, pods, "default", initializing).await.unwrap();
    let failed = eventually("initializing Failed", || async {
        let pod = get(&core, "pods", "default", "initializing").await?;
        (pod["status"]["phase"] == "Failed").then_some(pod)
    })
    .await;
    let inits = &failed["status"]["initContainerStatuses"];
    assert_eq!(inits[0]["state"]["terminated"]["exitCode"], 143, "{inits}");
    assert_eq!(inits[1]["state"]["waiting"]["reason"], "PodInitializing", "{inits}");
    let app = &failed["status"]["containerStatuses"][0];
    assert_eq!(app["state"]["waiting"]["reason"], "PodInitializing", "{app}");
}

/// A volume that can no longer be brought up to date (its ConfigMap lost the key it names)
/// keeps its files, and says why in a `FailedMount` event, as the kubelet's remount does.
#[actix::test]
async fn a_volume_that_cannot_be_brought_up_to_date_says_why() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let agent =
        start_agent(&core, config("n-vol", dir.path()), Arc::new(ProcessRuntime::default()));
    let (pods, maps) = (find("", "v1", "pods").unwrap(), find("", "v1", "configmaps").unwrap());
    let map = json!({"metadata": {"name": "cm"}, "data": {"k1": "one", "k2": "two"}});
    ApiClient::create(&core, maps, "default", map).await.unwrap();
    let mut reader =
        pod("reader", "n-vol", json!({"name": "c", "image": "none", "command": ["sleep", "1000"]}));
    reader["spec"]["volumes"] = json!([{"name": "cmi",
        "configMap": {"name": "cm", "items": [{"key": "k2", "path": "two"}]}}]);
    ApiClient::create(&core, pods, "default", reader).await.unwrap();
    eventually("reader runs", || async {
        let pod = get(&core, "pods", "default", "reader").await?;
        (pod["status"]["phase"] == "Running").then_some(())
    })
    .await;
    let removed = json!([{"op": "remove", "path": "/data/k2"}]);
    ApiClient::patch(&core, maps, "default", "cm", PatchType::Json, &removed, false).await.unwrap();
    // New labels bring the volumes up to date at once (the downward API's files).
    let labelled = json!({"metadata": {"labels": {"now": "yes"}}});
    ApiClient::patch(&core, pods, "default", "reader", PatchType::Merge, &labelled, false)
        .await
        .unwrap();
    let event = event_about(&core, "reader", "FailedMount").await;
    let message = event["message"].as_str().unwrap();
    assert!(message.contains("cmi") && message.contains("k2"), "{message}");
    agent.send(StopAgent).await.unwrap();
}

/// An init container that cannot start fails its pod under `Never` (runc's exit 128, as the
/// kubelet takes it), and is started again under `OnFailure`.
#[actix::test]
async fn an_init_container_that_cannot_start_is_a_failed_one() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&core, config("n-se", dir.path()), Arc::new(ProcessRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    for policy in ["Never", "OnFailure"] {
        let name = format!("unstartable-{}", policy.to_lowercase());
        let mut unstartable =
            pod(&name, "n-se", json!({"name": "c", "image": "none", "command": ["true"]}));
        unstartable["spec"]["initContainers"] =
            json!([{"name": "i", "image": "none", "command": ["/nonexistent/x"]}]);
        unstartable["spec"]["restartPolicy"] = json!(policy);
        ApiClient::create(&core, pods, "default", unstartable).await.unwrap();
    }
    let failed = eventually("the Never pod Failed", || async {
        let pod = get(&core, "pods", "default", "unstartable-never").await?;
        (pod["status"]["phase"] == "Failed").then_some(pod)
    })
    .await;
    let init = &failed["status"]["initContainerStatuses"][0];
    assert_eq!(init["state"]["terminated"]["reason"], "StartError", "{init}");
    assert_eq!(init["state"]["terminated"]["exitCode"], 128, "{init}");
    assert_eq!(init["restartCount"], 0, "{init}");
    eventually("the OnFailure pod's init container started again", || async {
        let pod = get(&core, "pods", "default", "unstartable-onfailure").await?;
        let init = &pod["status"]["initContainerStatuses"][0];
        (init["restartCount"].as_i64()? >= 1 && pod["status"]["phase"] == "Pending").then_some(())
    })
    .await;
    agent.send(StopAgent).await.unwrap();
}

#[actix::test]
async fn a_pod_runs_once_every_container_started_and_ends_failed_when_deleted_unstarted() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&core, config("n-ph", dir.path()), Arc::new(ProcessRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    // One container runs, the other's image is not there: Pending, as the kubelet's phase
    // counts a container waiting for its first start.
    let mut half =
        pod("half", "n-ph", json!({"name": "a", "image": "none", "command": ["sleep", "1000"]}));
    half["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "b", "image": "kplane/no-such-image"}));
    half["metadata"]["finalizers"] = json!(["example.com/keep"]);
    ApiClient::create(&core, pods, "default", half).await.unwrap();
    let waiting = eventually("a running, b waiting on its image", || async {
        let pod = get(&core, "pods", "default", "half").await?;
        let statuses = &pod["status"]["containerStatuses"];
        let pulled = statuses[1]["state"]["waiting"]["reason"].as_str()?.contains("Image");
        (statuses[0]["state"]["running"].is_object() && pulled).then_some(pod)
    })
    .await;
    assert_eq!(waiting["status"]["phase"], "Pending", "{}", waiting["status"]);
    // Deleted: Failed, the container that never started one the kubelet cannot account for.
    ApiClient::delete(&core, pods, "default", "half", &DeleteOptions::default()).await.unwrap();
    let ended = eventually("half Failed", || async {
        get(&core, "pods", "default", "half").await.filter(|p| p["status"]["phase"] == "Failed")
    })
    .await;
    let statuses = &ended["status"]["containerStatuses"];
    assert_eq!(statuses[0]["state"]["terminated"]["exitCode"], 143, "{statuses}");
    assert_eq!(statuses[1]["state"]["terminated"]["reason"], "ContainerStatusUnknown");

    // A container that failed and then succeeded shows the failure as its last state.
    let marker = dir.path().join("second-try");
    let script = format!("test -f {0} && exit 0; touch {0}; exit 3", marker.display());
    let mut retried = pod(
        "retried",
        "n-ph",
        json!({"name": "c", "image": "none", "command": ["sh", "-c", script]}),
    );
    retried["spec"]["restartPolicy"] = json!("OnFailure");
    ApiClient::create(&core, pods, "default", retried).await.unwrap();
    let done = eventually("retried Succeeded", || async {
        get(&core, "pods", "default", "retried")
            .await
            .filter(|p| p["status"]["phase"] == "Succeeded")
    })
    .await;
    let status = &done["status"]["containerStatuses"][0];
    assert_eq!(status["state"]["terminated"]["exitCode"], 0, "{status}");
    assert_eq!(status["lastState"]["terminated"]["exitCode"], 3, "{status}");
    agent.send(StopAgent).await.unwrap();
}

#[actix::test]
async fn processes_run_crash_with_back_off_and_stop_on_deletion() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&core, config("n1", dir.path()), Arc::new(ProcessRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    let long = json!({"name": "c", "image": "none", "command": ["sh", "-c", "echo started $POD_NAME; exec sleep 1000"]});
    ApiClient::create(&core, pods, "default", pod("long", "n1", long)).await.unwrap();
    let crash = json!({"name": "c", "image": "none", "command": ["sh", "-c", "exit 7"]});
    ApiClient::create(&core, pods, "default", pod("crash", "n1", crash)).await.unwrap();
    let mut never = pod("once", "n1", json!({"name": "c", "image": "none", "command": ["true"]}));
    never["spec"]["restartPolicy"] = json!("Never");
    ApiClient::create(&core, pods, "default", never).await.unwrap();

    let running = eventually("long running", || async {
        get(&core, "pods", "default", "long").await.filter(|p| p["status"]["phase"] == "Running")
    })
    .await;
    let uid = running["metadata"]["uid"].as_str().unwrap().to_string();
    let log = dir.path().join(format!("pods/default_long_{uid}/c/0.log"));
    eventually("the log line", || async {
        std::fs::read_to_string(&log).ok().filter(|l| l.contains("started long"))
    })
    .await;
    let crashed = eventually("restarts", || async {
        get(&core, "pods", "default", "crash")
            .await
            .filter(|p| p["status"]["containerStatuses"][0]["restartCount"].as_u64() >= Some(2))
    })
    .await;
    assert_eq!(crashed["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"], 7);
    // Only the current and the previous run's logs are kept.
    let uid = crashed["metadata"]["uid"].as_str().unwrap();
    let logs = dir.path().join(format!("pods/default_crash_{uid}/c"));
    let runs = eventually("the third run started", || async {
        let names = std::fs::read_dir(&logs).ok()?.flatten();
        let runs: BTreeSet<String> = names.map(|e| e.file_name().into_string().unwrap()).collect();
        runs.contains("2.log").then_some(runs)
    })
    .await;
    assert!(!runs.contains("0.log") && !runs.contains("0.termination-log"), "{runs:?}");
    let looping = eventually("the crash loop back-off", || async {
        get(&core, "pods", "default", "crash").await.filter(|p| {
            p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "CrashLoopBackOff"
        })
    })
    .await;
    // The wait it names is the one it waits, in Go's words (200 ms doubling: 200ms, 400ms,
    // ..., 1.6s).
    let message = looping["status"]["containerStatuses"][0]["state"]["waiting"]["message"].clone();
    let message = message.as_str().unwrap();
    let uid = looping["metadata"]["uid"].as_str().unwrap();
    let waits = ["200ms", "400ms", "800ms", "1.6s", "3.2s", "6.4s", "12.8s"];
    assert!(
        waits.iter().any(|wait| message
            == format!("back-off {wait} restarting failed container=c pod=crash_default({uid})")),
        "{message}"
    );
    let back_off = event_about(&core, "crash", "BackOff").await;
    assert_eq!(back_off["type"], "Warning");
    assert!(back_off["message"].as_str().unwrap().contains("Back-off restarting"), "{back_off}");
    let done = eventually("once succeeded", || async {
        get(&core, "pods", "default", "once").await.filter(|p| p["status"]["phase"] == "Succeeded")
    })
    .await;
    assert_eq!(done["status"]["containerStatuses"][0]["restartCount"], 0);

    let pid = running["status"]["containerStatuses"][0]["containerID"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .parse::<u32>()
        .unwrap();
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    let marked =
        ApiClient::delete(&core, pods, "default", "long", &DeleteOptions::default()).await.unwrap();
    assert!(
        marked["metadata"]["deletionTimestamp"].is_string(),
        "a running pod is deleted gracefully"
    );
    eventually("the pod gone", || async {
        get(&core, "pods", "default", "long").await.is_none().then_some(())
    })
    .await;
    let killing = event_about(&core, "long", "Killing").await;
    assert_eq!(killing["message"], "Stopping container c");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    assert!(stat.is_empty() || stat.contains(") Z "), "the process is stopped: {stat}");

    // A pod its finalizers keep shows, once stopped, that it no longer runs.
    let sleeper = json!({"name": "c", "image": "none", "command": ["sleep", "1000"]});
    let mut held = pod("held", "n1", sleeper);
    held["metadata"]["finalizers"] = json!(["example.com/keep"]);
    ApiClient::create(&core, pods, "default", held).await.unwrap();
    eventually("held running", || async {
        get(&core, "pods", "default", "held").await.filter(|p| p["status"]["phase"] == "Running")
    })
    .await;
    ApiClient::delete(&core, pods, "default", "held", &DeleteOptions::default()).await.unwrap();
    let stopped = eventually("held stopped and Failed", || async {
        get(&core, "pods", "default", "held").await.filter(|p| p["status"]["phase"] == "Failed")
    })
    .await;
    let state = &stopped["status"]["containerStatuses"][0]["state"];
    assert_eq!(state["terminated"]["exitCode"], 143, "{stopped}");
    let conditions = stopped["status"]["conditions"].as_array().unwrap();
    let kinds: Vec<&str> = conditions.iter().filter_map(|c| c["type"].as_str()).collect();
    assert_eq!(
        kinds,
        ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
    );
    assert_eq!(
        (&conditions[2]["status"], &conditions[2]["reason"]),
        (&json!("False"), &json!("PodFailed"))
    );
    agent.send(StopAgent).await.unwrap();
}

#[actix::test]
async fn init_containers_environment_images_and_policies() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = config("n2", dir.path());
    config.images.insert("busybox".into(), vec!["sh".into(), "-c".into()]);
    let agent = start_agent(&core, config, Arc::new(ProcessRuntime::default()));
    let cms = find("", "v1", "configmaps").unwrap();
    ApiClient::create(
        &core,
        cms,
        "default",
        json!({"metadata": {"name": "settings"}, "data": {"color": "blue"}}),
    )
    .await
    .unwrap();
    let services = find("", "v1", "services").unwrap();
    ApiClient::create(
        &core,
        services,
        "default",
        json!({"metadata": {"name": "redis-master"},
        "spec": {"clusterIP": "127.192.0.10", "ports": [{"port": 6379}]}}),
    )
    .await
    .unwrap();
    let secrets = find("", "v1", "secrets").unwrap();
    let secret = json!({"metadata": {"name": "creds"}, "data": {"token": "czNjcjN0"}});
    ApiClient::create(&core, secrets, "default", secret).await.unwrap();
    let pods = find("", "v1", "pods").unwrap();
    let out = dir.path().join("out");
    let marker = dir.path().join("init-ran");
    let script = format!(
        "test -f {m} && echo \"$COLOR $MY_NODE $REDIS_MASTER_SERVICE_HOST:$REDIS_MASTER_SERVICE_PORT $GREETING $TOKEN\" > {o}; exec sleep 1000",
        m = marker.display(),
        o = out.display()
    );
    let full_pod = json!({"metadata": {"name": "full"}, "spec": {"nodeName": "n2", "terminationGracePeriodSeconds": 1,
        "initContainers": [{"name": "init", "image": "busybox", "args": [format!("touch {}", marker.display())]}],
        "containers": [{"name": "app", "image": "busybox", "args": [script],
            "env": [
                {"name": "COLOR", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "color"}}},
                {"name": "MY_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "GREETING", "value": "hi-$(COLOR)"},
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}}]}]}});
    ApiClient::create(&core, pods, "default", full_pod).await.unwrap();
    let content = eventually("the app container's output", || async {
        std::fs::read_to_string(&out).ok().filter(|s| s.ends_with('\n'))
    })
    .await;
    assert_eq!(content, "blue n2 127.192.0.10:6379 hi-blue s3cr3t\n");
    let full = eventually("full Running and initialized", || async {
        get(&core, "pods", "default", "full").await.filter(|p| p["status"]["phase"] == "Running")
    })
    .await;
    let init = &full["status"]["initContainerStatuses"][0];
    assert_eq!(init["state"]["terminated"]["reason"], "Completed");
    assert_eq!(init["ready"], true, "a completed init container is ready");
    let ran = init["state"]["terminated"]["containerID"].as_str().unwrap();
    assert!(ran.starts_with("kplane://") && init["containerID"] == ran, "{init}");
    let conditions = full["status"]["conditions"].as_array().unwrap();
    assert!(conditions
        .iter()
        .any(|c| c["type"] == "PodReadyToStartContainers" && c["status"] == "True"));

    // An image change restarts that container with the new command line.
    let mut changed = full.clone();
    changed["spec"]["containers"][0]["image"] = json!("busybox:2");
    ApiClient::update(&core, pods, "default", changed).await.unwrap();
    eventually("the container restarted for its new image", || async {
        get(&core, "pods", "default", "full").await.filter(|p| {
            p["status"]["containerStatuses"][0]["restartCount"] == 1
                && p["status"]["containerStatuses"][0]["image"] == "busybox:2"
                && p["status"]["containerStatuses"][0]["state"]["running"].is_object()
        })
    })
    .await;
    let killing = event_about(&core, "full", "Killing").await;
    let name = full["spec"]["containers"][0]["name"].as_str().unwrap();
    assert_eq!(
        killing["message"],
        format!("Container {name} definition changed, will be restarted")
    );
    // As the kubelet's: about the container's place in the spec, from the node.
    assert_eq!(killing["involvedObject"]["fieldPath"], format!("spec.containers{{{name}}}"));
    assert_eq!(killing["source"], json!({"component": "kubelet", "host": "n2"}));
    assert_eq!(killing["reportingInstance"], "n2");
    let started = event_about(&core, "full", "Started").await;
    assert!(["spec.initContainers{init}", "spec.containers{app}"]
        .contains(&started["involvedObject"]["fieldPath"].as_str().unwrap()));

    // An unknown image: ErrImagePull, then ImagePullBackOff.
    ApiClient::create(
        &core,
        pods,
        "default",
        pod("nope", "n2", json!({"name": "c", "image": "nginx:1.27"})),
    )
    .await
    .unwrap();
    let waiting = eventually("ImagePullBackOff", || async {
        get(&core, "pods", "default", "nope").await.filter(|p| {
            p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ImagePullBackOff"
        })
    })
    .await;
    let message =
        waiting["status"]["containerStatuses"][0]["state"]["waiting"]["message"].as_str().unwrap();
    // The pull's error behind the back-off's, as the kubelet writes it.
    assert!(
        message.starts_with("Back-off pulling image \"nginx:1.27\": ErrImagePull: image ")
            && message.contains("runtime.images"),
        "{message}"
    );
    assert_eq!(waiting["status"]["phase"], "Pending");
    // The kubelet's events: a pull tried, then backed off.
    let pulling = event_about(&core, "nope", "Pulling").await;
    assert_eq!(pulling["message"], "Pulling image \"nginx:1.27\"");
    let backoff = event_about(&core, "nope", "BackOff").await;
    assert_eq!(backoff["message"], "Back-off pulling image \"nginx:1.27\"");
    assert_eq!(backoff["type"], "Normal");
    // Under `imagePullPolicy: Never` nothing is pulled: ErrImageNeverPull.
    let mut never = pod("never", "n2", json!({"name": "c", "image": "nginx:1.27"}));
    never["spec"]["containers"][0]["imagePullPolicy"] = json!("Never");
    ApiClient::create(&core, pods, "default", never).await.unwrap();
    let absent = event_about(&core, "never", "ErrImageNeverPull").await;
    let message = "Container image \"nginx:1.27\" is not present with pull policy of Never";
    assert_eq!((&absent["type"], &absent["message"]), (&json!("Warning"), &json!(message)));
    let waiting = eventually("never waits with ErrImageNeverPull", || async {
        let pod = get(&core, "pods", "default", "never").await?;
        let waiting = pod["status"]["containerStatuses"][0]["state"]["waiting"].clone();
        (waiting["reason"] == "ErrImageNeverPull").then_some(waiting)
    })
    .await;
    assert_eq!(waiting["message"], message);

    // OnFailure: a failing container is restarted, a succeeding one is not.
    let mut flaky = pod(
        "flaky",
        "n2",
        json!({"name": "c", "image": "none", "command": ["sh", "-c", format!("test -f {m}.2 && exit 0; touch {m}.2; exit 1", m = marker.display())]}),
    );
    flaky["spec"]["restartPolicy"] = json!("OnFailure");
    ApiClient::create(&core, pods, "default", flaky).await.unwrap();
    let done = eventually("flaky succeeded after one restart", || async {
        get(&core, "pods", "default", "flaky").await.filter(|p| p["status"]["phase"] == "Succeeded")
    })
    .await;
    assert_eq!(done["status"]["containerStatuses"][0]["restartCount"], 1);

    // A startup probe that never passes restarts the container; until then it is not started.
    let slow = pod(
        "slow",
        "n2",
        json!({"name": "c", "image": "none", "command": ["sleep", "1000"],
        "startupProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 1}}),
    );
    ApiClient::create(&core, pods, "default", slow).await.unwrap();
    let restarted = eventually("a startup-probe restart", || async {
        get(&core, "pods", "default", "slow")
            .await
            .filter(|p| p["status"]["containerStatuses"][0]["restartCount"].as_u64() >= Some(1))
    })
    .await;
    assert_eq!(restarted["status"]["containerStatuses"][0]["started"], false);
    let unhealthy = event_about(&core, "slow", "Unhealthy").await;
    assert_eq!(unhealthy["type"], "Warning");
    assert!(
        unhealthy["message"].as_str().unwrap().starts_with("Startup probe failed"),
        "{unhealthy}"
    );
    event_about(&core, "slow", "Killing").await;
    agent.send(StopAgent).await.unwrap();
}

/// A running init container (not a sidecar) whose image changes runs to its end as it was, and
/// is not run again, as the kubelet leaves it.
#[actix::test]
async fn a_running_init_container_is_not_restarted_for_a_new_image() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&core, config("n8", dir.path()), Arc::new(ProcessRuntime::default()));
    let marker = dir.path().join("go-on");
    let wait = format!("while ! test -f {}; do sleep 0.05; done", marker.display());
    let mut spec = pod(
        "held",
        "n8",
        json!({"name": "app", "image": "none",
        "command": ["sleep", "1000"]}),
    );
    spec["spec"]["initContainers"] =
        json!([{"name": "init", "image": "busybox", "command": ["sh", "-c", wait]}]);
    spec["spec"]["volumes"] = json!([{"name": "info", "downwardAPI": {"items": [
        {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}]);
    let pods = find("", "v1", "pods").unwrap();
    ApiClient::create(&core, pods, "default", spec).await.unwrap();
    let running = eventually("init running", || async {
        let pod = get(&core, "pods", "default", "held").await?;
        pod["status"]["initContainerStatuses"][0]["state"]["running"].is_object().then_some(pod)
    })
    .await;
    let mut changed = running.clone();
    changed["spec"]["initContainers"][0]["image"] = json!("busybox:2");
    changed["metadata"]["labels"] = json!({"seen": "yes"});
    ApiClient::update(&core, pods, "default", changed).await.unwrap();
    // The worker has taken the change once the downward API's file shows the label.
    let labels = dir
        .path()
        .join("pods")
        .join(format!("default_held_{}", running["metadata"]["uid"].as_str().unwrap()));
    let labels = labels.join("volumes/info/labels");
    eventually("the new label written", || async {
        std::fs::read_to_string(&labels).ok().filter(|l| l.contains("seen")).map(|_| ())
    })
    .await;
    std::fs::write(&marker, "").unwrap();
    let started = eventually("the app running", || async {
        let pod = get(&core, "pods", "default", "held").await?;
        pod["status"]["containerStatuses"][0]["state"]["running"].is_object().then_some(pod)
    })
    .await;
    let init = &started["status"]["initContainerStatuses"][0];
    assert_eq!(init["restartCount"], 0, "{started}");
    assert_eq!(init["state"]["terminated"]["reason"], "Completed", "{started}");
    agent.send(StopAgent).await.unwrap();
}

/// Native sidecars (init containers with `restartPolicy: Always`): the init containers after
/// one, and the app containers, start once it has started (its startup probe passed); it runs
/// beside them, counts for the pod's readiness, is restarted whenever it exits, and stops once
/// the app containers have completed.
#[actix::test]
async fn sidecars_start_first_run_beside_the_app_and_stop_after_it() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&core, config("n5", dir.path()), Arc::new(ProcessRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    let mark = dir.path().join("sidecar-up");
    let mark = mark.display();
    let sh = |script: String| json!(["sh", "-c", script]);
    let sidecar = json!({"name": "side", "image": "none", "restartPolicy": "Always",
        "command": sh(format!("sleep 0.3; touch {mark}; exec sleep 1000")),
        "startupProbe": {"exec": {"command": sh(format!("test -f {mark}"))}, "periodSeconds": 1}});
    let pod = json!({"metadata": {"name": "with-sidecar"}, "spec": {"nodeName": "n5",
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
        "initContainers": [sidecar,
            {"name": "setup", "image": "none", "command": sh(format!("test -f {mark}"))}],
        "containers": [{"name": "app", "image": "none",
            "command": sh(format!("test -f {mark} && sleep 2"))}]}});
    ApiClient::create(&core, pods, "default", pod).await.unwrap();
    let running = eventually("the app running beside its sidecar", || async {
        get(&core, "pods", "default", "with-sidecar").await.filter(|p| {
            p["status"]["containerStatuses"][0]["state"]["running"].is_object()
                && p["status"]["conditions"].as_array().is_some_and(|c| {
                    c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True")
                })
        })
    })
    .await;
    let status = &running["status"];
    assert_eq!(status["phase"], "Running");
    let side = &status["initContainerStatuses"][0];
    assert!(side["state"]["running"].is_object(), "{side}");
    assert_eq!((&side["started"], &side["ready"]), (&json!(true), &json!(true)));
    assert_eq!(status["initContainerStatuses"][1]["state"]["terminated"]["exitCode"], 0);
    // The app ran only after the sidecar had started: it found its mark, and so it succeeds;
    // then the sidecar is stopped and not restarted.
    let done = eventually("the pod succeeded and its sidecar stopped", || async {
        get(&core, "pods", "default", "with-sidecar").await.filter(|p| {
            p["status"]["phase"] == "Succeeded"
                && p["status"]["initContainerStatuses"][0]["state"]["terminated"].is_object()
        })
    })
    .await;
    assert_eq!(done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"], 0);
    assert_eq!(done["status"]["initContainerStatuses"][0]["restartCount"], 0);

    // While a sidecar that ignores SIGTERM stops after the app has ended, the pod is still
    // Running, with a running pod's conditions, as the kubelet counts a running sidecar.
    let stubborn = json!({"metadata": {"name": "stubborn"}, "spec": {"nodeName": "n5",
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 3,
        "initContainers": [{"name": "side", "image": "none", "restartPolicy": "Always",
            "command": sh("trap '' TERM; while true; do sleep 0.1; done".into())}],
        "containers": [{"name": "app", "image": "none", "command": sh("sleep 0.5".into())}]}});
    ApiClient::create(&core, pods, "default", stubborn).await.unwrap();
    let stopping = eventually("the app ended beside its running sidecar", || async {
        get(&core, "pods", "default", "stubborn").await.filter(|p| {
            p["status"]["containerStatuses"][0]["state"]["terminated"].is_object()
                && p["status"]["initContainerStatuses"][0]["state"]["running"].is_object()
        })
    })
    .await;
    assert_eq!(stopping["status"]["phase"], "Running", "{stopping}");
    let conditions = stopping["status"]["conditions"].as_array().unwrap();
    let condition = |kind: &str| conditions.iter().find(|c| c["type"] == kind).unwrap();
    assert_eq!(condition("Initialized")["status"], "True");
    assert!(condition("Initialized").get("reason").is_none(), "{stopping}");
    assert_eq!(condition("Ready")["reason"], "ContainersNotReady", "{stopping}");
    assert_eq!(condition("PodReadyToStartContainers")["status"], "True");
    eventually("stubborn succeeded", || async {
        get(&core, "pods", "default", "stubborn")
            .await
            .filter(|p| p["status"]["phase"] == "Succeeded")
    })
    .await;

    // A sidecar that exits is restarted, whatever the pod's restart policy says, while the
    // app keeps running and the pod stays initialized.
    let flaky = json!({"metadata": {"name": "flaky-sidecar"}, "spec": {"nodeName": "n5",
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
        "initContainers": [{"name": "side", "image": "none", "restartPolicy": "Always",
            "command": sh("sleep 0.2; exit 1".into())}],
        "containers": [{"name": "app", "image": "none", "command": ["sleep", "1000"]}]}});
    ApiClient::create(&core, pods, "default", flaky).await.unwrap();
    let restarted = eventually("the sidecar restarted", || async {
        get(&core, "pods", "default", "flaky-sidecar").await.filter(|p| {
            p["status"]["initContainerStatuses"][0]["restartCount"].as_u64() >= Some(2)
                && p["status"]["containerStatuses"][0]["state"]["running"].is_object()
        })
    })
    .await;
    assert_eq!(restarted["status"]["phase"], "Running");
    let conditions = restarted["status"]["conditions"].as_array().unwrap();
    assert!(conditions.iter().any(|c| c["type"] == "Initialized" && c["status"] == "True"));

    // An init container after the sidecar fails for good: the pod has failed, and its sidecar
    // stops with it.
    let failing = json!({"metadata": {"name": "failed-init"}, "spec": {"nodeName": "n5",
        "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
        "initContainers": [{"name": "side", "image": "none", "restartPolicy": "Always",
            "command": ["sleep", "1000"]},
            {"name": "setup", "image": "none", "command": ["false"]}],
        "containers": [{"name": "app", "image": "none", "command": ["true"]}]}});
    ApiClient::create(&core, pods, "default", failing).await.unwrap();
    let failed = eventually("the pod failed and its sidecar stopped", || async {
        get(&core, "pods", "default", "failed-init").await.filter(|p| {
            p["status"]["phase"] == "Failed"
                && p["status"]["initContainerStatuses"][0]["state"]["terminated"].is_object()
        })
    })
    .await;
    assert_eq!(failed["status"]["initContainerStatuses"][0]["restartCount"], 0);

    // A pod deleted: its app container is told to stop first, its sidecars once it has, in
    // reverse order: the later sidecar first, the earlier once it has stopped.
    let (told, wrong) = (dir.path().join("sidecar-told"), dir.path().join("told-together"));
    let (told, wrong) = (told.display(), wrong.display());
    let (later_told, early) = (dir.path().join("later-told"), dir.path().join("told-early"));
    let (later_told, early) = (later_told.display(), early.display());
    let ordered = json!({"metadata": {"name": "ordered"}, "spec": {"nodeName": "n5",
        "terminationGracePeriodSeconds": 10,
        "initContainers": [{"name": "side", "image": "none", "restartPolicy": "Always",
            "command": sh(format!("trap 'touch {told}; exit 0' TERM; while true; do sleep 0.1; done"))},
            {"name": "later", "image": "none", "restartPolicy": "Always",
            "command": sh(format!(
                "trap 'touch {later_told}; sleep 0.5; test -f {told} && touch {early}; exit 0' TERM; \
                 while true; do sleep 0.1; done"))}],
        "containers": [{"name": "app", "image": "none", "command": sh(format!(
            "trap 'sleep 0.5; test -f {told} && touch {wrong}; exit 0' TERM; \
             while true; do sleep 0.1; done"))}]}});
    ApiClient::create(&core, pods, "default", ordered).await.unwrap();
    eventually("all running", || async {
        get(&core, "pods", "default", "ordered").await.filter(|p| {
            p["status"]["containerStatuses"][0]["state"]["running"].is_object()
                && p["status"]["initContainerStatuses"][0]["state"]["running"].is_object()
                && p["status"]["initContainerStatuses"][1]["state"]["running"].is_object()
        })
    })
    .await;
    let options = DeleteOptions::default();
    ApiClient::delete(&core, pods, "default", "ordered", &options).await.unwrap();
    eventually("the pod gone", || async {
        get(&core, "pods", "default", "ordered").await.is_none().then_some(())
    })
    .await;
    let (told, wrong) = (dir.path().join("sidecar-told"), dir.path().join("told-together"));
    assert!(told.exists(), "the sidecar was told to stop");
    assert!(!wrong.exists(), "the sidecar was told to stop while the app still ran");
    assert!(dir.path().join("later-told").exists(), "the later sidecar was told to stop");
    let early = dir.path().join("told-early");
    assert!(!early.exists(), "the earlier sidecar was told to stop before the later one stopped");
    agent.send(StopAgent).await.unwrap();
}

#[actix::test]
async fn a_container_a_probe_kills_backs_off_and_every_failed_probe_is_an_event() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = config("n9", dir.path());
    config.restart_backoff = Duration::from_secs(60);
    let agent = start_agent(&core, config, Arc::new(ProcessRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    let probed = pod(
        "probed",
        "n9",
        json!({"name": "c", "image": "none", "command": ["sleep", "1000"],
        "livenessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 1}}),
    );
    ApiClient::create(&core, pods, "default", probed).await.unwrap();
    let unready = pod(
        "unready",
        "n9",
        json!({"name": "c", "image": "none", "command": ["sleep", "1000"],
        "readinessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1}}),
    );
    ApiClient::create(&core, pods, "default", unready).await.unwrap();
    // The first restart is at once; after the second kill the container waits out its back-off.
    let waiting = eventually("CrashLoopBackOff after the second kill", || async {
        get(&core, "pods", "default", "probed").await.filter(|p| {
            p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "CrashLoopBackOff"
        })
    })
    .await;
    assert_eq!(waiting["status"]["containerStatuses"][0]["restartCount"], 1, "{waiting}");
    // An image without a tag is pulled every time (`imagePullPolicy: Always`).
    let pulling = event_about(&core, "probed", "Pulling").await;
    assert_eq!(pulling["message"], "Pulling image \"none\"");
    // Under `restartPolicy: Never` the container a probe kills stays down: the pod fails.
    let mut once = pod(
        "once",
        "n9",
        json!({"name": "c", "image": "none", "command": ["sleep", "1000"],
        "livenessProbe": {"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 1}}),
    );
    once["spec"]["restartPolicy"] = json!("Never");
    ApiClient::create(&core, pods, "default", once).await.unwrap();
    let failed = eventually("once Failed", || async {
        get(&core, "pods", "default", "once").await.filter(|p| p["status"]["phase"] == "Failed")
    })
    .await;
    assert_eq!(failed["status"]["containerStatuses"][0]["restartCount"], 0, "{failed}");
    // Its kill leaves no container running: the pod is killed, in the kubelet's words.
    let killing = event_about(&core, "once", "Killing").await;
    assert_eq!(killing["message"], "Stopping container c");
    // Under `OnFailure`, a container a probe kills is restarted though it exits 0 on SIGTERM.
    let mut clean = pod(
        "clean",
        "n9",
        json!({"name": "c", "image": "none",
        "command": ["sh", "-c", "trap 'exit 0' TERM; sleep 1000 & wait"],
        "livenessProbe": {"exec": {"command": ["false"]}, "initialDelaySeconds": 1,
            "periodSeconds": 1, "failureThreshold": 1}}),
    );
    clean["spec"]["restartPolicy"] = json!("OnFailure");
    ApiClient::create(&core, pods, "default", clean).await.unwrap();
    let restarted = eventually("clean restarted", || async {
        get(&core, "pods", "default", "clean").await.filter(|p| {
            p["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 0
        })
    })
    .await;
    assert_ne!(restarted["status"]["phase"], "Succeeded", "{restarted}");
    // A readiness probe's failures are events though the container was never ready.
    let events = find("", "v1", "events").unwrap();
    let options = ListOptions {
        field_selector: Some("involvedObject.name=unready,reason=Unhealthy".into()),
        ..ListOptions::default()
    };
    // A missing config map: CreateContainerConfigError, in the kubelet's words.
    let configured = pod(
        "configured",
        "n9",
        json!({"name": "c", "image": "none", "command": ["sleep", "1000"],
        "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "a"}}}]}),
    );
    ApiClient::create(&core, pods, "default", configured).await.unwrap();
    let waiting = eventually("CreateContainerConfigError", || async {
        get(&core, "pods", "default", "configured").await.filter(|p| {
            let state = &p["status"]["containerStatuses"][0]["state"]["waiting"];
            state["reason"] == "CreateContainerConfigError"
        })
    })
    .await;
    let state = &waiting["status"]["containerStatuses"][0]["state"]["waiting"];
    assert_eq!(state["message"], "configmap \"absent\" not found");
    let failed = event_about(&core, "configured", "Failed").await;
    assert_eq!(failed["message"], "Error: configmap \"absent\" not found");
    // The image was there first, as the kubelet's events tell it.
    let pulled = event_about(&core, "configured", "Pulled").await;
    let pulled = pulled["message"].as_str().unwrap_or_default();
    assert!(pulled.starts_with("Successfully pulled image \"none\""), "{pulled}");
    eventually("a readiness failure's event", || async {
        let list = ApiClient::list(&core, events, Some("default"), &options).await.ok()?;
        list.items.into_iter().find(|e| {
            e["message"].as_str().is_some_and(|m| m.starts_with("Readiness probe failed"))
        })
    })
    .await;
    agent.send(StopAgent).await.unwrap();
}

#[actix::test]
async fn logs_are_rotated_past_their_size_limit() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = config("n3", dir.path());
    config.max_log_bytes = 10_000;
    let agent = start_agent(&core, config, Arc::new(ProcessRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    let chatty = json!({"name": "c", "image": "none",
        "command": ["sh", "-c", "while true; do echo 0123456789012345678901234567890123456789; sleep 0.01; done"]});
    let created =
        ApiClient::create(&core, pods, "default", pod("chatty", "n3", chatty)).await.unwrap();
    let uid = created["metadata"]["uid"].as_str().unwrap().to_string();
    let logs = dir.path().join(format!("pods/default_chatty_{uid}/c"));
    let rotated = eventually("a rotated log", || async {
        std::fs::metadata(logs.join("0.log.1")).ok().filter(|m| m.len() > 10_000)
    })
    .await;
    // Truncated when copied: the current log restarts below the rotated one's size (without
    // truncation it would only ever grow past it).
    eventually("the current log truncated", || async {
        let current = std::fs::metadata(logs.join("0.log")).ok()?.len();
        (current < rotated.len()).then_some(())
    })
    .await;
    agent.send(StopAgent).await.unwrap();
}

fn pid_of(pod: &Value) -> u32 {
    let id = pod["status"]["containerStatuses"][0]["containerID"].as_str().unwrap_or_default();
    id.rsplit('/').next().and_then(|pid| pid.parse().ok()).unwrap_or(0)
}

/// A container whose process ends while its agent is down: the agent that comes back takes
/// the end (its code unknown, in the kubelet's words) and leaves the rest to the restart
/// policy, so that a run-once pod never runs twice.
#[actix::test]
async fn a_container_that_ended_while_the_agent_was_down_runs_again_only_if_its_policy_says() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;

    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let config_kept = |name: &str, dir: &std::path::Path| AgentConfig {
        stop_containers_on_shutdown: false,
        ..config(name, dir)
    };
    let kept = config_kept("n4", dir.path());
    let agent = start_agent(&core, kept.clone(), Arc::new(ProcessRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    let sleeper = json!({"name": "c", "image": "none", "command": ["sleep", "1000"]});
    let mut once = pod("once", "n4", sleeper.clone());
    once["spec"]["restartPolicy"] = json!("Never");
    ApiClient::create(&core, pods, "default", once).await.unwrap();
    ApiClient::create(&core, pods, "default", pod("always", "n4", sleeper)).await.unwrap();
    let mut pids = Vec::new();
    for name in ["once", "always"] {
        let running = eventually(&format!("{name} running"), || async {
            get(&core, "pods", "default", name).await.filter(|p| p["status"]["phase"] == "Running")
        })
        .await;
        pids.push(pid_of(&running));
    }
    agent.send(StopAgent).await.unwrap();
    for &pid in &pids {
        assert!(pid > 1);
        kill(Pid::from_raw(pid as i32), Signal::SIGKILL).unwrap();
        eventually("the process gone", || async {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            (stat.is_empty() || stat.contains(") Z ")).then_some(())
        })
        .await;
    }

    let agent = start_agent(&core, kept, Arc::new(ProcessRuntime::default()));
    let failed = eventually("once Failed", || async {
        get(&core, "pods", "default", "once").await.filter(|p| p["status"]["phase"] == "Failed")
    })
    .await;
    let status = &failed["status"]["containerStatuses"][0];
    assert_eq!(status["state"]["terminated"]["reason"], "ContainerStatusUnknown", "{failed}");
    assert_eq!(status["state"]["terminated"]["exitCode"], 137);
    assert_eq!(status["restartCount"], 0);
    assert_eq!(pid_of(&failed), pids[0], "not started again");
    let restarted = eventually("always running again", || async {
        get(&core, "pods", "default", "always").await.filter(|p| {
            let status = &p["status"]["containerStatuses"][0];
            status["restartCount"] == 1 && status["state"]["running"].is_object()
        })
    })
    .await;
    let status = &restarted["status"]["containerStatuses"][0];
    assert_eq!(status["lastState"]["terminated"]["reason"], "ContainerStatusUnknown");
    assert_ne!(pid_of(&restarted), pids[1]);
    // Adopted again while it runs, it keeps its last state (what `logs --previous` reads).
    agent.send(StopAgent).await.unwrap();
    let agent =
        start_agent(&core, config_kept("n4", dir.path()), Arc::new(ProcessRuntime::default()));
    eventually("always adopted", || async {
        let pod = get(&core, "pods", "default", "always").await?;
        let status = &pod["status"]["containerStatuses"][0];
        let adopted = status["state"]["running"].is_object() && pid_of(&pod) == pid_of(&restarted);
        adopted.then_some(())
    })
    .await;
    // (Its status is written again by the new agent: a later write must keep the last state.)
    tokio::time::sleep(Duration::from_millis(500)).await;
    let adopted = get(&core, "pods", "default", "always").await.unwrap();
    let status = &adopted["status"]["containerStatuses"][0];
    assert_eq!(status["lastState"]["terminated"]["reason"], "ContainerStatusUnknown", "{adopted}");
    assert_eq!(status["restartCount"], 1);
    ApiClient::delete(&core, pods, "default", "always", &DeleteOptions::default()).await.unwrap();
    eventually("always gone", || async {
        get(&core, "pods", "default", "always").await.is_none().then_some(())
    })
    .await;
    agent.send(StopAgent).await.unwrap();
}

/// A pod whose app container has run stays Running and initialized when a restarted agent
/// adopts it, even while its sidecar's startup probe (run again) has not passed.
#[actix::test]
async fn an_adopted_pod_stays_initialized_while_its_sidecar_is_probed_again() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let kept = AgentConfig { stop_containers_on_shutdown: false, ..config("n7", dir.path()) };
    let agent = start_agent(&core, kept.clone(), Arc::new(ProcessRuntime::default()));
    let ready_file = dir.path().join("sidecar-started");
    std::fs::write(&ready_file, "").unwrap();
    let sidecar = json!({"name": "side", "image": "none", "command": ["sleep", "1000"],
        "restartPolicy": "Always",
        "startupProbe": {"exec": {"command": ["test", "-f", ready_file]},
            "periodSeconds": 1, "failureThreshold": 1000}});
    let mut spec = pod(
        "sided",
        "n7",
        json!({"name": "app", "image": "none",
        "command": ["sleep", "1000"]}),
    );
    spec["spec"]["initContainers"] = json!([sidecar]);
    let pods = find("", "v1", "pods").unwrap();
    ApiClient::create(&core, pods, "default", spec).await.unwrap();
    eventually("sided running", || async {
        let pod = get(&core, "pods", "default", "sided").await?;
        let app = &pod["status"]["containerStatuses"][0];
        (app["state"]["running"].is_object() && pod["status"]["phase"] == "Running").then_some(())
    })
    .await;
    agent.send(StopAgent).await.unwrap();
    // The probe fails from now on: the sidecar is not started again.
    std::fs::remove_file(&ready_file).unwrap();
    let agent = start_agent(&core, kept, Arc::new(ProcessRuntime::default()));
    let probed = eventually("the sidecar probed again", || async {
        let pod = get(&core, "pods", "default", "sided").await?;
        (pod["status"]["initContainerStatuses"][0]["started"] == false).then_some(pod)
    })
    .await;
    assert_eq!(probed["status"]["phase"], "Running", "{probed}");
    let conditions = probed["status"]["conditions"].as_array().unwrap();
    let initialized = conditions.iter().find(|c| c["type"] == "Initialized").unwrap();
    assert_eq!(initialized["status"], "True", "{probed}");
    ApiClient::delete(&core, pods, "default", "sided", &DeleteOptions::default()).await.unwrap();
    eventually("sided gone", || async {
        get(&core, "pods", "default", "sided").await.is_none().then_some(())
    })
    .await;
    agent.send(StopAgent).await.unwrap();
}

/// Lifecycle hooks as the kubelet runs them: a container is not running, nor are the ones after
/// it started, until its postStart hook has passed; a failed one kills it (its preStop hook
/// first); a deleted pod's containers get their preStop hook before SIGTERM.
#[actix::test]
async fn post_start_holds_up_the_next_containers_and_pre_stop_comes_before_sigterm() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&core, config("n6", dir.path()), Arc::new(ProcessRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    let files = tempfile::tempdir().unwrap();
    let at = |name: &str| files.path().join(name).to_str().unwrap().to_string();
    let (hooking, go, order) = (at("hooking"), at("go"), at("order"));
    let hook =
        format!("touch {hooking}; until [ -e {go} ]; do sleep 0.05; done; echo hooked >> {order}");
    let first = json!({"name": "first", "image": "none",
        "command": ["sh", "-c", format!("trap 'echo term >> {order}; exit 0' TERM; while true; do sleep 0.05; done")],
        "lifecycle": {
            "postStart": {"exec": {"command": ["sh", "-c", hook]}},
            "preStop": {"exec": {"command": ["sh", "-c", format!("echo prestop-$HOOKED >> {order}")]}}},
        "env": [{"name": "HOOKED", "value": "yes"}]});
    let second = json!({"name": "second", "image": "none",
        "command": ["sh", "-c", format!("echo second >> {order}; exec sleep 1000")]});
    let mut hooked = pod("hooked", "n6", first);
    hooked["spec"]["containers"].as_array_mut().unwrap().push(second);
    ApiClient::create(&core, pods, "default", hooked).await.unwrap();
    // As the kubelet's, the status is the one from before the start until its hook has passed.
    let creating = eventually("the first container started, its hook under way", || async {
        let pod = get(&core, "pods", "default", "hooked").await?;
        let reported = pod["status"]["containerStatuses"].is_array();
        (reported && std::path::Path::new(&hooking).exists()).then_some(pod)
    })
    .await;
    let statuses = &creating["status"]["containerStatuses"];
    assert_eq!(creating["status"]["phase"], "Pending", "{creating}");
    assert_eq!(statuses[0]["state"]["waiting"]["reason"], "ContainerCreating");
    assert!(statuses[0]["containerID"].is_null(), "{creating}");
    std::fs::write(&go, "").unwrap();
    eventually("both running", || async {
        get(&core, "pods", "default", "hooked").await.filter(|p| {
            let statuses = p["status"]["containerStatuses"].as_array().cloned().unwrap_or_default();
            statuses.len() == 2 && statuses.iter().all(|s| s["state"]["running"].is_object())
        })
    })
    .await;
    ApiClient::delete(&core, pods, "default", "hooked", &DeleteOptions::default()).await.unwrap();
    eventually("hooked gone", || async {
        get(&core, "pods", "default", "hooked").await.is_none().then_some(())
    })
    .await;
    // The second started after the first's postStart hook had passed.
    let ran = std::fs::read_to_string(&order).unwrap();
    assert_eq!(ran, "hooked\nsecond\nprestop-yes\nterm\n");

    // A postStart hook that fails kills its container, preStop hook first; under
    // restartPolicy Never the pod has failed.
    let failing = json!({"name": "c", "image": "none", "command": ["sleep", "1000"],
        "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", "exit 3"]}},
            "preStop": {"httpGet": {"path": "/stop", "port": 1}}}});
    let mut once = pod("failing", "n6", failing);
    once["spec"]["restartPolicy"] = json!("Never");
    ApiClient::create(&core, pods, "default", once).await.unwrap();
    let failed = eventually("failing Failed", || async {
        get(&core, "pods", "default", "failing").await.filter(|p| p["status"]["phase"] == "Failed")
    })
    .await;
    let terminated = &failed["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(terminated["exitCode"], 143, "{failed}");
    let hook = event_about(&core, "failing", "FailedPostStartHook").await;
    assert_eq!(
        (&hook["type"], &hook["message"]),
        (&json!("Warning"), &json!("PostStartHook failed"))
    );
    assert_eq!(hook["involvedObject"]["fieldPath"], "spec.containers{c}");
    let killing = event_about(&core, "failing", "Killing").await;
    assert_eq!(killing["message"], "FailedPostStartHook");
    let pre_stop = event_about(&core, "failing", "FailedPreStopHook").await;
    assert_eq!(pre_stop["message"], "PreStopHook failed");
    // In the order they happened (event names grow with their time of recording).
    let events = find("", "v1", "events").unwrap();
    let about = ListOptions {
        field_selector: Some("involvedObject.name=failing".into()),
        ..ListOptions::default()
    };
    let mut recorded = ApiClient::list(&core, events, Some("default"), &about).await.unwrap().items;
    recorded.sort_by(|a, b| a["metadata"]["name"].as_str().cmp(&b["metadata"]["name"].as_str()));
    let reasons: Vec<&str> = recorded.iter().filter_map(|e| e["reason"].as_str()).collect();
    let wanted = ["Created", "Started", "FailedPostStartHook", "Killing"];
    let order: Vec<&str> = reasons.iter().copied().filter(|r| wanted.contains(r)).collect();
    assert_eq!(order, wanted, "{reasons:?}");

    // A deletion forced while a preStop hook runs (its grace a minute) stops the container
    // at once, hook and all.
    let hanging = at("hanging");
    let slow = json!({"name": "c", "image": "none", "command": ["sleep", "1000"],
        "lifecycle": {"preStop": {"exec": {"command": ["sh", "-c", format!("touch {hanging}; sleep 1000")]}}}});
    let mut slow = pod("slow-stop", "n6", slow);
    slow["spec"]["terminationGracePeriodSeconds"] = json!(60);
    ApiClient::create(&core, pods, "default", slow).await.unwrap();
    let running = eventually("slow-stop running", || async {
        get(&core, "pods", "default", "slow-stop")
            .await
            .filter(|p| p["status"]["phase"] == "Running")
    })
    .await;
    let pid = pid_of(&running);
    ApiClient::delete(&core, pods, "default", "slow-stop", &DeleteOptions::default())
        .await
        .unwrap();
    eventually("the preStop hook running", || async {
        std::path::Path::new(&hanging).exists().then_some(())
    })
    .await;
    let forced = DeleteOptions { grace_period_seconds: Some(0), ..DeleteOptions::default() };
    ApiClient::delete(&core, pods, "default", "slow-stop", &forced).await.unwrap();
    eventually("the container killed", || async {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        (stat.is_empty() || stat.contains(") Z ")).then_some(())
    })
    .await;
    agent.send(StopAgent).await.unwrap();
}

/// Containers the agent stopped as it shut down ended with the code their stop gave them:
/// the agent that comes next restarts them as their restart policy says, no more, and at
/// once: they did not fail, so no back-off holds them (however often the agent restarts).
#[actix::test]
async fn containers_stopped_at_shutdown_are_restarted_as_their_policy_says() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    // A back-off no test waits out.
    let config = |name: &str, dir: &std::path::Path| AgentConfig {
        restart_backoff: Duration::from_secs(300),
        ..config(name, dir)
    };
    let agent = start_agent(&core, config("n7", dir.path()), Arc::new(ProcessRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    let sleeper = json!({"name": "c", "image": "none", "command": ["sleep", "1000"]});
    let mut once = pod("once", "n7", sleeper.clone());
    once["spec"]["restartPolicy"] = json!("Never");
    ApiClient::create(&core, pods, "default", once).await.unwrap();
    ApiClient::create(&core, pods, "default", pod("always", "n7", sleeper)).await.unwrap();
    for name in ["once", "always"] {
        eventually(&format!("{name} running"), || async {
            get(&core, "pods", "default", name).await.filter(|p| p["status"]["phase"] == "Running")
        })
        .await;
    }
    agent.send(StopAgent).await.unwrap();
    // The last status the agent posted shows what it stopped: not ready, the run ended.
    for name in ["once", "always"] {
        let pod = get(&core, "pods", "default", name).await.unwrap();
        let status = &pod["status"]["containerStatuses"][0];
        assert_eq!(status["ready"], false, "{pod}");
        assert_eq!(status["state"]["terminated"]["exitCode"], 143, "{pod}");
        let conditions = pod["status"]["conditions"].as_array().unwrap();
        let ready = conditions.iter().find(|c| c["type"] == "Ready").unwrap();
        assert_eq!(ready["status"], "False", "{pod}");
    }
    let agent = start_agent(&core, config("n7", dir.path()), Arc::new(ProcessRuntime::default()));
    let failed = eventually("once Failed", || async {
        get(&core, "pods", "default", "once").await.filter(|p| p["status"]["phase"] == "Failed")
    })
    .await;
    let status = &failed["status"]["containerStatuses"][0];
    assert_eq!(status["state"]["terminated"]["exitCode"], 143, "{failed}");
    assert_eq!(status["restartCount"], 0);
    let restarted = eventually("always running again", || async {
        get(&core, "pods", "default", "always").await.filter(|p| {
            let status = &p["status"]["containerStatuses"][0];
            status["restartCount"] == 1 && status["state"]["running"].is_object()
        })
    })
    .await;
    let last = &restarted["status"]["containerStatuses"][0]["lastState"]["terminated"];
    assert_eq!(last["exitCode"], 143, "{restarted}");
    let once = &failed["status"]["containerStatuses"][0];
    assert!(once["lastState"].as_object().is_none_or(|s| s.is_empty()), "one run: {failed}");
    agent.send(StopAgent).await.unwrap();
    let agent = start_agent(&core, config("n7", dir.path()), Arc::new(ProcessRuntime::default()));
    eventually("always running again, at once", || async {
        get(&core, "pods", "default", "always").await.filter(|p| {
            let status = &p["status"]["containerStatuses"][0];
            status["restartCount"] == 2 && status["state"]["running"].is_object()
        })
    })
    .await;
    agent.send(StopAgent).await.unwrap();
}

/// A clean stop of the agent stops containers as the kubelet's graceful node shutdown does:
/// preStop hooks first, then SIGTERM (a sidecar's once the app containers have stopped), and
/// SIGKILL once the pod's grace period, at most the agent's shutdown grace period, is up.
#[actix::test]
async fn a_clean_stop_runs_pre_stop_hooks_within_the_shorter_grace_period() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let config =
        AgentConfig { shutdown_grace_period: Duration::from_secs(5), ..config("n10", dir.path()) };
    let agent = start_agent(&core, config, Arc::new(ProcessRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    let order = dir.path().join("order");
    let order = order.display();
    let sh = |script: String| json!(["sh", "-c", script]);
    let note = |what: &str| json!({"exec": {"command": sh(format!("echo {what} >> {order}"))}});
    let hooked = json!({"metadata": {"name": "hooked"}, "spec": {"nodeName": "n10",
        "initContainers": [{"name": "side", "image": "none", "restartPolicy": "Always",
            "lifecycle": {"preStop": note("side-hook")},
            "command": sh(format!("trap 'echo side-term >> {order}; exit 0' TERM; while true; do sleep 0.05; done"))}],
        "containers": [{"name": "app", "image": "none",
            "lifecycle": {"preStop": note("app-hook")},
            "command": sh(format!("trap 'sleep 0.3; echo app-term >> {order}; exit 0' TERM; while true; do sleep 0.05; done"))}]}});
    // Hooks that outlast their time: the pod's grace period (1 s) in one, the agent's (5 s)
    // in the other; their containers ignore SIGTERM.
    let late = |grace: u64, wait: u64| {
        let hook = sh(format!("sleep {wait}; echo late-{grace} >> {order}"));
        json!({"metadata": {"name": format!("late-{grace}")}, "spec": {"nodeName": "n10",
            "terminationGracePeriodSeconds": grace,
            "containers": [{"name": "c", "image": "none",
                "lifecycle": {"preStop": {"exec": {"command": hook}}},
                "command": sh("trap '' TERM; while true; do sleep 0.05; done".into())}]}})
    };
    for pod in [hooked, late(1, 2), late(60, 8)] {
        ApiClient::create(&core, pods, "default", pod).await.unwrap();
    }
    for name in ["hooked", "late-1", "late-60"] {
        eventually(&format!("{name} running"), || async {
            get(&core, "pods", "default", name).await.filter(|p| {
                let ready = |s: &Value| s["ready"] == true;
                let mut all = p["status"]["containerStatuses"].as_array().into_iter().flatten();
                p["status"]["phase"] == "Running" && all.clone().count() == 1 && all.all(ready)
            })
        })
        .await;
    }
    agent.send(StopAgent).await.unwrap();
    let noted = std::fs::read_to_string(dir.path().join("order")).unwrap();
    let lines: Vec<&str> = noted.lines().collect();
    let at = |what: &str| {
        lines.iter().position(|l| *l == what).unwrap_or_else(|| panic!("{what}: {noted}"))
    };
    assert!(at("app-hook") < at("app-term"), "{noted}");
    assert!(at("app-term") < at("side-term"), "{noted}");
    assert!(at("side-hook") < at("side-term"), "{noted}");
    assert!(!noted.contains("late-"), "hooks cut off at their grace period: {noted}");
    let hooked = get(&core, "pods", "default", "hooked").await.unwrap();
    let app = &hooked["status"]["containerStatuses"][0]["state"]["terminated"];
    assert_eq!(app["exitCode"], 0, "{hooked}");
    for name in ["late-1", "late-60"] {
        let pod = get(&core, "pods", "default", name).await.unwrap();
        let ended = &pod["status"]["containerStatuses"][0]["state"]["terminated"];
        assert_eq!(ended["exitCode"], 137, "{pod}");
    }
    let killing = event_about(&core, "hooked", "Killing").await;
    assert!(killing["message"].as_str().unwrap().starts_with("Stopping container "), "{killing}");
}

/// A pod whose app container outlasts the grace period: its sidecar, whose SIGTERM waited for
/// the app, still gets one (and two seconds) before SIGKILL, as the kubelet gives every
/// container.
#[actix::test]
async fn a_sidecar_waiting_for_its_turn_gets_sigterm_when_the_grace_period_runs_out() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&core, config("n8", dir.path()), Arc::new(ProcessRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    let told = dir.path().join("sidecar-told");
    let told_path = told.display();
    let sh = |script: String| json!(["sh", "-c", script]);
    let stubborn = json!({"metadata": {"name": "stubborn"}, "spec": {"nodeName": "n8",
        "terminationGracePeriodSeconds": 1,
        "initContainers": [{"name": "side", "image": "none", "restartPolicy": "Always",
            "command": sh(format!("trap 'touch {told_path}; exit 0' TERM; while true; do sleep 0.05; done"))}],
        "containers": [{"name": "app", "image": "none",
            "command": sh("trap '' TERM; while true; do sleep 0.05; done".into())}]}});
    ApiClient::create(&core, pods, "default", stubborn).await.unwrap();
    eventually("both running", || async {
        get(&core, "pods", "default", "stubborn").await.filter(|p| {
            p["status"]["containerStatuses"][0]["state"]["running"].is_object()
                && p["status"]["initContainerStatuses"][0]["state"]["running"].is_object()
        })
    })
    .await;
    ApiClient::delete(&core, pods, "default", "stubborn", &DeleteOptions::default()).await.unwrap();
    eventually("the pod gone", || async {
        get(&core, "pods", "default", "stubborn").await.is_none().then_some(())
    })
    .await;
    assert!(told.exists(), "the sidecar got its SIGTERM");
    agent.send(StopAgent).await.unwrap();
}

/// While a pod is being deleted its readiness is still probed (liveness no more), as the
/// kubelet's prober does, and its status follows: endpoints see a terminating pod stop serving.
#[actix::test]
async fn a_probe_under_way_holds_up_neither_the_pod_nor_its_other_containers() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&core, config("n-pr", dir.path()), Arc::new(ProcessRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    // `a`'s readiness probe runs for two minutes; `b` exits meanwhile, and the pod is deleted.
    let slow = json!({"exec": {"command": ["sleep", "120"]}, "timeoutSeconds": 150,
        "periodSeconds": 1});
    let mut pod = pod(
        "slow-probe",
        "n-pr",
        json!({"name": "a", "image": "none",
        "command": ["sleep", "1000"], "readinessProbe": slow}),
    );
    pod["spec"]["containers"].as_array_mut().unwrap().push(json!({"name": "b", "image": "none",
        "command": ["sh", "-c", "sleep 1; exit 3"]}));
    pod["spec"]["restartPolicy"] = json!("Never");
    ApiClient::create(&core, pods, "default", pod).await.unwrap();
    let ended = eventually("b's exit seen while a's probe runs", || async {
        let pod = get(&core, "pods", "default", "slow-probe").await?;
        let b = &pod["status"]["containerStatuses"][1];
        (b["state"]["terminated"]["exitCode"] == 3).then_some(pod)
    })
    .await;
    assert_eq!(ended["status"]["containerStatuses"][0]["ready"], false, "not yet probed ready");
    ApiClient::delete(&core, pods, "default", "slow-probe", &DeleteOptions::default())
        .await
        .unwrap();
    eventually("slow-probe gone", || async {
        get(&core, "pods", "default", "slow-probe").await.is_none().then_some(())
    })
    .await;
    agent.send(StopAgent).await.unwrap();
}

#[actix::test]
async fn readiness_is_probed_while_a_pod_terminates_and_liveness_is_not() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&core, config("n9", dir.path()), Arc::new(ProcessRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    let files = tempfile::tempdir().unwrap();
    let (ready_file, alive_file) = (files.path().join("ready"), files.path().join("alive"));
    std::fs::write(&ready_file, "").unwrap();
    std::fs::write(&alive_file, "").unwrap();
    let test = |file: &std::path::Path| {
        json!({"exec": {"command": ["test", "-e", file.to_str().unwrap()]},
            "periodSeconds": 1, "failureThreshold": 1})
    };
    let container = json!({"name": "c", "image": "none",
        "command": ["sh", "-c", "trap '' TERM; while true; do sleep 0.05; done"],
        "readinessProbe": test(&ready_file), "livenessProbe": test(&alive_file)});
    let mut stubborn = pod("draining", "n9", container);
    stubborn["spec"]["terminationGracePeriodSeconds"] = json!(60);
    ApiClient::create(&core, pods, "default", stubborn).await.unwrap();
    eventually("draining ready", || async {
        (condition_of(&core, "draining", "Ready").await["status"] == "True").then_some(())
    })
    .await;
    ApiClient::delete(&core, pods, "default", "draining", &DeleteOptions::default()).await.unwrap();
    // Neither file is there any more: the readiness probe fails, the liveness probe is not run.
    std::fs::remove_file(&alive_file).unwrap();
    std::fs::remove_file(&ready_file).unwrap();
    let terminating = eventually("draining not ready while it terminates", || async {
        let pod = get(&core, "pods", "default", "draining").await?;
        let conditions = pod["status"]["conditions"].as_array()?;
        let ready = conditions.iter().find(|c| c["type"] == "Ready")?;
        (ready["status"] == "False").then_some(pod)
    })
    .await;
    assert!(terminating["metadata"]["deletionTimestamp"].is_string(), "{terminating}");
    let status = &terminating["status"]["containerStatuses"][0];
    assert!(status["state"]["running"].is_object(), "{terminating}");
    assert_eq!((&status["ready"], &status["restartCount"]), (&json!(false), &json!(0)));
    let pid = pid_of(&terminating);
    let forced = DeleteOptions { grace_period_seconds: Some(0), ..DeleteOptions::default() };
    ApiClient::delete(&core, pods, "default", "draining", &forced).await.unwrap();
    eventually("draining gone", || async {
        get(&core, "pods", "default", "draining").await.is_none().then_some(())
    })
    .await;
    // And its process, which ignores SIGTERM, killed (not left behind by the test).
    eventually("the container killed", || async {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        (stat.is_empty() || stat.contains(") Z ")).then_some(())
    })
    .await;
    // No liveness failure was acted on (nor reported) once the deletion had begun.
    let events = find("", "v1", "events").unwrap();
    let about = ListOptions {
        field_selector: Some("involvedObject.name=draining".into()),
        ..ListOptions::default()
    };
    let recorded = ApiClient::list(&core, events, Some("default"), &about).await.unwrap().items;
    let liveness =
        recorded.iter().filter_map(|e| e["message"].as_str()).find(|m| m.contains("Liveness"));
    assert_eq!(liveness, None, "{recorded:?}");
    agent.send(StopAgent).await.unwrap();
}

/// What the admitted pods take of the node is given back when one finishes or goes: a node
/// with room for two pods refuses a third until then.
#[actix::test]
async fn room_is_given_back_when_an_admitted_pod_finishes_or_goes() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = config("two", dir.path());
    config.max_pods = 2;
    let _agent = start_agent(&core, config, Arc::new(ProcessRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    let command = |argv: Value| json!({"name": "c", "image": "none", "command": argv});
    let phase = |name: &'static str, wanted: &'static str| {
        let core = core.clone();
        async move {
            eventually(&format!("{name} {wanted}"), || async {
                get(&core, "pods", "default", name).await.filter(|p| p["status"]["phase"] == wanted)
            })
            .await
        }
    };
    let create = |name: &str, argv: Value| {
        let (core, mut pod) = (core.clone(), pod(name, "two", command(argv)));
        pod["spec"]["restartPolicy"] = json!("Never");
        async move { ApiClient::create(&core, pods, "default", pod).await.unwrap() }
    };
    create("first", json!(["sleep", "1000"])).await;
    phase("first", "Running").await;
    create("second", json!(["sleep", "1000"])).await;
    phase("second", "Running").await;
    create("third", json!(["sleep", "1000"])).await;
    assert_eq!(phase("third", "Failed").await["status"]["reason"], "OutOfpods");
    // The first goes: its room is the fourth's.
    let now = DeleteOptions { grace_period_seconds: Some(0), ..Default::default() };
    ApiClient::delete(&core, pods, "default", "first", &now).await.unwrap();
    eventually("first gone", || async {
        get(&core, "pods", "default", "first").await.is_none().then_some(())
    })
    .await;
    create("fourth", json!(["sh", "-c", "sleep 1"])).await;
    // The fourth runs and finishes: its room, while it stays, is the fifth's.
    phase("fourth", "Succeeded").await;
    create("fifth", json!(["sleep", "1000"])).await;
    phase("fifth", "Running").await;
    create("sixth", json!(["sleep", "1000"])).await;
    assert_eq!(phase("sixth", "Failed").await["status"]["reason"], "OutOfpods");
}

/// A pod bound to the node by its creator that does not fit beside what the node runs, or sets
/// a sysctl the node does not allow, is rejected as the kubelet rejects it: Failed, its reason
/// and message in the status and a Warning event, and none of its containers run; the pods
/// that fit run.
#[actix::test]
async fn a_pod_that_does_not_fit_the_node_is_rejected_at_admission() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let agent = start_agent(&core, config("n10", dir.path()), Arc::new(ProcessRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    let sleeper = |cpu: &str| {
        json!({"name": "c", "image": "none", "command": ["sleep", "1000"],
            "resources": {"requests": {"cpu": cpu}}})
    };
    ApiClient::create(&core, pods, "default", pod("greedy", "n10", sleeper("100000")))
        .await
        .unwrap();
    let mut picky = pod("picky", "n10", sleeper("1m"));
    picky["spec"]["nodeSelector"] = json!({"disk": "ssd"});
    ApiClient::create(&core, pods, "default", picky).await.unwrap();
    ApiClient::create(&core, pods, "default", pod("modest", "n10", sleeper("1m"))).await.unwrap();
    // An unsafe sysctl the node does not allow: refused before its resources are looked at.
    let mut tuned = pod("tuned", "n10", sleeper("100000"));
    tuned["spec"]["securityContext"] = json!({"sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"},
            {"name": "net.core.somaxconn", "value": "1024"}]});
    ApiClient::create(&core, pods, "default", tuned).await.unwrap();
    let rejected = eventually("greedy rejected", || async {
        get(&core, "pods", "default", "greedy").await.filter(|p| p["status"]["phase"] == "Failed")
    })
    .await;
    assert_eq!(rejected["status"]["reason"], "OutOfcpu", "{rejected}");
    let message = rejected["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 100000000, used: "
        ),
        "{message}"
    );
    assert!(rejected["status"]["containerStatuses"].is_null(), "{rejected}");
    assert!(rejected["status"]["startTime"].is_string(), "{rejected}");
    let event = event_about(&core, "greedy", "OutOfcpu").await;
    assert_eq!(event["type"], "Warning");
    assert_eq!(format!("Pod was rejected: {}", event["message"].as_str().unwrap()), message);
    let picky = eventually("picky rejected", || async {
        get(&core, "pods", "default", "picky").await.filter(|p| p["status"]["phase"] == "Failed")
    })
    .await;
    assert_eq!(
        (&picky["status"]["reason"], &picky["status"]["message"]),
        (
            &json!("NodeAffinity"),
            &json!(
                "Pod was rejected: Predicate NodeAffinity failed: node(s) didn't match Pod's node \
                 affinity/selector"
            )
        )
    );
    let tuned = eventually("tuned rejected", || async {
        get(&core, "pods", "default", "tuned").await.filter(|p| p["status"]["phase"] == "Failed")
    })
    .await;
    assert_eq!(
        (&tuned["status"]["reason"], &tuned["status"]["message"]),
        (
            &json!("SysctlForbidden"),
            &json!("Pod was rejected: forbidden sysctl: \"net.core.somaxconn\" not allowlisted")
        )
    );
    eventually("modest running", || async {
        get(&core, "pods", "default", "modest").await.filter(|p| p["status"]["phase"] == "Running")
    })
    .await;
    // A rejected pod stays as it was left, and goes at once when deleted.
    let greedy = get(&core, "pods", "default", "greedy").await.unwrap();
    assert_eq!(greedy["status"]["phase"], "Failed");
    ApiClient::delete(&core, pods, "default", "greedy", &DeleteOptions::default()).await.unwrap();
    assert!(get(&core, "pods", "default", "greedy").await.is_none());
    agent.send(StopAgent).await.unwrap();
}

/// A container backing off is held back for its image, not for the next one: mending a bad
/// image name (`kubectl set image`) starts the new one at once, as the kubelet keys its
/// back-off by the container's definition.
#[actix::test]
async fn a_new_image_starts_at_once_whatever_the_back_off() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    // A back-off no test waits out.
    let mut config =
        AgentConfig { restart_backoff: Duration::from_secs(300), ..config("n9", dir.path()) };
    config.images.insert("sleeper".into(), vec!["sleep".into(), "1000".into()]);
    let agent = start_agent(&core, config, Arc::new(ProcessRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    let typo = pod("typo", "n9", json!({"name": "c", "image": "sleepr"}));
    ApiClient::create(&core, pods, "default", typo).await.unwrap();
    eventually("typo backing off", || async {
        let pod = get(&core, "pods", "default", "typo").await?;
        let reason = &pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"];
        (reason == "ImagePullBackOff").then_some(())
    })
    .await;
    let mended = json!({"spec": {"containers": [{"name": "c", "image": "sleeper"}]}});
    let patch = PatchType::StrategicMerge;
    ApiClient::patch(&core, pods, "default", "typo", patch, &mended, false).await.unwrap();
    eventually("the mended image running", || async {
        let pod = get(&core, "pods", "default", "typo").await?;
        pod["status"]["containerStatuses"][0]["state"]["running"].is_object().then_some(())
    })
    .await;
    agent.send(StopAgent).await.unwrap();
}

/// A container whose environment cannot be made (a missing ConfigMap) is tried again at the
/// first back-off's pace, each try an event (counted), and runs soon after the ConfigMap comes.
#[actix::test]
async fn a_missing_config_map_is_looked_for_again_at_a_steady_pace() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let config =
        AgentConfig { restart_backoff: Duration::from_millis(300), ..config("n10", dir.path()) };
    let agent = start_agent(&core, config, Arc::new(ProcessRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    let configured = pod(
        "configured",
        "n10",
        json!({"name": "c", "image": "none", "command": ["sleep", "1000"],
        "imagePullPolicy": "IfNotPresent",
        "env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "late", "key": "a"}}}]}),
    );
    ApiClient::create(&core, pods, "default", configured).await.unwrap();
    // Ten tries (two events each, within the spam filter's burst of 25): three seconds at a
    // steady 300 ms, five minutes of a doubling back-off.
    eventually("ten tries counted", || async {
        let failed = event_about(&core, "configured", "Failed").await;
        assert_eq!(failed["message"], "Error: configmap \"late\" not found");
        (failed["count"].as_u64() >= Some(10)).then_some(())
    })
    .await;
    let configmaps = find("", "v1", "configmaps").unwrap();
    let late = json!({"metadata": {"name": "late"}, "data": {"a": "1"}});
    ApiClient::create(&core, configmaps, "default", late).await.unwrap();
    eventually("running once its ConfigMap is there", || async {
        let pod = get(&core, "pods", "default", "configured").await?;
        pod["status"]["containerStatuses"][0]["state"]["running"].is_object().then_some(())
    })
    .await;
    agent.send(StopAgent).await.unwrap();
}

/// A pod that has ended gives its address back (its status keeps it), as the kubelet tears
/// its sandbox down: more pods than the node's range holds (253), run in turn, all get one.
#[actix::test]
async fn pods_that_have_ended_give_their_addresses_back() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    let _agent =
        start_agent(&core, config("n-ips", dir.path()), Arc::new(ProcessRuntime::default()));
    let pods = find("", "v1", "pods").unwrap();
    let options = ListOptions::default();
    let (batch, batches) = (100, 3);
    for round in 0..batches {
        for i in 0..batch {
            let name = format!("done-{round}-{i}");
            let command = json!({"name": "c", "image": "none", "command": ["true"]});
            let mut done = pod(&name, "n-ips", command);
            done["spec"]["restartPolicy"] = json!("Never");
            ApiClient::create(&core, pods, "default", done).await.unwrap();
        }
        eventually("the batch Succeeded", || async {
            let list = ApiClient::list(&core, pods, Some("default"), &options).await.ok()?;
            let succeeded = list.items.iter().filter(|p| p["status"]["phase"] == "Succeeded");
            (succeeded.count() == batch * (round + 1)).then_some(())
        })
        .await;
    }
    let ended = ApiClient::list(&core, pods, Some("default"), &options).await.unwrap().items;
    for pod in &ended {
        let ip = pod["status"]["podIP"].as_str().unwrap_or("");
        assert!(ip.starts_with("127."), "every pod had an address: {}", pod["status"]);
    }
}
