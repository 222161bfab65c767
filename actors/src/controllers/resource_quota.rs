//! The resource quota controller: works out each ResourceQuota's status, its hard limits and
//! what the objects of its namespace use of them, when the quota changes, soon after an object
//! it counts is deleted or a pod it counts finishes (Kubernetes' replenishment), and again
//! every second (a namespace of many objects, less often), so that what deleted or finished
//! objects held is given back, as Kubernetes' controller does. The quota admission charges
//! creates in between (`core::resource_quota`); a recount holds the namespace's quota lock, as
//! a charge does until its object is stored, so that it counts every charged object exactly
//! once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use serde_json::{json, Map, Value};

use crate::client::informer::{self, Feed, Scope};
use crate::client::{object_name, ApiClient};
use crate::core::{ApiError, ListOptions, ObjectView, QuotaLocks};
use crate::model::quota::{self, Usage};
use crate::model::{json, resources, FastMap, FastSet, ResourceType};
use crate::watch::EventType;

/// How often every quota's usage is worked out again, at most.
const RECALCULATE_EVERY: Duration = Duration::from_secs(1);

/// A namespace whose recount counted `n` objects is recounted again no sooner than `n` times
/// this later (unless a quota changes or a counted object is deleted): twenty times what a
/// recount takes an object on a 2-core machine (25 us a pod, measured), so that recounting
/// big namespaces takes a small share of a core and of the time creates there wait for the
/// namespace's quota lock. Counted by objects, not by the recount's wall time, which writes
/// queued before its lists lengthen: one slow recount under load held freed quota back for
/// seconds.
const SPACING_PER_OBJECT: Duration = Duration::from_micros(500);

/// The kinds whose deletion gives quota back at once (Kubernetes' replenishment): those
/// quotas count, by object or by what they ask for.
const REPLENISHED_BY: [&str; 6] = [
    "pods",
    "services",
    "replicationcontrollers",
    "persistentvolumeclaims",
    "configmaps",
    "secrets",
];

/// The resource quota controller actor.
pub struct ResourceQuotaController {
    client: Arc<dyn ApiClient>,
    locks: QuotaLocks,
    /// The namespaces with quotas, and the names of their quotas, as the informer last saw.
    quotas: BTreeMap<String, BTreeSet<String>>,
    /// Namespaces being worked out now.
    working: FastSet<String>,
    /// When each namespace's next periodic recount is due.
    due: FastMap<String, Instant>,
    /// Namespaces where a counted object was deleted while they were being worked out: due
    /// again at once.
    replenished: FastSet<String>,
}

/// A feed of a counted kind, for its deletions.
#[derive(Message)]
#[rtype(result = "()")]
struct Counted(Feed);

/// A feed of the pods that have finished (Succeeded or Failed), for those that just did.
#[derive(Message)]
#[rtype(result = "()")]
struct Finished(Feed);

/// The pods a quota no longer counts by their phase: those that have finished.
const FINISHED_PODS: &str = "status.phase!=Pending,status.phase!=Running,status.phase!=Unknown";

/// A feed of quotas.
#[derive(Message)]
#[rtype(result = "()")]
struct Informed(Feed);

/// Stops the controller (its list-watch ends with it).
#[derive(Message)]
#[rtype(result = "()")]
pub struct StopQuotaController;

fn quotas() -> &'static ResourceType {
    resources::core("resourcequotas")
}

impl ResourceQuotaController {
    /// A controller reading and writing through `client`, recounting under `locks` (the API
    /// core's, which `client` writes through).
    pub fn new(client: Arc<dyn ApiClient>, locks: QuotaLocks) -> Self {
        let (working, due, replenished) = Default::default();
        Self { client, locks, quotas: BTreeMap::new(), working, due, replenished }
    }

    fn saw(&mut self, quota_object: &Value, deleted: bool) {
        let namespace = json::at(quota_object, "/metadata/namespace").and_then(Value::as_str);
        let namespace = namespace.unwrap_or("").to_string();
        let names = self.quotas.entry(namespace.clone()).or_default();
        if deleted {
            names.remove(object_name(quota_object));
            if names.is_empty() {
                self.quotas.remove(&namespace);
                self.due.remove(&namespace);
                self.replenished.remove(&namespace);
            }
        } else {
            names.insert(object_name(quota_object).to_string());
        }
    }

    /// A counted object of `namespace` was deleted: if it has quotas, they are due at once
    /// (after the recount under way, if one is).
    fn replenish(&mut self, namespace: &str) {
        if !self.quotas.contains_key(namespace) {
            return;
        }
        if self.working.contains(namespace) {
            self.replenished.insert(namespace.to_string());
        } else {
            self.due.insert(namespace.to_string(), Instant::now());
        }
    }

    /// What a deleted object, or a pod that finished, held in its namespace is given back.
    fn replenish_for(&mut self, object: &Value) {
        if let Some(namespace) = json::at(object, "/metadata/namespace").and_then(Value::as_str) {
            self.replenish(namespace);
        }
    }

    /// Works out the quotas of `namespaces` (those not being worked out already).
    fn recalculate(&mut self, namespaces: Vec<String>, ctx: &mut Context<Self>) {
        for namespace in namespaces {
            if !self.working.insert(namespace.clone()) {
                continue;
            }
            let (client, locks) = (self.client.clone(), self.locks.clone());
            let work = async move {
                let held = locks.lock(&namespace).await;
                let result = recalculate(&*client, &namespace).await;
                drop(held);
                (namespace, result)
            };
            ctx.spawn(work.into_actor(self).map(|(namespace, result), act, _| {
                act.recounted(&namespace, *result.as_ref().unwrap_or(&0));
                if let Err(error) = result {
                    tracing::debug!(%namespace, %error, "working out quota usage");
                }
            }));
        }
    }

    /// A recount of `namespace` that counted `counted` objects is done: when it is due again.
    fn recounted(&mut self, namespace: &str, counted: u32) {
        self.working.remove(namespace);
        let wait = match self.replenished.remove(namespace) {
            true => Duration::ZERO,
            false => spacing(counted),
        };
        // A namespace whose last quota went during the recount is forgotten.
        if self.quotas.contains_key(namespace) {
            self.due.insert(namespace.to_string(), Instant::now() + wait);
        }
    }
}

/// How long after a recount that counted `counted` objects its namespace is due again.
fn spacing(counted: u32) -> Duration {
    RECALCULATE_EVERY.max(SPACING_PER_OBJECT * counted)
}

/// Works out the status of every quota in `namespace`, writing those that changed; how many
/// objects it counted (quotas included).
async fn recalculate(client: &dyn ApiClient, namespace: &str) -> Result<u32, ApiError> {
    let options = ListOptions::default();
    let quota_objects = client.list(quotas(), Some(namespace), &options).await?.items;
    let mut counted_objects = quota_objects.len();
    // Each kind's objects are listed once, for all the quotas that count them.
    let mut listed: BTreeMap<&'static str, Vec<Value>> = BTreeMap::new();
    let now = chrono::Utc::now();
    for quota_object in quota_objects {
        let Some(scopes) = quota::scope_requirements(&quota_object) else { continue };
        let hard = json::at(&quota_object, "/spec/hard").and_then(Value::as_object);
        let hard = hard.cloned().unwrap_or_default();
        let counted: Vec<&'static ResourceType> = (resources::RESOURCES.iter())
            .filter(|r| {
                r.namespaced
                    && resources::is_stored(r)
                    && hard.keys().any(|name| quota::counts(r, name))
            })
            .collect();
        // What nothing here counts keeps what its status said (Kubernetes' usage is masked
        // to what its evaluators count); what something counts starts from zero.
        let mut used: Map<String, Value> = json::at(&quota_object, "/status/used")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter(|(name, _)| hard.contains_key(*name))
            .map(|(name, amount)| (name.clone(), amount.clone()))
            .collect();
        let mut totals: Usage = (hard.keys())
            .filter(|name| counted.iter().any(|r| quota::counts(r, name)))
            .map(|name| (name.clone(), quota::Amount::default()))
            .collect();
        for resource in counted {
            if !listed.contains_key(resource.plural) {
                let items = client.list(resource, Some(namespace), &options).await?.items;
                counted_objects += items.len();
                listed.insert(resource.plural, items);
            }
            for object in &listed[resource.plural] {
                if !quota::scopes_match(&scopes, resource, object) {
                    continue;
                }
                for (name, amount) in quota::usage_of(resource, object, now) {
                    if let Some(total) = totals.get_mut(&name) {
                        *total = total.plus(amount);
                    }
                }
            }
        }
        used.extend(totals.into_iter().map(|(name, amount)| (name, json!(amount.text()))));
        // Empty lists are left out, as Kubernetes leaves them out.
        let mut status = Map::new();
        if !hard.is_empty() {
            status.insert("hard".into(), Value::Object(hard));
        }
        if !used.is_empty() {
            status.insert("used".into(), Value::Object(used));
        }
        let status = Value::Object(status);
        if quota_object.get("status").unwrap_or(&json!({})) == &status {
            continue;
        }
        let mut updated = quota_object;
        updated["status"] = status;
        match client.update_status(quotas(), namespace, updated).await {
            // Changed or gone since listed: the next round sees it again.
            Ok(_) | Err(ApiError::Conflict { .. } | ApiError::NotFound { .. }) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(u32::try_from(counted_objects).unwrap_or(u32::MAX))
}

impl Actor for ResourceQuotaController {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        informer::feed_actor(ctx, client.clone(), quotas(), Default::default(), Informed);
        // Only deletions matter: the least of each object (no JSON read for most).
        let ownership = Scope { view: ObjectView::Ownership, ..Scope::default() };
        for plural in REPLENISHED_BY {
            let resource = resources::core(plural);
            informer::feed_actor(ctx, client.clone(), resource, ownership.clone(), Counted);
        }
        // A pod that finishes gives its quota back as one deleted does.
        let finished = Scope { view: ObjectView::Ownership, ..Scope::fields(FINISHED_PODS) };
        informer::feed_actor(ctx, client.clone(), resources::core("pods"), finished, Finished);
        ctx.run_interval(RECALCULATE_EVERY, |act, ctx| {
            let now = Instant::now();
            let is_due = |ns: &String| act.due.get(ns).is_none_or(|due| *due <= now);
            let namespaces = act.quotas.keys().filter(|ns| is_due(ns)).cloned().collect();
            act.recalculate(namespaces, ctx);
        });
    }
}

impl Handler<Informed> for ResourceQuotaController {
    type Result = ();

    fn handle(&mut self, Informed(feed): Informed, ctx: &mut Context<Self>) {
        let changed = match feed {
            Feed::Listed(items) => {
                self.quotas.clear();
                items.iter().for_each(|q| self.saw(q, false));
                self.quotas.keys().cloned().collect()
            }
            Feed::Changed(kind, quota_object) => {
                self.saw(&quota_object, kind == EventType::Deleted);
                // A quota whose limits changed is worked out at once.
                let spec_hard = json::at(&quota_object, "/spec/hard");
                let status_hard = json::at(&quota_object, "/status/hard");
                if kind == EventType::Deleted || spec_hard == status_hard {
                    return;
                }
                let namespace =
                    json::at(&quota_object, "/metadata/namespace").and_then(Value::as_str);
                vec![namespace.unwrap_or("").to_string()]
            }
            Feed::Unavailable(_) => return,
        };
        self.recalculate(changed, ctx);
    }
}

impl Handler<Counted> for ResourceQuotaController {
    type Result = ();

    /// A counted object deleted in a namespace with quotas: its quotas are worked out again at
    /// the next tick, whatever the spacing (after the recount under way, if one is).
    fn handle(&mut self, Counted(feed): Counted, _: &mut Context<Self>) {
        let Feed::Changed(EventType::Deleted, object) = feed else { return };
        self.replenish_for(&object);
    }
}

impl Handler<Finished> for ResourceQuotaController {
    type Result = ();

    /// A pod that has just finished (it enters the feed's selection): its namespace's quotas
    /// are worked out again at the next tick, as for a deleted one.
    fn handle(&mut self, Finished(feed): Finished, _: &mut Context<Self>) {
        let Feed::Changed(EventType::Added, pod) = feed else { return };
        self.replenish_for(&pod);
    }
}

impl Handler<StopQuotaController> for ResourceQuotaController {
    type Result = ();

    fn handle(&mut self, _: StopQuotaController, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{DeleteOptions, PatchType};
    use crate::testing::{core, eventually};

    /// Sets when a namespace's next recount is due (a test's message).
    #[derive(Message)]
    #[rtype(result = "()")]
    struct SetDue(&'static str, Instant);

    impl Handler<SetDue> for ResourceQuotaController {
        type Result = ();
        fn handle(&mut self, SetDue(namespace, due): SetDue, _: &mut Context<Self>) {
            self.due.insert(namespace.to_string(), due);
        }
    }

    /// When a namespace's next recount is due (a test's message).
    #[derive(Message)]
    #[rtype(result = "Option<Instant>")]
    struct Due(&'static str);

    impl Handler<Due> for ResourceQuotaController {
        type Result = Option<Instant>;
        fn handle(&mut self, Due(namespace): Due, _: &mut Context<Self>) -> Option<Instant> {
            self.due.get(namespace).copied()
        }
    }

    #[actix::test]
    async fn a_pod_that_finishes_or_is_deleted_makes_its_quotas_due_at_once() {
        let core = core().await;
        let pods = resources::core("pods");
        let quota = json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "5"}}});
        ApiClient::create(&core, quotas(), "default", quota).await.unwrap();
        for name in ["done", "gone"] {
            let pod = json!({"metadata": {"name": name},
                "spec": {"containers": [{"name": "c", "image": "i"}]}});
            ApiClient::create(&core, pods, "default", pod).await.unwrap();
        }
        let controller =
            ResourceQuotaController::new(Arc::new(core.clone()), QuotaLocks::default()).start();
        let used = async || {
            let quota = ApiClient::get(&core, quotas(), "default", "q").await.unwrap();
            quota.pointer("/status/used/pods").and_then(Value::as_str).map(String::from)
        };
        assert_eq!(eventually("the first count", async || used().await).await, "2");

        // Not due for a minute: only a finished or deleted pod brings the recount forward.
        let an_hour = Instant::now() + Duration::from_secs(3600);
        let soon = || Instant::now() + Duration::from_secs(60);
        controller.send(SetDue("default", an_hour)).await.unwrap();
        let done = json!({"status": {"phase": "Succeeded"}});
        ApiClient::patch(&core, pods, "default", "done", PatchType::Merge, &done, true)
            .await
            .unwrap();
        eventually("the count without the finished pod", async || {
            (used().await.as_deref() == Some("1")).then_some(())
        })
        .await;
        assert!(controller.send(Due("default")).await.unwrap().unwrap() < soon());

        controller.send(SetDue("default", an_hour)).await.unwrap();
        ApiClient::delete(&core, pods, "default", "gone", &DeleteOptions::default()).await.unwrap();
        eventually("the count without the deleted pod", async || {
            (used().await.as_deref() == Some("0")).then_some(())
        })
        .await;
    }

    #[actix::test]
    async fn a_quotas_status_holds_what_is_counted_as_it_was_asked_for() {
        let core = core().await;
        let create = |resource: &'static ResourceType, object: Value| {
            let core = core.clone();
            async move { ApiClient::create(&core, resource, "default", object).await.unwrap() }
        };
        let hard = json!({"pods": "2", "requests.memory": "10G", "example.com/foo": "1"});
        create(quotas(), json!({"metadata": {"name": "q"}, "spec": {"hard": hard}})).await;
        create(quotas(), json!({"metadata": {"name": "empty"}, "spec": {}})).await;
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c",
            "image": "i", "resources": {"requests": {"memory": "2G"}}}]}});
        create(resources::core("pods"), pod).await;
        assert_eq!(recalculate(&core, "default").await.unwrap(), 3, "two quotas and a pod");
        let status = |name: &'static str| {
            let core = core.clone();
            async move {
                let quota = ApiClient::get(&core, quotas(), "default", name).await.unwrap();
                quota.get("status").cloned()
            }
        };
        // Nothing counts example.com/foo (not a request): it has no usage; 2G stays 2G.
        assert_eq!(
            status("q").await,
            Some(json!({"hard": hard, "used": {"pods": "1", "requests.memory": "2G"}}))
        );
        assert!(status("empty").await.is_none_or(|s| s == json!({})));
    }

    #[test]
    fn namespaces_of_many_objects_are_recounted_less_often_but_soon_after_a_deletion() {
        assert_eq!(spacing(0), RECALCULATE_EVERY);
        assert_eq!(spacing(1_000), RECALCULATE_EVERY);
        assert_eq!(spacing(10_000), Duration::from_secs(5));
    }

    #[actix::test]
    async fn a_deleted_object_makes_its_namespaces_quotas_due_at_once() {
        let core = core().await;
        let mut controller = ResourceQuotaController::new(Arc::new(core), QuotaLocks::default());
        let quota = json!({"metadata": {"name": "q", "namespace": "busy"}});
        controller.saw(&quota, false);
        let later = Instant::now() + Duration::from_secs(60);
        controller.due.insert("busy".into(), later);
        controller.replenish("elsewhere");
        assert!(!controller.due.contains_key("elsewhere"), "no quota there");
        controller.replenish("busy");
        assert!(controller.due["busy"] <= Instant::now(), "due at once");
        // While it is being worked out, it is due again once that recount is done.
        controller.working.insert("busy".into());
        controller.replenish("busy");
        assert!(controller.replenished.contains("busy"));
        // A namespace whose quotas are all gone is forgotten, during its recount too.
        controller.saw(&quota, true);
        assert!(controller.replenished.is_empty() && controller.due.is_empty());
        controller.recounted("busy", 1);
        assert!(controller.due.is_empty() && controller.working.is_empty());
    }
}
