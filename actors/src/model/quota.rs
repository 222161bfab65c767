//! What an object counts against a ResourceQuota, as Kubernetes' quota evaluators count it,
//! and which objects a quota's scopes take in. Amounts are kept in thousandths of a unit
//! (millicores, thousandths of a byte), so that sums are exact.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{json, quantity, ResourceType};

/// Amounts by resource name, in thousandths of a unit.
pub type Usage = BTreeMap<String, i64>;

/// One of anything, in thousandths.
const ONE: i64 = 1000;

/// The scopes this server can match objects against (`PriorityClass` and
/// `CrossNamespacePodAffinity` scopes, and scope selectors, are not matched: a quota naming
/// them is left alone).
pub const MATCHED_SCOPES: [&str; 4] =
    ["Terminating", "NotTerminating", "BestEffort", "NotBestEffort"];

/// Whether amounts of `resource` are bytes, written back in powers of 1024 when whole KiB.
pub fn counts_bytes(resource: &str) -> bool {
    resource.ends_with("memory") || resource.ends_with("storage") || resource.contains("hugepages-")
}

/// An amount of `resource` as a quantity's text.
pub fn amount_text(resource: &str, millis: i64) -> String {
    quantity::from_millis(millis, counts_bytes(resource))
}

/// A quantity's amount in thousandths (0 when it is none).
pub fn millis(text: &str) -> i64 {
    quantity::milli_value(text).unwrap_or(0)
}

/// The resource amounts of a list (`requests`, `limits`, `hard`), in thousandths.
pub fn amounts(list: Option<&Value>) -> Usage {
    let list = list.and_then(Value::as_object).into_iter().flatten();
    list.map(|(name, q)| (name.clone(), q.as_str().map_or(0, millis))).collect()
}

/// What `object`, of `resource`, adds to the quotas of its namespace: its object count
/// (`count/<resource>[.<group>]`) always; for pods not yet terminal, `pods` and their compute
/// resources' requests and limits; for services, the node ports and load balancers they take;
/// for claims, the storage they request.
pub fn usage_of(
    resource: &ResourceType,
    object: &Value,
    now: chrono::DateTime<chrono::Utc>,
) -> Usage {
    let mut usage = Usage::new();
    let count = if resource.group.is_empty() {
        format!("count/{}", resource.plural)
    } else {
        format!("count/{}.{}", resource.plural, resource.group)
    };
    usage.insert(count, ONE);
    if !resource.group.is_empty() {
        return usage;
    }
    match resource.kind {
        "Pod" if !is_terminal(object, now) => {
            usage.insert("pods".into(), ONE);
            let (requests, limits) = pod_requests_and_limits(object);
            for (name, amount) in requests {
                if matches!(name.as_str(), "cpu" | "memory" | "ephemeral-storage")
                    || name.starts_with("hugepages-")
                {
                    usage.insert(name.clone(), amount);
                    usage.insert(format!("requests.{name}"), amount);
                } else if name.contains('/') {
                    usage.insert(format!("requests.{name}"), amount);
                }
            }
            for (name, amount) in limits {
                if matches!(name.as_str(), "cpu" | "memory" | "ephemeral-storage") {
                    usage.insert(format!("limits.{name}"), amount);
                }
            }
        }
        "Service" => {
            usage.insert("services".into(), ONE);
            let ports = json::at(object, "/spec/ports").and_then(Value::as_array);
            let ports = ports.map_or(0, |p| p.len() as i64);
            match json::at(object, "/spec/type").and_then(Value::as_str) {
                Some("NodePort") => {
                    usage.insert("services.nodeports".into(), ports * ONE);
                }
                Some("LoadBalancer") => {
                    usage.insert("services.nodeports".into(), ports * ONE);
                    usage.insert("services.loadbalancers".into(), ONE);
                }
                _ => {}
            }
        }
        "PersistentVolumeClaim" => {
            usage.insert("persistentvolumeclaims".into(), ONE);
            let storage = json::at(object, "/spec/resources/requests/storage");
            if let Some(storage) = storage.and_then(Value::as_str) {
                usage.insert("requests.storage".into(), millis(storage));
            }
        }
        "ConfigMap" | "Secret" | "ReplicationController" | "ResourceQuota" => {
            usage.insert(resource.plural.into(), ONE);
        }
        _ => {}
    }
    usage
}

/// Whether the quota resource `name` counts objects of `resource` (Kubernetes' evaluators'
/// `MatchingResources`).
pub fn counts(resource: &ResourceType, name: &str) -> bool {
    let count = if resource.group.is_empty() {
        format!("count/{}", resource.plural)
    } else {
        format!("count/{}.{}", resource.plural, resource.group)
    };
    if name == count {
        return true;
    }
    if !resource.group.is_empty() {
        return false;
    }
    match resource.kind {
        "Pod" => {
            matches!(name, "pods" | "cpu" | "memory" | "ephemeral-storage")
                || name.starts_with("requests.")
                || name.starts_with("limits.")
                || name.starts_with("hugepages-")
        }
        "Service" => matches!(name, "services" | "services.nodeports" | "services.loadbalancers"),
        "PersistentVolumeClaim" => matches!(name, "persistentvolumeclaims" | "requests.storage"),
        "ConfigMap" | "Secret" | "ReplicationController" | "ResourceQuota" => {
            name == resource.plural
        }
        _ => false,
    }
}

/// A pod's requests and limits as Kubernetes totals them: its containers' summed, each init
/// container's taken instead when larger, and the pod's overhead added.
pub fn pod_requests_and_limits(pod: &Value) -> (Usage, Usage) {
    let containers = |list: &str| {
        let list = json::at(pod, &format!("/spec/{list}")).and_then(Value::as_array);
        list.into_iter().flatten().map(|c| c.get("resources"))
    };
    let total = |kind: &str| {
        let mut sum = Usage::new();
        for resources in containers("containers") {
            for (name, amount) in amounts(resources.and_then(|r| r.get(kind))) {
                *sum.entry(name).or_default() += amount;
            }
        }
        for resources in containers("initContainers") {
            for (name, amount) in amounts(resources.and_then(|r| r.get(kind))) {
                let current = sum.entry(name).or_default();
                *current = (*current).max(amount);
            }
        }
        for (name, amount) in amounts(json::at(pod, "/spec/overhead")) {
            *sum.entry(name).or_default() += amount;
        }
        sum
    };
    (total("requests"), total("limits"))
}

/// A pod that has finished (Succeeded or Failed), or whose deletion's grace period is over,
/// counts no compute resources.
fn is_terminal(pod: &Value, now: chrono::DateTime<chrono::Utc>) -> bool {
    let phase = json::at(pod, "/status/phase").and_then(Value::as_str);
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return true;
    }
    let deleted = json::at(pod, "/metadata/deletionTimestamp").and_then(Value::as_str);
    let deleted = deleted.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok());
    let grace = json::at(pod, "/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64);
    deleted.is_some_and(|at| at + chrono::Duration::seconds(grace.unwrap_or(0)) < now)
}

/// Whether a quota with `scopes` (all of which are [`MATCHED_SCOPES`]) takes in `object` of
/// `resource`: an unscoped quota takes in everything; a scoped one only pods, by whether they
/// have a deadline (Terminating) and whether they request and limit nothing (BestEffort).
pub fn scopes_match(scopes: &[&str], resource: &ResourceType, object: &Value) -> bool {
    if scopes.is_empty() {
        return true;
    }
    if !resource.group.is_empty() || resource.kind != "Pod" {
        return false;
    }
    let terminating = json::at(object, "/spec/activeDeadlineSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|s| s >= 0);
    let (requests, limits) = pod_requests_and_limits(object);
    let compute = |usage: &Usage| usage.keys().any(|k| k == "cpu" || k == "memory");
    let best_effort = !compute(&requests) && !compute(&limits);
    scopes.iter().all(|scope| match *scope {
        "Terminating" => terminating,
        "NotTerminating" => !terminating,
        "BestEffort" => best_effort,
        "NotBestEffort" => !best_effort,
        _ => false,
    })
}

/// A quota's scopes, or `None` when it names one this server does not match (or a scope
/// selector), so that it is left alone.
pub fn matched_scopes(quota: &Value) -> Option<Vec<&str>> {
    if json::at(quota, "/spec/scopeSelector").is_some_and(|s| !s.is_null()) {
        return None;
    }
    let scopes = json::at(quota, "/spec/scopes").and_then(Value::as_array);
    let scopes: Vec<&str> = scopes.into_iter().flatten().filter_map(Value::as_str).collect();
    scopes.iter().all(|s| MATCHED_SCOPES.contains(s)).then_some(scopes)
}

/// Amounts as Kubernetes prints them in messages: `name=amount`, by name, comma-separated.
pub fn pretty(usage: &Usage) -> String {
    let amounts =
        usage.iter().map(|(name, amount)| format!("{name}={}", amount_text(name, *amount)));
    amounts.collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::model::resources::find;

    fn usage(plural: &str, object: Value) -> Vec<(String, String)> {
        let resource = find("", "v1", plural).unwrap();
        let usage = usage_of(resource, &object, chrono::Utc::now());
        usage.iter().map(|(k, v)| (k.clone(), amount_text(k, *v))).collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn pods_count_their_compute_resources_until_they_finish() {
        let pod = json!({"spec": {
            "containers": [
                {"resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                    "limits": {"cpu": "200m", "memory": "64Mi"}}},
                {"resources": {"requests": {"cpu": "150m", "example.com/gpu": "1"}}}],
            "initContainers": [{"resources": {"requests": {"cpu": "1"}}}],
            "overhead": {"memory": "64Mi"}}});
        assert_eq!(
            usage("pods", pod.clone()),
            pairs(&[
                ("count/pods", "1"),
                ("cpu", "1"),
                ("limits.cpu", "200m"),
                ("limits.memory", "128Mi"),
                ("memory", "128Mi"),
                ("pods", "1"),
                ("requests.cpu", "1"),
                ("requests.example.com/gpu", "1"),
                ("requests.memory", "128Mi"),
            ])
        );
        let mut done = pod;
        done["status"] = json!({"phase": "Succeeded"});
        assert_eq!(usage("pods", done), pairs(&[("count/pods", "1")]));
    }

    #[test]
    fn services_and_claims_count_what_they_take() {
        let service =
            json!({"spec": {"type": "LoadBalancer", "ports": [{"port": 80}, {"port": 443}]}});
        assert_eq!(
            usage("services", service),
            pairs(&[
                ("count/services", "1"),
                ("services", "1"),
                ("services.loadbalancers", "1"),
                ("services.nodeports", "2"),
            ])
        );
        let claim = json!({"spec": {"resources": {"requests": {"storage": "1Gi"}}}});
        assert_eq!(
            usage("persistentvolumeclaims", claim),
            pairs(&[
                ("count/persistentvolumeclaims", "1"),
                ("persistentvolumeclaims", "1"),
                ("requests.storage", "1Gi"),
            ])
        );
        assert_eq!(
            usage("configmaps", json!({})),
            pairs(&[("configmaps", "1"), ("count/configmaps", "1")])
        );
    }

    #[test]
    fn scoped_quotas_take_in_only_the_pods_of_their_scopes() {
        let pods = find("", "v1", "pods").unwrap();
        let best_effort = json!({"spec": {"containers": [{}]}});
        let deadline = json!({"spec": {"activeDeadlineSeconds": 60,
            "containers": [{"resources": {"requests": {"cpu": "1"}}}]}});
        assert!(scopes_match(&["BestEffort"], pods, &best_effort));
        assert!(!scopes_match(&["BestEffort"], pods, &deadline));
        assert!(scopes_match(&["Terminating", "NotBestEffort"], pods, &deadline));
        assert!(scopes_match(&[], pods, &deadline));
        let configmaps = find("", "v1", "configmaps").unwrap();
        assert!(!scopes_match(&["NotTerminating"], configmaps, &json!({})));
        let scoped = json!({"spec": {"scopes": ["BestEffort"]}});
        assert_eq!(matched_scopes(&scoped), Some(vec!["BestEffort"]));
        assert_eq!(matched_scopes(&json!({"spec": {"scopes": ["PriorityClass"]}})), None);
    }
}
