//! The namespace controller: empties a namespace being deleted, then lets it go, as
//! Kubernetes' does. A deleted namespace is only marked (Terminating, and the API server takes
//! no new objects in it); this controller deletes everything in it (pods gracefully, objects
//! with finalizers only marked, dependents in the background), sweeps it again every second
//! until nothing is left, and then removes its `kubernetes` entry from `spec.finalizers`, with
//! which the API server removes the namespace.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use serde_json::{json, Value};

use crate::client::informer::{self, Feed};
use crate::client::{object_name, object_uid, ApiClient};
use crate::core::{ApiError, DeleteOptions, ListOptions};
use crate::model::{json, resources, FastMap, FastSet, ResourceType};
use crate::watch::EventType;

/// The entry of a namespace's `spec.finalizers` this controller removes once it is empty.
pub const NAMESPACE_FINALIZER: &str = "kubernetes";

/// How often a namespace still being emptied is swept again.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// The namespace controller actor.
pub struct NamespaceController {
    client: Arc<dyn ApiClient>,
    /// Namespaces marked for deletion, as the informer last saw them, with their uids (a
    /// namespace created again under the name is another one).
    terminating: FastMap<String, String>,
    /// Those a sweep is running for now.
    sweeping: FastSet<String>,
}

/// A feed of namespaces.
#[derive(Message)]
#[rtype(result = "()")]
struct Informed(Feed);

/// Stops the controller (its list-watch ends with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopNamespaceController;

impl NamespaceController {
    pub fn new(client: Arc<dyn ApiClient>) -> Self {
        Self { client, terminating: FastMap::default(), sweeping: FastSet::default() }
    }

    /// Starts a sweep of each terminating namespace that has none running.
    fn sweep_all(&mut self, ctx: &mut Context<Self>) {
        let idle: Vec<(String, String)> = self
            .terminating
            .iter()
            .filter(|(ns, _)| !self.sweeping.contains(*ns))
            .map(|(ns, uid)| (ns.clone(), uid.clone()))
            .collect();
        for (namespace, uid) in idle {
            self.sweeping.insert(namespace.clone());
            let client = self.client.clone();
            let swept = async move {
                let result = sweep(&*client, &namespace, &uid).await;
                (namespace, result)
            };
            ctx.spawn(swept.into_actor(self).map(|(namespace, result), act, _| {
                act.sweeping.remove(&namespace);
                if let Err(error) = result {
                    tracing::warn!(%namespace, %error, "emptying a deleted namespace");
                }
            }));
        }
    }

    fn saw(&mut self, namespace: &Value) {
        let name = object_name(namespace).to_string();
        if crate::model::is_being_deleted(namespace) {
            self.terminating.insert(name, object_uid(namespace).to_string());
        } else {
            self.terminating.remove(&name);
        }
    }
}

fn namespaces() -> &'static ResourceType {
    resources::core("namespaces")
}

/// The namespace `name` if it is still the one with `uid`, being deleted.
async fn still_terminating(
    client: &dyn ApiClient,
    name: &str,
    uid: &str,
) -> Result<Option<Value>, ApiError> {
    match client.get(namespaces(), "", name).await {
        Ok(current) if object_uid(&current) == uid && crate::model::is_being_deleted(&current) => {
            Ok(Some(current))
        }
        Ok(_) | Err(ApiError::NotFound { .. }) => Ok(None),
        Err(error) => Err(error),
    }
}

/// One pass over a terminating namespace (the one with `uid`: not one created again since
/// under its name): deletes what is in it and, when nothing is left, finalizes it.
async fn sweep(client: &dyn ApiClient, namespace: &str, uid: &str) -> Result<(), ApiError> {
    if still_terminating(client, namespace, uid).await?.is_none() {
        return Ok(());
    }
    let mut left = 0;
    let contents = resources::RESOURCES.iter().filter(|r| r.namespaced && resources::is_stored(r));
    for resource in contents {
        let list = client.list(resource, Some(namespace), &ListOptions::default()).await?;
        for object in &list.items {
            if crate::model::is_being_deleted(object) {
                left += 1;
                continue;
            }
            // Exactly this object (not one created again under its name), its dependents in
            // the background, as Kubernetes' namespace deleter asks.
            let options = DeleteOptions {
                precondition_uid: Some(object_uid(object).to_string()),
                propagation_policy: Some("Background".into()),
                ..DeleteOptions::default()
            };
            match client.delete(resource, namespace, object_name(object), &options).await {
                // Marked, not gone: a pod stopping, an object with finalizers.
                Ok(marked) if crate::model::is_being_deleted(&marked) => left += 1,
                Ok(_) | Err(ApiError::NotFound { .. }) => {}
                // Changed since listed: the next sweep sees it again.
                Err(ApiError::Conflict { .. }) => left += 1,
                Err(error) => return Err(error),
            }
        }
    }
    if left > 0 {
        return Ok(());
    }
    finalize(client, namespace, uid).await
}

/// Removes `kubernetes` from the empty namespace's `spec.finalizers`, pinned to the version
/// read; with no finalizer left, the API server removes the namespace.
async fn finalize(client: &dyn ApiClient, namespace: &str, uid: &str) -> Result<(), ApiError> {
    let Some(current) = still_terminating(client, namespace, uid).await? else {
        return Ok(());
    };
    let finalizers = json::at(&current, "/spec/finalizers").and_then(Value::as_array);
    let finalizers = finalizers.cloned().unwrap_or_default();
    if !finalizers.iter().any(|f| f == NAMESPACE_FINALIZER) {
        return Ok(());
    }
    let kept: Vec<Value> = finalizers.into_iter().filter(|f| f != NAMESPACE_FINALIZER).collect();
    let version = json::at(&current, "/metadata/resourceVersion").cloned();
    let finalized = json!({"metadata": {"name": namespace, "resourceVersion": version},
        "spec": {"finalizers": kept}});
    match client.finalize(finalized).await {
        // A conflict: something changed it since; the next sweep looks again.
        Ok(_) | Err(ApiError::NotFound { .. }) | Err(ApiError::Conflict { .. }) => Ok(()),
        Err(error) => Err(error),
    }
}

impl Actor for NamespaceController {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        informer::feed_actor(ctx, client, namespaces(), Default::default(), Informed);
        ctx.run_interval(SWEEP_EVERY, |act, ctx| act.sweep_all(ctx));
    }
}

impl Handler<Informed> for NamespaceController {
    type Result = ();

    fn handle(&mut self, Informed(feed): Informed, ctx: &mut Context<Self>) {
        match feed {
            Feed::Listed(items) => {
                self.terminating.clear();
                items.iter().for_each(|ns| self.saw(ns));
            }
            Feed::Changed(EventType::Deleted, namespace) => {
                self.terminating.remove(object_name(&namespace));
            }
            Feed::Changed(_, namespace) => self.saw(&namespace),
            Feed::Unavailable(_) => return,
        }
        self.sweep_all(ctx);
    }
}

impl Handler<StopNamespaceController> for NamespaceController {
    type Result = ();

    fn handle(&mut self, _: StopNamespaceController, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}
