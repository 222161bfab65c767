//! The pod garbage collector, as Kubernetes' PodGC controller: pods bound to a node that no
//! longer exists (gone for the quarantine time, 40 s, and confirmed gone by a read) are marked
//! `Failed` with a `DisruptionTarget` condition (reason `DeletionByPodGC`) and deleted at once,
//! since no agent will ever stop them; and past `terminated_threshold` finished pods
//! (`Succeeded` or `Failed`, Kubernetes' `--terminated-pod-gc-threshold`), the oldest are
//! deleted.
//!
//! It follows nodes, not pods: the pods of a deleted node are listed by field selector when
//! its quarantine ends, the bound pods once when it starts (nodes deleted while it was
//! down), and the finished pods by their phase every sweep.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

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
    /// How long a node must be gone before its pods are.
    pub quarantine: Duration,
    /// How often finished pods are counted (Kubernetes: 20 s).
    pub period: Duration,
}

impl Default for PodGcConfig {
    fn default() -> Self {
        Self {
            terminated_threshold: 12_500,
            quarantine: Duration::from_secs(40),
            period: Duration::from_secs(20),
        }
    }
}

/// The pod garbage collector actor.
pub struct PodGarbageCollector {
    client: Arc<dyn ApiClient>,
    config: PodGcConfig,
    nodes: BTreeSet<String>,
    /// Whether the bound pods were looked at since start.
    swept_bound: bool,
}

/// A feed of nodes.
#[derive(Message)]
#[rtype(result = "()")]
struct Nodes(Feed);

/// Nodes that pods are bound to but that were not known when they were listed.
#[derive(Message)]
#[rtype(result = "()")]
struct Unknown(BTreeSet<String>);

/// Stops the controller (its list-watch ends with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopPodGarbageCollector;

impl PodGarbageCollector {
    pub fn new(client: Arc<dyn ApiClient>, config: PodGcConfig) -> Self {
        Self { client, config, nodes: BTreeSet::new(), swept_bound: false }
    }

    /// After the quarantine, the pods of `node` go if it is still gone.
    fn quarantine(&self, node: String, ctx: &mut Context<Self>) {
        ctx.run_later(self.config.quarantine, move |collector, ctx| {
            if collector.nodes.contains(&node) {
                return; // back meanwhile
            }
            let client = collector.client.clone();
            ctx.spawn(
                async move {
                    match client.get(resources::core("nodes"), "", &node).await {
                        Err(ApiError::NotFound { .. }) => {
                            delete_orphans(client.as_ref(), &node).await
                        }
                        Ok(_) => {}
                        Err(error) => tracing::debug!(%node, %error, "checking a node gone"),
                    }
                }
                .into_actor(collector),
            );
        });
    }

    /// Deletes the oldest finished pods past the threshold.
    fn sweep_finished(&self, ctx: &mut Context<Self>) {
        let threshold = self.config.terminated_threshold;
        if threshold == 0 {
            return;
        }
        let client = self.client.clone();
        ctx.spawn(
            async move {
                let mut finished = Vec::new();
                for phase in ["Succeeded", "Failed"] {
                    let options = ListOptions {
                        field_selector: Some(format!("status.phase={phase}")),
                        ..ListOptions::default()
                    };
                    match client.list(resources::core("pods"), None, &options).await {
                        Ok(listed) => finished.extend(listed.items),
                        Err(error) => {
                            tracing::debug!(%error, "listing finished pods");
                            return;
                        }
                    }
                }
                if finished.len() <= threshold {
                    return;
                }
                let created = |p: &Value| {
                    let at = json::at(p, "/metadata/creationTimestamp").and_then(Value::as_str);
                    (at.unwrap_or("").to_string(), object_name(p).to_string())
                };
                finished.sort_by_cached_key(created);
                let excess = finished.len() - threshold;
                for pod in finished.into_iter().take(excess) {
                    force_delete(client.as_ref(), &pod).await;
                }
            }
            .into_actor(self),
        );
    }

    /// Once: the bound pods whose node is unknown are quarantined with it.
    fn sweep_bound(&mut self, ctx: &mut Context<Self>) {
        if std::mem::replace(&mut self.swept_bound, true) {
            return;
        }
        let client = self.client.clone();
        let addr = ctx.address();
        actix::spawn(async move {
            let options = ListOptions {
                field_selector: Some("spec.nodeName!=".into()),
                ..ListOptions::default()
            };
            match client.list(resources::core("pods"), None, &options).await {
                Ok(listed) => {
                    let bound = listed.items.iter().filter_map(|p| {
                        json::at(p, "/spec/nodeName").and_then(Value::as_str).map(String::from)
                    });
                    addr.do_send(Unknown(bound.collect()));
                }
                Err(error) => tracing::debug!(%error, "listing bound pods"),
            }
        });
    }
}

/// Marks the pods bound to `node` failed and deletes them at once.
async fn delete_orphans(client: &dyn ApiClient, node: &str) {
    let options = ListOptions {
        field_selector: Some(format!("spec.nodeName={node}")),
        ..ListOptions::default()
    };
    let orphans = match client.list(resources::core("pods"), None, &options).await {
        Ok(listed) => listed.items,
        Err(error) => {
            tracing::debug!(%node, %error, "listing a gone node's pods");
            return;
        }
    };
    for pod in orphans {
        let namespace = json::at(&pod, "/metadata/namespace").and_then(Value::as_str);
        let (namespace, name) = (namespace.unwrap_or(""), object_name(&pod));
        let phase = json::at(&pod, "/status/phase").and_then(Value::as_str);
        let mut status = json!({"conditions": [{"type": "DisruptionTarget", "status": "True",
            "reason": "DeletionByPodGC", "message": "PodGC: node no longer exists",
            "lastTransitionTime": crate::model::now()}]});
        if !matches!(phase, Some("Succeeded" | "Failed")) {
            status["phase"] = json!("Failed");
        }
        let patch = json!({"metadata": {"uid": object_uid(&pod)}, "status": status});
        let strategic = PatchType::StrategicMerge;
        if let Err(error) =
            client.patch(resources::core("pods"), namespace, name, strategic, &patch, true).await
        {
            tracing::debug!(%namespace, %name, %error, "marking an orphaned pod failed");
        }
        force_delete(client, &pod).await;
    }
}

/// Deletes `pod` with no grace period (this pod, not another of its name).
async fn force_delete(client: &dyn ApiClient, pod: &Value) {
    let namespace = json::at(pod, "/metadata/namespace").and_then(Value::as_str).unwrap_or("");
    let name = object_name(pod);
    let options = DeleteOptions {
        grace_period_seconds: Some(0),
        precondition_uid: Some(object_uid(pod).to_string()),
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
        let addr = ctx.address();
        let client = self.client.clone();
        actix::spawn(informer::list_watch(
            client,
            resources::core("nodes"),
            Scope::default(),
            move |feed| {
                addr.do_send(Nodes(feed));
                addr.connected()
            },
        ));
        ctx.run_interval(self.config.period, |collector, ctx| collector.sweep_finished(ctx));
    }
}

impl Handler<Nodes> for PodGarbageCollector {
    type Result = ();

    fn handle(&mut self, Nodes(feed): Nodes, ctx: &mut Context<Self>) {
        match feed {
            Feed::Listed(items) => {
                let listed: BTreeSet<String> =
                    items.iter().map(|n| object_name(n).to_string()).collect();
                let gone: Vec<String> = self.nodes.difference(&listed).cloned().collect();
                self.nodes = listed;
                gone.into_iter().for_each(|node| self.quarantine(node, ctx));
                self.sweep_bound(ctx);
            }
            Feed::Changed(EventType::Deleted, node) => {
                let name = object_name(&node).to_string();
                self.nodes.remove(&name);
                self.quarantine(name, ctx);
            }
            Feed::Changed(_, node) => {
                self.nodes.insert(object_name(&node).to_string());
            }
            Feed::Unavailable(_) => {}
        }
    }
}

impl Handler<Unknown> for PodGarbageCollector {
    type Result = ();

    fn handle(&mut self, Unknown(bound_to): Unknown, ctx: &mut Context<Self>) {
        let unknown: Vec<String> = bound_to.difference(&self.nodes).cloned().collect();
        unknown.into_iter().for_each(|node| self.quarantine(node, ctx));
    }
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
}
