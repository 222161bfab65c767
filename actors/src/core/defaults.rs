//! Defaulting: the fields Kubernetes fills in when a client leaves them out.

use serde_json::{json, Map, Value};

use crate::model::finalizers::NAMESPACE_FINALIZER;
use crate::model::json;
use crate::model::priority::PREEMPT_LOWER_PRIORITY;
use crate::model::qos::qos_class;
use crate::model::quantity;

/// What only a create does, as Kubernetes' create strategies (`PrepareForCreate`) do: drops
/// the status a client sent for the kinds whose status only the system writes (a pod copied
/// from `kubectl get -o yaml` starts `Pending`, not `Running` on a node it was never started
/// on; nodes keep theirs, as their agent registers them with it), and gives a namespace its
/// `kubernetes` finalizer.
pub(crate) fn prepare_for_create(kind: &str, object: &mut Value) {
    const SYSTEM_STATUS: &[&str] = &[
        "Pod",
        "Service",
        "ReplicationController",
        "Namespace",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "ResourceQuota",
    ];
    if SYSTEM_STATUS.contains(&kind) {
        if let Some(object) = object.as_object_mut() {
            object.remove("status");
        }
    }
    // A volume is Pending from the moment it is created.
    if kind == "PersistentVolume" {
        let status = object_field(object, "status");
        status.insert("phase".into(), json!("Pending"));
        status.insert("lastPhaseTransitionTime".into(), json!(crate::model::now()));
    }
    // A pod held by scheduling gates says so from the start (Kubernetes' strategy does).
    let gated = json::at(object, "/spec/schedulingGates").and_then(Value::as_array);
    if kind == "Pod" && gated.is_some_and(|gates| !gates.is_empty()) {
        let condition = json!({"type": "PodScheduled", "status": "False", "lastProbeTime": null,
            "lastTransitionTime": null, "reason": "SchedulingGated",
            "message": "Scheduling is blocked due to non-empty scheduling gates"});
        let status = object_field(object, "status");
        status.insert("conditions".into(), json!([condition]));
    }
    // A budget starts with nothing allowed, until the disruption controller has counted.
    if kind == "PodDisruptionBudget" {
        if let Some(object) = object.as_object_mut() {
            let status = json!({"disruptionsAllowed": 0, "currentHealthy": 0,
                "desiredHealthy": 0, "expectedPods": 0});
            object.insert("status".into(), status);
        }
    }
    // A new namespace is held for its controller, which empties it once deleted (only
    // `finalize` changes the list afterwards).
    if kind == "Namespace" {
        let finalizers = object_field(object, "spec").entry("finalizers").or_insert(json!([]));
        if !finalizers.is_array() {
            *finalizers = json!([]);
        }
        let list = finalizers.as_array_mut().expect("set to an array above");
        if !list.iter().any(|f| f == NAMESPACE_FINALIZER) {
            list.push(json!(NAMESPACE_FINALIZER));
        }
    }
}

/// Sets a pod's QoS class again from its containers' resources, once admission has changed
/// them.
pub(crate) fn recompute_qos_class(pod: &mut Value) {
    let qos = pod.get("spec").map_or("BestEffort", qos_class);
    object_field(pod, "status").insert("qosClass".into(), json!(qos));
}

/// A pod's QoS class as it was, when a status write leaves it out: it is the API server's,
/// set at creation (as Kubernetes' status strategy fills it back in for kubelets that drop it).
pub(crate) fn backfill_qos_class(old: &Value, new: &mut Value) {
    let given = json::at(new, "/status/qosClass").and_then(Value::as_str);
    if given.is_some_and(|class| !class.is_empty()) {
        return;
    }
    if let Some(class) = json::at(old, "/status/qosClass").cloned() {
        object_field(new, "status").insert("qosClass".into(), class);
    }
}

/// A namespace's phase, `Active` when none is given (or an empty one), as Kubernetes decodes
/// a namespace, its status writes too.
fn namespace_phase(object: &mut Value) {
    let status = object_field(object, "status");
    let phase = status.entry("phase").or_insert(json!(""));
    if phase.as_str().is_none_or(str::is_empty) {
        *phase = json!("Active");
    }
}

/// Fills the defaults of `kind` into `object` (a create or a full update).
pub(crate) fn apply(kind: &str, object: &mut Value) {
    drop_empty(object, "metadata", &["labels", "annotations", "finalizers", "ownerReferences"]);
    if kind == "ConfigMap" || kind == "Secret" {
        drop_empty(object, "", &["data", "binaryData"]);
    }
    match kind {
        "Pod" => {
            if let Some(spec) = object.get_mut("spec") {
                pod_spec(spec, PodSpecOf::Pod);
            }
            let qos = object.get("spec").map_or("BestEffort", qos_class);
            let status = object_field(object, "status");
            status.entry("phase").or_insert_with(|| json!("Pending"));
            status.entry("qosClass").or_insert_with(|| json!(qos));
        }
        "PodTemplate" => {
            let template = object
                .as_object_mut()
                .and_then(|o| o.entry("template").or_insert_with(|| json!({})).as_object_mut());
            if let Some(template) = template {
                pod_template(template);
            }
        }
        "Role" | "ClusterRole" => {
            // Go writes a role's rules even when it has none (no `omitempty`).
            if let Some(role) = object.as_object_mut() {
                role.entry("rules").or_insert(Value::Null);
            }
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            // RBAC's group where left out: the role's, users' and groups' (not a service
            // account's), as Kubernetes' binding and subject defaults say.
            let rbac = json!(crate::model::resources::RBAC_GROUP);
            if let Some(role) = object.get_mut("roleRef").and_then(Value::as_object_mut) {
                let group = role.entry("apiGroup").or_insert_with(|| rbac.clone());
                if group.as_str() == Some("") {
                    *group = rbac.clone();
                }
            }
            let subjects = object.get_mut("subjects").and_then(Value::as_array_mut);
            for subject in subjects.into_iter().flatten().filter_map(Value::as_object_mut) {
                let of_rbac =
                    matches!(subject.get("kind").and_then(Value::as_str), Some("User" | "Group"));
                let unset =
                    subject.get("apiGroup").and_then(Value::as_str).unwrap_or("").is_empty();
                if of_rbac && unset {
                    subject.insert("apiGroup".into(), rbac.clone());
                }
            }
        }
        "PriorityClass" => {
            if let Some(class) = object.as_object_mut() {
                class.entry("value").or_insert(json!(0));
                class.entry("preemptionPolicy").or_insert(json!(PREEMPT_LOWER_PRIORITY));
            }
        }
        "ReplicationController" => {
            let labels = object.pointer("/spec/template/metadata/labels").cloned();
            let spec = object_field(object, "spec");
            spec.entry("replicas").or_insert(json!(1));
            if let Some(labels) = labels {
                spec.entry("selector").or_insert(labels.clone());
            }
            if let Some(template) = spec.get_mut("template").and_then(Value::as_object_mut) {
                pod_template(template);
            }
            let meta_labels = object.pointer("/spec/template/metadata/labels").cloned();
            if let Some(labels) = meta_labels {
                object_field(object, "metadata").entry("labels").or_insert(labels);
            }
            object_field(object, "status").entry("replicas").or_insert(json!(0));
        }
        "Service" => {
            let spec = object_field(object, "spec");
            spec.entry("type").or_insert(json!("ClusterIP"));
            spec.entry("sessionAffinity").or_insert(json!("None"));
            // No affinity has no configuration, as Kubernetes' defaults leave it.
            if spec.get("sessionAffinity") == Some(&json!("None")) {
                spec.remove("sessionAffinityConfig");
            }
            if spec.get("sessionAffinity") == Some(&json!("ClientIP")) {
                // Three hours, Kubernetes' default for an affinity given no timeout.
                let config = spec.entry("sessionAffinityConfig").or_insert_with(|| json!({}));
                if let Some(config) = config.as_object_mut() {
                    let client_ip = config.entry("clientIP").or_insert_with(|| json!({}));
                    if let Some(client_ip) = client_ip.as_object_mut() {
                        client_ip.entry("timeoutSeconds").or_insert(json!(10800));
                    }
                }
            }
            let service_type = spec.get("type").and_then(Value::as_str).unwrap_or("").to_string();
            if service_type != "ExternalName" {
                spec.entry("internalTrafficPolicy").or_insert(json!("Cluster"));
                // The family of an address asked for is the allocator's to infer (and an IPv6
                // one to refuse, as this cluster has none).
                let first_asked = spec
                    .get("clusterIPs")
                    .and_then(|ips| ips.get(0))
                    .or_else(|| spec.get("clusterIP"))
                    .and_then(Value::as_str);
                if !first_asked.is_some_and(|ip| ip.contains(':')) {
                    spec.entry("ipFamilies").or_insert(json!(["IPv4"]));
                }
                // (`ipFamilyPolicy` is the allocator's to default: an update keeps the old.)
            }
            // Reached from outside (Kubernetes' `ExternallyAccessible`): a node port, a load
            // balancer, or external IPs.
            let external_ips = spec
                .get("externalIPs")
                .and_then(Value::as_array)
                .is_some_and(|ips| !ips.is_empty());
            if service_type == "NodePort"
                || service_type == "LoadBalancer"
                || (service_type == "ClusterIP" && external_ips)
            {
                spec.entry("externalTrafficPolicy").or_insert(json!("Cluster"));
            }
            if service_type == "LoadBalancer" {
                spec.entry("allocateLoadBalancerNodePorts").or_insert(json!(true));
            }
            for port in spec.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
                if let Some(port) = port.as_object_mut() {
                    // Zero is no node port (one is allocated when the type needs it), as
                    // Kubernetes reads it: `kubectl create service nodeport` sends 0.
                    if port.get("nodePort").and_then(Value::as_i64) == Some(0) {
                        port.remove("nodePort");
                    }
                    port.entry("protocol").or_insert(json!("TCP"));
                    // No target port, 0 or "" (what Go's protobuf writes for none): the port.
                    let target = port.get("targetPort");
                    if target.is_none_or(|t| *t == json!(0) || *t == json!("")) {
                        if let Some(p) = port.get("port").cloned() {
                            port.insert("targetPort".into(), p);
                        }
                    }
                }
            }
            object_field(object, "status").entry("loadBalancer").or_insert(json!({}));
        }
        "Namespace" => {
            // Every namespace is labelled with its name (Kubernetes does so since 1.22), so
            // that label selectors can pick namespaces by name.
            let name = object.pointer("/metadata/name").and_then(Value::as_str).map(String::from);
            if let Some(name) = name {
                let meta = object_field(object, "metadata");
                let labels = meta.entry("labels").or_insert_with(|| json!({}));
                if !labels.is_object() {
                    *labels = json!({});
                }
                labels["kubernetes.io/metadata.name"] = json!(name);
            }
        }
        "Secret" => {
            let secret = object.as_object_mut().expect("objects are JSON objects");
            secret.entry("type").or_insert(json!("Opaque"));
            merge_string_data(secret);
        }
        "Endpoints" => {
            let subsets = object.get_mut("subsets").and_then(Value::as_array_mut);
            for subset in subsets.into_iter().flatten() {
                let ports = subset.get_mut("ports").and_then(Value::as_array_mut);
                for port in ports.into_iter().flatten().filter_map(Value::as_object_mut) {
                    port.entry("protocol").or_insert(json!("TCP"));
                }
            }
        }
        "LimitRange" => {
            let limits = object.pointer_mut("/spec/limits").and_then(Value::as_array_mut);
            for item in limits.into_iter().flatten().filter_map(Value::as_object_mut) {
                limit_range_item(item);
            }
        }
        "PersistentVolume" => {
            let spec = object_field(object, "spec");
            spec.entry("persistentVolumeReclaimPolicy").or_insert(json!("Retain"));
            spec.entry("volumeMode").or_insert(json!("Filesystem"));
            host_path(spec);
            object_field(object, "status").entry("phase").or_insert(json!("Pending"));
        }
        "PersistentVolumeClaim" => {
            object_field(object, "spec").entry("volumeMode").or_insert(json!("Filesystem"));
            object_field(object, "status").entry("phase").or_insert(json!("Pending"));
        }
        "Node" => node_pod_cidrs(object_field(object, "spec")),
        "EndpointSlice" => {
            let ports = object.get_mut("ports").and_then(Value::as_array_mut);
            for port in ports.into_iter().flatten().filter_map(Value::as_object_mut) {
                port.entry("name").or_insert(json!(""));
                port.entry("protocol").or_insert(json!("TCP"));
            }
            // An endpoint's conditions are a struct, not a pointer, in Kubernetes' types: its
            // JSON always has them, `{}` when none is known.
            let endpoints = object.get_mut("endpoints").and_then(Value::as_array_mut);
            for endpoint in endpoints.into_iter().flatten().filter_map(Value::as_object_mut) {
                let conditions = endpoint.entry("conditions").or_insert(json!({}));
                if conditions.is_null() {
                    *conditions = json!({});
                }
            }
        }
        "Lease" => {
            // Coordinated leader election's fields, which Kubernetes 1.32 drops unless its
            // alpha feature is on.
            if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                spec.remove("strategy");
                spec.remove("preferredHolder");
            }
        }
        _ => {}
    }
    round_resource_lists(kind, object);
    status(kind, object);
    go_structs(kind, object);
}

/// Rounds up, in place, the amounts of the resource list at each of `pointers` in `object`
/// (Kubernetes' `SetDefaults_ResourceList`, [`quantity::rounded_to_millis`]).
fn round_amounts(object: &mut Value, pointers: &[&str]) {
    for pointer in pointers {
        let list = json::at_mut(object, pointer).and_then(Value::as_object_mut);
        for amount in list.into_iter().flat_map(|l| l.values_mut()) {
            if let Some(rounded) = amount.as_str().and_then(quantity::rounded_to_millis) {
                *amount = json!(rounded);
            }
        }
    }
}

/// The resource lists of the kinds that are not pods or templates (whose lists are rounded
/// with their pod spec's defaults).
fn round_resource_lists(kind: &str, object: &mut Value) {
    match kind {
        "ResourceQuota" => round_amounts(object, &["/spec/hard"]),
        "PersistentVolume" => round_amounts(object, &["/spec/capacity"]),
        "PersistentVolumeClaim" => {
            round_amounts(object, &["/spec/resources/requests", "/spec/resources/limits"])
        }
        "Node" => round_amounts(object, &["/status/capacity", "/status/allocatable"]),
        "LimitRange" => {
            let items = object.pointer_mut("/spec/limits").and_then(Value::as_array_mut);
            for item in items.into_iter().flatten() {
                let lists =
                    ["/max", "/min", "/default", "/defaultRequest", "/maxLimitRequestRatio"];
                round_amounts(item, &lists);
            }
        }
        _ => {}
    }
}

/// The canonical form Kubernetes' strategies give an object once it is valid
/// (`Canonicalize`): an Endpoints object's subsets repacked, whoever writes them.
pub(crate) fn canonicalize(kind: &str, object: &mut Value) {
    if kind == "Endpoints" {
        if let Some(subsets) = object.get_mut("subsets").and_then(Value::as_array_mut) {
            *subsets = crate::model::endpoints::repack(subsets);
            if subsets.is_empty() {
                object.as_object_mut().map(|o| o.remove("subsets"));
            }
        }
    }
}

/// What a status gets from Kubernetes' defaults and its encoding, however it is written (with
/// the object or through its `status` subresource): a pod's addresses in step and its
/// conditions' zero times written `null`; a namespace's phase; a load balancer's `ipMode`.
pub(crate) fn status(kind: &str, object: &mut Value) {
    match kind {
        "Pod" => {
            let status = object_field(object, "status");
            pod_addresses(status);
            let conditions = status.get_mut("conditions").and_then(Value::as_array_mut);
            for condition in conditions.into_iter().flatten().filter_map(Value::as_object_mut) {
                // `metav1.Time` values, not pointers: Go writes a zero one as `null`.
                for time in ["lastProbeTime", "lastTransitionTime"] {
                    condition.entry(time).or_insert(Value::Null);
                }
            }
        }
        "Namespace" => namespace_phase(object),
        "Service" => load_balancer_ip_mode(object),
        _ => {}
    }
}

/// A volume's status written over `before`: a changed phase gets the time of its change
/// unless the writer gave a new one; an unchanged phase keeps its time unless given one (as
/// Kubernetes' status strategy for persistent volumes).
pub(crate) fn volume_phase_transition(before: &Value, after: &mut Value) {
    const TIME: &str = "lastPhaseTransitionTime";
    let old = before.get("status");
    let old_time = old.and_then(|s| s.get(TIME)).filter(|t| !t.is_null()).cloned();
    let old_phase = old.and_then(|s| s.get("phase")).cloned();
    let status = object_field(after, "status");
    let new_time = status.get(TIME).filter(|t| !t.is_null()).cloned();
    if status.get("phase").cloned() == old_phase {
        if let (None, Some(old_time)) = (new_time, old_time) {
            status.insert(TIME.into(), old_time);
        }
    } else if new_time.is_none() || new_time == old_time {
        status.insert(TIME.into(), json!(crate::model::now()));
    }
}

/// A load balancer's ingress addresses are `VIP`s unless they say otherwise (Kubernetes'
/// `SetDefaults_Service`, the `LoadBalancerIPMode` feature being on in 1.32).
fn load_balancer_ip_mode(service: &mut Value) {
    if service.pointer("/spec/type").and_then(Value::as_str) != Some("LoadBalancer") {
        return;
    }
    let ingress = service.pointer_mut("/status/loadBalancer/ingress").and_then(Value::as_array_mut);
    for entry in ingress.into_iter().flatten().filter_map(Value::as_object_mut) {
        let has_ip = entry.get("ip").and_then(Value::as_str).is_some_and(|ip| !ip.is_empty());
        if has_ip && entry.get("ipMode").is_none_or(Value::is_null) {
            entry.insert("ipMode".into(), json!("VIP"));
        }
    }
}

/// A pod template's defaults (a ReplicationController's, a PodTemplate's): its metadata as Go
/// writes it, there even when empty, with the zero `creationTimestamp` written `null`; its pod
/// spec's defaults, as a template's.
fn pod_template(template: &mut Map<String, Value>) {
    let metadata = template.entry("metadata").or_insert_with(|| json!({}));
    if let Some(metadata) = metadata.as_object_mut() {
        metadata.entry("creationTimestamp").or_insert(Value::Null);
    }
    if let Some(pod) = template.get_mut("spec") {
        pod_spec(pod, PodSpecOf::Template);
    }
}

/// A node's `podCIDR` and `podCIDRs`, as Kubernetes' v1 conversion keeps them: the list wins,
/// and is taken from `podCIDR` only when it is empty; `podCIDR` is then its first entry. So a
/// change of `podCIDR` alone changes nothing, and one of `podCIDRs` is what validation sees.
fn node_pod_cidrs(spec: &mut Map<String, Value>) {
    let listed = spec.get("podCIDRs").and_then(Value::as_array).is_some_and(|l| !l.is_empty());
    if !listed {
        let single = spec.get("podCIDR").and_then(Value::as_str).filter(|c| !c.is_empty());
        if let Some(single) = single.map(str::to_string) {
            spec.insert("podCIDRs".into(), json!([single]));
        }
    }
    match spec.get("podCIDRs").and_then(|l| l.get(0)).cloned() {
        Some(first) => spec.insert("podCIDR".into(), first),
        None => spec.remove("podCIDR"),
    };
}

/// A pod status' `podIP`/`podIPs` and `hostIP`/`hostIPs` in step (a status write's too).
fn pod_addresses(status: &mut Map<String, Value>) {
    address_lists(status, "podIP", "podIPs");
    address_lists(status, "hostIP", "hostIPs");
}

/// A pod's address and its list, as Kubernetes' v1 conversion keeps them: the single field
/// wins (an older kubelet's), so the list starts with it; without it, it is the list's first.
fn address_lists(status: &mut Map<String, Value>, single: &str, list: &str) {
    let first = |status: &Map<String, Value>| {
        status.get(list).and_then(|l| l.get(0)).and_then(|e| e.get("ip")).cloned()
    };
    match status.get(single).and_then(Value::as_str).filter(|ip| !ip.is_empty()) {
        Some(ip) if first(status).as_ref().and_then(Value::as_str) != Some(ip) => {
            let ip = ip.to_string();
            status.insert(list.into(), json!([{"ip": ip}]));
        }
        Some(_) => {}
        None => match first(status) {
            Some(ip) => {
                status.insert(single.into(), ip);
            }
            None => {
                status.remove(single);
            }
        },
    }
}

/// The struct fields Go's encoder always writes (`omitempty` does not leave out a struct), so
/// that an object reads back as from kube-apiserver: a bare Lease with `spec: {}`, a node
/// with its status' `nodeInfo` and `daemonEndpoints`. Clients that build typed objects (the
/// Python client) get empty ones, not `None`.
fn go_structs(kind: &str, object: &mut Value) {
    let (spec, status) = match kind {
        "Pod"
        | "Node"
        | "Service"
        | "Namespace"
        | "ReplicationController"
        | "ResourceQuota"
        | "PersistentVolume"
        | "PersistentVolumeClaim"
        | "PodDisruptionBudget" => (true, true),
        "LimitRange" | "Lease" => (true, false),
        _ => (false, false),
    };
    if spec {
        object_field(object, "spec");
    }
    if status {
        object_field(object, "status");
    }
    if kind == "Event" {
        object_field(object, "involvedObject");
        object_field(object, "source");
        // Written even when empty (no `omitempty`), and times that are values, not pointers.
        let event = object.as_object_mut().expect("objects are JSON objects");
        for field in ["reportingComponent", "reportingInstance"] {
            event.entry(field).or_insert(json!(""));
        }
        for time in ["firstTimestamp", "lastTimestamp", "eventTime"] {
            event.entry(time).or_insert(Value::Null);
        }
    }
    if kind == "Node" {
        const NODE_INFO: [&str; 10] = [
            "machineID",
            "systemUUID",
            "bootID",
            "kernelVersion",
            "osImage",
            "containerRuntimeVersion",
            "kubeletVersion",
            "kubeProxyVersion",
            "operatingSystem",
            "architecture",
        ];
        let status = object_field(object, "status");
        let info = status.entry("nodeInfo").or_insert_with(|| json!({}));
        if let Some(info) = info.as_object_mut() {
            for field in NODE_INFO {
                info.entry(field).or_insert(json!(""));
            }
        }
        let endpoints = status.entry("daemonEndpoints").or_insert_with(|| json!({}));
        if let Some(endpoints) = endpoints.as_object_mut() {
            let kubelet = endpoints.entry("kubeletEndpoint").or_insert_with(|| json!({}));
            if let Some(kubelet) = kubelet.as_object_mut() {
                kubelet.entry("Port").or_insert(json!(0));
            }
        }
    }
}

/// A Secret's `stringData` is write-only, as in Kubernetes: each entry goes into `data`,
/// base64-encoded, over an entry of the same key there, and `stringData` is not kept.
fn merge_string_data(secret: &mut Map<String, Value>) {
    use base64::Engine as _;
    let Some(Value::Object(strings)) = secret.remove("stringData") else {
        return;
    };
    if strings.is_empty() {
        return;
    }
    let data = secret.entry("data").or_insert_with(|| json!({}));
    if !data.is_object() {
        *data = json!({});
    }
    let data = data.as_object_mut().expect("just made an object");
    for (key, value) in strings {
        // Not a string: left for the type check, which names the field.
        let encoded = match value.as_str() {
            Some(text) => json!(base64::engine::general_purpose::STANDARD.encode(text)),
            None => value,
        };
        data.insert(key, encoded);
    }
}

/// Drops the empty maps and lists among `fields` of `object`'s `parent` (or of `object`
/// itself): Kubernetes' types leave them out (`omitempty`), so an object whose last label was
/// removed reads without `labels`, as there.
fn drop_empty(object: &mut Value, parent: &str, fields: &[&str]) {
    let map = if parent.is_empty() { Some(object) } else { object.get_mut(parent) };
    let Some(map) = map.and_then(Value::as_object_mut) else { return };
    for field in fields {
        let empty = match map.get(*field) {
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            _ => false,
        };
        if empty {
            map.remove(*field);
        }
    }
}

fn object_field<'a>(object: &'a mut Value, field: &str) -> &'a mut Map<String, Value> {
    let map = object.as_object_mut().expect("objects are JSON objects");
    let entry = map.entry(field).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    entry.as_object_mut().expect("just made an object")
}

/// Whose pod spec is defaulted: a pod's, or a template's (which, as in Kubernetes, does not
/// get requests from its limits: that is the pod's defaulting).
#[derive(Clone, Copy, PartialEq, Eq)]
enum PodSpecOf {
    Pod,
    Template,
}

fn pod_spec(spec: &mut Value, of: PodSpecOf) {
    drop_disabled_fields(spec);
    round_amounts(spec, &["/overhead"]);
    let Some(spec) = spec.as_object_mut() else { return };
    service_account_alias(spec);
    spec.entry("restartPolicy").or_insert(json!("Always"));
    spec.entry("dnsPolicy").or_insert(json!("ClusterFirst"));
    spec.entry("schedulerName").or_insert(json!("default-scheduler"));
    spec.entry("terminationGracePeriodSeconds").or_insert(json!(30));
    spec.entry("securityContext").or_insert(json!({}));
    spec.entry("enableServiceLinks").or_insert(json!(true));
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for c in spec.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
            container(c, of);
        }
    }
    for v in spec.get_mut("volumes").and_then(Value::as_array_mut).into_iter().flatten() {
        volume(v);
    }
    if of == PodSpecOf::Pod && spec.get("hostNetwork").and_then(Value::as_bool) == Some(true) {
        host_network_ports(spec);
    }
}

/// Drops the fields of features Kubernetes 1.32 leaves off by default, as its
/// `dropDisabledPodFields` does: pod-level `resources` (PodLevelResources), containers'
/// `resizePolicy` (InPlacePodVerticalScaling) and resource claims (DynamicResourceAllocation).
fn drop_disabled_fields(spec: &mut Value) {
    let Some(spec) = spec.as_object_mut() else { return };
    spec.remove("resources");
    spec.remove("resourceClaims");
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for c in spec.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
            let Some(c) = c.as_object_mut() else { continue };
            c.remove("resizePolicy");
            if let Some(resources) = c.get_mut("resources").and_then(Value::as_object_mut) {
                resources.remove("claims");
            }
        }
    }
}

/// On the host's network a container's port is the host's: an unset `hostPort` is the
/// `containerPort` (Kubernetes' `defaultHostNetworkPorts`, for pods, not templates).
fn host_network_ports(spec: &mut Map<String, Value>) {
    for list in ["containers", "initContainers"] {
        let containers = spec.get_mut(list).and_then(Value::as_array_mut);
        for c in containers.into_iter().flatten() {
            let ports = c.get_mut("ports").and_then(Value::as_array_mut);
            for port in ports.into_iter().flatten().filter_map(Value::as_object_mut) {
                let unset = port.get("hostPort").and_then(Value::as_i64).unwrap_or(0) == 0;
                if let (true, Some(container_port)) = (unset, port.get("containerPort").cloned()) {
                    port.insert("hostPort".into(), container_port);
                }
            }
        }
    }
}

/// `serviceAccount`, the deprecated name of `serviceAccountName`, as Kubernetes' conversion
/// keeps them: the old name stands in for a missing new one, and is written back as a copy of
/// the new one (or not at all).
fn service_account_alias(spec: &mut Map<String, Value>) {
    let named = |spec: &Map<String, Value>, field| {
        spec.get(field).and_then(Value::as_str).filter(|s| !s.is_empty()).map(str::to_string)
    };
    let account = named(spec, "serviceAccountName").or_else(|| named(spec, "serviceAccount"));
    match account {
        Some(account) => {
            spec.insert("serviceAccountName".into(), json!(account));
            spec.insert("serviceAccount".into(), json!(account));
        }
        None => {
            spec.remove("serviceAccount");
        }
    }
}

/// A volume's defaults: no source at all is an `emptyDir`; a hostPath's type is `""`; the
/// files of configMap, secret, downwardAPI and projected volumes get mode 0644; a fieldRef's
/// apiVersion is `v1`.
fn volume(v: &mut Value) {
    let Some(v) = v.as_object_mut() else { return };
    if v.keys().all(|k| k == "name") {
        v.insert("emptyDir".into(), json!({}));
    }
    host_path(v);
    // A generic ephemeral volume's claim is defaulted as a claim is.
    if let Some(spec) = v
        .get_mut("ephemeral")
        .and_then(|e| e.pointer_mut("/volumeClaimTemplate/spec"))
        .and_then(Value::as_object_mut)
    {
        spec.entry("volumeMode").or_insert(json!("Filesystem"));
    }
    for (kind, source) in v.iter_mut() {
        if !matches!(kind.as_str(), "configMap" | "secret" | "downwardAPI" | "projected") {
            continue;
        }
        let Some(source) = source.as_object_mut() else { continue };
        source.entry("defaultMode").or_insert(json!(0o644));
        match kind.as_str() {
            "downwardAPI" => downward_api_files(source),
            "projected" => {
                let sources = source.get_mut("sources").and_then(Value::as_array_mut);
                for projection in sources.into_iter().flatten() {
                    let files = projection.get_mut("downwardAPI").and_then(Value::as_object_mut);
                    if let Some(files) = files {
                        downward_api_files(files);
                    }
                    // A projected token lives an hour unless asked otherwise.
                    let token = projection.get_mut("serviceAccountToken");
                    if let Some(token) = token.and_then(Value::as_object_mut) {
                        token.entry("expirationSeconds").or_insert(json!(3600));
                    }
                }
            }
            _ => {}
        }
    }
}

/// A `hostPath` source's `type` is `""` when left out (Kubernetes' `HostPathVolumeSource`
/// default: no check of what is at the path).
fn host_path(source: &mut Map<String, Value>) {
    if let Some(host_path) = source.get_mut("hostPath").and_then(Value::as_object_mut) {
        host_path.entry("type").or_insert(json!(""));
    }
}

/// The fieldRefs of a downwardAPI volume's (or projection's) files.
fn downward_api_files(source: &mut Map<String, Value>) {
    let files = source.get_mut("items").and_then(Value::as_array_mut);
    files.into_iter().flatten().for_each(field_ref);
}

/// `fieldRef.apiVersion` is `v1` unless named (Kubernetes' `ObjectFieldSelector` default);
/// a `resourceFieldRef`'s `divisor` is `"0"` when left out (a Quantity that is no pointer,
/// which Go always writes).
fn field_ref(holder: &mut Value) {
    if let Some(field_ref) = holder.get_mut("fieldRef").and_then(Value::as_object_mut) {
        let version = field_ref.entry("apiVersion").or_insert(json!("v1"));
        if version.as_str() == Some("") {
            *version = json!("v1");
        }
    }
    let resource_ref = holder.get_mut("resourceFieldRef").and_then(Value::as_object_mut);
    if let Some(resource_ref) = resource_ref {
        resource_ref.entry("divisor").or_insert(json!("0"));
    }
}

/// A probe's defaults: timeout 1 s, period 10 s, success 1, failure 3, also in place of a
/// zero (which Kubernetes cannot tell from a field not given).
fn probe(probe: &mut Value) {
    let Some(probe) = probe.as_object_mut() else { return };
    for (field, default) in [
        ("timeoutSeconds", 1),
        ("periodSeconds", 10),
        ("successThreshold", 1),
        ("failureThreshold", 3),
    ] {
        let value = probe.entry(field).or_insert(json!(0));
        if value.as_i64() == Some(0) || value.is_null() {
            *value = json!(default);
        }
    }
    // No delay is no field, as Kubernetes writes it (`omitempty`).
    if probe.get("initialDelaySeconds").is_some_and(|d| d.as_i64() == Some(0) || d.is_null()) {
        probe.remove("initialDelaySeconds");
    }
    http_get(probe.get_mut("httpGet"));
    // A gRPC probe's service is the empty name (the server's overall health), written out as
    // Kubernetes defaults it (kubectl's `describe` reads it).
    if let Some(grpc) = probe.get_mut("grpc").and_then(Value::as_object_mut) {
        let service = grpc.entry("service").or_insert(json!(""));
        if service.is_null() {
            *service = json!("");
        }
    }
}

/// An HTTP GET's (of a probe or a lifecycle hook) path is `/` and its scheme `HTTP` unless
/// named (an empty one is none, as Go's zero value).
fn http_get(action: Option<&mut Value>) {
    if let Some(action) = action.and_then(Value::as_object_mut) {
        for (field, default) in [("path", "/"), ("scheme", "HTTP")] {
            let named = action.get(field).and_then(Value::as_str).is_some_and(|v| !v.is_empty());
            if !named {
                action.insert(field.into(), json!(default));
            }
        }
    }
}

/// The tag of an image reference, as Kubernetes' `ParseImageName` reads it: `latest` when
/// the reference names neither a tag nor a digest, empty with a digest alone, none at all
/// when the reference does not parse (an upper-case repository, an empty path component...).
fn image_tag(image: &str) -> Option<&str> {
    let (named, digest) = match image.split_once('@') {
        Some((named, digest)) => (named, Some(digest)),
        None => (image, None),
    };
    if digest.is_some_and(|d| {
        let (algorithm, hex) = d.split_once(':').unwrap_or(("", ""));
        algorithm.is_empty() || hex.len() < 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit())
    }) {
        return None;
    }
    // A tag follows the last ':' after the last '/' (before it is a registry's port).
    let last_step = named.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match named[last_step..].rfind(':') {
        Some(i) => (&named[..last_step + i], Some(&named[last_step + i + 1..])),
        None => (named, None),
    };
    let tag_ok = |t: &str| {
        (1..=128).contains(&t.len())
            && !t.starts_with(['.', '-'])
            && t.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b))
    };
    if tag.is_some_and(|t| !tag_ok(t)) {
        return None;
    }
    let mut steps: Vec<&str> = name.split('/').collect();
    // A first step with a '.' or a ':', or `localhost`, is a registry (upper case allowed).
    if steps.len() > 1 && (steps[0].contains(['.', ':']) || steps[0] == "localhost") {
        let host = steps.remove(0);
        let (host_name, port) = host.split_once(':').unwrap_or((host, "1"));
        let host_ok = !host_name.is_empty()
            && host_name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.".contains(&b));
        if !host_ok || port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
    }
    // Path steps: lower-case alphanumeric runs joined by '.', '_', '__' or dashes.
    let step_ok = |step: &str| {
        let bytes = step.as_bytes();
        !step.is_empty()
            && bytes[0].is_ascii_alphanumeric()
            && bytes[bytes.len() - 1].is_ascii_alphanumeric()
            && step
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
            && !step.contains("..")
            && !step.contains("___")
    };
    if name.len() > 255 || !steps.iter().all(|s| step_ok(s)) {
        return None;
    }
    match (tag, digest) {
        (Some(tag), _) => Some(tag),
        (None, Some(_)) => Some(""),
        (None, None) => Some("latest"),
    }
}

fn container(c: &mut Value, of: PodSpecOf) {
    let Some(c) = c.as_object_mut() else { return };
    let image = c.get("image").and_then(Value::as_str).unwrap_or("");
    let policy = if image_tag(image) == Some("latest") { "Always" } else { "IfNotPresent" };
    c.entry("imagePullPolicy").or_insert(json!(policy));
    c.entry("terminationMessagePath").or_insert(json!("/dev/termination-log"));
    c.entry("terminationMessagePolicy").or_insert(json!("File"));
    let resources = c.entry("resources").or_insert(json!({}));
    round_amounts(resources, &["/limits", "/requests"]);
    // A limit without a request requests the limit (a malformed list is left to validation).
    if let Some(resources) = resources.as_object_mut().filter(|_| of == PodSpecOf::Pod) {
        let limits = resources.get("limits").and_then(Value::as_object).cloned();
        let requests = resources.entry("requests").or_insert(json!({}));
        if let (Some(limits), Some(requests)) = (limits, requests.as_object_mut()) {
            for (name, limit) in limits {
                requests.entry(name).or_insert(limit);
            }
        }
        if requests.as_object().is_some_and(Map::is_empty) {
            resources.remove("requests");
        }
    }
    for port in c.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(port) = port.as_object_mut() {
            port.entry("protocol").or_insert(json!("TCP"));
        }
    }
    for kind in ["livenessProbe", "readinessProbe", "startupProbe"] {
        c.get_mut(kind).map(probe);
    }
    if let Some(lifecycle) = c.get_mut("lifecycle") {
        for hook in ["postStart", "preStop"] {
            http_get(lifecycle.get_mut(hook).and_then(|h| h.get_mut("httpGet")));
        }
    }
    for var in c.get_mut("env").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(from) = var.get_mut("valueFrom") {
            field_ref(from);
        }
    }
}

/// A container limit's defaults, as Kubernetes fills them: the default limit from the max,
/// the default request from the default limit, else from the min.
fn limit_range_item(item: &mut Map<String, Value>) {
    if item.get("type").and_then(Value::as_str) != Some("Container") {
        return;
    }
    let amounts = |item: &Map<String, Value>, field: &str| {
        item.get(field).and_then(Value::as_object).cloned().unwrap_or_default()
    };
    let mut default = amounts(item, "default");
    for (resource, max) in amounts(item, "max") {
        default.entry(resource).or_insert(max);
    }
    let mut default_request = amounts(item, "defaultRequest");
    for (resource, amount) in default.iter().chain(&amounts(item, "min")) {
        default_request.entry(resource.clone()).or_insert(amount.clone());
    }
    for (field, filled) in [("default", default), ("defaultRequest", default_request)] {
        if !filled.is_empty() {
            item.insert(field.into(), Value::Object(filled));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::resources::RBAC_GROUP;
    use crate::model::validation;

    #[test]
    fn pod_defaults() {
        let mut pod = json!({"spec":{"containers":[{"name":"c","image":"nginx","ports":[{"containerPort":80}]}]}});
        apply("Pod", &mut pod);
        assert_eq!(pod["spec"]["restartPolicy"], "Always");
        assert_eq!(pod["spec"]["containers"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(pod["spec"]["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(pod["status"]["phase"], "Pending");
        assert!(pod["spec"].get("serviceAccount").is_none(), "admission names the account");
    }

    #[test]
    fn on_the_hosts_network_a_pods_host_ports_are_its_container_ports() {
        let spec = json!({"hostNetwork": true, "containers": [{"name": "c", "image": "i",
            "ports": [{"containerPort": 80}, {"containerPort": 81, "hostPort": 81}]}],
            "initContainers": [{"name": "i", "image": "i", "ports": [{"containerPort": 90}]}]});
        let mut pod = json!({"spec": spec.clone()});
        apply("Pod", &mut pod);
        assert_eq!(pod["spec"]["containers"][0]["ports"][0]["hostPort"], 80);
        assert_eq!(pod["spec"]["containers"][0]["ports"][1]["hostPort"], 81);
        assert_eq!(pod["spec"]["initContainers"][0]["ports"][0]["hostPort"], 90);
        // Not a template's (Kubernetes 1.28 stopped defaulting them).
        let mut rc = json!({"metadata": {}, "spec": {"template": {"spec": spec}}});
        apply("ReplicationController", &mut rc);
        assert!(rc["spec"]["template"]["spec"]["containers"][0]["ports"][0]
            .get("hostPort")
            .is_none());
        // Nor a pod on its own network.
        let mut pod = json!({"spec": {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}]}});
        apply("Pod", &mut pod);
        assert!(pod["spec"]["containers"][0]["ports"][0].get("hostPort").is_none());
    }

    #[test]
    fn the_deprecated_service_account_field_mirrors_the_new_one() {
        let account = |spec: Value| {
            let mut pod = json!({"spec": spec});
            apply("Pod", &mut pod);
            (pod["spec"]["serviceAccountName"].clone(), pod["spec"]["serviceAccount"].clone())
        };
        assert_eq!(account(json!({"serviceAccount": "old"})), (json!("old"), json!("old")));
        assert_eq!(account(json!({"serviceAccountName": "new"})), (json!("new"), json!("new")));
        let both = json!({"serviceAccountName": "new", "serviceAccount": "old"});
        assert_eq!(account(both), (json!("new"), json!("new")), "the new name wins");
        let template = json!({"metadata": {}, "spec": {"template": {"spec": {
            "serviceAccount": "robot", "containers": []}}}});
        let mut rc = template;
        apply("ReplicationController", &mut rc);
        assert_eq!(rc["spec"]["template"]["spec"]["serviceAccountName"], "robot");
    }

    #[test]
    fn bindings_name_rbac_s_group_where_left_out_and_subjects_are_checked_against_it() {
        let bindings = crate::model::resources::find(RBAC_GROUP, "v1", "rolebindings").unwrap();
        let mut binding = json!({"metadata": {"name": "b"},
            "roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "u"}, {"kind": "Group", "name": "g"},
                {"kind": "ServiceAccount", "name": "sa"}]});
        apply("RoleBinding", &mut binding);
        assert_eq!(binding["roleRef"]["apiGroup"], RBAC_GROUP);
        let mut aggregated = json!({"metadata": {"name": "agg"}, "aggregationRule": {}});
        apply("ClusterRole", &mut aggregated);
        assert_eq!(aggregated.get("rules"), Some(&Value::Null));
        let groups: Vec<&Value> = (0..3).map(|i| &binding["subjects"][i]["apiGroup"]).collect();
        assert_eq!(groups, [&json!(RBAC_GROUP), &json!(RBAC_GROUP), &Value::Null]);
        assert!(validation::validate_object(bindings, &binding).is_empty());
        binding["subjects"][0]["apiGroup"] = json!("foo");
        binding["subjects"][2]["apiGroup"] = json!("x");
        let fields: Vec<String> = validation::validate_object(bindings, &binding)
            .into_iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        assert_eq!(
            fields,
            [
                r#"subjects[0].apiGroup: Unsupported value: "foo": supported values: "rbac.authorization.k8s.io""#,
                r#"subjects[2].apiGroup: Unsupported value: "x": supported values: """#
            ]
        );
    }

    #[test]
    fn probes_volumes_and_field_refs_get_kubernetes_defaults() {
        let mut pod = json!({"spec": {"containers": [{"name": "c", "image": "i",
            "readinessProbe": {"httpGet": {"port": 80}},
            "startupProbe": {"grpc": {"port": 9000}},
            "livenessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 5,
                "timeoutSeconds": 0, "successThreshold": 0, "initialDelaySeconds": 0},
            "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/stop"}},
                "postStart": {"httpGet": {"port": 80, "path": "", "scheme": null}}},
            "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "M", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}}]}],
            "volumes": [{"name": "scratch"}, {"name": "cm", "configMap": {"name": "x"}},
                {"name": "keys", "secret": {"secretName": "s", "defaultMode": 256}},
                {"name": "host", "hostPath": {"path": "/tmp"}},
                {"name": "socket", "hostPath": {"path": "/run/x", "type": "Socket"}}]}});
        apply("Pod", &mut pod);
        let c = &pod["spec"]["containers"][0];
        assert_eq!(
            c["readinessProbe"],
            json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
                "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(c["startupProbe"]["grpc"], json!({"port": 9000, "service": ""}));
        assert_eq!(c["livenessProbe"]["periodSeconds"], 5);
        // A zero is no value, as in Go.
        assert_eq!(c["livenessProbe"]["timeoutSeconds"], 1);
        assert_eq!(c["livenessProbe"]["successThreshold"], 1);
        assert!(c["livenessProbe"].get("initialDelaySeconds").is_none(), "{c}");
        assert_eq!(c["lifecycle"]["preStop"]["httpGet"]["path"], "/stop");
        assert_eq!(c["lifecycle"]["preStop"]["httpGet"]["scheme"], "HTTP");
        let empty = &c["lifecycle"]["postStart"]["httpGet"];
        assert_eq!((&empty["path"], &empty["scheme"]), (&json!("/"), &json!("HTTP")));
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(c["env"][1]["valueFrom"]["resourceFieldRef"]["divisor"], "0");
        let volumes = &pod["spec"]["volumes"];
        assert_eq!(volumes[0], json!({"name": "scratch", "emptyDir": {}}));
        assert_eq!(volumes[1]["configMap"]["defaultMode"], 420);
        assert_eq!(volumes[2]["secret"]["defaultMode"], 256);
        assert_eq!(volumes[3]["hostPath"], json!({"path": "/tmp", "type": ""}));
        assert_eq!(volumes[4]["hostPath"]["type"], "Socket");
    }

    #[test]
    fn container_limits_fill_their_defaults_and_endpoint_ports_their_protocol() {
        let mut range = json!({"spec": {"limits": [
            {"type": "Container", "max": {"memory": "1Gi"}, "min": {"cpu": "10m"},
                "default": {"cpu": "100m"}},
            {"type": "Pod", "max": {"cpu": "2"}}]}});
        apply("LimitRange", &mut range);
        let container = &range["spec"]["limits"][0];
        assert_eq!(container["default"], json!({"cpu": "100m", "memory": "1Gi"}));
        assert_eq!(container["defaultRequest"], json!({"cpu": "100m", "memory": "1Gi"}));
        let only_min =
            &mut json!({"spec": {"limits": [{"type": "Container", "min": {"cpu": "10m"}}]}});
        apply("LimitRange", only_min);
        assert_eq!(only_min["spec"]["limits"][0]["defaultRequest"], json!({"cpu": "10m"}));
        assert!(only_min["spec"]["limits"][0].get("default").is_none());
        assert!(range["spec"]["limits"][1].get("default").is_none(), "only containers");

        let mut endpoints = json!({"subsets": [{"addresses": [{"ip": "127.0.0.9"}],
            "ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]}]});
        apply("Endpoints", &mut endpoints);
        assert_eq!(endpoints["subsets"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(endpoints["subsets"][0]["ports"][1]["protocol"], "UDP");
    }

    fn qos_of(containers: Value) -> (String, Value) {
        let mut pod = json!({"spec": {"containers": containers}});
        apply("Pod", &mut pod);
        let qos = pod["status"]["qosClass"].as_str().unwrap().to_string();
        (qos, pod["spec"]["containers"][0]["resources"].clone())
    }

    #[test]
    fn quality_of_service_follows_requests_and_limits() {
        let c = |resources: Value| json!([{"name": "c", "image": "i", "resources": resources}]);
        assert_eq!(qos_of(json!([{"name": "c", "image": "i"}])).0, "BestEffort");
        assert_eq!(qos_of(c(json!({"requests": {"cpu": "0"}}))).0, "BestEffort");
        assert_eq!(
            qos_of(c(json!({"requests": {"cpu": "100m", "memory": "64Mi"}}))).0,
            "Burstable"
        );
        // Limits alone request themselves: equal requests and limits of both are Guaranteed.
        let (qos, resources) = qos_of(c(json!({"limits": {"cpu": "1", "memory": "1Gi"}})));
        assert_eq!(qos, "Guaranteed");
        assert_eq!(resources["requests"], json!({"cpu": "1", "memory": "1Gi"}));
        let equal = json!({"requests": {"cpu": "1000m", "memory": "1073741824"},
            "limits": {"cpu": 1, "memory": "1Gi"}});
        assert_eq!(qos_of(c(equal)).0, "Guaranteed");
        let lower = json!({"requests": {"cpu": "500m"}, "limits": {"cpu": "1", "memory": "1Gi"}});
        assert_eq!(qos_of(c(lower)).0, "Burstable");
        assert_eq!(qos_of(c(json!({"limits": {"cpu": "1"}}))).0, "Burstable");
        // Every container must limit both: one that does not makes the pod Burstable.
        let two = json!([
            {"name": "a", "image": "i", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
            {"name": "b", "image": "i"}]);
        assert_eq!(qos_of(two).0, "Burstable");
        // A status the client set is kept, as on updates.
        let mut pod = json!({"spec": {"containers": []}, "status": {"qosClass": "Guaranteed"}});
        apply("Pod", &mut pod);
        assert_eq!(pod["status"]["qosClass"], "Guaranteed");
    }

    #[test]
    fn a_created_pod_starts_pending_whatever_status_it_was_sent_with() {
        let mut pod = json!({"spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.9", "qosClass": "Guaranteed"}});
        prepare_for_create("Pod", &mut pod);
        apply("Pod", &mut pod);
        assert_eq!(pod["status"], json!({"phase": "Pending", "qosClass": "BestEffort"}));
        let mut node = json!({"status": {"capacity": {"cpu": "2"}}});
        prepare_for_create("Node", &mut node);
        assert_eq!(node["status"]["capacity"]["cpu"], "2");
    }

    #[test]
    fn empty_metadata_maps_and_data_are_left_out() {
        let mut cm = json!({"metadata": {"name": "c", "labels": {}, "annotations": {"a": "b"},
            "finalizers": []}, "data": {}});
        apply("ConfigMap", &mut cm);
        assert_eq!(cm, json!({"metadata": {"name": "c", "annotations": {"a": "b"}}}));
    }

    #[test]
    fn secret_string_data_goes_into_data() {
        let mut secret = json!({"data": {"a": "b2xk", "b": "Yg=="},
            "stringData": {"a": "new", "c": "hunter2"}});
        apply("Secret", &mut secret);
        assert_eq!(
            secret,
            json!({"type": "Opaque", "data": {"a": "bmV3", "b": "Yg==", "c": "aHVudGVyMg=="}})
        );
        let mut only_strings = json!({"stringData": {"k": ""}});
        apply("Secret", &mut only_strings);
        assert_eq!(only_strings["data"], json!({"k": ""}));
        assert!(only_strings.get("stringData").is_none());
    }

    #[test]
    fn service_and_rc_defaults() {
        let mut svc = json!({"spec":{"ports":[{"port":80}, {"port":81,"nodePort":0,"targetPort":0}],
            "sessionAffinity":"ClientIP"}});
        apply("Service", &mut svc);
        assert_eq!(svc["spec"]["ports"][0], json!({"port":80,"protocol":"TCP","targetPort":80}));
        assert_eq!(svc["spec"]["ports"][1], json!({"port":81,"protocol":"TCP","targetPort":81}));
        assert_eq!(
            svc["spec"]["sessionAffinityConfig"],
            json!({"clientIP":{"timeoutSeconds":10800}})
        );
        // Back to no affinity: its configuration goes with it.
        svc["spec"]["sessionAffinity"] = json!("None");
        apply("Service", &mut svc);
        assert!(svc["spec"].get("sessionAffinityConfig").is_none(), "{svc}");
        let mut rc = json!({"metadata":{},"spec":{"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[]}}}});
        apply("ReplicationController", &mut rc);
        assert_eq!(rc["spec"]["replicas"], 1);
        let mut limited = json!({"metadata":{},"spec":{"template":{"spec":{"containers":[
            {"name":"c","image":"i","resources":{"limits":{"cpu":"100m"}}}]}}}});
        apply("ReplicationController", &mut limited);
        let resources = &limited["spec"]["template"]["spec"]["containers"][0]["resources"];
        assert_eq!(resources, &json!({"limits":{"cpu":"100m"}}), "a template gets no requests");
        let mut ns = json!({"metadata":{"name":"team","labels":{"a":"b"}}});
        apply("Namespace", &mut ns);
        assert_eq!(ns["metadata"]["labels"], json!({"a":"b","kubernetes.io/metadata.name":"team"}));
        prepare_for_create("Namespace", &mut ns);
        assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
        let mut held = json!({"spec":{"finalizers":["example.com/x"]}});
        prepare_for_create("Namespace", &mut held);
        assert_eq!(held["spec"]["finalizers"], json!(["example.com/x", "kubernetes"]));
        let mut np = json!({"spec":{"type":"NodePort","ports":[{"port":80}]}});
        apply("Service", &mut np);
        assert_eq!(np["spec"]["ipFamilies"], json!(["IPv4"]));
        assert!(np["spec"].get("ipFamilyPolicy").is_none(), "the allocator's to default");
        assert_eq!(np["spec"]["externalTrafficPolicy"], "Cluster");
        // External IPs reach a ClusterIP service from outside too; without them it has none.
        let mut external = json!({"spec":{"ports":[{"port":80}],"externalIPs":["127.9.0.1"]}});
        apply("Service", &mut external);
        assert_eq!(external["spec"]["externalTrafficPolicy"], "Cluster");
        let mut internal = json!({"spec":{"ports":[{"port":80}],"externalIPs":[]}});
        apply("Service", &mut internal);
        assert!(internal["spec"].get("externalTrafficPolicy").is_none(), "{internal}");
        assert_eq!(rc["spec"]["selector"], json!({"a":"b"}));
        assert_eq!(rc["metadata"]["labels"], json!({"a":"b"}));
    }

    #[test]
    fn slices_ports_ephemeral_claims_and_leases_as_kubernetes_defaults_them() {
        let mut slice = json!({"addressType": "IPv4", "ports": [{"port": 80}],
            "endpoints": [{"addresses": ["127.0.0.5"]}, {"addresses": ["127.0.0.6"], "conditions": null}]});
        apply("EndpointSlice", &mut slice);
        assert_eq!(slice["ports"][0], json!({"name": "", "port": 80, "protocol": "TCP"}));
        assert_eq!(slice["endpoints"][0]["conditions"], json!({}));
        assert_eq!(slice["endpoints"][1]["conditions"], json!({}));
        let mut pod = json!({"spec": {"containers": [], "volumes": [{"name": "scratch",
            "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}}]}});
        apply("Pod", &mut pod);
        let claim = &pod["spec"]["volumes"][0]["ephemeral"]["volumeClaimTemplate"]["spec"];
        assert_eq!(claim["volumeMode"], "Filesystem");
        let mut lease = json!({"spec": {"holderIdentity": "a", "strategy": "OldestEmulationVersion",
            "preferredHolder": "b"}});
        apply("Lease", &mut lease);
        assert_eq!(lease["spec"], json!({"holderIdentity": "a"}));
    }

    #[test]
    fn a_node_s_pod_cidrs_follow_the_list_as_kubernetes_converts_them() {
        let cidrs = |spec: Value| {
            let mut node = json!({"metadata": {"name": "n"}, "spec": spec});
            apply("Node", &mut node);
            (node["spec"].get("podCIDR").cloned(), node["spec"].get("podCIDRs").cloned())
        };
        let one = |cidr: &str| (Some(json!(cidr)), Some(json!([cidr])));
        assert_eq!(cidrs(json!({"podCIDR": "10.5.0.0/24"})), one("10.5.0.0/24"));
        assert_eq!(cidrs(json!({"podCIDRs": ["10.7.0.0/24"]})), one("10.7.0.0/24"));
        // The list wins over a changed single one.
        let both = json!({"podCIDR": "10.6.0.0/24", "podCIDRs": ["10.5.0.0/24"]});
        assert_eq!(cidrs(both), one("10.5.0.0/24"));
        assert_eq!(cidrs(json!({"podCIDR": ""})), (None, None));
    }

    #[test]
    fn statuses_get_their_defaults_however_written() {
        let mut lb = json!({"spec": {"type": "LoadBalancer"},
            "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}, {"hostname": "h"},
                {"ip": "1.2.3.5", "ipMode": "Proxy"}]}}});
        status("Service", &mut lb);
        let modes: Vec<&Value> =
            (0..3).map(|i| &lb["status"]["loadBalancer"]["ingress"][i]["ipMode"]).collect();
        assert_eq!(modes, [&json!("VIP"), &Value::Null, &json!("Proxy")]);
        let mut cluster_ip = json!({"spec": {"type": "ClusterIP"},
            "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}});
        status("Service", &mut cluster_ip);
        assert!(cluster_ip["status"]["loadBalancer"]["ingress"][0].get("ipMode").is_none());
        let mut pod = json!({"status": {"conditions": [{"type": "Ready", "status": "True",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
        status("Pod", &mut pod);
        assert_eq!(
            pod["status"]["conditions"][0],
            json!({"type": "Ready", "status": "True", "lastProbeTime": null,
                "lastTransitionTime": "2026-01-01T00:00:00Z"})
        );
        let mut projected = json!({"spec": {"containers": [], "volumes": [{"name": "t",
            "projected": {"sources": [{"serviceAccountToken": {"path": "token"}},
                {"serviceAccountToken": {"path": "short", "expirationSeconds": 600}}]}}]}});
        apply("Pod", &mut projected);
        let sources = &projected["spec"]["volumes"][0]["projected"]["sources"];
        assert_eq!(sources[0]["serviceAccountToken"]["expirationSeconds"], 3600);
        assert_eq!(sources[1]["serviceAccountToken"]["expirationSeconds"], 600);
    }

    #[test]
    fn a_volume_s_phase_changes_are_timed() {
        let mut pv = json!({"spec": {}, "status": {"phase": "Available"}});
        prepare_for_create("PersistentVolume", &mut pv);
        assert_eq!(pv["status"]["phase"], "Pending");
        let created = pv["status"]["lastPhaseTransitionTime"].clone();
        assert!(created.is_string(), "{pv}");
        let mut same = json!({"status": {"phase": "Pending"}});
        volume_phase_transition(&pv, &mut same);
        assert_eq!(same["status"]["lastPhaseTransitionTime"], created, "kept");
        let mut given = json!({"status": {"phase": "Bound",
            "lastPhaseTransitionTime": "2020-01-01T00:00:00Z"}});
        volume_phase_transition(&pv, &mut given);
        assert_eq!(given["status"]["lastPhaseTransitionTime"], "2020-01-01T00:00:00Z");
        let old = json!({"status": {"phase": "Pending",
            "lastPhaseTransitionTime": "2020-01-01T00:00:00Z"}});
        let mut changed = json!({"status": {"phase": "Available",
            "lastPhaseTransitionTime": "2020-01-01T00:00:00Z"}});
        volume_phase_transition(&old, &mut changed);
        assert_ne!(changed["status"]["lastPhaseTransitionTime"], "2020-01-01T00:00:00Z");
    }

    #[test]
    fn resource_amounts_finer_than_a_thousandth_round_up() {
        let mut pod = json!({"spec": {"overhead": {"cpu": "10u"}, "containers": [{"name": "c",
            "image": "i", "resources": {"limits": {"cpu": "100u", "memory": "1Gi"}}}]}});
        apply("Pod", &mut pod);
        let resources = &pod["spec"]["containers"][0]["resources"];
        assert_eq!(resources["limits"], json!({"cpu": "1m", "memory": "1Gi"}));
        assert_eq!(resources["requests"], json!({"cpu": "1m", "memory": "1Gi"}));
        assert_eq!(pod["spec"]["overhead"]["cpu"], "1m");
        let mut quota = json!({"spec": {"hard": {"cpu": "1500u", "pods": "10"}}});
        apply("ResourceQuota", &mut quota);
        assert_eq!(quota["spec"]["hard"], json!({"cpu": "2m", "pods": "10"}));
        let mut range = json!({"spec": {"limits": [{"type": "Container",
            "max": {"cpu": "0.0001"}}]}});
        apply("LimitRange", &mut range);
        assert_eq!(range["spec"]["limits"][0]["max"]["cpu"], "1m");
    }

    /// Fields of features off by default in 1.32 are dropped, in pods and templates alike.
    #[test]
    fn fields_of_features_off_in_kubernetes_1_32_are_dropped() {
        let spec = json!({"resources": {"limits": {"cpu": "1"}},
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "x"}],
            "containers": [{"name": "c", "image": "i",
                "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
                "resources": {"claims": [{"name": "gpu"}], "limits": {"cpu": "1"}}}]});
        let mut pod = json!({"spec": spec.clone()});
        apply("Pod", &mut pod);
        let mut rc = json!({"spec": {"template": {"spec": spec}}});
        apply("ReplicationController", &mut rc);
        for spec in [&pod["spec"], &rc["spec"]["template"]["spec"]] {
            assert!(spec.get("resources").is_none() && spec.get("resourceClaims").is_none());
            let container = &spec["containers"][0];
            assert!(container.get("resizePolicy").is_none(), "{container}");
            assert_eq!(container["resources"]["limits"], json!({"cpu": "1"}));
            assert!(container["resources"].get("claims").is_none(), "{container}");
        }
    }

    #[test]
    fn structs_go_always_writes_are_there_empty() {
        let mut lease = json!({"metadata": {"name": "l"}});
        apply("Lease", &mut lease);
        assert_eq!(lease["spec"], json!({}));
        assert!(lease.get("status").is_none());
        let mut node = json!({"metadata": {"name": "n"}, "status": {"nodeInfo": {"osImage": "x"}}});
        apply("Node", &mut node);
        assert_eq!(node["spec"], json!({}));
        assert_eq!(node["status"]["nodeInfo"]["osImage"], "x", "what is there stays");
        assert_eq!(node["status"]["nodeInfo"]["machineID"], "");
        assert_eq!(node["status"]["daemonEndpoints"], json!({"kubeletEndpoint": {"Port": 0}}));
        let mut event = json!({"metadata": {"name": "e"}});
        apply("Event", &mut event);
        assert_eq!((&event["source"], &event["involvedObject"]), (&json!({}), &json!({})));
        assert_eq!(
            (&event["reportingComponent"], &event["reportingInstance"]),
            (&json!(""), &json!(""))
        );
        for time in ["firstTimestamp", "lastTimestamp", "eventTime"] {
            assert_eq!(event.get(time), Some(&Value::Null), "{time}");
        }
        let mut rc = json!({"spec": {"template": {"spec": {"containers": []}}}});
        apply("ReplicationController", &mut rc);
        assert_eq!(rc["spec"]["template"]["metadata"], json!({"creationTimestamp": null}));
        let mut map = json!({"metadata": {"name": "c"}});
        apply("ConfigMap", &mut map);
        assert_eq!(map, json!({"metadata": {"name": "c"}}), "no struct to add");
    }

    #[test]
    fn a_pod_s_address_and_its_list_agree_the_address_winning() {
        let addresses = |status: Value| {
            let mut status = status.as_object().unwrap().clone();
            pod_addresses(&mut status);
            Value::Object(status)
        };
        let one = json!({"podIP": "127.64.0.2", "podIPs": [{"ip": "127.64.0.2"}]});
        assert_eq!(addresses(json!({"podIP": "127.64.0.2"})), one);
        assert_eq!(addresses(json!({"podIPs": [{"ip": "127.64.0.2"}]})), one);
        let apart = json!({"podIP": "127.64.0.2", "podIPs": [{"ip": "127.64.0.9"}]});
        assert_eq!(addresses(apart), one, "the single address wins");
        let host = addresses(json!({"hostIP": "127.0.0.1"}));
        assert_eq!(host, json!({"hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}]}));
        assert_eq!(addresses(json!({"podIP": ""})), json!({}));
    }

    #[test]
    fn the_pull_policy_follows_the_tag_as_kubernetes_parses_it() {
        let sha = "sha256:".to_string() + &"a".repeat(64);
        for (image, tag) in [
            ("nginx", Some("latest")),
            ("nginx:1.25", Some("1.25")),
            ("nginx:latest", Some("latest")),
            ("registry.local:5000/team/app", Some("latest")),
            ("registry.local:5000/team/app:v2", Some("v2")),
            ("MyRepo/App", None),
            ("a//b", None),
        ] {
            assert_eq!(image_tag(image), tag, "{image}");
        }
        assert_eq!(image_tag(&format!("nginx:latest@{sha}")), Some("latest"));
        assert_eq!(image_tag(&format!("nginx@{sha}")), Some(""));
        let policy = |image: &str| {
            let mut c = json!({"name": "c", "image": image});
            container(&mut c, PodSpecOf::Pod);
            c["imagePullPolicy"].as_str().unwrap().to_string()
        };
        assert_eq!(policy("MyRepo/App"), "IfNotPresent");
        assert_eq!(policy(&format!("nginx:latest@{sha}")), "Always");
        assert_eq!(policy("busybox"), "Always");
        assert_eq!(policy("busybox:1.36"), "IfNotPresent");
    }
}
