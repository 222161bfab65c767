//! The pod garbage collector, as Kubernetes' PodGC controller: pods bound to a node that no
//! longer exists (missing for the quarantine time, 40 s, and confirmed gone by a read) are
//! marked `Failed` with a `DisruptionTarget` condition (reason `DeletionByPodGC`) and deleted at
//! once, since no agent will ever stop them; pods being deleted that were never bound go the
//! same way (a delete cut off between its marking and its removal leaves one), and so do pods
//! being deleted on a node that is not Ready and carries the `node.kubernetes.io/out-of-service`
//! taint (Kubernetes' non-graceful node shutdown: its agent will not stop them); and past
//! `terminated_threshold` finished pods
//! (`Succeeded` or `Failed`, Kubernetes' `--terminated-pod-gc-threshold`), the evicted ones
//! and then the oldest are deleted.
//!
//! Every sweep (20 s) reads the pods, and the finished ones by field selector, a page at a time
//! (keeping only the pods it may act on: a sweep never holds every pod at once), one sweep at
//! a time; it follows nodes to know which exist.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use serde_json::{json, Value};

use crate::client::informer::{self, Feed, Scope};
use crate::client::{object_name, object_uid, ApiClient};
use crate::core::{ApiError, DeleteOptions, ListOptions, PatchType};
use crate::model::{json, resources};
use crate::watch::EventType;

/// The pod garbage collector's settings.
#[derive(Debug, Clone)]
pub struct PodGcConfig {
    /// Finished pods kept; the oldest past this many are deleted (0: none are).
    pub terminated_threshold: usize,
    /// How long a node must be missing before its pods go.
    pub quarantine: Duration,
    /// How often the collector sweeps (Kubernetes: 20 s).
    pub period: Duration,
    /// How many pods a sweep reads at a time.
    pub page: usize,
}

impl Default for PodGcConfig {
    fn default() -> Self {
        Self {
            terminated_threshold: 12_500,
            quarantine: Duration::from_secs(40),
            period: Duration::from_secs(20),
            page: 500,
        }
    }
}

/// The pod garbage collector actor.
pub struct PodGarbageCollector {
    client: Arc<dyn ApiClient>,
    config: PodGcConfig,
    /// The nodes that exist, once listed, and whether each is out of service (not Ready and
    /// tainted `node.kubernetes.io/out-of-service`).
    nodes: Option<BTreeMap<String, bool>>,
    /// Nodes pods are bound to that do not exist, since when they were found missing.
    missing: HashMap<String, Instant>,
    sweeping: bool,
}

/// A feed of nodes.
#[derive(Message)]
#[rtype(result = "()")]
struct Nodes(Feed);

/// Stops the controller (its list-watch ends with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopPodGarbageCollector;

impl PodGarbageCollector {
    pub fn new(client: Arc<dyn ApiClient>, config: PodGcConfig) -> Self {
        Self { client, config, nodes: None, missing: HashMap::new(), sweeping: false }
    }

    /// One sweep: the pods are read; the pods of nodes missing for the quarantine time go,
    /// then those being deleted that were never bound or whose node is out of service, then
    /// the oldest finished pods past the threshold.
    fn sweep(&mut self, ctx: &mut Context<Self>) {
        if self.sweeping {
            return;
        }
        let Some(nodes) = self.nodes.clone() else { return };
        self.sweeping = true;
        let (client, page) = (self.client.clone(), self.config.page);
        let found = async move {
            let mut found = Found::default();
            let take = |pods: Vec<Value>| found.take(pods, &nodes);
            each_page(client.as_ref(), paged(None, page), take).await.map(|()| found)
        };
        ctx.spawn(found.into_actor(self).map(|found, collector, ctx| {
            let found = match found {
                Ok(found) => found,
                Err(error) => {
                    tracing::debug!(%error, "listing pods");
                    collector.sweeping = false;
                    return;
                }
            };
            let orphans = collector.orphans(found.on_missing_nodes);
            let client = collector.client.clone();
            let (threshold, page) = (collector.config.terminated_threshold, collector.config.page);
            let work = async move {
                for (node, pods) in orphans {
                    match client.get(resources::core("nodes"), "", &node).await {
                        Err(ApiError::NotFound { .. }) => {
                            for pod in &pods {
                                delete_orphan(client.as_ref(), pod).await;
                            }
                        }
                        Ok(_) => {}
                        Err(error) => tracing::debug!(%node, %error, "checking a node gone"),
                    }
                }
                for pod in found.stranded.iter().chain(&found.unscheduled_terminating) {
                    fail_and_delete(client.as_ref(), pod, None).await;
                }
                delete_oldest_finished(client.as_ref(), threshold, page).await;
            };
            ctx.spawn(
                work.into_actor(collector).map(|(), collector, _| collector.sweeping = false),
            );
        }));
    }

    /// The pods of `bound` whose node is missing and has been for the quarantine time, by
    /// node; the nodes found missing now are noted.
    fn orphans(&mut self, bound: Vec<Value>) -> BTreeMap<String, Vec<Value>> {
        let nodes = self.nodes.as_ref().expect("listed before a sweep");
        let mut by_node: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for pod in bound {
            let node = json::at(&pod, "/spec/nodeName").and_then(Value::as_str).unwrap_or("");
            if !node.is_empty() && !nodes.contains_key(node) {
                by_node.entry(node.to_string()).or_default().push(pod);
            }
        }
        let now = Instant::now();
        self.missing.retain(|node, _| by_node.contains_key(node));
        for node in by_node.keys() {
            self.missing.entry(node.clone()).or_insert(now);
        }
        let quarantine = self.config.quarantine;
        by_node.retain(|node, _| self.missing[node].elapsed() >= quarantine);
        by_node
    }
}

/// What a sweep keeps of the pods it reads: the ones it may act on.
#[derive(Default)]
struct Found {
    /// Bound to a node that does not exist (orphans once it has been missing long enough).
    on_missing_nodes: Vec<Value>,
    /// Being deleted on a node out of service.
    stranded: Vec<Value>,
    /// Being deleted, never bound.
    unscheduled_terminating: Vec<Value>,
}

impl Found {
    /// Keeps those of `pods` a sweep may act on, given the `nodes` that exist (and whether
    /// each is out of service).
    fn take(&mut self, pods: Vec<Value>, nodes: &BTreeMap<String, bool>) {
        for pod in pods {
            // A delete cut off between its marking and its removal (a crash) leaves a pod
            // being deleted that was never bound: no agent will remove it.
            let deleting =
                json::at(&pod, "/metadata/deletionTimestamp").is_some_and(|t| !t.is_null());
            let node = json::at(&pod, "/spec/nodeName").and_then(Value::as_str).unwrap_or("");
            match (node.is_empty(), nodes.get(node)) {
                (true, _) if deleting => self.unscheduled_terminating.push(pod),
                (true, _) => {}
                (false, None) => self.on_missing_nodes.push(pod),
                (false, Some(&out_of_service)) if out_of_service && deleting => {
                    self.stranded.push(pod)
                }
                (false, Some(_)) => {}
            }
        }
    }
}

/// Reads the pods `options` select (a page of `options.limit` at a time), handing each page
/// to `take`; past an expired page, from the same place in the latest state.
async fn each_page(
    client: &dyn ApiClient,
    mut options: ListOptions,
    mut take: impl FnMut(Vec<Value>),
) -> Result<(), ApiError> {
    loop {
        let listed = match client.list(resources::core("pods"), None, &options).await {
            Ok(listed) => listed,
            // The list's snapshot is gone (a sweep outlived it): on from the same place in
            // the latest state, as a sweep needs no consistent list.
            Err(ApiError::InconsistentContinue { continue_token }) => {
                options.continue_token = Some(continue_token);
                continue;
            }
            Err(error) => return Err(error),
        };
        take(listed.items);
        match listed.continue_token.filter(|token| !token.is_empty()) {
            Some(token) => options.continue_token = Some(token),
            None => return Ok(()),
        }
    }
}

/// A list of the pods `field_selector` selects, `page` at a time.
fn paged(field_selector: Option<String>, page: usize) -> ListOptions {
    ListOptions { field_selector, limit: Some(page), ..ListOptions::default() }
}

/// A finished pod, as much of it as its collection needs.
struct FinishedPod {
    /// Evicted ones go first, then the oldest (Kubernetes' `byEvictionAndCreationTimestamp`).
    order: (bool, String, String),
    namespace: String,
    uid: String,
}

impl FinishedPod {
    fn of(pod: &Value) -> Self {
        let text = |pointer: &str| json::at(pod, pointer).and_then(Value::as_str).unwrap_or("");
        let evicted = text("/status/phase") == "Failed" && text("/status/reason") == "Evicted";
        let created = text("/metadata/creationTimestamp").to_string();
        Self {
            order: (!evicted, created, object_name(pod).to_string()),
            namespace: text("/metadata/namespace").to_string(),
            uid: object_uid(pod).to_string(),
        }
    }
}

/// Deletes the oldest finished pods past `threshold` (none when it is 0).
async fn delete_oldest_finished(client: &dyn ApiClient, threshold: usize, page: usize) {
    if threshold == 0 {
        return;
    }
    let mut finished = Vec::new();
    for phase in ["Succeeded", "Failed"] {
        let options = paged(Some(format!("status.phase={phase}")), page);
        let take = |pods: Vec<Value>| finished.extend(pods.iter().map(FinishedPod::of));
        if let Err(error) = each_page(client, options, take).await {
            tracing::debug!(%error, "listing finished pods");
            return;
        }
    }
    if finished.len() <= threshold {
        return;
    }
    finished.sort_unstable_by(|a, b| a.order.cmp(&b.order));
    let excess = finished.len() - threshold;
    for pod in finished.into_iter().take(excess) {
        force_delete(client, &pod.namespace, &pod.order.2, &pod.uid).await;
    }
}

/// Marks an orphaned pod failed (unless it finished) and deletes it at once.
async fn delete_orphan(client: &dyn ApiClient, pod: &Value) {
    let condition = json!({"type": "DisruptionTarget", "status": "True",
        "reason": "DeletionByPodGC", "message": "PodGC: node no longer exists",
        "lastTransitionTime": crate::model::now()});
    fail_and_delete(client, pod, Some(condition)).await;
}

/// Marks a pod no agent will stop failed (unless it finished), with `condition`, and deletes
/// it at once, as Kubernetes' `markFailedAndDeletePodWithCondition`.
async fn fail_and_delete(client: &dyn ApiClient, pod: &Value, condition: Option<Value>) {
    let namespace = json::at(pod, "/metadata/namespace").and_then(Value::as_str);
    let (namespace, name) = (namespace.unwrap_or(""), object_name(pod));
    let phase = json::at(pod, "/status/phase").and_then(Value::as_str);
    if !matches!(phase, Some("Succeeded" | "Failed")) {
        let mut status = json!({"phase": "Failed"});
        if let Some(condition) = condition {
            status["conditions"] = json!([condition]);
        }
        let patch = json!({"metadata": {"uid": object_uid(pod)}, "status": status});
        let (pods, strategic) = (resources::core("pods"), PatchType::StrategicMerge);
        if let Err(error) = client.patch(pods, namespace, name, strategic, &patch, true).await {
            tracing::debug!(%namespace, %name, %error, "marking a pod failed");
            return; // as Kubernetes: not deleted unmarked; the next sweep tries again
        }
    }
    force_delete(client, namespace, name, object_uid(pod)).await;
}

/// Deletes a pod with no grace period (the one of `uid`, not another of its name).
async fn force_delete(client: &dyn ApiClient, namespace: &str, name: &str, uid: &str) {
    let options = DeleteOptions {
        grace_period_seconds: Some(0),
        precondition_uid: Some(uid.to_string()),
        ..DeleteOptions::default()
    };
    match client.delete(resources::core("pods"), namespace, name, &options).await {
        Ok(_) | Err(ApiError::NotFound { .. }) => {}
        Err(error) => tracing::debug!(%namespace, %name, %error, "collecting a pod"),
    }
}

impl Actor for PodGarbageCollector {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let (client, nodes) = (self.client.clone(), resources::core("nodes"));
        informer::feed_actor(ctx, client, nodes, Scope::default(), Nodes);
        ctx.run_interval(self.config.period, |collector, ctx| collector.sweep(ctx));
    }
}

impl Handler<Nodes> for PodGarbageCollector {
    type Result = ();

    fn handle(&mut self, Nodes(feed): Nodes, _: &mut Context<Self>) {
        match feed {
            Feed::Listed(items) => {
                let nodes = items.iter().map(|n| (object_name(n).to_string(), out_of_service(n)));
                self.nodes = Some(nodes.collect());
            }
            Feed::Changed(kind, node) => {
                let nodes = self.nodes.get_or_insert_with(BTreeMap::new);
                let name = object_name(&node).to_string();
                if kind == EventType::Deleted {
                    nodes.remove(&name);
                } else {
                    self.missing.remove(&name);
                    nodes.insert(name, out_of_service(&node));
                }
            }
            Feed::Unavailable(_) => {}
        }
    }
}

/// Whether a node is out of service: not Ready, and tainted so (any effect).
fn out_of_service(node: &Value) -> bool {
    let taints = json::at(node, "/spec/taints").and_then(Value::as_array);
    let tainted =
        taints.into_iter().flatten().any(|t| t["key"] == "node.kubernetes.io/out-of-service");
    tainted && !crate::model::is_ready(node)
}

impl Handler<StopPodGarbageCollector> for PodGarbageCollector {
    type Result = ();

    fn handle(&mut self, _: StopPodGarbageCollector, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{core, eventually};

    fn pod(name: &str, node: &str, phase: Option<&str>) -> Value {
        let mut pod = json!({"metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        if !node.is_empty() {
            pod["spec"]["nodeName"] = json!(node);
        }
        if let Some(phase) = phase {
            pod["status"] = json!({"phase": phase});
        }
        pod
    }

    #[actix::test]
    async fn pods_of_gone_nodes_and_the_oldest_finished_pods_are_deleted() {
        let core = core().await;
        for name in ["stays", "goes", "returns"] {
            let node = json!({"metadata": {"name": name}});
            ApiClient::create(&core, resources::core("nodes"), "", node).await.unwrap();
        }
        let created = [
            pod("on-stays", "stays", Some("Running")),
            pod("on-goes", "goes", Some("Running")),
            pod("on-returns", "returns", Some("Running")),
            pod("on-never", "never-was", Some("Pending")),
            // Created in this order: by creation time (whole seconds), then by name.
            pod("done-1", "", Some("Succeeded")),
            pod("done-2", "", Some("Failed")),
            pod("done-3", "", Some("Succeeded")),
        ];
        for p in created {
            let status = p.get("status").cloned();
            let made =
                ApiClient::create(&core, resources::core("pods"), "default", p).await.unwrap();
            if let Some(status) = status {
                let mut with_status = made;
                with_status["status"] = status;
                ApiClient::update_status(&core, resources::core("pods"), "default", with_status)
                    .await
                    .unwrap();
            }
        }
        let config = PodGcConfig {
            terminated_threshold: 2,
            quarantine: Duration::from_millis(300),
            period: Duration::from_millis(100),
            // A few pods a page: what a sweep reads spans pages.
            page: 2,
        };
        let _collector = PodGarbageCollector::new(Arc::new(core.clone()), config).start();
        for name in ["goes", "returns"] {
            let options = DeleteOptions::default();
            ApiClient::delete(&core, resources::core("nodes"), "", name, &options).await.unwrap();
        }
        ApiClient::create(
            &core,
            resources::core("nodes"),
            "",
            json!({"metadata": {"name": "returns"}}),
        )
        .await
        .unwrap();
        let exists = |name: &'static str| {
            let core = core.clone();
            async move { ApiClient::get(&core, resources::core("pods"), "default", name).await.is_ok() }
        };
        eventually("the gone node's pods and the oldest finished pod deleted", || async {
            let gone = !exists("on-goes").await && !exists("on-never").await;
            (gone && !exists("done-1").await).then_some(())
        })
        .await;
        for kept in ["on-stays", "on-returns", "done-2", "done-3"] {
            assert!(exists(kept).await, "{kept} is kept");
        }
    }

    #[actix::test]
    async fn an_unscheduled_pod_left_marked_for_deletion_is_deleted() {
        let core = core().await;
        let pods = resources::core("pods");
        for name in ["marked", "pending"] {
            ApiClient::create(&core, pods, "default", pod(name, "", None)).await.unwrap();
        }
        // As a crash between a delete's marking and its removal leaves it.
        let key = crate::model::ObjectKey::new(pods, "default", "marked");
        let mut marked = core.store.get(&key).await.unwrap().unwrap().to_value();
        marked["metadata"]["deletionTimestamp"] = json!(crate::model::now());
        marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        core.store.update(key, marked, crate::store::Preconditions::default()).await.unwrap();
        let config = PodGcConfig { period: Duration::from_millis(50), ..PodGcConfig::default() };
        let _collector = PodGarbageCollector::new(Arc::new(core.clone()), config).start();
        eventually("the marked pod deleted", || async {
            ApiClient::get(&core, pods, "default", "marked").await.is_err().then_some(())
        })
        .await;
        assert!(ApiClient::get(&core, pods, "default", "pending").await.is_ok());
    }

    /// Non-graceful node shutdown: pods being deleted on a node that is not Ready and is
    /// tainted out of service are failed and removed; on a Ready one they wait for its agent.
    #[actix::test]
    async fn terminating_pods_of_an_out_of_service_node_are_deleted() {
        let core = core().await;
        let (pods, nodes) = (resources::core("pods"), resources::core("nodes"));
        let taint = json!([{"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown",
            "effect": "NoExecute"}]);
        for (name, ready) in [("down", "False"), ("up", "True")] {
            let node = json!({"metadata": {"name": name}, "spec": {"taints": taint}});
            let made = ApiClient::create(&core, nodes, "", node).await.unwrap();
            let mut with_status = made;
            with_status["status"] = json!({"conditions": [{"type": "Ready", "status": ready}]});
            ApiClient::update_status(&core, nodes, "", with_status).await.unwrap();
        }
        for (name, node) in [("on-down", "down"), ("on-up", "up"), ("kept", "down")] {
            ApiClient::create(&core, pods, "default", pod(name, node, None)).await.unwrap();
        }
        // Deleted gracefully: marked, waiting for an agent.
        for name in ["on-down", "on-up"] {
            let options = DeleteOptions::default();
            let marked = ApiClient::delete(&core, pods, "default", name, &options).await.unwrap();
            assert!(crate::model::is_being_deleted(&marked));
        }
        let config = PodGcConfig { period: Duration::from_millis(50), ..PodGcConfig::default() };
        let _collector = PodGarbageCollector::new(Arc::new(core.clone()), config).start();
        eventually("the out-of-service node's terminating pod deleted", || async {
            ApiClient::get(&core, pods, "default", "on-down").await.is_err().then_some(())
        })
        .await;
        for kept in ["on-up", "kept"] {
            assert!(ApiClient::get(&core, pods, "default", kept).await.is_ok(), "{kept} is kept");
        }
    }

    /// A sweep that outlives its list's snapshot goes on from where it was.
    #[actix::test]
    async fn a_sweep_goes_on_past_an_expired_page() {
        let core = crate::testing::core_with_history(10).await;
        let pods = resources::core("pods");
        for name in ["a", "b", "c"] {
            ApiClient::create(&core, pods, "default", pod(name, "", None)).await.unwrap();
        }
        let first = ApiClient::list(&core, pods, None, &paged(None, 1)).await.unwrap();
        let token = first.continue_token.expect("more pages");
        // More changes since than the store keeps, and more lists kept than it keeps.
        for i in 0..300 {
            let relabelled = json!({"metadata": {"labels": {"round": i.to_string()}}});
            ApiClient::patch(&core, pods, "default", "c", PatchType::Merge, &relabelled, false)
                .await
                .unwrap();
            ApiClient::list(&core, pods, None, &paged(None, 1)).await.unwrap();
        }
        let expired = ListOptions { continue_token: Some(token), ..paged(None, 1) };
        let listed = ApiClient::list(&core, pods, None, &expired).await;
        assert!(matches!(listed, Err(ApiError::InconsistentContinue { .. })), "{listed:?}");
        let mut names = Vec::new();
        let take = |page: Vec<Value>| names.extend(page.iter().map(|p| object_name(p).to_string()));
        each_page(&core, expired, take).await.unwrap();
        assert_eq!(names, ["b", "c"]);
    }

    /// Past the threshold, evicted pods go before older finished ones.
    #[actix::test]
    async fn evicted_pods_go_first_past_the_threshold() {
        let core = core().await;
        let pods = resources::core("pods");
        for (name, phase, reason) in
            [("old", "Succeeded", None), ("evicted", "Failed", Some("Evicted"))]
        {
            let made =
                ApiClient::create(&core, pods, "default", pod(name, "", None)).await.unwrap();
            let mut with_status = made;
            with_status["status"] = json!({"phase": phase});
            if let Some(reason) = reason {
                with_status["status"]["reason"] = json!(reason);
            }
            ApiClient::update_status(&core, pods, "default", with_status).await.unwrap();
        }
        let config = PodGcConfig {
            terminated_threshold: 1,
            period: Duration::from_millis(50),
            page: 1,
            ..PodGcConfig::default()
        };
        let _collector = PodGarbageCollector::new(Arc::new(core.clone()), config).start();
        eventually("the evicted pod deleted", || async {
            ApiClient::get(&core, pods, "default", "evicted").await.is_err().then_some(())
        })
        .await;
        assert!(ApiClient::get(&core, pods, "default", "old").await.is_ok());
    }
}
