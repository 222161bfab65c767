//! What the API server warns about a pod or a pod template it creates (Kubernetes 1.32's
//! `GetWarningsForPod`, `GetWarningsForPodTemplate` and the pod strategy's name check): valid
//! objects that will not do what their writer likely meant (deprecated node labels and
//! annotations, removed volume plugins, overlapping volume paths, repeated ports, env names and
//! pull secrets, fractional bytes, null selectors, a negative grace period). Kubernetes skips
//! them on a pod's updates (a high-frequency path no human writes).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::dns1123_label_errors;
use crate::model::{json, quantity};

/// Node labels Kubernetes deprecated, with what to use instead.
const DEPRECATED_NODE_LABELS: [(&str, &str); 5] = [
    ("beta.kubernetes.io/arch", r#"deprecated since v1.14; use "kubernetes.io/arch" instead"#),
    ("beta.kubernetes.io/os", r#"deprecated since v1.14; use "kubernetes.io/os" instead"#),
    (
        "failure-domain.beta.kubernetes.io/region",
        r#"deprecated since v1.17; use "topology.kubernetes.io/region" instead"#,
    ),
    (
        "failure-domain.beta.kubernetes.io/zone",
        r#"deprecated since v1.17; use "topology.kubernetes.io/zone" instead"#,
    ),
    (
        "beta.kubernetes.io/instance-type",
        r#"deprecated since v1.17; use "node.kubernetes.io/instance-type" instead"#,
    ),
];

const DEPRECATED_ANNOTATIONS: [(&str, &str); 3] = [
    (
        "scheduler.alpha.kubernetes.io/critical-pod",
        r#"non-functional in v1.16+; use the "priorityClassName" field instead"#,
    ),
    (
        "security.alpha.kubernetes.io/sysctls",
        r#"non-functional in v1.11+; use the "sysctls" field instead"#,
    ),
    (
        "security.alpha.kubernetes.io/unsafe-sysctls",
        r#"non-functional in v1.11+; use the "sysctls" field instead"#,
    ),
];

/// Volume plugins Kubernetes deprecated or removed, in the order it checks them.
const DEPRECATED_VOLUMES: [(&str, &str); 9] = [
    ("photonPersistentDisk", "deprecated in v1.11, non-functional in v1.16+"),
    ("gitRepo", "deprecated in v1.11"),
    ("scaleIO", "deprecated in v1.16, non-functional in v1.22+"),
    ("flocker", "deprecated in v1.22, non-functional in v1.25+"),
    ("storageOS", "deprecated in v1.22, non-functional in v1.25+"),
    ("quobyte", "deprecated in v1.22, non-functional in v1.25+"),
    ("glusterfs", "deprecated in v1.25, non-functional in v1.26+"),
    ("cephfs", "deprecated in v1.28, non-functional in v1.31+"),
    ("rbd", "deprecated in v1.28, non-functional in v1.31+"),
];

const SECCOMP_POD: &str = "seccomp.security.alpha.kubernetes.io/pod";
const SECCOMP_CONTAINER: &str = "container.seccomp.security.alpha.kubernetes.io/";
const APPARMOR_CONTAINER: &str = "container.apparmor.security.beta.kubernetes.io/";
const SECCOMP_FIELD: &str = r#"non-functional in v1.27+; use the "seccompProfile" field instead"#;
const NULL_SELECTOR: &str = "a null labelSelector results in matching no pod";

/// The warnings of a pod created as `pod` but for its name's (see [`pod_name`]).
pub fn pod(pod: &Value) -> Vec<String> {
    let mut warnings = Vec::new();
    spec_and_meta("", pod, false, &mut warnings);
    warnings
}

/// The warning about a created pod's name (its `generateName` resolved), which becomes its
/// host name: one that is no DNS label; Kubernetes gives it before the others.
pub fn pod_name(name: &str) -> Option<String> {
    let problems = dns1123_label_errors(name);
    (!problems.is_empty()).then(|| {
        format!(
            "metadata.name: this is used in the Pod's hostname, which can result in surprising \
             behavior; a DNS label is recommended: [{}]",
            problems.join(" ")
        )
    })
}

/// The warnings of a pod template created at `path` (`spec.template` of a
/// ReplicationController, `template` of a PodTemplate).
pub fn template(path: &str, template: Option<&Value>) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(template) = template.filter(|t| t.is_object()) {
        spec_and_meta(&format!("{path}."), template, true, &mut warnings);
    }
    warnings
}

/// The checks of `GetWarningsForPodTemplate` and `GetWarningsForPod`, on an object with
/// `metadata` and `spec`; `at` prefixes every field path.
fn spec_and_meta(at: &str, object: &Value, is_template: bool, warnings: &mut Vec<String>) {
    let empty = Map::new();
    let spec = object.get("spec").unwrap_or(&Value::Null);
    let annotations =
        json::at(object, "/metadata/annotations").and_then(Value::as_object).unwrap_or(&empty);
    let list = |value: Option<&Value>| value.and_then(Value::as_array).cloned().unwrap_or_default();
    let deprecated_label =
        |key: &str| DEPRECATED_NODE_LABELS.iter().find(|(label, _)| *label == key).map(|l| l.1);

    let node_selector = spec.get("nodeSelector").and_then(Value::as_object);
    for key in node_selector.into_iter().flat_map(Map::keys) {
        if let Some(message) = deprecated_label(key) {
            warnings.push(format!("{at}spec.nodeSelector[{key}]: {message}"));
        }
    }
    let term_warnings = |term: &Value, path: &str, warnings: &mut Vec<String>| {
        for (i, expression) in list(term.get("matchExpressions")).iter().enumerate() {
            let key = text(expression, "key");
            if let Some(message) = deprecated_label(key) {
                warnings.push(format!("{path}.matchExpressions[{i}].key: {key} is {message}"));
            }
        }
    };
    if let Some(node) = present(spec, "/affinity/nodeAffinity") {
        let required = "requiredDuringSchedulingIgnoredDuringExecution";
        let terms = node.get(required).and_then(|r| r.get("nodeSelectorTerms"));
        for (i, term) in list(terms).iter().enumerate() {
            let path = format!("{at}spec.affinity.nodeAffinity.{required}.nodeSelectorTerms[{i}]");
            term_warnings(term, &path, warnings);
        }
        let preferred = "preferredDuringSchedulingIgnoredDuringExecution";
        for (i, term) in list(node.get(preferred)).iter().enumerate() {
            let path = format!("{at}spec.affinity.nodeAffinity.{preferred}[{i}].preference");
            term_warnings(term.get("preference").unwrap_or(&Value::Null), &path, warnings);
        }
    }
    for (i, constraint) in list(spec.get("topologySpreadConstraints")).iter().enumerate() {
        let path = format!("{at}spec.topologySpreadConstraints[{i}]");
        let key = text(constraint, "topologyKey");
        if let Some(message) = deprecated_label(key) {
            warnings.push(format!("{path}.topologyKey: {key} is {message}"));
        }
        if constraint.get("labelSelector").is_none_or(Value::is_null) {
            warnings.push(format!("{path}.labelSelector: {NULL_SELECTOR}"));
        }
    }
    for (key, message) in DEPRECATED_ANNOTATIONS {
        if annotations.contains_key(key) {
            warnings.push(format!("{at}metadata.annotations[{key}]: {message}"));
        }
    }

    let volumes = list(spec.get("volumes"));
    for (i, volume) in volumes.iter().enumerate() {
        for (plugin, message) in DEPRECATED_VOLUMES {
            if volume.get(plugin).is_some_and(|p| !p.is_null()) {
                warnings.push(format!("{at}spec.volumes[{i}].{plugin}: {message}"));
            }
        }
    }
    overlapping_volume_paths(&volumes, warnings);

    let repeated = |field: &str, key: &str, what: &str, warnings: &mut Vec<String>| {
        let mut seen = std::collections::HashSet::new();
        for (i, item) in list(spec.get(field)).iter().enumerate() {
            let value = text(item, key);
            if !seen.insert(value.to_string()) {
                warnings.push(format!("{at}spec.{field}[{i}].{key}: duplicate {what} {value:?}"));
            }
        }
    };
    repeated("hostAliases", "ip", "ip", warnings);
    repeated("imagePullSecrets", "name", "name", warnings);
    for (i, secret) in list(spec.get("imagePullSecrets")).iter().enumerate() {
        if text(secret, "name").is_empty() {
            warnings.push(format!("{at}spec.imagePullSecrets[{i}].name: invalid empty name \"\""));
        }
    }
    let overhead = spec.get("overhead").unwrap_or(&Value::Null);
    fractional_bytes(overhead, &format!("{at}spec.overhead"), warnings);

    let pod_seccomp = present(spec, "/securityContext/seccompProfile");
    if pod_seccomp.is_none() && annotations.contains_key(SECCOMP_POD) {
        warnings.push(format!("{at}metadata.annotations[{SECCOMP_POD}]: {SECCOMP_FIELD}"));
    }
    let pod_apparmor = present(spec, "/securityContext/appArmorProfile").is_some();
    let containers = containers_with_paths(spec, &format!("{at}spec"));
    for (container, path) in &containers {
        let name = text(container, "name");
        let own = |field: &str| {
            container
                .get("securityContext")
                .and_then(|c| c.get(field))
                .is_some_and(|f| !f.is_null())
        };
        let seccomp = format!("{SECCOMP_CONTAINER}{name}");
        if !own("seccompProfile") && annotations.contains_key(&seccomp) {
            warnings.push(format!("{at}metadata.annotations[{seccomp}]: {SECCOMP_FIELD}"));
        }
        let apparmor = format!("{APPARMOR_CONTAINER}{name}");
        if is_template
            && !(pod_apparmor || own("appArmorProfile"))
            && annotations.contains_key(&apparmor)
        {
            warnings.push(format!(
                "{at}metadata.annotations[{apparmor}]: deprecated since v1.30; use the \
                 \"appArmorProfile\" field instead"
            ));
        }
        let resources = container.get("resources").unwrap_or(&Value::Null);
        for (kind, resource) in [
            ("limits", "memory"),
            ("requests", "memory"),
            ("limits", "ephemeral-storage"),
            ("requests", "ephemeral-storage"),
        ] {
            let mut amount = resources.get(kind).and_then(|k| k.get(resource));
            // A pod's containers request what they limit unless they say (a default).
            if kind == "requests" && !is_template && !path.contains(".ephemeralContainers[") {
                amount = amount.or_else(|| resources.get("limits").and_then(|l| l.get(resource)));
            }
            if let Some(amount) = amount.and_then(Value::as_str).filter(|a| fractional(a)) {
                warnings.push(fractional_warning(
                    &format!("{path}.resources.{kind}"),
                    resource,
                    amount,
                ));
            }
        }
        // A name given again hides the first: fine only when its value builds on it.
        let mut names = std::collections::HashSet::new();
        for (i, variable) in list(container.get("env")).iter().enumerate() {
            let name = text(variable, "name");
            if names.insert(name.to_string()) {
                continue;
            }
            let reference = format!("$({name})");
            let value = text(variable, "value");
            let from = variable.get("valueFrom").is_some_and(|v| !v.is_null());
            if from || value == reference || !value.contains(&reference) {
                warnings.push(format!(
                    "{path}.env[{i}]: hides previous definition of {name:?}, which may be dropped \
                     when using apply"
                ));
            }
        }
    }
    port_warnings(&containers, warnings);

    let grace = spec.get("terminationGracePeriodSeconds").and_then(Value::as_i64);
    if grace.is_some_and(|g| g < 0) {
        warnings.push(format!(
            "{at}spec.terminationGracePeriodSeconds: must be >= 0; negative values are invalid \
             and will be treated as 1"
        ));
    }
    for affinity in ["podAffinity", "podAntiAffinity"] {
        let Some(terms) =
            spec.get("affinity").and_then(|a| a.get(affinity)).filter(|a| !a.is_null())
        else {
            continue;
        };
        let base = format!("{at}spec.affinity.{affinity}");
        let required = "requiredDuringSchedulingIgnoredDuringExecution";
        for (i, term) in list(terms.get(required)).iter().enumerate() {
            if term.get("labelSelector").is_none_or(Value::is_null) {
                warnings.push(format!("{base}.{required}[{i}].labelSelector: {NULL_SELECTOR}"));
            }
        }
        let preferred = "preferredDuringSchedulingIgnoredDuringExecution";
        for (i, term) in list(terms.get(preferred)).iter().enumerate() {
            let selector = present(term, "/podAffinityTerm/labelSelector");
            if selector.is_none() {
                warnings.push(format!(
                    "{base}.{preferred}[{i}].podAffinityTerm.labelSelector: {NULL_SELECTOR}"
                ));
            }
        }
    }
}

/// The string at `field` of `value`, or "".
fn text<'a>(value: &'a Value, field: &str) -> &'a str {
    value.get(field).and_then(Value::as_str).unwrap_or("")
}

/// The value at `pointer`, unless absent or null.
fn present<'a>(value: &'a Value, pointer: &str) -> Option<&'a Value> {
    json::at(value, pointer).filter(|v| !v.is_null())
}

/// A pod's containers with their field paths, as Kubernetes visits them: init containers,
/// containers, then ephemeral containers.
fn containers_with_paths<'a>(spec: &'a Value, at: &str) -> Vec<(&'a Value, String)> {
    let mut containers = Vec::new();
    for field in ["initContainers", "containers", "ephemeralContainers"] {
        let listed = spec.get(field).and_then(Value::as_array).map(Vec::as_slice);
        for (i, container) in listed.unwrap_or_default().iter().enumerate() {
            containers.push((container, format!("{at}.{field}[{i}]")));
        }
    }
    containers
}

/// Whether a byte amount holds a fraction of a byte (`100m` of memory).
fn fractional(amount: &str) -> bool {
    quantity::milli_value(amount).is_ok_and(|millis| millis % 1000 != 0)
}

fn fractional_warning(path: &str, resource: &str, amount: &str) -> String {
    let written = quantity::canonical(amount).ok().flatten();
    let written = written.as_deref().unwrap_or(amount);
    format!("{path}[{resource}]: fractional byte value {written:?} is invalid, must be an integer")
}

/// The fractional byte amounts of a resource list (a pod's overhead) at `path`.
fn fractional_bytes(resources: &Value, path: &str, warnings: &mut Vec<String>) {
    for resource in ["memory", "ephemeral-storage"] {
        let amount = resources.get(resource).and_then(Value::as_str);
        if let Some(amount) = amount.filter(|a| fractional(a)) {
            warnings.push(fractional_warning(path, resource, amount));
        }
    }
}

/// Ports of all containers defined twice, or overlapping: the same container port and
/// protocol on host ports or addresses that cannot both be meant.
fn port_warnings(containers: &[(&Value, String)], warnings: &mut Vec<String>) {
    struct Port<'a> {
        field: String,
        host_ip: &'a str,
        host_port: i64,
    }
    let mut seen: BTreeMap<String, Vec<Port>> = BTreeMap::new();
    for (container, path) in containers {
        let ports = container.get("ports").and_then(Value::as_array).map(Vec::as_slice);
        for (i, port) in ports.unwrap_or_default().iter().enumerate() {
            let field = format!("{path}.ports[{i}]");
            let number = |name: &str| port.get(name).and_then(Value::as_i64).unwrap_or(0);
            let text = |name: &str| port.get(name).and_then(Value::as_str).unwrap_or("");
            let protocol = match text("protocol") {
                "" => "TCP",
                protocol => protocol,
            };
            let (host_ip, host_port) = (text("hostIP"), number("hostPort"));
            if !host_ip.is_empty() && host_port == 0 {
                warnings.push(format!(
                    "{field}: hostIP set without hostPort: {{Name:{} HostPort:{host_port} \
                     ContainerPort:{} Protocol:{protocol} HostIP:{host_ip}}}",
                    text("name"),
                    number("containerPort")
                ));
            }
            let others = seen.entry(format!("{}/{protocol}", number("containerPort"))).or_default();
            for other in others.iter() {
                let conflict = if host_ip == other.host_ip && host_port == other.host_port {
                    "duplicate"
                } else if host_port == 0 || other.host_port == 0 {
                    "overlapping"
                } else if host_port == other.host_port
                    && (host_ip.is_empty() != other.host_ip.is_empty())
                {
                    "dangerously ambiguous"
                } else {
                    continue;
                };
                warnings.push(format!("{field}: {conflict} port definition with {}", other.field));
            }
            others.push(Port { field, host_ip, host_port });
        }
    }
}

/// Volumes whose files would land on one another: two items of one ConfigMap, Secret or
/// downward API volume at one path, or one path inside another; and a projected volume's
/// sources likewise, among themselves.
fn overlapping_volume_paths(volumes: &[Value], warnings: &mut Vec<String>) {
    let paths = |items: Option<&Value>| -> Option<Vec<String>> {
        let items = items?.as_array()?;
        Some(
            items
                .iter()
                .map(|i| i.get("path").and_then(Value::as_str).unwrap_or("").into())
                .collect(),
        )
    };
    for volume in volumes {
        let name = volume.get("name").and_then(Value::as_str).unwrap_or("");
        let source = |field: &str| volume.get(field).filter(|s| !s.is_null());
        let named = |source: &Value, field: &str| {
            source.get(field).and_then(Value::as_str).unwrap_or("").to_string()
        };
        // A ConfigMap's, a Secret's, the downward API's items (with the name of what they
        // come from, if any).
        for (field, kind, named_by) in [
            ("configMap", "ConfigMap", Some("name")),
            ("secret", "Secret", Some("secretName")),
            ("downwardAPI", "DownwardAPI", None),
        ] {
            let Some(source) = source(field) else { continue };
            let Some(paths) = paths(source.get("items")) else { continue };
            let of = named_by.map(|by| format!(" {:?}", named(source, by))).unwrap_or_default();
            check_overlap(
                &paths,
                &format!("volume {name:?} ({kind}{of}): overlapping paths"),
                warnings,
            );
        }
        let Some(projected) = source("projected") else { continue };
        let mut all: Vec<String> = Vec::new();
        let sources = projected.get("sources").and_then(Value::as_array).map(Vec::as_slice);
        for projection in sources.unwrap_or_default() {
            let given = |field: &str| projection.get(field).filter(|s| !s.is_null());
            if projection.as_object().is_none_or(|p| p.values().all(Value::is_null)) {
                warnings.push(format!("volume {name:?} (Projected) has no sources provided"));
                continue;
            }
            let (own, what) = if let Some(paths) =
                given("configMap").and_then(|c| paths(c.get("items")))
            {
                let of = named(&projection["configMap"], "name");
                (paths, format!("volume {name:?} (Projected ConfigMap {of:?}): overlapping paths"))
            } else if let Some(paths) = given("secret").and_then(|s| paths(s.get("items"))) {
                let of = named(&projection["secret"], "name");
                (paths, format!("volume {name:?} (Projected Secret {of:?}): overlapping paths"))
            } else if let Some(paths) = given("downwardAPI").and_then(|d| paths(d.get("items"))) {
                (paths, format!("volume {name:?} (Projected DownwardAPI): overlapping paths"))
            } else if let Some(token) = given("serviceAccountToken") {
                let what =
                    format!("volume {name:?} (Projected ServiceAccountToken): overlapping paths");
                (vec![named(token, "path")], what)
            } else if let Some(bundle) = given("clusterTrustBundle") {
                let of = match bundle.get("name").and_then(Value::as_str) {
                    Some(name) => name.to_string(),
                    None => named(bundle, "signerName"),
                };
                let what = format!(
                    "volume {name:?} (Projected ClusterTrustBundle {of:?}): overlapping paths"
                );
                (vec![named(bundle, "path")], what)
            } else {
                continue;
            };
            if own.is_empty() {
                continue;
            }
            check_overlap(&own, &what, warnings);
            // Then against the sources before it, in sorted order.
            let mut unique = own.clone();
            unique.sort();
            unique.dedup();
            let mut ordered: Vec<String> = unique.iter().chain(&all).cloned().collect();
            ordered.sort();
            check_overlap(&ordered, &what, warnings);
            for path in unique {
                if !all.contains(&path) {
                    all.push(path);
                }
            }
        }
    }
}

/// Each path (its trailing slashes cut) that is, holds or lies in one before it.
fn check_overlap(paths: &[String], what: &str, warnings: &mut Vec<String>) {
    let mut seen: Vec<&str> = Vec::new();
    for path in paths {
        let path = path.trim_end_matches('/');
        let collision = seen.iter().find(|item| {
            !item.is_empty()
                && !path.is_empty()
                && (**item == path
                    || format!("{item}/").starts_with(path)
                    || format!("{path}/").starts_with(**item))
        });
        if let Some(collision) = collision {
            warnings.push(format!("{what}: {path:?} with {collision:?}"));
        }
        if !seen.contains(&path) {
            seen.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pod_is_warned_about_what_kubernetes_warns_about() {
        let pod = json!({
            "metadata": {"annotations": {
                "scheduler.alpha.kubernetes.io/critical-pod": "",
                "seccomp.security.alpha.kubernetes.io/pod": "runtime/default"}},
            "spec": {
                "nodeSelector": {"beta.kubernetes.io/arch": "amd64", "disk": "ssd"},
                "terminationGracePeriodSeconds": -5,
                "imagePullSecrets": [{"name": "a"}, {"name": "a"}, {}],
                "hostAliases": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.1"}],
                "topologySpreadConstraints": [
                    {"topologyKey": "failure-domain.beta.kubernetes.io/zone"}],
                "volumes": [{"name": "repo", "gitRepo": {"repository": "r"}},
                    {"name": "cm", "configMap": {"name": "c",
                        "items": [{"key": "a", "path": "x"}, {"key": "b", "path": "x/y"}]}}],
                "containers": [
                    {"name": "a", "ports": [{"containerPort": 80}, {"containerPort": 80}],
                        "resources": {"limits": {"memory": "100m"}},
                        "env": [{"name": "X", "value": "1"}, {"name": "X", "value": "$(X)2"},
                            {"name": "X", "value": "3"}]},
                    {"name": "b", "ports": [{"containerPort": 80, "hostPort": 8080},
                        {"containerPort": 90, "hostIP": "127.0.0.1"}]}]}});
        let mut warnings: Vec<String> = pod_name("a.b").into_iter().collect();
        warnings.extend(super::pod(&pod));
        let expected = [
            "metadata.name: this is used in the Pod's hostname, which can result in surprising \
             behavior; a DNS label is recommended: [a lowercase RFC 1123 label must consist of \
             lower case alphanumeric characters or '-', and must start and end with an \
             alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation \
             is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')]",
            r#"spec.nodeSelector[beta.kubernetes.io/arch]: deprecated since v1.14; use "kubernetes.io/arch" instead"#,
            r#"spec.topologySpreadConstraints[0].topologyKey: failure-domain.beta.kubernetes.io/zone is deprecated since v1.17; use "topology.kubernetes.io/zone" instead"#,
            "spec.topologySpreadConstraints[0].labelSelector: a null labelSelector results in matching no pod",
            r#"metadata.annotations[scheduler.alpha.kubernetes.io/critical-pod]: non-functional in v1.16+; use the "priorityClassName" field instead"#,
            "spec.volumes[0].gitRepo: deprecated in v1.11",
            r#"volume "cm" (ConfigMap "c"): overlapping paths: "x/y" with "x""#,
            r#"spec.hostAliases[1].ip: duplicate ip "10.0.0.1""#,
            r#"spec.imagePullSecrets[1].name: duplicate name "a""#,
            r#"spec.imagePullSecrets[2].name: invalid empty name """#,
            r#"metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]: non-functional in v1.27+; use the "seccompProfile" field instead"#,
            r#"spec.containers[0].resources.limits[memory]: fractional byte value "100m" is invalid, must be an integer"#,
            r#"spec.containers[0].resources.requests[memory]: fractional byte value "100m" is invalid, must be an integer"#,
            r#"spec.containers[0].env[2]: hides previous definition of "X", which may be dropped when using apply"#,
            "spec.containers[0].ports[1]: duplicate port definition with spec.containers[0].ports[0]",
            "spec.containers[1].ports[0]: overlapping port definition with spec.containers[0].ports[0]",
            "spec.containers[1].ports[0]: overlapping port definition with spec.containers[0].ports[1]",
            "spec.containers[1].ports[1]: hostIP set without hostPort: {Name: HostPort:0 \
             ContainerPort:90 Protocol:TCP HostIP:127.0.0.1}",
            "spec.terminationGracePeriodSeconds: must be >= 0; negative values are invalid and \
             will be treated as 1",
        ];
        assert_eq!(warnings, expected);
        let plain = json!({"metadata": {}, "spec": {"containers": [{"name": "c", "image": "i",
            "ports": [{"containerPort": 80}, {"containerPort": 80, "protocol": "UDP"}],
            "resources": {"requests": {"memory": "64Mi"}}}]}});
        assert!(super::pod(&plain).is_empty());
        assert_eq!(pod_name("web"), None);
    }

    #[test]
    fn a_template_s_paths_are_under_its_own() {
        let rc = json!({"spec": {"template": {
            "metadata": {"annotations": {"container.apparmor.security.beta.kubernetes.io/c": "x"}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"ephemeral-storage": "0.5"}}}],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    [{"topologyKey": "k"}]}}}}}});
        assert_eq!(
            template("spec.template", rc["spec"].get("template")),
            [
                r#"spec.template.metadata.annotations[container.apparmor.security.beta.kubernetes.io/c]: deprecated since v1.30; use the "appArmorProfile" field instead"#,
                r#"spec.template.spec.containers[0].resources.requests[ephemeral-storage]: fractional byte value "500m" is invalid, must be an integer"#,
                "spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector: a null labelSelector results in matching no pod",
            ]
        );
        assert!(template("spec.template", None).is_empty());
    }

    #[test]
    fn projected_sources_overlap_among_themselves() {
        let volumes = [json!({"name": "p", "projected": {"sources": [
            {"configMap": {"name": "a", "items": [{"key": "k", "path": "d/f"}]}},
            {"secret": {"name": "s", "items": [{"key": "k", "path": "d"}]}},
            {}]}})];
        let mut warnings = Vec::new();
        overlapping_volume_paths(&volumes, &mut warnings);
        assert_eq!(
            warnings,
            [
                r#"volume "p" (Projected Secret "s"): overlapping paths: "d/f" with "d""#,
                r#"volume "p" (Projected) has no sources provided"#,
            ]
        );
    }
}
