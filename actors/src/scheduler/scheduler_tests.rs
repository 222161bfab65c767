//! The scheduler end to end, in-process: a real API core, simulated node agents, real binds.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use actix::Actor;
use serde_json::{json, Value};

use futures::FutureExt;

use super::{GetStats, Scheduler, SchedulerConfig};
use crate::agent::runtime::SimulatedRuntime;
use crate::agent::{AgentConfig, NodeAgent};
use crate::client::ApiClient;
use crate::core::{ApiCore, DeleteOptions, ListOptions, PatchType};
use crate::model::resources::find;
use crate::testing::{core_with_node_controllers as core, eventually, Call, Hooked};

fn sim_node(core: &ApiCore, name: &str, cpu: &str, dir: &std::path::Path) {
    zoned_sim_node(core, name, cpu, dir, None);
}

/// A simulated node, in `zone` when given.
fn zoned_sim_node(
    core: &ApiCore,
    name: &str,
    cpu: &str,
    dir: &std::path::Path,
    zone: Option<&str>,
) {
    let mut config = AgentConfig::new(name, dir.join(name));
    config.capacity_overrides.insert("cpu".into(), cpu.into());
    config.capacity_overrides.insert("memory".into(), "64Gi".into());
    if let Some(zone) = zone {
        config.labels.insert("topology.kubernetes.io/zone".into(), zone.into());
    }
    NodeAgent::new(config, Arc::new(core.clone()), Arc::new(SimulatedRuntime::default())).start();
}

async fn ready_nodes(core: &ApiCore) -> usize {
    let nodes = find("", "v1", "nodes").unwrap();
    let list = ApiClient::list(core, nodes, None, &ListOptions::default()).await.unwrap();
    list.items
        .iter()
        .filter(|n| {
            n["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
        })
        .count()
}

fn pod(name: &str, cpu: &str, extra: Value) -> Value {
    let mut pod = json!({"metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": cpu}}}]}});
    if let (Some(spec), Some(extra)) = (pod["spec"].as_object_mut(), extra.as_object()) {
        spec.extend(extra.clone());
    }
    pod
}

async fn create(core: &ApiCore, pod: Value) {
    let pods = find("", "v1", "pods").unwrap();
    ApiClient::create(core, pods, "default", pod).await.unwrap();
}

async fn get(core: &ApiCore, name: &str) -> Value {
    let pods = find("", "v1", "pods").unwrap();
    ApiClient::get(core, pods, "default", name).await.unwrap()
}

async fn node_of(core: &ApiCore, name: &str) -> Option<String> {
    get(core, name).await["spec"]["nodeName"].as_str().map(String::from)
}

fn start_scheduler(core: &ApiCore) {
    Scheduler::new(Arc::new(core.clone()), SchedulerConfig::default()).start();
}

#[actix::test]
async fn nothing_is_scheduled_before_the_nodes_are_listed() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    sim_node(&core, "only", "1", dir.path());
    eventually("the node", || async { (ready_nodes(&core).await == 1).then_some(()) }).await;
    create(&core, pod("early", "100m", json!({}))).await;
    // The scheduler's node list is held back until the test opens the gate.
    let (open, gate) = tokio::sync::watch::channel(false);
    let client = Hooked::new(&core, move |_, call| {
        let mut gate = gate.clone();
        async move {
            if matches!(call, Call::List { resource } if resource.plural == "nodes") {
                let _ = gate.wait_for(|open| *open).await;
            }
        }
        .boxed()
    });
    let scheduler = Scheduler::new(Arc::new(client), SchedulerConfig::default()).start();
    let stats = || async { scheduler.send(GetStats).await.unwrap() };
    eventually("the pod queued", || async { (stats().await.pending == 1).then_some(()) }).await;
    open.send(true).unwrap();
    assert_eq!(eventually("early bound", || node_of(&core, "early")).await, "only");
    assert_eq!(stats().await.unschedulable, 0, "no attempt before the nodes were known");
}

#[actix::test]
async fn pods_land_where_they_fit_and_wait_for_a_bigger_node() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    sim_node(&core, "small-0", "1", dir.path());
    sim_node(&core, "small-1", "1", dir.path());
    eventually("two nodes", || async { (ready_nodes(&core).await == 2).then_some(()) }).await;
    start_scheduler(&core);
    create(&core, pod("a", "600m", json!({}))).await;
    create(&core, pod("b", "600m", json!({}))).await;
    let a = eventually("a bound", || node_of(&core, "a")).await;
    let b = eventually("b bound", || node_of(&core, "b")).await;
    assert_ne!(a, b, "600m and 600m do not fit one 1-cpu node");
    eventually("a Running on its simulated node", || async {
        (get(&core, "a").await["status"]["phase"] == "Running").then_some(())
    })
    .await;

    create(&core, pod("big", "600m", json!({}))).await;
    let message = eventually("big reported unschedulable", || async {
        let pod = get(&core, "big").await;
        let condition = pod["status"]["conditions"]
            .as_array()?
            .iter()
            .find(|c| c["type"] == "PodScheduled")?
            .clone();
        (condition["status"] == "False")
            .then(|| condition["message"].as_str().unwrap_or("").to_string())
    })
    .await;
    assert_eq!(message, "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod..");
    let events = find("", "v1", "events").unwrap();
    let options = ListOptions {
        field_selector: Some("reason=FailedScheduling".into()),
        ..Default::default()
    };
    // The FailedScheduling event is written after the condition.
    let failed = eventually("a FailedScheduling event", || async {
        let failed = ApiClient::list(&core, events, Some("default"), &options).await.ok()?;
        failed.items.first().cloned()
    })
    .await;
    assert_eq!(failed["involvedObject"]["name"], "big");
    assert!(node_of(&core, "big").await.is_none());
    // Still unschedulable, for another reason: the condition's status has not changed, nor
    // has its lastTransitionTime.
    let condition = || async {
        let pod = get(&core, "big").await;
        let conditions = pod["status"]["conditions"].as_array().cloned().unwrap_or_default();
        conditions.into_iter().find(|c| c["type"] == "PodScheduled").unwrap_or_default()
    };
    let since = condition().await["lastTransitionTime"].clone();
    let at: chrono::DateTime<chrono::Utc> = since.as_str().unwrap().parse().unwrap();
    // (Past that second, so that a new transition time would differ.)
    eventually("a second later", || async {
        (chrono::Utc::now() - at >= chrono::Duration::seconds(1)).then_some(())
    })
    .await;
    sim_node(&core, "tiny", "500m", dir.path());
    let later = eventually("big unschedulable on three nodes", || async {
        let now = condition().await;
        now["message"].as_str()?.starts_with("0/3 nodes").then_some(now)
    })
    .await;
    assert_eq!(later["lastTransitionTime"], since);
    // An attempt that finds the same reason (a node relabelled) is reported again, counted into
    // the event's series, as kube-scheduler records every attempt.
    let v1_events = find("events.k8s.io", "v1", "events").unwrap();
    let attempts = || async {
        let all = ListOptions::default();
        let listed = ApiClient::list(&core, v1_events, Some("default"), &all).await;
        let listed = listed.unwrap().items;
        let failed = listed.iter().find(|e| e["reason"] == "FailedScheduling").cloned();
        failed.map_or(0, |e| e["series"]["count"].as_i64().unwrap_or(1))
    };
    let before = attempts().await;
    let nodes = find("", "v1", "nodes").unwrap();
    let label = json!({"metadata": {"labels": {"example.com/touched": "yes"}}});
    ApiClient::patch(&core, nodes, "", "tiny", PatchType::Merge, &label, false).await.unwrap();
    eventually("the attempt counted", || async { (attempts().await > before).then_some(()) }).await;
    assert_eq!(condition().await["lastTransitionTime"], since);

    sim_node(&core, "large", "4", dir.path());
    assert_eq!(eventually("big placed on the new node", || node_of(&core, "big")).await, "large");
    // Each bind is followed by its Scheduled event, written after it.
    let options =
        ListOptions { field_selector: Some("reason=Scheduled".into()), ..Default::default() };
    eventually("a Scheduled event for each of the three pods", || async {
        let scheduled = ApiClient::list(&core, events, Some("default"), &options).await.ok()?;
        (scheduled.items.len() == 3).then_some(())
    })
    .await;
}

#[actix::test]
async fn replicas_spread_and_taints_keep_pods_away() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    for i in 0..3 {
        sim_node(&core, &format!("n{i}"), "8", dir.path());
    }
    eventually("three nodes", || async { (ready_nodes(&core).await == 3).then_some(()) }).await;
    let nodes = find("", "v1", "nodes").unwrap();
    let taint =
        json!({"spec": {"taints": [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}});
    ApiClient::patch(&core, nodes, "", "n0", PatchType::Merge, &taint, false).await.unwrap();
    let rcs = find("", "v1", "replicationcontrollers").unwrap();
    let rc = json!({"metadata": {"name": "web"}, "spec": {"replicas": 6, "selector": {"app": "web"},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    ApiClient::create(&core, rcs, "default", rc).await.unwrap();
    start_scheduler(&core);
    for i in 0..6 {
        create(&core, pod(&format!("web-{i}"), "100m", json!({}))).await;
    }
    let mut per_node: HashMap<String, usize> = HashMap::new();
    for i in 0..6 {
        let name = format!("web-{i}");
        let node = eventually("web bound", || node_of(&core, &name)).await;
        *per_node.entry(node).or_default() += 1;
    }
    assert_eq!(per_node.get("n0"), None, "the taint keeps untolerating pods away: {per_node:?}");
    assert_eq!((per_node.get("n1"), per_node.get("n2")), (Some(&3), Some(&3)), "{per_node:?}");

    let tolerating = json!({"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}],
        "nodeSelector": {"kubernetes.io/hostname": "n0"}});
    create(&core, pod("db", "100m", tolerating)).await;
    assert_eq!(eventually("db bound", || node_of(&core, "db")).await, "n0");
}

#[actix::test]
async fn a_thousand_pods_at_once_never_overcommit_a_node() {
    let (core, _dir) = nodes_scheduled(3, "10").await;
    let creates = (0..1000).map(|i| create(&core, pod(&format!("p{i}"), "100m", json!({}))));
    futures::future::join_all(creates).await;
    let pods = find("", "v1", "pods").unwrap();
    let options =
        ListOptions { field_selector: Some("spec.nodeName!=".into()), ..Default::default() };
    let bound = eventually("300 pods bound", || async {
        let list = ApiClient::list(&core, pods, None, &options).await.unwrap();
        (list.items.len() >= 300).then_some(list.items)
    })
    .await;
    let mut per_node: HashMap<String, usize> = HashMap::new();
    for pod in &bound {
        *per_node.entry(pod["spec"]["nodeName"].as_str().unwrap().to_string()).or_default() += 1;
    }
    assert!(
        per_node.values().all(|n| *n == 100),
        "10 cpu / 100m = 100 pods per node: {per_node:?}"
    );
    // The rest stay pending: nothing is ever bound beyond capacity.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let list = ApiClient::list(&core, pods, None, &options).await.unwrap();
    assert_eq!(list.items.len(), 300);
}

#[actix::test]
async fn a_pod_waits_for_its_claims_to_exist_and_be_bound() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    sim_node(&core, "n1", "4", dir.path());
    eventually("the node", || async { (ready_nodes(&core).await == 1).then_some(()) }).await;
    let volumes = json!({"volumes": [{"name": "data",
        "persistentVolumeClaim": {"claimName": "data"}}]});
    create(&core, pod("user", "100m", volumes)).await;
    start_scheduler(&core);
    let message = |pod: Value| {
        let conditions = pod["status"]["conditions"].as_array().cloned().unwrap_or_default();
        let scheduled = conditions.into_iter().find(|c| c["type"] == "PodScheduled");
        scheduled.and_then(|c| c["message"].as_str().map(String::from))
    };
    let waiting = |expected: &'static str| {
        let core = core.clone();
        async move {
            eventually(expected, || async {
                message(get(&core, "user").await).filter(|m| m.contains(expected))
            })
            .await
        }
    };
    let missing = waiting("persistentvolumeclaim \"data\" not found").await;
    assert_eq!(
        missing,
        "0/1 nodes are available: persistentvolumeclaim \"data\" not found. preemption: 0/1 nodes \
         are available: 1 Preemption is not helpful for scheduling.."
    );
    let claims = find("", "v1", "persistentvolumeclaims").unwrap();
    let claim = json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}}}});
    let mut claim = ApiClient::create(&core, claims, "default", claim).await.unwrap();
    waiting("pod has unbound immediate PersistentVolumeClaims").await;
    assert_eq!(node_of(&core, "user").await, None);
    // Bound as the persistent volume controller binds it.
    claim["spec"]["volumeName"] = json!("vol");
    claim["metadata"]["annotations"] = json!({"pv.kubernetes.io/bind-completed": "yes"});
    ApiClient::update(&core, claims, "default", claim).await.unwrap();
    let node = eventually("the pod bound", || async { node_of(&core, "user").await }).await;
    assert_eq!(node, "n1");
}

/// `count` simulated nodes of `cpu` cpus, `n0`, `n1`, ..., Ready, and a scheduler (the
/// nodes' directory goes with the second value).
async fn nodes_scheduled(count: usize, cpu: &str) -> (ApiCore, tempfile::TempDir) {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    for i in 0..count {
        sim_node(&core, &format!("n{i}"), cpu, dir.path());
    }
    let ready = || async { (ready_nodes(&core).await == count).then_some(()) };
    eventually(&format!("{count} nodes"), ready).await;
    start_scheduler(&core);
    (core, dir)
}

/// A pod spec with one required `kind` term (`podAffinity`, `podAntiAffinity`) selecting
/// `app`'s pods on the same node.
fn required(kind: &str, app: &str) -> Value {
    json!({"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": app}},
        "topologyKey": "kubernetes.io/hostname"}]}}})
}

/// The message of a pod's `PodScheduled` condition, once it has one.
async fn scheduled_message(core: &ApiCore, name: &str) -> Option<String> {
    let pod = get(core, name).await;
    let conditions = pod["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let scheduled = conditions.into_iter().find(|c| c["type"] == "PodScheduled")?;
    scheduled["message"].as_str().map(String::from)
}

/// A pod whose required node affinity names its nodes (`matchFields` `metadata.name`, as a
/// DaemonSet's pods do) is tried on those alone, the others left out in kube-scheduler's words;
/// names with none in common conflict before any node is tried.
#[actix::test]
async fn a_pod_that_names_its_node_is_tried_there_alone() {
    let (core, _dir) = nodes_scheduled(2, "1").await;
    let naming = |names: &[&str]| {
        let fields: Vec<Value> = names
            .iter()
            .map(|n| json!({"key": "metadata.name", "operator": "In", "values": [n]}))
            .collect();
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
            {"nodeSelectorTerms": [{"matchFields": fields}]}}}})
    };
    create(&core, pod("pinned", "2", naming(&["n0"]))).await;
    let message = eventually("pinned unschedulable", || scheduled_message(&core, "pinned")).await;
    assert_eq!(
        message,
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't satisfy plugin(s) \
         [NodeAffinity]. preemption: 0/2 nodes are available: 1 No preemption victims found for \
         incoming pod, 1 Preemption is not helpful for scheduling.."
    );
    create(&core, pod("torn", "100m", naming(&["n0", "n1"]))).await;
    let message = eventually("torn unschedulable", || scheduled_message(&core, "torn")).await;
    assert_eq!(
        message,
        "0/2 nodes are available: pod affinity terms conflict. preemption: 0/2 nodes are \
         available: 2 Preemption is not helpful for scheduling.."
    );
    create(&core, pod("placed", "100m", naming(&["n1"]))).await;
    assert_eq!(eventually("placed bound", || node_of(&core, "placed")).await, "n1");
    // An empty term names no nodes (no conflict): it matches none, node by node.
    let empty = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
        {"nodeSelectorTerms": [{}]}}}});
    create(&core, pod("emptied", "100m", empty)).await;
    let message = eventually("emptied unschedulable", || scheduled_message(&core, "emptied")).await;
    assert_eq!(
        message,
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector. \
         preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.."
    );
}

/// A node deleted and made again (its agent registering anew) still has the pods bound to it,
/// as kube-scheduler's cache keeps a deleted node's pods until they go: no double booking.
#[actix::test]
async fn a_node_made_again_keeps_the_pods_bound_to_it() {
    let (core, _dir) = nodes_scheduled(1, "2").await;
    create(&core, pod("first", "2", json!({}))).await;
    assert_eq!(eventually("first bound", || node_of(&core, "first")).await, "n0");
    let nodes = find("", "v1", "nodes").unwrap();
    let mut node = ApiClient::get(&core, nodes, "", "n0").await.unwrap();
    ApiClient::delete(&core, nodes, "", "n0", &DeleteOptions::default()).await.unwrap();
    let meta = node["metadata"].as_object_mut().unwrap();
    meta.retain(|k, _| k == "name" || k == "labels");
    ApiClient::create(&core, nodes, "", node).await.unwrap();
    // (Tolerating the taints the node lifecycle controller may give a node new to it.)
    let tolerant = json!({"tolerations": [{"operator": "Exists"}]});
    create(&core, pod("second", "2", tolerant)).await;
    let message = eventually("second unschedulable", || scheduled_message(&core, "second")).await;
    assert!(message.starts_with("0/1 nodes are available: 1 Insufficient cpu."), "{message}");
    // Once the first pod goes, the second has its room.
    let pods = find("", "v1", "pods").unwrap();
    let now = DeleteOptions { grace_period_seconds: Some(0), ..Default::default() };
    ApiClient::delete(&core, pods, "default", "first", &now).await.unwrap();
    assert_eq!(eventually("second bound", || node_of(&core, "second")).await, "n0");
}

/// A placed pod whose new labels no longer keep a waiting pod out (its anti-affinity, its
/// spread constraint's count) lets it in at once, as kube-scheduler's queueing hints for an
/// assigned pod's update do, not at the periodic flush of unschedulable pods (5 minutes).
#[actix::test]
async fn a_placed_pod_relabelled_lets_in_the_pods_its_labels_kept_out() {
    let (core, _dir) = nodes_scheduled(2, "8").await;
    let pods = find("", "v1", "pods").unwrap();
    let on_n0 = json!({"nodeSelector": {"kubernetes.io/hostname": "n0"}});
    let labelled = |name: &str, app: &str, extra: Value| {
        let mut pod = pod(name, "100m", extra);
        pod["metadata"]["labels"] = json!({"app": app});
        pod
    };
    let relabel = |name: &'static str, app: &'static str| {
        let core = core.clone();
        async move {
            let patch = json!({"metadata": {"labels": {"app": app}}});
            let merge = PatchType::Merge;
            ApiClient::patch(&core, pods, "default", name, merge, &patch, false).await.unwrap();
        }
    };
    create(&core, labelled("zz", "zz", on_n0.clone())).await;
    eventually("zz bound", || node_of(&core, "zz")).await;
    let mut anti = required("podAntiAffinity", "zz");
    anti["nodeSelector"] = on_n0["nodeSelector"].clone();
    create(&core, labelled("anti", "anti", anti)).await;
    eventually("anti unschedulable", || scheduled_message(&core, "anti")).await;
    relabel("zz", "other").await;
    assert_eq!(eventually("anti bound", || node_of(&core, "anti")).await, "n0");

    for name in ["spz1", "spz2"] {
        create(&core, labelled(name, "spz", on_n0.clone())).await;
        eventually(&format!("{name} bound"), || node_of(&core, name)).await;
    }
    let mut spread = on_n0.clone();
    spread["topologySpreadConstraints"] = json!([{"maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
        "nodeAffinityPolicy": "Ignore", "labelSelector": {"matchLabels": {"app": "spz"}}}]);
    create(&core, labelled("spzwait", "spz", spread)).await;
    eventually("spzwait unschedulable", || scheduled_message(&core, "spzwait")).await;
    relabel("spz1", "moved").await;
    relabel("spz2", "moved").await;
    assert_eq!(eventually("spzwait bound", || node_of(&core, "spzwait")).await, "n0");
}

#[actix::test]
async fn anti_affinity_puts_one_replica_per_node_and_the_next_waits_for_a_free_node() {
    let (core, _dir) = nodes_scheduled(2, "8").await;
    let one_per_node = required("podAntiAffinity", "web");
    create(&core, pod("web-0", "100m", one_per_node.clone())).await;
    let first = eventually("web-0 bound", || node_of(&core, "web-0")).await;
    create(&core, pod("web-1", "100m", one_per_node.clone())).await;
    let second = eventually("web-1 bound", || node_of(&core, "web-1")).await;
    assert_ne!(first, second, "one web pod per node");
    create(&core, pod("web-2", "100m", one_per_node)).await;
    let message = eventually("web-2 unschedulable", || scheduled_message(&core, "web-2")).await;
    assert_eq!(message, "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod..");

    // A pod that an existing pod's anti-affinity selects: the same rule from the other side.
    let guard = required("podAntiAffinity", "db");
    let mut guard = pod("guard", "100m", guard);
    guard["metadata"]["labels"] = json!({"app": "guard"});
    create(&core, guard).await;
    let guarded = eventually("guard bound", || node_of(&core, "guard")).await;
    // Sent to the guard's node, a db pod fits nowhere.
    let mut db = pod("db", "100m", json!({"nodeSelector": {"kubernetes.io/hostname": guarded}}));
    db["metadata"]["labels"] = json!({"app": "db"});
    create(&core, db).await;
    let message = eventually("db unschedulable", || scheduled_message(&core, "db")).await;
    assert_eq!(
        message,
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) \
         didn't satisfy existing pods anti-affinity rules. preemption: 0/2 nodes are available: 1 \
         No preemption victims found for incoming pod, 1 Preemption is not helpful for \
         scheduling.."
    );

    // Deleting a web pod frees its node for the waiting one.
    let pods = find("", "v1", "pods").unwrap();
    let options =
        crate::core::DeleteOptions { grace_period_seconds: Some(0), ..Default::default() };
    ApiClient::delete(&core, pods, "default", "web-0", &options).await.unwrap();
    assert_eq!(eventually("web-2 bound", || node_of(&core, "web-2")).await, first);
}

#[actix::test]
async fn a_spread_constraint_keeps_zones_within_max_skew() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    for (name, zone) in [("a1", "a"), ("a2", "a"), ("b1", "b")] {
        let mut config = AgentConfig::new(name, dir.path().join(name));
        config.capacity_overrides.insert("cpu".into(), "8".into());
        config.labels.insert("topology.kubernetes.io/zone".into(), zone.into());
        NodeAgent::new(config, Arc::new(core.clone()), Arc::new(SimulatedRuntime::default()))
            .start();
    }
    eventually("three nodes", || async { (ready_nodes(&core).await == 3).then_some(()) }).await;
    start_scheduler(&core);
    let spread = json!({"topologySpreadConstraints": [{"maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}}}]});
    let mut zones: HashMap<String, usize> = HashMap::new();
    for i in 0..6 {
        let name = format!("web-{i}");
        create(&core, pod(&name, "100m", spread.clone())).await;
        let node = eventually("bound", || node_of(&core, &name)).await;
        *zones.entry(node[..1].to_string()).or_default() += 1;
        let (a, b) = (zones.get("a").copied().unwrap_or(0), zones.get("b").copied().unwrap_or(0));
        assert!(a.abs_diff(b) <= 1, "zones within a skew of 1 after {name}: {zones:?}");
    }
    assert_eq!((zones["a"], zones["b"]), (3, 3), "two nodes in zone a take as many as one in b");
}

#[actix::test]
async fn a_pod_waiting_for_a_pod_its_affinity_needs_is_placed_once_that_pod_is() {
    let (core, _dir) = nodes_scheduled(2, "8").await;
    let near_cache = required("podAffinity", "cache");
    create(&core, pod("web", "100m", near_cache)).await;
    let message = eventually("web unschedulable", || scheduled_message(&core, "web")).await;
    assert_eq!(message, "0/2 nodes are available: 2 node(s) didn't match pod affinity rules. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling..");
    // The cache, placed by this same scheduler, lets the web pod in beside it.
    let mut cache = pod("cache", "100m", json!({}));
    cache["metadata"]["labels"] = json!({"app": "cache"});
    create(&core, cache).await;
    let cache_node = eventually("cache bound", || node_of(&core, "cache")).await;
    assert_eq!(eventually("web bound", || node_of(&core, "web")).await, cache_node);
}

#[actix::test]
async fn a_gated_pod_waits_until_its_last_gate_is_removed() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    sim_node(&core, "only", "4", dir.path());
    eventually("the node", || async { (ready_nodes(&core).await == 1).then_some(()) }).await;
    let scheduler = Scheduler::new(Arc::new(core.clone()), SchedulerConfig::default()).start();
    let stats = || async { scheduler.send(GetStats).await.unwrap() };
    let gates =
        json!({"schedulingGates": [{"name": "example.com/quota"}, {"name": "example.com/arch"}]});
    create(&core, pod("gated", "100m", gates)).await;
    let scheduled = |pod: &Value| {
        let conditions = pod["status"]["conditions"].as_array().cloned().unwrap_or_default();
        conditions.into_iter().find(|c| c["type"] == "PodScheduled").unwrap_or_default()
    };
    let condition = scheduled(&get(&core, "gated").await);
    assert_eq!(
        (&condition["status"], &condition["reason"]),
        (&json!("False"), &json!("SchedulingGated"))
    );
    assert_eq!(condition["message"], "Scheduling is blocked due to non-empty scheduling gates");
    // A pod created after it is placed while it waits, not even tried.
    create(&core, pod("free", "100m", json!({}))).await;
    eventually("free bound", || node_of(&core, "free")).await;
    assert_eq!(stats().await.pending, 0, "the gated pod is not queued");
    assert_eq!(node_of(&core, "gated").await, None);
    let binding = json!({"metadata": {"name": "gated"}, "target": {"name": "only"}});
    let refused = core.bind("default", "gated", &binding, false).await.unwrap_err();
    assert!(refused.to_string().contains("has non-empty .spec.schedulingGates"), "{refused}");

    let pods = find("", "v1", "pods").unwrap();
    let patch = |gates: Value| {
        let core = core.clone();
        async move {
            let patch = json!({"spec": {"schedulingGates": gates}});
            ApiClient::patch(&core, pods, "default", "gated", PatchType::Merge, &patch, false).await
        }
    };
    let added =
        patch(json!([{"name": "example.com/quota"}, {"name": "example.com/arch"}, {"name": "x"}]));
    assert!(added.await.unwrap_err().to_string().contains("found new scheduling gate 'x'"));
    patch(json!([{"name": "example.com/arch"}])).await.unwrap();
    create(&core, pod("later", "100m", json!({}))).await;
    eventually("later bound", || node_of(&core, "later")).await;
    assert_eq!(node_of(&core, "gated").await, None, "one gate left");
    patch(json!(null)).await.unwrap();
    assert_eq!(eventually("gated bound", || node_of(&core, "gated")).await, "only");
    assert_eq!(scheduled(&get(&core, "gated").await)["status"], "True");
}

#[actix::test]
async fn a_pod_of_higher_priority_preempts_one_of_lower_priority() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    sim_node(&core, "only", "1", dir.path());
    eventually("the node", || async { (ready_nodes(&core).await == 1).then_some(()) }).await;
    let classes = find("scheduling.k8s.io", "v1", "priorityclasses").unwrap();
    for (name, value, policy) in [("high", 1000, "PreemptLowerPriority"), ("polite", 1000, "Never")]
    {
        let class = json!({"metadata": {"name": name}, "value": value, "preemptionPolicy": policy});
        ApiClient::create(&core, classes, "", class).await.unwrap();
    }
    start_scheduler(&core);
    create(&core, pod("low", "800m", json!({}))).await;
    eventually("low bound", || node_of(&core, "low")).await;
    let low_uid = get(&core, "low").await["metadata"]["uid"].clone();

    // A pod that will not preempt waits, and says why.
    create(&core, pod("waits", "800m", json!({"priorityClassName": "polite"}))).await;
    let message = eventually("waits reported unschedulable", || async {
        let pod = get(&core, "waits").await;
        let conditions = pod["status"]["conditions"].as_array()?.clone();
        let scheduled = conditions.into_iter().find(|c| c["type"] == "PodScheduled")?;
        scheduled["message"].as_str().map(String::from)
    })
    .await;
    assert_eq!(
        message,
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to \
         preemptionPolicy=Never.."
    );

    // One that may preempt has the low one deleted, marked and told, and takes its place.
    create(&core, pod("high", "800m", json!({"priorityClassName": "high"}))).await;
    assert_eq!(eventually("high bound", || node_of(&core, "high")).await, "only");
    let high = get(&core, "high").await;
    assert_eq!(high["status"]["nominatedNodeName"], "only", "{high}");
    let pods = find("", "v1", "pods").unwrap();
    let low = ApiClient::get(&core, pods, "default", "low").await;
    assert!(low.is_err() || low.unwrap()["metadata"]["uid"] != low_uid, "low was deleted");
    let events = find("", "v1", "events").unwrap();
    let options = ListOptions {
        field_selector: Some("involvedObject.name=low,reason=Preempted".into()),
        ..Default::default()
    };
    let preempted = eventually("the Preempted event", || async {
        let list = ApiClient::list(&core, events, Some("default"), &options).await.ok()?;
        list.items.into_iter().next()
    })
    .await;
    let high_uid = high["metadata"]["uid"].as_str().unwrap();
    assert_eq!(preempted["message"], format!("Preempted by pod {high_uid} on node only"));
    // Once: the scheduler's own write of the nomination does not retry the pod at once (it
    // preempted again while its victim was still being deleted).
    let list = ApiClient::list(&core, events, Some("default"), &options).await.unwrap();
    assert_eq!(list.items.len(), 1, "{:?}", list.items);
    assert_eq!(node_of(&core, "waits").await, None, "the polite pod still waits");
}

#[actix::test]
async fn a_pod_whose_anti_affinity_only_a_lower_priority_pod_stands_against_preempts_it() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    sim_node(&core, "only", "4", dir.path());
    eventually("the node", || async { (ready_nodes(&core).await == 1).then_some(()) }).await;
    let classes = find("scheduling.k8s.io", "v1", "priorityclasses").unwrap();
    let class = json!({"metadata": {"name": "high"}, "value": 1000});
    ApiClient::create(&core, classes, "", class).await.unwrap();
    start_scheduler(&core);
    let mut db = pod("db", "100m", json!({}));
    db["metadata"]["labels"] = json!({"app": "db"});
    create(&core, db).await;
    eventually("db bound", || node_of(&core, "db")).await;
    let mut apart = required("podAntiAffinity", "db");
    apart["priorityClassName"] = json!("high");
    create(&core, pod("apart", "100m", apart)).await;
    assert_eq!(eventually("apart bound", || node_of(&core, "apart")).await, "only");
    let pods = find("", "v1", "pods").unwrap();
    let gone = ApiClient::get(&core, pods, "default", "db").await;
    assert!(gone.is_err() || gone.unwrap()["metadata"]["deletionTimestamp"].is_string());
}

#[actix::test]
async fn a_pod_goes_where_its_volumes_may_be_used() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    sim_node(&core, "a", "4", dir.path());
    sim_node(&core, "b", "4", dir.path());
    eventually("the nodes", || async { (ready_nodes(&core).await == 2).then_some(()) }).await;
    let volumes = find("", "v1", "persistentvolumes").unwrap();
    let claims = find("", "v1", "persistentvolumeclaims").unwrap();
    for (volume, node) in [("on-a", "a"), ("on-c", "c")] {
        let pinned = json!({"metadata": {"name": volume}, "spec": {"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteMany"], "hostPath": {"path": "/tmp/v"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}});
        ApiClient::create(&core, volumes, "", pinned).await.unwrap();
        // Bound, as the binder leaves a claim.
        let claim = json!({"metadata": {"name": volume,
                "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
            "spec": {"accessModes": ["ReadWriteMany"], "volumeName": volume,
                "resources": {"requests": {"storage": "1Gi"}}}});
        ApiClient::create(&core, claims, "default", claim).await.unwrap();
    }
    start_scheduler(&core);
    let with_claim = |name: &str, claim: &str| {
        let volumes = json!({"volumes": [{"name": "data",
            "persistentVolumeClaim": {"claimName": claim}}]});
        pod(name, "100m", volumes)
    };
    for i in 0..4 {
        create(&core, with_claim(&format!("user-{i}"), "on-a")).await;
    }
    for i in 0..4 {
        let name = format!("user-{i}");
        assert_eq!(eventually("bound", || node_of(&core, &name)).await, "a", "{name}");
    }
    // A volume no node may use: no node will do, nor would preemption help.
    create(&core, with_claim("nowhere", "on-c")).await;
    let message = eventually("nowhere unschedulable", || scheduled_message(&core, "nowhere")).await;
    assert_eq!(
        message,
        "0/2 nodes are available: 2 node(s) had volume node affinity conflict. preemption: 0/2 \
         nodes are available: 2 Preemption is not helpful for scheduling.."
    );
}

#[actix::test]
async fn a_preemptor_goes_to_the_node_it_made_room_on() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    // Two nodes of one zone; `b`, the larger, would score better.
    for (name, cpu) in [("a", "4"), ("b", "8")] {
        zoned_sim_node(&core, name, cpu, dir.path(), Some("z1"));
    }
    eventually("the nodes", || async { (ready_nodes(&core).await == 2).then_some(()) }).await;
    let classes = find("scheduling.k8s.io", "v1", "priorityclasses").unwrap();
    let class = json!({"metadata": {"name": "high"}, "value": 1000});
    ApiClient::create(&core, classes, "", class).await.unwrap();
    // `low` fills `a`; `high` may share a zone with no `low`: only preempting it helps, on `a`.
    let mut low = pod("low", "4", json!({"nodeName": "a"}));
    low["metadata"]["labels"] = json!({"app": "low"});
    create(&core, low).await;
    start_scheduler(&core);
    let mut apart = required("podAntiAffinity", "low");
    apart["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        ["topologyKey"] = json!("topology.kubernetes.io/zone");
    apart["priorityClassName"] = json!("high");
    create(&core, pod("high", "4", apart)).await;
    // Once `low` is gone both nodes would do: the room made on `a` is taken.
    assert_eq!(eventually("high bound", || node_of(&core, "high")).await, "a");
    assert_eq!(get(&core, "high").await["status"]["nominatedNodeName"], "a");
}

#[actix::test]
async fn a_node_going_brings_a_spread_back_within_its_skew() {
    let core = core().await;
    // Nodes no agent runs (a deleted one stays deleted).
    let nodes = find("", "v1", "nodes").unwrap();
    for (name, cpu) in [("full", "1"), ("busy", "4")] {
        let node = json!({"metadata": {"name": name,
                "labels": {"kubernetes.io/hostname": name}}, "status": {
            "allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"},
            "capacity": {"cpu": cpu, "memory": "64Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}]}});
        ApiClient::create(&core, nodes, "", node).await.unwrap();
    }
    // Two of the group on `busy`, none on `full`, which has no room left.
    create(&core, pod("filler", "1", json!({"nodeName": "full"}))).await;
    let mut grouped = Vec::new();
    for name in ["g1", "g2"] {
        let mut member = pod(name, "100m", json!({"nodeName": "busy"}));
        member["metadata"]["labels"] = json!({"group": "g"});
        grouped.push(member);
    }
    for member in grouped {
        create(&core, member).await;
    }
    start_scheduler(&core);
    let spread = json!({"topologySpreadConstraints": [{"maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"group": "g"}}}]});
    let mut third = pod("g3", "100m", spread);
    third["metadata"]["labels"] = json!({"group": "g"});
    create(&core, third).await;
    eventually("g3 unschedulable", || scheduled_message(&core, "g3")).await;
    // `full` goes: `busy` is the only domain, and takes the third.
    ApiClient::delete(&core, nodes, "", "full", &Default::default()).await.unwrap();
    assert_eq!(eventually("g3 bound", || node_of(&core, "g3")).await, "busy");
}

#[actix::test]
async fn room_held_for_a_nominated_pod_is_kept_from_pods_of_lower_priority() {
    let core = core().await;
    // A node no agent runs: its pods being deleted stay until forced.
    let nodes = find("", "v1", "nodes").unwrap();
    let node = json!({"metadata": {"name": "manual"}, "status": {
        "allocatable": {"cpu": "2", "memory": "64Gi", "pods": "110"},
        "capacity": {"cpu": "2", "memory": "64Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}]}});
    ApiClient::create(&core, nodes, "", node).await.unwrap();
    let classes = find("scheduling.k8s.io", "v1", "priorityclasses").unwrap();
    let class = json!({"metadata": {"name": "high"}, "value": 1000});
    ApiClient::create(&core, classes, "", class).await.unwrap();
    let pods = find("", "v1", "pods").unwrap();
    let status = |patch: Value| {
        let core = core.clone();
        async move {
            let name = patch["metadata"]["name"].as_str().unwrap().to_string();
            ApiClient::patch(&core, pods, "default", &name, PatchType::Merge, &patch, true)
                .await
                .unwrap();
        }
    };
    // A pod of lower priority being deleted by a preemption, for the pod nominated (by a
    // scheduler before this one) to its node.
    create(&core, pod("victim", "1500m", json!({"nodeName": "manual"}))).await;
    status(json!({"metadata": {"name": "victim"}, "status": {"conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]}}))
    .await;
    ApiClient::delete(&core, pods, "default", "victim", &Default::default()).await.unwrap();
    create(&core, pod("holder", "800m", json!({"priorityClassName": "high"}))).await;
    status(json!({"metadata": {"name": "holder"}, "status": {"nominatedNodeName": "manual"}}))
        .await;
    start_scheduler(&core);
    let waiting = eventually("holder waits", || scheduled_message(&core, "holder")).await;
    assert!(
        waiting
            .ends_with("preemption: not eligible due to a terminating pod on the nominated node.."),
        "{waiting}"
    );
    // 400m would fit beside the victim, not beside the victim and the room held.
    create(&core, pod("small", "400m", json!({}))).await;
    let message = eventually("small unschedulable", || scheduled_message(&core, "small")).await;
    assert!(message.starts_with("0/1 nodes are available: 1 Insufficient cpu."), "{message}");
    let forced = crate::core::DeleteOptions { grace_period_seconds: Some(0), ..Default::default() };
    ApiClient::delete(&core, pods, "default", "victim", &forced).await.unwrap();
    assert_eq!(eventually("holder bound", || node_of(&core, "holder")).await, "manual");
    assert_eq!(eventually("small bound", || node_of(&core, "small")).await, "manual");
    assert_eq!(get(&core, "holder").await["status"]["nominatedNodeName"], "manual");
}

#[actix::test]
async fn a_read_write_once_pod_claim_is_used_by_one_pod_at_a_time() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    sim_node(&core, "a", "4", dir.path());
    sim_node(&core, "b", "4", dir.path());
    eventually("the nodes", || async { (ready_nodes(&core).await == 2).then_some(()) }).await;
    let classes = find("scheduling.k8s.io", "v1", "priorityclasses").unwrap();
    let class = json!({"metadata": {"name": "high"}, "value": 1000});
    ApiClient::create(&core, classes, "", class).await.unwrap();
    let claims = find("", "v1", "persistentvolumeclaims").unwrap();
    let claim = json!({"metadata": {"name": "solo",
            "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
        "spec": {"accessModes": ["ReadWriteOncePod"], "volumeName": "solo-pv",
            "resources": {"requests": {"storage": "1Gi"}}}});
    ApiClient::create(&core, claims, "default", claim).await.unwrap();
    start_scheduler(&core);
    let with_claim = |name: &str, extra: Value| {
        let mut spec = json!({"volumes": [{"name": "data",
            "persistentVolumeClaim": {"claimName": "solo"}}]});
        spec.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        pod(name, "100m", spec)
    };
    create(&core, with_claim("first", json!({}))).await;
    let first = eventually("first bound", || node_of(&core, "first")).await;
    create(&core, with_claim("second", json!({}))).await;
    let message = eventually("second unschedulable", || scheduled_message(&core, "second")).await;
    assert!(
        message.starts_with(
            "0/2 nodes are available: 2 node has pod using PersistentVolumeClaim with the same \
             name and ReadWriteOncePod access mode. preemption:"
        ),
        "{message}"
    );
    let pods = find("", "v1", "pods").unwrap();
    let options = DeleteOptions::default();
    ApiClient::delete(&core, pods, "default", "second", &options).await.unwrap();
    // A pod of higher priority takes the claim from the one using it, on its node.
    create(&core, with_claim("urgent", json!({"priorityClassName": "high"}))).await;
    assert_eq!(eventually("urgent bound", || node_of(&core, "urgent")).await, first);
    let gone = ApiClient::get(&core, pods, "default", "first").await;
    assert!(gone.is_err() || gone.unwrap()["metadata"]["deletionTimestamp"].is_string());
}

#[actix::test]
async fn a_waiting_pod_being_deleted_leaves_the_queue() {
    let core = core().await;
    let dir = tempfile::tempdir().unwrap();
    sim_node(&core, "small", "1", dir.path());
    eventually("the node", || async { (ready_nodes(&core).await == 1).then_some(()) }).await;
    let scheduler = Scheduler::new(Arc::new(core.clone()), SchedulerConfig::default()).start();
    let stats = || async { scheduler.send(GetStats).await.unwrap() };
    let mut doomed = pod("doomed", "2", json!({}));
    doomed["metadata"]["finalizers"] = json!(["example.com/hold"]);
    create(&core, doomed).await;
    eventually("the pod waiting", || async {
        let stats = stats().await;
        (stats.pending == 1 && stats.unschedulable > 0).then_some(())
    })
    .await;
    // Held by its finalizer, it stays, being deleted: no longer one to place.
    let pods = find("", "v1", "pods").unwrap();
    ApiClient::delete(&core, pods, "default", "doomed", &DeleteOptions::default()).await.unwrap();
    eventually("the queue empty", || async { (stats().await.pending == 0).then_some(()) }).await;
    sim_node(&core, "big", "4", dir.path());
    create(&core, pod("after", "2", json!({}))).await;
    assert_eq!(eventually("after bound", || node_of(&core, "after")).await, "big");
    assert_eq!(node_of(&core, "doomed").await, None);
}
