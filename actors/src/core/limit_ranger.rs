//! The LimitRanger admission plugin, as Kubernetes enables it by default: a pod created in a
//! namespace with LimitRanges gets the containers' default requests and limits it leaves out
//! (and an annotation saying which), and a pod or claim outside their min, max or ratio is
//! refused (403). Pods are only admitted on create, as in Kubernetes: their containers'
//! resources cannot change afterwards.

use std::cmp::Ordering;

use serde_json::{json, Map, Value};

use crate::model::{quantity, quota};

/// The annotation that records what the plugin set on a pod.
const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// The items of `ranges` (LimitRange objects) of `kind` (`Container`, `Pod`, ...).
fn items<'a>(ranges: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    ranges
        .iter()
        .filter_map(|r| r.pointer("/spec/limits")?.as_array())
        .flatten()
        .filter(move |item| item.get("type").and_then(Value::as_str) == Some(kind))
}

/// An item's amounts under `part` (`min`, `max`, `default`, ...).
fn amounts<'a>(item: &'a Value, part: &str) -> impl Iterator<Item = (&'a String, &'a str)> {
    let amounts = item.get(part).and_then(Value::as_object);
    amounts.into_iter().flatten().filter_map(|(k, v)| Some((k, v.as_str()?)))
}

/// Fills in each container's requests and limits that the ranges' Container items default
/// and the container leaves out, range by range (so the first range naming a resource gives
/// it), and notes them in the pod's `kubernetes.io/limit-ranger` annotation: the last range
/// that set anything writes it, with what it set, as Kubernetes' plugin runs once per range.
/// Returns whether anything was set.
pub(crate) fn default_pod(ranges: &[Value], pod: &mut Value) -> bool {
    let mut note = None;
    for range in ranges {
        let (mut limits, mut requests) = (Map::new(), Map::new());
        for item in items(std::slice::from_ref(range), "Container") {
            for (part, into) in [("default", &mut limits), ("defaultRequest", &mut requests)] {
                for (resource, amount) in amounts(item, part) {
                    into.entry(resource.clone()).or_insert_with(|| json!(amount));
                }
            }
        }
        let notes = fill_defaults(pod, &limits, &requests);
        if !notes.is_empty() {
            note = Some(format!("LimitRanger plugin set: {}", notes.join("; ")));
        }
    }
    let Some(note) = note else { return false };
    if let Some(meta) = pod.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if let Some(annotations) = annotations.as_object_mut() {
            annotations.insert(ANNOTATION.into(), json!(note));
        }
    }
    true
}

/// Sets the `limits` and `requests` each container (and init container) leaves out; what was
/// set, in the annotation's words.
fn fill_defaults(
    pod: &mut Value,
    limits: &Map<String, Value>,
    requests: &Map<String, Value>,
) -> Vec<String> {
    let mut notes = Vec::new();
    if limits.is_empty() && requests.is_empty() {
        return notes;
    }
    for (list, what) in [("containers", "container"), ("initContainers", "init container")] {
        let containers = pod.pointer_mut(&format!("/spec/{list}")).and_then(Value::as_array_mut);
        for container in containers.into_iter().flatten() {
            let name = container.get("name").and_then(Value::as_str).unwrap_or("").to_string();
            let Some(container) = container.as_object_mut() else { continue };
            let resources = container.entry("resources").or_insert_with(|| json!({}));
            let Some(resources) = resources.as_object_mut() else { continue };
            for (kind, defaults) in [("request", requests), ("limit", limits)] {
                let list = resources.entry(format!("{kind}s")).or_insert_with(|| json!({}));
                let Some(list) = list.as_object_mut() else { continue };
                let mut set: Vec<&str> = Vec::new();
                for (resource, amount) in defaults {
                    if !list.contains_key(resource) {
                        list.insert(resource.clone(), amount.clone());
                        set.push(resource);
                    }
                }
                if !set.is_empty() {
                    set.sort_unstable();
                    notes.push(format!("{} {kind} for {what} {name}", set.join(", ")));
                }
                if list.is_empty() {
                    resources.remove(&format!("{kind}s"));
                }
            }
        }
    }
    notes
}

/// What the ranges refuse in `pod`: each container (and init container) within the
/// Container items' min, max and limit/request ratio, the pod's totals within the Pod items'.
pub(crate) fn check_pod(ranges: &[Value], pod: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let containers = |list: &str| {
        let containers = pod.pointer(&format!("/spec/{list}")).and_then(Value::as_array);
        containers.into_iter().flatten().map(|c| c.get("resources"))
    };
    let list = |resources: Option<&Value>, kind: &str| {
        resources.and_then(|r| r.get(kind)).and_then(Value::as_object).cloned().unwrap_or_default()
    };
    // The pod's totals, worked out for its first Pod item.
    let mut pod_totals: Option<(Map<String, Value>, Map<String, Value>)> = None;
    // The items in their order, as Kubernetes checks them (a Pod item before a Container item
    // is reported first).
    let limits = ranges.iter().filter_map(|r| r.pointer("/spec/limits")?.as_array()).flatten();
    for item in limits {
        match item.get("type").and_then(Value::as_str) {
            Some("Container") => {
                for resources in containers("containers").chain(containers("initContainers")) {
                    let (requests, limits) =
                        (list(resources, "requests"), list(resources, "limits"));
                    check_item(item, "Container", &requests, &limits, &mut problems);
                }
            }
            Some("Pod") => {
                let (requests, limits) = pod_totals.get_or_insert_with(|| {
                    let (requests, limits) = quota::containers_requests_and_limits(pod);
                    let texts = |usage: quota::Usage| -> Map<String, Value> {
                        usage.into_iter().map(|(k, v)| (k, json!(v.text()))).collect()
                    };
                    (texts(requests), texts(limits))
                });
                check_item(item, "Pod", requests, limits, &mut problems);
            }
            _ => {}
        }
    }
    problems
}

/// What the ranges' PersistentVolumeClaim items refuse in a claim's requests.
pub(crate) fn check_claim(ranges: &[Value], claim: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let requests = claim.pointer("/spec/resources/requests").and_then(Value::as_object);
    let requests = requests.cloned().unwrap_or_default();
    for item in items(ranges, "PersistentVolumeClaim") {
        let kind = "PersistentVolumeClaim";
        for (bound, part) in [("minimum", "min"), ("maximum", "max")] {
            for (resource, amount) in amounts(item, part) {
                let Some(req) = requests.get(resource).and_then(Value::as_str) else {
                    problems.push(no_request(resource, kind, bound, amount));
                    continue;
                };
                let outside = if part == "min" { below(req, amount) } else { below(amount, req) };
                if outside {
                    let usage = format!("{bound} {resource} usage per {kind} is {amount}");
                    problems.push(format!("{usage}, but request is {req}"));
                }
            }
        }
    }
    problems
}

fn no_request(resource: &str, kind: &str, bound: &str, amount: &str) -> String {
    format!("{bound} {resource} usage per {kind} is {amount}.  No request is specified")
}

fn below(a: &str, b: &str) -> bool {
    quantity::compare(a, b) == Some(Ordering::Less)
}

/// One item's min, max and ratio against `requests` and `limits`, worded as Kubernetes'.
fn check_item(
    item: &Value,
    kind: &str,
    requests: &Map<String, Value>,
    limits: &Map<String, Value>,
    problems: &mut Vec<String>,
) {
    let get = |list: &Map<String, Value>, resource: &str| {
        list.get(resource).and_then(Value::as_str).map(str::to_owned)
    };
    for (resource, min) in amounts(item, "min") {
        let (req, lim) = (get(requests, resource), get(limits, resource));
        let usage = format!("minimum {resource} usage per {kind} is {min}");
        match (req, lim) {
            (None, _) => problems.push(format!("{usage}.  No request is specified")),
            (Some(req), _) if below(&req, min) => {
                problems.push(format!("{usage}, but request is {req}"))
            }
            (_, Some(lim)) if below(&lim, min) => {
                problems.push(format!("{usage}, but limit is {lim}"))
            }
            _ => {}
        }
    }
    for (resource, max) in amounts(item, "max") {
        let (req, lim) = (get(requests, resource), get(limits, resource));
        let usage = format!("maximum {resource} usage per {kind} is {max}");
        match (req, lim) {
            (_, None) => problems.push(format!("{usage}.  No limit is specified")),
            (_, Some(lim)) if below(max, &lim) => {
                problems.push(format!("{usage}, but limit is {lim}"))
            }
            (Some(req), _) if below(max, &req) => {
                problems.push(format!("{usage}, but request is {req}"))
            }
            _ => {}
        }
    }
    for (resource, ratio) in amounts(item, "maxLimitRequestRatio") {
        let milli =
            |q: Option<String>| q.and_then(|q| quantity::milli_value_wide(&q).ok()).unwrap_or(0);
        let (req, lim) = (milli(get(requests, resource)), milli(get(limits, resource)));
        let usage = format!("{resource} max limit to request ratio per {kind} is {ratio}");
        if req == 0 {
            problems.push(format!("{usage}, but no request is specified or request is 0"));
        } else if lim == 0 {
            problems.push(format!("{usage}, but no limit is specified or limit is 0"));
        } else {
            let observed = lim as f64 / req as f64;
            let most = quantity::milli_value(ratio).map_or(f64::MAX, |m| m as f64 / 1000.0);
            if observed > most {
                problems.push(format!("{usage}, but provided ratio is {observed:.6}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges() -> Vec<Value> {
        vec![json!({"spec": {"limits": [
            {"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"},
                "defaultRequest": {"cpu": "100m"}, "max": {"cpu": "1"}, "min": {"cpu": "50m"},
                "maxLimitRequestRatio": {"cpu": "10"}},
            {"type": "Pod", "max": {"memory": "1Gi"}},
            {"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "10Gi"}}]}})]
    }

    #[test]
    fn pods_get_the_defaults_they_leave_out_and_a_note_of_them() {
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "a", "resources": {"limits": {"cpu": "200m"}}}, {"name": "b"}],
            "initContainers": [{"name": "setup"}]}});
        assert!(default_pod(&ranges(), &mut pod));
        assert_eq!(
            pod["spec"]["containers"][0]["resources"],
            json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "200m", "memory": "256Mi"}})
        );
        assert_eq!(
            pod["spec"]["containers"][1]["resources"],
            json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "500m", "memory": "256Mi"}})
        );
        assert_eq!(
            pod["metadata"]["annotations"][ANNOTATION],
            "LimitRanger plugin set: cpu request for container a; memory limit for container a; \
             cpu request for container b; cpu, memory limit for container b; \
             cpu request for init container setup; cpu, memory limit for init container setup"
        );
        let mut again = pod.clone();
        assert!(!default_pod(&ranges(), &mut again), "nothing left to set");
        assert_eq!(again, pod);
        assert!(!default_pod(&[], &mut again));
        // Two ranges: each fills what the other leaves, and the last that set anything notes
        // what it set.
        let range = |limits: Value| json!({"spec": {"limits": [limits]}});
        let two = [
            range(json!({"type": "Container", "default": {"cpu": "300m"}})),
            range(json!({"type": "Container", "default": {"memory": "100Mi", "cpu": "1"}})),
        ];
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
        assert!(default_pod(&two, &mut pod));
        assert_eq!(
            pod["spec"]["containers"][0]["resources"],
            json!({"limits": {"cpu": "300m", "memory": "100Mi"}})
        );
        assert_eq!(
            pod["metadata"]["annotations"][ANNOTATION],
            "LimitRanger plugin set: memory limit for container c"
        );
    }

    #[test]
    fn a_ratio_of_amounts_past_what_millis_hold_in_64_bits_is_still_worked_out() {
        let ratio = [json!({"spec": {"limits": [
            {"type": "Container", "maxLimitRequestRatio": {"memory": "2"}}]}})];
        let pod = |request: &str, limit: &str| {
            json!({"spec": {"containers": [{"name": "a", "resources": {
                "requests": {"memory": request}, "limits": {"memory": limit}}}]}})
        };
        assert!(check_pod(&ratio, &pod("20Pi", "30Pi")).is_empty());
        assert_eq!(
            check_pod(&ratio, &pod("10Pi", "30Pi")),
            ["memory max limit to request ratio per Container is 2, but provided ratio is 3.000000"]
        );
    }

    #[test]
    fn pods_and_claims_outside_the_ranges_are_refused_in_kubernetes_words() {
        let pod = |resources: Value| {
            json!({"spec": {"containers": [{"name": "a", "resources": resources},
                {"name": "b", "resources": {"requests": {"cpu": "100m"},
                    "limits": {"cpu": "500m", "memory": "600Mi"}}}]}})
        };
        let fits =
            pod(json!({"requests": {"cpu": "100m"}, "limits": {"cpu": "1", "memory": "100Mi"}}));
        assert_eq!(check_pod(&ranges(), &fits), Vec::<String>::new());
        // A pod's overhead is not its containers' usage (the RuntimeClass plugin judges it).
        let mut with_overhead = fits.clone();
        with_overhead["spec"]["overhead"] = json!({"memory": "2Gi"});
        assert_eq!(check_pod(&ranges(), &with_overhead), Vec::<String>::new());
        let over =
            pod(json!({"requests": {"cpu": "10m"}, "limits": {"cpu": "2", "memory": "600Mi"}}));
        assert_eq!(
            check_pod(&ranges(), &over),
            [
                "minimum cpu usage per Container is 50m, but request is 10m",
                "maximum cpu usage per Container is 1, but limit is 2",
                "cpu max limit to request ratio per Container is 10, but provided ratio is 200.000000",
                "maximum memory usage per Pod is 1Gi, but limit is 1200Mi",
            ]
        );
        // In the items' order: a Pod item listed before a Container item is reported first.
        let mut pod_first = ranges();
        pod_first[0]["spec"]["limits"].as_array_mut().unwrap().swap(0, 1);
        let problems = check_pod(&pod_first, &over);
        assert_eq!(problems[0], "maximum memory usage per Pod is 1Gi, but limit is 1200Mi");
        assert_eq!(problems.len(), 4);
        let claim =
            |storage: &str| json!({"spec": {"resources": {"requests": {"storage": storage}}}});
        assert!(check_claim(&ranges(), &claim("5Gi")).is_empty());
        assert_eq!(
            check_claim(&ranges(), &claim("20Gi")),
            ["maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 20Gi"]
        );
        assert_eq!(
            check_claim(&ranges(), &json!({"spec": {}})),
            [
                "minimum storage usage per PersistentVolumeClaim is 1Gi.  No request is specified",
                "maximum storage usage per PersistentVolumeClaim is 10Gi.  No request is specified",
            ]
        );
    }
}
