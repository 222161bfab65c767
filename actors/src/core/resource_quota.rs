//! The ResourceQuota admission plugin, as Kubernetes enables it by default: a create (or an
//! update of a service or claim that takes more) in a namespace with quotas is refused (403)
//! when it would take a quota's usage past its hard limit, and is otherwise charged to the
//! quotas before it is stored, by updating their `status.used`. A quota counts only once its
//! status has been worked out (by the resource quota controller, which also gives back what
//! deleted objects held).
//!
//! A namespace's charges are serialized by its [`QuotaLocks`] lock, held from the charge until
//! the object is stored; the controller holds it while it recounts, so that a recount neither
//! misses a charged object not yet stored nor lets two creates both take the last unit.

use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{json, Value};
use tokio::sync::OwnedMutexGuard;

use super::{ApiCore, ApiError, WriteOptions};
use crate::model::quota::{self, Usage};
use crate::model::{json, resources, FastMap, ResourceType};

/// One lock per namespace that has had quotas (see the module's comment). A namespace's lock
/// is dropped once no one holds or waits for it, when the table has doubled since it was last
/// pruned: namespaces come and go without the table growing with them.
#[derive(Debug, Clone, Default)]
pub struct QuotaLocks(Arc<Mutex<LockTable>>);

#[derive(Debug, Default)]
struct LockTable {
    locks: FastMap<String, Arc<tokio::sync::Mutex<()>>>,
    /// The size at which idle locks are dropped next.
    prune_at: usize,
}

/// The fewest locks kept before idle ones are dropped.
const LOCKS_KEPT: usize = 64;

/// A namespace's quota lock, held.
pub type QuotaGuard = OwnedMutexGuard<()>;

impl QuotaLocks {
    /// Waits for and takes `namespace`'s lock.
    pub async fn lock(&self, namespace: &str) -> QuotaGuard {
        let lock = {
            let mut table = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if table.locks.len() >= table.prune_at.max(LOCKS_KEPT) {
                // The table holds one reference; a holder or waiter holds another.
                table.locks.retain(|_, lock| Arc::strong_count(lock) > 1);
                table.prune_at = 2 * table.locks.len();
            }
            table.locks.entry(namespace.to_owned()).or_default().clone()
        };
        lock.lock_owned().await
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap().locks.len()
    }
}

/// How many times a charge is tried again after another write to a quota got in between.
const MAX_ATTEMPTS: usize = 10;

/// The resources a pod must state for each container when a quota limits them.
const STATED_BY_PODS: [&str; 6] =
    ["cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"];

fn quotas() -> &'static ResourceType {
    resources::core("resourcequotas")
}

/// Whether a quota counts `object` (of `resource`): it takes it in by its scopes and limits
/// something it uses; or the reason it refuses it before any amount is looked at, in
/// Kubernetes' words: a pod not stating what the quota limits, a quota whose usage is not
/// yet worked out.
fn counts_object(
    resource: &ResourceType,
    object: &Value,
    quota_object: &Value,
) -> Result<bool, String> {
    let name = json::at(quota_object, "/metadata/name").and_then(Value::as_str).unwrap_or("");
    let Some(scopes) = quota::scope_requirements(quota_object) else { return Ok(false) };
    if !quota::scopes_match(&scopes, resource, object) {
        return Ok(false);
    }
    let hard = json::at(quota_object, "/status/hard").and_then(Value::as_object);
    let restricted: Vec<&String> =
        hard.into_iter().flatten().map(|(r, _)| r).filter(|r| quota::counts(resource, r)).collect();
    if restricted.is_empty() {
        return Ok(false);
    }
    if resource.kind == "Pod" {
        if let Some(missing) = unstated(object, &restricted) {
            return Err(format!("failed quota: {name}: must specify {missing}"));
        }
    }
    let used = json::at(quota_object, "/status/used");
    if restricted.iter().any(|r| used.and_then(|u| u.get(r.as_str())).is_none()) {
        let names: Vec<&str> = restricted.iter().map(|r| r.as_str()).collect();
        return Err(format!("status unknown for quota: {name}, resources: {}", names.join(",")));
    }
    Ok(true)
}

/// A counting quota's status after charging it `usage`, `None` when it limits none of what
/// is used; or, past its hard limits, the refusal in Kubernetes' words (the amounts as the
/// quota's status and the request write them).
fn charge(usage: &Usage, quota_object: &Value) -> Result<Option<Value>, String> {
    let name = json::at(quota_object, "/metadata/name").and_then(Value::as_str).unwrap_or("");
    let hard = quota::amounts(json::at(quota_object, "/status/hard"));
    let used = quota::amounts(json::at(quota_object, "/status/used"));
    let requested: Usage = usage
        .iter()
        .filter(|(r, amount)| amount.millis != 0 && hard.contains_key(*r))
        .map(|(r, amount)| (r.clone(), *amount))
        .collect();
    if requested.is_empty() {
        return Ok(None);
    }
    let mut after = used.clone();
    for (r, amount) in &requested {
        quota::add(&mut after, r, *amount);
    }
    let exceeded: Vec<&String> =
        requested.keys().filter(|r| after[*r].millis > hard[*r].millis).collect();
    if !exceeded.is_empty() {
        let only = |usage: &Usage| -> Usage {
            exceeded.iter().filter_map(|r| Some(((*r).clone(), *usage.get(*r)?))).collect()
        };
        return Err(format!(
            "exceeded quota: {name}, requested: {}, used: {}, limited: {}",
            quota::pretty(&only(&requested)),
            quota::pretty(&only(&used)),
            quota::pretty(&only(&hard)),
        ));
    }
    let mut charged = quota_object.clone();
    let used: serde_json::Map<String, Value> =
        after.iter().map(|(r, amount)| (r.clone(), json!(amount.text()))).collect();
    charged["status"]["used"] = Value::Object(used);
    Ok(Some(charged))
}

/// The pod's containers that do not state the quota-limited compute resources, as
/// Kubernetes lists them (`limits.cpu for: a,b; requests.memory for: a`); `None` if all do.
fn unstated(pod: &Value, restricted: &[&String]) -> Option<String> {
    let mut missing = Vec::new();
    for resource in restricted.iter().filter(|r| STATED_BY_PODS.contains(&r.as_str())) {
        let (list, name) = match resource.split_once('.') {
            Some(("limits", name)) => ("limits", name),
            Some((_, name)) => ("requests", name),
            None => ("requests", resource.as_str()),
        };
        let mut containers: Vec<&str> = ["containers", "initContainers"]
            .iter()
            .filter_map(|l| json::at(pod, &format!("/spec/{l}"))?.as_array())
            .flatten()
            .filter(|c| json::at(c, &format!("/resources/{list}/{name}")).is_none())
            .map(|c| c.get("name").and_then(Value::as_str).unwrap_or(""))
            .collect();
        if !containers.is_empty() {
            containers.sort_unstable();
            missing.push(format!("{resource} for: {}", containers.join(",")));
        }
    }
    (!missing.is_empty()).then(|| missing.join("; "))
}

/// What an update from `old` to `new` (of `resource`) adds to the quotas: the growth of each
/// amount; only services and claims are charged on update, as in Kubernetes.
pub(super) fn update_usage(resource: &ResourceType, old: &Value, new: &Value) -> Usage {
    if !resource.group.is_empty() || !matches!(resource.kind, "Service" | "PersistentVolumeClaim") {
        return Usage::new();
    }
    let now = chrono::Utc::now();
    let before = quota::usage_of(resource, old, now);
    let after = quota::usage_of(resource, new, now);
    after
        .into_iter()
        .map(|(name, now)| {
            let grown = now.minus(before.get(&name).copied().unwrap_or_default());
            (name, grown)
        })
        .filter(|(_, grown)| grown.millis > 0)
        .collect()
}

impl ApiCore {
    /// Admits a write of `object` (of `resource`, named `name`) against the quotas of
    /// `namespace`, for what it adds: `growth` for an update, all of its usage for a create
    /// (`None`): refused (403) past any quota, else charged to each that counts it (unless
    /// `dry_run`). Returns the namespace's quota lock, for the caller to hold until
    /// the object is stored, when the namespace has quotas; namespaces without cost one table
    /// lookup.
    pub(super) async fn charge_quotas(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        object: &Value,
        growth: Option<Usage>,
        dry_run: bool,
    ) -> Result<Option<QuotaGuard>, ApiError> {
        if !resource.namespaced || self.store.quotas(namespace).is_empty() {
            return Ok(None);
        }
        let usage = growth.unwrap_or_else(|| quota::usage_of(resource, object, chrono::Utc::now()));
        if usage.is_empty() {
            return Ok(None);
        }
        let guard = self.quota_locks.lock(namespace).await;
        let mut charged: Vec<String> = Vec::new();
        let refuse = |message| ApiError::forbidden(resource, name, message, Vec::new());
        for _ in 0..MAX_ATTEMPTS {
            let stored = self.store.quotas(namespace);
            // As Kubernetes checks them: every quota's constraints and status first, then
            // each counting quota's limits.
            let mut counting = Vec::new();
            for quota_object in stored.iter().filter(|q| !charged.contains(&q.key.name)) {
                let value = quota_object.to_value();
                if counts_object(resource, object, &value).map_err(refuse)? {
                    counting.push((quota_object, value));
                }
            }
            let mut charges = Vec::new();
            for (quota_object, value) in counting {
                if let Some(updated) = charge(&usage, &value).map_err(refuse)? {
                    charges.push((Arc::clone(quota_object), updated));
                }
            }
            if dry_run {
                return Ok(Some(guard));
            }
            let mut raced = false;
            for (quota_object, updated) in charges {
                let quota_name = &quota_object.key.name;
                let options = WriteOptions::default();
                // Boxed: an update charges quotas too (services and claims), so the futures
                // would otherwise contain themselves.
                let update = self.update_status(quotas(), namespace, quota_name, updated, &options);
                match Box::pin(update).await {
                    Ok(_) => charged.push(quota_name.clone()),
                    // Changed or gone since read: judged again against what is there now.
                    Err(ApiError::Conflict { .. } | ApiError::NotFound { .. }) => {
                        raced = true;
                        break;
                    }
                    Err(error) => return Err(error),
                }
            }
            if !raced {
                return Ok(Some(guard));
            }
            self.store.settle(quotas()).await?;
        }
        Err(ApiError::Unavailable(format!(
            "resource quota evaluation for {} {name:?} kept meeting other writes to the quotas",
            resource.plural
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pods() -> &'static ResourceType {
        resources::find("", "v1", "pods").unwrap()
    }

    fn pod(cpu: Option<&str>) -> Value {
        let resources = cpu.map_or(json!({}), |cpu| json!({"requests": {"cpu": cpu}}));
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": resources}]}})
    }

    fn quota(hard: Value, used: Option<Value>) -> Value {
        let mut quota = json!({"metadata": {"name": "q"}, "spec": {"hard": hard}});
        if let Some(used) = used {
            quota["status"] = json!({"hard": hard, "used": used});
        }
        quota
    }

    fn verdict(object: &Value, quota_object: &Value) -> Result<Option<Value>, String> {
        let usage = quota::usage_of(pods(), object, chrono::Utc::now());
        if !counts_object(pods(), object, quota_object)? {
            return Ok(None);
        }
        Ok(charge(&usage, quota_object)?.map(|q| q["status"]["used"].clone()))
    }

    #[tokio::test]
    async fn idle_namespace_locks_are_dropped_and_held_ones_kept() {
        let locks = QuotaLocks::default();
        let held = locks.lock("kept").await;
        for n in 0..1000 {
            drop(locks.lock(&format!("gone-{n}")).await);
        }
        assert!(locks.len() <= 2 * LOCKS_KEPT, "{} locks for 1,001 namespaces", locks.len());

        // A lock held through the pruning stays the namespace's lock: another taker waits.
        use futures::FutureExt;
        assert!(locks.lock("kept").now_or_never().is_none(), "the namespace's lock is held");
        drop(held);
        assert!(locks.lock("kept").now_or_never().is_some());
    }

    #[test]
    fn creates_are_charged_until_the_hard_limit() {
        let hard = json!({"pods": "2", "requests.cpu": "1"});
        let fits = quota(hard.clone(), Some(json!({"pods": "1", "requests.cpu": "500m"})));
        assert_eq!(
            verdict(&pod(Some("250m")), &fits),
            Ok(Some(json!({"pods": "2", "requests.cpu": "750m"})))
        );
        let full = quota(hard.clone(), Some(json!({"pods": "2", "requests.cpu": "500m"})));
        assert_eq!(
            verdict(&pod(Some("750m")), &full),
            Err("exceeded quota: q, requested: pods=1,requests.cpu=750m, used: pods=2,requests.cpu=500m, limited: pods=2,requests.cpu=1".into())
        );
        assert_eq!(
            verdict(&pod(None), &fits),
            Err("failed quota: q: must specify requests.cpu for: c".into())
        );
        let new = quota(hard, None);
        assert_eq!(verdict(&pod(Some("1m")), &new), Ok(None), "not counted before its status");
        let unknown = quota(json!({"pods": "2"}), Some(json!({})));
        assert_eq!(
            verdict(&pod(Some("1m")), &unknown),
            Err("status unknown for quota: q, resources: pods".into())
        );
        let configmaps = quota(json!({"configmaps": "1"}), Some(json!({"configmaps": "0"})));
        assert_eq!(verdict(&pod(Some("1m")), &configmaps), Ok(None));
    }
}
