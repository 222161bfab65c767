//! The garbage collector: keeps a graph of owners and dependents (from list-watches of every
//! served resource) and acts on deletions, as Kubernetes' does:
//! - an owner deleted (Background): dependents none of whose owners remain are deleted;
//! - an owner marked with the `orphan` finalizer: its ownerReferences are removed from the
//!   dependents, then the finalizer, so the owner goes and the dependents stay;
//! - an owner marked with the `foregroundDeletion` finalizer: its dependents are deleted (those
//!   with another owner that stays only let go of it), and once none is left whose reference
//!   says `blockOwnerDeletion`, the finalizer is removed, so the owner goes after them.
//!
//! An owner is one of the dependent's namespace (or cluster-scoped): a namespaced object
//! whose reference names an owner in another namespace has no such owner, and is collected
//! with an `OwnerRefInvalidNamespace` warning. A reference the collector cannot resolve (a
//! kind not served here, or a namespaced owner of a cluster-scoped object) keeps its object
//! for good, as Kubernetes' collector retries one it cannot map rather than delete.

use std::sync::Arc;

use actix::prelude::*;
use serde_json::{json, Value};

use crate::client::events::{self, EventKind, ObjectRef};
use crate::client::informer::{self, Feed};
use crate::client::{object_uid, ApiClient};
use crate::core::{
    ApiError, DeleteOptions, ObjectView, PatchType, FOREGROUND_FINALIZER, ORPHAN_FINALIZER,
};
use crate::model::{resources, FastMap, FastSet, ResourceType};
use crate::watch::EventType;

/// What the collector knows of one object.
#[derive(Debug, Clone)]
struct Node {
    resource: &'static ResourceType,
    namespace: String,
    name: String,
    owners: Vec<String>,
    /// The owners whose reference says `blockOwnerDeletion: true`: their foreground deletion
    /// waits for this object to go.
    blocking: Vec<String>,
    finalizers: Vec<String>,
    deleting: bool,
    /// The object's owner references, for the events that name them.
    references: Vec<Value>,
    /// A reference cannot be resolved here: the object is never collected.
    unresolvable: bool,
}

/// The reporter of the collector's events, as Kubernetes names it.
const COMPONENT: &str = "garbage-collector-controller";

/// The resource an owner reference of a dependent (`dependent_namespaced`: of a namespaced
/// kind) names, if it can be resolved: a kind served here in that version, and not a
/// namespaced owner of a cluster-scoped object.
fn resolve(reference: &Value, dependent_namespaced: bool) -> Option<&'static ResourceType> {
    let api_version = reference["apiVersion"].as_str()?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let resource = resources::find_by_kind(group, reference["kind"].as_str()?)?;
    let fits = resource.version == version && (dependent_namespaced || !resource.namespaced);
    fits.then_some(resource)
}

/// A reference as Kubernetes' collector writes one in its events.
fn describe_reference(reference: &Value, namespace: &str) -> String {
    let text = |key: &str| reference[key].as_str().unwrap_or("").to_string();
    format!(
        "[{}/{}, namespace: {namespace}, name: {}, uid: {}]",
        text("apiVersion"),
        text("kind"),
        text("name"),
        text("uid")
    )
}

/// A plain object as the collector keeps it: its resource, and its namespace (an index into
/// the collector's namespaces).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plain {
    resource: &'static ResourceType,
    namespace: u32,
    /// Its name's hash: enough to tell whether a reference names it ([`name_hash`]).
    name: u64,
}

/// The hash a plain object's name is kept as.
fn name_hash(name: &str) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::default().hash_one(name)
}

/// Whether an owner reference names an object of `resource` (its group, version and kind, as
/// [`resolve`] reads them).
fn names_kind(reference: &Value, resource: &ResourceType) -> bool {
    resolve(reference, true).is_some_and(|named| named == resource)
}

/// The namespaces of plain objects, each kept once while a plain object is in it.
#[derive(Default)]
struct Namespaces {
    /// By id: the name and how many plain objects are in it (none: the id is free).
    names: Vec<(Box<str>, u32)>,
    ids: FastMap<Box<str>, u32>,
    free: Vec<u32>,
}

impl Namespaces {
    /// The id of `name`, counting one more object in it.
    fn take(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.ids.get(name) {
            self.names[id as usize].1 += 1;
            return id;
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.names[id as usize] = (name.into(), 1);
                id
            }
            None => {
                self.names.push((name.into(), 1));
                (self.names.len() - 1) as u32
            }
        };
        self.ids.insert(name.into(), id);
        id
    }

    /// Counts one object fewer in `id`; frees it with its last.
    fn release(&mut self, id: u32) {
        let Some((name, count)) = self.names.get_mut(id as usize) else { return };
        *count = count.saturating_sub(1);
        if *count == 0 {
            self.ids.remove(&**name);
            *name = Box::default();
            self.free.push(id);
        }
    }

    fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("", |(name, _)| name)
    }
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
    /// Objects the collector may act on: they name owners or finalizers, or are being
    /// deleted.
    nodes: FastMap<String, Node>,
    /// Every other object (most of a cluster's), kept only as an owner that exists: its uid,
    /// resource and namespace, 48 bytes when the uid is a UUID.
    plain: FastMap<PlainUid, Plain>,
    namespaces: Namespaces,
    dependents: FastMap<String, FastSet<String>>,
    /// Resources listed at least once: dangling references are only judged after all are.
    listed: FastSet<&'static str>,
    /// How many resources there are to list (those stored as themselves).
    to_list: usize,
    /// Dependents whose delete (or release) was asked for an owner in foreground deletion,
    /// by uid, until the dependent is seen changed or the request fails. Each event of a
    /// thousand dependents going would otherwise ask for every remaining one again (as
    /// Kubernetes' work queue keeps each item once).
    deletes_asked: FastSet<String>,
    /// Owners, by uid, whose batch of releases (orphaning their dependents) is under way:
    /// one batch at a time, until it ends.
    orphaning: FastSet<String>,
}

/// A plain object's uid as the collector keeps it: the 128 bits of a UUID in its canonical
/// form (every uid the server assigns), so that the table of a cluster's plain objects, one
/// entry per object, neither allocates per entry nor hashes text when it grows; any other uid
/// as its text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum PlainUid {
    Uuid(u128),
    Text(Box<str>),
}

impl PlainUid {
    fn of(uid: &str) -> Self {
        // Only the canonical form (36 characters, lowercase), so that no two uids share a key.
        let canonical = uid.len() == 36 && !uid.bytes().any(|b| b.is_ascii_uppercase());
        match uuid::Uuid::try_parse(uid) {
            Ok(parsed) if canonical => PlainUid::Uuid(parsed.as_u128()),
            _ => PlainUid::Text(uid.into()),
        }
    }
}

fn uid_of(object: &Value) -> String {
    object_uid(object).to_string()
}

impl GarbageCollector {
    pub fn new(client: Arc<dyn ApiClient>) -> Self {
        let to_list = resources::RESOURCES.iter().filter(|r| resources::is_stored(r)).count();
        Self {
            client,
            nodes: FastMap::default(),
            plain: FastMap::default(),
            namespaces: Namespaces::default(),
            dependents: FastMap::default(),
            listed: FastSet::default(),
            to_list,
            deletes_asked: FastSet::default(),
            orphaning: FastSet::default(),
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
        let references = meta["ownerReferences"].as_array().map_or(&[][..], Vec::as_slice);
        let uids = |blocking_only: bool| -> Vec<String> {
            let blocking = |r: &&Value| !blocking_only || r["blockOwnerDeletion"] == json!(true);
            let listed = references.iter().filter(blocking);
            listed.filter_map(|r| r["uid"].as_str().map(String::from)).collect()
        };
        let (owners, blocking) = (uids(false), uids(true));
        let finalizers = strings(&meta["finalizers"]);
        let deleting = meta.get("deletionTimestamp").is_some_and(|t| !t.is_null());
        let namespace = meta["namespace"].as_str().unwrap_or("");
        if owners.is_empty() && finalizers.is_empty() && !deleting {
            let namespace = self.namespaces.take(namespace);
            let name = name_hash(meta["name"].as_str().unwrap_or(""));
            self.plain.insert(PlainUid::of(&uid), Plain { resource, namespace, name });
            return uid;
        }
        let unresolvable = references.iter().any(|r| resolve(r, resource.namespaced).is_none());
        for owner in &owners {
            self.dependents.entry(owner.clone()).or_default().insert(uid.clone());
        }
        self.nodes.insert(
            uid.clone(),
            Node {
                resource,
                namespace: namespace.to_string(),
                name: meta["name"].as_str().unwrap_or("").to_string(),
                owners,
                blocking,
                finalizers,
                deleting,
                references: references.to_vec(),
                unresolvable,
            },
        );
        uid
    }

    /// Replaces what the graph holds of `resource` with `items`, a new list of it.
    fn relist(&mut self, resource: &'static ResourceType, items: &[Value]) {
        let namespaces = &mut self.namespaces;
        self.plain.retain(|_, plain| {
            let kept = plain.resource != resource;
            if !kept {
                namespaces.release(plain.namespace);
            }
            kept
        });
        let stale: Vec<String> = (self.nodes.iter())
            .filter(|(_, node)| node.resource == resource)
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in stale {
            self.remove(&uid);
        }
        for item in items {
            self.upsert(resource, item);
        }
    }

    /// Forgets `uid`; its node, unless it was a plain object.
    fn remove(&mut self, uid: &str) -> Option<Node> {
        // Changed or gone: the delete asked for it has been seen (or is to be asked again).
        self.deletes_asked.remove(uid);
        if let Some(plain) = self.plain.remove(&PlainUid::of(uid)) {
            self.namespaces.release(plain.namespace);
            return None;
        }
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

    /// Whether the object `uid` exists, by the graph.
    fn exists(&self, uid: &str) -> bool {
        self.plain.contains_key(&PlainUid::of(uid)) || self.nodes.contains_key(uid)
    }

    /// Whether the object `uid` exists as an owner of an object in `namespace`: cluster-scoped,
    /// or in that namespace.
    fn owns_in(&self, uid: &str, namespace: &str) -> bool {
        if let Some(plain) = self.plain.get(&PlainUid::of(uid)) {
            return !plain.resource.namespaced
                || self.namespaces.name(plain.namespace) == namespace;
        }
        self.nodes.get(uid).is_some_and(|n| !n.resource.namespaced || n.namespace == namespace)
    }

    /// Whether `reference`, of an object in `namespace`, names an owner of it by the graph:
    /// one of that uid in that namespace (or cluster-scoped), with the kind and name the
    /// reference gives (Kubernetes' collector checks a reference whose coordinates differ
    /// from its owner's against the API server, and then finds it dangling).
    fn names_owner(&self, reference: &Value, namespace: &str) -> bool {
        let (Some(uid), Some(name)) = (reference["uid"].as_str(), reference["name"].as_str())
        else {
            return false;
        };
        if !self.owns_in(uid, namespace) {
            return false;
        }
        match self.plain.get(&PlainUid::of(uid)) {
            Some(plain) => names_kind(reference, plain.resource) && plain.name == name_hash(name),
            None => self
                .nodes
                .get(uid)
                .is_some_and(|n| names_kind(reference, n.resource) && n.name == name),
        }
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
        if self.plain.contains_key(&PlainUid::of(uid)) {
            return;
        }
        let Some(node) = self.nodes.get(uid) else {
            // Gone: its dependents may have no owner left.
            for dependent in self.dependents_of(uid) {
                self.collect_if_orphaned(&dependent, ctx);
            }
            return;
        };
        if !node.deleting {
            return;
        }
        let node = node.clone();
        if node.finalizers.iter().any(|f| f == ORPHAN_FINALIZER) {
            // One batch of releases at a time.
            if !self.orphaning.insert(uid.to_string()) {
                return;
            }
            let dependents = self.dependents_of(uid);
            // The finalizer goes only once every dependent has let go of the owner: were it
            // removed first, the owner could be gone while a dependent still names it, and
            // that dependent would be collected instead of orphaned.
            let releases: Vec<_> = dependents
                .into_iter()
                .filter_map(|d| Some((self.nodes.get(&d).cloned()?, d)))
                .map(|(dependent, dependent_uid)| {
                    let owner = uid.to_string();
                    let client = self.client.clone();
                    async move {
                        let names_owner = move |r: &Value| r["uid"].as_str() == Some(&owner);
                        let field = "ownerReferences";
                        remove_entries(&*client, &dependent, &dependent_uid, field, names_owner)
                            .await
                    }
                })
                .collect();
            let (client, owner) = (self.client.clone(), uid.to_string());
            let batch = owner.clone();
            ctx.spawn(
                async move {
                    let released = futures::future::join_all(releases).await;
                    if let Some(error) = released.into_iter().find_map(Result::err) {
                        tracing::warn!(name = %node.name, %error, "orphaning dependents");
                        return;
                    }
                    remove_finalizer(&*client, &node, &owner, ORPHAN_FINALIZER).await;
                }
                .into_actor(self)
                .map(move |(), collector, _| {
                    collector.orphaning.remove(&batch);
                }),
            );
        } else if node.finalizers.iter().any(|f| f == FOREGROUND_FINALIZER) {
            // Each dependent's event comes here: the work is kept to what is new (the first
            // blocking dependent ends the search; only those not asked for yet are copied),
            // so that a thousand dependents going cost no million copies.
            let dependents = self.dependents.get(uid).into_iter().flatten();
            let blocked = dependents
                .clone()
                .any(|d| self.nodes.get(d).is_some_and(|n| n.blocking.iter().any(|o| o == uid)));
            if !blocked {
                let (client, uid) = (self.client.clone(), uid.to_string());
                ctx.spawn(
                    async move { remove_finalizer(&*client, &node, &uid, FOREGROUND_FINALIZER).await }
                        .into_actor(self),
                );
            }
            let to_ask: Vec<String> = dependents
                .filter(|d| !self.deletes_asked.contains(*d))
                .filter(|d| self.nodes.get(*d).is_some_and(|n| !n.deleting))
                .cloned()
                .collect();
            for dependent in to_ask {
                self.delete_for_owner(&dependent, uid, ctx);
            }
        }
    }

    /// Whether `uid` exists and is not itself waiting for its dependents to go (Kubernetes'
    /// "solid" owner: one that keeps a dependent).
    /// (A dependent's owner is one of its `namespace`, or cluster-scoped.)
    fn keeps_dependents(&self, uid: &str, namespace: &str) -> bool {
        self.owns_in(uid, namespace) && !self.waits_for_dependents(uid)
    }

    /// Deletes `uid` if, by the graph, none of its owners exists any more (as its references
    /// name them: uid, kind and name), and the API server agrees: the graph may not have seen a dependent let go of an owner yet.
    /// When only some of its owners are gone, their references are removed instead, as
    /// Kubernetes' collector removes dangling references from an object that keeps an owner.
    fn collect_if_orphaned(&mut self, uid: &str, ctx: &mut Context<Self>) {
        // Its delete, asked for its owner's foreground deletion, is under way: an owner that
        // did not wait for it (nothing blocked it) may be gone first.
        if self.deletes_asked.contains(uid) {
            return;
        }
        let Some(node) = self.nodes.get(uid) else { return };
        if node.unresolvable {
            let misplaced = node.references.iter().filter(|r| {
                let resolved = resolve(r, true);
                node.namespace.is_empty() && resolved.is_some_and(|owner| owner.namespaced)
            });
            let misplaced: Vec<&Value> = misplaced.collect();
            self.report_misplaced(uid, node, &misplaced, ctx);
            return;
        }
        let named = node.references.iter().filter(|r| r["uid"].is_string());
        let present = named.filter(|r| self.names_owner(r, &node.namespace)).count();
        if node.owners.is_empty() || present == node.owners.len() {
            return;
        }
        // Owners elsewhere, for this object, are none of its own.
        let misplaced: Vec<&Value> = (node.references.iter())
            .filter(|r| {
                r["uid"]
                    .as_str()
                    .is_some_and(|o| self.exists(o) && !self.owns_in(o, &node.namespace))
            })
            .collect();
        self.report_misplaced(uid, node, &misplaced, ctx);
        let (node, uid, client) = (node.clone(), uid.to_string(), self.client.clone());
        if present > 0 {
            ctx.spawn(
                async move {
                    let released = release_dangling(&*client, &node, &uid).await;
                    report_collection(&node, released);
                }
                .into_actor(self),
            );
            return;
        }
        ctx.spawn(
            async move {
                report_collection(&node, collect_orphan(&*client, &node, &uid).await);
            }
            .into_actor(self),
        );
    }

    /// Deletes `uid`, a dependent of `owner`, which is in foreground deletion (once: not
    /// again while it is being deleted). A dependent with another owner that keeps it only
    /// lets go of `owner`; one with dependents of its own is deleted in the foreground too.
    fn delete_for_owner(&mut self, uid: &str, owner: &str, ctx: &mut Context<Self>) {
        let Some(node) = self.nodes.get(uid) else { return };
        if node.deleting || !self.deletes_asked.insert(uid.to_string()) {
            return;
        }
        let node = node.clone();
        let client = self.client.clone();
        // What failed is asked for again at the next event.
        let asked = uid.to_string();
        let forget_failed = move |done: bool, collector: &mut Self, _: &mut Context<Self>| {
            if !done {
                collector.deletes_asked.remove(&asked);
            }
        };
        if node.owners.iter().any(|o| o != owner && self.keeps_dependents(o, &node.namespace)) {
            let owner = owner.to_string();
            let (uid, field) = (uid.to_string(), "ownerReferences");
            ctx.spawn(
                async move {
                    let names_owner = |r: &Value| r["uid"].as_str() == Some(&owner);
                    let released = remove_entries(&*client, &node, &uid, field, names_owner);
                    report_collection(&node, released.await)
                }
                .into_actor(self)
                .map(forget_failed),
            );
            return;
        }
        let mut options = delete_options(uid, None);
        let dependents = self.dependents_of(uid);
        // Owners waiting for this dependent which waits for one of its own in foreground
        // deletion may be a cycle: as Kubernetes' collector does, its references to them stop
        // blocking first.
        let unblock: Vec<String> = if dependents.iter().any(|d| self.waits_for_dependents(d)) {
            node.blocking.iter().filter(|o| self.waits_for_dependents(o)).cloned().collect()
        } else {
            Vec::new()
        };
        if !dependents.is_empty() {
            options.propagation_policy = Some("Foreground".into());
        }
        let uid = uid.to_string();
        ctx.spawn(
            async move {
                if !unblock.is_empty() {
                    let unblocked = |entries: &mut Vec<Value>| {
                        let mut changed = false;
                        for entry in entries.iter_mut() {
                            let waiting = entry["uid"]
                                .as_str()
                                .is_some_and(|u| unblock.iter().any(|o| o == u));
                            if waiting && entry["blockOwnerDeletion"] == json!(true) {
                                entry["blockOwnerDeletion"] = json!(false);
                                changed = true;
                            }
                        }
                        changed
                    };
                    let edited = edit_entries(&*client, &node, &uid, "ownerReferences", unblocked);
                    if let Err(error) = edited.await {
                        return report_collection(&node, Err(error));
                    }
                }
                let deleted = client.delete(node.resource, &node.namespace, &node.name, &options);
                report_collection(&node, deleted.await.map(drop))
            }
            .into_actor(self)
            .map(forget_failed),
        );
    }

    /// Warns that `references` of `node` name owners outside its namespace.
    fn report_misplaced(
        &self,
        uid: &str,
        node: &Node,
        references: &[&Value],
        ctx: &mut Context<Self>,
    ) {
        if references.is_empty() {
            return;
        }
        let object = ObjectRef {
            kind: node.resource.kind,
            api_version: node.resource.api_version(),
            namespace: node.namespace.clone(),
            name: node.name.clone(),
            uid: uid.to_string(),
            field_path: None,
        };
        let messages: Vec<String> = (references.iter())
            .map(|r| {
                let owner = describe_reference(r, &node.namespace);
                format!("ownerRef {owner} does not exist in namespace {:?}", node.namespace)
            })
            .collect();
        let client = self.client.clone();
        ctx.spawn(
            async move {
                for message in messages {
                    let (kind, reason) = (EventKind::Warning, "OwnerRefInvalidNamespace");
                    events::record(&*client, &object, kind, reason, &message, COMPONENT).await;
                }
            }
            .into_actor(self),
        );
    }

    /// Whether `uid` is an object being deleted (which its dependents' changes may let go).
    fn is_deleting(&self, uid: &str) -> bool {
        self.nodes.get(uid).is_some_and(|n| n.deleting)
    }

    /// Whether `uid` is being deleted in the foreground (waiting for its dependents).
    fn waits_for_dependents(&self, uid: &str) -> bool {
        self.nodes
            .get(uid)
            .is_some_and(|n| n.deleting && n.finalizers.iter().any(|f| f == FOREGROUND_FINALIZER))
    }
}

/// Logs a failed collection; an object already gone, or changed since it was judged (a
/// precondition conflict), is not logged: the next event judges it again. Whether the work
/// is done (the object gone or let go): if not, it is to be asked for again.
fn report_collection(node: &Node, result: Result<(), ApiError>) -> bool {
    match result {
        Ok(()) | Err(ApiError::NotFound { .. }) => true,
        Err(ApiError::Conflict { .. }) => false,
        Err(error) => {
            tracing::warn!(name = %node.name, %error, "garbage collecting");
            false
        }
    }
}

/// A background delete of exactly this object (and, given, exactly this version of it).
fn delete_options(uid: &str, resource_version: Option<String>) -> DeleteOptions {
    DeleteOptions {
        precondition_uid: Some(uid.to_string()),
        precondition_resource_version: resource_version,
        propagation_policy: Some("Background".into()),
        ..DeleteOptions::default()
    }
}

/// Whether the owner an owner reference of `node` names exists, asked of the API server
/// (`None`: the reference cannot be resolved, see [`resolve`]).
async fn owner_exists(
    client: &dyn ApiClient,
    node: &Node,
    reference: &Value,
) -> Result<Option<bool>, ApiError> {
    let Some(resource) = resolve(reference, node.resource.namespaced) else { return Ok(None) };
    let namespace = if resource.namespaced { node.namespace.as_str() } else { "" };
    let name = reference["name"].as_str().unwrap_or("");
    match client.get(resource, namespace, name).await {
        Ok(owner) => Ok(Some(uid_of(&owner) == reference["uid"].as_str().unwrap_or(""))),
        Err(ApiError::NotFound { .. }) => Ok(Some(false)),
        Err(error) => Err(error),
    }
}

/// Removes the references of the object to owners that do not exist, as the API server says,
/// while another of its owners does.
async fn release_dangling(client: &dyn ApiClient, node: &Node, uid: &str) -> Result<(), ApiError> {
    let live = client.get(node.resource, &node.namespace, &node.name).await?;
    if uid_of(&live) != uid {
        return Ok(());
    }
    let references = live["metadata"]["ownerReferences"].as_array().cloned().unwrap_or_default();
    let mut dangling = Vec::new();
    for reference in &references {
        match owner_exists(client, node, reference).await? {
            Some(true) => {}
            Some(false) => dangling.push(reference["uid"].clone()),
            None => return Ok(()),
        }
    }
    if dangling.is_empty() || dangling.len() == references.len() {
        return Ok(());
    }
    let gone = |reference: &Value| dangling.contains(&reference["uid"]);
    remove_entries(client, node, uid, "ownerReferences", gone).await
}

/// Deletes the object if it still names owners and none of them exists: each owner reference
/// is checked against the API server, and the delete is pinned to the version checked.
async fn collect_orphan(client: &dyn ApiClient, node: &Node, uid: &str) -> Result<(), ApiError> {
    let live = client.get(node.resource, &node.namespace, &node.name).await?;
    if uid_of(&live) != uid {
        return Ok(());
    }
    let references = live["metadata"]["ownerReferences"].as_array().cloned().unwrap_or_default();
    if references.is_empty() {
        return Ok(());
    }
    for reference in &references {
        if owner_exists(client, node, reference).await? != Some(false) {
            return Ok(());
        }
    }
    let version = live["metadata"]["resourceVersion"].as_str().map(String::from);
    let options = delete_options(uid, version);
    client.delete(node.resource, &node.namespace, &node.name, &options).await.map(drop)
}

/// Removes `finalizer` from `node` (object `uid`), logging a failure: the next event about the
/// object tries again.
async fn remove_finalizer(client: &dyn ApiClient, node: &Node, uid: &str, finalizer: &str) {
    let named = |f: &Value| f.as_str() == Some(finalizer);
    if let Err(error) = remove_entries(client, node, uid, "finalizers", named).await {
        tracing::warn!(name = %node.name, %error, finalizer, "removing a finalizer");
    }
}

/// How many times a read-modify-write of the collector's is tried against concurrent writers.
const ATTEMPTS: usize = 5;

/// Removes the entries of the list `metadata.<field>` of `node` (object `uid`) that `unwanted`
/// picks (see [`edit_entries`]).
async fn remove_entries(
    client: &dyn ApiClient,
    node: &Node,
    uid: &str,
    field: &'static str,
    unwanted: impl Fn(&Value) -> bool,
) -> Result<(), ApiError> {
    let remove = |entries: &mut Vec<Value>| {
        let before = entries.len();
        entries.retain(|v| !unwanted(v));
        entries.len() != before
    };
    edit_entries(client, node, uid, field, remove).await
}

/// Edits the list `metadata.<field>` of `node` (object `uid`) with `edit` (which says whether
/// it changed anything), with a merge patch pinned to the version read, read again on a
/// conflict. Done when the object is gone (or replaced by another of its name) or `edit`
/// changes nothing.
async fn edit_entries(
    client: &dyn ApiClient,
    node: &Node,
    uid: &str,
    field: &'static str,
    edit: impl Fn(&mut Vec<Value>) -> bool,
) -> Result<(), ApiError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let object = match client.get(node.resource, &node.namespace, &node.name).await {
            Err(ApiError::NotFound { .. }) => return Ok(()),
            other => other?,
        };
        if uid_of(&object) != uid {
            return Ok(());
        }
        let mut kept = object["metadata"][field].as_array().cloned().unwrap_or_default();
        if !edit(&mut kept) {
            return Ok(());
        }
        // The last entry gone, the field goes too (null, in a merge patch), as in Kubernetes.
        let kept = if kept.is_empty() { Value::Null } else { Value::Array(kept) };
        let patch = json!({"metadata": {field: kept,
            "resourceVersion": object["metadata"]["resourceVersion"]}});
        let (resource, ns, name) = (node.resource, &node.namespace, &node.name);
        match client.patch(resource, ns, name, PatchType::Merge, &patch, false).await {
            Ok(_) | Err(ApiError::NotFound { .. }) => return Ok(()),
            Err(ApiError::Conflict { .. }) if attempt < ATTEMPTS => continue,
            Err(error) => return Err(error),
        }
    }
}

impl Actor for GarbageCollector {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        for resource in resources::RESOURCES.iter().filter(|r| resources::is_stored(r)) {
            let scope = informer::Scope { view: ObjectView::Ownership, ..Default::default() };
            let client = self.client.clone();
            informer::feed_actor(ctx, client, resource, scope, move |feed| {
                Informed(resource, feed)
            });
        }
    }
}

impl Handler<Informed> for GarbageCollector {
    type Result = ();

    fn handle(&mut self, Informed(resource, feed): Informed, ctx: &mut Context<Self>) {
        match feed {
            Feed::Listed(items) => {
                self.relist(resource, &items);
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
                    // An owner being deleted may be waiting for this dependent (foreground) or
                    // for its release (orphaning); one that is gone, or was never there, has
                    // had its dependents judged already.
                    let deleting: Vec<String> =
                        owners.into_iter().filter(|o| self.is_deleting(o)).collect();
                    for owner in deleting {
                        self.process(&owner, ctx);
                    }
                }
            }
            Feed::Changed(_, object) => {
                let before = self.nodes.get(&uid_of(&object)).map(|n| n.blocking.clone());
                let uid = self.upsert(resource, &object);
                if self.all_listed() {
                    self.collect_if_orphaned(&uid, ctx);
                    self.process(&uid, ctx);
                    // An owner in foreground deletion that this dependent blocked may go now.
                    let blocking: FastSet<&String> =
                        self.nodes.get(&uid).into_iter().flat_map(|n| &n.blocking).collect();
                    let released: Vec<String> = before
                        .into_iter()
                        .flatten()
                        .filter(|o| !blocking.contains(o) && self.is_deleting(o))
                        .collect();
                    for owner in released {
                        self.process(&owner, ctx);
                    }
                }
            }
            Feed::Unavailable(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use futures::FutureExt;
    use serde_json::json;

    use super::*;
    use crate::core::ApiCore;
    use crate::testing::{core, eventually, Call, Hooked};

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

    /// Creates `owner` and its `dependents`, deletes the owner with the Orphan policy and waits
    /// until it is gone; returns the owner as it was.
    async fn orphan(core: &ApiCore, owner: &str, dependents: &[String]) -> Value {
        let created = create(core, owner, None, &[]).await;
        for dependent in dependents {
            create(core, dependent, Some(&created), &[]).await;
        }
        delete(core, owner, "Orphan").await;
        eventually("the owner goes", || async { get(core, owner).await.is_none().then_some(()) })
            .await;
        created
    }

    /// An owner and its dependent, then the owner deleted: the dependent goes too.
    async fn a_dependent_follows_its_owner(core: &ApiCore) {
        let owner = create(core, "owner", None, &[]).await;
        create(core, "dep", Some(&owner), &[]).await;
        delete(core, "owner", "Background").await;
        eventually("the dependent follows its owner", || async {
            get(core, "dep").await.is_none().then_some(())
        })
        .await;
    }

    /// Objects naming thousands of owners of a kind not served (never collected, never
    /// judged again) come and go without the collector re-judging every other dependent of
    /// each owner at each delete: the collector still answers at once.
    #[actix::test]
    async fn dependents_sharing_thousands_of_unknown_owners_go_without_stalling_the_collector() {
        let core = core().await;
        // On a thread of its own (in the server it shares the main thread with the other
        // controllers), so that a stalled collector does not hold up this test's own waits
        // but fails them by their timeout.
        let client: Arc<dyn ApiClient> = Arc::new(core.clone());
        let arbiter = actix::Arbiter::new();
        GarbageCollector::start_in_arbiter(&arbiter.handle(), move |_| {
            GarbageCollector::new(client)
        });
        let references: Vec<Value> = (0..3000)
            .map(|i| {
                json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": format!("d{i}"),
                "uid": format!("missing-{i}")})
            })
            .collect();
        for i in 0..6 {
            let shared = json!({"metadata": {"name": format!("shared-{i}"),
                "ownerReferences": references}});
            ApiClient::create(&core, cms(), "default", shared).await.unwrap();
        }
        for i in 0..6 {
            delete(&core, &format!("shared-{i}"), "Background").await;
        }
        a_dependent_follows_its_owner(&core).await;
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

        a_dependent_follows_its_owner(&core).await;

        // A reference with an owner's uid but another name or kind names no owner: its
        // dependent is collected, as Kubernetes' collector finds it dangling.
        let owner = create(&core, "owner", None, &[]).await;
        for (name, kind, owner_name) in [
            ("wrongname", "ConfigMap", "nosuch"),
            ("wrongkind", "Secret", "owner"),
            ("right", "ConfigMap", "owner"),
        ] {
            let reference = json!([{"apiVersion": "v1", "kind": kind, "name": owner_name,
                "uid": owner["metadata"]["uid"]}]);
            let object = json!({"metadata": {"name": name, "ownerReferences": reference}});
            ApiClient::create(&core, cms(), "default", object).await.unwrap();
        }
        eventually("the misnamed dependents are collected", || async {
            (get(&core, "wrongname").await.is_none() && get(&core, "wrongkind").await.is_none())
                .then_some(())
        })
        .await;
        assert!(get(&core, "right").await.is_some());
        delete(&core, "right", "Background").await;
        delete(&core, "owner", "Background").await;

        // A dependent with another owner stays, and lets go of the one gone.
        let first = create(&core, "first", None, &[]).await;
        let second = create(&core, "second", None, &[]).await;
        let mut shared = create(&core, "shared", Some(&first), &[]).await;
        let both = json!([shared["metadata"]["ownerReferences"][0],
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "second", "uid": second["metadata"]["uid"]}]);
        shared["metadata"]["ownerReferences"] = both;
        ApiClient::update(&core, cms(), "default", shared).await.unwrap();
        delete(&core, "first", "Background").await;
        let kept = eventually("the dangling reference is removed", || async {
            let shared = get(&core, "shared").await?;
            (shared["metadata"]["ownerReferences"].as_array()?.len() == 1).then_some(shared)
        })
        .await;
        assert_eq!(kept["metadata"]["ownerReferences"][0]["name"], "second");

        orphan(&core, "owner2", &["dep2".into()]).await;
        let orphan = get(&core, "dep2").await.expect("an orphan stays");
        assert!(orphan["metadata"].get("ownerReferences").is_none(), "{orphan}");

        // Foreground: the owner waits for the dependents that block its deletion; one that
        // does not block is deleted all the same, and one with another owner only lets go.
        let owner = create(&core, "owner3", None, &[]).await;
        let mut blocking = create(&core, "dep3", Some(&owner), &["example.com/hold"]).await;
        blocking["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = json!(true);
        ApiClient::update(&core, cms(), "default", blocking).await.unwrap();
        create(&core, "dep4", Some(&owner), &["example.com/hold"]).await;
        let keeper = create(&core, "keeper", None, &[]).await;
        let mut kept = create(&core, "dep5", Some(&owner), &[]).await;
        let reference = &kept["metadata"]["ownerReferences"][0];
        kept["metadata"]["ownerReferences"] = json!([reference,
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "keeper", "uid": keeper["metadata"]["uid"]}]);
        ApiClient::update(&core, cms(), "default", kept).await.unwrap();
        delete(&core, "owner3", "Foreground").await;
        let deleting = |name: &'static str| {
            let core = core.clone();
            async move {
                let wait = "the dependent is being deleted";
                eventually(wait, || async {
                    get(&core, name)
                        .await
                        .filter(|d| d["metadata"]["deletionTimestamp"].is_string())
                })
                .await
            }
        };
        let held = deleting("dep3").await;
        deleting("dep4").await;
        let released = eventually("dep5 lets go of owner3", || async {
            let dep = get(&core, "dep5").await?;
            (dep["metadata"]["ownerReferences"].as_array()?.len() == 1).then_some(dep)
        })
        .await;
        assert_eq!(released["metadata"]["ownerReferences"][0]["name"], "keeper");
        assert!(released["metadata"].get("deletionTimestamp").is_none(), "{released}");
        let owner = get(&core, "owner3").await.expect("the owner waits for its dependents");
        assert_eq!(owner["metadata"]["finalizers"], json!(["foregroundDeletion"]));
        let mut released = held;
        released["metadata"]["finalizers"] = json!([]);
        ApiClient::update(&core, cms(), "default", released).await.unwrap();
        eventually("the owner goes after its blocking dependent", || async {
            get(&core, "owner3").await.is_none().then_some(())
        })
        .await;
        assert!(get(&core, "dep4").await.is_some(), "held by its own finalizer, not waited for");

        // With no blocking dependent, the owner goes at once.
        let owner = create(&core, "owner4", None, &[]).await;
        create(&core, "dep6", Some(&owner), &["example.com/hold"]).await;
        delete(&core, "owner4", "Foreground").await;
        eventually("the owner goes", || async {
            get(&core, "owner4").await.is_none().then_some(())
        })
        .await;
    }

    #[actix::test]
    async fn a_foreground_deletion_through_a_cycle_of_blocking_owners_ends() {
        let core = core().await;
        GarbageCollector::new(Arc::new(core.clone())).start();
        // a and b own each other, each reference blocking its owner's deletion.
        let a = create(&core, "a", None, &[]).await;
        let mut b = create(&core, "b", Some(&a), &[]).await;
        b["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = json!(true);
        let b = ApiClient::update(&core, cms(), "default", b).await.unwrap();
        let mut a = get(&core, "a").await.unwrap();
        a["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap",
            "name": "b", "uid": b["metadata"]["uid"], "blockOwnerDeletion": true}]);
        ApiClient::update(&core, cms(), "default", a).await.unwrap();
        delete(&core, "a", "Foreground").await;
        eventually("both go", || async {
            (get(&core, "a").await.is_none() && get(&core, "b").await.is_none()).then_some(())
        })
        .await;
    }

    /// Owners are of the dependent's namespace: one named in another is none (the dependent
    /// is collected, with a warning); a namespaced owner of a cluster-scoped object, or an
    /// owner of a kind not served, cannot be resolved, and keeps its dependent for good.
    #[actix::test]
    async fn owners_are_resolved_in_the_dependents_namespace() {
        let core = core().await;
        GarbageCollector::new(Arc::new(core.clone())).start();
        let namespaces = resources::core("namespaces");
        let other = json!({"metadata": {"name": "other"}});
        ApiClient::create(&core, namespaces, "", other).await.unwrap();
        let owner = create(&core, "owner", None, &[]).await;
        let reference = |api_version: &str, kind: &str| {
            json!([{"apiVersion": api_version, "kind": kind, "name": "owner",
                "uid": owner["metadata"]["uid"]}])
        };
        let roles = resources::find(resources::RBAC_GROUP, "v1", "clusterroles").unwrap();
        let role = json!({"metadata": {"name": "owned-role",
            "ownerReferences": reference("v1", "ConfigMap")}, "rules": []});
        ApiClient::create(&core, roles, "", role).await.unwrap();
        for (name, api_version, kind) in
            [("widget-owned", "example.com/v1", "Widget"), ("old-version-owned", "v2", "ConfigMap")]
        {
            let owned = json!({"metadata": {"name": name,
                "ownerReferences": reference(api_version, kind)}});
            ApiClient::create(&core, cms(), "default", owned).await.unwrap();
        }
        let elsewhere = json!({"metadata": {"name": "elsewhere",
            "ownerReferences": reference("v1", "ConfigMap")}});
        ApiClient::create(&core, cms(), "other", elsewhere).await.unwrap();
        eventually("the dependent in another namespace is collected", || async {
            ApiClient::get(&core, cms(), "other", "elsewhere").await.is_err().then_some(())
        })
        .await;
        let events = resources::core("events");
        let warned = eventually("the misplaced references are reported", || async {
            let list = ApiClient::list(&core, events, None, &Default::default()).await.ok()?;
            let warnings: Vec<Value> = (list.items.into_iter())
                .filter(|e| e["reason"] == "OwnerRefInvalidNamespace")
                .collect();
            (warnings.len() == 2).then_some(warnings)
        })
        .await;
        let message = |name: &str| {
            let event = warned.iter().find(|e| e["involvedObject"]["name"] == name).unwrap();
            event["message"].as_str().unwrap().to_string()
        };
        let uid = owner["metadata"]["uid"].as_str().unwrap();
        assert_eq!(
            message("elsewhere"),
            format!("ownerRef [v1/ConfigMap, namespace: other, name: owner, uid: {uid}] does not exist in namespace \"other\"")
        );
        assert!(message("owned-role").ends_with("does not exist in namespace \"\""));
        // Deleting the owner leaves what cannot be resolved: once a dependent judged after
        // them is collected, they were judged and kept.
        delete(&core, "owner", "Background").await;
        let ghost = json!({"metadata": {"name": "ghost", "uid": "no-such-uid"}});
        create(&core, "haunted", Some(&ghost), &[]).await;
        eventually("a dangling dependent is collected", || async {
            get(&core, "haunted").await.is_none().then_some(())
        })
        .await;
        assert!(get(&core, "widget-owned").await.is_some());
        assert!(get(&core, "old-version-owned").await.is_some());
        assert!(ApiClient::get(&core, roles, "", "owned-role").await.is_ok());
    }

    #[actix::test]
    async fn plain_objects_are_kept_only_as_owners_that_exist() {
        let core = core().await;
        let mut collector = GarbageCollector::new(Arc::new(core.clone()));
        let owner = json!({"metadata": {"name": "o", "uid": "owner-uid"}});
        let dependent = json!({"metadata": {"name": "d", "uid": "dep-uid", "ownerReferences":
            [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "owner-uid"}]}});
        collector.upsert(cms(), &owner);
        collector.upsert(cms(), &dependent);
        assert!(collector.plain.contains_key(&PlainUid::of("owner-uid")));
        assert!(!collector.nodes.contains_key("owner-uid"));
        assert!(collector.nodes.contains_key("dep-uid"), "a dependent is a node");
        assert!(collector.exists("owner-uid"));
        assert_eq!(collector.dependents_of("owner-uid"), ["dep-uid"]);
        // A finalizer makes the owner a node, and without it the owner is plain again.
        let held = json!({"metadata": {"name": "o", "uid": "owner-uid", "finalizers": ["x"]}});
        collector.upsert(cms(), &held);
        assert!(collector.nodes.contains_key("owner-uid"));
        assert!(!collector.plain.contains_key(&PlainUid::of("owner-uid")));
        collector.upsert(cms(), &owner);
        assert!(!collector.nodes.contains_key("owner-uid"));
        assert!(collector.remove("owner-uid").is_none(), "a plain object has no node");
        assert!(!collector.exists("owner-uid"));
    }

    #[actix::test]
    async fn a_namespace_is_kept_only_while_a_plain_object_is_in_it() {
        let core = core().await;
        let mut collector = GarbageCollector::new(Arc::new(core.clone()));
        let object = |namespace: &str, n: usize| {
            json!({"metadata": {"name": format!("o{n}"), "namespace": namespace,
                "uid": format!("{namespace}-{n}")}})
        };
        for round in 0..100 {
            let namespace = format!("ns-{round}");
            for n in 0..3 {
                collector.upsert(cms(), &object(&namespace, n));
                collector.upsert(cms(), &object(&namespace, n)); // seen again
            }
            let uid = collector.upsert(cms(), &object("kept", round));
            assert!(collector.owns_in(&uid, "kept"));
            for n in 0..3 {
                assert!(collector.owns_in(&format!("{namespace}-{n}"), &namespace));
                collector.remove(&format!("{namespace}-{n}"));
            }
        }
        assert_eq!(collector.namespaces.ids.len(), 1, "only the namespace still in use");
        assert!(collector.namespaces.names.len() <= 2, "ids are reused");
        assert!(collector.owns_in("kept-99", "kept"));

        // A new list of the resource drops what it no longer has.
        collector.relist(cms(), &[]);
        assert!(collector.namespaces.ids.is_empty());
    }

    #[test]
    fn plain_uids_are_kept_as_numbers_only_in_their_canonical_form() {
        let uid = "670eb5da-603c-4e91-87a4-d17a027e1277";
        assert_eq!(PlainUid::of(uid), PlainUid::Uuid(0x670eb5da_603c_4e91_87a4_d17a027e1277));
        // Other spellings of the same UUID are other uids.
        for other in [uid.to_uppercase(), uid.replace('-', ""), format!("{{{uid}}}")] {
            assert_eq!(PlainUid::of(&other), PlainUid::Text(other.as_str().into()));
        }
        assert_eq!(PlainUid::of("owner-uid"), PlainUid::Text("owner-uid".into()));
        assert_eq!(PlainUid::of(""), PlainUid::Text("".into()));
    }

    #[actix::test]
    async fn orphaned_dependents_all_stay_when_their_owner_goes() {
        let core = core().await;
        GarbageCollector::new(Arc::new(core.clone())).start();
        let dependents: Vec<String> = (0..20).map(|i| format!("many-dep-{i}")).collect();
        let owner = orphan(&core, "many-owner", &dependents).await;
        for i in 0..20 {
            let orphan = get(&core, &format!("many-dep-{i}")).await;
            let orphan = orphan.unwrap_or_else(|| panic!("orphan {i} was collected"));
            assert!(orphan["metadata"].get("ownerReferences").is_none(), "orphan {i}: {orphan}");
        }
        // A dependent created after the owner went, naming it, is collected.
        create(&core, "late-dep", Some(&owner), &[]).await;
        eventually("a dependent of a gone owner is collected", || async {
            get(&core, "late-dep").await.is_none().then_some(())
        })
        .await;
        assert!(get(&core, "many-dep-0").await.is_some(), "orphans stay");
    }

    /// Each dependent's delete (foreground) or release (orphan) is asked for once, however
    /// many events the others' going makes.
    #[actix::test]
    async fn an_owners_dependents_are_each_deleted_or_released_once() {
        let core = core().await;
        let calls: Arc<std::sync::Mutex<FastMap<String, usize>>> = Arc::default();
        let counted = calls.clone();
        let client = Hooked::new(&core, move |_, call| {
            if let Call::Delete { name, .. } | Call::Patch { name, .. } = call {
                *counted.lock().unwrap().entry(name).or_default() += 1;
            }
            async {}.boxed()
        });
        GarbageCollector::new(Arc::new(client)).start();
        const DEPENDENTS: usize = 200;
        let names = |prefix: &'static str| (0..DEPENDENTS).map(move |i| format!("{prefix}-{i}"));
        let owner = create(&core, "fg-owner", None, &[]).await;
        for name in names("fg") {
            create(&core, &name, Some(&owner), &[]).await;
        }
        delete(&core, "fg-owner", "Foreground").await;
        eventually("the foreground owner goes", || async {
            get(&core, "fg-owner").await.is_none().then_some(())
        })
        .await;
        orphan(&core, "or-owner", &names("or").collect::<Vec<_>>()).await;
        let calls = calls.lock().unwrap();
        let asked: Vec<(String, usize)> = (names("fg").chain(names("or")))
            .map(|name| (name.clone(), calls.get(&name).copied().unwrap_or(0)))
            .filter(|(_, count)| *count != 1)
            .collect();
        assert!(asked.is_empty(), "asked other than once: {asked:?}");
    }

    #[actix::test]
    async fn an_orphan_whose_release_meets_a_conflict_still_stays() {
        let core = core().await;
        // Someone else writes `contested` just before the collector's first patch of it, so
        // that the patch meets a conflict.
        let interfered = Arc::new(AtomicBool::new(false));
        let client = Hooked::new(&core, move |core, call| {
            let interfered = interfered.clone();
            async move {
                let Call::Patch { resource, namespace, name } = call else { return };
                if name == "contested" && !interfered.swap(true, Ordering::SeqCst) {
                    let mut other =
                        ApiClient::get(&core, resource, &namespace, &name).await.unwrap();
                    other["metadata"]["labels"] = json!({"written": "meanwhile"});
                    ApiClient::update(&core, resource, &namespace, other).await.unwrap();
                }
            }
            .boxed()
        });
        GarbageCollector::new(Arc::new(client)).start();
        orphan(&core, "contested-owner", &["contested".into()]).await;
        let orphan = get(&core, "contested").await.expect("the orphan stays");
        assert!(orphan["metadata"].get("ownerReferences").is_none(), "{orphan}");
        assert_eq!(orphan["metadata"]["labels"]["written"], "meanwhile");
    }
}
