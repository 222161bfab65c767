//! Resource names and amounts, as Kubernetes checks them: a container's requests and limits,
//! a ResourceQuota's hard amounts and scopes, a LimitRange's items.

use std::borrow::Cow;
use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::{go_quote, go_strings, label_key_errors, FieldError};
use crate::model::quantity;
use crate::model::quota::SCOPES as QUOTA_SCOPES;

/// Resource names without a domain that Kubernetes knows (`IsStandardResourceName`) and
/// that are amounts; the counts are `INTEGER`.
const STANDARD_AMOUNTS: [&str; 11] = [
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "storage",
    "requests.storage",
];

/// The ones a container may ask for (besides huge pages).
const STANDARD_CONTAINER: [&str; 3] = ["cpu", "memory", "ephemeral-storage"];

/// The standard resource names counted in whole units.
const INTEGER: [&str; 9] = [
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
];

fn is_standard(name: &str) -> bool {
    STANDARD_AMOUNTS.contains(&name)
        || INTEGER.contains(&name)
        || is_huge_pages(name)
        || name.starts_with("requests.hugepages-")
}

fn is_huge_pages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

/// Kubernetes' own resources: no domain, or one under kubernetes.io.
fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// A resource a device plugin or an operator adds (`example.com/gpu`).
fn is_extended(name: &str) -> bool {
    !is_native(name)
        && !name.starts_with("requests.")
        && label_key_errors(&format!("requests.{name}")).is_empty()
}

/// Whether a container's request of `name` may be below its limit.
fn overcommit_allowed(name: &str) -> bool {
    is_native(name) && !is_huge_pages(name)
}

/// Problems with `name` as any resource's name (`validateResourceName`).
fn resource_name(name: &str, field: &dyn Fn() -> String, errors: &mut Vec<FieldError>) -> bool {
    let problems = label_key_errors(name);
    let valid = problems.is_empty();
    for problem in problems {
        errors.push(FieldError::invalid(field(), name, problem));
    }
    if valid && !name.contains('/') && !is_standard(name) {
        let message = "must be a standard resource type or fully qualified";
        errors.push(FieldError::invalid(field(), name, message));
    }
    valid
}

/// Problems with `name` as a container's resource.
fn container_resource_name(name: &str, field: &dyn Fn() -> String, errors: &mut Vec<FieldError>) {
    resource_name(name, field, errors);
    if !name.contains('/') {
        if !STANDARD_CONTAINER.contains(&name) && !is_huge_pages(name) {
            let message = "must be a standard resource for containers";
            errors.push(FieldError::invalid(field(), name, message));
        }
    } else if !is_native(name) && !is_extended(name) {
        let message = "doesn't follow extended resource name standard";
        errors.push(FieldError::invalid(field(), name, message));
    }
}

/// The text of an amount: a quantity is a string once decoded, and a number's text before.
fn text(amount: &Value) -> Cow<'_, str> {
    match amount {
        Value::String(text) => Cow::Borrowed(text),
        other => Cow::Owned(other.to_string()),
    }
}

/// An amount of `resource` is not negative, and whole for resources counted in units.
/// (A write that the HTTP edge decoded has only quantities here; one from within may not.)
fn amount(resource: &str, amount: &str, field: &dyn Fn() -> String, errors: &mut Vec<FieldError>) {
    match quantity::compare(amount, "0") {
        None => {
            let message = "quantities must match the regular expression \
                           '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
            return errors.push(FieldError::invalid(field(), amount, message));
        }
        Some(Ordering::Less) => {
            errors.push(FieldError::invalid(field(), amount, "must be greater than or equal to 0"))
        }
        _ => {}
    }
    let integer = INTEGER.contains(&resource) || is_extended(resource);
    if integer && quantity::milli_value(amount).is_ok_and(|m| m % 1000 != 0) {
        errors.push(FieldError::invalid(field(), amount, "must be an integer"));
    }
}

/// A container's `resources` (at `at(".resources")`): names a container may ask for,
/// amounts, and each request within its limit (equal to it for resources that may not be
/// overcommitted, which need a limit).
pub(super) fn validate_container_resources(
    resources: Option<&Value>,
    at: &dyn Fn(&str) -> String,
    errors: &mut Vec<FieldError>,
) {
    let list = |kind: &str| resources.and_then(|r| r.get(kind)).and_then(Value::as_object);
    let (limits, requests) = (list("limits"), list("requests"));
    for (kind, list) in [("limits", limits), ("requests", requests)] {
        for (resource, value) in list.into_iter().flatten() {
            let field = || at(&format!(".resources.{kind}[{resource}]"));
            container_resource_name(resource, &field, errors);
            amount(resource, &text(value), &field, errors);
        }
    }
    for (resource, request) in requests.into_iter().flatten() {
        let request = text(request);
        match limits.and_then(|l| l.get(resource)).map(text) {
            Some(limit) => {
                let order = quantity::compare(&request, &limit);
                let message = if !overcommit_allowed(resource) && order != Some(Ordering::Equal) {
                    format!("must be equal to {resource} limit of {limit}")
                } else if order == Some(Ordering::Greater) {
                    format!("must be less than or equal to {resource} limit of {limit}")
                } else {
                    continue;
                };
                errors.push(FieldError::invalid(at(".resources.requests"), &request, message));
            }
            None if !overcommit_allowed(resource) => errors.push(FieldError::required_because(
                at(".resources.limits"),
                "Limit must be set for non overcommitable resources",
            )),
            None => {}
        }
    }
    let names = || limits.into_iter().chain(requests).flat_map(|list| list.keys());
    if names().any(|name| name.starts_with("hugepages-"))
        && !names().any(|name| name == "cpu" || name == "memory")
    {
        errors.push(FieldError::forbidden(at(".resources"), "HugePages require cpu or memory"));
    }
}

/// A ResourceQuota: names quotas know and their amounts (in `spec.hard` and in the status),
/// and known scopes.
pub(super) fn validate_quota(quota: &Value, errors: &mut Vec<FieldError>) {
    for path in ["spec.hard", "status.hard", "status.used"] {
        let (part, list) = path.split_once('.').unwrap_or_default();
        let amounts = quota.get(part).and_then(|p| p.get(list)).and_then(Value::as_object);
        for (resource, value) in amounts.into_iter().flatten() {
            let field = || format!("{path}[{resource}]");
            resource_name(resource, &field, errors);
            if !resource.contains('/') && !is_quota_resource(resource) {
                let message = "must be a standard resource for quota";
                errors.push(FieldError::invalid(field(), resource, message));
            }
            amount(resource, &text(value), &field, errors);
        }
    }
    validate_scopes(quota, errors);
    validate_scope_selector(quota, errors);
}

/// The standard resources a quota limits, sorted.
fn limited_resources(quota: &Value) -> Vec<&str> {
    let hard = quota.pointer("/spec/hard").and_then(Value::as_object);
    let mut limited: Vec<&str> = hard.into_iter().flatten().map(|(k, _)| k.as_str()).collect();
    limited.sort_unstable();
    limited.retain(|r| !r.contains('/') && is_quota_resource(r));
    limited
}

/// Whether a quota scoped by `scope` may limit `resource`: a scoped quota limits pods (their
/// number and compute), a BestEffort one only their number.
fn scope_fits(scope: &str, resource: &str) -> bool {
    const POD_COMPUTE: [&str; 6] =
        ["cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"];
    match scope {
        "BestEffort" => resource == "pods",
        scope if QUOTA_SCOPES.contains(&scope) => {
            resource == "pods" || POD_COMPUTE.contains(&resource)
        }
        _ => true,
    }
}

/// A quota's scope selector, as Kubernetes checks its expressions: known scopes, each valid
/// for what the quota limits; the pod scopes only with `Exists`; values exactly for `In` and
/// `NotIn`; not both of a pair that excludes itself. Invalid values are printed as Go prints
/// them (`%#v`).
fn validate_scope_selector(quota: &Value, errors: &mut Vec<FieldError>) {
    let Some(expressions) = quota.pointer("/spec/scopeSelector/matchExpressions") else {
        return;
    };
    let expressions = expressions.as_array().map_or(&[][..], Vec::as_slice);
    const FIELD: &str = "spec.scopeSelector.matchExpressions";
    let member = |e: &Value, key: &str| e.get(key).map(text).unwrap_or_default().into_owned();
    let values = |e: &Value| -> Vec<String> {
        let values = e.get("values").and_then(Value::as_array).into_iter().flatten();
        values.map(|v| text(v).into_owned()).collect()
    };
    let selector = {
        let requirements: Vec<String> = (expressions.iter())
            .map(|e| {
                let values = values(e);
                let values =
                    if values.is_empty() { "[]string(nil)".to_string() } else { go_strings(&values) };
                format!(
                    "core.ScopedResourceSelectorRequirement{{ScopeName:{:?}, Operator:{:?}, Values:{values}}}",
                    member(e, "scopeName"),
                    member(e, "operator")
                )
            })
            .collect();
        format!(
            "core.ScopeSelector{{MatchExpressions:[]core.ScopedResourceSelectorRequirement{{{}}}}}",
            requirements.join(", ")
        )
    };
    let limited = limited_resources(quota);
    let mut scopes = Vec::new();
    for expression in expressions {
        let (scope, operator) = (member(expression, "scopeName"), member(expression, "operator"));
        if !QUOTA_SCOPES.contains(&scope.as_str()) {
            let field = format!("{FIELD}.scopeName");
            errors.push(FieldError::invalid(field, &scope, "unsupported scope"));
        }
        for _ in limited.iter().filter(|resource| !scope_fits(&scope, resource)) {
            let message = "unsupported scope applied to resource";
            errors.push(FieldError::invalid_printed(FIELD, &selector, message));
        }
        let pod_scopes = [
            "BestEffort",
            "NotBestEffort",
            "Terminating",
            "NotTerminating",
            "CrossNamespacePodAffinity",
        ];
        if pod_scopes.contains(&scope.as_str()) && operator != "Exists" {
            let message = "must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, \
                ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, \
                ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity";
            errors.push(FieldError::invalid(format!("{FIELD}.operator"), &operator, message));
        }
        let values = values(expression);
        match operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                let detail = "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector";
                errors.push(FieldError::required_because(format!("{FIELD}.values"), detail));
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                let detail = "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector";
                errors.push(FieldError::invalid_printed(
                    format!("{FIELD}.values"),
                    &go_strings(&values),
                    detail,
                ));
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            _ => {
                let field = format!("{FIELD}.operator");
                errors.push(FieldError::invalid(field, &operator, "not a valid selector operator"));
            }
        }
        scopes.push(scope);
    }
    let has = |scope: &str| scopes.iter().any(|s| s == scope);
    for (one, other) in [("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating")] {
        if has(one) && has(other) {
            // Kubernetes shows the quota's `scopes` here, not the selector.
            let listed = quota.pointer("/spec/scopes").and_then(Value::as_array);
            let listed: Vec<String> =
                (listed.into_iter().flatten()).map(|s| format!("{:?}", text(s))).collect();
            let shown = if listed.is_empty() {
                "[]core.ResourceQuotaScope(nil)".to_string()
            } else {
                format!("[]core.ResourceQuotaScope{{{}}}", listed.join(", "))
            };
            errors.push(FieldError::invalid_printed(FIELD, &shown, "conflicting scopes"));
        }
    }
}

/// A quota's scopes: known ones, each valid for every standard resource the quota limits (a
/// scoped quota limits pods, and a BestEffort one only their number), and not both of a pair
/// that excludes itself. The errors show the whole list, as Go prints it.
fn validate_scopes(quota: &Value, errors: &mut Vec<FieldError>) {
    let scopes = quota.pointer("/spec/scopes").and_then(Value::as_array);
    let scopes: Vec<Cow<'_, str>> = scopes.into_iter().flatten().map(text).collect();
    if scopes.is_empty() {
        return;
    }
    let shown = go_scopes(quota);
    let mut invalid = |message: &str| {
        errors.push(FieldError::invalid_number("spec.scopes", &shown, message));
    };
    let limited = limited_resources(quota);
    for scope in &scopes {
        if !QUOTA_SCOPES.contains(&scope.as_ref()) {
            invalid("unsupported scope");
        }
        for _ in limited.iter().filter(|resource| !scope_fits(scope, resource)) {
            invalid("unsupported scope applied to resource");
        }
    }
    let has = |scope: &str| scopes.iter().any(|s| s == scope);
    for (one, other) in [("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating")] {
        if has(one) && has(other) {
            invalid("conflicting scopes");
        }
    }
}

/// A quota's scopes as Go prints Kubernetes' internal type (`%#v`).
fn go_scopes(quota: &Value) -> String {
    match quota.pointer("/spec/scopes").and_then(Value::as_array) {
        None => "[]core.ResourceQuotaScope(nil)".into(),
        Some(scopes) => {
            let quoted: Vec<String> = scopes.iter().map(|s| go_quote(&text(s))).collect();
            format!("[]core.ResourceQuotaScope{{{}}}", quoted.join(", "))
        }
    }
}

/// What an update may not change of a quota: the set of its scopes.
pub(super) fn validate_quota_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let scopes = |quota: &Value| -> std::collections::BTreeSet<String> {
        let scopes = quota.pointer("/spec/scopes").and_then(Value::as_array);
        scopes.into_iter().flatten().map(|s| text(s).into_owned()).collect()
    };
    if scopes(old) == scopes(new) {
        return Vec::new();
    }
    vec![FieldError::invalid_number("spec.scopes", go_scopes(new), "field is immutable")]
}

/// The names without a domain that a quota may count: not `storage` itself, and huge pages
/// as requests too.
fn is_quota_resource(name: &str) -> bool {
    is_standard(name) && name != "storage"
}

/// A LimitRange's items: a known type, once each; resource names for the type; default and
/// defaultRequest only for containers (and claims); and the amounts in order: min <= default
/// request <= default <= max, a ratio of at least 1 and at most max/min.
pub(super) fn validate_limit_range(limit_range: &Value, errors: &mut Vec<FieldError>) {
    let items = limit_range.pointer("/spec/limits").and_then(Value::as_array);
    let mut types = Vec::new();
    for (i, item) in items.into_iter().flatten().enumerate() {
        let at = |rest: &str| format!("spec.limits[{i}]{rest}");
        let kind = item.get("type").and_then(Value::as_str).unwrap_or("");
        limit_type(kind, &|| at(".type"), errors);
        if types.contains(&kind) {
            errors.push(FieldError::duplicate(at(".type"), kind));
        }
        types.push(kind);
        let part = |name: &str| item.get(name).and_then(Value::as_object);
        let empty = Map::new();
        let mut parts = ["max", "min", "default", "defaultRequest", "maxLimitRequestRatio"]
            .map(|name| (name, part(name).unwrap_or(&empty)));
        if kind == "Pod" {
            for (name, amounts) in &mut parts[2..4] {
                if !amounts.is_empty() {
                    let message = "may not be specified when `type` is 'Pod'";
                    errors.push(FieldError::forbidden(at(&format!(".{name}")), message));
                    *amounts = &empty;
                }
            }
        }
        for (name, amounts) in parts {
            for resource in amounts.keys() {
                let field = || at(&format!(".{name}[{resource}]"));
                match kind {
                    "Pod" | "Container" => container_resource_name(resource, &field, errors),
                    _ => {
                        resource_name(resource, &field, errors);
                    }
                }
            }
        }
        let [max, min, default, default_request, ratio] = parts.map(|(_, amounts)| amounts);
        if kind == "PersistentVolumeClaim"
            && !min.contains_key("storage")
            && !max.contains_key("storage")
        {
            errors.push(FieldError::required_because(
                at(".limits"),
                "either minimum or maximum storage value is required, but neither was provided",
            ));
        }
        let mut resources: Vec<&String> =
            [max, min, default, default_request, ratio].iter().flat_map(|m| m.keys()).collect();
        resources.sort();
        resources.dedup();
        for resource in resources {
            let field = |part: &str| at(&format!(".{part}[{resource}]"));
            let amounts =
                [max, min, default, default_request, ratio].map(|a| a.get(resource).map(text));
            let [max, min, default, request, ratio] = amounts.each_ref().map(|a| a.as_deref());
            let greater = |a: Option<&str>, b: Option<&str>| match (a, b) {
                (Some(a), Some(b)) => quantity::compare(a, b) == Some(Ordering::Greater),
                _ => false,
            };
            let mut check = |holds: bool, part: &str, value: Option<&str>, message: String| {
                if holds {
                    errors.push(FieldError::invalid(field(part), value.unwrap_or(""), message));
                }
            };
            let (mx, mn, d, r) = (
                max.unwrap_or(""),
                min.unwrap_or(""),
                default.unwrap_or(""),
                request.unwrap_or(""),
            );
            check(
                greater(min, max),
                "min",
                min,
                format!("min value {mn} is greater than max value {mx}"),
            );
            check(
                greater(min, request),
                "defaultRequest",
                request,
                format!("min value {mn} is greater than default request value {r}"),
            );
            check(
                greater(request, max),
                "defaultRequest",
                request,
                format!("default request value {r} is greater than max value {mx}"),
            );
            check(
                greater(request, default),
                "defaultRequest",
                request,
                format!("default request value {r} is greater than default limit value {d}"),
            );
            check(
                greater(min, default),
                "default",
                min,
                format!("min value {mn} is greater than default value {d}"),
            );
            check(
                greater(default, max),
                "default",
                max,
                format!("default value {d} is greater than max value {mx}"),
            );
            if let Some(ratio) = ratio {
                let below_one = quantity::compare(ratio, "1") == Some(Ordering::Less);
                check(
                    below_one,
                    "maxLimitRequestRatio",
                    Some(ratio),
                    format!("ratio {ratio} is less than 1"),
                );
                if let (Some(max), Some(min)) = (max, min) {
                    let as_milli = |q: &str| quantity::milli_value(q).ok().map(|m| m as f64);
                    if let (Some(r), Some(mx), Some(mn)) =
                        (as_milli(ratio), as_milli(max), as_milli(min))
                    {
                        let limit = mx / mn;
                        check(
                            r / 1000.0 > limit,
                            "maxLimitRequestRatio",
                            Some(ratio),
                            format!("ratio {ratio} is greater than max/min = {limit:.6}"),
                        );
                    }
                }
            }
            let unequal = default.is_some()
                && request.is_some()
                && quantity::compare(d, r) != Some(Ordering::Equal);
            check(
                !overcommit_allowed(resource) && unequal,
                "defaultRequest",
                request,
                format!("default value {d} must equal to defaultRequest value {r} in {resource}"),
            );
        }
    }
}

/// A LimitRange item's type: Pod, Container, PersistentVolumeClaim, or a qualified name.
fn limit_type(kind: &str, field: &dyn Fn() -> String, errors: &mut Vec<FieldError>) {
    let problems = label_key_errors(kind);
    let valid = problems.is_empty();
    for problem in problems {
        errors.push(FieldError::invalid(field(), kind, problem));
    }
    let standard = ["Pod", "Container", "PersistentVolumeClaim"];
    if valid && !kind.contains('/') && !standard.contains(&kind) {
        let message = "must be a standard limit type or fully qualified";
        errors.push(FieldError::invalid(field(), kind, message));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::messages;
    use super::*;

    #[test]
    fn container_resources_are_known_names_in_order() {
        let at = |rest: &str| format!("spec.containers[0]{rest}");
        let mut errors = Vec::new();
        let resources = json!({
            "limits": {"cpu": "1", "example.com/gpu": "2", "hugepages-2Mi": "2Mi"},
            "requests": {"cpu": "2", "memory": "-1", "example.com/gpu": "1", "gpu": "1",
                "hugepages-2Mi": "2Mi", "example.com/fpga": "1"}});
        validate_container_resources(Some(&resources), &at, &mut errors);
        assert_eq!(
            messages(&errors),
            [
                "spec.containers[0].resources.requests[gpu]: Invalid value: \"gpu\": must be a standard resource type or fully qualified",
                "spec.containers[0].resources.requests[gpu]: Invalid value: \"gpu\": must be a standard resource for containers",
                "spec.containers[0].resources.requests[memory]: Invalid value: \"-1\": must be greater than or equal to 0",
                "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1",
                "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources",
                "spec.containers[0].resources.requests: Invalid value: \"1\": must be equal to example.com/gpu limit of 2",
            ]
        );
        let whole = json!({"limits": {"example.com/gpu": "500m"}});
        let mut errors = Vec::new();
        validate_container_resources(Some(&whole), &at, &mut errors);
        assert_eq!(errors[0].message, "Invalid value: \"500m\": must be an integer");
    }

    #[test]
    fn quotas_count_what_quotas_know() {
        const APPLIED: &str = "spec.scopes: Invalid value: []core.ResourceQuotaScope{\"BestEffort\", \"Sometimes\"}: unsupported scope applied to resource";
        let quota = json!({"spec": {"hard": {"pods": "10", "requests.cpu": "1", "count/pods": "2",
            "requests.hugepages-2Mi": "1Gi",
            "storage": "1Gi", "widgets": "1", "services": "1500m", "memory": "-1"},
            "scopes": ["BestEffort", "Sometimes"]}});
        let mut errors = Vec::new();
        validate_quota(&quota, &mut errors);
        assert_eq!(
            messages(&errors),
            [
                "spec.hard[memory]: Invalid value: \"-1\": must be greater than or equal to 0",
                "spec.hard[services]: Invalid value: \"1500m\": must be an integer",
                "spec.hard[storage]: Invalid value: \"storage\": must be a standard resource for quota",
                "spec.hard[widgets]: Invalid value: \"widgets\": must be a standard resource type or fully qualified",
                "spec.hard[widgets]: Invalid value: \"widgets\": must be a standard resource for quota",
                // BestEffort limits only the number of pods: once for each other resource
                // the quota limits (memory, requests.cpu, requests.hugepages-2Mi, services).
                APPLIED,
                APPLIED,
                APPLIED,
                APPLIED,
                "spec.scopes: Invalid value: []core.ResourceQuotaScope{\"BestEffort\", \"Sometimes\"}: unsupported scope",
            ]
        );
        let mut errors = Vec::new();
        let conflicting = json!({"spec": {"hard": {"pods": "1"},
            "scopes": ["Terminating", "NotTerminating"]}});
        validate_quota(&conflicting, &mut errors);
        assert_eq!(
            messages(&errors),
            ["spec.scopes: Invalid value: []core.ResourceQuotaScope{\"Terminating\", \"NotTerminating\"}: conflicting scopes"]
        );
        // A malformed name is not a quota's resource either.
        let mut errors = Vec::new();
        validate_quota(&json!({"spec": {"hard": {"a b": "1"}}}), &mut errors);
        assert_eq!(errors.len(), 2);
        assert!(errors[1].message.ends_with("must be a standard resource for quota"));
    }

    #[test]
    fn a_quotas_scopes_do_not_change() {
        let scoped = |scopes: Value| json!({"spec": {"hard": {"pods": "1"}, "scopes": scopes}});
        let old = scoped(json!(["BestEffort", "Terminating"]));
        assert!(
            validate_quota_update(&old, &scoped(json!(["Terminating", "BestEffort"]))).is_empty()
        );
        assert_eq!(
            messages(&validate_quota_update(&old, &scoped(json!(["NotBestEffort"])))),
            ["spec.scopes: Invalid value: []core.ResourceQuotaScope{\"NotBestEffort\"}: field is immutable"]
        );
        let unscoped = json!({"spec": {"hard": {"pods": "1"}}});
        assert_eq!(
            messages(&validate_quota_update(&old, &unscoped)),
            ["spec.scopes: Invalid value: []core.ResourceQuotaScope(nil): field is immutable"]
        );
    }

    #[test]
    fn scope_selectors_are_checked_as_kubernetes_checks_them() {
        let selected = |hard: Value, expressions: Value| {
            let quota =
                json!({"spec": {"hard": hard, "scopeSelector": {"matchExpressions": expressions}}});
            let mut errors = Vec::new();
            validate_quota(&quota, &mut errors);
            messages(&errors)
        };
        let good = json!([{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]},
            {"scopeName": "NotBestEffort", "operator": "Exists"}]);
        assert!(selected(json!({"pods": "1", "requests.cpu": "1"}), good).is_empty());
        let bad = json!([{"scopeName": "PriorityClass", "operator": "In", "values": []},
            {"scopeName": "Terminating", "operator": "In", "values": ["x"]},
            {"scopeName": "Sometimes", "operator": "Exists"},
            {"scopeName": "PriorityClass", "operator": "Near"},
            {"scopeName": "NotTerminating", "operator": "Exists", "values": ["y"]}]);
        assert_eq!(
            selected(json!({"pods": "1"}), bad),
            [
                "spec.scopeSelector.matchExpressions.values: Required value: must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
                "spec.scopeSelector.matchExpressions.operator: Invalid value: \"In\": must be 'Exist' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity",
                "spec.scopeSelector.matchExpressions.scopeName: Invalid value: \"Sometimes\": unsupported scope",
                "spec.scopeSelector.matchExpressions.operator: Invalid value: \"Near\": not a valid selector operator",
                "spec.scopeSelector.matchExpressions.values: Invalid value: []string{\"y\"}: must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector",
                "spec.scopeSelector.matchExpressions: Invalid value: []core.ResourceQuotaScope(nil): conflicting scopes",
            ]
        );
        let best_effort = json!([{"scopeName": "BestEffort", "operator": "Exists"}]);
        assert_eq!(
            selected(json!({"pods": "1", "memory": "1Gi"}), best_effort),
            ["spec.scopeSelector.matchExpressions: Invalid value: core.ScopeSelector{MatchExpressions:[]core.ScopedResourceSelectorRequirement{core.ScopedResourceSelectorRequirement{ScopeName:\"BestEffort\", Operator:\"Exists\", Values:[]string(nil)}}}: unsupported scope applied to resource"]
        );
    }

    #[test]
    fn limit_ranges_keep_their_amounts_in_order() {
        let range = json!({"spec": {"limits": [
            {"type": "Container", "max": {"cpu": "1"}, "min": {"cpu": "2"},
                "default": {"cpu": "500m"}, "defaultRequest": {"cpu": "600m"},
                "maxLimitRequestRatio": {"memory": "500m"}},
            {"type": "Pod", "default": {"cpu": "1"}},
            {"type": "Pod"},
            {"type": "PersistentVolumeClaim"},
            {"type": "Widget"}]}});
        let mut errors = Vec::new();
        validate_limit_range(&range, &mut errors);
        assert_eq!(
            messages(&errors),
            [
                "spec.limits[0].min[cpu]: Invalid value: \"2\": min value 2 is greater than max value 1",
                "spec.limits[0].defaultRequest[cpu]: Invalid value: \"600m\": min value 2 is greater than default request value 600m",
                "spec.limits[0].defaultRequest[cpu]: Invalid value: \"600m\": default request value 600m is greater than default limit value 500m",
                "spec.limits[0].default[cpu]: Invalid value: \"2\": min value 2 is greater than default value 500m",
                "spec.limits[0].maxLimitRequestRatio[memory]: Invalid value: \"500m\": ratio 500m is less than 1",
                "spec.limits[1].default: Forbidden: may not be specified when `type` is 'Pod'",
                "spec.limits[2].type: Duplicate value: \"Pod\"",
                "spec.limits[3].limits: Required value: either minimum or maximum storage value is required, but neither was provided",
                "spec.limits[4].type: Invalid value: \"Widget\": must be a standard limit type or fully qualified",
            ]
        );
        let ratio = json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "2"},
            "min": {"cpu": "1"}, "maxLimitRequestRatio": {"cpu": "3"}}]}});
        let mut errors = Vec::new();
        validate_limit_range(&ratio, &mut errors);
        assert_eq!(
            messages(&errors),
            ["spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: \"3\": ratio 3 is greater than max/min = 2.000000"]
        );
    }
}
