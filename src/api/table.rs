//! Server-side printing: the `Table` form kubectl asks for, with the columns users know.

use std::collections::BTreeSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use kplane_actors::model::{json, quantity, ResourceType, StoredObject};
use serde_json::{json, Value};

/// What each row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    /// The `includeObject` parameter's value (none or empty: `Metadata`), or the value it
    /// does not take.
    pub fn from_query(value: Option<&str>) -> Result<Self, String> {
        match value.unwrap_or("") {
            "None" => Ok(IncludeObject::None),
            "Object" => Ok(IncludeObject::Object),
            "Metadata" | "" => Ok(IncludeObject::Metadata),
            other => Err(other.to_string()),
        }
    }
}

struct Column {
    name: &'static str,
    kind: &'static str,
    format: &'static str,
    priority: u8,
    description: &'static str,
}

const fn col(name: &'static str, priority: u8, description: &'static str) -> Column {
    Column { name, kind: "string", format: "", priority, description }
}

/// A column of whole numbers.
const fn integer(column: Column) -> Column {
    Column { kind: "integer", ..column }
}

/// A column of times (the default table's `Created At`).
const fn date(column: Column) -> Column {
    Column { kind: "date", ..column }
}

const NAME: Column = Column {
    name: "Name",
    kind: "string",
    format: "name",
    priority: 0,
    description: "Name must be unique within a namespace.",
};
const AGE: Column = col("Age", 0, "CreationTimestamp is the time this object was created.");
const STORAGE_CLASS: Column = col("StorageClass", 0, "The storage class of the volume.");
const ATTRIBUTES_CLASS: Column =
    col("VolumeAttributesClass", 0, "The volume attributes class of the volume.");
const VOLUME_MODE: Column = col("VolumeMode", 1, "Filesystem or Block.");

fn columns(kind: &str) -> Vec<Column> {
    match kind {
        "Pod" => vec![
            NAME,
            col("Ready", 0, "The aggregate readiness state of this pod for accepting traffic."),
            col("Status", 0, "The aggregate status of the containers in this pod."),
            col(
                "Restarts",
                0,
                "The number of times the containers in this pod have been restarted.",
            ),
            AGE,
            col("IP", 1, "IP address allocated to the pod."),
            col("Node", 1, "Name of the Node this pod is running on."),
            col("Nominated Node", 1, "Name of the node where the pod is nominated."),
            col("Readiness Gates", 1, "Pod readiness gates."),
        ],
        "Node" => vec![
            NAME,
            col("Status", 0, "The status of the node."),
            col("Roles", 0, "The roles of the node."),
            AGE,
            col("Version", 0, "Kubelet version reported by the node."),
            col("Internal-IP", 1, "Internal IP of the node."),
            col("External-IP", 1, "External IP of the node."),
            col("OS-Image", 1, "OS image reported by the node."),
            col("Kernel-Version", 1, "Kernel version reported by the node."),
            col("Container-Runtime", 1, "Container runtime reported by the node."),
        ],
        "Service" => vec![
            NAME,
            col("Type", 0, "The type of the service."),
            col("Cluster-IP", 0, "The cluster IP of the service."),
            col("External-IP", 0, "External IPs of the service."),
            col("Port(s)", 0, "The ports of the service."),
            AGE,
            col("Selector", 1, "Pods the service routes to."),
        ],
        "Namespace" => vec![NAME, col("Status", 0, "The status of the namespace."), AGE],
        "ReplicationController" => vec![
            NAME,
            integer(col("Desired", 0, "Number of desired pods.")),
            integer(col("Current", 0, "Number of pods currently running.")),
            integer(col("Ready", 0, "Number of ready pods.")),
            AGE,
            col("Containers", 1, "Names of each container in the template."),
            col("Images", 1, "Images referenced by each container in the template."),
            col("Selector", 1, "Label selector of the pods."),
        ],
        "Event" => vec![
            col("Last Seen", 0, "Time of the last occurrence."),
            col("Type", 0, "Type of the event."),
            col("Reason", 0, "Why the event was generated."),
            col("Object", 0, "The object this event is about."),
            col("Subobject", 1, "The part of the object this event is about."),
            col("Source", 1, "The component reporting this event."),
            col("Message", 0, "A human-readable description."),
            col("First Seen", 1, "Time of the first occurrence."),
            col("Count", 1, "How many times this event occurred."),
            Column { format: "name", ..col("Name", 1, "Name of the event.") },
        ],
        "Endpoints" => vec![NAME, col("Endpoints", 0, "Endpoints of the service."), AGE],
        "PodTemplate" => vec![
            NAME,
            col("Containers", 0, "Names of each container in the template."),
            col("Images", 0, "Images referenced by each container in the template."),
            col("Pod Labels", 0, "The labels for the pod template."),
        ],
        "ConfigMap" => vec![NAME, col("Data", 0, "Number of data entries."), AGE],
        "Secret" => vec![
            NAME,
            col("Type", 0, "The type of the secret."),
            col("Data", 0, "Number of data entries."),
            AGE,
        ],
        "PersistentVolumeClaim" => vec![
            NAME,
            col("Status", 0, "Phase of the claim."),
            col("Volume", 0, "The bound volume."),
            col("Capacity", 0, "Capacity of the bound volume."),
            col("Access Modes", 0, "Access modes of the claim."),
            STORAGE_CLASS,
            ATTRIBUTES_CLASS,
            AGE,
            VOLUME_MODE,
        ],
        "PersistentVolume" => vec![
            NAME,
            col("Capacity", 0, "Capacity of the volume."),
            col("Access Modes", 0, "Access modes of the volume."),
            col("Reclaim Policy", 0, "What happens when the claim is released."),
            col("Status", 0, "Phase of the volume."),
            col("Claim", 0, "The claim bound to the volume."),
            STORAGE_CLASS,
            ATTRIBUTES_CLASS,
            col("Reason", 0, "Why the volume is in its phase."),
            AGE,
            VOLUME_MODE,
        ],
        "ServiceAccount" => {
            vec![NAME, col("Secrets", 0, "Number of secrets the service account names."), AGE]
        }
        "ResourceQuota" => vec![
            NAME,
            AGE,
            col("Request", 0, "Used and hard amounts of the quota's non-limit resources."),
            col("Limit", 0, "Used and hard amounts of the quota's limits."),
        ],
        "LimitRange" => {
            vec![NAME, date(col("Created At", 0, "When the limit range was created."))]
        }
        "Role" | "ClusterRole" => {
            vec![NAME, date(col("Created At", 0, "When the role was created."))]
        }
        "RoleBinding" | "ClusterRoleBinding" => vec![
            NAME,
            col("Role", 0, "The role the binding grants."),
            AGE,
            col("Users", 1, "The users the binding names."),
            col("Groups", 1, "The groups the binding names."),
            col("ServiceAccounts", 1, "The service accounts the binding names."),
        ],
        "Lease" => vec![NAME, col("Holder", 0, "The current holder of the lease."), AGE],
        "ComponentStatus" => vec![
            NAME,
            col("Status", 0, "Status of the component conditions"),
            col("Message", 0, "Message of the component conditions"),
            col("Error", 0, "Error of the component conditions"),
        ],
        "PriorityClass" => vec![
            NAME,
            Column {
                kind: "integer",
                ..col("Value", 0, "value represents the integer value of this priority class.")
            },
            Column {
                kind: "boolean",
                ..col(
                    "Global-Default",
                    0,
                    "globalDefault specifies whether this PriorityClass should be considered as \
                     the default priority for pods that do not have any priority class.",
                )
            },
            AGE,
            col(
                "PreemptionPolicy",
                0,
                "preemptionPolicy is the Policy for preempting pods with lower priority.",
            ),
        ],
        "PodDisruptionBudget" => vec![
            NAME,
            col("Min Available", 0, "The minimum number of pods that must be available."),
            col("Max Unavailable", 0, "The maximum number of pods that may be unavailable."),
            Column {
                kind: "integer",
                ..col(
                    "Allowed Disruptions",
                    0,
                    "Calculated number of pods that may be disrupted at this time.",
                )
            },
            AGE,
        ],
        "Scale" => vec![
            Column { format: "", ..NAME },
            Column {
                kind: "integer",
                ..col(
                    "Desired",
                    0,
                    "replicas is the desired number of instances for the scaled object.",
                )
            },
            Column {
                kind: "integer",
                ..col(
                    "Available",
                    0,
                    "replicas is the actual number of observed instances of the scaled object.",
                )
            },
            AGE,
        ],
        "EndpointSlice" => vec![
            NAME,
            col("AddressType", 0, "The type of the addresses of the slice."),
            col("Ports", 0, "The ports of the slice."),
            col("Endpoints", 0, "The first addresses of the slice."),
            AGE,
        ],
        // As metrics-server prints them: the usage of each resource, and the window.
        "NodeMetrics" | "PodMetrics" => vec![
            Column { description: "Name of the resource", ..NAME },
            Column { format: "quantity", ..col("cpu", 0, "") },
            Column { format: "quantity", ..col("memory", 0, "") },
            Column { format: "duration", ..col("Window", 0, "") },
        ],
        _ => vec![NAME, AGE],
    }
}

/// A metrics object's usage of `resource`: a node's, or the sum of a pod's containers', in
/// canonical form (`1500m`), as metrics-server's table writes it.
fn metrics_usage(o: &Value, resource: &str) -> String {
    let usages: Vec<&str> = match o.get("containers").and_then(Value::as_array) {
        Some(containers) => {
            containers.iter().map(|c| s(c, &format!("/usage/{resource}"))).collect()
        }
        None => vec![s(o, &format!("/usage/{resource}"))],
    };
    // Nanocores and kibibytes, as the scraper writes them.
    let unit = if resource == "cpu" { "n" } else { "Ki" };
    let total: Option<i128> =
        usages.iter().map(|u| u.strip_suffix(unit).and_then(|n| n.parse::<i128>().ok())).sum();
    let Some(total) = total else { return usages.join("+") };
    let text = format!("{total}{unit}");
    quantity::canonical(&text).ok().flatten().unwrap_or(text)
}

fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    json::at(v, pointer).and_then(Value::as_str).unwrap_or("")
}

/// An event's SOURCE cell, as kubectl's printer writes it: the component, and its host (or
/// instance) after a comma when there is one.
fn event_source(component: &str, host: &str) -> String {
    if host.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {host}")
    }
}

/// One field (`name`, `image`) of each container in the list at `pointer`, joined by commas
/// (kubectl's Containers and Images columns).
fn container_cells(object: &Value, pointer: &str, field: &str) -> String {
    let containers = json::at(object, pointer).and_then(Value::as_array);
    let cells: Vec<&str> =
        containers.into_iter().flatten().map(|c| c[field].as_str().unwrap_or("")).collect();
    cells.join(",")
}

/// A pod's READINESS GATES cell, as kubectl's printer writes it: how many of its gates' condition
/// types hold (the first condition of each type), of how many; `<none>` without gates.
fn readiness_gates(pod: &Value) -> String {
    let gates = json::at(pod, "/spec/readinessGates").and_then(Value::as_array);
    let Some(gates) = gates.filter(|g| !g.is_empty()) else { return "<none>".into() };
    let conditions = json::at(pod, "/status/conditions").and_then(Value::as_array);
    let holding = gates
        .iter()
        .filter(|gate| {
            let mut listed = conditions.into_iter().flatten();
            listed
                .find(|c| c["type"] == gate["conditionType"])
                .is_some_and(|c| c["status"] == "True")
        })
        .count();
    format!("{holding}/{}", gates.len())
}

/// `value`, or `absent` when it is empty.
fn or<'a>(value: &'a str, absent: &'a str) -> &'a str {
    if value.is_empty() {
        absent
    } else {
        value
    }
}

fn or_none(value: String) -> String {
    if value.is_empty() {
        "<none>".into()
    } else {
        value
    }
}

/// Human age of a timestamp, as kubectl prints it (`45s`, `5m3s`, `3h`, `2d4h`).
pub fn age(timestamp: &str, now: DateTime<Utc>) -> String {
    match DateTime::parse_from_rfc3339(timestamp) {
        Ok(t) => since(t.with_timezone(&Utc), now),
        Err(_) => "<unknown>".into(),
    }
}

/// How long before `now` the time `t` was, in kubectl's short form (`5m3s`, `2d4h`).
fn since(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (now - t).num_seconds();
    // A clock a second ahead is now; further ahead, the time is not believed.
    if secs < -1 {
        return "<invalid>".into();
    }
    let secs = secs.max(0);
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86400);
    match secs {
        _ if secs < 120 => format!("{secs}s"),
        _ if m < 10 && secs % 60 != 0 => format!("{m}m{}s", secs % 60),
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 && m % 60 != 0 => format!("{h}h{}m", m % 60),
        _ if h < 48 => format!("{h}h"),
        _ if d < 8 && h % 24 != 0 => format!("{d}d{}h", h % 24),
        _ if d < 365 * 2 => format!("{d}d"),
        _ if d < 365 * 8 && d % 365 != 0 => format!("{}y{}d", d / 365, d % 365),
        _ => format!("{}y", d / 365),
    }
}

fn cells(kind: &str, o: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let name = json!(s(o, "/metadata/name"));
    let created = age(s(o, "/metadata/creationTimestamp"), now);
    let len = |p: &str| json::at(o, p).and_then(Value::as_object).map_or(0, |m| m.len());
    match kind {
        "Pod" => {
            let statuses = json::at(o, "/status/containerStatuses").and_then(Value::as_array);
            let mut status = s(o, "/status/phase").to_string();
            if !s(o, "/status/reason").is_empty() {
                status = s(o, "/status/reason").to_string();
            }
            let conditions = json::at(o, "/status/conditions").and_then(Value::as_array);
            let gated = conditions
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated");
            if gated {
                status = "SchedulingGated".into();
            }
            // As kubectl's printer: an init container not done yet names the status
            // (`Init:1/2`, `Init:Error`, `Init:CrashLoopBackOff`); then the first container
            // (from the front) that waits or has ended (`Completed`, `Error`,
            // `CrashLoopBackOff`), unless one still runs (`Running`, or `NotReady` without a
            // Ready condition).
            let initializing = init_status(o).map(|init| status = init).is_some();
            let conditions = json::at(o, "/status/conditions").and_then(Value::as_array);
            let holds = |condition: &str| {
                conditions.is_some_and(|c| {
                    c.iter().any(|c| c["type"] == condition && c["status"] == "True")
                })
            };
            let initialized = holds("Initialized");
            let restarts = restarts(o, !initializing || initialized, now);
            let (ready, total) = ready_containers(o, !initializing || initialized);
            let mut running = false;
            let statuses = statuses.filter(|_| !initializing || initialized);
            for c in statuses.into_iter().flatten().rev() {
                let waiting = s(c, "/state/waiting/reason");
                let terminated = json::at(c, "/state/terminated");
                if !waiting.is_empty() {
                    status = waiting.to_string();
                } else if let Some(terminated) = terminated {
                    status = terminated_reason(terminated);
                } else if c["ready"] == true && json::at(c, "/state/running").is_some() {
                    running = true;
                }
            }
            if status == "Completed" && running {
                status = if holds("Ready") { "Running" } else { "NotReady" }.into();
            }
            // Being deleted: `Unknown` on a lost node, `Terminating` until it has finished.
            if json::at(o, "/metadata/deletionTimestamp").is_some() {
                if s(o, "/status/reason") == "NodeLost" {
                    status = "Unknown".into();
                } else if !matches!(s(o, "/status/phase"), "Succeeded" | "Failed") {
                    status = "Terminating".into();
                }
            }
            vec![
                name,
                json!(format!("{ready}/{total}")),
                json!(status),
                json!(restarts),
                json!(created),
                json!(or_none(s(o, "/status/podIP").into())),
                json!(or_none(s(o, "/spec/nodeName").into())),
                json!(or_none(s(o, "/status/nominatedNodeName").into())),
                json!(readiness_gates(o)),
            ]
        }
        "Node" => {
            let conditions = json::at(o, "/status/conditions").and_then(Value::as_array);
            let ready = conditions
                .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
                // As kubectl's printer: `NotReady` for any status but True (an agent out of
                // touch leaves it Unknown), `Unknown` only without the condition.
                .map(|c| if c["status"] == "True" { "Ready" } else { "NotReady" })
                .unwrap_or("Unknown");
            let mut status = ready.to_string();
            if json::at(o, "/spec/unschedulable") == Some(&json!(true)) {
                status.push_str(",SchedulingDisabled");
            }
            // As kubectl's printer finds them: `node-role.kubernetes.io/ROLE` labels and the
            // older `kubernetes.io/role: ROLE`, sorted, each once.
            let labels = json::at(o, "/metadata/labels").and_then(Value::as_object);
            let roles: std::collections::BTreeSet<&str> = (labels.into_iter().flatten())
                .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
                    Some(role) => Some(role),
                    None if k == "kubernetes.io/role" => v.as_str(),
                    None => None,
                })
                .filter(|role| !role.is_empty())
                .collect();
            let roles: Vec<&str> = roles.into_iter().collect();
            let address = |t: &str| {
                json::at(o, "/status/addresses")
                    .and_then(Value::as_array)
                    .and_then(|a| a.iter().find(|a| a["type"] == t))
                    .map(|a| s(a, "/address").to_string())
                    .unwrap_or_default()
            };
            vec![
                name,
                json!(status),
                json!(or_none(roles.join(","))),
                json!(created),
                json!(s(o, "/status/nodeInfo/kubeletVersion")),
                json!(or_none(address("InternalIP"))),
                json!(or_none(address("ExternalIP"))),
                json!(or(s(o, "/status/nodeInfo/osImage"), "<unknown>")),
                json!(or(s(o, "/status/nodeInfo/kernelVersion"), "<unknown>")),
                json!(or(s(o, "/status/nodeInfo/containerRuntimeVersion"), "<unknown>")),
            ]
        }
        "Service" => {
            let ports: Vec<String> = json::at(o, "/spec/ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|p| {
                    let node_port =
                        p["nodePort"].as_i64().map(|n| format!(":{n}")).unwrap_or_default();
                    format!("{}{node_port}/{}", p["port"], p["protocol"].as_str().unwrap_or("TCP"))
                })
                .collect();
            let svc_type = s(o, "/spec/type");
            let external_ips = json::at(o, "/spec/externalIPs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|i| i.as_str().map(String::from));
            // As kubectl's printer: a load balancer's ingress (IP, else hostname; sorted, once
            // each) and then the external IPs; the other types show only the external IPs.
            let external = match svc_type {
                "ExternalName" => s(o, "/spec/externalName").to_string(),
                "LoadBalancer" => {
                    let ingress: BTreeSet<String> = json::at(o, "/status/loadBalancer/ingress")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .map(|i| match s(i, "/ip") {
                            "" => s(i, "/hostname").to_string(),
                            ip => ip.to_string(),
                        })
                        .filter(|a| !a.is_empty())
                        .collect();
                    let all: Vec<String> = ingress.into_iter().chain(external_ips).collect();
                    if all.is_empty() {
                        "<pending>".into()
                    } else {
                        all.join(",")
                    }
                }
                "ClusterIP" | "NodePort" => or_none(external_ips.collect::<Vec<_>>().join(",")),
                _ => "<unknown>".into(),
            };
            vec![
                name,
                json!(svc_type),
                json!(or_none(s(o, "/spec/clusterIP").into())),
                json!(external),
                json!(or_none(ports.join(","))),
                json!(created),
                json!(or_none(selector_string(json::at(o, "/spec/selector")))),
            ]
        }
        "Namespace" => vec![name, json!(s(o, "/status/phase")), json!(created)],
        "PodTemplate" => {
            let list = |field: &str| container_cells(o, "/template/spec/containers", field);
            let labels = selector_string(json::at(o, "/template/metadata/labels"));
            vec![name, json!(list("name")), json!(list("image")), json!(or_none(labels))]
        }
        "ReplicationController" => {
            let list = |field: &str| container_cells(o, "/spec/template/spec/containers", field);
            let n = |p: &str| json::at(o, p).and_then(Value::as_i64).unwrap_or(0);
            vec![
                name,
                json!(n("/spec/replicas")),
                json!(n("/status/replicas")),
                json!(n("/status/readyReplicas")),
                json!(created),
                json!(list("name")),
                json!(list("image")),
                json!(or_none(selector_string(json::at(o, "/spec/selector")))),
            ]
        }
        "Event" => {
            // Either form: core/v1, or events.k8s.io/v1 (regarding, note, deprecated*).
            let first_of = |pointers: &[&str]| {
                pointers.iter().map(|p| s(o, p)).find(|t| !t.is_empty()).unwrap_or("")
            };
            // As kubectl's printer: first seen at `firstTimestamp` or `eventTime`; last seen
            // at a series' last observation, else `lastTimestamp`, else when first seen; the
            // count is the series', else `count` (none in the new API: 1).
            let first = first_of(&["/firstTimestamp", "/deprecatedFirstTimestamp", "/eventTime"]);
            let series = o.get("series").filter(|series| !series.is_null());
            let last = match series {
                Some(series) => s(series, "/lastObservedTime"),
                None => [first_of(&["/lastTimestamp", "/deprecatedLastTimestamp"]), first]
                    .into_iter()
                    .find(|t| !t.is_empty())
                    .unwrap_or(""),
            };
            let kind = first_of(&["/involvedObject/kind", "/regarding/kind"]).to_lowercase();
            let object = match first_of(&["/involvedObject/name", "/regarding/name"]) {
                "" => kind,
                named => format!("{kind}/{named}"),
            };
            let count = match series {
                Some(series) => series.get("count").and_then(Value::as_i64).unwrap_or(0),
                None => ["/count", "/deprecatedCount"]
                    .iter()
                    .find_map(|p| json::at(o, p).and_then(Value::as_i64))
                    .filter(|count| *count != 0)
                    .unwrap_or(1),
            };
            vec![
                json!(age(last, now)),
                json!(s(o, "/type")),
                json!(s(o, "/reason")),
                json!(object),
                json!(first_of(&["/involvedObject/fieldPath", "/regarding/fieldPath"])),
                json!(event_source(
                    first_of(&[
                        "/source/component",
                        "/deprecatedSource/component",
                        "/reportingComponent",
                        "/reportingController"
                    ]),
                    first_of(&["/source/host", "/deprecatedSource/host", "/reportingInstance"])
                )),
                json!(first_of(&["/message", "/note"]).trim()),
                json!(age(first, now)),
                json!(count),
                name,
            ]
        }
        "Endpoints" => vec![name, json!(endpoints_cell(o)), json!(created)],
        "ConfigMap" => vec![name, json!(len("/data") + len("/binaryData")), json!(created)],
        "Secret" => vec![name, json!(s(o, "/type")), json!(len("/data")), json!(created)],
        "PersistentVolumeClaim" => {
            // Capacity and access modes are the bound volume's, from the status, once the
            // claim names one; the class is the beta annotation's first, as kubectl prints it.
            let named = !s(o, "/spec/volumeName").is_empty();
            let (capacity, modes) = match named {
                true => (
                    or(s(o, "/status/capacity/storage"), "0").to_string(),
                    access_modes(json::at(o, "/status/accessModes")),
                ),
                false => (String::new(), String::new()),
            };
            let class = kplane_actors::model::storage_class(o);
            vec![
                name,
                json!(phase_or_terminating(o)),
                json!(s(o, "/spec/volumeName")),
                json!(capacity),
                json!(modes),
                json!(class),
                json!(unset(s(o, "/spec/volumeAttributesClassName"))),
                json!(created),
                json!(or(s(o, "/spec/volumeMode"), "<unset>")),
            ]
        }
        "PersistentVolume" => {
            let claim = match s(o, "/spec/claimRef/name") {
                "" => String::new(),
                n => format!("{}/{n}", s(o, "/spec/claimRef/namespace")),
            };
            vec![
                name,
                json!(s(o, "/spec/capacity/storage")),
                json!(access_modes(json::at(o, "/spec/accessModes"))),
                json!(s(o, "/spec/persistentVolumeReclaimPolicy")),
                json!(phase_or_terminating(o)),
                json!(claim),
                json!(kplane_actors::model::storage_class(o)),
                json!(unset(s(o, "/spec/volumeAttributesClassName"))),
                json!(s(o, "/status/reason")),
                json!(created),
                json!(or(s(o, "/spec/volumeMode"), "<unset>")),
            ]
        }
        "ServiceAccount" => {
            let secrets = json::at(o, "/secrets").and_then(Value::as_array).map_or(0, Vec::len);
            vec![name, json!(secrets), json!(created)]
        }
        "ResourceQuota" => {
            let (requests, limits) = quota_usage(o);
            vec![name, json!(created), json!(requests), json!(limits)]
        }
        "LimitRange" | "Role" | "ClusterRole" => {
            vec![name, json!(s(o, "/metadata/creationTimestamp"))]
        }
        "RoleBinding" | "ClusterRoleBinding" => {
            let role = format!("{}/{}", s(o, "/roleRef/kind"), s(o, "/roleRef/name"));
            let subjects = json::at(o, "/subjects").and_then(Value::as_array);
            let of_kind = |kind: &str| -> String {
                let named = subjects.into_iter().flatten().filter(|x| x["kind"] == kind);
                // A service account as the subject names it ("/sa" without a namespace).
                let names = named.map(|x| match (kind, s(x, "/namespace")) {
                    ("ServiceAccount", namespace) => format!("{namespace}/{}", s(x, "/name")),
                    _ => s(x, "/name").to_string(),
                });
                names.collect::<Vec<_>>().join(", ")
            };
            let (users, groups, accounts) =
                (of_kind("User"), of_kind("Group"), of_kind("ServiceAccount"));
            vec![name, json!(role), json!(created), json!(users), json!(groups), json!(accounts)]
        }
        "Lease" => vec![name, json!(s(o, "/spec/holderIdentity")), json!(created)],
        "ComponentStatus" => {
            // Its `Healthy` condition, as kube-apiserver's printer reads it.
            let conditions = json::at(o, "/conditions").and_then(Value::as_array);
            let healthy = conditions.into_iter().flatten().find(|c| c["type"] == "Healthy");
            let (status, message, error) = match healthy {
                Some(c) => (
                    if c["status"] == "True" { "Healthy" } else { "Unhealthy" },
                    s(c, "/message"),
                    s(c, "/error"),
                ),
                None => ("Unknown", "", ""),
            };
            vec![name, json!(status), json!(message), json!(error)]
        }
        "Scale" => {
            let replicas = |p: &str| json::at(o, p).and_then(Value::as_i64).unwrap_or(0);
            vec![
                name,
                json!(replicas("/spec/replicas")),
                json!(replicas("/status/replicas")),
                json!(created),
            ]
        }
        "PriorityClass" => {
            let value = json::at(o, "/value").and_then(Value::as_i64).unwrap_or(0);
            let default = json::at(o, "/globalDefault").and_then(Value::as_bool).unwrap_or(false);
            let policy = s(o, "/preemptionPolicy");
            vec![name, json!(value), json!(default), json!(created), json!(policy)]
        }
        "PodDisruptionBudget" => {
            let amount = |field: &str| match json::at(o, &format!("/spec/{field}")) {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => "N/A".to_string(),
            };
            let allowed = json::at(o, "/status/disruptionsAllowed").and_then(Value::as_i64);
            let (min, max) = (amount("minAvailable"), amount("maxUnavailable"));
            vec![name, json!(min), json!(max), json!(allowed.unwrap_or(0)), json!(created)]
        }
        "EndpointSlice" => {
            let (ports, endpoints) = slice_columns(o);
            vec![name, json!(s(o, "/addressType")), json!(ports), json!(endpoints), json!(created)]
        }
        "NodeMetrics" | "PodMetrics" => vec![
            name,
            json!(metrics_usage(o, "cpu")),
            json!(metrics_usage(o, "memory")),
            json!(s(o, "/window")),
        ],
        _ => vec![name, json!(created)],
    }
}

/// How kubectl names a container's end: its reason, else `Signal:N` or `ExitCode:N`.
fn terminated_reason(terminated: &Value) -> String {
    let signal = terminated["signal"].as_i64().filter(|n| *n != 0);
    match (terminated["reason"].as_str().filter(|r| !r.is_empty()), signal) {
        (Some(reason), _) => reason.to_string(),
        (None, Some(signal)) => format!("Signal:{signal}"),
        (None, None) => format!("ExitCode:{}", terminated["exitCode"].as_i64().unwrap_or(0)),
    }
}

/// The RESTARTS of a pod, as kubectl prints them: the restarts summed, and how long ago the
/// last restart's run ended (`3 (2m31s ago)`). While the pod initializes, those of its init
/// containers; once initialized, those of its containers and its sidecars (init containers
/// that restart `Always`).
fn restarts(pod: &Value, initialized: bool, now: DateTime<Utc>) -> String {
    let statuses = |path: &str| json::at(pod, path).and_then(Value::as_array).into_iter().flatten();
    let counted: Vec<&Value> = if initialized {
        let sidecars = statuses("/status/initContainerStatuses").filter(|c| sidecar(pod, c));
        sidecars.chain(statuses("/status/containerStatuses")).collect()
    } else {
        // Up to the init container the pod waits for, as kubectl counts them.
        let mut counted = Vec::new();
        for c in statuses("/status/initContainerStatuses") {
            counted.push(c);
            if !init_done(pod, c) {
                break;
            }
        }
        counted
    };
    let count: i64 = counted.iter().filter_map(|c| c["restartCount"].as_i64()).sum();
    let last = counted
        .iter()
        .filter_map(|c| json::at(c, "/lastState/terminated/finishedAt").and_then(Value::as_str))
        .filter_map(|t| DateTime::parse_from_rfc3339(t).ok())
        .max();
    match last {
        Some(last) if count != 0 => format!("{count} ({} ago)", since(last.into(), now)),
        _ => count.to_string(),
    }
}

/// Whether an init container no longer holds the pod back, as kubectl reads its status: it
/// ended well, or it is a sidecar that has started.
fn init_done(pod: &Value, status: &Value) -> bool {
    json::at(status, "/state/terminated").is_some_and(|t| t["exitCode"] == 0)
        || (sidecar(pod, status) && status["started"] == true)
}

/// Whether the init container status `status` is a sidecar's: its spec restarts `Always`.
fn sidecar(pod: &Value, status: &Value) -> bool {
    let specs = json::at(pod, "/spec/initContainers").and_then(Value::as_array);
    (specs.into_iter().flatten())
        .any(|spec| spec["name"] == status["name"] && spec["restartPolicy"] == "Always")
}

/// The READY of a pod, as kubectl counts it: of its containers and sidecars (init containers
/// that restart `Always`), those ready: the sidecars that have started, up to the first init
/// container not done, and, once the pod is past its init containers (`containers_counted`),
/// the containers ready and running.
fn ready_containers(pod: &Value, containers_counted: bool) -> (usize, usize) {
    let init_specs = json::at(pod, "/spec/initContainers").and_then(Value::as_array);
    let sidecars =
        init_specs.into_iter().flatten().filter(|spec| spec["restartPolicy"] == "Always").count();
    let containers =
        json::at(pod, "/spec/containers").and_then(Value::as_array).map_or(0, Vec::len);
    let statuses = |path: &str| json::at(pod, path).and_then(Value::as_array).into_iter().flatten();
    let mut ready = 0;
    for c in statuses("/status/initContainerStatuses") {
        if !init_done(pod, c) {
            break;
        }
        // A sidecar's readiness (one that ended well is not ready).
        ready += usize::from(c["ready"] == true && json::at(c, "/state/terminated").is_none());
    }
    if containers_counted {
        ready += statuses("/status/containerStatuses")
            .filter(|c| c["ready"] == true && json::at(c, "/state/running").is_some())
            .filter(|c| s(c, "/state/waiting/reason").is_empty())
            .count();
    }
    (ready, sidecars + containers)
}

/// The STATUS of a pod whose init containers are not all done, as kubectl prints it.
fn init_status(pod: &Value) -> Option<String> {
    let specs = json::at(pod, "/spec/initContainers").and_then(Value::as_array)?;
    let statuses = json::at(pod, "/status/initContainerStatuses").and_then(Value::as_array);
    for (i, c) in statuses.into_iter().flatten().enumerate() {
        let terminated = json::at(c, "/state/terminated");
        let waiting = s(c, "/state/waiting/reason");
        match terminated {
            Some(t) if t["exitCode"] == 0 => continue,
            _ if sidecar(pod, c) && c["started"] == true => continue,
            Some(t) => return Some(format!("Init:{}", terminated_reason(t))),
            None if !waiting.is_empty() && waiting != "PodInitializing" => {
                return Some(format!("Init:{waiting}"))
            }
            None => return Some(format!("Init:{i}/{}", specs.len())),
        }
    }
    None
}

/// `<unset>` for an empty optional name, as kubectl prints a volume attributes class.
fn unset(value: &str) -> &str {
    if value.is_empty() {
        "<unset>"
    } else {
        value
    }
}

/// An EndpointSlice's ports and addresses, the first three of each, as kubectl prints them.
fn slice_columns(slice: &Value) -> (String, String) {
    let ports = json::at(slice, "/ports").and_then(Value::as_array);
    let ports = ports.into_iter().flatten().map(|p| match (&p["port"], &p["name"]) {
        (Value::Number(n), _) => n.to_string(),
        (_, Value::String(name)) => name.clone(),
        _ => "*".to_string(),
    });
    let endpoints = json::at(slice, "/endpoints").and_then(Value::as_array);
    let addresses = endpoints
        .into_iter()
        .flatten()
        .filter_map(|e| e["addresses"].as_array())
        .flatten()
        .filter_map(|a| a.as_str().map(String::from));
    (first_three(ports), first_three(addresses))
}

/// `a,b,c + N more...`, or `<unset>` for none (kubectl's `listWithMoreString`).
fn first_three(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    match items.len() {
        0 => "<unset>".to_string(),
        n if n <= 3 => items.join(","),
        n => format!("{} + {} more...", items[..3].join(","), n - 3),
    }
}

/// A quota's `resource: used/hard` pairs, by name, for its requests and for its limits (the
/// `limits.*` resources), as kubectl prints them.
fn quota_usage(quota: &Value) -> (String, String) {
    let hard = json::at(quota, "/status/hard")
        .or_else(|| json::at(quota, "/spec/hard"))
        .and_then(Value::as_object);
    let (mut requests, mut limits) = (Vec::new(), Vec::new());
    for (resource, amount) in hard.into_iter().flatten() {
        let used = json::at(quota, "/status/used")
            .and_then(|u| u.get(resource.as_str()))
            .and_then(Value::as_str)
            .unwrap_or("0");
        let pair = format!("{resource}: {used}/{}", amount.as_str().unwrap_or(""));
        if resource.starts_with("limits.") {
            limits.push(pair);
        } else {
            requests.push(pair);
        }
    }
    (requests.join(", "), limits.join(", "))
}

/// Access modes as Kubernetes abbreviates them: each known one once, in a fixed order.
fn access_modes(modes: Option<&Value>) -> String {
    let modes: Vec<&str> =
        modes.and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str).collect();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(mode, _)| modes.contains(mode))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

fn selector_string(selector: Option<&Value>) -> String {
    selector
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// A volume's or claim's phase as kubectl prints it: `Terminating` once it is being deleted.
fn phase_or_terminating(o: &Value) -> &str {
    match json::at(o, "/metadata/deletionTimestamp") {
        Some(marked) if !marked.is_null() => "Terminating",
        _ => json::at(o, "/status/phase").and_then(Value::as_str).unwrap_or(""),
    }
}

fn row(kind: &str, value: Value, include: IncludeObject, now: DateTime<Utc>) -> Value {
    let mut row = json!({"cells": cells(kind, &value, now)});
    // A pod that has ended says so in its row, as Kubernetes' printer says it.
    let ended = match json::at(&value, "/status/phase").and_then(Value::as_str) {
        Some("Succeeded") if kind == "Pod" => {
            Some(("Succeeded", "The pod has completed successfully."))
        }
        Some("Failed") if kind == "Pod" => Some(("Failed", "The pod failed.")),
        _ => None,
    };
    if let Some((reason, message)) = ended {
        row["conditions"] =
            json!([{"type": "Completed", "status": "True", "reason": reason, "message": message}]);
    }
    match include {
        IncludeObject::None => {}
        IncludeObject::Object => row["object"] = value,
        IncludeObject::Metadata => {
            row["object"] = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": value.get("metadata").cloned().unwrap_or_default(),
            })
        }
    }
    row
}

/// `table` (written as `meta.k8s.io/v1`) as a Table of `meta.k8s.io` `version`, its rows'
/// metadata objects too.
pub fn in_version(mut table: Value, version: &str) -> Value {
    if version == "v1" {
        return table;
    }
    let api_version = json!(format!("meta.k8s.io/{version}"));
    table["apiVersion"] = api_version.clone();
    for row in table["rows"].as_array_mut().into_iter().flatten() {
        if row["object"]["kind"] == "PartialObjectMetadata" {
            row["object"]["apiVersion"] = api_version.clone();
        }
    }
    table
}

/// A Table of one object (a get's answer, a watch event's), carrying the object's
/// resourceVersion as kube-apiserver's does (none for one never stored).
pub fn table_of_one(
    resource: &ResourceType,
    object: &Arc<StoredObject>,
    include: IncludeObject,
) -> Value {
    let rv = Some(object.resource_version).filter(|rv| *rv > 0);
    table(resource, std::slice::from_ref(object), rv, None, include)
}

/// A Table of `objects` (one row each); `continue_from` is a page's token for the next page
/// and how many objects the pages after it hold, when known.
pub fn table(
    resource: &ResourceType,
    objects: &[Arc<StoredObject>],
    resource_version: Option<u64>,
    continue_from: Option<(&str, Option<usize>)>,
    include: IncludeObject,
) -> Value {
    let values = objects.iter().map(|o| o.to_value());
    table_of_values(resource.kind, values, resource_version, continue_from, include)
}

/// A Table of objects worked out when read, never stored (no resourceVersion).
pub fn table_of_computed(kind: &str, objects: Vec<Value>, include: IncludeObject) -> Value {
    table_of_values(kind, objects.into_iter(), None, None, include)
}

/// The Table of a scale subresource (autoscaling/v1 `Scale`): its desired and available
/// replicas, as kube-apiserver prints it for `kubectl get --subresource=scale`.
pub fn table_of_scale(scale: Value, include: IncludeObject) -> Value {
    let rv = json::at(&scale, "/metadata/resourceVersion").and_then(Value::as_str);
    let rv = rv.and_then(|rv| rv.parse().ok());
    table_of_values("Scale", std::iter::once(scale), rv, None, include)
}

fn table_of_values(
    kind: &str,
    values: impl Iterator<Item = Value>,
    resource_version: Option<u64>,
    continue_from: Option<(&str, Option<usize>)>,
    include: IncludeObject,
) -> Value {
    let now = Utc::now();
    let definitions: Vec<Value> = columns(kind)
        .into_iter()
        .map(|c| {
            json!({"name": c.name, "type": c.kind, "format": c.format,
                   "description": c.description, "priority": c.priority})
        })
        .collect();
    let mut metadata = json!({});
    if let Some(rv) = resource_version {
        metadata["resourceVersion"] = json!(rv.to_string());
    }
    if let Some((token, remaining)) = continue_from {
        metadata["continue"] = json!(token);
        if let Some(remaining) = remaining {
            metadata["remainingItemCount"] = json!(remaining);
        }
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": definitions,
        "rows": values.map(|v| row(kind, v, include, now)).collect::<Vec<_>>(),
    })
}

/// An Endpoints' cell as Kubernetes' `formatEndpoints` writes it: port by port, each ready
/// address at it (`ip:port`, an IPv6 address in brackets; a bare IP for a subset without
/// ports), the first three and how many more; `<none>` without subsets.
fn endpoints_cell(endpoints: &Value) -> String {
    const MOST: usize = 3;
    let subsets = endpoints.get("subsets").and_then(Value::as_array);
    let Some(subsets) = subsets.filter(|s| !s.is_empty()) else { return "<none>".into() };
    let (mut shown, mut count) = (Vec::new(), 0);
    for subset in subsets {
        let addresses: Vec<&str> = (subset["addresses"].as_array().into_iter().flatten())
            .map(|a| a["ip"].as_str().unwrap_or(""))
            .collect();
        let ports = subset["ports"].as_array().map(Vec::as_slice).unwrap_or_default();
        if ports.is_empty() {
            count += addresses.len();
            shown.extend(
                addresses.iter().take(MOST.saturating_sub(shown.len())).map(|a| a.to_string()),
            );
            continue;
        }
        for port in ports {
            count += addresses.len();
            let at = |ip: &str| match ip.contains(':') {
                true => format!("[{ip}]:{}", port["port"]),
                false => format!("{ip}:{}", port["port"]),
            };
            shown.extend(addresses.iter().take(MOST.saturating_sub(shown.len())).map(|a| at(a)));
        }
    }
    let cell = shown.join(",");
    match count > MOST {
        true => format!("{cell} + {} more...", count - MOST),
        false => cell,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kplane_actors::model::{resources::find, ObjectKey};

    #[test]
    fn ages() {
        let now = DateTime::parse_from_rfc3339("2026-01-10T00:00:00Z").unwrap().with_timezone(&Utc);
        assert_eq!(age("2026-01-09T23:59:15Z", now), "45s");
        assert_eq!(age("2026-01-09T23:54:57Z", now), "5m3s");
        assert_eq!(age("2026-01-09T21:00:00Z", now), "3h");
        assert_eq!(age("2026-01-07T20:00:00Z", now), "2d4h");
        assert_eq!(age("garbage", now), "<unknown>");
        assert_eq!(age("2024-01-11T00:00:00Z", now), "2y");
        assert_eq!(age("2026-01-10T00:00:05Z", now), "<invalid>");
        assert_eq!(age("2026-01-10T00:00:01Z", now), "0s");
    }

    #[test]
    fn metrics_are_printed_as_metrics_server_prints_them() {
        let node = json!({"metadata": {"name": "n"}, "window": "14.999s",
            "usage": {"cpu": "1500000000n", "memory": "2048Ki"}});
        let now = Utc::now();
        assert_eq!(
            cells("NodeMetrics", &node, now),
            [json!("n"), json!("1500m"), json!("2Mi"), json!("14.999s")]
        );
        let pod = json!({"metadata": {"name": "p"}, "window": "15s", "containers": [
            {"usage": {"cpu": "250000n", "memory": "100Ki"}},
            {"usage": {"cpu": "750000n", "memory": "28Ki"}}]});
        assert_eq!(
            cells("PodMetrics", &pod, now),
            [json!("p"), json!("1m"), json!("128Ki"), json!("15s")]
        );
        let names: Vec<&str> = columns("PodMetrics").iter().map(|c| c.name).collect();
        assert_eq!(names, ["Name", "cpu", "memory", "Window"]);
    }

    #[test]
    fn endpoints_are_listed_port_by_port_three_at_most() {
        let addresses = json!([{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "10.0.0.3"},
            {"ip": "10.0.0.4"}]);
        let four =
            json!({"subsets": [{"addresses": addresses, "ports": [{"port": 80}, {"port": 81}]}]});
        assert_eq!(endpoints_cell(&four), "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 5 more...");
        let one = json!({"subsets": [{"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 80}]},
            {"addresses": [{"ip": "10.0.0.9"}]}]});
        assert_eq!(endpoints_cell(&one), "[fd00::1]:80,10.0.0.9");
        assert_eq!(endpoints_cell(&json!({})), "<none>");
        assert_eq!(
            endpoints_cell(&json!({"subsets": [{"notReadyAddresses": [{"ip": "1.2.3.4"}]}]})),
            ""
        );
    }

    #[test]
    fn pod_row_cells_match_columns() {
        let pods = find("", "v1", "pods").unwrap();
        let value = json!({"metadata":{"name":"p","namespace":"d","creationTimestamp":"2026-01-01T00:00:00Z"},
            "spec":{"containers":[{"name":"c"}],"nodeName":"n1"},
            "status":{"phase":"Running","podIP":"127.64.0.2","containerStatuses":[{"ready":true,"restartCount":2,"state":{"running":{}}}]}});
        let object = Arc::new(StoredObject::from_value(ObjectKey::new(pods, "d", "p"), value, 5));
        let t = table(pods, &[object], Some(5), None, IncludeObject::Metadata);
        let cells = t["rows"][0]["cells"].as_array().unwrap();
        assert_eq!(cells.len(), t["columnDefinitions"].as_array().unwrap().len());
        assert_eq!(cells[1], "1/1");
        assert_eq!(cells[2], "Running");
        assert_eq!(cells[3], "2");
        assert_eq!(cells[5], "127.64.0.2");
        assert_eq!(cells[8], "<none>");
        assert_eq!(t["rows"][0]["object"]["metadata"]["namespace"], "d");
        // Readiness gates: those whose condition holds, of all.
        let gated = json!({"spec": {"readinessGates": [{"conditionType": "a.io/x"},
            {"conditionType": "a.io/y"}, {"conditionType": "a.io/z"}]},
            "status": {"conditions": [{"type": "a.io/x", "status": "True"},
                {"type": "a.io/y", "status": "False"}]}});
        assert_eq!(readiness_gates(&gated), "1/3");
        assert_eq!(t["metadata"]["resourceVersion"], "5");
    }

    #[test]
    fn a_pod_being_deleted_is_terminating_until_it_has_finished() {
        let pod = |phase: &str, reason: &str, state: Value| {
            json!({"metadata": {"name": "p", "deletionTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"containers": [{"name": "c"}]},
                "status": {"phase": phase, "reason": reason,
                    "containerStatuses": [{"name": "c", "ready": false, "state": state}]}})
        };
        let running = pod("Running", "", json!({"running": {}}));
        assert_eq!(cells("Pod", &running, Utc::now())[2], "Terminating");
        let done = json!({"terminated": {"exitCode": 0, "reason": "Completed"}});
        assert_eq!(cells("Pod", &pod("Succeeded", "", done), Utc::now())[2], "Completed");
        let failed = json!({"terminated": {"exitCode": 1, "reason": "Error"}});
        assert_eq!(cells("Pod", &pod("Failed", "", failed), Utc::now())[2], "Error");
        let lost = pod("Running", "NodeLost", json!({"running": {}}));
        assert_eq!(cells("Pod", &lost, Utc::now())[2], "Unknown");
    }

    #[test]
    fn an_event_s_source_names_its_host_when_it_has_one() {
        let event = |source: Value| {
            json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"},
                "source": source, "reason": "Started", "type": "Normal"})
        };
        let kubelet = event(json!({"component": "kubelet", "host": "vm"}));
        assert_eq!(cells("Event", &kubelet, Utc::now())[5], "kubelet, vm");
        let controller = event(json!({"component": "replication-controller"}));
        assert_eq!(cells("Event", &controller, Utc::now())[5], "replication-controller");
    }

    #[test]
    fn an_event_series_is_first_seen_at_its_event_time_and_last_at_its_last_observation() {
        let now = Utc::now();
        let ago = |minutes: i64| {
            (now - chrono::Duration::minutes(minutes))
                .to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
        };
        // The new API's form, stored as core/v1: no first and last timestamps, no count.
        let event = json!({"metadata": {"name": "e"}, "eventTime": ago(9),
            "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "FailedScheduling",
            "type": "Warning", "reportingComponent": "default-scheduler",
            "firstTimestamp": null, "lastTimestamp": null});
        let row = cells("Event", &event, now);
        assert_eq!((&row[0], &row[7], &row[8]), (&json!("9m"), &json!("9m"), &json!(1)));
        let mut series = event.clone();
        series["series"] = json!({"count": 4, "lastObservedTime": ago(2)});
        let row = cells("Event", &series, now);
        assert_eq!((&row[0], &row[7], &row[8]), (&json!("2m"), &json!("9m"), &json!(4)));
    }

    #[test]
    fn ready_counts_started_sidecars_and_running_containers() {
        let pod = |init: Value, app: Value, initialized: bool| {
            let status = if initialized { "True" } else { "False" };
            json!({"spec": {"initContainers": [{"name": "setup"},
                    {"name": "proxy", "restartPolicy": "Always"}],
                    "containers": [{"name": "c"}, {"name": "d"}]},
                "status": {"conditions": [{"type": "Initialized", "status": status}],
                    "initContainerStatuses": init, "containerStatuses": app}})
        };
        let ready = |pod: Value| cells("Pod", &pod, Utc::now())[1].clone();
        let done = json!({"name": "setup", "state": {"terminated": {"exitCode": 0}}});
        let proxy = json!({"name": "proxy", "started": true, "ready": true,
            "state": {"running": {}}});
        let running = json!({"ready": true, "state": {"running": {}}});
        let ended = json!({"ready": true, "state": {"terminated": {"exitCode": 1}}});
        assert_eq!(ready(pod(json!([done, proxy]), json!([running, running]), true)), "3/3");
        assert_eq!(ready(pod(json!([done, proxy]), json!([running, ended]), true)), "2/3");
        let starting = json!({"name": "setup", "state": {"running": {}}});
        assert_eq!(ready(pod(json!([starting, proxy]), json!([]), false)), "0/3");
        let unready = json!({"name": "proxy", "started": true, "ready": false});
        assert_eq!(ready(pod(json!([done, unready]), json!([running, running]), true)), "2/3");
    }

    #[test]
    fn node_roles_come_from_both_kinds_of_role_label() {
        let node = json!({"metadata": {"name": "n", "labels": {
            "node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/": "",
            "kubernetes.io/role": "legacy", "node-role.kubernetes.io/control-plane": ""}}});
        assert_eq!(cells("Node", &node, Utc::now())[2], "control-plane,legacy,worker");
        let plain = json!({"metadata": {"name": "n", "labels": {"kubernetes.io/role": ""}}});
        assert_eq!(cells("Node", &plain, Utc::now())[2], "<none>");
    }

    #[test]
    fn a_node_is_not_ready_unless_its_ready_condition_is_true() {
        let status = |conditions: Value, unschedulable: bool| {
            let node = json!({"metadata": {"name": "n"}, "spec": {"unschedulable": unschedulable},
                "status": {"conditions": conditions}});
            cells("Node", &node, Utc::now())[1].clone()
        };
        let ready = |s: &str| {
            json!([{"type": "MemoryPressure", "status": "False"},
            {"type": "Ready", "status": s}])
        };
        assert_eq!(status(ready("True"), false), "Ready");
        assert_eq!(status(ready("False"), false), "NotReady");
        assert_eq!(status(ready("Unknown"), true), "NotReady,SchedulingDisabled");
        assert_eq!(status(json!([]), false), "Unknown");
    }

    #[test]
    fn volumes_and_claims_show_their_modes_class_and_capacity_as_kubectl_does() {
        let now = Utc::now();
        let volume = json!({"metadata": {"name": "v", "annotations":
                {"volume.beta.kubernetes.io/storage-class": "gold"}},
            "spec": {"storageClassName": "plain",
                "accessModes": ["ReadWriteMany", "ReadWriteOnce", "ReadWriteMany", "Odd"]}});
        let cells_of = cells("PersistentVolume", &volume, now);
        assert_eq!((&cells_of[2], &cells_of[6]), (&json!("RWO,RWX"), &json!("gold")));
        // A claim naming a volume that has not given it a capacity yet shows "0".
        let claim = json!({"metadata": {"name": "c"}, "spec": {"volumeName": "v"}});
        assert_eq!(cells("PersistentVolumeClaim", &claim, now)[3], "0");
        let pending = json!({"metadata": {"name": "c"}, "spec": {}});
        assert_eq!(cells("PersistentVolumeClaim", &pending, now)[3], "");
    }

    #[test]
    fn bindings_name_service_accounts_as_their_subjects_do() {
        let binding = json!({"metadata": {"name": "b", "namespace": "qa"},
            "roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa1"},
                {"kind": "ServiceAccount", "name": "sa2", "namespace": "other"}]});
        assert_eq!(cells("RoleBinding", &binding, Utc::now())[5], "/sa1, other/sa2");
    }

    #[test]
    fn volumes_and_claims_being_deleted_read_terminating() {
        for (plural, status_column) in [("persistentvolumes", 4), ("persistentvolumeclaims", 1)] {
            let resource = find("", "v1", plural).unwrap();
            let row = |meta: Value| {
                let value = json!({"metadata": meta, "spec": {}, "status": {"phase": "Bound"}});
                let key = ObjectKey::new(resource, "d", "v");
                let object = Arc::new(StoredObject::from_value(key, value, 5));
                let t = table(resource, &[object], None, None, IncludeObject::None);
                t["rows"][0]["cells"][status_column].clone()
            };
            assert_eq!(row(json!({"name": "v"})), "Bound", "{plural}");
            let marked = json!({"name": "v", "deletionTimestamp": "2026-01-01T00:00:00Z"});
            assert_eq!(row(marked), "Terminating", "{plural}");
        }
    }

    #[test]
    fn pod_status_column_reads_as_kubectl_prints_it() {
        let now = Utc::now();
        let status_of = |phase: &str, statuses: Value, conditions: Value| {
            let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]},
                "status": {"phase": phase, "containerStatuses": statuses, "conditions": conditions}});
            cells("Pod", &pod, now)[2].as_str().unwrap().to_string()
        };
        let ended = |reason: &str, code: i64| json!({"state": {"terminated": {"reason": reason, "exitCode": code}}});
        let running = json!({"ready": true, "state": {"running": {}}});
        let init = |statuses: Value| {
            let pod = json!({"metadata": {"name": "p"}, "spec": {"initContainers": [{"name": "i"},
                {"name": "j"}], "containers": [{"name": "c"}]}, "status": {"phase": "Pending",
                "initContainerStatuses": statuses, "containerStatuses": [
                    {"state": {"waiting": {"reason": "PodInitializing"}}}]}});
            cells("Pod", &pod, now)[2].as_str().unwrap().to_string()
        };
        let done = json!({"state": {"terminated": {"exitCode": 0}}});
        assert_eq!(init(json!([done, {"state": {"running": {}}}])), "Init:1/2");
        assert_eq!(init(json!([ended("Error", 1)])), "Init:Error");
        let backoff = json!({"state": {"waiting": {"reason": "CrashLoopBackOff"}}});
        assert_eq!(init(json!([backoff])), "Init:CrashLoopBackOff");
        assert_eq!(init(json!([done, done])), "PodInitializing");
        assert_eq!(status_of("Succeeded", json!([ended("Completed", 0)]), json!([])), "Completed");
        assert_eq!(status_of("Failed", json!([ended("Error", 1)]), json!([])), "Error");
        assert_eq!(status_of("Failed", json!([ended("", 3)]), json!([])), "ExitCode:3");
        let waiting = json!({"state": {"waiting": {"reason": "CrashLoopBackOff"}}});
        assert_eq!(status_of("Running", json!([waiting]), json!([])), "CrashLoopBackOff");
        let both = json!([ended("Completed", 0), running]);
        let ready = json!([{"type": "Ready", "status": "True"}]);
        assert_eq!(status_of("Running", both.clone(), ready), "Running");
        assert_eq!(status_of("Running", both, json!([])), "NotReady");
        assert_eq!(status_of("Running", json!([running]), json!([])), "Running");
        let gated =
            json!([{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]);
        assert_eq!(status_of("Pending", json!([]), gated), "SchedulingGated");
    }

    #[test]
    fn restarts_say_how_long_ago_the_last_one_was() {
        let now = DateTime::parse_from_rfc3339("2026-01-10T00:00:00Z").unwrap().with_timezone(&Utc);
        let ended = |at: &str| json!({"terminated": {"exitCode": 1, "finishedAt": at}});
        let pod = json!({"spec": {"initContainers": [{"name": "setup"},
                {"name": "proxy", "restartPolicy": "Always"}], "containers": [{"name": "c"}]},
            "status": {"initContainerStatuses": [
                {"name": "setup", "restartCount": 4, "lastState": ended("2026-01-09T23:00:00Z")},
                {"name": "proxy", "restartCount": 1, "lastState": ended("2026-01-09T23:59:00Z")}],
            "containerStatuses": [
                {"name": "c", "restartCount": 2, "lastState": ended("2026-01-09T23:57:29Z")}]}});
        assert_eq!(restarts(&pod, true, now), "3 (60s ago)");
        // Initializing: the init containers up to the one the pod waits for (setup).
        assert_eq!(restarts(&pod, false, now), "4 (60m ago)");
        let waiting = json!({"spec": {"initContainers": [{"name": "a"}, {"name": "b"}]},
            "status": {"initContainerStatuses": [
                {"name": "a", "restartCount": 3, "lastState": ended("2026-01-09T23:00:00Z"),
                    "state": {"terminated": {"exitCode": 137}}},
                {"name": "b", "restartCount": 5, "lastState": ended("2026-01-09T23:59:00Z")}]}});
        assert_eq!(restarts(&waiting, false, now), "3 (60m ago)");
        let never = json!({"status": {"containerStatuses": [{"name": "c", "restartCount": 0}]}});
        assert_eq!(restarts(&never, true, now), "0");
        let unknown_end =
            json!({"status": {"containerStatuses": [{"name": "c", "restartCount": 2}]}});
        assert_eq!(restarts(&unknown_end, true, now), "2");
    }

    #[test]
    fn services_show_external_addresses_as_kubectl_prints_them() {
        let external = |spec: Value, status: Value| {
            let svc = json!({"metadata": {"name": "s"}, "spec": spec, "status": status});
            cells("Service", &svc, Utc::now())[3].as_str().unwrap().to_string()
        };
        let ingress = json!({"loadBalancer": {"ingress": [{"ip": "127.9.0.2"},
            {"hostname": "lb.example"}, {"ip": "127.9.0.1"}, {"ip": "127.9.0.2"}]}});
        // A ClusterIP service shows no ingress a client left in its status.
        assert_eq!(external(json!({"type": "ClusterIP"}), ingress.clone()), "<none>");
        let ips = json!(["127.8.0.1"]);
        assert_eq!(
            external(json!({"type": "NodePort", "externalIPs": ips}), json!({})),
            "127.8.0.1"
        );
        assert_eq!(
            external(json!({"type": "LoadBalancer", "externalIPs": ips}), ingress),
            "127.9.0.1,127.9.0.2,lb.example,127.8.0.1"
        );
        assert_eq!(external(json!({"type": "LoadBalancer"}), json!({})), "<pending>");
        let name = json!({"type": "ExternalName", "externalName": "db.example"});
        assert_eq!(external(name, json!({})), "db.example");
    }

    #[test]
    fn quotas_show_used_and_hard_amounts_of_requests_and_limits() {
        let quota = json!({"spec": {"hard": {"pods": "10", "limits.cpu": "2"}},
            "status": {"hard": {"pods": "10", "limits.cpu": "2"}, "used": {"pods": "3"}}});
        assert_eq!(quota_usage(&quota), ("pods: 3/10".into(), "limits.cpu: 0/2".into()));
        let unobserved = json!({"spec": {"hard": {"requests.cpu": "1"}}});
        assert_eq!(quota_usage(&unobserved), ("requests.cpu: 0/1".into(), String::new()));
    }

    #[test]
    fn every_kind_has_as_many_cells_as_columns() {
        for r in kplane_actors::model::resources::RESOURCES {
            let empty = json!({"metadata":{"name":"x"}});
            assert_eq!(
                cells(r.kind, &empty, Utc::now()).len(),
                columns(r.kind).len(),
                "{}",
                r.kind
            );
        }
    }
}
