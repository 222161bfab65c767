//! Scheduler throughput: pods bound per second with 1,000 simulated nodes and 10,000 pending
//! pods, through the real API core and a RocksDB store (every bind durable); and the pure
//! filter + score cost of one pod against 1,000 nodes. Prints the medians and writes
//! target/bench-results/scheduler.json.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::Actor;
use k8s_openapi::api::core::v1::{Node, Pod};
use kplane_actors::agent::node_agent::StopAgent;
use kplane_actors::agent::runtime::SimulatedRuntime;
use kplane_actors::agent::{AgentConfig, NodeAgent, DEFAULT_CLUSTER_CIDR};
use kplane_actors::client::ApiClient;
use kplane_actors::controllers::NodeIpamController;
use kplane_actors::core::{ApiCore, ListOptions};
use kplane_actors::model::resources;
use kplane_actors::scheduler::node_info::{LabelGroups, NodeInfo, PodInfo};
use kplane_actors::scheduler::scores::ScoreContext;
use kplane_actors::scheduler::{
    filters, scores, topology_spread, GetStats, Scheduler, SchedulerConfig, StopScheduler,
};
use kplane_actors::store::{Store, StoreOptions};
use kplane_actors::watch::{HubOptions, WatchHub};
use serde_json::json;

const NODES: usize = 1000;
const PODS: usize = 10_000;
const RUNS: usize = 3;

fn pod_json(i: usize) -> serde_json::Value {
    json!({"metadata": {"name": format!("p{i}"), "labels": {"app": format!("app{}", i % 50)}},
        "spec": {"containers": [{"name": "c", "image": "i",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}})
}

/// The pure cost of filtering and scoring one pod against every node, in microseconds.
fn pure_cost() -> (f64, f64) {
    let mut nodes: Vec<NodeInfo> = (0..NODES)
        .map(|i| {
            let node: Node = serde_json::from_value(json!({
                "metadata": {"name": format!("n{i}"), "labels": {"kubernetes.io/hostname": format!("n{i}")}},
                "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}]}
            }))
            .unwrap();
            NodeInfo::new(&node)
        })
        .collect();
    // Some load on the nodes, as in a running cluster.
    for (i, node) in nodes.iter_mut().enumerate() {
        for j in 0..(i % 20) {
            let mut pod = pod_json(i * 100 + j);
            pod["metadata"]["uid"] = json!(format!("u{i}-{j}"));
            pod["metadata"]["namespace"] = json!("default");
            node.add_pod(PodInfo::new(&serde_json::from_value::<Pod>(pod).unwrap()));
        }
    }
    let mut pod = pod_json(1);
    pod["metadata"]["uid"] = json!("new");
    pod["metadata"]["namespace"] = json!("default");
    let pod = PodInfo::new(&serde_json::from_value::<Pod>(pod).unwrap());
    let mut groups = LabelGroups::default();
    nodes.iter().flat_map(|n| n.pods()).for_each(|p| groups.register(p));
    let spread_groups = groups.matching(&pod.namespace, std::slice::from_ref(&pod.labels));
    let mut rng = rand::thread_rng();
    let rounds = if std::env::args().any(|a| a == "pure") { 20_000 } else { 300 };
    let started = Instant::now();
    for _ in 0..rounds {
        let feasible: Vec<&NodeInfo> =
            nodes.iter().filter(|n| filters::filter(&pod, n).is_ok()).collect();
        let topology_spread =
            topology_spread::default_scores(&pod, &spread_groups, &feasible, &nodes);
        let context = ScoreContext { topology_spread, ..ScoreContext::default() };
        let scores = scores::score_nodes(&pod, &feasible, &context);
        std::hint::black_box(scores::pick_best(&scores, &mut rng));
    }
    let per_pod = started.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    (per_pod, per_pod * 1000.0 / NODES as f64)
}

async fn bound_per_second(run: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let hub = WatchHub::start(HubOptions {
        window_events: 200_000,
        window_bytes: usize::MAX,
        buffer: 200_000,
        bookmark_interval: Duration::from_secs(60),
    });
    let options =
        StoreOptions { shards: 2, data_dir: Some(dir.path().join("store")), ..Default::default() };
    let store = Store::open(&options, &hub).unwrap();
    let core = ApiCore::new(store.clone(), hub);
    core.bootstrap().await.unwrap();
    let client: Arc<dyn ApiClient> = Arc::new(core.clone());
    // The agents wait for their pod networks, which the server's node IPAM controller gives.
    NodeIpamController::new(client.clone(), DEFAULT_CLUSTER_CIDR).start();
    let mut agents = Vec::with_capacity(NODES);
    for i in 0..NODES {
        let mut config = AgentConfig::new(&format!("sim-{i}"), dir.path().join(format!("n{i}")));
        config.node_status_update_period = Duration::from_secs(60);
        config.capacity_overrides.insert("cpu".into(), "32".into());
        let runtime = Arc::new(SimulatedRuntime::default());
        agents.push(NodeAgent::new(config, client.clone(), runtime).start());
    }
    let nodes = resources::find("", "v1", "nodes").unwrap();
    loop {
        let list = core.list(nodes, None, &ListOptions::default()).await.unwrap();
        if list.items.len() == NODES {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let pods = resources::find("", "v1", "pods").unwrap();
    let creates = futures::stream::iter(0..PODS).map(|i| {
        let core = core.clone();
        async move { core.create(pods, "default", pod_json(i), &Default::default()).await.unwrap() }
    });
    use futures::StreamExt;
    creates.buffer_unordered(64).collect::<Vec<_>>().await;
    let scheduler = Scheduler::start_in_own_thread(client.clone(), SchedulerConfig::default());
    let started = Instant::now();
    loop {
        let stats = scheduler.send(GetStats).await.unwrap();
        if stats.bound as usize >= PODS {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let rate = PODS as f64 / started.elapsed().as_secs_f64();
    eprintln!("run {run}: {rate:.0} pods bound/s");
    scheduler.do_send(StopScheduler);
    for agent in agents {
        let _ = agent.send(StopAgent).await;
    }
    store.close(Duration::from_secs(10)).await;
    rate
}

fn main() {
    let (per_pod_us, per_node_ns) = pure_cost();
    eprintln!("filter+score: {per_pod_us:.1} µs per pod over {NODES} nodes");
    // `cargo bench --bench scheduler -- pure` measures the algorithms alone.
    if std::env::args().any(|a| a == "pure") {
        return;
    }
    let system = actix::System::new();
    let rates: Vec<f64> = system.block_on(async {
        let mut rates = Vec::new();
        let runs =
            std::env::var("KPLANE_BENCH_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(RUNS);
        for run in 0..runs {
            rates.push(bound_per_second(run).await);
        }
        rates
    });
    let results = json!({
        "pods_bound_per_sec_1000_simulated_nodes_10000_pods_durable": common::median(rates.clone()),
        "runs": rates,
        "filter_and_score_microseconds_per_pod_1000_nodes": per_pod_us,
        "filter_and_score_nanoseconds_per_node": per_node_ns,
    });
    common::report("scheduler", &results);
}
