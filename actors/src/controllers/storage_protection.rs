//! The storage protection controllers of Kubernetes (pvc-protection, pv-protection): a claim
//! being deleted keeps its `kubernetes.io/pvc-protection` finalizer while a scheduled pod uses
//! it (whatever its phase: the pod object holds it until it goes), and a volume being deleted
//! keeps `kubernetes.io/pv-protection` while it is bound; then the finalizer is removed and the
//! object goes. A claim or volume not being deleted that lacks its finalizer gets it back.
//!
//! It follows claims and volumes. Pods are read only for a claim being deleted: its namespace
//! is listed, again every few seconds while some pod still uses it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use serde_json::Value;

use crate::client::cache::{apply_feed, key_of, Key};
use crate::client::informer::{self, Feed, Scope};
use crate::client::{object_name, ApiClient};
use crate::core::storage_protection::{CLAIM_FINALIZER, VOLUME_FINALIZER};
use crate::core::{ApiError, ListOptions};
use crate::model::{is_being_deleted, json, resources};

/// How long a claim still in use waits before its pods are looked at again.
const RECHECK: Duration = Duration::from_secs(2);

/// The controller actor.
pub struct StorageProtector {
    client: Arc<dyn ApiClient>,
    claims: BTreeMap<Key, Value>,
    volumes: BTreeMap<String, Value>,
    /// Claims whose pods are being looked at, or will be again shortly.
    checking: BTreeSet<Key>,
}

#[derive(Message)]
#[rtype(result = "()")]
struct Claims(Feed);

#[derive(Message)]
#[rtype(result = "()")]
struct Volumes(Feed);

/// A claim's pods were looked at: whether one still uses it.
#[derive(Message)]
#[rtype(result = "()")]
struct Checked {
    claim: Key,
    in_use: bool,
}

/// Stops the controller (its list-watches end with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopStorageProtector;

impl StorageProtector {
    pub fn new(client: Arc<dyn ApiClient>) -> Self {
        Self {
            client,
            claims: BTreeMap::new(),
            volumes: BTreeMap::new(),
            checking: BTreeSet::new(),
        }
    }

    /// Lets go the volumes being deleted that are no longer bound, and looks at the pods of
    /// the claims being deleted.
    fn release(&mut self, ctx: &mut Context<Self>) {
        for volume in self.volumes.values() {
            let bound = json::at(volume, "/status/phase").and_then(Value::as_str) == Some("Bound");
            if held(volume, VOLUME_FINALIZER) && !bound {
                self.let_go(resources::core("persistentvolumes"), volume, VOLUME_FINALIZER, ctx);
            }
        }
        let waiting: Vec<Key> = self
            .claims
            .iter()
            .filter(|(key, claim)| held(claim, CLAIM_FINALIZER) && !self.checking.contains(*key))
            .map(|(key, _)| key.clone())
            .collect();
        for claim in waiting {
            self.check(claim, ctx);
        }
    }

    /// Lists the pods of a claim's namespace, to see whether one still uses it.
    fn check(&mut self, claim: Key, ctx: &mut Context<Self>) {
        self.checking.insert(claim.clone());
        let client = self.client.clone();
        let (namespace, name) = claim.clone();
        let owner = self.claims.get(&claim).and_then(controller_uid).map(String::from);
        async move {
            let pods = resources::core("pods");
            let listed = client.list(pods, Some(&namespace), &ListOptions::default()).await;
            // Unknown counts as in use: looked at again shortly.
            let in_use = listed
                .map_or(true, |list| list.items.iter().any(|p| uses(p, &name, owner.as_deref())));
            Checked { claim, in_use }
        }
        .into_actor(self)
        .map(|checked, _, ctx| ctx.notify(checked))
        .spawn(ctx);
    }

    /// Removes `finalizer` from `object`; a conflict or a deletion brings an event, and with
    /// it another try.
    fn let_go(
        &self,
        resource: &'static crate::model::ResourceType,
        object: &Value,
        finalizer: &'static str,
        ctx: &mut Context<Self>,
    ) {
        let mut released = object.clone();
        if let Some(list) =
            released.pointer_mut("/metadata/finalizers").and_then(Value::as_array_mut)
        {
            list.retain(|f| f != finalizer);
        }
        self.write(resource, released, finalizer, ctx);
    }

    /// Puts `finalizer` back on `object`, not being deleted, that lacks it (someone removed
    /// it), as Kubernetes' protection controllers do.
    fn guard(
        &self,
        resource: &'static crate::model::ResourceType,
        object: &Value,
        finalizer: &'static str,
        ctx: &mut Context<Self>,
    ) {
        let finalizers = json::at(object, "/metadata/finalizers").and_then(Value::as_array);
        if is_being_deleted(object) || finalizers.is_some_and(|f| f.iter().any(|f| f == finalizer))
        {
            return;
        }
        let mut guarded = object.clone();
        let meta = &mut guarded["metadata"];
        if !meta["finalizers"].is_array() {
            meta["finalizers"] = Value::Array(Vec::new());
        }
        meta["finalizers"].as_array_mut().expect("an array").push(finalizer.into());
        self.write(resource, guarded, finalizer, ctx);
    }

    /// Writes `object` (its finalizers changed) at the version read.
    fn write(
        &self,
        resource: &'static crate::model::ResourceType,
        object: Value,
        finalizer: &'static str,
        ctx: &mut Context<Self>,
    ) {
        let client = self.client.clone();
        let namespace = key_of(&object).0;
        async move {
            let name = object_name(&object).to_string();
            match client.update(resource, &namespace, object).await {
                Ok(_) | Err(ApiError::Conflict { .. }) | Err(ApiError::NotFound { .. }) => {}
                Err(error) => tracing::warn!(%name, %error, "writing the finalizers ({finalizer})"),
            }
        }
        .into_actor(self)
        .spawn(ctx);
    }
}

/// Whether `object` is being deleted and still holds `finalizer`.
fn held(object: &Value, finalizer: &str) -> bool {
    let finalizers = json::at(object, "/metadata/finalizers").and_then(Value::as_array);
    is_being_deleted(object) && finalizers.is_some_and(|f| f.iter().any(|f| f == finalizer))
}

/// The uid of the object that controls `claim` (a generic ephemeral volume's pod).
fn controller_uid(claim: &Value) -> Option<&str> {
    let owners = json::at(claim, "/metadata/ownerReferences").and_then(Value::as_array)?;
    let controller = owners.iter().find(|o| o.get("controller") == Some(&Value::Bool(true)))?;
    controller.get("uid").and_then(Value::as_str)
}

/// Whether a scheduled pod uses the claim `name` of its namespace (controlled by `owner`), as
/// Kubernetes' `podUsesPVC` says: as a `persistentVolumeClaim` volume, whatever the pod's
/// phase; through a generic ephemeral volume's claim (`<pod>-<volume>`, controlled by the pod)
/// until its node agent is done with it (deleted with no grace left). A pod not yet scheduled
/// does not hold it: its node agent will refuse to start it with a claim being deleted.
fn uses(pod: &Value, name: &str, owner: Option<&str>) -> bool {
    let node = json::at(pod, "/spec/nodeName").and_then(Value::as_str).unwrap_or("");
    if node.is_empty() {
        return false;
    }
    let shut_down = is_being_deleted(pod)
        && json::at(pod, "/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64) == Some(0);
    let ours = owner.is_some_and(|owner| owner == crate::client::object_uid(pod));
    let volumes = json::at(pod, "/spec/volumes").and_then(Value::as_array);
    volumes.into_iter().flatten().any(|volume| {
        let claim = json::at(volume, "/persistentVolumeClaim/claimName").and_then(Value::as_str);
        let ephemeral = volume.get("ephemeral").is_some().then(|| {
            let volume_name = volume.get("name").and_then(Value::as_str).unwrap_or("");
            format!("{}-{volume_name}", object_name(pod))
        });
        claim == Some(name) || (!shut_down && ours && ephemeral.as_deref() == Some(name))
    })
}

impl Actor for StorageProtector {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let claims = resources::core("persistentvolumeclaims");
        informer::feed_actor(ctx, self.client.clone(), claims, Scope::default(), Claims);
        let volumes = resources::core("persistentvolumes");
        informer::feed_actor(ctx, self.client.clone(), volumes, Scope::default(), Volumes);
    }
}

impl Handler<Claims> for StorageProtector {
    type Result = ();

    fn handle(&mut self, Claims(feed): Claims, ctx: &mut Context<Self>) {
        let changed = apply_feed(&mut self.claims, feed, key_of, |claim| claim);
        let claims = resources::core("persistentvolumeclaims");
        for claim in changed.iter().filter_map(|key| self.claims.get(key)) {
            self.guard(claims, claim, CLAIM_FINALIZER, ctx);
        }
        if !changed.is_empty() {
            self.release(ctx);
        }
    }
}

impl Handler<Volumes> for StorageProtector {
    type Result = ();

    fn handle(&mut self, Volumes(feed): Volumes, ctx: &mut Context<Self>) {
        let name_of = |volume: &Value| object_name(volume).to_string();
        let changed = apply_feed(&mut self.volumes, feed, name_of, |volume| volume);
        let volumes = resources::core("persistentvolumes");
        for volume in changed.iter().filter_map(|name| self.volumes.get(name)) {
            self.guard(volumes, volume, VOLUME_FINALIZER, ctx);
        }
        if !changed.is_empty() {
            self.release(ctx);
        }
    }
}

impl Handler<Checked> for StorageProtector {
    type Result = ();

    fn handle(&mut self, Checked { claim, in_use }: Checked, ctx: &mut Context<Self>) {
        let Some(current) = self.claims.get(&claim).filter(|c| held(c, CLAIM_FINALIZER)) else {
            self.checking.remove(&claim);
            return;
        };
        if !in_use {
            self.checking.remove(&claim);
            let current = current.clone();
            self.let_go(resources::core("persistentvolumeclaims"), &current, CLAIM_FINALIZER, ctx);
            return;
        }
        ctx.run_later(RECHECK, move |this, ctx| {
            if this.claims.get(&claim).is_some_and(|c| held(c, CLAIM_FINALIZER)) {
                this.check(claim, ctx);
            } else {
                this.checking.remove(&claim);
            }
        });
    }
}

impl Handler<StopStorageProtector> for StorageProtector {
    type Result = ();

    fn handle(&mut self, _: StopStorageProtector, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::core::DeleteOptions;
    use crate::testing::{core, eventually};

    #[test]
    fn a_claim_is_used_by_the_scheduled_pods_naming_it() {
        let pod = |phase: &str, volume: Value| {
            json!({"metadata": {"name": "p", "uid": "u1"}, "spec": {"nodeName": "n1",
                "volumes": [volume]}, "status": {"phase": phase}})
        };
        let claimed = json!({"name": "v", "persistentVolumeClaim": {"claimName": "data"}});
        assert!(uses(&pod("Running", claimed.clone()), "data", None));
        assert!(uses(&pod("Pending", claimed.clone()), "data", None));
        // A finished pod holds it until it goes (a Job's pod, say).
        assert!(uses(&pod("Succeeded", claimed.clone()), "data", None));
        assert!(!uses(&pod("Running", claimed), "other", None));
        // A generic ephemeral volume's claim: the pod's own, until its agent is done with it.
        let ephemeral = json!({"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}});
        assert!(uses(&pod("Running", ephemeral.clone()), "p-scratch", Some("u1")));
        assert!(!uses(&pod("Running", ephemeral.clone()), "p-scratch", Some("u2")), "not its own");
        let mut done = pod("Succeeded", ephemeral);
        done["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        done["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        assert!(!uses(&done, "p-scratch", Some("u1")), "shut down");
        let mut unscheduled = pod(
            "Pending",
            json!({"name": "v",
            "persistentVolumeClaim": {"claimName": "data"}}),
        );
        unscheduled["spec"].as_object_mut().unwrap().remove("nodeName");
        assert!(!uses(&unscheduled, "data", None), "a pod not scheduled holds no claim");
    }

    #[actix::test]
    async fn a_claim_goes_once_no_pod_uses_it_and_a_volume_once_unbound() {
        let core = core().await;
        let _controller = StorageProtector::new(Arc::new(core.clone())).start();
        let claims = resources::core("persistentvolumeclaims");
        let claim = json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}});
        let claim = ApiClient::create(&core, claims, "default", claim).await.unwrap();
        assert_eq!(claim["metadata"]["finalizers"], serde_json::json!([CLAIM_FINALIZER]));
        let pods = resources::core("pods");
        let pod = json!({"metadata": {"name": "user"}, "spec": {"nodeName": "n1",
            "containers": [{"name": "c", "image": "i"}],
            "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}});
        ApiClient::create(&core, pods, "default", pod).await.unwrap();
        let options = DeleteOptions::default();
        ApiClient::delete(&core, claims, "default", "data", &options).await.unwrap();
        // Its pods looked at, the claim is still there: in use.
        let get = || async { ApiClient::get(&core, claims, "default", "data").await.ok() };
        let held = eventually("the claim marked", || async { get().await }).await;
        assert!(is_being_deleted(&held), "{held}");
        let now = DeleteOptions { grace_period_seconds: Some(0), ..DeleteOptions::default() };
        ApiClient::delete(&core, pods, "default", "user", &now).await.unwrap();
        eventually("the claim gone", || async { get().await.is_none().then_some(()) }).await;

        let volumes = resources::core("persistentvolumes");
        let volume = json!({"metadata": {"name": "v"}, "spec": {"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/v"}}});
        let volume = ApiClient::create(&core, volumes, "", volume).await.unwrap();
        assert_eq!(volume["metadata"]["finalizers"], serde_json::json!([VOLUME_FINALIZER]));
        ApiClient::delete(&core, volumes, "", "v", &options).await.unwrap();
        let get = || async { ApiClient::get(&core, volumes, "", "v").await.ok() };
        eventually("the unbound volume gone", || async { get().await.is_none().then_some(()) })
            .await;

        // A finalizer someone removed is put back while the object is not being deleted.
        let kept = json!({"metadata": {"name": "kept"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}});
        let mut kept = ApiClient::create(&core, claims, "default", kept).await.unwrap();
        kept["metadata"]["finalizers"] = json!([]);
        ApiClient::update(&core, claims, "default", kept).await.unwrap();
        eventually("the claim's finalizer back", || async {
            let claim = ApiClient::get(&core, claims, "default", "kept").await.ok()?;
            (claim["metadata"]["finalizers"] == json!([CLAIM_FINALIZER])).then_some(())
        })
        .await;
    }
}
