//! The metrics scraper actor: every `resolution` it reads the summaries of the Ready nodes'
//! agents (at once, each within `scrape_timeout`), and keeps the last two readings of each
//! node and of each container of each pod those summaries name; nodes and pods no longer
//! named are forgotten. Asked for the metrics of some nodes or pods, it answers those it has
//! two readings of: CPU as the rate between them (nanocores), memory as the last working set,
//! with the readings' time and the window between them, as metrics-server does. A pod is
//! answered only when every container it reported has a rate (one restarted since the last
//! reading has none yet).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{json, Value};

use super::SummarySource;
use crate::client::cache::{key_of, Key};
use crate::client::{object_name, object_uid, ApiClient};
use crate::core::ListOptions;
use crate::model::{json, quantity, resources, text};

const GROUP_VERSION: &str = "metrics.k8s.io/v1beta1";

/// How often, and how patiently, agents are read.
#[derive(Debug, Clone, Copy)]
pub struct ScraperConfig {
    /// Between two readings (metrics-server's `--metric-resolution`).
    pub resolution: Duration,
    /// How long one agent may take to answer.
    pub scrape_timeout: Duration,
}

impl Default for ScraperConfig {
    fn default() -> Self {
        Self { resolution: Duration::from_secs(15), scrape_timeout: Duration::from_secs(10) }
    }
}

/// One reading of a node's or a container's usage: CPU time so far, working set now.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Reading {
    time: DateTime<Utc>,
    cpu_nanoseconds: u64,
    memory_bytes: u64,
}

impl Reading {
    /// Reads the `cpu` and `memory` entries of a summary's node or container.
    fn of(stats: &Value, scraped: DateTime<Utc>) -> Option<Reading> {
        let cpu = stats.get("cpu")?;
        let cpu_nanoseconds = cpu.get("usageCoreNanoSeconds")?.as_u64()?;
        let memory_bytes = json::at(stats, "/memory/workingSetBytes").and_then(Value::as_u64)?;
        let time = cpu.get("time").and_then(Value::as_str).and_then(|t| t.parse().ok());
        Some(Reading { time: time.unwrap_or(scraped), cpu_nanoseconds, memory_bytes })
    }
}

/// The last two readings of one node or container.
#[derive(Debug, Clone, Default)]
struct Readings {
    previous: Option<Reading>,
    last: Option<Reading>,
}

/// Usage over a window, as metrics.k8s.io reports it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Usage {
    nanocores: u64,
    memory_bytes: u64,
    time: DateTime<Utc>,
    window: Duration,
}

impl Readings {
    fn push(&mut self, reading: Reading) {
        // The same reading again (an agent answering from a cache) is no new one.
        if self.last.is_some_and(|last| last.time >= reading.time) {
            return;
        }
        self.previous = self.last.replace(reading);
    }

    /// The rate between the two readings: none without two, or when the CPU time went down
    /// (a container restarted).
    fn usage(&self) -> Option<Usage> {
        let (previous, last) = (self.previous?, self.last?);
        let window = (last.time - previous.time).to_std().ok().filter(|w| !w.is_zero())?;
        let used = last.cpu_nanoseconds.checked_sub(previous.cpu_nanoseconds)?;
        let nanocores = u128::from(used) * 1_000_000_000 / window.as_nanos();
        Some(Usage {
            nanocores: u64::try_from(nanocores).unwrap_or(u64::MAX),
            memory_bytes: last.memory_bytes,
            time: last.time,
            window,
        })
    }
}

/// What is kept of one pod: its uid and its containers' readings.
#[derive(Debug, Clone, Default)]
struct PodReadings {
    uid: String,
    containers: BTreeMap<String, Readings>,
}

/// The metrics scraper actor.
pub struct MetricsScraper {
    client: Arc<dyn ApiClient>,
    source: Arc<dyn SummarySource>,
    config: ScraperConfig,
    nodes: BTreeMap<String, Readings>,
    pods: BTreeMap<Key, PodReadings>,
    /// A round of reading is under way.
    scraping: bool,
}

/// The `NodeMetrics` of these Node objects (those it has usage of), in their order.
#[derive(Message)]
#[rtype(result = "Vec<Value>")]
pub struct NodeMetricsOf(pub Vec<Value>);

/// The `PodMetrics` of these Pod objects (those it has usage of), in their order.
#[derive(Message)]
#[rtype(result = "Vec<Value>")]
pub struct PodMetricsOf(pub Vec<Value>);

/// Stops the scraper.
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopMetricsScraper;

/// One round's summaries: each node's name and its agent's answer.
#[derive(Message)]
#[rtype(result = "()")]
struct Scraped(Vec<(String, Result<Value, String>)>, DateTime<Utc>);

impl MetricsScraper {
    pub fn new(
        client: Arc<dyn ApiClient>,
        source: Arc<dyn SummarySource>,
        config: ScraperConfig,
    ) -> Self {
        let (nodes, pods) = (BTreeMap::new(), BTreeMap::new());
        Self { client, source, config, nodes, pods, scraping: false }
    }

    /// Starts a round of reading, unless one is under way.
    fn scrape(&mut self, ctx: &mut Context<Self>) {
        if self.scraping {
            return;
        }
        self.scraping = true;
        let (client, source) = (self.client.clone(), self.source.clone());
        let timeout = self.config.scrape_timeout;
        let round = async move {
            let options = ListOptions::default();
            let nodes = match client.list(resources::core("nodes"), None, &options).await {
                Ok(list) => list.items,
                Err(error) => {
                    tracing::debug!(%error, "listing nodes to read their metrics");
                    Vec::new()
                }
            };
            let reads = nodes.iter().filter(|node| crate::model::is_ready(node)).map(|node| {
                let source = source.clone();
                async move {
                    let name = object_name(node).to_string();
                    match tokio::time::timeout(timeout, source.summary(node)).await {
                        Ok(answer) => (name, answer),
                        Err(_) => (name, Err(format!("no answer within {timeout:?}"))),
                    }
                }
            });
            futures::future::join_all(reads).await
        };
        ctx.spawn(round.into_actor(self).map(|summaries, act, ctx| {
            act.scraping = false;
            ctx.notify(Scraped(summaries, Utc::now()));
        }));
    }

    /// Keeps the readings of one round; forgets nodes and pods it did not name.
    fn keep(&mut self, summaries: Vec<(String, Result<Value, String>)>, scraped: DateTime<Utc>) {
        let mut nodes = BTreeMap::new();
        let mut pods = BTreeMap::new();
        for (node, answer) in summaries {
            let summary = match answer {
                Ok(summary) => summary,
                Err(error) => {
                    tracing::debug!(%node, %error, "reading a node agent's summary");
                    continue;
                }
            };
            let mut readings = self.nodes.remove(&node).unwrap_or_default();
            if let Some(reading) = summary.get("node").and_then(|n| Reading::of(n, scraped)) {
                readings.push(reading);
            }
            nodes.insert(node, readings);
            let reported = summary.get("pods").and_then(Value::as_array).into_iter().flatten();
            for pod in reported {
                let reference = pod.get("podRef").unwrap_or(&Value::Null);
                let text = |field: &str| reference[field].as_str().unwrap_or("").to_string();
                let key = (text("namespace"), text("name"));
                let mut kept = self.pods.remove(&key).unwrap_or_default();
                if kept.uid != text("uid") {
                    kept = PodReadings { uid: text("uid"), containers: BTreeMap::new() };
                }
                let mut containers = BTreeMap::new();
                for container in pod["containers"].as_array().into_iter().flatten() {
                    let name = container["name"].as_str().unwrap_or("").to_string();
                    let mut readings = kept.containers.remove(&name).unwrap_or_default();
                    if let Some(reading) = Reading::of(container, scraped) {
                        readings.push(reading);
                    }
                    containers.insert(name, readings);
                }
                kept.containers = containers;
                pods.insert(key, kept);
            }
        }
        self.nodes = nodes;
        self.pods = pods;
    }

    fn node_metrics(&self, node: &Value, now: &str) -> Option<Value> {
        let usage = self.nodes.get(object_name(node))?.usage()?;
        let mut metadata = json!({"name": object_name(node), "creationTimestamp": now});
        copy_labels(node, &mut metadata);
        let mut metrics = json!({"kind": "NodeMetrics", "apiVersion": GROUP_VERSION,
            "metadata": metadata, "usage": usage_of(&usage)});
        stamp(&mut metrics, &usage);
        Some(metrics)
    }

    fn pod_metrics(&self, pod: &Value, now: &str) -> Option<Value> {
        let key = key_of(pod);
        let kept = self.pods.get(&key).filter(|kept| kept.uid == object_uid(pod))?;
        let usages: Vec<(&String, Usage)> = kept
            .containers
            .iter()
            .map(|(name, readings)| Some((name, readings.usage()?)))
            .collect::<Option<_>>()?;
        let (_, first) = usages.first()?;
        let containers: Vec<Value> = usages
            .iter()
            .map(|(name, usage)| json!({"name": name, "usage": usage_of(usage)}))
            .collect();
        let mut metadata = json!({"name": key.1, "namespace": key.0, "creationTimestamp": now});
        copy_labels(pod, &mut metadata);
        let mut metrics = json!({"kind": "PodMetrics", "apiVersion": GROUP_VERSION,
            "metadata": metadata, "containers": containers});
        stamp(&mut metrics, first);
        Some(metrics)
    }
}

fn copy_labels(object: &Value, metadata: &mut Value) {
    if let Some(labels) = json::at(object, "/metadata/labels").filter(|l| l.is_object()) {
        metadata["labels"] = labels.clone();
    }
}

/// The usage as metrics-server writes its quantities: cpu from nanocores in decimal SI
/// ("0", "1500u", "2610195n"), memory from bytes in binary SI ("8Mi", "12345Ki").
fn usage_of(usage: &Usage) -> Value {
    let nanocores = format!("{}n", usage.nanocores);
    let cpu = quantity::canonical(&nanocores).ok().flatten().unwrap_or(nanocores);
    let memory = i128::from(usage.memory_bytes).saturating_mul(1000);
    json!({"cpu": cpu, "memory": quantity::written(memory, quantity::Format::BinarySi)})
}

/// The reading's time and window, as metrics.k8s.io writes them (a Go duration, `15.002s`).
fn stamp(metrics: &mut Value, usage: &Usage) {
    metrics["timestamp"] = json!(usage.time.to_rfc3339_opts(SecondsFormat::Secs, true));
    let nanos = i64::try_from(usage.window.as_nanos()).unwrap_or(i64::MAX);
    metrics["window"] = json!(text::go_duration(nanos));
}

impl Actor for MetricsScraper {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.scrape(ctx);
        ctx.run_interval(self.config.resolution, |act, ctx| act.scrape(ctx));
    }
}

impl Handler<Scraped> for MetricsScraper {
    type Result = ();

    fn handle(&mut self, Scraped(summaries, at): Scraped, _: &mut Context<Self>) {
        self.keep(summaries, at);
    }
}

impl Handler<NodeMetricsOf> for MetricsScraper {
    type Result = Vec<Value>;

    fn handle(&mut self, NodeMetricsOf(nodes): NodeMetricsOf, _: &mut Context<Self>) -> Vec<Value> {
        let now = crate::model::now();
        nodes.iter().filter_map(|node| self.node_metrics(node, &now)).collect()
    }
}

impl Handler<PodMetricsOf> for MetricsScraper {
    type Result = Vec<Value>;

    fn handle(&mut self, PodMetricsOf(pods): PodMetricsOf, _: &mut Context<Self>) -> Vec<Value> {
        let now = crate::model::now();
        pods.iter().filter_map(|pod| self.pod_metrics(pod, &now)).collect()
    }
}

impl Handler<StopMetricsScraper> for MetricsScraper {
    type Result = ();

    fn handle(&mut self, _: StopMetricsScraper, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use async_trait::async_trait;

    use super::*;
    use crate::testing::{core, eventually};

    /// An agent whose every reading is a second after the last, its node and its one
    /// container each having used half a core in between.
    struct Ticking {
        round: AtomicU64,
    }

    #[async_trait]
    impl SummarySource for Ticking {
        async fn summary(&self, node: &Value) -> Result<Value, String> {
            let n = self.round.fetch_add(1, Ordering::SeqCst) + 1;
            let time = DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::seconds(n as i64);
            let time = time.to_rfc3339_opts(SecondsFormat::Nanos, true);
            let stats = |cpu: u64, memory: u64| {
                json!({"cpu": {"time": time, "usageCoreNanoSeconds": cpu},
                    "memory": {"time": time, "workingSetBytes": memory}})
            };
            let mut container = stats(n * 500_000_000, 1 << 20);
            container["name"] = json!("c");
            Ok(json!({"node": stats(n * 500_000_000, 1 << 30),
                "pods": [{"podRef": {"namespace": "default", "name": "p", "uid": "u1"},
                    "containers": [container]}],
                "nodeName": object_name(node)}))
        }
    }

    #[actix::test]
    async fn rates_come_from_the_last_two_readings() {
        let core = core().await;
        let node = json!({"metadata": {"name": "n", "labels": {"zone": "a"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let node = ApiClient::create(&core, resources::core("nodes"), "", node).await.unwrap();
        let source = Arc::new(Ticking { round: AtomicU64::new(0) });
        let config = ScraperConfig {
            resolution: Duration::from_millis(50),
            scrape_timeout: Duration::from_secs(5),
        };
        let scraper = MetricsScraper::new(Arc::new(core.clone()), source, config).start();
        let pod = json!({"metadata": {"name": "p", "namespace": "default", "uid": "u1",
            "labels": {"app": "web"}}});
        let metrics = eventually("two readings", || async {
            let nodes = scraper.send(NodeMetricsOf(vec![node.clone()])).await.unwrap();
            let pods = scraper.send(PodMetricsOf(vec![pod.clone()])).await.unwrap();
            (nodes.len() == 1 && pods.len() == 1).then(|| (nodes[0].clone(), pods[0].clone()))
        })
        .await;
        let (node_metrics, pod_metrics) = metrics;
        assert_eq!(node_metrics["kind"], "NodeMetrics");
        assert_eq!(node_metrics["metadata"]["labels"]["zone"], "a");
        assert_eq!(node_metrics["usage"], json!({"cpu": "500m", "memory": "1Gi"}));
        assert_eq!(node_metrics["window"], "1s");
        assert_eq!(pod_metrics["metadata"]["labels"]["app"], "web");
        assert_eq!(
            pod_metrics["containers"],
            json!([{"name": "c", "usage": {"cpu": "500m", "memory": "1Mi"}}])
        );
        // Another pod of the name is not this one.
        let mut other = pod.clone();
        other["metadata"]["uid"] = json!("u2");
        assert!(scraper.send(PodMetricsOf(vec![other])).await.unwrap().is_empty());
    }

    #[test]
    fn a_restarted_container_has_no_rate_until_its_next_reading() {
        let at = |seconds: i64, cpu: u64| Reading {
            time: DateTime::<Utc>::UNIX_EPOCH + chrono::Duration::seconds(seconds),
            cpu_nanoseconds: cpu,
            memory_bytes: 4096,
        };
        let mut readings = Readings::default();
        readings.push(at(10, 1_000_000_000));
        assert_eq!(readings.usage(), None, "one reading is no rate");
        readings.push(at(12, 1_500_000_000));
        assert_eq!(readings.usage().unwrap().nanocores, 250_000_000);
        readings.push(at(12, 9_000_000_000));
        assert_eq!(readings.usage().unwrap().nanocores, 250_000_000, "the same time again");
        readings.push(at(14, 100));
        assert_eq!(readings.usage(), None, "its CPU time went down");
        readings.push(at(16, 200_000_100));
        assert_eq!(readings.usage().unwrap().nanocores, 100_000_000);
        assert_eq!(readings.usage().unwrap().window, Duration::from_secs(2));
    }
}
