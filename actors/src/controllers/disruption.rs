//! The disruption controller: keeps each PodDisruptionBudget's status, which the pods'
//! `eviction` subresource decides by, as Kubernetes' controller does:
//!
//! - the pods it selects in its namespace (an empty selector selects them all, none at all
//!   selects none), and how many of them are healthy: ready, not being deleted, and not
//!   evicted in the last two minutes (`disruptedPods`, which evictions fill in and this
//!   controller empties as those pods go, or when they did not go in time);
//! - how many pods are expected: with an integer `minAvailable`, those selected; with a
//!   `maxUnavailable` or a percentage, the replicas their ReplicationControllers want (pods
//!   without a controller are left out, with an `UnmanagedPods` warning; a controller of a
//!   kind kplane does not serve leaves the budget allowing nothing, `SyncFailed`, as in
//!   Kubernetes);
//! - hence the healthy pods desired and the disruptions allowed, with a `DisruptionAllowed`
//!   condition and the budget's generation observed.
//!
//! It follows pods only while some budget exists.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

use super::back_off;
use crate::client::cache::{apply_feed, key_of, Applied, Key, OnDemandCache};
use crate::client::events::{self, EventKind, ObjectRef};
use crate::client::informer::{self, Feed};
use crate::client::{object_uid, ApiClient};
use crate::core::ApiError;
use crate::model::disruption::{pod_selector, set_allowed_condition, Budget};
use crate::model::{is_being_deleted, is_ready, json, resources, Labels};

/// The source of the disruption controller's events, as Kubernetes' names it.
const COMPONENT: &str = "controllermanager";
/// How long an evicted pod is given to go before it counts as healthy again (Kubernetes'
/// `DeletionTimeout`).
const DELETION_TIMEOUT: Duration = Duration::from_secs(120);

/// The disruption controller actor.
pub struct DisruptionController {
    client: Arc<dyn ApiClient>,
    budgets: BTreeMap<Key, Value>,
    /// Every pod, while some budget exists.
    pods: OnDemandCache,
    /// Budgets to work out again.
    pending: BTreeSet<Key>,
    /// Whether a round of work is under way (one at a time, so that writes keep order).
    working: bool,
    retries: HashMap<Key, u32>,
}

/// A feed of budgets.
#[derive(Message)]
#[rtype(result = "()")]
struct Budgets(Feed);

/// A feed of pods, from the pod list-watch of this run.
#[derive(Message)]
#[rtype(result = "()")]
struct Pods(u64, Feed);

/// Stops the controller (its list-watches end with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopDisruptionController;

/// What one budget's work asks for next.
enum Outcome {
    Done,
    /// Look again at this time (an evicted pod's time to go runs out).
    RecheckAt(DateTime<Utc>),
    Failed,
}

impl DisruptionController {
    pub fn new(client: Arc<dyn ApiClient>) -> Self {
        Self {
            client,
            budgets: BTreeMap::new(),
            pods: OnDemandCache::default(),
            pending: BTreeSet::new(),
            working: false,
            retries: HashMap::new(),
        }
    }

    /// Marks for work the budgets that select `pod` (as it is, or as it was).
    fn touch_budgets_of(&mut self, pod: &Value, previous: Option<&Value>) {
        let namespace = key_of(pod).0;
        let keys: Vec<Key> = self
            .budgets
            .iter()
            .filter(|((ns, _), _)| *ns == namespace)
            .filter(|(_, budget)| {
                pod_selector(budget).is_some_and(|selector| {
                    let selects = |pod: &Value| selector.matches(&Labels::of(pod));
                    selects(pod) || previous.is_some_and(selects)
                })
            })
            .map(|(key, _)| key.clone())
            .collect();
        self.pending.extend(keys);
    }

    /// Works out the pending budgets, one round at a time.
    fn work(&mut self, ctx: &mut Context<Self>) {
        if self.working || self.pending.is_empty() || !self.pods.objects().is_listed() {
            return;
        }
        let keys = std::mem::take(&mut self.pending);
        let mut jobs = Vec::new();
        for key in keys {
            let Some(budget) = self.budgets.get(&key) else {
                // Gone: its back-off goes with it.
                self.retries.remove(&key);
                continue;
            };
            let pods = selected_pods(budget, self.pods.objects().in_namespace(&key.0));
            jobs.push((key, budget.clone(), pods));
        }
        self.working = true;
        let client = self.client.clone();
        let round = async move {
            let mut outcomes = Vec::new();
            for (key, budget, pods) in jobs {
                outcomes.push((key, sync(client.as_ref(), budget, pods).await));
            }
            outcomes
        };
        ctx.spawn(round.into_actor(self).map(|outcomes, act, ctx| {
            act.working = false;
            for (key, outcome) in outcomes {
                let again = match outcome {
                    Outcome::Done => {
                        act.retries.remove(&key);
                        None
                    }
                    Outcome::RecheckAt(when) => {
                        act.retries.remove(&key);
                        Some((when - Utc::now()).to_std().unwrap_or_default())
                    }
                    Outcome::Failed => Some(back_off(&mut act.retries, &key)),
                };
                if let Some(wait) = again {
                    ctx.run_later(wait + Duration::from_millis(10), move |act, ctx| {
                        act.pending.insert(key);
                        act.work(ctx);
                    });
                }
            }
            act.work(ctx);
        }));
    }
}

/// The pods `budget`'s selector picks among `pods` (those of its namespace).
fn selected_pods<'a>(budget: &Value, pods: impl Iterator<Item = &'a Value>) -> Vec<Value> {
    match pod_selector(budget) {
        Some(selector) => pods.filter(|p| selector.matches(&Labels::of(p))).cloned().collect(),
        None => Vec::new(),
    }
}

/// Works out one budget's status from its pods and writes it if it changed.
async fn sync(client: &dyn ApiClient, budget: Value, pods: Vec<Value>) -> Outcome {
    let spec = budget.get("spec").cloned().unwrap_or(Value::Null);
    let object = ObjectRef::of(resources::disruption_budgets(), &budget);
    if pods.is_empty() {
        let message = "No matching pods found";
        events::record(client, &object, EventKind::Normal, "NoPods", message, COMPONENT).await;
    }
    let wanted = if Budget::needs_controllers(&spec) {
        let counted = expected_by_controllers(client, &pods).await;
        if let Some((_, unmanaged)) = counted.as_ref().ok().filter(|(_, u)| !u.is_empty()) {
            let selector = json::at(&budget, "/spec/selector").map(Value::to_string);
            let message = format!(
                "Pods selected by this PodDisruptionBudget (selector: {}) were found to be \
                 unmanaged. As a result, the status of the PDB cannot be calculated correctly, \
                 which may result in undefined behavior. To account for these pods please set \
                 \".spec.minAvailable\" field of the PDB to an integer value.",
                selector.unwrap_or_default()
            );
            tracing::debug!(pods = ?unmanaged, "unmanaged pods under a disruption budget");
            events::record(
                client,
                &object,
                EventKind::Warning,
                "UnmanagedPods",
                &message,
                COMPONENT,
            )
            .await;
        }
        Some(counted.map(|(expected, _)| expected))
    } else {
        None
    };
    let counts = Budget::of_spec(&spec, pods.len() as i64, move || wanted.unwrap_or(Ok(0)));
    let mut status = budget.get("status").and_then(Value::as_object).cloned().unwrap_or_default();
    let now = Utc::now();
    let mut recheck = None;
    match counts {
        Err(why) => {
            let reason = "CalculateExpectedPodCountFailed";
            let message = format!("Failed to calculate the number of expected pods: {why}");
            events::record(client, &object, EventKind::Warning, reason, &message, COMPONENT).await;
            status.insert("disruptionsAllowed".into(), json!(0));
            set_allowed_condition(&mut status, Some(&why));
        }
        Ok((expected, desired)) => {
            let (disrupted, next) = still_disrupted(&status, &pods, now);
            recheck = next;
            let healthy = pods.iter().filter(|pod| healthy(pod, &disrupted)).count();
            let budget_counts = Budget {
                expected_pods: expected,
                desired_healthy: desired,
                current_healthy: healthy as i64,
            };
            let generation = json::at(&budget, "/metadata/generation").cloned();
            status.insert("observedGeneration".into(), generation.unwrap_or(json!(0)));
            status.insert("expectedPods".into(), json!(expected));
            status.insert("desiredHealthy".into(), json!(desired));
            status.insert("currentHealthy".into(), json!(healthy));
            status.insert("disruptionsAllowed".into(), json!(budget_counts.disruptions_allowed()));
            if disrupted.is_empty() {
                status.remove("disruptedPods");
            } else {
                status.insert("disruptedPods".into(), Value::Object(disrupted));
            }
            set_allowed_condition(&mut status, None);
        }
    }
    let done = recheck.map_or(Outcome::Done, Outcome::RecheckAt);
    if budget.get("status").and_then(Value::as_object) == Some(&status) {
        return done;
    }
    let (namespace, name) = key_of(&budget);
    let mut updated = budget;
    updated["status"] = Value::Object(status);
    match client.update_status(resources::disruption_budgets(), &namespace, updated).await {
        Ok(_) | Err(ApiError::NotFound { .. }) => done,
        // Changed since: its change brings it back.
        Err(ApiError::Conflict { .. }) => done,
        Err(error) => {
            tracing::debug!(%namespace, %name, %error, "writing a disruption budget's status");
            Outcome::Failed
        }
    }
}

/// The replicas the controllers of `pods` want, each controller counted once, and the names
/// of the pods without a controller (left out); an error names a pod whose controller is not
/// one this server knows (only ReplicationControllers manage pods here).
async fn expected_by_controllers(
    client: &dyn ApiClient,
    pods: &[Value],
) -> Result<(i64, Vec<String>), String> {
    let mut counted = BTreeSet::new();
    let mut expected = 0;
    let mut unmanaged = Vec::new();
    for pod in pods {
        let pod_name = json::at(pod, "/metadata/name").and_then(Value::as_str).unwrap_or("");
        let owners = json::at(pod, "/metadata/ownerReferences").and_then(Value::as_array);
        let controller = owners.into_iter().flatten().find(|o| o["controller"] == true);
        let Some(controller) = controller else {
            unmanaged.push(pod_name.to_string());
            continue;
        };
        let uid = controller["uid"].as_str().unwrap_or("").to_string();
        if counted.contains(&uid) {
            continue;
        }
        let no_controllers = || format!("found no controllers for pod {pod_name:?}");
        if controller["kind"] != "ReplicationController" || controller["apiVersion"] != "v1" {
            return Err(no_controllers());
        }
        let namespace = json::at(pod, "/metadata/namespace").and_then(Value::as_str);
        let name = controller["name"].as_str().unwrap_or("");
        let rcs = resources::core("replicationcontrollers");
        let rc = match client.get(rcs, namespace.unwrap_or(""), name).await {
            Ok(rc) if object_uid(&rc) == uid => rc,
            Ok(_) | Err(ApiError::NotFound { .. }) => return Err(no_controllers()),
            Err(error) => return Err(error.to_string()),
        };
        expected += json::at(&rc, "/spec/replicas").and_then(Value::as_i64).unwrap_or(1);
        counted.insert(uid);
    }
    Ok((expected, unmanaged))
}

/// The entries of a budget's `disruptedPods` still standing: pods still there, not being
/// deleted yet, evicted less than two minutes ago. Also when the first of them runs out.
fn still_disrupted(
    status: &Map<String, Value>,
    pods: &[Value],
    now: DateTime<Utc>,
) -> (Map<String, Value>, Option<DateTime<Utc>>) {
    let mut kept = Map::new();
    let mut first_out: Option<DateTime<Utc>> = None;
    let Some(disrupted) = status.get("disruptedPods").and_then(Value::as_object) else {
        return (kept, None);
    };
    let timeout = chrono::Duration::from_std(DELETION_TIMEOUT).expect("two minutes");
    for pod in pods {
        if is_being_deleted(pod) {
            continue;
        }
        let name = json::at(pod, "/metadata/name").and_then(Value::as_str).unwrap_or("");
        let Some(at) = disrupted.get(name) else { continue };
        let since = at.as_str().and_then(|t| t.parse::<DateTime<Utc>>().ok());
        let Some(out) = since.map(|since| since + timeout).filter(|out| *out > now) else {
            continue;
        };
        first_out = Some(first_out.map_or(out, |first| first.min(out)));
        kept.insert(name.to_string(), at.clone());
    }
    (kept, first_out)
}

/// Whether `pod` counts as healthy: ready, not being deleted, not just evicted.
fn healthy(pod: &Value, disrupted: &Map<String, Value>) -> bool {
    let name = json::at(pod, "/metadata/name").and_then(Value::as_str).unwrap_or("");
    !is_being_deleted(pod) && !disrupted.contains_key(name) && is_ready(pod)
}

impl Actor for DisruptionController {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        informer::feed_actor(
            ctx,
            client,
            resources::disruption_budgets(),
            Default::default(),
            Budgets,
        );
    }
}

impl Handler<Budgets> for DisruptionController {
    type Result = ();

    fn handle(&mut self, Budgets(feed): Budgets, ctx: &mut Context<Self>) {
        let changed = apply_feed(&mut self.budgets, feed, key_of, |budget| budget);
        if self.budgets.is_empty() {
            self.pods.let_go();
            self.pending.clear();
            self.retries.clear();
            return;
        }
        self.pods.follow(ctx, self.client.clone(), resources::core("pods"), Pods);
        self.pending.extend(changed.into_iter().filter(|key| self.budgets.contains_key(key)));
        self.work(ctx);
    }
}

impl Handler<Pods> for DisruptionController {
    type Result = ();

    fn handle(&mut self, Pods(run, feed): Pods, ctx: &mut Context<Self>) {
        match self.pods.apply(run, feed) {
            Applied::Listed => self.pending.extend(self.budgets.keys().cloned()),
            Applied::Changed { object, previous } => {
                self.touch_budgets_of(&object, previous.as_ref());
            }
            Applied::Nothing => return,
        }
        self.work(ctx);
    }
}

impl Handler<StopDisruptionController> for DisruptionController {
    type Result = ();

    fn handle(&mut self, _: StopDisruptionController, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{ApiCore, DeleteOptions};
    use crate::testing::{core, eventually};

    async fn budget(core: &ApiCore, name: &str) -> Value {
        ApiClient::get(core, resources::disruption_budgets(), "default", name).await.unwrap()
    }

    /// A ready pod labelled `app: web`, of `owner` when given.
    async fn ready_pod(core: &ApiCore, name: &str, owner: Option<&Value>) {
        let mut pod = json!({"metadata": {"name": name, "namespace": "default",
            "labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        if let Some(rc) = owner {
            pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1",
                "kind": "ReplicationController", "name": rc["metadata"]["name"],
                "uid": rc["metadata"]["uid"], "controller": true}]);
        }
        let pods = resources::core("pods");
        let mut created = ApiClient::create(core, pods, "default", pod).await.unwrap();
        created["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
        created["status"]["phase"] = json!("Running");
        ApiClient::update_status(core, pods, "default", created).await.unwrap();
    }

    async fn evict(core: &ApiCore, pod: &str) -> Result<(), ApiError> {
        let eviction = json!({"metadata": {"name": pod, "namespace": "default"}});
        core.evict("default", pod, &eviction, DeleteOptions::default()).await
    }

    #[actix::test]
    async fn budgets_are_worked_out_and_evictions_go_by_them() {
        let core = core().await;
        let rc = json!({"metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 3, "selector": {"app": "web"}, "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        let rcs = resources::core("replicationcontrollers");
        let rc = ApiClient::create(&core, rcs, "default", rc).await.unwrap();
        for name in ["p0", "p1", "p2"] {
            ready_pod(&core, name, Some(&rc)).await;
        }
        let spec = json!({"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}});
        let pdb = json!({"metadata": {"name": "web", "namespace": "default"}, "spec": spec});
        let budgets = resources::disruption_budgets();
        let created = ApiClient::create(&core, budgets, "default", pdb).await.unwrap();
        assert_eq!(created["status"]["disruptionsAllowed"], 0, "nothing allowed until counted");
        // Counted before the controller has seen it: evictions wait for it.
        let Err(ApiError::DisruptionBudget { cause, retry_after_seconds: 10 }) =
            evict(&core, "p0").await
        else {
            panic!("an eviction before the budget is counted is refused")
        };
        assert!(cause.contains("still being processed"), "{cause}");

        let _controller = DisruptionController::new(Arc::new(core.clone())).start();
        let counted = eventually("the budget counted", || async {
            let b = budget(&core, "web").await;
            (b["status"]["observedGeneration"] == 1).then_some(b)
        })
        .await;
        let status = &counted["status"];
        assert_eq!(
            [&status["expectedPods"], &status["desiredHealthy"], &status["currentHealthy"]],
            [3, 2, 3],
            "{counted}"
        );
        assert_eq!(status["disruptionsAllowed"], 1);
        assert_eq!(status["conditions"][0]["reason"], "SufficientPods");

        // One eviction is allowed: the pod is marked and deleted, the budget spent.
        evict(&core, "p0").await.unwrap();
        let pods = resources::core("pods");
        assert!(matches!(
            ApiClient::get(&core, pods, "default", "p0").await,
            Err(ApiError::NotFound { .. })
        ));
        // The second is not, with what the budget needs in the cause.
        let Err(ApiError::DisruptionBudget { cause, .. }) = evict(&core, "p1").await else {
            panic!("the budget allows no second eviction")
        };
        assert!(cause.starts_with("The disruption budget web needs 2 healthy pods"), "{cause}");
        // Once p0 is seen gone, it leaves `disruptedPods`.
        let settled = eventually("p0 counted out", || async {
            let b = budget(&core, "web").await;
            b["status"].get("disruptedPods").is_none().then_some(b)
        })
        .await;
        assert_eq!(settled["status"]["currentHealthy"], 2);
        assert_eq!(settled["status"]["disruptionsAllowed"], 0);
        assert_eq!(settled["status"]["conditions"][0]["reason"], "InsufficientPods");

        // A dry run evicts nothing; a running pod under no budget just goes.
        let mut lone = json!({"metadata": {"name": "lone", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let mut lone = ApiClient::create(&core, pods, "default", lone.take()).await.unwrap();
        lone["status"]["phase"] = json!("Running");
        ApiClient::update_status(&core, pods, "default", lone).await.unwrap();
        let dry = DeleteOptions { dry_run: true, ..DeleteOptions::default() };
        let eviction = json!({"metadata": {"name": "lone"}});
        core.evict("default", "lone", &eviction, dry).await.unwrap();
        assert!(ApiClient::get(&core, pods, "default", "lone").await.is_ok());
        evict(&core, "lone").await.unwrap();

        // A pod without a controller is left out of a maxUnavailable budget, with a warning.
        ready_pod(&core, "orphan", None).await;
        let events = resources::core("events");
        eventually("the UnmanagedPods warning", || async {
            let options = crate::core::ListOptions::default();
            let listed = ApiClient::list(&core, events, Some("default"), &options).await.unwrap();
            listed.items.iter().any(|e| e["reason"] == "UnmanagedPods").then_some(())
        })
        .await;
        let counted = eventually("the orphan counted healthy", || async {
            let b = budget(&core, "web").await;
            (b["status"]["currentHealthy"] == 3).then_some(b)
        })
        .await;
        assert_eq!(counted["status"]["expectedPods"], 3, "the orphan is not expected: {counted}");

        // A pod of a controller kind kplane does not serve: the budget cannot be counted.
        let mut foreign = json!({"metadata": {"name": "foreign", "namespace": "default",
            "labels": {"app": "web"}, "ownerReferences": [{"apiVersion": "apps/v1",
            "kind": "ReplicaSet", "name": "rs", "uid": "u-rs", "controller": true}]},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        ApiClient::create(&core, pods, "default", foreign.take()).await.unwrap();
        let failed = eventually("the budget's sync failing", || async {
            let b = budget(&core, "web").await;
            (b["status"]["conditions"][0]["reason"] == "SyncFailed").then_some(b)
        })
        .await;
        let message = failed["status"]["conditions"][0]["message"].as_str().unwrap();
        assert_eq!(message, "found no controllers for pod \"foreign\"");

        // Two budgets over one pod: the eviction cannot choose.
        let second = json!({"metadata": {"name": "second", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}});
        ApiClient::create(&core, budgets, "default", second).await.unwrap();
        assert!(matches!(evict(&core, "p1").await, Err(ApiError::Unsupported(_))));
    }
}
