//! Starting node agents: the one embedded in `kplane server` and those of `kplane agent`, with
//! their runtime, the built-in images (served by this binary), the agent's HTTP port and its
//! service proxy.

pub(crate) mod debugging;
mod http;
mod port_forward;
pub(crate) use port_forward::SPDY_PROTOCOL as PORT_FORWARD_SPDY_PROTOCOL;
mod spdy;
mod stats;
mod terminal;

use std::net::SocketAddr;
use std::sync::Arc;

use actix::{Actor, Addr};
use kplane_actors::agent::data_dir::{ClaimError, DataDirClaim};
use kplane_actors::agent::node_agent::{NodeGivenUp, StopAgent};
use kplane_actors::agent::node_lease::{self, HeldByAnother};
use kplane_actors::agent::runtime::{ProcessRuntime, Runtime, SimulatedRuntime};
use kplane_actors::agent::service_proxy::{ServiceProxy, StopServiceProxy};
use kplane_actors::agent::{AgentConfig, NodeAgent};
use kplane_actors::client::ApiClient;

use crate::config::{AgentSettings, RuntimeKind};

/// A running agent: the actor and, when it has them, its HTTP server and service proxy.
pub struct RunningAgent {
    pub addr: Addr<NodeAgent>,
    pub http_addr: Option<SocketAddr>,
    http: Option<actix_web::dev::ServerHandle>,
    proxy: Option<Addr<ServiceProxy>>,
    /// The agent's data dir, locked while it runs.
    _data_dir: DataDirClaim,
}

impl RunningAgent {
    /// Ends once the agent has given its node up to another agent (see `NodeAgent`), its
    /// containers stopped; never otherwise.
    pub async fn node_given_up(&self) {
        if self.addr.send(NodeGivenUp).await != Ok(true) {
            std::future::pending::<()>().await;
        }
    }

    /// Stops the HTTP server and the agent (and, as configured, its containers).
    pub async fn stop(self) {
        if let Some(http) = self.http {
            http.stop(true).await;
        }
        if let Some(proxy) = self.proxy {
            let _ = proxy.send(StopServiceProxy).await;
        }
        let _ = self.addr.send(StopAgent).await;
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AgentStartError {
    #[error("cannot listen on {addr} (agent.port/--port): {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("{0} (data_dir/--data-dir)")]
    DataDir(#[from] ClaimError),
    #[error(transparent)]
    NodeHeld(#[from] HeldByAnother),
}

/// The images this binary serves itself, the launchers that apply memory limits, put a
/// container on its terminal and, for a `runtime` of processes, give it its pod's host name
/// and stay its first process to note its exit, and the writer of container logs.
fn with_builtins(mut config: AgentConfig, runtime: RuntimeKind) -> AgentConfig {
    let Ok(exe) = std::env::current_exe() else { return config };
    let exe = exe.to_string_lossy().to_string();
    for (image, subcommand) in [("kplane/pause", "pause"), ("kplane/agnhost", "agnhost")] {
        config
            .images
            .entry(image.to_string())
            .or_insert_with(|| vec![exe.clone(), "image".into(), subcommand.into()]);
    }
    config.log_writer = Some(vec![exe.clone(), "log-writer".into()]);
    config.terminal_launcher = Some(terminal::LAUNCHER.map(String::from).into());
    let exec_limited = |flags: &[&str]| -> Vec<String> {
        let line = [exe.as_str(), "exec-limited"].into_iter().chain(flags.iter().copied());
        line.chain(["--"]).map(String::from).collect()
    };
    config.identity_launcher = Some(exec_limited(&["--as", "{identity}"]));
    config.memory_limit_launcher = Some(exec_limited(&["--memory-bytes", "{bytes}"]));
    if runtime == RuntimeKind::Process {
        config.oom_score_launcher = Some(exec_limited(&["--oom-score-adj", "{score}"]));
        config.exit_launcher = Some(exec_limited(&["--exit-file", "{file}"]));
    }
    if runtime == RuntimeKind::Process && may_name_hosts(&exe) {
        config.hostname_launcher = Some(exec_limited(&["--hostname", "{hostname}"]));
        let join = ["--uts-of", "/proc/{pid}/ns/uts", "--uts-hostname", "{hostname}"];
        config.join_hostname_launcher = Some(exec_limited(&join));
    }
    if runtime == RuntimeKind::Process && may_mount(&exe) {
        config.mount_launcher = Some(vec![exe.clone(), "exec-limited".into()]);
        config.join_mounts_launcher = Some(exec_limited(&["--mounts-of", "/proc/{pid}/ns/mnt"]));
    }
    config
}

/// Whether this process may bind volumes in mount namespaces (root, with CAP_SYS_ADMIN):
/// tried once per process, as the launcher would do it.
fn may_mount(exe: &str) -> bool {
    static MAY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *MAY.get_or_init(|| {
        let root = r#"{"source":"/","target":"/","readOnly":false}"#;
        let may = tried(exe, &["exec-limited", "--mount", root, "--", "true"]);
        if !may {
            tracing::info!("containers run without their volumes: no mount namespaces here");
        }
        may
    })
}

/// Whether `exe` with `args` ran and succeeded (its output dropped).
fn tried(exe: &str, args: &[&str]) -> bool {
    let status = std::process::Command::new(exe)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    status.is_ok_and(|status| status.success())
}

/// Whether this process may make UTS namespaces (root, with CAP_SYS_ADMIN): tried once per
/// process, as the launcher would do it.
fn may_name_hosts(exe: &str) -> bool {
    static MAY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *MAY.get_or_init(|| {
        let may = tried(exe, &["exec-limited", "--hostname", "kplane-probe", "--", "true"]);
        if !may {
            tracing::info!("containers keep the machine's host name: no UTS namespaces here");
        }
        may
    })
}

fn runtime(kind: RuntimeKind, cgroups: bool) -> Arc<dyn Runtime> {
    match kind {
        RuntimeKind::Process if cgroups => {
            let Ok(exe) = std::env::current_exe() else {
                return Arc::new(ProcessRuntime::default());
            };
            let launcher = vec![exe.to_string_lossy().into_owned(), "exec-limited".into()];
            Arc::new(ProcessRuntime::with_cgroups(std::path::Path::new("/sys/fs/cgroup"), launcher))
        }
        RuntimeKind::Process => Arc::new(ProcessRuntime::default()),
        RuntimeKind::Simulated => Arc::new(SimulatedRuntime::default()),
    }
}

/// An agent's HTTP port, bound before the agent starts (so that a daemon finds it busy before
/// it opens its store), and the address it was asked for.
pub struct AgentPort {
    wanted: SocketAddr,
    listener: std::net::TcpListener,
}

impl AgentPort {
    /// Binds `config`'s address and port (0 picks a free one).
    pub fn bind(config: &AgentConfig) -> Result<Self, AgentStartError> {
        let wanted = SocketAddr::new(config.address.into(), config.port);
        let listener = std::net::TcpListener::bind(wanted)
            .map_err(|source| AgentStartError::Bind { addr: wanted, source })?;
        Ok(AgentPort { wanted, listener })
    }
}

/// Starts one agent with `config`, serving HTTP on `port` when it has one (then the port the
/// Node advertises is the one bound: a free one for 0). Refused while another agent holds its
/// data dir, or its node (when the server can be asked: else the agent waits to register
/// until the node is free).
pub async fn start(
    settings: &AgentSettings,
    config: AgentConfig,
    client: Arc<dyn ApiClient>,
    port: Option<AgentPort>,
) -> Result<RunningAgent, AgentStartError> {
    let claim = DataDirClaim::take(&config.data_dir)?;
    let mut config = with_builtins(config, settings.runtime);
    config.identity = Some(claim.identity().to_string());
    match node_lease::held_by_another(&config, client.as_ref()).await {
        Ok(None) => {}
        Ok(Some(other)) => return Err(other.into()),
        Err(error) => tracing::debug!(%error, "asking whether another agent holds the node"),
    }
    let runtime = runtime(settings.runtime, settings.cgroups);
    if runtime.enforces_memory_limits() {
        // Containers' memory limits are their groups': no per-process limit besides.
        config.memory_limit_launcher = None;
    }
    let listener = match port {
        Some(AgentPort { wanted, listener }) => {
            config.port = listener.local_addr().map(|a| a.port()).unwrap_or(config.port);
            Some((wanted, listener))
        }
        None => {
            config.port = 0;
            None
        }
    };
    let (data_dir, node_name) = (config.data_dir.clone(), config.node_name.clone());
    // Only processes can be reached through services: a simulated node has none to forward to.
    let proxy = (settings.service_proxy && settings.runtime == RuntimeKind::Process).then(|| {
        ServiceProxy::start_in_own_thread(client.clone(), config.node_name.clone(), config.address)
    });
    let addr = NodeAgent::new(config, client, runtime).start();
    let (http, http_addr) = match listener {
        Some((wanted, listener)) => {
            let debugging = settings.enable_debugging_handlers;
            let state = http::AgentHttp::new(addr.clone(), node_name, data_dir, debugging);
            let (server, bound) = http::serve(state, listener)
                .map_err(|source| AgentStartError::Bind { addr: wanted, source })?;
            let handle = server.handle();
            actix::spawn(async move {
                if let Err(error) = server.await {
                    tracing::warn!(%error, "agent HTTP server stopped");
                }
            });
            (Some(handle), bound)
        }
        None => (None, None),
    };
    Ok(RunningAgent { addr, http_addr, http, proxy, _data_dir: claim })
}
