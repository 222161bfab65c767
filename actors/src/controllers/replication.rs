//! The replication manager: keeps `spec.replicas` pods of each ReplicationController, as
//! Kubernetes' controller does. It creates missing pods from the template (named
//! `<rc>-<random>`, owned by the controller), deletes surplus ones (those least far along
//! first: unscheduled, pending, not ready, lowest deletion cost, ready for the least time,
//! restarted most, newest), adopts orphan pods its
//! selector matches and releases owned pods it no longer matches, and writes the
//! controller's status (replicas, fully labeled, ready and available replicas, observed
//! generation, a `ReplicaFailure` condition while creating or deleting fails). Creates come
//! in batches of 1, 2, 4, ... up to 500 a round, and a controller waits until the pods it
//! created or deleted are seen before it counts again ("expectations"), so a slow watch never
//! makes it create twice. Deleting the controller is the garbage collector's (its pods are its
//! dependents).
//!
//! It follows pods only while some ReplicationController exists: a cluster without one pays
//! nothing for it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use super::back_off;
use super::selects;
use crate::client::cache::{key_of, relist, Applied, Key, OnDemandCache};
use crate::client::events::{self, EventKind, ObjectRef};
use crate::client::informer::{self, Feed, Scope};
use crate::client::{object_name, object_uid, ApiClient};
use crate::core::{ApiError, DeleteOptions, PatchType};
use crate::model::{json, resources};
use crate::watch::EventType;

/// What events name as their source, as Kubernetes' controller does.
const COMPONENT: &str = "replication-controller";
/// Most pods created or deleted for one controller in one round.
const BURST: usize = 500;
/// How long a controller waits for the pods it created or deleted to be seen, at most.
const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(300);

/// The pods created and deleted that a controller has not seen yet.
#[derive(Debug)]
struct Expectations {
    /// The controller's uid: a controller deleted and made again under its name expects
    /// nothing of its predecessor's pods (Kubernetes resolves a pod's owner by uid).
    uid: String,
    creates: usize,
    deletes: HashSet<String>,
    since: Instant,
    /// Looks at the controller again when the wait times out (a new wait cancels the
    /// previous one's; one left behind by a relist or a delete only marks the controller).
    timeout: SpawnHandle,
}

impl Expectations {
    fn met(&self) -> bool {
        (self.creates == 0 && self.deletes.is_empty())
            || self.since.elapsed() >= EXPECTATIONS_TIMEOUT
    }
}

/// The replication manager actor.
pub struct ReplicationManager {
    client: Arc<dyn ApiClient>,
    controllers: BTreeMap<Key, Value>,
    /// Every pod, while any controller exists.
    pods: OnDemandCache,
    expectations: HashMap<Key, Expectations>,
    /// The last failure to create or delete a controller's pods (its `ReplicaFailure`): the
    /// reason and the message.
    failures: HashMap<Key, (&'static str, String)>,
    /// How many rounds in a row failed, per controller: the next is tried after a back-off.
    retries: HashMap<Key, u32>,
    /// Controllers waiting out that back-off: they create nothing until it ends, whatever else
    /// wakes them (their own status write, a pod's change).
    backing_off: HashSet<Key>,
    dirty: BTreeSet<Key>,
    sync_queued: bool,
}

/// A feed of ReplicationControllers.
#[derive(Message)]
#[rtype(result = "()")]
struct Controllers(Feed);

/// A feed of pods, from the pod list-watch of this generation.
#[derive(Message)]
#[rtype(result = "()")]
struct Pods(u64, Feed);

/// Works through the controllers marked for a sync.
#[derive(Message)]
#[rtype(result = "()")]
struct SyncDirty;

/// What became of a pod created or deleted for a controller.
#[derive(Message)]
#[rtype(result = "()")]
struct Done {
    controller: Key,
    /// The uid of the controller the work was for.
    uid: String,
    outcome: Outcome,
}

enum Outcome {
    /// A round of creates ended: `not_made` of them failed or were skipped after a failed
    /// batch (the first error says why).
    Created { not_made: usize, error: Option<String> },
    /// A round of deletes ended: those of `failed` pods failed (they are not expected to go).
    Deleted { failed: Vec<String>, error: Option<String> },
}

/// Stops the manager (its list-watches end with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopReplicationManager;

impl ReplicationManager {
    pub fn new(client: Arc<dyn ApiClient>) -> Self {
        Self {
            client,
            controllers: BTreeMap::new(),
            pods: OnDemandCache::default(),
            expectations: HashMap::new(),
            failures: HashMap::new(),
            retries: HashMap::new(),
            backing_off: HashSet::new(),
            dirty: BTreeSet::new(),
            sync_queued: false,
        }
    }

    fn mark(&mut self, key: Key, ctx: &mut Context<Self>) {
        self.dirty.insert(key);
        if !self.sync_queued {
            self.sync_queued = true;
            ctx.notify(SyncDirty);
        }
    }

    /// Follows pods while there are controllers, and forgets them when there are none.
    fn follow_pods(&mut self, ctx: &mut Context<Self>) {
        if self.controllers.is_empty() {
            self.pods.let_go();
        } else {
            self.pods.follow(ctx, self.client.clone(), resources::core("pods"), Pods);
        }
    }

    /// The controllers a pod concerns: its owner, or those whose selector matches an orphan.
    fn concerned(&self, pod: &Value) -> Vec<Key> {
        let (namespace, _) = key_of(pod);
        match controller_ref(pod) {
            Some(owner) => {
                let owner_name = owner.get("name").and_then(Value::as_str).unwrap_or("");
                let is_rc =
                    owner.get("kind").and_then(Value::as_str) == Some("ReplicationController");
                if is_rc {
                    vec![(namespace, owner_name.to_string())]
                } else {
                    Vec::new()
                }
            }
            None => self
                .controllers
                .range((namespace.clone(), String::new())..)
                .take_while(|((ns, _), _)| *ns == namespace)
                .filter(|(_, rc)| selector(rc).is_some_and(|s| selects(s, labels(pod))))
                .map(|(key, _)| key.clone())
                .collect(),
        }
    }

    /// Notes a pod seen created or gone against the expectations of its owner.
    fn observe(&mut self, pod: &Value, kind: EventType) {
        let (namespace, name) = key_of(pod);
        let going = kind == EventType::Deleted || crate::model::is_being_deleted(pod);
        let Some(owner) = controller_ref(pod) else {
            // An orphan a controller adopted and deleted in one round may go before its
            // adoption is written: it is still the deletion that controller waits for.
            if going {
                let expecting = self.expectations.iter_mut().filter(|(k, _)| k.0 == namespace);
                expecting.for_each(|(_, expected)| {
                    expected.deletes.remove(&name);
                });
            }
            return;
        };
        let owner_name = owner.get("name").and_then(Value::as_str).unwrap_or("").to_string();
        let Some(expected) = self.expectations.get_mut(&(namespace, owner_name)) else { return };
        if owner.get("uid").and_then(Value::as_str) != Some(expected.uid.as_str()) {
            return; // a predecessor's of that name
        }
        match kind {
            EventType::Added => expected.creates = expected.creates.saturating_sub(1),
            EventType::Deleted => {
                expected.deletes.remove(&name);
            }
            _ if crate::model::is_being_deleted(pod) => {
                expected.deletes.remove(&name);
            }
            _ => {}
        }
    }

    fn sync(&mut self, key: &Key, ctx: &mut Context<Self>) {
        let Some(rc) = self.controllers.get(key).cloned() else {
            self.expectations.remove(key);
            self.failures.remove(key);
            self.retries.remove(key);
            self.backing_off.remove(key);
            return;
        };
        let Some(selector) = selector(&rc) else { return };
        let uid = object_uid(&rc);
        // A predecessor's of that name (deleted and made again while the watch was down): none
        // of what it waits for is this controller's.
        if self.expectations.get(key).is_some_and(|expected| expected.uid != uid) {
            if let Some(stale) = self.expectations.remove(key) {
                ctx.cancel_future(stale.timeout);
            }
        }
        let deleting = crate::model::is_being_deleted(&rc);
        // What to do is worked out on the cached pods; only the few acted on are copied.
        let (mut adopt, mut release, mut owned) = (Vec::new(), Vec::new(), Vec::new());
        // Only active pods are claimed, as in Kubernetes: finished or deleted ones are let be.
        for pod in self.pods.objects().in_namespace(&key.0).filter(|pod| is_active(pod)) {
            let matches = selects(selector, labels(pod));
            match controller_ref(pod) {
                Some(owner) if owner.get("uid").and_then(Value::as_str) == Some(uid) => {
                    if matches {
                        owned.push(pod);
                    } else if !deleting {
                        release.push(pod.clone());
                    }
                }
                Some(_) => {}
                None if matches && !deleting => {
                    adopt.push(pod.clone());
                    owned.push(pod);
                }
                None => {}
            }
        }
        let manage = !deleting && self.expectations.get(key).is_none_or(Expectations::met);
        let wanted = json::at(&rc, "/spec/replicas").and_then(Value::as_u64).unwrap_or(1) as usize;
        let create = manage && !self.backing_off.contains(key);
        let needed = wanted.saturating_sub(owned.len());
        let missing = if create { needed.min(BURST) } else { 0 };
        let surplus = if manage { owned.len().saturating_sub(wanted).min(BURST) } else { 0 };
        // Nothing left to create or delete (scaled to what there is): no failure stands, as
        // Kubernetes drops the condition on a sync that manages its replicas without error.
        if manage && needed == 0 && surplus == 0 {
            self.failures.remove(key);
        }
        let victims: Vec<Value> = if surplus > 0 {
            let mut ranked = owned.clone();
            deletion_order(&mut ranked, chrono::Utc::now());
            ranked[..surplus].iter().map(|pod| (*pod).clone()).collect()
        } else {
            Vec::new()
        };
        // Victims still count until they are seen gone.
        let (status, recheck) = self.status_of(key, &rc, &owned);
        for pod in adopt {
            self.adopt(&rc, &pod, ctx);
        }
        for pod in release {
            self.release(&rc, &pod, ctx);
        }
        if missing > 0 {
            self.create(key, &rc, missing, ctx);
        }
        if !victims.is_empty() {
            self.delete(key, &rc, victims, ctx);
        }
        self.write_status(key, &rc, status, recheck, ctx);
    }

    /// Waits for `expected` before counting the controller's pods again; looks again when the
    /// wait times out, in case what it waits for is never seen.
    fn expect(
        &mut self,
        key: &Key,
        rc: &Value,
        creates: usize,
        deletes: HashSet<String>,
        ctx: &mut Context<Self>,
    ) {
        let (marked, since) = (key.clone(), Instant::now());
        // When the wait times out, what was waited for is let go, whatever time says.
        let timeout = ctx.run_later(EXPECTATIONS_TIMEOUT, move |manager, ctx| {
            if manager.expectations.get(&marked).is_some_and(|e| e.since == since) {
                manager.expectations.remove(&marked);
            }
            manager.mark(marked, ctx);
        });
        let uid = object_uid(rc).to_string();
        let expected = Expectations { uid, creates, deletes, since, timeout };
        if let Some(previous) = self.expectations.insert(key.clone(), expected) {
            ctx.cancel_future(previous.timeout);
        }
    }

    fn create(&mut self, key: &Key, rc: &Value, count: usize, ctx: &mut Context<Self>) {
        self.expect(key, rc, count, HashSet::new(), ctx);
        let pod = pod_from_template(rc);
        let client = self.client.clone();
        let controller = key.clone();
        let reference = object_ref(rc);
        let uid = object_uid(rc).to_string();
        let addr = ctx.address();
        actix::spawn(async move {
            // Slow start: batches of 1, 2, 4, ...; a batch with a failure ends the round.
            let (mut made, mut tried, mut batch, mut error) = (0, 0, 1, None);
            let (mut failed, mut terminating) = (0, false);
            while tried < count && error.is_none() && !terminating {
                let size = batch.min(count - tried);
                let creates = (0..size)
                    .map(|_| client.create(resources::core("pods"), &controller.0, pod.clone()));
                for result in futures::future::join_all(creates).await {
                    let (kind, reason, message) = match result {
                        Ok(created) => {
                            made += 1;
                            let message = format!("Created pod: {}", object_name(&created));
                            (EventKind::Normal, "SuccessfulCreate", message)
                        }
                        // The namespace is going: so is the controller. As in Kubernetes, not a
                        // failure to report or retry: the creates left count as made, and
                        // the controller waits for them until its expectations time out.
                        Err(failure) if failure.has_cause("NamespaceTerminating") => {
                            terminating = true;
                            continue;
                        }
                        Err(failure) => {
                            failed += 1;
                            let message = format!("Error creating: {failure}");
                            error.get_or_insert(failure.to_string());
                            (EventKind::Warning, "FailedCreate", message)
                        }
                    };
                    let client = client.as_ref();
                    events::record(client, &reference, kind, reason, &message, COMPONENT).await;
                }
                tried += size;
                batch *= 2;
            }
            // The creates not made are not expected: those that failed and those skipped
            // (none skipped for a terminating namespace, as above).
            let not_made = if terminating { failed } else { count - made };
            addr.do_send(Done { controller, uid, outcome: Outcome::Created { not_made, error } });
        });
    }

    fn delete(&mut self, key: &Key, rc: &Value, victims: Vec<Value>, ctx: &mut Context<Self>) {
        let names: HashSet<String> = victims.iter().map(|p| object_name(p).to_string()).collect();
        self.expect(key, rc, 0, names, ctx);
        let client = self.client.clone();
        let controller = key.clone();
        let reference = object_ref(rc);
        let uid = object_uid(rc).to_string();
        let addr = ctx.address();
        actix::spawn(async move {
            let deletes = victims.iter().map(|pod| {
                let (client, namespace) = (client.clone(), controller.0.clone());
                async move {
                    let name = object_name(pod).to_string();
                    let options = DeleteOptions::default();
                    let deleted =
                        client.delete(resources::core("pods"), &namespace, &name, &options).await;
                    (name, deleted.map(drop))
                }
            });
            let (mut failed, mut error) = (Vec::new(), None);
            for (name, deleted) in futures::future::join_all(deletes).await {
                let (kind, reason, message) = match deleted {
                    Ok(()) => {
                        (EventKind::Normal, "SuccessfulDelete", format!("Deleted pod: {name}"))
                    }
                    // Gone already: nothing to say, and no failure (as Kubernetes' pod control).
                    Err(ApiError::NotFound { .. }) => continue,
                    Err(failure) => {
                        let message = format!("Error deleting: {failure}");
                        error.get_or_insert(format!("unable to delete pods: {failure}"));
                        failed.push(name);
                        (EventKind::Warning, "FailedDelete", message)
                    }
                };
                events::record(client.as_ref(), &reference, kind, reason, &message, COMPONENT)
                    .await;
            }
            addr.do_send(Done { controller, uid, outcome: Outcome::Deleted { failed, error } });
        });
    }

    /// Makes an orphan the controller's (a strategic merge patch, held to the pod's uid).
    fn adopt(&self, rc: &Value, pod: &Value, ctx: &mut Context<Self>) {
        let patch = json!({"metadata": {"ownerReferences": [owner_reference(rc)],
            "uid": object_uid(pod)}});
        self.patch_owner(pod, patch, ctx);
    }

    /// Lets go of an owned pod the selector no longer matches.
    fn release(&self, rc: &Value, pod: &Value, ctx: &mut Context<Self>) {
        let patch = json!({"metadata": {"ownerReferences": [{"$patch": "delete",
            "uid": object_uid(rc)}], "uid": object_uid(pod)}});
        self.patch_owner(pod, patch, ctx);
    }

    fn patch_owner(&self, pod: &Value, patch: Value, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        let (namespace, name) = key_of(pod);
        ctx.spawn(
            async move {
                let patched = client
                    .patch(
                        resources::core("pods"),
                        &namespace,
                        &name,
                        PatchType::StrategicMerge,
                        &patch,
                        false,
                    )
                    .await;
                // Gone or changed meanwhile: the next sync looks again.
                if let Err(error) = patched {
                    tracing::debug!(pod = %name, %error, "changing a pod's owner");
                }
            }
            .into_actor(self),
        );
    }

    /// The status a controller's `owned` pods give it, and in how many seconds a ready pod
    /// becomes available (when one is waiting out `minReadySeconds`).
    fn status_of(&self, key: &Key, rc: &Value, owned: &[&Value]) -> (Value, Option<i64>) {
        let template_labels =
            json::at(rc, "/spec/template/metadata/labels").and_then(Value::as_object);
        let min_ready = json::at(rc, "/spec/minReadySeconds").and_then(Value::as_i64).unwrap_or(0);
        let now = chrono::Utc::now();
        let mut next_available: Option<i64> = None;
        let (mut fully_labeled, mut ready, mut available) = (0, 0, 0);
        for pod in owned {
            if template_labels.is_none_or(|wanted| selects(wanted, labels(pod))) {
                fully_labeled += 1;
            }
            let Some(ready_since) = ready_since(pod) else { continue };
            ready += 1;
            // Available once ready for more than `minReadySeconds` (a ready condition without
            // a time never is, then), as Kubernetes' `IsPodAvailable` judges it.
            let ready_for = (now - ready_since).num_milliseconds();
            if min_ready == 0 || ready_for > min_ready * 1000 && ready_since != DateTime::UNIX_EPOCH
            {
                available += 1;
            } else if ready_since != DateTime::UNIX_EPOCH {
                let wait = min_ready - ready_for / 1000;
                next_available = Some(next_available.map_or(wait, |w: i64| w.min(wait)));
            }
        }
        let mut status = Map::new();
        status.insert("replicas".into(), json!(owned.len()));
        for (field, count) in [
            ("fullyLabeledReplicas", fully_labeled),
            ("readyReplicas", ready),
            ("availableReplicas", available),
        ] {
            if count > 0 {
                status.insert(field.into(), json!(count));
            }
        }
        if let Some(generation) = json::at(rc, "/metadata/generation") {
            status.insert("observedGeneration".into(), generation.clone());
        }
        // Conditions others set stay; `ReplicaFailure` is the controller's.
        let conditions = json::at(rc, "/status/conditions").and_then(Value::as_array);
        let (failure, mut conditions): (Vec<&Value>, Vec<&Value>) =
            conditions.into_iter().flatten().partition(|c| c["type"] == "ReplicaFailure");
        let failure = self.failures.get(key).map(|(reason, message)| {
            // While failures go on, the first one's condition stays as it was written (its
            // message and time), as Kubernetes keeps it.
            failure.first().map_or_else(
                || {
                    json!({"type": "ReplicaFailure", "status": "True", "reason": reason,
                        "message": message, "lastTransitionTime": crate::model::now()})
                },
                |kept| (*kept).clone(),
            )
        });
        conditions.extend(failure.as_ref());
        if !conditions.is_empty() {
            status.insert("conditions".into(), json!(conditions));
        }
        (Value::Object(status), next_available)
    }

    /// Writes `status` when it differs from what the controller holds, and looks again when a
    /// pod becomes available (`recheck` seconds).
    fn write_status(
        &mut self,
        key: &Key,
        rc: &Value,
        status: Value,
        recheck: Option<i64>,
        ctx: &mut Context<Self>,
    ) {
        if let Some(wait) = recheck {
            let key = key.clone();
            ctx.run_later(Duration::from_secs(wait.max(1) as u64), move |actor, ctx| {
                actor.mark(key, ctx);
            });
        }
        if rc.get("status") == Some(&status) {
            return;
        }
        let mut updated = rc.clone();
        updated["status"] = status;
        let client = self.client.clone();
        let namespace = key.0.clone();
        ctx.spawn(
            async move {
                // A conflict means a newer controller is on its way: it is synced then.
                if let Err(error) = client
                    .update_status(resources::core("replicationcontrollers"), &namespace, updated)
                    .await
                {
                    tracing::debug!(%error, "writing a replication controller's status");
                }
            }
            .into_actor(self),
        );
    }
}

/// What a relist shows happened to the pods since `before` (by uid): those new as added, those
/// gone as deleted (as they were), those now being deleted as modified.
fn relist_changes<'a>(
    before: &HashMap<String, Value>,
    after: impl Iterator<Item = &'a Value>,
) -> Vec<(Value, EventType)> {
    let mut changes = Vec::new();
    let mut seen = HashSet::new();
    for pod in after {
        let uid = object_uid(pod);
        seen.insert(uid);
        match before.get(uid) {
            None => changes.push((pod.clone(), EventType::Added)),
            Some(was) if crate::model::is_being_deleted(pod) => {
                if !crate::model::is_being_deleted(was) {
                    changes.push((pod.clone(), EventType::Modified));
                }
            }
            Some(_) => {}
        }
    }
    let gone = before.iter().filter(|(uid, _)| !seen.contains(uid.as_str()));
    changes.extend(gone.map(|(_, pod)| (pod.clone(), EventType::Deleted)));
    changes
}

fn object_ref(rc: &Value) -> ObjectRef {
    ObjectRef::of(resources::core("replicationcontrollers"), rc)
}

fn owner_reference(rc: &Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ReplicationController", "name": object_name(rc),
        "uid": object_uid(rc), "controller": true, "blockOwnerDeletion": true})
}

/// A new pod of the controller's template, as Kubernetes makes it: the template's labels,
/// annotations, finalizers and spec, named after the controller, owned by it.
fn pod_from_template(rc: &Value) -> Value {
    let template = json::at(rc, "/spec/template").cloned().unwrap_or(json!({}));
    let mut metadata = Map::new();
    for field in ["labels", "annotations", "finalizers"] {
        if let Some(value) = json::at(&template, &format!("/metadata/{field}")) {
            metadata.insert(field.into(), value.clone());
        }
    }
    metadata.insert("generateName".into(), json!(format!("{}-", object_name(rc))));
    metadata.insert("ownerReferences".into(), json!([owner_reference(rc)]));
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
        "spec": template.get("spec").cloned().unwrap_or(json!({}))})
}

fn selector(rc: &Value) -> Option<&Map<String, Value>> {
    json::at(rc, "/spec/selector").and_then(Value::as_object).filter(|s| !s.is_empty())
}

fn labels(pod: &Value) -> Option<&Map<String, Value>> {
    json::at(pod, "/metadata/labels").and_then(Value::as_object)
}

fn controller_ref(object: &Value) -> Option<&Value> {
    let references = json::at(object, "/metadata/ownerReferences").and_then(Value::as_array)?;
    references.iter().find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
}

/// A pod that counts toward its controller's replicas: not finished, not being deleted.
fn is_active(pod: &Value) -> bool {
    let phase = json::at(pod, "/status/phase").and_then(Value::as_str);
    !matches!(phase, Some("Succeeded" | "Failed")) && !crate::model::is_being_deleted(pod)
}

/// Since when a pod is ready, if it is.
fn ready_since(pod: &Value) -> Option<chrono::DateTime<chrono::Utc>> {
    let conditions = json::at(pod, "/status/conditions").and_then(Value::as_array)?;
    let ready = conditions.iter().find(|c| c["type"] == "Ready" && c["status"] == "True")?;
    // Without a (readable) time, ready since ever: the same answer every time it is asked.
    let since = ready.get("lastTransitionTime").and_then(Value::as_str).unwrap_or("");
    Some(since.parse().unwrap_or(chrono::DateTime::UNIX_EPOCH))
}

/// What decides where a surplus pod stands in the order of deletion.
struct Standing {
    scheduled: bool,
    /// Pending 0, Unknown 1, Running 2.
    phase: u8,
    ready: bool,
    cost: i32,
    ready_since: Option<DateTime<Utc>>,
    /// The most restarts of a container, and of a sidecar (an init container that restarts
    /// always).
    restarts: (i64, i64),
    created: Option<DateTime<Utc>>,
    uid: String,
}

impl Standing {
    fn of(pod: &Value) -> Self {
        let node = json::at(pod, "/spec/nodeName").and_then(Value::as_str).unwrap_or("");
        let phase = match json::at(pod, "/status/phase").and_then(Value::as_str) {
            Some("Unknown") => 1,
            Some("Running") => 2,
            _ => 0,
        };
        let most_restarts = |statuses: &str, counted: &dyn Fn(&Value) -> bool| {
            let statuses = json::at(pod, statuses).and_then(Value::as_array);
            let counted = statuses.into_iter().flatten().filter(|s| counted(s));
            counted.filter_map(|s| s["restartCount"].as_i64()).max().unwrap_or(0)
        };
        let init = json::at(pod, "/spec/initContainers").and_then(Value::as_array);
        let sidecars: Vec<&Value> = (init.into_iter().flatten())
            .filter(|c| c["restartPolicy"] == "Always")
            .map(|c| &c["name"])
            .collect();
        let is_sidecar = |status: &Value| sidecars.contains(&&status["name"]);
        let created = json::at(pod, "/metadata/creationTimestamp").and_then(Value::as_str);
        let ready_since = ready_since(pod);
        Standing {
            scheduled: !node.is_empty(),
            phase,
            ready: ready_since.is_some(),
            cost: crate::model::pod_deletion_cost(pod).unwrap_or(0),
            ready_since: ready_since.filter(|t| *t != DateTime::UNIX_EPOCH),
            restarts: (
                most_restarts("/status/containerStatuses", &|_| true),
                most_restarts("/status/initContainerStatuses", &is_sidecar),
            ),
            created: created.and_then(|c| c.parse().ok()),
            uid: object_uid(pod).to_string(),
        }
    }
}

/// Orders `pods` (a controller's) for deletion, the first to go first, as Kubernetes'
/// `ActivePodsWithRanks` does: unscheduled before scheduled; pending before unknown before
/// running; not ready before ready; lower `controller.kubernetes.io/pod-deletion-cost` first;
/// ready for less time first; more restarts first; newer first. (Kubernetes' rank by how many
/// of the controller's pods share a node applies to ReplicaSets only: a ReplicationController's
/// pods all rank alike there.) Times are compared on a logarithmic scale of their age (a pod
/// ready for 5 minutes and one ready for 7 are alike), so that scaling down does not always
/// take the very newest pods; two ready pods alike in it go by uid, as Kubernetes breaks that
/// tie, unless they became ready at the very same time (pods made ready together, or all
/// again after a restart): those, and pods not ready, go by restarts (of containers, then of
/// sidecars), then age, then uid. (Kubernetes' comparison is no total order there: a group of
/// pods ready at one time stands where the first uid among them would.)
fn deletion_order(pods: &mut [&Value], now: DateTime<Utc>) {
    let standings: Vec<Standing> = pods.iter().map(|pod| Standing::of(pod)).collect();
    let mut firsts: HashMap<Option<DateTime<Utc>>, &str> = HashMap::new();
    for standing in standings.iter().filter(|s| s.ready) {
        let first = firsts.entry(standing.ready_since).or_insert(&standing.uid);
        *first = (*first).min(standing.uid.as_str());
    }
    let mut ranked: Vec<(_, &Value)> = (standings.iter().zip(pods.iter()))
        .map(|(standing, pod)| {
            let first = if standing.ready { firsts[&standing.ready_since] } else { "" };
            (standing.rank(now, first), *pod)
        })
        .collect();
    ranked.sort_by(|(a, _), (b, _)| a.cmp(b));
    for (slot, (_, pod)) in pods.iter_mut().zip(ranked) {
        *slot = pod;
    }
}

impl Standing {
    /// Its place in the order of deletion, lowest first: a key compared as a whole, so a total
    /// order. `ready_group` is the first uid among the ready pods that became ready at the
    /// same time as this one (empty for a pod not ready).
    fn rank(&self, now: DateTime<Utc>, ready_group: &str) -> impl Ord {
        use std::cmp::Reverse;
        // Only ready pods are compared by how long they have been.
        let ready_for = if self.ready { age_scale(self.ready_since, now) } else { (false, 0) };
        (
            (self.scheduled, self.phase, self.ready, self.cost),
            (ready_for, ready_group.to_string()),
            Reverse(self.restarts),
            age_scale(self.created, now),
            self.uid.clone(),
        )
    }
}

/// A time as compared for deletion: an unknown one first, then by the power of two of its age
/// in nanoseconds (younger first), as Kubernetes' logarithmic scale-down ranks them.
fn age_scale(time: Option<DateTime<Utc>>, now: DateTime<Utc>) -> (bool, i64) {
    let Some(time) = time else { return (false, 0) };
    let scale = match (now - time).num_nanoseconds() {
        Some(age) if age > 0 => (age as f64).log2() as i64,
        Some(_) => -1,
        None => i64::MAX,
    };
    (true, scale)
}

impl Actor for ReplicationManager {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        informer::feed_actor(
            ctx,
            client,
            resources::core("replicationcontrollers"),
            Scope::default(),
            Controllers,
        );
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.pods.let_go();
    }
}

impl Handler<Controllers> for ReplicationManager {
    type Result = ();

    fn handle(&mut self, Controllers(feed): Controllers, ctx: &mut Context<Self>) {
        match feed {
            Feed::Listed(items) => {
                // Those gone while the watch was down are synced too: their state is dropped.
                let keys = relist(&mut self.controllers, items);
                keys.into_iter().for_each(|key| self.mark(key, ctx));
            }
            Feed::Changed(EventType::Deleted, rc) => {
                let key = key_of(&rc);
                self.controllers.remove(&key);
                self.expectations.remove(&key);
                self.failures.remove(&key);
                self.retries.remove(&key);
                self.backing_off.remove(&key);
            }
            Feed::Changed(_, rc) => {
                let key = key_of(&rc);
                self.controllers.insert(key.clone(), rc);
                self.mark(key, ctx);
            }
            Feed::Unavailable(_) => return,
        }
        self.follow_pods(ctx);
    }
}

impl Handler<Pods> for ReplicationManager {
    type Result = ();

    fn handle(&mut self, Pods(run, feed): Pods, ctx: &mut Context<Self>) {
        let change = match &feed {
            Feed::Changed(kind, _) => Some(*kind),
            _ => None,
        };
        // Before a relist, the pods as the cache held them.
        let before: Option<HashMap<String, Value>> = matches!(feed, Feed::Listed(_)).then(|| {
            let cached = self.pods.objects().all();
            cached.map(|pod| (object_uid(pod).to_string(), pod.clone())).collect()
        });
        match self.pods.apply(run, feed) {
            // What was created or deleted while the watch was down is in the list, not in
            // events: the difference meets the expectations as those events would have (a
            // round still going goes on being counted, as Kubernetes' informer tells a relist's
            // differences as events).
            Applied::Listed => {
                let before = before.unwrap_or_default();
                let changes = relist_changes(&before, self.pods.objects().all());
                for (pod, kind) in changes {
                    self.observe(&pod, kind);
                }
                let keys: Vec<Key> = self.controllers.keys().cloned().collect();
                keys.into_iter().for_each(|key| self.mark(key, ctx));
            }
            Applied::Changed { object, previous } => {
                if let Some(kind) = change {
                    self.observe(&object, kind);
                }
                // A pod whose labels or owner changed may concern others than before.
                let mut concerned = self.concerned(&object);
                concerned.extend(previous.iter().flat_map(|previous| self.concerned(previous)));
                concerned.into_iter().for_each(|key| self.mark(key, ctx));
            }
            Applied::Nothing => {}
        }
    }
}

impl Handler<SyncDirty> for ReplicationManager {
    type Result = ();

    fn handle(&mut self, _: SyncDirty, ctx: &mut Context<Self>) {
        self.sync_queued = false;
        if !self.pods.objects().is_listed() {
            return; // marked again once the pods are listed
        }
        let dirty = std::mem::take(&mut self.dirty);
        for key in dirty {
            self.sync(&key, ctx);
        }
    }
}

impl Handler<Done> for ReplicationManager {
    type Result = ();

    fn handle(&mut self, Done { controller, uid, outcome }: Done, ctx: &mut Context<Self>) {
        let Some(rc) = self.controllers.get(&controller) else { return }; // deleted meanwhile
        if object_uid(rc) != uid {
            return; // a predecessor's work: its successor expects none of it
        }
        let expected = self.expectations.get_mut(&controller).filter(|e| e.uid == uid);
        let failure = match outcome {
            Outcome::Created { not_made, error } => {
                if let Some(expected) = expected {
                    expected.creates = expected.creates.saturating_sub(not_made);
                }
                error.map(|error| ("FailedCreate", error))
            }
            Outcome::Deleted { failed, error } => {
                if let Some(expected) = expected {
                    failed.iter().for_each(|pod| {
                        expected.deletes.remove(pod);
                    });
                }
                error.map(|error| ("FailedDelete", error))
            }
        };
        match failure {
            // Tried again after a back-off (doubling from 100 ms to a minute), not at once: a
            // create refused by a quota would otherwise be retried as fast as it fails.
            Some(failure) => {
                self.failures.insert(controller.clone(), failure);
                let delay = back_off(&mut self.retries, &controller);
                self.backing_off.insert(controller.clone());
                ctx.run_later(delay, move |manager, ctx| {
                    manager.backing_off.remove(&controller);
                    manager.mark(controller, ctx);
                });
            }
            None => {
                self.failures.remove(&controller);
                self.retries.remove(&controller);
                self.mark(controller, ctx);
            }
        }
    }
}

impl Handler<StopReplicationManager> for ReplicationManager {
    type Result = ();

    fn handle(&mut self, _: StopReplicationManager, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::core::{ApiCore, ListOptions};
    use crate::testing::{core, eventually, Call, Hooked};
    use futures::FutureExt;

    fn rc(name: &str, replicas: u64, template: Value) -> Value {
        json!({"metadata": {"name": name}, "spec": {"replicas": replicas,
            "selector": {"app": name},
            "template": {"metadata": {"labels": {"app": name}}, "spec": template}}})
    }

    fn plain() -> Value {
        json!({"containers": [{"name": "c", "image": "kplane/pause"}]})
    }

    /// The pods of the namespace, by name, with whether `owner` owns them.
    async fn pods_of(core: &ApiCore, owner: &str) -> Vec<(String, bool)> {
        let options = ListOptions::default();
        let list = ApiClient::list(core, resources::core("pods"), Some("default"), &options)
            .await
            .unwrap();
        let owned = |pod: &Value| {
            controller_ref(pod)
                .is_some_and(|r| r["name"] == owner && r["kind"] == "ReplicationController")
        };
        list.items
            .iter()
            .filter(|p| !crate::model::is_being_deleted(p))
            .map(|p| (object_name(p).to_string(), owned(p)))
            .collect()
    }

    async fn status(core: &ApiCore, name: &str) -> Value {
        ApiClient::get(core, resources::core("replicationcontrollers"), "default", name)
            .await
            .unwrap()["status"]
            .clone()
    }

    async fn until_owned(core: &ApiCore, owner: &str, count: usize) -> Vec<String> {
        eventually(&format!("{count} pods of {owner}"), || async {
            let pods = pods_of(core, owner).await;
            let owned: Vec<String> =
                pods.iter().filter(|(_, o)| *o).map(|(n, _)| n.clone()).collect();
            let replicas = status(core, owner).await["replicas"].as_u64();
            (owned.len() == count && replicas == Some(count as u64)).then_some(owned)
        })
        .await
    }

    fn expecting(uid: &str, creates: usize, deletes: HashSet<String>) -> Expectations {
        let (uid, since, timeout) = (uid.to_string(), Instant::now(), SpawnHandle::default());
        Expectations { uid, creates, deletes, since, timeout }
    }

    #[actix::test]
    async fn a_predecessors_pods_meet_no_expectation_of_a_controller_of_its_name() {
        let mut manager = ReplicationManager::new(Arc::new(core().await));
        let key = ("default".to_string(), "web".to_string());
        let deletes = HashSet::from(["web-old".to_string()]);
        manager.expectations.insert(key.clone(), expecting("new", 1, deletes));
        let pod = |name: &str, uid: &str| {
            json!({"metadata": {"name": name, "namespace": "default", "ownerReferences": [
                {"kind": "ReplicationController", "name": "web", "uid": uid, "controller": true}]}})
        };
        // The deleted controller's create round, still going, and its pods being collected.
        manager.observe(&pod("web-late", "old"), EventType::Added);
        manager.observe(&pod("web-old", "old"), EventType::Deleted);
        let expected = &manager.expectations[&key];
        assert_eq!((expected.creates, expected.deletes.len()), (1, 1));
        manager.observe(&pod("web-new", "new"), EventType::Added);
        manager.observe(&pod("web-old", "new"), EventType::Deleted);
        assert!(manager.expectations[&key].met());
    }

    #[actix::test]
    async fn creates_refused_by_a_terminating_namespace_are_not_retried() {
        let core = core().await;
        let namespaces = resources::core("namespaces");
        let namespace = json!({"metadata": {"name": "ending"}});
        ApiClient::create(&core, namespaces, "", namespace).await.unwrap();
        let account = json!({"metadata": {"name": "default"}});
        ApiClient::create(&core, resources::core("serviceaccounts"), "ending", account)
            .await
            .unwrap();
        let refused = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = refused.clone();
        let client = Hooked::new(&core, move |core, call| {
            let counted = counted.clone();
            async move {
                let Call::Create { resource, namespace } = call else { return };
                if resource.plural != "pods" {
                    return;
                }
                let namespaces = resources::core("namespaces");
                let ending = ApiClient::get(&core, namespaces, "", &namespace).await.unwrap();
                if ending["status"]["phase"] == "Terminating" {
                    counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
            }
            .boxed()
        });
        let _manager = ReplicationManager::new(Arc::new(client)).start();
        let rcs = resources::core("replicationcontrollers");
        ApiClient::create(&core, rcs, "ending", rc("web", 1, plain())).await.unwrap();
        eventually("the first pod", || async {
            let status =
                ApiClient::get(&core, rcs, "ending", "web").await.unwrap()["status"].clone();
            (status["replicas"] == 1).then_some(())
        })
        .await;
        // No namespace controller runs here: the namespace stays terminating, with the
        // controller in it, which is then scaled up.
        let options = DeleteOptions::default();
        ApiClient::delete(&core, namespaces, "", "ending", &options).await.unwrap();
        let scale = json!({"spec": {"replicas": 5}});
        ApiClient::patch(&core, rcs, "ending", "web", PatchType::Merge, &scale, false)
            .await
            .unwrap();
        eventually("a create refused", || async {
            (refused.load(std::sync::atomic::Ordering::SeqCst) > 0).then_some(())
        })
        .await;
        // The creates left count as made: the controller waits for them (until its
        // expectations time out) rather than asking again at once, round after round.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(refused.load(std::sync::atomic::Ordering::SeqCst), 1);
        let status = ApiClient::get(&core, rcs, "ending", "web").await.unwrap()["status"].clone();
        assert!(status.get("conditions").is_none(), "not a failure: {status}");
    }

    #[test]
    fn a_relist_tells_what_it_shows_created_deleted_or_going() {
        let pod = |uid: &str, deleting: bool| {
            let mut pod = json!({"metadata": {"name": uid, "uid": uid}});
            if deleting {
                pod["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
            }
            pod
        };
        let before: HashMap<String, Value> =
            [pod("kept", false), pod("gone", false), pod("going", false), pod("went", true)]
                .into_iter()
                .map(|p| (object_uid(&p).to_string(), p))
                .collect();
        let after = [pod("kept", false), pod("going", true), pod("went", true), pod("new", false)];
        let mut changes: Vec<(String, EventType)> = relist_changes(&before, after.iter())
            .into_iter()
            .map(|(p, kind)| (object_uid(&p).to_string(), kind))
            .collect();
        changes.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            changes,
            [
                ("going".to_string(), EventType::Modified),
                ("gone".to_string(), EventType::Deleted),
                ("new".to_string(), EventType::Added),
            ]
        );
    }

    #[actix::test]
    async fn an_orphan_deleted_before_its_adoption_is_written_meets_the_expectation() {
        let core = core().await;
        let mut manager = ReplicationManager::new(Arc::new(core));
        let key = ("default".to_string(), "web".to_string());
        let deletes = HashSet::from(["extra".to_string()]);
        manager.expectations.insert(key.clone(), expecting("u1", 0, deletes));
        let elsewhere = json!({"metadata": {"name": "extra", "namespace": "other"}});
        manager.observe(&elsewhere, EventType::Deleted);
        assert!(!manager.expectations[&key].met(), "another namespace's pod of that name");
        let orphan = json!({"metadata": {"name": "extra", "namespace": "default"}});
        manager.observe(&orphan, EventType::Deleted);
        assert!(manager.expectations[&key].met());
    }

    #[actix::test]
    async fn keeps_the_replicas_adopting_orphans_and_releasing_strays() {
        let core = core().await;
        // An orphan with the controller's labels, there before it: adopted, not duplicated.
        let orphan =
            json!({"metadata": {"name": "orphan", "labels": {"app": "web"}}, "spec": plain()});
        ApiClient::create(&core, resources::core("pods"), "default", orphan).await.unwrap();
        let manager = ReplicationManager::new(Arc::new(core.clone())).start();
        ApiClient::create(
            &core,
            resources::core("replicationcontrollers"),
            "default",
            rc("web", 3, plain()),
        )
        .await
        .unwrap();
        let owned = until_owned(&core, "web", 3).await;
        assert!(owned.contains(&"orphan".to_string()), "{owned:?}");
        assert!(owned.iter().filter(|n| n.starts_with("web-")).count() == 2, "{owned:?}");
        let created = owned.iter().find(|n| n.starts_with("web-")).unwrap().clone();
        let pod =
            ApiClient::get(&core, resources::core("pods"), "default", &created).await.unwrap();
        assert_eq!(pod["metadata"]["ownerReferences"][0]["blockOwnerDeletion"], true);
        assert_eq!(status(&core, "web").await["observedGeneration"], 1);

        // A pod relabeled out of the selector is let go, and replaced.
        let patch = json!({"metadata": {"labels": {"app": "elsewhere"}}});
        ApiClient::patch(
            &core,
            resources::core("pods"),
            "default",
            &created,
            PatchType::Merge,
            &patch,
            false,
        )
        .await
        .unwrap();
        eventually("the stray released", || async {
            let pods = pods_of(&core, "web").await;
            pods.contains(&(created.clone(), false)).then_some(())
        })
        .await;
        let owned = until_owned(&core, "web", 3).await;
        assert!(!owned.contains(&created), "{owned:?}");

        // Scaled down and up again; a deleted pod is replaced.
        let scale = json!({"spec": {"replicas": 1}});
        ApiClient::patch(
            &core,
            resources::core("replicationcontrollers"),
            "default",
            "web",
            PatchType::Merge,
            &scale,
            false,
        )
        .await
        .unwrap();
        let kept = until_owned(&core, "web", 1).await;
        let options = DeleteOptions::default();
        ApiClient::delete(&core, resources::core("pods"), "default", &kept[0], &options)
            .await
            .unwrap();
        let replaced = until_owned(&core, "web", 1).await;
        assert_ne!(replaced, kept);
        assert_eq!(status(&core, "web").await["observedGeneration"], 2);
        // Nothing more happens: exactly one pod stays, and no other was made meanwhile.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let options = ListOptions::default();
        let all = ApiClient::list(&core, resources::core("pods"), Some("default"), &options)
            .await
            .unwrap()
            .items;
        let mine: Vec<&str> = all
            .iter()
            .filter(|p| controller_ref(p).is_some_and(|r| r["name"] == "web"))
            .map(object_name)
            .collect();
        assert_eq!(mine, replaced, "terminating ones included");
        manager.send(StopReplicationManager).await.unwrap();
    }

    #[actix::test]
    async fn a_failing_create_is_a_replica_failure_in_the_status() {
        let core = core().await;
        let _manager = ReplicationManager::new(Arc::new(core.clone())).start();
        let mut template = plain();
        template["serviceAccountName"] = json!("ghost");
        ApiClient::create(
            &core,
            resources::core("replicationcontrollers"),
            "default",
            rc("lost", 2, template),
        )
        .await
        .unwrap();
        let condition = eventually("the failure in the status", || async {
            let conditions = status(&core, "lost").await["conditions"].clone();
            conditions.get(0).cloned()
        })
        .await;
        assert_eq!(condition["type"], "ReplicaFailure");
        assert_eq!(condition["reason"], "FailedCreate");
        let message = condition["message"].as_str().unwrap();
        assert!(message.contains("serviceaccount \"ghost\" not found"), "{message}");
        assert!(pods_of(&core, "lost").await.is_empty());
        // Scaled to what there is, nothing fails any more: the condition goes (Kubernetes drops
        // it on the next sync without an error), while the creates still back off.
        let scale = json!({"spec": {"replicas": 0}});
        let rcs = resources::core("replicationcontrollers");
        ApiClient::patch(&core, rcs, "default", "lost", PatchType::Merge, &scale, false)
            .await
            .unwrap();
        eventually("the failure gone", || async {
            let status = status(&core, "lost").await;
            (status["observedGeneration"] == 2 && status.get("conditions").is_none()).then_some(())
        })
        .await;
    }

    #[test]
    fn surplus_pods_go_least_far_along_first() {
        let pod = |name: &str, node: &str, phase: &str, ready: bool, created: &str| {
            let mut pod = json!({"metadata": {"name": name, "creationTimestamp": created},
                "spec": {"nodeName": node}, "status": {"phase": phase}});
            if ready {
                pod["status"]["conditions"] = json!([{"type": "Ready", "status": "True",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
            }
            pod
        };
        let pods = [
            pod("running-ready", "n", "Running", true, "2026-01-01T00:00:00Z"),
            pod("running-old", "n", "Running", false, "2026-01-01T00:00:00Z"),
            pod("running-new", "n", "Running", false, "2026-01-02T00:00:00Z"),
            pod("pending", "n", "Pending", false, "2026-01-01T00:00:00Z"),
            pod("unscheduled", "", "Pending", false, "2026-01-01T00:00:00Z"),
        ];
        let mut order: Vec<&Value> = pods.iter().collect();
        let now = "2026-01-02T00:00:10Z".parse().unwrap();
        deletion_order(&mut order, now);
        let names: Vec<&str> = order.iter().map(|p| object_name(p)).collect();
        assert_eq!(
            names,
            ["unscheduled", "pending", "running-new", "running-old", "running-ready"]
        );
    }

    #[test]
    fn any_mix_of_pods_is_ordered_without_a_panic() {
        // Ready times and ages spread over seconds, several alike, as a scale-down meets them
        // (Rust's sort panics on an order that is not total).
        let now: DateTime<Utc> = "2026-06-01T12:00:00Z".parse().unwrap();
        let pods: Vec<Value> = (0..200)
            .map(|i| {
                let since = now - chrono::Duration::milliseconds((i * 7919 % 97) * 61);
                let created = now - chrono::Duration::seconds(i * 31 % 13);
                json!({"metadata": {"name": format!("p{i}"), "uid": format!("u{}", i * 37 % 200),
                        "creationTimestamp": created},
                    "spec": {"nodeName": format!("n{}", i % 3)},
                    "status": {"phase": "Running", "containerStatuses": [{"restartCount": i % 2}],
                        "conditions": [{"type": "Ready", "status": if i % 5 == 0 { "False" } else { "True" },
                            "lastTransitionTime": since}]}})
            })
            .collect();
        let mut order: Vec<&Value> = pods.iter().collect();
        deletion_order(&mut order, now);
        assert_eq!(order.len(), 200);
        assert!(order[..40].iter().all(|p| p["status"]["conditions"][0]["status"] == "False"));
    }

    /// Pods that became ready at the very same time go by restarts (containers', then
    /// sidecars'), then age, as Kubernetes compares them only then; not by uid.
    #[test]
    fn pods_ready_at_the_same_time_go_by_restarts_then_age() {
        let now: DateTime<Utc> = "2026-06-01T12:00:00Z".parse().unwrap();
        let pod = |uid: &str, created_seconds_ago: i64, restarts: i64, sidecar_restarts: i64| {
            let created = now - chrono::Duration::seconds(created_seconds_ago);
            json!({"metadata": {"name": uid, "uid": uid, "creationTimestamp": created},
                "spec": {"nodeName": "n", "initContainers": [
                    {"name": "side", "restartPolicy": "Always"}, {"name": "init"}]},
                "status": {"phase": "Running",
                    "containerStatuses": [{"name": "c", "restartCount": restarts}],
                    "initContainerStatuses": [
                        {"name": "side", "restartCount": sidecar_restarts},
                        {"name": "init", "restartCount": 9}],
                    "conditions": [{"type": "Ready", "status": "True",
                        "lastTransitionTime": "2026-06-01T11:59:50Z"}]}})
        };
        let pods = [
            pod("a-old", 28, 0, 0),
            pod("b-new", 13, 0, 0),
            pod("c-old", 28, 0, 0),
            pod("d-new", 13, 0, 0),
            pod("e-restarted", 28, 1, 0),
            pod("f-sidecar-restarted", 28, 0, 2),
        ];
        let mut order: Vec<&Value> = pods.iter().collect();
        deletion_order(&mut order, now);
        let names: Vec<&str> = order.iter().map(|p| object_name(p)).collect();
        assert_eq!(
            names,
            ["e-restarted", "f-sidecar-restarted", "b-new", "d-new", "a-old", "c-old"]
        );
    }

    #[test]
    fn surplus_pods_go_by_deletion_cost_then_readiness_on_a_log_scale() {
        let now: DateTime<Utc> = "2026-06-01T12:00:00Z".parse().unwrap();
        let pod = |uid: &str, node: &str, cost: Option<&str>, ready_minutes_ago: i64| {
            let since = now - chrono::Duration::minutes(ready_minutes_ago);
            let mut pod = json!({"metadata": {"name": uid, "uid": uid,
                    "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"nodeName": node}, "status": {"phase": "Running", "conditions": [
                    {"type": "Ready", "status": "True", "lastTransitionTime": since}]}});
            if let Some(cost) = cost {
                pod["metadata"]["annotations"] = json!({crate::model::POD_DELETION_COST: cost});
            }
            pod
        };
        let order = |pods: &[Value]| {
            let mut order: Vec<&Value> = pods.iter().collect();
            deletion_order(&mut order, now);
            order.iter().map(|p| object_name(p).to_string()).collect::<Vec<_>>()
        };
        // The cheapest first; then the newest ready, whatever node it is on (an RC's pods do
        // not rank by how crowded their node is).
        let pods = [
            pod("a-old", "a", Some("100"), 600),
            pod("a-cheap", "a", Some("-10"), 600),
            pod("b-new", "b", Some("100"), 1),
        ];
        assert_eq!(order(&pods), ["a-cheap", "b-new", "a-old"]);
        let pods = [pod("x", "a", None, 600), pod("y", "a", None, 600), pod("z", "b", None, 1)];
        assert_eq!(order(&pods)[0], "z");
        // Ready 5 and 7 minutes: alike on the logarithmic scale, so by uid; 1 minute goes first.
        let pods = [pod("p2", "a", None, 5), pod("p1", "b", None, 7), pod("p3", "c", None, 1)];
        assert_eq!(order(&pods), ["p3", "p1", "p2"]);
        // Alike ready ones go by uid, not by restarts.
        let mut restarted = pod("q2", "a", None, 5);
        restarted["status"]["containerStatuses"] = json!([{"restartCount": 9}]);
        assert_eq!(order(&[restarted, pod("q1", "a", None, 7)]), ["q1", "q2"]);
    }

    #[actix::test]
    async fn availability_needs_more_than_min_ready_seconds_of_a_known_ready_time() {
        let manager = ReplicationManager::new(Arc::new(crate::testing::core().await));
        let rc = json!({"metadata": {"name": "r", "namespace": "d", "generation": 1},
            "spec": {"minReadySeconds": 10},
            "status": {"conditions": [{"type": "Custom", "status": "True"}]}});
        let ready = |since: Option<String>| {
            let mut condition = json!({"type": "Ready", "status": "True"});
            if let Some(since) = since {
                condition["lastTransitionTime"] = json!(since);
            }
            json!({"metadata": {"name": "p"}, "status": {"phase": "Running", "conditions": [condition]}})
        };
        let ago = |s: i64| (Utc::now() - chrono::Duration::seconds(s)).to_rfc3339();
        let pods = [ready(Some(ago(60))), ready(Some(ago(3))), ready(None)];
        let owned: Vec<&Value> = pods.iter().collect();
        let key = ("d".to_string(), "r".to_string());
        let (status, recheck) = manager.status_of(&key, &rc, &owned);
        assert_eq!(
            (status["readyReplicas"].clone(), status["availableReplicas"].clone()),
            (json!(3), json!(1))
        );
        assert!(recheck.is_some_and(|w| (6..=8).contains(&w)), "{recheck:?}");
        // Others' conditions stay.
        assert_eq!(status["conditions"], json!([{"type": "Custom", "status": "True"}]));
    }
}
