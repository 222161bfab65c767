//! The node agent (the kubelet's job): registers its Node, heartbeats (node status and a Lease),
//! watches the pods bound to it and runs them through a container runtime, one pod-worker actor
//! per pod. It reaches the cluster only through the [`ApiClient`](crate::client::ApiClient)
//! trait, so it runs embedded in the server or as a separate `kplane agent` process.
//!
//! - [`node_agent`]: the agent actor: registration, heartbeats, the pod list-watch.
//! - [`node_lease`]: the node's Lease (the heartbeat) and which agent holds the node.
//! - [`data_dir`]: the agent's lock on its data dir and its name kept there.
//! - [`admission`]: whether a new pod fits the node beside the pods it runs (or is rejected).
//! - [`sysctls`]: the sysctls the node lets pods set (safe ones, and unsafe ones it allows).
//! - [`pod_worker`]: one actor per pod: starts, restarts, probes and stops its containers and
//!   writes the pod status.
//! - [`runtime`]: how containers run: host processes, or simulated (like kwok).
//! - [`service_proxy`]: serves services at their cluster IPs and node ports (kube-proxy's job).
//! - [`node_status`]: what the machine has (capacity, pressure conditions, node info).
//! - [`pod_ips`]: the node's pod CIDR and the pod IPs in it.
//! - [`probes`]: exec, HTTP and TCP probes.
//! - [`hooks`]: lifecycle hooks (postStart, preStop): exec, HTTP and sleep handlers.
//! - [`launch`]: a container's command line and environment, from its spec.
//! - [`log_lines`]: the container log format (timed lines) and reading it back.
//! - [`volumes`]: a pod's volumes on the node (directories, files, host paths) and what each
//!   container mounts of them.

pub mod admission;
pub mod data_dir;
mod eviction;
mod hooks;
pub mod launch;
pub mod log_lines;
pub mod node_agent;
pub mod node_lease;
pub mod node_status;
pub mod pod_ips;
pub mod pod_worker;
pub mod probes;
pub mod runtime;
pub mod service_proxy;
mod shutdown;
pub mod sysctls;
pub mod volumes;

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

pub use node_agent::{AgentPods, ContainerLookup, NodeAgent, PodLookup};
pub use pod_worker::ExecTarget;

/// The kubelet's words for a container of a pod it does not run: for an exec (or a run)
/// `container not found ("c")`, for an attach `container c not found in pod p_ns`.
pub fn container_not_found(container: &str, attach_to: Option<(&str, &str)>) -> String {
    match attach_to {
        Some((namespace, pod)) => {
            format!("container {container} not found in pod {pod}_{namespace}")
        }
        None => format!("container not found ({})", crate::model::text::go_quote(container)),
    }
}

/// The cluster's pod network by default (`agent.cluster_cidr`).
pub const DEFAULT_CLUSTER_CIDR: (Ipv4Addr, u8) = (Ipv4Addr::new(127, 64, 0, 0), 10);

/// Everything an agent is configured with.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub node_name: String,
    /// This agent's own name, kept in its data dir ([`data_dir::DataDirClaim`]), which it
    /// writes on its node's Lease; another agent's on a lease that lasts keeps it from taking
    /// the node ([`node_lease`]). `None`: it neither writes one nor looks (agents in tests).
    pub identity: Option<String>,
    /// The address other components reach this node at (its InternalIP).
    pub address: Ipv4Addr,
    /// The port of the agent's HTTP server (0: none), published in the Node's daemonEndpoints.
    pub port: u16,
    /// Where pod logs and container state live.
    pub data_dir: PathBuf,
    /// The cluster's pod network, which the server's node IPAM controller gives each node a
    /// /24 of (an agent takes its node's from the Node, not from here).
    pub cluster_cidr: (Ipv4Addr, u8),
    pub node_status_update_period: Duration,
    pub lease_duration: Duration,
    /// Interval of each pod worker's sync (start, restart, probe, status).
    pub sync_period: Duration,
    /// First restart back-off of a crashing container; it doubles up to `max_restart_backoff`.
    pub restart_backoff: Duration,
    pub max_restart_backoff: Duration,
    /// Capacity reported besides what the machine has: `cpu`, `memory`, `pods` overrides.
    pub capacity_overrides: HashMap<String, String>,
    pub max_pods: u32,
    /// Image name -> command line, for containers without a `command`.
    pub images: HashMap<String, Vec<String>>,
    /// Command-line prefix that applies a memory limit (`{bytes}` is replaced) and then runs
    /// the rest; without it memory limits are not enforced.
    pub memory_limit_launcher: Option<Vec<String>>,
    /// Command-line prefix that sets the rest's `oom_score_adj` (`{score}` is replaced), as
    /// the kubelet sets each container's by its pod's QoS class; without it containers keep
    /// the agent's.
    pub oom_score_launcher: Option<Vec<String>>,
    /// Command-line prefix that makes the rest lead a session of its own with its stdin, a
    /// terminal, as its controlling one; without it containers get no terminal (`tty`).
    pub terminal_launcher: Option<Vec<String>>,
    /// Command-line prefix that runs the rest as another user and groups (`{identity}` is
    /// replaced by a [`launch::Identity`]'s text); without it a pod's `runAsUser`,
    /// `runAsGroup`, `supplementalGroups` and `fsGroup` are not applied.
    pub identity_launcher: Option<Vec<String>>,
    /// Command-line prefix that gives the rest a host name of its own (`{hostname}` is
    /// replaced), as a container runtime gives each pod; without it containers have the
    /// machine's (`HOSTNAME` is set either way).
    pub hostname_launcher: Option<Vec<String>>,
    /// Command-line prefix that puts the rest in the host name of the process `{pid}`: what is
    /// exec'd in a container that has its own.
    pub join_hostname_launcher: Option<Vec<String>>,
    /// Command-line prefix that binds volumes in a mount namespace of the rest's own (each
    /// [`volumes::Mount`] as JSON after `--mount`, then `--`); without it containers see the
    /// node's file system as it is, without their volumes.
    pub mount_launcher: Option<Vec<String>>,
    /// Command-line prefix that puts the rest in the mount namespace of the process `{pid}`:
    /// what is exec'd in a container that mounts volumes.
    pub join_mounts_launcher: Option<Vec<String>>,
    /// Command-line prefix that stays the container's first process, runs the rest as its
    /// child and notes how it ended in `{file}` (a container shim's part): an agent that
    /// restarts, and adopts a container it is not the parent of, reads its exit code there;
    /// without it such an end is unknown (137, `ContainerStatusUnknown`).
    pub exit_launcher: Option<Vec<String>>,
    /// Command-line prefix of the log writer a container's output is piped into (the log
    /// file's path is added); without it the output is appended to the log file directly, and
    /// its lines have no times (`kubectl logs --timestamps`, `--since`).
    pub log_writer: Option<Vec<String>>,
    /// Log files are rotated (one `.1` kept) past this size.
    pub max_log_bytes: u64,
    /// Stop the containers when the agent shuts down cleanly (they are adopted after a crash).
    pub stop_containers_on_shutdown: bool,
    /// How long a clean stop gives the containers (each pod its grace period at most), preStop
    /// hooks included, before SIGKILL: the kubelet's `shutdownGracePeriod`.
    pub shutdown_grace_period: Duration,
    /// Extra node labels (besides kubernetes.io/hostname, os, arch).
    pub labels: HashMap<String, String>,
    /// The sysctls pods may set (admission refuses others).
    pub sysctls: sysctls::SysctlAllowlist,
}

impl AgentConfig {
    /// Defaults for a node named `node_name` keeping its files under `data_dir`.
    pub fn new(node_name: &str, data_dir: PathBuf) -> Self {
        Self {
            node_name: node_name.to_string(),
            identity: None,
            address: Ipv4Addr::LOCALHOST,
            port: 0,
            data_dir,
            cluster_cidr: DEFAULT_CLUSTER_CIDR,
            node_status_update_period: Duration::from_secs(10),
            lease_duration: Duration::from_secs(40),
            sync_period: Duration::from_secs(1),
            restart_backoff: Duration::from_secs(10),
            max_restart_backoff: Duration::from_secs(300),
            capacity_overrides: HashMap::new(),
            max_pods: 110,
            images: HashMap::new(),
            memory_limit_launcher: None,
            oom_score_launcher: None,
            terminal_launcher: None,
            identity_launcher: None,
            hostname_launcher: None,
            join_hostname_launcher: None,
            mount_launcher: None,
            join_mounts_launcher: None,
            exit_launcher: None,
            log_writer: None,
            max_log_bytes: 10 * 1024 * 1024,
            stop_containers_on_shutdown: true,
            shutdown_grace_period: Duration::from_secs(5),
            labels: HashMap::new(),
            sysctls: sysctls::SysctlAllowlist::default(),
        }
    }

    /// The command line of `image`: exact name first, then without its tag or digest, then by
    /// its familiar name (Docker Hub's `docker.io/library/redis` is `redis`, as container
    /// runtimes name images), the configured names taken so too.
    pub fn resolve_image(&self, image: &str) -> Option<&Vec<String>> {
        let without_digest = image.split('@').next().unwrap_or(image);
        let last_slash = without_digest.rfind('/').map_or(0, |i| i + 1);
        let untagged = match without_digest[last_slash..].find(':') {
            Some(colon) => &without_digest[..last_slash + colon],
            None => without_digest,
        };
        (self.images.get(image))
            .or_else(|| self.images.get(untagged))
            .or_else(|| self.by_familiar_name(without_digest))
            .or_else(|| self.by_familiar_name(untagged))
    }

    /// The command line of the configured image whose familiar name is `name`'s (the first
    /// in name order, when several configured names are one image).
    fn by_familiar_name(&self, name: &str) -> Option<&Vec<String>> {
        let familiar = familiar_name(name);
        let found =
            self.images.iter().filter(|(configured, _)| familiar_name(configured) == familiar);
        found.min_by_key(|(configured, _)| *configured).map(|(_, command)| command)
    }
}

/// An image name without Docker Hub's registry and `library/` namespace.
fn familiar_name(image: &str) -> &str {
    let image = ["docker.io/", "index.docker.io/"]
        .iter()
        .find_map(|registry| image.strip_prefix(registry))
        .unwrap_or(image);
    image.strip_prefix("library/").unwrap_or(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_resolve_with_or_without_tags() {
        let mut config = AgentConfig::new("n", PathBuf::from("/tmp"));
        config.images.insert("kplane/agnhost".into(), vec!["agnhost".into()]);
        config.images.insert("localhost:5000/app".into(), vec!["app".into()]);
        assert!(config.resolve_image("kplane/agnhost:2.40").is_some());
        assert!(config.resolve_image("kplane/agnhost@sha256:abc").is_some());
        assert!(config.resolve_image("localhost:5000/app:v1").is_some());
        assert!(config.resolve_image("localhost:5000/other").is_none());
        assert!(config.resolve_image("nginx").is_none());
        // Docker Hub's names, either way.
        assert!(config.resolve_image("docker.io/kplane/agnhost:2.40").is_some());
        config.images.insert("docker.io/library/redis".into(), vec!["redis-server".into()]);
        config.images.insert("busybox".into(), vec!["sh".into()]);
        assert!(config.resolve_image("redis:7").is_some());
        assert!(config.resolve_image("docker.io/library/busybox:1.36").is_some());
        assert!(config.resolve_image("index.docker.io/busybox").is_some());
        assert!(config.resolve_image("quay.io/busybox").is_none());
        config.images.insert("docker.io/library/nginx:1.27".into(), vec!["nginx".into()]);
        assert!(config.resolve_image("nginx:1.27").is_some());
        assert!(config.resolve_image("nginx:1.26").is_none());
    }
}

#[cfg(test)]
mod agent_tests;
