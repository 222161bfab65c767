//! The persistent volume controller (Kubernetes' PV binder): binds each pending
//! PersistentVolumeClaim to a PersistentVolume that satisfies it, and follows both through
//! their lives, as kube-controller-manager's `persistentvolume-binder` does:
//!
//! - a claim without a volume gets the smallest free volume of its storage class, volume
//!   mode and access modes (all of the claim's), at least its storage request, and matching
//!   its selector; a volume whose `claimRef` names the claim (pre-bound) is taken first. The
//!   volume gets the claim in `claimRef` and phase Bound; the claim its `volumeName`, the
//!   `pv.kubernetes.io/bind-completed` annotation and phase Bound with the volume's capacity
//!   and access modes. Without a match the claim stays Pending (a `FailedBinding` event);
//! - a claim naming its volume (`volumeName`) is bound to that one if it satisfies the claim
//!   and is free;
//! - a bound claim whose volume is gone, or bound to another claim, is Lost;
//! - a volume whose claim is gone is Released, and with `persistentVolumeReclaimPolicy:
//!   Retain` stays so until its user frees it (removes `claimRef`); kplane has no volume
//!   plugin that deletes or recycles storage, so with `Delete` or `Recycle` it is Failed, as
//!   Kubernetes leaves a volume no plugin can reclaim;
//! - a volume with no claim is Available.
//!
//! Volumes and claims are re-examined when they change and every 15 s.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use serde_json::{json, Value};

use super::back_off;
use crate::client::cache::{apply_feed, key_of, Key};
use crate::client::events::{self, EventKind, ObjectRef};
use crate::client::informer::{self, Feed};
use crate::client::{object_name, object_uid, ApiClient};
use crate::core::ApiError;
use crate::model::quantity;
use crate::model::{is_being_deleted, json, resources, storage_class, LabelSelector, Labels};

const COMPONENT: &str = "persistentvolume-controller";
/// How often every volume and claim is looked at again (the binder's `--pvclaimbinder-sync-period`).
const RESYNC: Duration = Duration::from_secs(15);
const BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
const BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";

/// The persistent volume controller actor.
pub struct PersistentVolumeController {
    client: Arc<dyn ApiClient>,
    volumes: BTreeMap<String, Value>,
    claims: BTreeMap<Key, Value>,
    /// Work waiting.
    pending: BTreeSet<Work>,
    working: bool,
    retries: HashMap<Work, u32>,
    /// Which of volumes and claims have been listed: nothing is done before both are (a
    /// volume whose claim is not known yet is not released).
    listed: (bool, bool),
}

/// One object to look at (volumes first).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Work {
    Volume(String),
    Claim(Key),
}

/// A feed of volumes.
#[derive(Message)]
#[rtype(result = "()")]
struct Volumes(Feed);

/// A feed of claims.
#[derive(Message)]
#[rtype(result = "()")]
struct Claims(Feed);

/// Stops the controller (its list-watches end with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopPersistentVolumeController;

fn volumes() -> &'static resources::ResourceType {
    resources::core("persistentvolumes")
}

fn claims() -> &'static resources::ResourceType {
    resources::core("persistentvolumeclaims")
}

impl PersistentVolumeController {
    pub fn new(client: Arc<dyn ApiClient>) -> Self {
        Self {
            client,
            volumes: BTreeMap::new(),
            claims: BTreeMap::new(),
            pending: BTreeSet::new(),
            working: false,
            retries: HashMap::new(),
            listed: (false, false),
        }
    }

    /// Works off what is pending, one object at a time, in one task.
    fn work(&mut self, ctx: &mut Context<Self>) {
        if self.working || self.pending.is_empty() || self.listed != (true, true) {
            return;
        }
        let Some(work) = self.pending.pop_first() else { return };
        let job = match &work {
            Work::Claim(key) => match self.claims.get(key) {
                Some(claim) => Job::Claim(claim.clone(), self.volumes.values().cloned().collect()),
                None => return self.work(ctx),
            },
            Work::Volume(name) => match self.volumes.get(name) {
                Some(volume) => {
                    let claim = claim_ref_key(volume).and_then(|key| self.claims.get(&key));
                    Job::Volume(volume.clone(), claim.cloned())
                }
                None => return self.work(ctx),
            },
        };
        self.working = true;
        let client = self.client.clone();
        let done = async move {
            match job {
                Job::Claim(claim, volumes) => sync_claim(client.as_ref(), claim, &volumes).await,
                Job::Volume(volume, claim) => sync_volume(client.as_ref(), volume, claim).await,
            }
        };
        ctx.spawn(done.into_actor(self).map(move |result, act, ctx| {
            act.working = false;
            match result {
                Ok(()) => {
                    act.retries.remove(&work);
                }
                Err(error) => {
                    tracing::debug!(?work, %error, "binding persistent volumes");
                    let wait = back_off(&mut act.retries, &work);
                    ctx.run_later(wait, move |act, ctx| {
                        act.pending.insert(work);
                        act.work(ctx);
                    });
                }
            }
            act.work(ctx);
        }));
    }
}

/// What one piece of work reads: the object, and what it is matched against.
enum Job {
    Claim(Value, Vec<Value>),
    Volume(Value, Option<Value>),
}

fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    json::at(object, "/metadata/annotations").and_then(|a| a.get(key)).and_then(Value::as_str)
}

fn annotate(object: &mut Value, key: &str) {
    if !object["metadata"]["annotations"].is_object() {
        object["metadata"]["annotations"] = json!({});
    }
    object["metadata"]["annotations"][key] = json!("yes");
}

fn text<'a>(object: &'a Value, pointer: &str) -> &'a str {
    json::at(object, pointer).and_then(Value::as_str).unwrap_or("")
}

/// The claim a volume's `claimRef` names.
fn claim_ref_key(volume: &Value) -> Option<Key> {
    let reference = json::at(volume, "/spec/claimRef").filter(|r| r.is_object())?;
    Some((text(reference, "/namespace").to_string(), text(reference, "/name").to_string()))
}

/// Whether `volume`'s claimRef names `claim` (by name, and by uid once it has one).
fn bound_to(volume: &Value, claim: &Value) -> bool {
    let Some(reference) = json::at(volume, "/spec/claimRef").filter(|r| r.is_object()) else {
        return false;
    };
    claim_ref_key(volume) == Some(key_of(claim))
        && match text(reference, "/uid") {
            "" => true,
            uid => uid == object_uid(claim),
        }
}

/// Whether a volume is bound, or pre-bound, to no claim.
fn is_free(volume: &Value) -> bool {
    json::at(volume, "/spec/claimRef").is_none_or(Value::is_null)
}

fn access_modes(object: &Value) -> BTreeSet<String> {
    let listed = json::at(object, "/spec/accessModes").and_then(Value::as_array);
    listed.into_iter().flatten().filter_map(Value::as_str).map(String::from).collect()
}

fn bytes(value: Option<&Value>) -> Option<i64> {
    quantity::value(value?.as_str()?).ok()
}

fn volume_mode(object: &Value) -> &str {
    match text(object, "/spec/volumeMode") {
        "" => "Filesystem",
        mode => mode,
    }
}

fn capacity_short_of(volume: &Value, claim: &Value) -> bool {
    let requested = bytes(json::at(claim, "/spec/resources/requests/storage")).unwrap_or(0);
    bytes(json::at(volume, "/spec/capacity/storage")).unwrap_or(0) < requested
}

/// Why `volume` cannot hold `claim`, which names it (`None`: it can), in the order and words
/// of Kubernetes' `checkVolumeSatisfyClaim` (the claim's selector is not looked at: it named
/// its volume).
fn unsuitable(volume: &Value, claim: &Value) -> Option<String> {
    if is_being_deleted(volume) {
        return Some(format!("the volume is marked for deletion {:?}", object_name(volume)));
    }
    if capacity_short_of(volume, claim) {
        return Some("requested PV is too small".into());
    }
    if storage_class(claim) != storage_class(volume) {
        return Some("storageClassName does not match".into());
    }
    if volume_mode(claim) != volume_mode(volume) {
        return Some("incompatible volumeMode".into());
    }
    if !access_modes(claim).is_subset(&access_modes(volume)) {
        return Some("incompatible accessMode".into());
    }
    None
}

/// Whether `volume` may be matched to `claim` at all (Kubernetes' `FindMatchingVolume`: its
/// volume mode and access modes, not being deleted).
fn matchable(volume: &Value, claim: &Value) -> bool {
    !is_being_deleted(volume)
        && volume_mode(claim) == volume_mode(volume)
        && access_modes(claim).is_subset(&access_modes(volume))
}

/// The volume a claim without one gets, as Kubernetes' `FindMatchingVolume` picks it: one
/// reserved for it (its `claimRef` names the claim) that is large enough, whatever its class
/// or labels; else, of the free ones of the claim's class, matching its selector and large
/// enough, one with the fewest access modes, then the smallest.
fn best_volume<'a>(claim: &Value, volumes: &'a [Value]) -> Option<&'a Value> {
    let reserved = |volume: &&Value| {
        bound_to(volume, claim) && matchable(volume, claim) && !capacity_short_of(volume, claim)
    };
    if let Some(prebound) = volumes.iter().find(reserved) {
        return Some(prebound);
    }
    let selector = json::at(claim, "/spec/selector").filter(|s| s.is_object());
    let selected = |volume: &&Value| {
        selector.is_none_or(|selector| {
            LabelSelector::from_object(selector)
                .is_ok_and(|selector| selector.matches(&Labels::of(volume)))
        })
    };
    volumes
        .iter()
        .filter(|v| is_free(v))
        // Available, or new and about to be (not Released, Failed or Bound).
        .filter(|v| matches!(text(v, "/status/phase"), "" | "Pending" | "Available"))
        .filter(|v| matchable(v, claim) && !capacity_short_of(v, claim))
        .filter(|v| storage_class(v) == storage_class(claim))
        .filter(selected)
        .min_by_key(|v| {
            let size = bytes(json::at(v, "/spec/capacity/storage")).unwrap_or(0);
            (access_modes(v).len(), size, object_name(v).to_string())
        })
}

async fn record(
    client: &dyn ApiClient,
    object: ObjectRef,
    kind: EventKind,
    reason: &str,
    message: &str,
) {
    events::record(client, &object, kind, reason, message, COMPONENT).await;
}

/// Sets a volume's or claim's `status.phase` (and a claim's capacity and access modes from its
/// volume), if it changed.
async fn set_phase(
    client: &dyn ApiClient,
    resource: &'static resources::ResourceType,
    object: &Value,
    phase: &str,
    message: Option<&str>,
    volume: Option<&Value>,
) -> Result<Value, ApiError> {
    let mut updated = object.clone();
    updated["status"]["phase"] = json!(phase);
    match message {
        Some(message) => updated["status"]["message"] = json!(message),
        None => {
            if let Some(status) = updated["status"].as_object_mut() {
                status.remove("message");
            }
        }
    }
    // A claim's capacity and access modes are its volume's (the capacity set as it becomes
    // bound, not after: a difference may be meant); without one it has neither.
    match volume {
        Some(volume) => {
            if text(object, "/status/phase") != phase {
                updated["status"]["capacity"] =
                    json::at(volume, "/spec/capacity").cloned().unwrap_or(json!({}));
            }
            updated["status"]["accessModes"] =
                json::at(volume, "/spec/accessModes").cloned().unwrap_or(json!([]));
        }
        None if resource.plural == "persistentvolumeclaims" => {
            if let Some(status) = updated["status"].as_object_mut() {
                status.remove("capacity");
                status.remove("accessModes");
            }
        }
        None => {}
    }
    if updated == *object {
        return Ok(updated);
    }
    let namespace = text(object, "/metadata/namespace").to_string();
    client.update_status(resource, &namespace, updated).await
}

/// Binds `volume` and `claim` to each other: the volume's claimRef and phase, then the claim's
/// volumeName, annotations and phase (each step skipped when already done).
async fn bind(client: &dyn ApiClient, volume: &Value, claim: &Value) -> Result<(), ApiError> {
    let mut volume = volume.clone();
    let reference = json!({"kind": "PersistentVolumeClaim", "apiVersion": "v1",
        "namespace": key_of(claim).0, "name": object_name(claim), "uid": object_uid(claim),
        "resourceVersion": text(claim, "/metadata/resourceVersion")});
    let same_claim =
        |r: &Value| text(r, "/uid") == object_uid(claim) && text(r, "/name") == object_name(claim);
    if !json::at(&volume, "/spec/claimRef").is_some_and(same_claim) {
        if json::at(&volume, "/spec/claimRef").is_none_or(Value::is_null) {
            annotate(&mut volume, BOUND_BY_CONTROLLER);
        }
        volume["spec"]["claimRef"] = reference;
        volume = client.update(volumes(), "", volume).await?;
    }
    let volume = set_phase(client, volumes(), &volume, "Bound", None, None).await?;
    let mut claim = claim.clone();
    if text(&claim, "/spec/volumeName") != object_name(&volume)
        || annotation(&claim, BIND_COMPLETED).is_none()
    {
        if text(&claim, "/spec/volumeName").is_empty() {
            annotate(&mut claim, BOUND_BY_CONTROLLER);
        }
        claim["spec"]["volumeName"] = json!(object_name(&volume));
        annotate(&mut claim, BIND_COMPLETED);
        let namespace = key_of(&claim).0;
        claim = client.update(claims(), &namespace, claim).await?;
    }
    set_phase(client, claims(), &claim, "Bound", None, Some(&volume)).await?;
    Ok(())
}

/// A bound claim that lost its volume: `Lost`, with why in an event when it becomes so.
async fn lose(
    client: &dyn ApiClient,
    claim: &Value,
    reason: &str,
    message: &str,
) -> Result<(), ApiError> {
    if text(claim, "/status/phase") != "Lost" {
        record(client, ObjectRef::of(claims(), claim), EventKind::Warning, reason, message).await;
    }
    set_phase(client, claims(), claim, "Lost", None, None).await.map(|_| ())
}

/// A claim that cannot be bound now: `Pending`, with why in an event.
async fn wait(
    client: &dyn ApiClient,
    claim: &Value,
    kind: EventKind,
    reason: &str,
    message: &str,
) -> Result<(), ApiError> {
    record(client, ObjectRef::of(claims(), claim), kind, reason, message).await;
    set_phase(client, claims(), claim, "Pending", None, None).await.map(|_| ())
}

async fn sync_claim(
    client: &dyn ApiClient,
    claim: Value,
    volumes: &[Value],
) -> Result<(), ApiError> {
    if is_being_deleted(&claim) {
        return Ok(());
    }
    let wanted = text(&claim, "/spec/volumeName").to_string();
    let by_name = |name: &str| volumes.iter().find(|v| object_name(v) == name);
    if annotation(&claim, BIND_COMPLETED).is_some() {
        // Bound before: it stays so, or is lost.
        return match by_name(&wanted) {
            _ if wanted.is_empty() => {
                let message = "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!";
                lose(client, &claim, "ClaimLost", message).await
            }
            None => {
                let message =
                    "Bound claim has lost its PersistentVolume. Data on the volume is lost!";
                lose(client, &claim, "ClaimLost", message).await
            }
            Some(volume)
                if is_free(volume) || text(volume, "/spec/claimRef/uid") == object_uid(&claim) =>
            {
                bind(client, volume, &claim).await
            }
            Some(_) => {
                let message =
                    "Two claims are bound to the same volume, this one is bound incorrectly";
                lose(client, &claim, "ClaimMisbound", message).await
            }
        };
    }
    if wanted.is_empty() {
        return match best_volume(&claim, volumes) {
            Some(volume) => bind(client, volume, &claim).await,
            None => match storage_class(&claim) {
                "" => {
                    let message = "no persistent volumes available for this claim and no storage class is set";
                    wait(client, &claim, EventKind::Normal, "FailedBinding", message).await
                }
                class => {
                    let message = format!("storageclass.storage.k8s.io \"{class}\" not found");
                    wait(client, &claim, EventKind::Warning, "ProvisioningFailed", &message).await
                }
            },
        };
    }
    // The user named the volume: one that does not exist yet is waited for, silently.
    let (reason, refused) = match by_name(&wanted) {
        None => {
            return set_phase(client, claims(), &claim, "Pending", None, None).await.map(|_| ())
        }
        // Reserved for it (its claimRef names the claim): the binding is finished, unchecked.
        Some(volume) if bound_to(volume, &claim) => return bind(client, volume, &claim).await,
        Some(volume) if is_free(volume) => match unsuitable(volume, &claim) {
            None => return bind(client, volume, &claim).await,
            Some(why) => {
                ("VolumeMismatch", format!("Cannot bind to requested volume \"{wanted}\": {why}"))
            }
        },
        Some(_) => {
            ("FailedBinding", format!("volume \"{wanted}\" already bound to a different claim."))
        }
    };
    wait(client, &claim, EventKind::Warning, reason, &refused).await
}

async fn sync_volume(
    client: &dyn ApiClient,
    volume: Value,
    claim: Option<Value>,
) -> Result<(), ApiError> {
    let Some(reference) = json::at(&volume, "/spec/claimRef").filter(|r| r.is_object()) else {
        return set_phase(client, volumes(), &volume, "Available", None, None).await.map(|_| ());
    };
    if text(reference, "/uid").is_empty() {
        // Pre-bound by its user to a claim by name: waiting for that claim.
        return set_phase(client, volumes(), &volume, "Available", None, None).await.map(|_| ());
    }
    let claim = claim.filter(|c| object_uid(c) == text(reference, "/uid"));
    let Some(claim) = claim else {
        // Gone from the cache: released only if the API server says so too.
        let (namespace, name) = claim_ref_key(&volume).unwrap_or_default();
        return match client.get(claims(), &namespace, &name).await {
            Ok(found) if object_uid(&found) == text(reference, "/uid") => Ok(()),
            Ok(_) | Err(ApiError::NotFound { .. }) => release(client, volume).await,
            Err(error) => Err(error),
        };
    };
    match text(&claim, "/spec/volumeName") {
        // The claim's side of the binding is still to be written (its sync does it).
        "" => Ok(()),
        name if name == object_name(&volume) => {
            set_phase(client, volumes(), &volume, "Bound", None, None).await.map(|_| ())
        }
        // The claim went to another volume: this one is free again.
        _ => {
            // As Kubernetes' `unbindVolume`: the controller's binding goes with its
            // annotation; a user's reservation loses only the claim's uid.
            let mut freed = volume.clone();
            if annotation(&volume, BOUND_BY_CONTROLLER).is_some() {
                freed["spec"]["claimRef"] = Value::Null;
                let annotations = freed["metadata"]["annotations"].as_object_mut();
                if let Some(annotations) = annotations {
                    annotations.remove(BOUND_BY_CONTROLLER);
                    if annotations.is_empty() {
                        freed["metadata"].as_object_mut().map(|m| m.remove("annotations"));
                    }
                }
            } else if let Some(reference) = freed["spec"]["claimRef"].as_object_mut() {
                reference.remove("uid");
            }
            let freed = client.update(volumes(), "", freed).await?;
            set_phase(client, volumes(), &freed, "Available", None, None).await.map(|_| ())
        }
    }
}

/// The claim of `volume` is gone: Released, then reclaimed by its policy.
async fn release(client: &dyn ApiClient, volume: Value) -> Result<(), ApiError> {
    let phase = text(&volume, "/status/phase");
    if phase == "Failed" {
        return Ok(());
    }
    let volume = if phase == "Released" {
        volume
    } else {
        set_phase(client, volumes(), &volume, "Released", None, None).await?
    };
    let (reason, message) = match text(&volume, "/spec/persistentVolumeReclaimPolicy") {
        "Retain" | "" => return Ok(()),
        "Recycle" => ("VolumeFailedRecycle", "No recycler plugin found for the volume!".to_string()),
        _ => (
            "VolumeFailedDelete",
            format!(
                "error getting deleter volume plugin for volume \"{}\": no deletable volume plugin matched",
                object_name(&volume)
            ),
        ),
    };
    record(client, ObjectRef::of(volumes(), &volume), EventKind::Warning, reason, &message).await;
    set_phase(client, volumes(), &volume, "Failed", Some(&message), None).await.map(|_| ())
}

impl Actor for PersistentVolumeController {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        informer::feed_actor(ctx, self.client.clone(), volumes(), Default::default(), Volumes);
        informer::feed_actor(ctx, self.client.clone(), claims(), Default::default(), Claims);
        ctx.run_interval(RESYNC, |act, ctx| {
            act.pending.extend(act.claims.keys().cloned().map(Work::Claim));
            act.pending.extend(act.volumes.keys().cloned().map(Work::Volume));
            act.work(ctx);
        });
    }
}

impl Handler<Volumes> for PersistentVolumeController {
    type Result = ();

    fn handle(&mut self, Volumes(feed): Volumes, ctx: &mut Context<Self>) {
        self.listed.0 |= matches!(feed, Feed::Listed(_));
        let name_of = |volume: &Value| object_name(volume).to_string();
        let mut freed = false;
        for name in apply_feed(&mut self.volumes, feed, name_of, |volume| volume) {
            match self.volumes.get(&name) {
                // Its claim looks at it again.
                Some(volume) if !is_free(volume) => {
                    self.pending.extend(claim_ref_key(volume).map(Work::Claim));
                }
                // A free volume may suit a claim that waits.
                Some(_) => freed = true,
                None => {}
            }
            self.pending.insert(Work::Volume(name));
        }
        if freed {
            let unbound = self.claims.iter().filter(|(_, c)| text(c, "/status/phase") != "Bound");
            let unbound: Vec<Work> = unbound.map(|(key, _)| Work::Claim(key.clone())).collect();
            self.pending.extend(unbound);
        }
        self.work(ctx);
    }
}

impl Handler<Claims> for PersistentVolumeController {
    type Result = ();

    fn handle(&mut self, Claims(feed): Claims, ctx: &mut Context<Self>) {
        self.listed.1 |= matches!(feed, Feed::Listed(_));
        for key in apply_feed(&mut self.claims, feed, key_of, |claim| claim) {
            // Its volume, whether it is still there or gone.
            let of_claim =
                self.volumes.iter().filter(|(_, v)| claim_ref_key(v).as_ref() == Some(&key));
            let volumes: Vec<Work> = of_claim.map(|(name, _)| Work::Volume(name.clone())).collect();
            self.pending.extend(volumes);
            self.pending.insert(Work::Claim(key));
        }
        self.work(ctx);
    }
}

impl Handler<StopPersistentVolumeController> for PersistentVolumeController {
    type Result = ();

    fn handle(&mut self, _: StopPersistentVolumeController, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{ApiCore, DeleteOptions, ListOptions};
    use crate::testing::{core, eventually};

    fn volume(name: &str, size: &str, class: Option<&str>, policy: &str) -> Value {
        let mut volume = json!({"metadata": {"name": name}, "spec": {
            "capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": policy, "hostPath": {"path": "/tmp/pv"}}});
        if let Some(class) = class {
            volume["spec"]["storageClassName"] = json!(class);
        }
        volume
    }

    fn claim(name: &str, size: &str, class: Option<&str>) -> Value {
        let mut claim = json!({"metadata": {"name": name, "namespace": "default"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}});
        if let Some(class) = class {
            claim["spec"]["storageClassName"] = json!(class);
        }
        claim
    }

    async fn phase_of(
        core: &ApiCore,
        resource: &'static resources::ResourceType,
        name: &str,
    ) -> (String, Value) {
        let namespace = if resource.namespaced { "default" } else { "" };
        let object = ApiClient::get(core, resource, namespace, name).await.unwrap();
        (text(&object, "/status/phase").to_string(), object)
    }

    async fn until(
        core: &ApiCore,
        resource: &'static resources::ResourceType,
        name: &str,
        phase: &str,
    ) -> Value {
        eventually(&format!("{name} {phase}"), || async {
            let (now, object) = phase_of(core, resource, name).await;
            (now == phase).then_some(object)
        })
        .await
    }

    #[actix::test]
    async fn claims_get_the_smallest_volume_that_suits_them_and_volumes_are_released() {
        let core = core().await;
        for v in [
            volume("small", "1Gi", None, "Retain"),
            volume("big", "5Gi", None, "Retain"),
            volume("fast", "2Gi", Some("fast"), "Delete"),
            volume("spare", "1Gi", None, "Retain"),
        ] {
            ApiClient::create(&core, volumes(), "", v).await.unwrap();
        }
        let mut named = claim("named", "1Gi", None);
        named["spec"]["volumeName"] = json!("spare");
        for c in [
            claim("a", "1Gi", None),
            claim("fastclaim", "1Gi", Some("fast")),
            claim("huge", "10Gi", None),
            named,
        ] {
            ApiClient::create(&core, claims(), "default", c).await.unwrap();
        }
        let _controller = PersistentVolumeController::new(Arc::new(core.clone())).start();
        // Claims are created protected, and go once this sees no pod uses them.
        let _protector = crate::controllers::StorageProtector::new(Arc::new(core.clone())).start();

        let a = until(&core, claims(), "a", "Bound").await;
        assert_eq!(a["spec"]["volumeName"], "small", "the smallest that holds 1Gi: {a}");
        assert_eq!(a["status"]["capacity"]["storage"], "1Gi");
        assert_eq!(a["metadata"]["annotations"][BIND_COMPLETED], "yes");
        let small = until(&core, volumes(), "small", "Bound").await;
        assert_eq!(small["spec"]["claimRef"]["name"], "a");
        assert_eq!(small["spec"]["claimRef"]["uid"], a["metadata"]["uid"]);
        let fast = until(&core, claims(), "fastclaim", "Bound").await;
        assert_eq!(fast["spec"]["volumeName"], "fast", "of its class: {fast}");
        let named = until(&core, claims(), "named", "Bound").await;
        assert_eq!(named["spec"]["volumeName"], "spare");
        until(&core, volumes(), "big", "Available").await;
        let events = resources::core("events");
        eventually("the huge claim's FailedBinding", || async {
            let options = ListOptions::default();
            let listed = ApiClient::list(&core, events, Some("default"), &options).await;
            let listed = listed.unwrap().items;
            listed
                .iter()
                .find(|e| e["reason"] == "FailedBinding" && e["involvedObject"]["name"] == "huge")
                .cloned()
        })
        .await;
        assert_eq!(phase_of(&core, claims(), "huge").await.0, "Pending");

        // A bigger volume comes: the huge claim gets it.
        ApiClient::create(&core, volumes(), "", volume("bigger", "20Gi", None, "Retain"))
            .await
            .unwrap();
        let huge = until(&core, claims(), "huge", "Bound").await;
        assert_eq!(huge["spec"]["volumeName"], "bigger");

        // Claims go: a Retain volume is Released, a Delete one Failed (nothing deletes it).
        for name in ["a", "fastclaim"] {
            ApiClient::delete(&core, claims(), "default", name, &DeleteOptions::default())
                .await
                .unwrap();
        }
        until(&core, volumes(), "small", "Released").await;
        let failed = until(&core, volumes(), "fast", "Failed").await;
        assert!(failed["status"]["message"]
            .as_str()
            .unwrap()
            .contains("no deletable volume plugin"));
        // A new claim gets the free volume left, not a released one.
        ApiClient::create(&core, claims(), "default", claim("b", "1Gi", None)).await.unwrap();
        let b = until(&core, claims(), "b", "Bound").await;
        assert_eq!(b["spec"]["volumeName"], "big", "{b}");
        assert_eq!(phase_of(&core, volumes(), "small").await.0, "Released");
    }

    #[actix::test]
    async fn reserved_and_named_volumes_bind_as_kubernetes_binds_them_and_a_lost_claim_has_none() {
        let core = core().await;
        // Reserved for `r` by its claimRef, of another class: `r` gets it, not the free one.
        let mut reserved = volume("reserved", "2Gi", Some("manual"), "Retain");
        reserved["spec"]["claimRef"] = json!({"namespace": "default", "name": "r"});
        let mut labelled = volume("labelled", "1Gi", None, "Retain");
        labelled["metadata"]["labels"] = json!({"tier": "gold"});
        for v in [reserved, labelled, volume("free", "1Gi", None, "Retain")] {
            ApiClient::create(&core, volumes(), "", v).await.unwrap();
        }
        // `sel` names its volume: its selector is not looked at.
        let mut named = claim("sel", "1Gi", None);
        named["spec"]["volumeName"] = json!("labelled");
        named["spec"]["selector"] = json!({"matchLabels": {"tier": "silver"}});
        for c in [claim("r", "1Gi", Some("")), named] {
            ApiClient::create(&core, claims(), "default", c).await.unwrap();
        }
        let _controller = PersistentVolumeController::new(Arc::new(core.clone())).start();
        let r = until(&core, claims(), "r", "Bound").await;
        assert_eq!(r["spec"]["volumeName"], "reserved", "{r}");
        let sel = until(&core, claims(), "sel", "Bound").await;
        assert_eq!(sel["spec"]["volumeName"], "labelled", "{sel}");
        assert_eq!(sel["status"]["accessModes"], json!(["ReadWriteOnce"]));

        // Its volume gone, a claim is Lost, with no capacity or access modes of its own.
        let mut gone = ApiClient::get(&core, volumes(), "", "labelled").await.unwrap();
        gone["metadata"]["finalizers"] = json!([]);
        ApiClient::update(&core, volumes(), "", gone).await.unwrap();
        ApiClient::delete(&core, volumes(), "", "labelled", &DeleteOptions::default())
            .await
            .unwrap();
        let lost = until(&core, claims(), "sel", "Lost").await;
        assert!(lost["status"].get("capacity").is_none(), "{lost}");
        assert!(lost["status"].get("accessModes").is_none(), "{lost}");
    }
}
