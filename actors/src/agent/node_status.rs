//! What the node reports: capacity and allocatable from the machine (or config), addresses,
//! node info, and the Ready / MemoryPressure / DiskPressure / PIDPressure conditions from real
//! checks of the machine.

use std::path::Path;

use serde_json::{json, Map, Value};

use super::AgentConfig;

/// Below this much available memory the node reports MemoryPressure (kubelet's default
/// eviction threshold).
const MEMORY_PRESSURE_BYTES: u64 = 100 * 1024 * 1024;
/// Below this share of free space on the data dir's filesystem the node reports DiskPressure.
const DISK_PRESSURE_PERCENT: u64 = 10;
/// Above this share of the pid limit in use the node reports PIDPressure.
const PID_PRESSURE_PERCENT: u64 = 90;

/// The kubelet's node events for the conditions that changed from `previous` to `now` (all of
/// them at first), in its order: `NodeHasSufficientMemory`, `NodeHasNoDiskPressure`,
/// `NodeHasSufficientPID`, `NodeReady` and their opposites.
pub fn status_events(previous: &[Value], now: &[Value]) -> Vec<&'static str> {
    const EVENTS: [(&str, &str, &str); 4] = [
        ("MemoryPressure", "NodeHasInsufficientMemory", "NodeHasSufficientMemory"),
        ("DiskPressure", "NodeHasDiskPressure", "NodeHasNoDiskPressure"),
        ("PIDPressure", "NodeHasInsufficientPID", "NodeHasSufficientPID"),
        ("Ready", "NodeReady", "NodeNotReady"),
    ];
    // Compared as they are written: `Unknown` (what the node controller set while the node
    // was out of touch) to `False` is a change too.
    let status = |conditions: &[Value], kind: &str| {
        conditions.iter().find(|c| c["type"] == kind).map(|c| c["status"].clone())
    };
    EVENTS
        .iter()
        .filter_map(|(kind, when_true, when_false)| {
            let now = status(now, kind)?;
            (status(previous, kind).as_ref() != Some(&now)).then_some(if now == "True" {
                *when_true
            } else {
                *when_false
            })
        })
        .collect()
}

/// Whether posting `status` (as [`status_patch`]) over `stored` would change more than its
/// conditions' heartbeat times: the kubelet posts its node's status only then (or every five
/// minutes), its Lease being its heartbeat. Judged by the API server's own strategic merge, so
/// that conditions merge by type (others' stay) exactly as they will be stored.
pub fn says_news(stored: &Value, status: &Value) -> bool {
    let before = json!({"status": stored});
    let patch = status_patch(status);
    match crate::core::apply_patch(&before, crate::core::PatchType::StrategicMerge, &patch) {
        Ok(mut after) => {
            without_heartbeats(after["status"].take()) != without_heartbeats(stored.clone())
        }
        // A patch the server would refuse is news to post, and to be told of.
        Err(_) => true,
    }
}

/// The patch that posts `status`: a strategic merge patch, so that conditions merge by type
/// (others' stay) while the addresses are replaced whole.
pub fn status_patch(status: &Value) -> Value {
    let mut status = status.clone();
    if let Some(addresses) = status.get_mut("addresses").and_then(Value::as_array_mut) {
        addresses.insert(0, json!({"$patch": "replace"}));
    }
    json!({"status": status})
}

fn without_heartbeats(mut status: Value) -> Value {
    let conditions = status.get_mut("conditions").and_then(Value::as_array_mut);
    for condition in conditions.into_iter().flatten().filter_map(Value::as_object_mut) {
        condition.remove("lastHeartbeatTime");
    }
    status
}

/// What the kubelet keeps back of a resource's capacity (its default hard-eviction thresholds:
/// `memory.available<100Mi`, `nodefs.available<10%`).
enum Reserve {
    Bytes(i64),
    Tenth,
}

impl Reserve {
    /// `capacity` less the reserve, written in KiB when whole ones (as the kubelet's binary
    /// quantities), else in bytes; `None` when `capacity` is no quantity.
    fn from(&self, capacity: &str) -> Option<String> {
        let bytes = crate::model::quantity::value(capacity).ok()?;
        let kept = match self {
            Reserve::Bytes(reserved) => bytes - reserved,
            Reserve::Tenth => bytes - bytes / 10,
        }
        .max(0);
        Some(if kept % 1024 == 0 { format!("{}Ki", kept / 1024) } else { kept.to_string() })
    }
}

/// The machine as read at start.
#[derive(Debug, Clone)]
pub struct Machine {
    pub cpus: u64,
    pub memory_bytes: u64,
    pub ephemeral_storage_bytes: u64,
    pub machine_id: String,
    pub boot_id: String,
    pub kernel_version: String,
    pub os_image: String,
}

impl Machine {
    /// Reads the real machine (`/proc`, `/etc`, the data dir's filesystem).
    pub fn read(data_dir: &Path) -> Self {
        let first_line = |path: &str| {
            std::fs::read_to_string(path)
                .ok()
                .and_then(|s| s.lines().next().map(|l| l.trim().to_string()))
                .unwrap_or_default()
        };
        let os_image = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|s| {
                s.lines().find_map(|l| {
                    l.strip_prefix("PRETTY_NAME=").map(|v| v.trim_matches('"').to_string())
                })
            })
            .unwrap_or_else(|| "Linux".into());
        Self {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u64),
            memory_bytes: meminfo("MemTotal").unwrap_or(0),
            ephemeral_storage_bytes: disk_space(data_dir).map_or(0, |(total, _)| total),
            machine_id: first_line("/etc/machine-id"),
            boot_id: first_line("/proc/sys/kernel/random/boot_id"),
            kernel_version: first_line("/proc/sys/kernel/osrelease"),
            os_image,
        }
    }

    /// A made-up roomy machine for simulated nodes (no /proc reads per node).
    pub fn simulated() -> Self {
        Self {
            cpus: 32,
            memory_bytes: 256 * 1024 * 1024 * 1024,
            ephemeral_storage_bytes: 1024 * 1024 * 1024 * 1024,
            machine_id: String::new(),
            boot_id: String::new(),
            kernel_version: "simulated".into(),
            os_image: "kplane simulated node".into(),
        }
    }
}

/// A value from /proc/meminfo, in bytes.
fn meminfo(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.split(':').next() == Some(key))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// (total, available) bytes of the filesystem holding `path`.
fn disk_space(path: &Path) -> Option<(u64, u64)> {
    let mut probe = path;
    while !probe.exists() {
        probe = probe.parent()?;
    }
    let stat = nix::sys::statvfs::statvfs(probe).ok()?;
    let block = stat.fragment_size() as u64;
    Some((stat.blocks() as u64 * block, stat.blocks_available() as u64 * block))
}

/// The pressure conditions, as measured now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pressure {
    pub memory: bool,
    pub disk: bool,
    pub pid: bool,
}

impl Pressure {
    pub fn measure(data_dir: &Path) -> Self {
        let memory = meminfo("MemAvailable").is_some_and(|a| a < MEMORY_PRESSURE_BYTES);
        let disk = disk_space(data_dir)
            .is_some_and(|(total, free)| total > 0 && free * 100 < total * DISK_PRESSURE_PERCENT);
        let pid_max: Option<u64> = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|s| s.trim().parse().ok());
        // The fourth field of /proc/loadavg is "running/total" scheduling entities.
        let tasks: Option<u64> = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|s| s.split_whitespace().nth(3)?.split('/').nth(1)?.parse().ok());
        let pid =
            matches!((tasks, pid_max), (Some(t), Some(m)) if t * 100 > m * PID_PRESSURE_PERCENT);
        Self { memory, disk, pid }
    }
}

/// The capacity of the node: the machine's, with the config's overrides.
pub fn capacity(config: &AgentConfig, machine: &Machine) -> Map<String, Value> {
    let mut capacity = Map::new();
    capacity.insert("cpu".into(), json!(machine.cpus.to_string()));
    capacity.insert("memory".into(), json!(format!("{}Ki", machine.memory_bytes / 1024)));
    capacity.insert("pods".into(), json!(config.max_pods.to_string()));
    capacity.insert(
        "ephemeral-storage".into(),
        json!(format!("{}Ki", machine.ephemeral_storage_bytes / 1024)),
    );
    for (k, v) in &config.capacity_overrides {
        capacity.insert(k.clone(), json!(v));
    }
    capacity
}

/// Why a node that has just registered is not Ready: as the kubelet's before its network
/// plugin is set up, it waits for the pod network the server's node IPAM controller gives it.
const NO_NETWORK_YET: &str = "container runtime network not ready: NetworkReady=false \
    reason:NetworkPluginNotReady message:the node has no pod CIDR yet";

/// The Node to create when the agent first registers: not Ready until it has its pod network
/// (its first status after that says Ready).
pub fn new_node(config: &AgentConfig, machine: &Machine, runtime: &str, now: &str) -> Value {
    let mut labels: Map<String, Value> =
        default_labels(config).into_iter().map(|(k, v)| (k.into(), json!(v))).collect();
    for (k, v) in &config.labels {
        labels.insert(k.clone(), json!(v));
    }
    let annotations = json!({CONTROLLER_MANAGED_ATTACH_DETACH: "true"});
    let mut node = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": config.node_name, "labels": labels, "annotations": annotations},
        "spec": {},
        "status": status(config, machine, runtime, Pressure::default(), &json!({}), now),
    });
    let conditions = node["status"]["conditions"].as_array_mut().into_iter().flatten();
    for ready in conditions.filter(|c| c["type"] == "Ready") {
        ready["status"] = json!("False");
        ready["reason"] = json!("KubeletNotReady");
        ready["message"] = json!(NO_NETWORK_YET);
    }
    node
}

/// The annotation saying the attach/detach controller attaches the node's volumes, as the
/// kubelet registers its node by default.
pub const CONTROLLER_MANAGED_ATTACH_DETACH: &str =
    "volumes.kubernetes.io/controller-managed-attach-detach";

/// The labels the kubelet gives its node, and sets again on a node that exists when it
/// registers: its host name, operating system and architecture (also by their beta names).
pub fn default_labels(config: &AgentConfig) -> [(&'static str, String); 5] {
    [
        ("kubernetes.io/hostname", config.node_name.clone()),
        ("kubernetes.io/os", "linux".into()),
        ("kubernetes.io/arch", arch().into()),
        ("beta.kubernetes.io/os", "linux".into()),
        ("beta.kubernetes.io/arch", arch().into()),
    ]
}

/// What of `node`'s metadata differs from what the kubelet keeps there, as a merge patch:
/// at registration (`registering`) the default labels and the attach/detach annotation; at
/// each status update its operating system and architecture labels.
pub fn metadata_patch(config: &AgentConfig, node: &Value, registering: bool) -> Option<Value> {
    let labels = node.pointer("/metadata/labels");
    let kept =
        |name: &str| !registering && !matches!(name, "kubernetes.io/os" | "kubernetes.io/arch");
    let changed: Map<String, Value> = default_labels(config)
        .into_iter()
        .filter(|(name, value)| {
            !kept(name) && labels.and_then(|l| l.get(*name)).and_then(Value::as_str) != Some(value)
        })
        .map(|(name, value)| (name.to_string(), json!(value)))
        .collect();
    let annotated =
        node.pointer("/metadata/annotations").and_then(|a| a.get(CONTROLLER_MANAGED_ATTACH_DETACH));
    let annotate = registering && annotated.and_then(Value::as_str) != Some("true");
    if changed.is_empty() && !annotate {
        return None;
    }
    let mut patch = json!({"metadata": {}});
    if !changed.is_empty() {
        patch["metadata"]["labels"] = Value::Object(changed);
    }
    if annotate {
        patch["metadata"]["annotations"] = json!({CONTROLLER_MANAGED_ATTACH_DETACH: "true"});
    }
    Some(patch)
}

fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// The node status to post, as a merge patch over `stored` (the status the server holds, or
/// what was last posted): capacity, conditions (keeping each one's transition time from the
/// stored conditions while it holds), addresses, daemon endpoint and node info.
///
/// Capacity is the machine's, and whatever else the stored capacity holds (the extended
/// resources an operator advertised by patching it, which the kubelet keeps too); allocatable
/// is the same amounts less what the kubelet's eviction thresholds keep back of memory and
/// ephemeral storage, and a resource gone from capacity leaves it (null in the patch).
pub fn status(
    config: &AgentConfig,
    machine: &Machine,
    runtime: &str,
    pressure: Pressure,
    stored: &Value,
    now: &str,
) -> Value {
    let previous = stored["conditions"].as_array().map_or(&[][..], Vec::as_slice);
    let mut capacity = capacity(config, machine);
    for (name, amount) in stored["capacity"].as_object().into_iter().flatten() {
        capacity.entry(name.clone()).or_insert_with(|| amount.clone());
    }
    let mut allocatable = capacity.clone();
    // Less what the kubelet's default hard-eviction thresholds keep back.
    for (name, reserved) in
        [("memory", Reserve::Bytes(100 << 20)), ("ephemeral-storage", Reserve::Tenth)]
    {
        if let Some(amount) = allocatable.get_mut(name) {
            if let Some(less) = amount.as_str().and_then(|q| reserved.from(q)) {
                *amount = json!(less);
            }
        }
    }
    for name in stored["allocatable"].as_object().into_iter().flatten().map(|(name, _)| name) {
        allocatable.entry(name.clone()).or_insert(Value::Null);
    }
    let condition = |kind: &str, on: bool, yes: (&str, &str), no: (&str, &str)| {
        let status = if on { "True" } else { "False" };
        let (reason, message) = if on { yes } else { no };
        let transition = previous
            .iter()
            .find(|c| c["type"] == kind && c["status"] == status)
            .map_or_else(|| json!(now), |c| c["lastTransitionTime"].clone());
        json!({"type": kind, "status": status, "lastHeartbeatTime": now,
            "lastTransitionTime": transition, "reason": reason, "message": message})
    };
    let conditions = [
        condition(
            "MemoryPressure",
            pressure.memory,
            ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
            ("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ),
        condition(
            "DiskPressure",
            pressure.disk,
            ("KubeletHasDiskPressure", "kubelet has disk pressure"),
            ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ),
        condition(
            "PIDPressure",
            pressure.pid,
            ("KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
            ("KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ),
        condition(
            "Ready",
            true,
            ("KubeletReady", "kubelet is posting ready status"),
            ("KubeletNotReady", ""),
        ),
    ];
    let version = env!("CARGO_PKG_VERSION");
    let kubelet_version = format!("v1.32.0-kplane.{version}");
    json!({
        "capacity": capacity,
        "allocatable": allocatable,
        "conditions": conditions,
        "addresses": [
            {"type": "InternalIP", "address": config.address.to_string()},
            {"type": "Hostname", "address": config.node_name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": config.port}},
        "nodeInfo": {
            "machineID": machine.machine_id,
            "systemUUID": machine.machine_id,
            "bootID": machine.boot_id,
            "kernelVersion": machine.kernel_version,
            "osImage": machine.os_image,
            "containerRuntimeVersion": format!("kplane-{runtime}://{version}"),
            "kubeletVersion": kubelet_version,
            // As the kubelet (until `DisableNodeKubeProxyVersion`, off in 1.32): its own.
            "kubeProxyVersion": kubelet_version,
            "operatingSystem": "linux",
            "architecture": arch(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_is_read_for_real() {
        let machine = Machine::read(Path::new("/tmp"));
        assert!(machine.cpus >= 1);
        assert!(machine.memory_bytes > 0);
        assert!(machine.ephemeral_storage_bytes > 0);
    }

    #[test]
    fn a_status_says_news_when_more_than_its_heartbeats_changed() {
        let config = AgentConfig::new("n1", "/tmp".into());
        let machine = Machine::simulated();
        let first = status(&config, &machine, "process", Pressure::default(), &json!({}), "t1");
        assert!(says_news(&json!({}), &first));
        let again = status(&config, &machine, "process", Pressure::default(), &first, "t2");
        assert_ne!(again["conditions"], first["conditions"], "new heartbeat times");
        assert!(!says_news(&first, &again));
        let pressure = Pressure { disk: true, ..Pressure::default() };
        let pressed = status(&config, &machine, "process", pressure, &first, "t3");
        assert!(says_news(&first, &pressed));
        let mut relabelled = first.clone();
        relabelled["capacity"]["example.com/dongle"] = json!("1");
        let kept = status(&config, &machine, "process", Pressure::default(), &relabelled, "t4");
        assert!(says_news(&relabelled, &kept), "allocatable takes the new resource");
    }

    #[test]
    fn others_conditions_stay_and_allocatable_keeps_the_eviction_reserve_back() {
        let config = AgentConfig::new("n1", "/tmp".into());
        let machine = Machine::simulated();
        let first = status(&config, &machine, "process", Pressure::default(), &json!({}), "t1");
        // A problem detector's condition beside ours: no news, and merged in, not dropped.
        let mut stored = first.clone();
        let deadlock = json!({"type": "KernelDeadlock", "status": "False"});
        stored["conditions"].as_array_mut().unwrap().insert(0, deadlock.clone());
        let again = status(&config, &machine, "process", Pressure::default(), &stored, "t2");
        assert!(!says_news(&stored, &again));
        let ours = again["conditions"].as_array().unwrap();
        let patch = status_patch(&again);
        let posted = crate::core::apply_patch(
            &json!({"status": stored}),
            crate::core::PatchType::StrategicMerge,
            &patch,
        )
        .unwrap();
        let merged = posted["status"]["conditions"].as_array().unwrap();
        assert_eq!(merged.len(), 5);
        assert_eq!(merged[0], deadlock);
        assert_eq!(&merged[1..], &ours[..]);
        // The addresses are replaced whole: one the node no longer has goes.
        let mut moved = stored.clone();
        moved["addresses"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "InternalIP", "address": "10.9.9.9"}));
        assert!(says_news(&moved, &again));
        // 100Mi of memory and a tenth of the disk are kept back.
        let capacity = |name: &str| {
            crate::model::quantity::value(first["capacity"][name].as_str().unwrap()).unwrap()
        };
        let allocatable = |name: &str| {
            crate::model::quantity::value(first["allocatable"][name].as_str().unwrap()).unwrap()
        };
        assert_eq!(allocatable("memory"), capacity("memory") - (100 << 20));
        let disk = capacity("ephemeral-storage");
        assert_eq!(allocatable("ephemeral-storage"), disk - disk / 10);
        assert_eq!(first["allocatable"]["cpu"], first["capacity"]["cpu"]);
        assert_eq!(Reserve::Tenth.from("1000"), Some("900".into()));
        assert_eq!(Reserve::Bytes(100 << 20).from("1Gi"), Some("946176Ki".into()));
    }

    #[test]
    fn a_new_node_is_ready_only_once_it_has_its_network() {
        let config = AgentConfig::new("n1", "/tmp".into());
        let machine = Machine::simulated();
        let node = new_node(&config, &machine, "process", "t1");
        let created = node["status"]["conditions"].as_array().unwrap();
        let ready = created.iter().find(|c| c["type"] == "Ready").unwrap();
        assert_eq!(
            (&ready["status"], &ready["reason"]),
            (&json!("False"), &json!("KubeletNotReady"))
        );
        assert!(ready["message"].as_str().unwrap().contains("NetworkReady=false"));
        let posted =
            status(&config, &machine, "process", Pressure::default(), &node["status"], "t2");
        let now = posted["conditions"].as_array().unwrap();
        let ready = now.iter().find(|c| c["type"] == "Ready").unwrap();
        assert_eq!(
            (&ready["status"], &ready["lastTransitionTime"]),
            (&json!("True"), &json!("t2"))
        );
        assert_eq!(status_events(created, now), ["NodeReady"]);
    }

    #[test]
    fn each_condition_that_changed_is_an_event_unknown_ones_too() {
        let conditions = |memory: &str, ready: &str| {
            vec![
                json!({"type": "MemoryPressure", "status": memory}),
                json!({"type": "DiskPressure", "status": "False"}),
                json!({"type": "Ready", "status": ready}),
            ]
        };
        assert_eq!(
            status_events(&[], &conditions("False", "True")),
            ["NodeHasSufficientMemory", "NodeHasNoDiskPressure", "NodeReady"]
        );
        let out_of_touch = conditions("Unknown", "Unknown");
        assert_eq!(
            status_events(&out_of_touch, &conditions("False", "True")),
            ["NodeHasSufficientMemory", "NodeReady"]
        );
        assert!(
            status_events(&conditions("False", "True"), &conditions("False", "True")).is_empty()
        );
        assert_eq!(
            status_events(&conditions("False", "True"), &conditions("True", "True")),
            ["NodeHasInsufficientMemory"]
        );
    }

    #[test]
    fn status_reports_capacity_endpoint_and_keeps_transition_times() {
        let mut config = AgentConfig::new("n1", "/tmp".into());
        config.port = 10250;
        config.capacity_overrides.insert("cpu".into(), "4".into());
        let machine = Machine::simulated();
        let first = status(&config, &machine, "process", Pressure::default(), &json!({}), "t1");
        assert_eq!(first["capacity"]["cpu"], "4");
        assert_eq!(first["capacity"]["pods"], "110");
        assert_eq!(first["daemonEndpoints"]["kubeletEndpoint"]["Port"], 10250);
        let pressure = Pressure { memory: true, ..Pressure::default() };
        let second = status(&config, &machine, "process", pressure, &first, "t2");
        let find = |s: &Value, kind: &str| {
            s["conditions"].as_array().unwrap().iter().find(|c| c["type"] == kind).unwrap().clone()
        };
        // What an operator added to the capacity stays, and is allocatable; what was removed
        // from it leaves allocatable.
        let mut stored = second.clone();
        stored["capacity"]["example.com/dongle"] = json!("4");
        stored["allocatable"]["example.com/gone"] = json!("1");
        let third = status(&config, &machine, "process", Pressure::default(), &stored, "t3");
        assert_eq!(third["capacity"]["example.com/dongle"], "4");
        assert_eq!(third["capacity"]["cpu"], "4");
        assert_eq!(third["allocatable"]["example.com/dongle"], "4");
        assert_eq!(third["allocatable"]["example.com/gone"], Value::Null);
        assert!(third["allocatable"].as_object().unwrap().contains_key("example.com/gone"));
        assert_eq!(find(&second, "Ready")["lastTransitionTime"], "t1");
        assert_eq!(find(&second, "Ready")["lastHeartbeatTime"], "t2");
        assert_eq!(find(&second, "MemoryPressure")["status"], "True");
        assert_eq!(find(&second, "MemoryPressure")["lastTransitionTime"], "t2");
    }
}
