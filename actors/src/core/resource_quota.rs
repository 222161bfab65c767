//! The ResourceQuota admission plugin, as Kubernetes enables it by default: a create in a
//! namespace with quotas is refused (403) when it would take a quota's usage past its hard
//! limit, and is otherwise charged to the quotas before it is stored, by updating their
//! `status.used` (pinned to the version read, so that two creates racing for the last unit
//! cannot both have it). A quota counts only once its status has been worked out (by the
//! resource quota controller, which also gives back what deleted objects held).

use std::sync::Arc;

use serde_json::{json, Value};

use super::{ApiCore, ApiError, WriteOptions};
use crate::model::quota::{self, Usage};
use crate::model::{json, resources, ResourceType};

/// How many times a charge is tried again after another write to a quota got in between.
const MAX_ATTEMPTS: usize = 10;

/// The resources a pod must state for each container when a quota limits them.
const STATED_BY_PODS: [&str; 6] =
    ["cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"];

fn quotas() -> &'static ResourceType {
    resources::find("", "v1", "resourcequotas").expect("resource quotas are served")
}

/// What one quota says of a create.
enum Verdict {
    /// The quota does not count this object.
    Ignores,
    /// It counts it, and its status after the charge is this.
    Charges(Value),
}

/// One quota's verdict on `object` (of `resource`, with `usage`), or the reason it refuses
/// it, in Kubernetes' words.
fn judge(
    resource: &ResourceType,
    object: &Value,
    usage: &Usage,
    quota_object: &Value,
) -> Result<Verdict, String> {
    let name = json::at(quota_object, "/metadata/name").and_then(Value::as_str).unwrap_or("");
    let Some(scopes) = quota::matched_scopes(quota_object) else { return Ok(Verdict::Ignores) };
    if !quota::scopes_match(&scopes, resource, object) {
        return Ok(Verdict::Ignores);
    }
    let hard = quota::amounts(json::at(quota_object, "/status/hard"));
    let used = quota::amounts(json::at(quota_object, "/status/used"));
    let restricted: Vec<&String> = hard.keys().filter(|r| quota::counts(resource, r)).collect();
    if restricted.is_empty() {
        return Ok(Verdict::Ignores);
    }
    if resource.kind == "Pod" {
        if let Some(missing) = unstated(object, &restricted) {
            return Err(format!("failed quota: {name}: must specify {missing}"));
        }
    }
    if restricted.iter().any(|r| !used.contains_key(*r)) {
        let names: Vec<&str> = restricted.iter().map(|r| r.as_str()).collect();
        return Err(format!("status unknown for quota: {name}, resources: {}", names.join(",")));
    }
    let requested: Usage = usage
        .iter()
        .filter(|(r, amount)| **amount != 0 && hard.contains_key(*r))
        .map(|(r, amount)| (r.clone(), *amount))
        .collect();
    if requested.is_empty() {
        return Ok(Verdict::Ignores);
    }
    let mut after = used.clone();
    for (r, amount) in &requested {
        quota::add(&mut after, r, *amount);
    }
    let exceeded: Vec<&String> = requested.keys().filter(|r| after[*r] > hard[*r]).collect();
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
    let used: serde_json::Map<String, Value> = after
        .iter()
        .map(|(r, amount)| (r.clone(), json!(quota::amount_text(r, *amount))))
        .collect();
    charged["status"]["used"] = Value::Object(used);
    Ok(Verdict::Charges(charged))
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

impl ApiCore {
    /// Admits the create of `object` (of `resource`, named `name`) against the quotas of
    /// `namespace`: refused (403) past any, else charged to each that counts it (unless
    /// `dry_run`). Namespaces without quotas cost one table lookup.
    pub(super) async fn charge_quotas(
        &self,
        resource: &'static ResourceType,
        namespace: &str,
        name: &str,
        object: &Value,
        dry_run: bool,
    ) -> Result<(), ApiError> {
        if !resource.namespaced {
            return Ok(());
        }
        let mut charged: Vec<String> = Vec::new();
        for _ in 0..MAX_ATTEMPTS {
            let stored = self.store.quotas(namespace);
            if stored.is_empty() {
                return Ok(());
            }
            let usage = quota::usage_of(resource, object, chrono::Utc::now());
            let mut charges = Vec::new();
            for quota_object in stored.iter().filter(|q| !charged.contains(&q.key.name)) {
                let value = quota_object.to_value();
                match judge(resource, object, &usage, &value) {
                    Ok(Verdict::Ignores) => {}
                    Ok(Verdict::Charges(updated)) => {
                        charges.push((Arc::clone(quota_object), updated))
                    }
                    Err(message) => {
                        return Err(ApiError::forbidden(resource, name, message, Vec::new()))
                    }
                }
            }
            if dry_run {
                return Ok(());
            }
            let mut raced = false;
            for (quota_object, updated) in charges {
                let quota_name = &quota_object.key.name;
                let options = WriteOptions::default();
                match self.update_status(quotas(), namespace, quota_name, updated, &options).await {
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
                return Ok(());
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
        judge(pods(), object, &usage, quota_object).map(|v| match v {
            Verdict::Ignores => None,
            Verdict::Charges(q) => Some(q["status"]["used"].clone()),
        })
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
