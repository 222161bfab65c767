//! The namespace controller: empties a namespace being deleted, then lets it go, as
//! Kubernetes' does. A deleted namespace is only marked (Terminating, and the API server takes
//! no new objects in it); this controller deletes everything in it (pods gracefully, objects
//! with finalizers only marked, dependents in the background), sweeps it again every second
//! until nothing is left, saying in the namespace's conditions what is (as Kubernetes'
//! `NamespaceContentRemaining` and `NamespaceFinalizersRemaining`), and then removes its
//! `kubernetes` entry from `spec.finalizers`, with which the API server removes the namespace.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use serde_json::{json, Value};

use crate::client::informer::{self, Feed};
use crate::client::{object_name, object_uid, ApiClient};
use crate::core::{
    ApiError, DeleteOptions, ListOptions, PatchType, FOREGROUND_FINALIZER, ORPHAN_FINALIZER,
};
use crate::model::{json, now, resources, FastMap, FastSet, ResourceType};
use crate::watch::EventType;

pub use crate::model::finalizers::NAMESPACE_FINALIZER;

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
/// under its name): deletes what is in it, says in its conditions what is left (and what could
/// not be deleted), and, when nothing is, finalizes it.
async fn sweep(client: &dyn ApiClient, namespace: &str, uid: &str) -> Result<(), ApiError> {
    let Some(current) = still_terminating(client, namespace, uid).await? else {
        return Ok(());
    };
    let mut left = Remaining::default();
    let contents = resources::RESOURCES.iter().filter(|r| r.namespaced && resources::is_stored(r));
    for resource in contents {
        // A failure with one resource does not stop the others, as in Kubernetes: it is
        // reported in the namespace's conditions.
        if let Err(why) = delete_all_of(client, &current, resource, &mut left).await {
            left.failed(why);
        }
    }
    // The conditions say what is left, and that nothing is once it is all gone (the
    // namespace may stay longer, for other finalizers of its own).
    report(client, &current, &left).await?;
    if !left.is_empty() {
        return Ok(());
    }
    finalize(client, namespace, uid).await
}

/// Deletes every `resource` in `namespace` and notes in `left` what stays; an error when
/// something stays that nothing should hold any longer (as Kubernetes' deleter judges it: no
/// finalizer on it, and, for pods, their longest grace period since the namespace's deletion
/// run out).
async fn delete_all_of(
    client: &dyn ApiClient,
    namespace: &Value,
    resource: &'static ResourceType,
    left: &mut Remaining,
) -> Result<(), String> {
    let name = object_name(namespace);
    let options = ListOptions::default();
    let list = client.list(resource, Some(name), &options).await.map_err(|e| e.to_string())?;
    let mut stayed: Vec<Value> = Vec::new();
    for object in &list.items {
        // One marked already is deleted again (in the background) only to lose the garbage
        // collector's finalizers an earlier delete left (an owner waiting in the foreground for
        // its dependents, which go with the namespace anyway), as Kubernetes' deletes of the
        // namespace's collections strip them; a pod once marked takes no such change.
        let collected = |f: &Value| f == ORPHAN_FINALIZER || f == FOREGROUND_FINALIZER;
        let holds_collector = json::at(object, "/metadata/finalizers")
            .and_then(Value::as_array)
            .is_some_and(|f| f.iter().any(collected));
        let is_pod = resource.kind == "Pod" && resource.group.is_empty();
        if crate::model::is_being_deleted(object) && (is_pod || !holds_collector) {
            stayed.push(object.clone());
            continue;
        }
        // Exactly this object (not one created again under its name), its dependents in
        // the background, as Kubernetes' namespace deleter asks.
        let options = DeleteOptions {
            precondition_uid: Some(object_uid(object).to_string()),
            propagation_policy: Some("Background".into()),
            ..DeleteOptions::default()
        };
        match client.delete(resource, name, object_name(object), &options).await {
            // Marked, not gone: a pod stopping, an object with finalizers.
            Ok(marked) if crate::model::is_being_deleted(&marked) => stayed.push(marked),
            Ok(_) | Err(ApiError::NotFound { .. }) => {}
            // Changed since listed: the next sweep sees it again.
            Err(ApiError::Conflict { .. }) => stayed.push(object.clone()),
            Err(error) => return Err(error.to_string()),
        }
    }
    stayed.iter().for_each(|object| left.note(resource, object));
    let held = stayed.iter().any(|o| {
        json::at(o, "/metadata/finalizers").and_then(Value::as_array).is_some_and(|f| !f.is_empty())
    });
    if stayed.is_empty() || held || grace_left(namespace, resource, &list.items) {
        return Ok(());
    }
    let version = match resource.group {
        "" => format!("/{}", resource.version),
        group => format!("{group}/{}", resource.version),
    };
    Err(format!(
        "unexpected items still remain in namespace: {name} for gvr: {version}, Resource={}",
        resource.plural
    ))
}

/// Whether pods in the namespace may still be stopping: the longest grace period of those not
/// finished has not run out since the namespace was deleted (Kubernetes' estimate).
fn grace_left(namespace: &Value, resource: &ResourceType, items: &[Value]) -> bool {
    if resource.kind != "Pod" || !resource.group.is_empty() {
        return false;
    }
    let running = items.iter().filter(|pod| {
        let phase = json::at(pod, "/status/phase").and_then(Value::as_str);
        !matches!(phase, Some("Succeeded" | "Failed"))
    });
    let grace = |pod: &Value| {
        json::at(pod, "/spec/terminationGracePeriodSeconds").and_then(Value::as_i64).unwrap_or(0)
    };
    let estimate = running.map(grace).max().unwrap_or(0);
    let deleted = json::at(namespace, "/metadata/deletionTimestamp").and_then(Value::as_str);
    let elapsed = deleted.and_then(crate::model::seconds_since).unwrap_or(i64::MAX);
    elapsed < estimate
}

/// What a sweep left in a namespace: how many objects of each resource (`plural.group`), and
/// how many hold each finalizer.
#[derive(Debug, Default)]
struct Remaining {
    resources: BTreeMap<String, usize>,
    finalizers: BTreeMap<String, usize>,
    /// Why resources could not be emptied.
    failures: Vec<String>,
}

/// The conditions of a namespace being deleted, in Kubernetes' order, with what each says
/// when nothing is wrong (status False).
const DELETION_CONDITIONS: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    ("NamespaceContentRemaining", "ContentRemoved", "All content successfully removed"),
    (
        "NamespaceFinalizersRemaining",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
];

impl Remaining {
    fn note(&mut self, resource: &ResourceType, object: &Value) {
        let name = format!("{}.{}", resource.plural, resource.group);
        *self.resources.entry(name).or_default() += 1;
        let finalizers = json::at(object, "/metadata/finalizers").and_then(Value::as_array);
        for finalizer in finalizers.into_iter().flatten().filter_map(Value::as_str) {
            *self.finalizers.entry(finalizer.to_string()).or_default() += 1;
        }
    }

    fn failed(&mut self, why: String) {
        self.failures.push(why);
    }

    fn is_empty(&self) -> bool {
        self.resources.is_empty() && self.failures.is_empty()
    }

    /// Type, status, reason and message of each deletion condition, as Kubernetes' namespace
    /// controller words them.
    fn conditions(&self) -> Vec<(&'static str, &'static str, String, String)> {
        let counted = |counts: &BTreeMap<String, usize>, unit: &str| {
            let listed =
                counts.iter().map(|(what, n)| format!("{what} {unit} {n} resource instances"));
            listed.collect::<Vec<_>>().join(", ")
        };
        DELETION_CONDITIONS
            .iter()
            .map(|&(kind, ok_reason, ok_message)| match kind {
                "NamespaceDeletionContentFailure" if !self.failures.is_empty() => {
                    let mut failures = self.failures.clone();
                    failures.sort();
                    let message = format!(
                        "Failed to delete all resource types, {} remaining: {}",
                        failures.len(),
                        failures.join(", ")
                    );
                    (kind, "True", "ContentDeletionFailed".to_string(), message)
                }
                "NamespaceContentRemaining" if !self.resources.is_empty() => {
                    let message = format!(
                        "Some resources are remaining: {}",
                        counted(&self.resources, "has")
                    );
                    (kind, "True", "SomeResourcesRemain".to_string(), message)
                }
                "NamespaceFinalizersRemaining" if !self.finalizers.is_empty() => {
                    let message = format!(
                        "Some content in the namespace has finalizers remaining: {}",
                        counted(&self.finalizers, "in")
                    );
                    (kind, "True", "SomeFinalizersRemain".to_string(), message)
                }
                _ => (kind, "False", ok_reason.to_string(), ok_message.to_string()),
            })
            .collect()
    }
}

/// Writes what is left in `namespace` into its deletion conditions, when that has changed: a
/// condition whose status stays keeps its transition time.
async fn report(
    client: &dyn ApiClient,
    namespace: &Value,
    left: &Remaining,
) -> Result<(), ApiError> {
    let old = json::at(namespace, "/status/conditions").and_then(Value::as_array);
    let old = old.cloned().unwrap_or_default();
    let deletion = |c: &Value| DELETION_CONDITIONS.iter().any(|(kind, ..)| c["type"] == *kind);
    let mut conditions: Vec<Value> = old.iter().filter(|c| !deletion(c)).cloned().collect();
    for (kind, status, reason, message) in left.conditions() {
        let before = old.iter().find(|c| c["type"] == kind && c["status"] == status);
        let since = before.map_or_else(|| json!(now()), |c| c["lastTransitionTime"].clone());
        conditions.push(json!({"type": kind, "status": status, "lastTransitionTime": since,
            "reason": reason, "message": message}));
    }
    if conditions == old {
        return Ok(());
    }
    let name = object_name(namespace);
    let patch = json!({"status": {"conditions": conditions}});
    match client.patch(namespaces(), "", name, PatchType::Merge, &patch, true).await {
        Ok(_) | Err(ApiError::NotFound { .. }) | Err(ApiError::Conflict { .. }) => Ok(()),
        Err(error) => Err(error),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_say_what_remains_and_which_finalizers_hold_it() {
        let mut left = Remaining::default();
        assert!(left.is_empty());
        let pods = resources::core("pods");
        let slices = resources::find("discovery.k8s.io", "v1", "endpointslices").unwrap();
        left.note(pods, &json!({"metadata": {"finalizers": ["a/b"]}}));
        left.note(pods, &json!({"metadata": {}}));
        left.note(slices, &json!({"metadata": {"finalizers": ["a/b", "c/d"]}}));
        let conditions = left.conditions();
        let types: Vec<&str> = conditions.iter().map(|c| c.0).collect();
        assert_eq!(types, DELETION_CONDITIONS.map(|c| c.0));
        assert_eq!(conditions[0].1, "False");
        assert_eq!(
            (conditions[3].1, conditions[3].3.as_str()),
            (
                "True",
                "Some resources are remaining: endpointslices.discovery.k8s.io has 1 \
              resource instances, pods. has 2 resource instances"
            )
        );
        assert_eq!(
            conditions[4].3,
            "Some content in the namespace has finalizers remaining: a/b in 2 resource \
             instances, c/d in 1 resource instances"
        );
    }

    #[test]
    fn content_that_nothing_holds_is_a_failure_once_pods_had_their_grace() {
        let mut left = Remaining::default();
        left.failed(
            "unexpected items still remain in namespace: n for gvr: /v1, Resource=pods".into(),
        );
        assert!(!left.is_empty());
        let failure = &left.conditions()[2];
        assert_eq!(
            (failure.0, failure.1, failure.2.as_str()),
            ("NamespaceDeletionContentFailure", "True", "ContentDeletionFailed")
        );
        assert_eq!(
            failure.3,
            "Failed to delete all resource types, 1 remaining: unexpected items still remain in \
             namespace: n for gvr: /v1, Resource=pods"
        );
        let pods = resources::core("pods");
        let deleted_ago = |seconds: i64| {
            let at = chrono::Utc::now() - chrono::Duration::seconds(seconds);
            json!({"metadata": {"deletionTimestamp": at.to_rfc3339()}})
        };
        let pod = |grace: i64, phase: &str| json!({"spec": {"terminationGracePeriodSeconds": grace}, "status": {"phase": phase}});
        assert!(grace_left(&deleted_ago(5), pods, &[pod(30, "Running")]));
        assert!(!grace_left(&deleted_ago(40), pods, &[pod(30, "Running")]));
        assert!(
            !grace_left(&deleted_ago(5), pods, &[pod(30, "Succeeded")]),
            "finished pods wait for nothing"
        );
        let secrets = resources::core("secrets");
        assert!(!grace_left(&deleted_ago(5), secrets, &[pod(30, "Running")]));
    }
}
