//! The resource quota controller: works out each ResourceQuota's status, its hard limits and
//! what the objects of its namespace use of them, when the quota changes and again every
//! second (a namespace whose recount takes long, less often), so that what deleted or
//! finished objects held is given back, as Kubernetes' controller does. The quota admission charges creates in between (`core::resource_quota`);
//! a recount holds the namespace's quota lock, as a charge does until its object is stored,
//! so that it counts every charged object exactly once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use serde_json::{json, Map, Value};

use crate::client::informer::{self, Feed};
use crate::client::{object_name, ApiClient};
use crate::core::{ApiError, ListOptions, QuotaLocks};
use crate::model::quota::{self, Usage};
use crate::model::{json, resources, FastMap, FastSet, ResourceType};
use crate::watch::EventType;

/// How often every quota's usage is worked out again, at most.
const RECALCULATE_EVERY: Duration = Duration::from_secs(1);

/// A namespace whose recount took `d` is recounted again no sooner than this many `d`s later
/// (unless a quota changes), so that recounting big namespaces takes a small share of a core
/// and of the time creates there wait for the namespace's quota lock.
const SPACING: u32 = 20;

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
}

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
        let (working, due) = (FastSet::default(), FastMap::default());
        Self { client, locks, quotas: BTreeMap::new(), working, due }
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
            }
        } else {
            names.insert(object_name(quota_object).to_string());
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
                let started = Instant::now();
                let result = recalculate(&*client, &namespace).await;
                drop(held);
                (namespace, result, started.elapsed())
            };
            ctx.spawn(work.into_actor(self).map(|(namespace, result, took), act, _| {
                act.working.remove(&namespace);
                let wait = RECALCULATE_EVERY.max(took * SPACING);
                act.due.insert(namespace.clone(), Instant::now() + wait);
                if let Err(error) = result {
                    tracing::debug!(%namespace, %error, "working out quota usage");
                }
            }));
        }
    }
}

/// Works out the status of every quota in `namespace`, writing those that changed.
async fn recalculate(client: &dyn ApiClient, namespace: &str) -> Result<(), ApiError> {
    let options = ListOptions::default();
    let quota_objects = client.list(quotas(), Some(namespace), &options).await?.items;
    // Each kind's objects are listed once, for all the quotas that count them.
    let mut listed: BTreeMap<&'static str, Vec<Value>> = BTreeMap::new();
    let now = chrono::Utc::now();
    for quota_object in quota_objects {
        let Some(scopes) = quota::scope_requirements(&quota_object) else { continue };
        let hard = json::at(&quota_object, "/spec/hard").cloned().unwrap_or(json!({}));
        let hard_amounts = quota::amounts(Some(&hard));
        let mut used: Usage = hard_amounts.keys().map(|r| (r.clone(), 0)).collect();
        let counted = resources::RESOURCES.iter().filter(|r| {
            r.namespaced
                && resources::is_stored(r)
                && hard_amounts.keys().any(|name| quota::counts(r, name))
        });
        for resource in counted {
            if !listed.contains_key(resource.plural) {
                let items = client.list(resource, Some(namespace), &options).await?.items;
                listed.insert(resource.plural, items);
            }
            for object in &listed[resource.plural] {
                if !quota::scopes_match(&scopes, resource, object) {
                    continue;
                }
                for (name, amount) in quota::usage_of(resource, object, now) {
                    if let Some(total) = used.get_mut(&name) {
                        *total = total.saturating_add(amount);
                    }
                }
            }
        }
        let used: Map<String, Value> = used
            .iter()
            .map(|(r, amount)| (r.clone(), json!(quota::amount_text(r, *amount))))
            .collect();
        let status = json!({"hard": hard, "used": used});
        if quota_object.get("status") == Some(&status) {
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
    Ok(())
}

impl Actor for ResourceQuotaController {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let client = self.client.clone();
        informer::feed_actor(ctx, client, quotas(), Default::default(), Informed);
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

impl Handler<StopQuotaController> for ResourceQuotaController {
    type Result = ();

    fn handle(&mut self, _: StopQuotaController, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}
