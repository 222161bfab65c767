//! Node agent throughput: pods started per second on one process-runtime node (real processes)
//! and on 100 simulated nodes, through the real API core and a RocksDB store; and the memory
//! one simulated node costs. Prints the medians and writes target/bench-results/agent.json.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::{Actor, Addr};
use kplane_actors::agent::node_agent::StopAgent;
use kplane_actors::agent::runtime::{ProcessRuntime, Runtime, SimulatedRuntime};
use kplane_actors::agent::{AgentConfig, NodeAgent, DEFAULT_CLUSTER_CIDR};
use kplane_actors::client::ApiClient;
use kplane_actors::controllers::NodeIpamController;
use kplane_actors::core::{ApiCore, ListOptions, WriteOptions};
use kplane_actors::model::resources;
use kplane_actors::store::{Store, StoreOptions};
use kplane_actors::watch::{HubOptions, WatchHub};
use serde_json::json;

const RUNS: usize = 3;

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    kib * 1024
}

async fn open(dir: &std::path::Path) -> (Store, ApiCore) {
    let hub = WatchHub::start(HubOptions {
        window_events: 100_000,
        window_bytes: usize::MAX,
        buffer: 100_000,
        bookmark_interval: Duration::from_secs(60),
    });
    let options =
        StoreOptions { shards: 2, data_dir: Some(dir.join("store")), ..Default::default() };
    let store = Store::open(&options, &hub).unwrap();
    let core = ApiCore::new(store.clone(), hub);
    core.bootstrap().await.unwrap();
    (store, core)
}

async fn count(core: &ApiCore, plural: &str, selector: &str) -> usize {
    let resource = resources::find("", "v1", plural).unwrap();
    let options = ListOptions { field_selector: Some(selector.into()), ..Default::default() };
    core.list(resource, None, &options).await.unwrap().items.len()
}

async fn wait_for(core: &ApiCore, plural: &str, selector: &str, n: usize) {
    while count(core, plural, selector).await < n {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn start_agents(
    core: &ApiCore,
    dir: &std::path::Path,
    nodes: usize,
    runtime: impl Fn() -> Arc<dyn Runtime>,
) -> Vec<Addr<NodeAgent>> {
    let client: Arc<dyn ApiClient> = Arc::new(core.clone());
    // The agents wait for their pod networks, which the server's node IPAM controller gives.
    NodeIpamController::new(client.clone(), DEFAULT_CLUSTER_CIDR).start();
    (0..nodes)
        .map(|i| {
            let mut config = AgentConfig::new(&format!("node-{i}"), dir.join(format!("node-{i}")));
            config.sync_period = Duration::from_millis(100);
            config.node_status_update_period = Duration::from_secs(60);
            NodeAgent::new(config, client.clone(), runtime()).start()
        })
        .collect()
}

/// Pods started per second: `pods` pods spread over `nodes` nodes, created bound, until all
/// are Running.
async fn started_per_second(nodes: usize, pods: usize, simulated: bool) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let (store, core) = open(dir.path()).await;
    let agents = if simulated {
        start_agents(&core, dir.path(), nodes, || Arc::new(SimulatedRuntime::default()))
    } else {
        start_agents(&core, dir.path(), nodes, || Arc::new(ProcessRuntime::default()))
    };
    wait_for(&core, "nodes", "", nodes).await;
    let pod_resource = resources::find("", "v1", "pods").unwrap();
    let started = Instant::now();
    let options = WriteOptions::default();
    let creates = (0..pods).map(|i| {
        let pod = json!({"metadata": {"name": format!("p{i}")}, "spec": {"nodeName": format!("node-{}", i % nodes),
            "containers": [{"name": "c", "image": "none", "command": ["sleep", "1000"]}]}});
        core.create(pod_resource, "default", pod, &options)
    });
    for created in futures::future::join_all(creates).await {
        created.unwrap();
    }
    wait_for(&core, "pods", "status.phase=Running", pods).await;
    let rate = pods as f64 / started.elapsed().as_secs_f64();
    for agent in agents {
        let _ = agent.send(StopAgent).await;
    }
    store.close(Duration::from_secs(10)).await;
    rate
}

/// Resident memory added per simulated node (agent actor, its caches, its Node and Lease).
async fn rss_per_simulated_node(nodes: usize) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let (store, core) = open(dir.path()).await;
    let before = rss_bytes();
    let agents = start_agents(&core, dir.path(), nodes, || Arc::new(SimulatedRuntime::default()));
    wait_for(&core, "nodes", "", nodes).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let per_node = rss_bytes().saturating_sub(before) as f64 / nodes as f64;
    for agent in agents {
        let _ = agent.send(StopAgent).await;
    }
    store.close(Duration::from_secs(10)).await;
    per_node
}

fn main() {
    let system = actix::System::new();
    let results = system.block_on(async {
        let mut process = Vec::new();
        let mut simulated = Vec::new();
        for run in 0..RUNS {
            process.push(started_per_second(1, 100, false).await);
            simulated.push(started_per_second(100, 2000, true).await);
            eprintln!(
                "run {run}: process {:.0}/s, simulated {:.0}/s",
                process[run], simulated[run]
            );
        }
        let rss = rss_per_simulated_node(1000).await;
        json!({
            "pods_started_per_sec_one_process_node_100_pods": common::median(process),
            "pods_started_per_sec_100_simulated_nodes_2000_pods": common::median(simulated),
            "rss_bytes_per_simulated_node_1000_nodes": rss,
            "runs": RUNS,
        })
    });
    common::report("agent", &results);
}
