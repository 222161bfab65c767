//! The garbage collector: keeps a graph of owners and dependents (from list-watches of every
//! served resource) and acts on deletions, as Kubernetes' does:
//! - an owner deleted (Background): dependents none of whose owners remain are deleted;
//! - an owner marked with the `orphan` finalizer: its ownerReferences are removed from the
//!   dependents, then the finalizer, so the owner goes and the dependents stay;
//! - an owner marked with the `foregroundDeletion` finalizer: its dependents are deleted, and once
//!   none is left the finalizer is removed, so the owner goes last.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use actix::prelude::*;
use serde_json::{json, Value};

use crate::client::informer::{self, Feed};
use crate::client::ApiClient;
use crate::core::{ApiError, DeleteOptions, PatchType, FOREGROUND_FINALIZER, ORPHAN_FINALIZER};
use crate::model::{resources, ResourceType};
use crate::watch::EventType;

/// What the collector knows of one object.
#[derive(Debug, Clone)]
struct Node {
    resource: &'static ResourceType,
    namespace: String,
    name: String,
    owners: Vec<String>,
    finalizers: Vec<String>,
    deleting: bool,
}

/// Stops the collector (its list-watches end with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopCollector;

impl Handler<StopCollector> for GarbageCollector {
    type Result = ();

    fn handle(&mut self, _: StopCollector, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

/// A feed of one resource.
#[derive(Message)]
#[rtype(result = "()")]
struct Informed(&'static ResourceType, Feed);

/// The garbage collector actor.
pub struct GarbageCollector {
    client: Arc<dyn ApiClient>,
    nodes: HashMap<String, Node>,
    dependents: HashMap<String, HashSet<String>>,
    /// Resources listed at least once: dangling references are only judged after all are.
    listed: HashSet<&'static str>,
    /// How many resources there are to list (those stored as themselves).
    to_list: usize,
}

fn uid_of(object: &Value) -> String {
    object.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("").to_string()
}

impl GarbageCollector {
    pub fn new(client: Arc<dyn ApiClient>) -> Self {
        let to_list = resources::RESOURCES.iter().filter(|r| resources::is_stored(r)).count();
        Self {
            client,
            nodes: HashMap::new(),
            dependents: HashMap::new(),
            listed: HashSet::new(),
            to_list,
        }
    }

    fn all_listed(&self) -> bool {
        self.listed.len() == self.to_list
    }

    fn upsert(&mut self, resource: &'static ResourceType, object: &Value) -> String {
        let uid = uid_of(object);
        self.remove(&uid);
        let meta = &object["metadata"];
        let strings = |v: &Value| -> Vec<String> {
            v.as_array()
                .into_iter()
                .flatten()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        };
        let owners: Vec<String> = meta["ownerReferences"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["uid"].as_str().map(String::from))
            .collect();
        for owner in &owners {
            self.dependents.entry(owner.clone()).or_default().insert(uid.clone());
        }
        self.nodes.insert(
            uid.clone(),
            Node {
                resource,
                namespace: meta["namespace"].as_str().unwrap_or("").to_string(),
                name: meta["name"].as_str().unwrap_or("").to_string(),
                owners,
                finalizers: strings(&meta["finalizers"]),
                deleting: meta.get("deletionTimestamp").is_some_and(|t| !t.is_null()),
            },
        );
        uid
    }

    fn remove(&mut self, uid: &str) -> Option<Node> {
        let node = self.nodes.remove(uid)?;
        for owner in &node.owners {
            if let Some(set) = self.dependents.get_mut(owner) {
                set.remove(uid);
                if set.is_empty() {
                    self.dependents.remove(owner);
                }
            }
        }
        Some(node)
    }

    /// Live dependents of `uid`.
    fn dependents_of(&self, uid: &str) -> Vec<String> {
        self.dependents
            .get(uid)
            .into_iter()
            .flatten()
            .filter(|d| self.nodes.contains_key(*d))
            .cloned()
            .collect()
    }

    /// Acts on whatever `uid`'s state asks for.
    fn process(&mut self, uid: &str, ctx: &mut Context<Self>) {
        let Some(node) = self.nodes.get(uid).cloned() else {
            // Gone: its dependents may have no owner left.
            for dependent in self.dependents_of(uid) {
                self.collect_if_orphaned(&dependent, ctx);
            }
            return;
        };
        if !node.deleting {
            return;
        }
        let dependents = self.dependents_of(uid);
        if node.finalizers.iter().any(|f| f == ORPHAN_FINALIZER) {
            for dependent in &dependents {
                self.drop_owner_reference(dependent, uid, ctx);
            }
            self.remove_finalizer(uid, ORPHAN_FINALIZER, ctx);
        } else if node.finalizers.iter().any(|f| f == FOREGROUND_FINALIZER) {
            if dependents.is_empty() {
                self.remove_finalizer(uid, FOREGROUND_FINALIZER, ctx);
            }
            for dependent in dependents {
                self.delete(&dependent, ctx);
            }
        }
    }

    /// Deletes `uid` if none of its owners exists any more.
    fn collect_if_orphaned(&mut self, uid: &str, ctx: &mut Context<Self>) {
        let Some(node) = self.nodes.get(uid) else { return };
        if !node.owners.is_empty() && node.owners.iter().all(|o| !self.nodes.contains_key(o)) {
            self.delete(uid, ctx);
        }
    }

    fn delete(&self, uid: &str, ctx: &mut Context<Self>) {
        let Some(node) = self.nodes.get(uid).cloned() else { return };
        let client = self.client.clone();
        let options = DeleteOptions {
            precondition_uid: Some(uid.to_string()),
            propagation_policy: Some("Background".into()),
            ..DeleteOptions::default()
        };
        ctx.spawn(
            async move {
                match client.delete(node.resource, &node.namespace, &node.name, &options).await {
                    Ok(_) | Err(ApiError::NotFound { .. }) | Err(ApiError::Conflict { .. }) => {}
                    Err(error) => tracing::warn!(name = %node.name, %error, "garbage collecting"),
                }
            }
            .into_actor(self),
        );
    }

    fn drop_owner_reference(&self, uid: &str, owner: &str, ctx: &mut Context<Self>) {
        let owner = owner.to_string();
        self.remove_from_metadata(
            uid,
            "ownerReferences",
            move |r| r["uid"].as_str() == Some(&owner),
            ctx,
        );
    }

    fn remove_finalizer(&self, uid: &str, finalizer: &'static str, ctx: &mut Context<Self>) {
        self.remove_from_metadata(uid, "finalizers", move |f| f.as_str() == Some(finalizer), ctx);
    }

    /// Removes the entries of the list `metadata.<field>` of `uid` that `unwanted` picks, with
    /// a merge patch pinned to the version read (a conflict is retried on the next event).
    fn remove_from_metadata(
        &self,
        uid: &str,
        field: &'static str,
        unwanted: impl Fn(&Value) -> bool + 'static,
        ctx: &mut Context<Self>,
    ) {
        let Some(node) = self.nodes.get(uid).cloned() else { return };
        let client = self.client.clone();
        ctx.spawn(
            async move {
                let Ok(object) = client.get(node.resource, &node.namespace, &node.name).await
                else {
                    return;
                };
                let kept: Vec<Value> = object["metadata"][field]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|v| !unwanted(v))
                    .cloned()
                    .collect();
                let patch = json!({"metadata": {field: kept,
                    "resourceVersion": object["metadata"]["resourceVersion"]}});
                let (resource, ns, name) = (node.resource, &node.namespace, &node.name);
                match client.patch(resource, ns, name, PatchType::Merge, &patch, false).await {
                    Ok(_) | Err(ApiError::NotFound { .. }) | Err(ApiError::Conflict { .. }) => {}
                    Err(error) => tracing::warn!(%name, field, %error, "garbage collector patch"),
                }
            }
            .into_actor(self),
        );
    }
}

impl Actor for GarbageCollector {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        for resource in resources::RESOURCES.iter().filter(|r| resources::is_stored(r)) {
            let addr = ctx.address();
            let client = self.client.clone();
            let scope = informer::Scope { metadata_only: true, ..Default::default() };
            actix::spawn(informer::list_watch(client, resource, scope, move |feed| {
                addr.do_send(Informed(resource, feed));
                addr.connected()
            }));
        }
    }
}

impl Handler<Informed> for GarbageCollector {
    type Result = ();

    fn handle(&mut self, Informed(resource, feed): Informed, ctx: &mut Context<Self>) {
        match feed {
            Feed::Listed(items) => {
                let stale: Vec<String> = self
                    .nodes
                    .iter()
                    .filter(|(_, n)| n.resource == resource)
                    .map(|(uid, _)| uid.clone())
                    .collect();
                for uid in stale {
                    self.remove(&uid);
                }
                for item in &items {
                    self.upsert(resource, item);
                }
                self.listed.insert(resource.plural);
                if self.all_listed() {
                    // Everything is known: deal with what happened while nobody watched.
                    let all: Vec<String> = self.nodes.keys().cloned().collect();
                    for uid in all {
                        self.collect_if_orphaned(&uid, ctx);
                        self.process(&uid, ctx);
                    }
                }
            }
            Feed::Changed(EventType::Deleted, object) => {
                let uid = uid_of(&object);
                let owners = self.remove(&uid).map(|n| n.owners).unwrap_or_default();
                if self.all_listed() {
                    self.process(&uid, ctx);
                    // A foreground owner may be waiting for this dependent.
                    for owner in owners {
                        self.process(&owner, ctx);
                    }
                }
            }
            Feed::Changed(_, object) => {
                let uid = self.upsert(resource, &object);
                if self.all_listed() {
                    self.collect_if_orphaned(&uid, ctx);
                    self.process(&uid, ctx);
                }
            }
            Feed::Unavailable(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::core::ApiCore;
    use crate::testing::{core, eventually};

    fn cms() -> &'static ResourceType {
        resources::find("", "v1", "configmaps").unwrap()
    }

    async fn create(
        core: &ApiCore,
        name: &str,
        owner: Option<&Value>,
        finalizers: &[&str],
    ) -> Value {
        let mut meta = json!({"name": name, "finalizers": finalizers});
        if let Some(owner) = owner {
            meta["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap",
                "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}]);
        }
        ApiClient::create(core, cms(), "default", json!({"metadata": meta})).await.unwrap()
    }

    async fn get(core: &ApiCore, name: &str) -> Option<Value> {
        ApiClient::get(core, cms(), "default", name).await.ok()
    }

    async fn delete(core: &ApiCore, name: &str, policy: &str) {
        let options =
            DeleteOptions { propagation_policy: Some(policy.into()), ..Default::default() };
        ApiClient::delete(core, cms(), "default", name, &options).await.unwrap();
    }

    #[actix::test]
    async fn background_orphan_and_foreground_deletion() {
        let core = core().await;
        // A dependent whose owner never existed is collected once the collector starts.
        let ghost = json!({"metadata": {"name": "ghost", "uid": "no-such-uid"}});
        create(&core, "haunted", Some(&ghost), &[]).await;
        GarbageCollector::new(Arc::new(core.clone())).start();
        eventually("the dangling dependent is collected", || async {
            get(&core, "haunted").await.is_none().then_some(())
        })
        .await;

        let owner = create(&core, "owner", None, &[]).await;
        create(&core, "dep", Some(&owner), &[]).await;
        delete(&core, "owner", "Background").await;
        eventually("the dependent follows its owner", || async {
            get(&core, "dep").await.is_none().then_some(())
        })
        .await;

        let owner = create(&core, "owner2", None, &[]).await;
        create(&core, "dep2", Some(&owner), &[]).await;
        delete(&core, "owner2", "Orphan").await;
        eventually("the owner goes", || async {
            get(&core, "owner2").await.is_none().then_some(())
        })
        .await;
        let orphan = get(&core, "dep2").await.expect("an orphan stays");
        assert_eq!(orphan["metadata"]["ownerReferences"], json!([]));

        let owner = create(&core, "owner3", None, &[]).await;
        create(&core, "dep3", Some(&owner), &["example.com/hold"]).await;
        delete(&core, "owner3", "Foreground").await;
        let held = eventually("the dependent is being deleted", || async {
            get(&core, "dep3").await.filter(|d| d["metadata"]["deletionTimestamp"].is_string())
        })
        .await;
        let owner = get(&core, "owner3").await.expect("the owner waits for its dependents");
        assert_eq!(owner["metadata"]["finalizers"], json!(["foregroundDeletion"]));
        let mut released = held;
        released["metadata"]["finalizers"] = json!([]);
        ApiClient::update(&core, cms(), "default", released).await.unwrap();
        eventually("the owner goes last", || async {
            get(&core, "owner3").await.is_none().then_some(())
        })
        .await;
    }
}
