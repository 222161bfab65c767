//! What an object counts against a ResourceQuota, as Kubernetes' quota evaluators count it,
//! and which objects a quota's scopes take in. Amounts are kept in thousandths of a unit
//! (millicores, thousandths of a byte) in 128 bits, so that sums are exact and do not wrap,
//! each with the format Kubernetes would write it back in.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{json, qos, quantity, ResourceType};

/// Amounts by resource name.
pub type Usage = BTreeMap<String, Amount>;

/// One of anything, in thousandths.
const ONE: i128 = 1000;

/// An amount of a resource, in thousandths of a unit, and the format of the quantities it
/// was added up from: a sum is written back in its first non-zero term's format, as
/// Kubernetes' `Quantity.Add` keeps it ("2G" of memory stays "2G", not "1953125Ki").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Amount {
    pub millis: i128,
    pub format: quantity::Format,
}

impl Amount {
    /// `n` whole things (objects, node ports).
    pub fn count(n: i128) -> Amount {
        Amount { millis: n.saturating_mul(ONE), format: quantity::Format::DecimalSi }
    }

    /// The amount a quantity's text states (none when it is not a quantity, [`HUGE`] past
    /// 128 bits).
    pub fn of(text: &str) -> Amount {
        Amount { millis: millis(text), format: quantity::format_of(text).unwrap_or_default() }
    }

    /// This and `other` together, in this one's format unless it is zero.
    pub fn plus(self, other: Amount) -> Amount {
        let format = if self.millis == 0 { other.format } else { self.format };
        Amount { millis: self.millis.saturating_add(other.millis), format }
    }

    /// This less `other`, in this one's format (`Quantity.Sub`).
    pub fn minus(self, other: Amount) -> Amount {
        Amount { millis: self.millis.saturating_sub(other.millis), format: self.format }
    }

    /// The larger of the two (this one when they are equal).
    fn max(self, other: Amount) -> Amount {
        if other.millis > self.millis {
            other
        } else {
            self
        }
    }

    /// The quantity's text, as Kubernetes writes it.
    pub fn text(self) -> String {
        quantity::written(self.millis, self.format)
    }
}

/// What an amount too large even for 128 bits counts as: more than any quota allows, and
/// still far from wrapping when added to.
const HUGE: i128 = i128::MAX / 1024;

/// The scopes a quota may name, each of which this server matches objects against.
pub const SCOPES: [&str; 6] = [
    "Terminating",
    "NotTerminating",
    "BestEffort",
    "NotBestEffort",
    "PriorityClass",
    "CrossNamespacePodAffinity",
];

/// One of the requirements a scoped quota puts on what it counts: each of its `scopes` (with
/// `Exists`), and each expression of its `scopeSelector`.
#[derive(Debug, PartialEq, Eq)]
pub struct ScopeRequirement<'a> {
    pub scope: &'a str,
    /// `In`, `NotIn`, `Exists` or `DoesNotExist`.
    pub operator: &'a str,
    pub values: Vec<&'a str>,
}

/// A quantity's amount in thousandths (0 when it is none; [`HUGE`] past 128 bits).
fn millis(text: &str) -> i128 {
    match quantity::milli_value_wide(text) {
        Ok(millis) => millis,
        Err(quantity::QuantityError::OutOfRange { .. }) if text.trim_start().starts_with('-') => {
            -HUGE
        }
        Err(quantity::QuantityError::OutOfRange { .. }) => HUGE,
        Err(_) => 0,
    }
}

/// Adds `amount` to `usage`'s `name`.
pub fn add(usage: &mut Usage, name: &str, amount: Amount) {
    let total = usage.entry(name.to_owned()).or_default();
    *total = total.plus(amount);
}

/// The resource amounts of a list (`requests`, `limits`, `hard`).
pub fn amounts(list: Option<&Value>) -> Usage {
    let list = list.and_then(Value::as_object).into_iter().flatten();
    list.map(|(name, q)| (name.clone(), q.as_str().map(Amount::of).unwrap_or_default())).collect()
}

/// What `object`, of `resource`, adds to the quotas of its namespace (nothing for an event):
/// its object count (`count/<resource>[.<group>]`) always; for pods not yet terminal, `pods` and their compute
/// resources' requests and limits; for services, the node ports and load balancers they take;
/// for claims, the storage they request.
pub fn usage_of(
    resource: &ResourceType,
    object: &Value,
    now: chrono::DateTime<chrono::Utc>,
) -> Usage {
    let mut usage = Usage::new();
    // Events are never counted (Kubernetes' quota registry ignores them).
    if resource.plural == "events" && matches!(resource.group, "" | "events.k8s.io") {
        return usage;
    }
    let count = if resource.group.is_empty() {
        format!("count/{}", resource.plural)
    } else {
        format!("count/{}.{}", resource.plural, resource.group)
    };
    usage.insert(count, Amount::count(1));
    if !resource.group.is_empty() {
        return usage;
    }
    match resource.kind {
        "Pod" if !is_terminal(object, now) => {
            usage.insert("pods".into(), Amount::count(1));
            let (requests, limits) = pod_requests_and_limits(object);
            for (name, amount) in requests {
                if matches!(name.as_str(), "cpu" | "memory" | "ephemeral-storage")
                    || name.starts_with("hugepages-")
                {
                    usage.insert(name.clone(), amount);
                    usage.insert(format!("requests.{name}"), amount);
                } else if is_extended(&name) {
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
            usage.insert("services".into(), Amount::count(1));
            let ports = json::at(object, "/spec/ports").and_then(Value::as_array);
            let ports = ports.map_or(0, |p| p.len() as i128);
            match json::at(object, "/spec/type").and_then(Value::as_str) {
                Some("NodePort") => {
                    usage.insert("services.nodeports".into(), Amount::count(ports));
                }
                Some("LoadBalancer") => {
                    // Declining node ports, only those asked for count (before they are
                    // allocated, as Kubernetes counts the intent).
                    let declined = json::at(object, "/spec/allocateLoadBalancerNodePorts")
                        == Some(&Value::Bool(false));
                    let counted = match declined {
                        true => json::at(object, "/spec/ports")
                            .and_then(Value::as_array)
                            .into_iter()
                            .flatten()
                            .filter(|p| p.get("nodePort").and_then(Value::as_i64).unwrap_or(0) != 0)
                            .count() as i128,
                        false => ports,
                    };
                    usage.insert("services.nodeports".into(), Amount::count(counted));
                    usage.insert("services.loadbalancers".into(), Amount::count(1));
                }
                _ => {}
            }
        }
        "PersistentVolumeClaim" => {
            usage.insert("persistentvolumeclaims".into(), Amount::count(1));
            // What it asks for, or what was allocated to it when more (a failed expansion
            // asked back down still holds what it was given).
            let storage =
                ["/spec/resources/requests/storage", "/status/allocatedResources/storage"]
                    .iter()
                    .filter_map(|at| json::at(object, at)?.as_str().map(whole_bytes))
                    .reduce(Amount::max);
            if let Some(storage) = storage {
                usage.insert("requests.storage".into(), storage);
            }
            // And the same per storage class, as `<class>.storageclass.storage.k8s.io/...`
            // (the deprecated annotation naming it first, as Kubernetes reads a claim's class).
            let class = super::storage_class(object);
            if !class.is_empty() {
                let per_class = format!("{class}.storageclass.storage.k8s.io/");
                usage.insert(format!("{per_class}persistentvolumeclaims"), Amount::count(1));
                if let Some(storage) = storage {
                    usage.insert(format!("{per_class}requests.storage"), storage);
                }
            }
        }
        "ConfigMap" | "Secret" | "ReplicationController" | "ResourceQuota" => {
            usage.insert(resource.plural.into(), Amount::count(1));
        }
        _ => {}
    }
    usage
}

/// A claim's storage, rounded up to a whole byte as Kubernetes counts it ("1.5" is 2).
fn whole_bytes(text: &str) -> Amount {
    let mut amount = Amount::of(text);
    let fraction = amount.millis.rem_euclid(ONE);
    if fraction != 0 {
        amount.millis = amount.millis.saturating_add(ONE - fraction);
    }
    amount
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
    let compute = ["cpu", "memory", "ephemeral-storage"];
    match resource.kind {
        "Pod" => {
            name == "pods"
                || compute.contains(&name)
                || name.starts_with("hugepages-")
                || name.strip_prefix("limits.").is_some_and(|r| compute.contains(&r))
                || name.strip_prefix("requests.").is_some_and(|r| {
                    compute.contains(&r) || r.starts_with("hugepages-") || is_extended(r)
                })
        }
        "Service" => matches!(name, "services" | "services.nodeports" | "services.loadbalancers"),
        "PersistentVolumeClaim" => {
            matches!(name, "persistentvolumeclaims" | "requests.storage")
                || name.ends_with(".storageclass.storage.k8s.io/requests.storage")
                || name.ends_with(".storageclass.storage.k8s.io/persistentvolumeclaims")
        }
        "ConfigMap" | "Secret" | "ReplicationController" | "ResourceQuota" => {
            name == resource.plural
        }
        _ => false,
    }
}

/// A resource a device plugin or an operator adds (`example.com/gpu`), outside kubernetes.io.
fn is_extended(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// A pod's requests and limits as Kubernetes totals them (`PodRequests`, `PodLimits`): its
/// containers' and sidecars' (restartable init containers') summed, an init container's
/// with the sidecars started before it taken instead when larger; the pod's overhead added
/// to every request, and to the limits the pod has.
pub fn pod_requests_and_limits(pod: &Value) -> (Usage, Usage) {
    let (mut requests, mut limits) = containers_requests_and_limits(pod);
    for (name, amount) in amounts(json::at(pod, "/spec/overhead")) {
        add(&mut requests, &name, amount);
        if let Some(limit) = limits.get_mut(&name) {
            *limit = limit.plus(amount);
        }
    }
    (requests, limits)
}

/// A pod's requests and limits as [`pod_requests_and_limits`] totals them, without its
/// overhead (what the LimitRanger's Pod items bound).
pub fn containers_requests_and_limits(pod: &Value) -> (Usage, Usage) {
    let list = |name: &str| json::at(pod, &format!("/spec/{name}")).and_then(Value::as_array);
    let total = |kind: &str| {
        let of = |c: &Value| amounts(c.get("resources").and_then(|r| r.get(kind)));
        let mut sum = Usage::new();
        for container in list("containers").into_iter().flatten() {
            of(container).into_iter().for_each(|(name, amount)| add(&mut sum, &name, amount));
        }
        let (mut sidecars, mut init) = (Usage::new(), Usage::new());
        for container in list("initContainers").into_iter().flatten() {
            let amounts = of(container);
            let running =
                if container.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
                    for (name, amount) in &amounts {
                        add(&mut sum, name, *amount);
                        add(&mut sidecars, name, *amount);
                    }
                    sidecars.clone()
                } else {
                    let mut running = amounts;
                    sidecars.iter().for_each(|(name, amount)| add(&mut running, name, *amount));
                    running
                };
            for (name, amount) in running {
                init.entry(name)
                    .and_modify(|largest| *largest = largest.max(amount))
                    .or_insert(amount);
            }
        }
        for (name, amount) in init {
            sum.entry(name).and_modify(|current| *current = current.max(amount)).or_insert(amount);
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
    let grace = chrono::Duration::try_seconds(grace.unwrap_or(0)).unwrap_or(chrono::Duration::MAX);
    deleted.is_some_and(|at| at.checked_add_signed(grace).is_some_and(|end| end < now))
}

/// Whether a quota with `requirements` (on [`SCOPES`] alone) takes in `object` of
/// `resource`, as Kubernetes' pod evaluator matches scopes: an unscoped quota takes in
/// everything; a scoped one only pods, by whether they have a deadline (Terminating), request
/// and limit nothing (BestEffort), name a priority class (PriorityClass, whose `In`, `NotIn`,
/// `Exists` and `DoesNotExist` select by its name) or have a pod affinity term naming other
/// namespaces (CrossNamespacePodAffinity).
pub fn scopes_match(
    requirements: &[ScopeRequirement<'_>],
    resource: &ResourceType,
    object: &Value,
) -> bool {
    if requirements.is_empty() {
        return true;
    }
    if !resource.group.is_empty() || resource.kind != "Pod" {
        return false;
    }
    let spec = object.get("spec");
    let terminating = json::at(object, "/spec/activeDeadlineSeconds")
        .and_then(Value::as_i64)
        .is_some_and(|s| s >= 0);
    let best_effort = spec.is_none_or(|spec| qos::qos_class(spec) == "BestEffort");
    let priority_class = json::at(object, "/spec/priorityClassName")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty());
    requirements.iter().all(|requirement| match requirement.scope {
        "Terminating" => terminating,
        "NotTerminating" => !terminating,
        "BestEffort" => best_effort,
        "NotBestEffort" => !best_effort,
        "PriorityClass" => {
            let listed = priority_class.is_some_and(|name| requirement.values.contains(&name));
            match requirement.operator {
                "In" => listed,
                "NotIn" => !listed,
                "DoesNotExist" => priority_class.is_none(),
                _ => priority_class.is_some(),
            }
        }
        "CrossNamespacePodAffinity" => spec.is_some_and(has_cross_namespace_affinity),
        _ => false,
    })
}

/// Whether a pod's affinity or anti-affinity has a term (required or preferred) that names
/// namespaces or a namespace selector.
fn has_cross_namespace_affinity(spec: &Value) -> bool {
    let crosses = |term: &Value| {
        term.get("namespaceSelector").is_some_and(|s| !s.is_null())
            || term.get("namespaces").and_then(Value::as_array).is_some_and(|n| !n.is_empty())
    };
    ["podAffinity", "podAntiAffinity"].iter().any(|kind| {
        let Some(affinity) = spec.get("affinity").and_then(|a| a.get(kind)) else {
            return false;
        };
        let terms = |key: &str| affinity.get(key).and_then(Value::as_array).into_iter().flatten();
        terms("requiredDuringSchedulingIgnoredDuringExecution").any(crosses)
            || terms("preferredDuringSchedulingIgnoredDuringExecution")
                .any(|weighted| weighted.get("podAffinityTerm").is_some_and(crosses))
    })
}

/// A quota's scope requirements (its scopes, then its scope selector's expressions), or
/// `None` when one names a scope this server does not match, so that it is left alone.
pub fn scope_requirements(quota: &Value) -> Option<Vec<ScopeRequirement<'_>>> {
    let scopes = json::at(quota, "/spec/scopes").and_then(Value::as_array);
    let mut requirements: Vec<ScopeRequirement> = (scopes.into_iter().flatten())
        .filter_map(Value::as_str)
        .map(|scope| ScopeRequirement { scope, operator: "Exists", values: Vec::new() })
        .collect();
    let expressions = json::at(quota, "/spec/scopeSelector/matchExpressions");
    for expression in expressions.and_then(Value::as_array).into_iter().flatten() {
        let text = |key: &str| expression.get(key).and_then(Value::as_str).unwrap_or("");
        let values = expression.get("values").and_then(Value::as_array).into_iter().flatten();
        requirements.push(ScopeRequirement {
            scope: text("scopeName"),
            operator: text("operator"),
            values: values.filter_map(Value::as_str).collect(),
        });
    }
    requirements.iter().all(|r| SCOPES.contains(&r.scope)).then_some(requirements)
}

/// Amounts as Kubernetes prints them in messages: `name=amount`, by name, comma-separated.
pub fn pretty(usage: &Usage) -> String {
    let amounts = usage.iter().map(|(name, amount)| format!("{name}={}", amount.text()));
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
        usage.iter().map(|(k, v)| (k.clone(), v.text())).collect()
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
    fn pod_totals_add_sidecars_and_overhead_as_kubernetes_does() {
        let pod = json!({"spec": {
            "containers": [{"resources": {"requests": {"cpu": "100m"}}}],
            "initContainers": [
                {"restartPolicy": "Always", "resources": {"requests": {"cpu": "200m"},
                    "limits": {"memory": "1Gi"}}},
                {"resources": {"requests": {"cpu": "250m"}}}],
            "overhead": {"cpu": "10m", "memory": "64Mi"}}});
        let (requests, limits) = pod_requests_and_limits(&pod);
        // The sidecar runs beside the containers (300m), and beside the later init
        // container (450m, the larger); overhead on every request, on limits the pod has.
        let text = |amount: Option<&Amount>| amount.map(|a| a.text());
        assert_eq!(text(requests.get("cpu")), Some("460m".into()));
        assert_eq!(text(requests.get("memory")), Some("64Mi".into()));
        assert_eq!(text(limits.get("memory")), Some("1088Mi".into()));
        assert_eq!(limits.get("cpu"), None);
    }

    #[test]
    fn sums_keep_the_format_of_their_first_term() {
        let pod = json!({"spec": {"containers": [
            {"resources": {"requests": {"memory": "2G"}, "limits": {"memory": "0"}}},
            {"resources": {"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}}}]}});
        let (requests, limits) = pod_requests_and_limits(&pod);
        // Decimal, as the first; binary, as the first that is not zero (not a whole KiB:
        // written in bytes).
        assert_eq!(requests["memory"].text(), "3073741824");
        assert_eq!(limits["memory"].text(), "1Gi");
        let one = json!({"spec": {"containers": [{"resources": {"requests": {"memory": "2G"}}}]}});
        assert_eq!(usage("pods", one)[1], ("memory".into(), "2G".into()));
    }

    #[test]
    fn claims_count_whole_bytes() {
        let mut claim = json!({"spec": {"resources": {"requests": {"storage": "1.5"}}}});
        assert_eq!(
            usage("persistentvolumeclaims", claim.clone())[2],
            ("requests.storage".into(), "2".into())
        );
        claim["status"] = json!({"allocatedResources": {"storage": "1Gi"}});
        assert_eq!(
            usage("persistentvolumeclaims", claim.clone())[2],
            ("requests.storage".into(), "1Gi".into())
        );
        claim["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert_eq!(
            usage("persistentvolumeclaims", claim)[2],
            ("requests.storage".into(), "2Gi".into())
        );
    }

    #[test]
    fn amounts_past_64_bits_do_not_wrap() {
        let huge = json!({"spec": {"containers": [
            {"resources": {"requests": {"memory": "5Pi"}}},
            {"resources": {"requests": {"memory": "5Pi"}}}]}});
        let (requests, _) = pod_requests_and_limits(&huge);
        assert_eq!(requests["memory"].text(), "10Pi");
        assert!(millis("10E") > millis("8Ei") && millis("1e30") > millis("10E"));
        let claim = json!({"spec": {"storageClassName": "gold",
            "resources": {"requests": {"storage": "20Pi"}}}});
        let claims = find("", "v1", "persistentvolumeclaims").unwrap();
        let usage = usage_of(claims, &claim, chrono::Utc::now());
        assert_eq!(usage["requests.storage"].text(), "20Pi");
        assert_eq!(usage["gold.storageclass.storage.k8s.io/persistentvolumeclaims"].text(), "1");
        assert!(counts(claims, "gold.storageclass.storage.k8s.io/requests.storage"));
        let pods = find("", "v1", "pods").unwrap();
        assert!(counts(pods, "requests.example.com/gpu") && !counts(pods, "requests.storage"));
        assert!(!counts(pods, "requests.kubernetes.io/batteries"));
    }

    #[test]
    fn the_annotated_class_counts_and_events_never_do() {
        let claims = find("", "v1", "persistentvolumeclaims").unwrap();
        let claim = json!({"metadata": {"annotations": {"volume.beta.kubernetes.io/storage-class": "gold"}},
            "spec": {"storageClassName": "silver", "resources": {"requests": {"storage": "1Gi"}}}});
        let usage = usage_of(claims, &claim, chrono::Utc::now());
        assert!(usage.contains_key("gold.storageclass.storage.k8s.io/requests.storage"));
        assert!(!usage.keys().any(|k| k.starts_with("silver.")));
        for (group, version) in [("", "v1"), ("events.k8s.io", "v1")] {
            let events = find(group, version, "events").unwrap();
            assert!(usage_of(events, &json!({}), chrono::Utc::now()).is_empty());
        }
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
        let declining = json!({"spec": {"type": "LoadBalancer",
            "allocateLoadBalancerNodePorts": false,
            "ports": [{"port": 80}, {"port": 443, "nodePort": 30443}]}});
        let counted = usage("services", declining);
        assert!(counted.contains(&("services.nodeports".into(), "1".into())), "{counted:?}");
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
        let matches = |quota: Value, pod: &Value| {
            let requirements = scope_requirements(&quota).expect("matched scopes");
            scopes_match(&requirements, pods, pod)
        };
        let scoped = |scopes: &[&str]| json!({"spec": {"scopes": scopes}});
        let best_effort = json!({"spec": {"containers": [{}]}});
        let deadline = json!({"spec": {"activeDeadlineSeconds": 60,
            "containers": [{"resources": {"requests": {"cpu": "1"}}}]}});
        assert!(matches(scoped(&["BestEffort"]), &best_effort));
        assert!(!matches(scoped(&["BestEffort"]), &deadline));
        assert!(matches(scoped(&["Terminating", "NotBestEffort"]), &deadline));
        assert!(matches(scoped(&[]), &deadline));
        let configmaps = find("", "v1", "configmaps").unwrap();
        let not_terminating = scoped(&["NotTerminating"]);
        let not_terminating = scope_requirements(&not_terminating).unwrap();
        assert!(!scopes_match(&not_terminating, configmaps, &json!({})));
        assert_eq!(
            scope_requirements(&json!({"spec": {"scopes": ["VolumeAttributesClass"]}})),
            None
        );

        // Priority classes, by the scope selector's operators.
        let selected = |operator: &str, values: &[&str]| {
            json!({"spec": {"scopeSelector": {"matchExpressions": [
                {"scopeName": "PriorityClass", "operator": operator, "values": values}]}}})
        };
        let high = json!({"spec": {"priorityClassName": "high", "containers": [{}]}});
        let (low, none) = (json!({"spec": {"priorityClassName": "low"}}), best_effort.clone());
        assert!(matches(selected("In", &["high", "mid"]), &high));
        assert!(
            !matches(selected("In", &["high"]), &low) && !matches(selected("In", &["high"]), &none)
        );
        assert!(!matches(selected("NotIn", &["high"]), &high));
        assert!(
            matches(selected("NotIn", &["high"]), &low)
                && matches(selected("NotIn", &["high"]), &none)
        );
        assert!(matches(selected("Exists", &[]), &low) && !matches(selected("Exists", &[]), &none));
        assert!(
            matches(selected("DoesNotExist", &[]), &none)
                && !matches(selected("DoesNotExist", &[]), &high)
        );
        assert!(
            matches(scoped(&["PriorityClass"]), &high)
                && !matches(scoped(&["PriorityClass"]), &none)
        );
        // Scopes and expressions together: all must hold.
        let both = json!({"spec": {"scopes": ["BestEffort"], "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}});
        assert!(matches(both.clone(), &high) && !matches(both, &low));

        // Pod affinity terms that name other namespaces.
        let affine = |term: Value| {
            json!({"spec": {"affinity": {"podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": term}]}}}})
        };
        let crossing = scoped(&["CrossNamespacePodAffinity"]);
        assert!(matches(
            crossing.clone(),
            &affine(json!({"topologyKey": "k", "namespaces": ["other"]}))
        ));
        assert!(matches(
            crossing.clone(),
            &affine(json!({"topologyKey": "k", "namespaceSelector": {}}))
        ));
        assert!(!matches(crossing.clone(), &affine(json!({"topologyKey": "k"}))));
        assert!(!matches(crossing, &none));
    }
}
