//! The taint eviction controller (Kubernetes' NoExecute taint manager): a pod bound to a node
//! with a NoExecute taint it does not tolerate is deleted; one that tolerates it for a while
//! (`tolerationSeconds`: the DefaultTolerationSeconds admission plugin gives every pod 300 s
//! for the `not-ready` and `unreachable` taints) is deleted when that time is up, counted from
//! when the controller first saw it there, unless the taint goes first. An eviction marks the
//! pod's status with a `DisruptionTarget` condition (reason `DeletionByTaintManager`), then
//! deletes it (gracefully: its node's agent, if it comes back, stops it), with a
//! `TaintManagerEviction` event; a cancelled one says so in an event too.
//!
//! It follows pods only while some node has a NoExecute taint.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use serde_json::{json, Value};

use crate::client::cache::{key_of, Applied, Key, OnDemandCache};
use crate::client::events::{self, EventKind, ObjectRef};
use crate::client::informer::{self, Feed, Scope};
use crate::client::{object_name, object_uid, ApiClient};
use crate::core::{ApiError, DeleteOptions, PatchType};
use crate::model::taints::{no_execute_grace, Taint, TaintEffect, Toleration};
use crate::model::{json, resources};
use crate::watch::EventType;

const COMPONENT: &str = "taint-eviction-controller";
/// Tolerations longer than this (a hundred years) never end.
const FOREVER: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// A pod's eviction, due at a time (and kept once under way, until the pod is gone).
struct Scheduled {
    uid: String,
    due: Instant,
    timer: SpawnHandle,
}

/// An eviction failed: the pod is looked at again.
#[derive(Message)]
#[rtype(result = "()")]
struct Failed(Key);

/// The taint eviction controller actor.
pub struct TaintEvictionController {
    client: Arc<dyn ApiClient>,
    /// The NoExecute taints of each node that has some.
    tainted: BTreeMap<String, Vec<Taint>>,
    /// Every pod, while some node has a NoExecute taint.
    pods: OnDemandCache,
    scheduled: HashMap<Key, Scheduled>,
}

/// A feed of nodes.
#[derive(Message)]
#[rtype(result = "()")]
struct Nodes(Feed);

/// A feed of pods, from the pod list-watch of this run.
#[derive(Message)]
#[rtype(result = "()")]
struct Pods(u64, Feed);

/// Stops the controller (its list-watches end with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopTaintEvictionController;

impl TaintEvictionController {
    pub fn new(client: Arc<dyn ApiClient>) -> Self {
        Self {
            client,
            tainted: BTreeMap::new(),
            pods: OnDemandCache::default(),
            scheduled: HashMap::new(),
        }
    }

    fn follow_pods(&mut self, ctx: &mut Context<Self>) {
        if self.tainted.is_empty() {
            self.pods.let_go();
            let keys: Vec<Key> = self.scheduled.keys().cloned().collect();
            keys.iter().for_each(|key| self.cancel(key, ctx));
        } else {
            self.pods.follow(ctx, self.client.clone(), resources::core("pods"), Pods);
        }
    }

    /// The pods bound to the nodes `on` picks.
    fn pods_on(&self, on: impl Fn(&str) -> bool) -> Vec<Value> {
        let bound =
            |pod: &&Value| json::at(pod, "/spec/nodeName").and_then(Value::as_str).is_some_and(&on);
        self.pods.objects().all().filter(bound).cloned().collect()
    }

    /// How long `pod` may stay where it is bound (`None`: as long as it likes).
    fn grace(&self, pod: &Value) -> Option<Duration> {
        if json::at(pod, "/metadata/deletionTimestamp").is_some() {
            return None; // already going
        }
        let node = json::at(pod, "/spec/nodeName").and_then(Value::as_str)?;
        let taints = self.tainted.get(node)?;
        no_execute_grace(taints, &Toleration::of_pod(pod))
    }

    /// Schedules, keeps or cancels the eviction of `pod` as its node's taints now say.
    fn process(&mut self, pod: &Value, ctx: &mut Context<Self>) {
        let key = key_of(pod);
        let Some(grace) = self.grace(pod) else {
            self.cancel(&key, ctx);
            return;
        };
        let uid = object_uid(pod).to_string();
        // As Kubernetes' manager: a scheduled eviction stands (a new toleration does not
        // move it), unless it was for another pod of the name, or a taint is now not
        // tolerated at all (then the pod goes at once). One already due has been done or is
        // under way: the pod's own writes (its DisruptionTarget) do not make it twice.
        let scheduled = self.scheduled.get(&key).filter(|s| s.uid == uid);
        if scheduled.is_some_and(|s| !grace.is_zero() || s.due <= Instant::now()) {
            return;
        }
        // A toleration of centuries is one for ever (and no timer's deadline overflows).
        let Some(due) = Instant::now().checked_add(grace).filter(|_| grace < FOREVER) else {
            self.cancel(&key, ctx);
            return;
        };
        self.cancel(&key, ctx);
        let timer_key = key.clone();
        let timer = ctx.run_later(grace, move |controller, ctx| controller.evict(timer_key, ctx));
        self.scheduled.insert(key, Scheduled { uid, due, timer });
    }

    fn cancel(&mut self, key: &Key, ctx: &mut Context<Self>) {
        let Some(scheduled) = self.scheduled.remove(key) else {
            return;
        };
        ctx.cancel_future(scheduled.timer);
        if scheduled.due > Instant::now() {
            let message = format!("Cancelling deletion of Pod {}/{}", key.0, key.1);
            self.record(key, scheduled.uid, message);
        }
    }

    fn record(&self, key: &Key, uid: String, message: String) {
        let client = self.client.clone();
        let pod = ObjectRef::pod(key.0.clone(), key.1.clone(), uid);
        actix::spawn(async move {
            let reason = "TaintManagerEviction";
            events::record(client.as_ref(), &pod, EventKind::Normal, reason, &message, COMPONENT)
                .await;
        });
    }

    /// The eviction of `key` is due: marks the pod a disruption target and deletes it, if it
    /// is still the pod scheduled and still may not stay. Its entry stays until the pod is
    /// seen going, so that the status write does not schedule it again.
    fn evict(&mut self, key: Key, ctx: &mut Context<Self>) {
        let Some(scheduled) = self.scheduled.get(&key) else {
            return;
        };
        let pod = self.pods.objects().get(&key);
        let still = pod.is_some_and(|p| object_uid(p) == scheduled.uid && self.grace(p).is_some());
        if !still {
            self.scheduled.remove(&key);
            return;
        }
        let (namespace, name) = key.clone();
        let uid = scheduled.uid.clone();
        let message = format!("Marking for deletion Pod {namespace}/{name}");
        self.record(&key, uid.clone(), message);
        let client = self.client.clone();
        let addr = ctx.address();
        actix::spawn(async move {
            let condition = json!({"type": "DisruptionTarget", "status": "True",
                "reason": "DeletionByTaintManager",
                "message": "Taint manager: deleting due to NoExecute taint",
                "lastTransitionTime": crate::model::now()});
            let patch = json!({"metadata": {"uid": uid}, "status": {"conditions": [condition]}});
            let strategic = PatchType::StrategicMerge;
            if let Err(error) = client
                .patch(resources::core("pods"), &namespace, &name, strategic, &patch, true)
                .await
            {
                tracing::debug!(%namespace, %name, %error, "marking an evicted pod");
            }
            let options = DeleteOptions { precondition_uid: Some(uid), ..DeleteOptions::default() };
            match client.delete(resources::core("pods"), &namespace, &name, &options).await {
                Ok(_) | Err(ApiError::NotFound { .. }) => {}
                Err(error) => {
                    tracing::debug!(%namespace, %name, %error, "evicting a pod");
                    addr.do_send(Failed((namespace, name)));
                }
            }
        });
    }
}

/// A node's NoExecute taints.
fn no_execute_taints(node: &Value) -> Vec<Taint> {
    let mut taints = Taint::of_node(node);
    taints.retain(|t| t.effect == TaintEffect::NoExecute);
    taints
}

impl Actor for TaintEvictionController {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        informer::feed_actor(ctx, client, resources::core("nodes"), Scope::default(), Nodes);
    }

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.pods.let_go();
    }
}

impl Handler<Nodes> for TaintEvictionController {
    type Result = ();

    fn handle(&mut self, Nodes(feed): Nodes, ctx: &mut Context<Self>) {
        let changed: Vec<String> = match feed {
            Feed::Listed(items) => {
                let listed: BTreeMap<String, Vec<Taint>> = items
                    .iter()
                    .map(|n| (object_name(n).to_string(), no_execute_taints(n)))
                    .filter(|(_, taints)| !taints.is_empty())
                    .collect();
                let old = std::mem::replace(&mut self.tainted, listed);
                old.into_keys().chain(self.tainted.keys().cloned()).collect()
            }
            Feed::Changed(kind, node) => {
                let name = object_name(&node).to_string();
                let taints =
                    if kind == EventType::Deleted { Vec::new() } else { no_execute_taints(&node) };
                let before = if taints.is_empty() {
                    self.tainted.remove(&name)
                } else {
                    self.tainted.insert(name.clone(), taints.clone())
                };
                if before.unwrap_or_default() == taints {
                    return;
                }
                vec![name]
            }
            Feed::Unavailable(_) => return,
        };
        self.follow_pods(ctx);
        let on_changed = self.pods_on(|node| changed.iter().any(|c| c == node));
        on_changed.iter().for_each(|pod| self.process(pod, ctx));
    }
}

impl Handler<Pods> for TaintEvictionController {
    type Result = ();

    fn handle(&mut self, Pods(run, feed): Pods, ctx: &mut Context<Self>) {
        match self.pods.apply(run, feed) {
            Applied::Listed => {
                let concerned = self.pods_on(|node| self.tainted.contains_key(node));
                let keys: Vec<Key> = concerned.iter().map(key_of).collect();
                let gone: Vec<Key> =
                    self.scheduled.keys().filter(|k| !keys.contains(k)).cloned().collect();
                gone.iter().for_each(|key| self.cancel(key, ctx));
                concerned.iter().for_each(|pod| self.process(pod, ctx));
            }
            Applied::Changed { object, .. } => {
                if self.pods.objects().get(&key_of(&object)).is_some() {
                    self.process(&object, ctx);
                } else {
                    self.cancel(&key_of(&object), ctx);
                }
            }
            Applied::Nothing => {}
        }
    }
}

impl Handler<Failed> for TaintEvictionController {
    type Result = ();

    /// Looked at again after a second (a conflict, the server briefly away).
    fn handle(&mut self, Failed(key): Failed, ctx: &mut Context<Self>) {
        ctx.run_later(Duration::from_secs(1), move |controller, ctx| {
            controller.scheduled.remove(&key);
            if let Some(pod) = controller.pods.objects().get(&key).cloned() {
                controller.process(&pod, ctx);
            }
        });
    }
}

impl Handler<StopTaintEvictionController> for TaintEvictionController {
    type Result = ();

    fn handle(&mut self, _: StopTaintEvictionController, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ListOptions;
    use crate::testing::{core, eventually};

    fn pod(name: &str, node: &str, tolerations: Value) -> Value {
        json!({"metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "tolerations": tolerations,
                "containers": [{"name": "c", "image": "i"}]}})
    }

    fn toleration(seconds: Option<i64>) -> Value {
        let mut t = json!({"key": "down", "operator": "Exists", "effect": "NoExecute"});
        if let Some(seconds) = seconds {
            t["tolerationSeconds"] = json!(seconds);
        }
        json!([t])
    }

    #[actix::test]
    async fn pods_leave_a_node_with_a_no_execute_taint_once_they_stop_tolerating_it() {
        let core = core().await;
        for name in ["n", "m"] {
            let node = json!({"metadata": {"name": name},
                "spec": {"taints": [{"key": "down", "effect": "NoExecute"}]}});
            ApiClient::create(&core, resources::core("nodes"), "", node).await.unwrap();
        }
        for (name, node, tolerations) in [
            ("untolerating", "n", json!([])),
            ("forever", "n", toleration(None)),
            ("brief", "n", toleration(Some(1))),
            ("patient", "n", toleration(Some(3600))),
            ("waiting", "m", toleration(Some(3600))),
        ] {
            let created = pod(name, node, tolerations);
            ApiClient::create(&core, resources::core("pods"), "default", created).await.unwrap();
        }
        let _controller = TaintEvictionController::new(Arc::new(core.clone())).start();
        let get = |name: &'static str| {
            let core = core.clone();
            async move { ApiClient::get(&core, resources::core("pods"), "default", name).await.unwrap() }
        };
        let evicted = |pod: &Value| json::at(pod, "/metadata/deletionTimestamp").is_some();
        let started = Instant::now();
        let gone = eventually("the untolerating pod evicted", || async {
            Some(get("untolerating").await).filter(evicted)
        })
        .await;
        let condition = &gone["status"]["conditions"][0];
        assert_eq!(condition["type"], "DisruptionTarget", "{gone}");
        assert_eq!(condition["reason"], "DeletionByTaintManager");
        eventually("the brief pod evicted", || async { Some(get("brief").await).filter(evicted) })
            .await;
        assert!(started.elapsed() >= Duration::from_millis(900), "not before its second");
        assert!(!evicted(&get("forever").await) && !evicted(&get("patient").await));

        // A taint `patient` does not tolerate at all: it goes at once, its wait cut short.
        let mut node = ApiClient::get(&core, resources::core("nodes"), "", "n").await.unwrap();
        node["spec"]["taints"] = json!([{"key": "down", "effect": "NoExecute"},
            {"key": "worse", "effect": "NoExecute"}]);
        ApiClient::update(&core, resources::core("nodes"), "", node).await.unwrap();
        for name in ["patient", "forever"] {
            eventually("evicted at once", || async { Some(get(name).await).filter(evicted) }).await;
        }
        // The taint of `m` goes: the waiting pod's eviction is called off.
        let mut node = ApiClient::get(&core, resources::core("nodes"), "", "m").await.unwrap();
        node["spec"]["taints"] = json!([]);
        ApiClient::update(&core, resources::core("nodes"), "", node).await.unwrap();
        let events = resources::core("events");
        let messages = || async {
            let options = ListOptions::default();
            let items = ApiClient::list(&core, events, Some("default"), &options).await;
            let items = items.unwrap().items;
            items.iter().map(|e| e["message"].as_str().unwrap().to_string()).collect::<Vec<_>>()
        };
        let said = eventually("the cancellation", || async {
            let said = messages().await;
            said.contains(&"Cancelling deletion of Pod default/waiting".to_string()).then_some(said)
        })
        .await;
        assert!(said.contains(&"Marking for deletion Pod default/untolerating".to_string()));
        // Marked once: the pod's own writes once marked (its DisruptionTarget) do not evict it
        // again.
        let options = ListOptions::default();
        let items = ApiClient::list(&core, events, Some("default"), &options).await;
        let items = items.unwrap().items;
        let marked: Vec<i64> = items
            .iter()
            .filter(|e| e["message"] == "Marking for deletion Pod default/untolerating")
            .map(|e| e["count"].as_i64().unwrap_or(1))
            .collect();
        assert_eq!(marked, [1], "{items:?}");
        // (`patient`'s wait was called off, as Kubernetes says it, for its eviction at once.)
        for evicted in ["untolerating", "brief"] {
            let cancelled = format!("Cancelling deletion of Pod default/{evicted}");
            assert!(
                !said.contains(&cancelled),
                "an eviction under way is not called off: {said:?}"
            );
        }
        assert!(!evicted(&get("waiting").await));
    }
}
