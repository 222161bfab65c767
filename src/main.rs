//! The `kplane` binary: a thin command line over the daemon.

mod agent;
mod api;
mod auth;
mod client;
mod config;
mod daemon;
mod error;
mod health;
mod images;
mod panics;
mod peer;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::{Overrides, Settings};

/// mimalloc: the API server allocates and frees many small objects across threads (JSON
/// values, messages between actors), where it is markedly faster than the system allocator.
/// Built without asking for transparent huge pages (`no_thp`): each helper process the agent
/// starts and that stays (a container's first process, its log writers, the built-in images)
/// would otherwise hold 4 MiB of them for a few KiB of heap, where the host has them on
/// `madvise`; the server turns them off for itself anyway (`disable_transparent_huge_pages`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "kplane", version, about = "A Kubernetes-compatible control plane on actors")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the API server, store, watch hub, scheduler and a node agent in one process.
    Server(Box<ServerArgs>),
    /// Runs node agents (the kubelet's job) against a kplane server over its REST API.
    Agent(AgentArgs),
    /// Prints the version and the Kubernetes API version served.
    Version,
    /// Runs a built-in container image (pause, agnhost) in the foreground.
    #[command(hide = true)]
    Image(images::ImageArgs),
    /// Lowers rlimits, then replaces itself with the program after `--`.
    #[command(hide = true)]
    ExecLimited(images::ExecLimitedArgs),
    /// Appends stdin to a container log file, a line at a time with its time.
    #[command(hide = true)]
    LogWriter(images::LogWriterArgs),
}

#[derive(clap::Args)]
struct ServerArgs {
    /// TOML configuration file; without it the built-in defaults apply.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Where the store keeps its data (default ./data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Port of the unauthenticated HTTP listener (default 8080).
    #[arg(long)]
    insecure_port: Option<u16>,
    /// Address of the unauthenticated listener (default 127.0.0.1).
    #[arg(long)]
    insecure_bind_address: Option<String>,
    /// Port of the TLS listener, which authenticates and authorizes (default 6443; 0: none).
    #[arg(long)]
    secure_port: Option<u16>,
    /// Address of the TLS listener (default 0.0.0.0).
    #[arg(long)]
    bind_address: Option<String>,
    /// The secure port's certificate (PEM); without it and a key, a self-signed one.
    #[arg(long)]
    tls_cert_file: Option<String>,
    /// The secure port's private key (PEM).
    #[arg(long)]
    tls_private_key_file: Option<String>,
    /// CA whose client certificates authenticate (CN: user, O: groups).
    #[arg(long)]
    client_ca_file: Option<String>,
    /// Bearer tokens: CSV lines `token,user,uid,"group1,group2"`.
    #[arg(long)]
    token_auth_file: Option<String>,
    /// HTTP basic users: CSV lines `password,user,uid,"group1,group2"`.
    #[arg(long)]
    basic_auth_file: Option<String>,
    /// Requests without credentials are system:anonymous (default true; off under AlwaysAllow).
    #[arg(long, action = clap::ArgAction::Set, value_name = "BOOL")]
    anonymous_auth: Option<bool>,
    /// RBAC (default), ABAC, AlwaysAllow or AlwaysDeny; several comma-separated.
    #[arg(long)]
    authorization_mode: Option<String>,
    /// ABAC policies: one JSON Policy a line.
    #[arg(long)]
    authorization_policy_file: Option<String>,
    /// The address pods reach the API server at (the `kubernetes` Service's endpoint).
    #[arg(long)]
    advertise_address: Option<String>,
    /// Audit log: one JSON event a request ("-": the standard output).
    #[arg(long)]
    audit_log_path: Option<String>,
    /// Rotate the audit log before it grows past this many megabytes (0: 100).
    #[arg(long, value_name = "MB")]
    audit_log_maxsize: Option<u64>,
    /// Keep this many rotated audit logs, the newest (0: all).
    #[arg(long, value_name = "N")]
    audit_log_maxbackup: Option<u64>,
    /// Keep rotated audit logs for this many days (0: no limit).
    #[arg(long, value_name = "DAYS")]
    audit_log_maxage: Option<u64>,
    /// Delete Events this long after their last write (a Go duration: 1h, 30m, 1h30m0s; 0
    /// keeps them).
    #[arg(long, value_name = "DURATION", value_parser = go_duration_seconds)]
    event_ttl: Option<u64>,
    /// Run a node agent inside the server (default true; `--embedded-agent=false` turns it off).
    #[arg(long, action = clap::ArgAction::Set, value_name = "BOOL")]
    embedded_agent: Option<bool>,
    /// Node name of the embedded agent (default: the host name).
    #[arg(long)]
    node_name: Option<String>,
}

#[derive(clap::Args)]
struct AgentArgs {
    /// The kplane server, `http://host:port`.
    #[arg(long)]
    server: String,
    /// TOML configuration file (its [agent] and [runtime] sections apply).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Node name (default: the host name); with --nodes, the names are PREFIX0, PREFIX1, ...
    #[arg(long)]
    node_name: Option<String>,
    /// Port of the agent's HTTP server (default 10250; 0 picks a free one).
    #[arg(long)]
    port: Option<u16>,
    /// Where the agent keeps pod logs and container state (default ./data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// `process` runs containers as host processes; `simulated` runs nothing (like kwok).
    #[arg(long)]
    runtime: Option<String>,
    /// How many nodes to run in this process (simulated runtime only).
    #[arg(long, default_value_t = 1)]
    nodes: usize,
    /// Name prefix of the nodes (default `sim-` with --nodes above 1): they are named PREFIX0,
    /// PREFIX1, ...; given, it names a single node too.
    #[arg(long)]
    node_name_prefix: Option<String>,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::Version => {
            println!(
                "kplane {} (Kubernetes API v1.{})",
                env!("CARGO_PKG_VERSION"),
                api::KUBERNETES_MINOR
            );
            ExitCode::SUCCESS
        }
        Command::Server(args) => {
            raise_open_file_limit();
            server(*args)
        }
        Command::Agent(args) => {
            raise_open_file_limit();
            agent(args)
        }
        Command::Image(args) => images::run(args),
        Command::ExecLimited(args) => images::exec_limited(args),
        Command::LogWriter(args) => images::log_writer(args),
    }
}

fn server(args: ServerArgs) -> ExitCode {
    let overrides = Overrides {
        config: args.config,
        data_dir: args.data_dir,
        insecure_port: args.insecure_port,
        insecure_bind_address: args.insecure_bind_address,
        secure_port: args.secure_port,
        bind_address: args.bind_address,
        embedded_agent: args.embedded_agent,
        node_name: args.node_name,
        server_flags: [
            ("tls_cert_file", args.tls_cert_file),
            ("tls_private_key_file", args.tls_private_key_file),
            ("client_ca_file", args.client_ca_file),
            ("token_auth_file", args.token_auth_file),
            ("basic_auth_file", args.basic_auth_file),
            ("authorization_mode", args.authorization_mode),
            ("authorization_policy_file", args.authorization_policy_file),
            ("advertise_address", args.advertise_address),
            ("audit_log_path", args.audit_log_path),
            ("audit_log_maxsize", args.audit_log_maxsize.map(|n| n.to_string())),
            ("audit_log_maxbackup", args.audit_log_maxbackup.map(|n| n.to_string())),
            ("audit_log_maxage", args.audit_log_maxage.map(|n| n.to_string())),
            ("event_ttl_seconds", args.event_ttl.map(|n| n.to_string())),
        ]
        .into_iter()
        .filter_map(|(key, value)| Some((key, value?)))
        .collect(),
        anonymous_auth: args.anonymous_auth,
        ..Overrides::default()
    };
    let settings = match Settings::load(&overrides) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    init_logging(&settings);
    panics::abort_on_component_panic();
    let system = actix::System::new();
    let outcome = system.block_on(async {
        let running = daemon::start(&settings).await?;
        let addr = running.insecure_addr;
        running.serve().await.map_err(|source| daemon::StartError::Bind { addr, source })
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

fn agent(args: AgentArgs) -> ExitCode {
    let overrides = Overrides {
        config: args.config,
        data_dir: args.data_dir,
        node_name: args.node_name,
        agent_port: args.port,
        runtime: args.runtime,
        ..Overrides::default()
    };
    let settings = match Settings::load(&overrides) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    if args.nodes == 0 {
        return fail(&"--nodes must be at least 1");
    }
    if args.nodes > 1 && settings.agent.runtime != config::RuntimeKind::Simulated {
        return fail(&"--nodes above 1 needs --runtime simulated");
    }
    let client = match client::rest::RestClient::new(&args.server) {
        Ok(c) => std::sync::Arc::new(c),
        Err(e) => return fail(&e),
    };
    init_logging(&settings);
    panics::abort_on_component_panic();
    let system = actix::System::new();
    let outcome = system.block_on(async move {
        let mut agents = Vec::with_capacity(args.nodes);
        for i in 0..args.nodes {
            let mut config = settings.agent.agent.clone();
            let prefix = match &args.node_name_prefix {
                Some(prefix) => Some(prefix.as_str()),
                None => (args.nodes > 1).then_some("sim-"),
            };
            if let Some(prefix) = prefix {
                config.node_name = format!("{prefix}{i}");
                config.data_dir = config.data_dir.with_file_name(&config.node_name);
            }
            let port = if args.nodes == 1 { Some(agent::AgentPort::bind(&config)?) } else { None };
            let running = agent::start(&settings.agent, config, client.clone(), port).await?;
            if let Some(addr) = running.http_addr {
                tracing::info!(%addr, "agent HTTP port");
            }
            agents.push(running);
        }
        tracing::info!(nodes = agents.len(), server = %args.server, "node agents started");
        // An agent that gave its node up has nothing left to do: the process ends non-zero,
        // for a supervisor to see (restarted, it takes the node again once it is free).
        let given_up =
            futures::future::select_all(agents.iter().map(|a| Box::pin(a.node_given_up())));
        let outcome = tokio::select! {
            _ = daemon::shutdown_signal() => Ok(()),
            _ = given_up => Err(AgentExit::NodeGivenUp),
        };
        for running in agents {
            running.stop().await;
        }
        outcome
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(AgentExit::NodeGivenUp) => ExitCode::from(1),
        Err(AgentExit::Start(e)) => fail(&e),
    }
}

/// Why `kplane agent` ended other than by a signal.
#[derive(Debug, thiserror::Error)]
enum AgentExit {
    #[error(transparent)]
    Start(#[from] agent::AgentStartError),
    #[error("an agent gave its node up")]
    NodeGivenUp,
}

/// Raises the soft limit on open files to the hard one, as Go raises it at start for
/// kube-apiserver, etcd and the kubelet: a server holds a connection for each watch and client,
/// an agent one for each simulated node's watch, and many systems give a process 1,024.
/// Containers inherit it, as a container runtime's do.
fn raise_open_file_limit() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        if soft < hard {
            // A hard limit the kernel does not allow as a soft one (unlimited) leaves it.
            let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
        }
    }
}

fn init_logging(settings: &Settings) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&settings.log_level));
    // A log that cannot be written (a full disk, a closed pipe) loses lines; reporting that
    // on stderr, which may be what failed, would panic the thread that logged.
    // Colours for a terminal only: a file or a journal gets plain lines.
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(terminal)
        .with_writer(std::io::stderr)
        .log_internal_errors(false)
        .init();
}

/// Start-up failures: one line naming the key or port, exit code 2, no backtrace.
fn fail(error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("kplane: {error}");
    ExitCode::from(2)
}

/// Whole seconds of a Go duration of hours, minutes and seconds (`1h`, `30m`, `1h0m0s`, `0`), as
/// kube-apiserver's duration flags take them.
fn go_duration_seconds(text: &str) -> Result<u64, String> {
    let bad = || format!("{text:?} is not a duration such as 1h, 30m or 1h30m0s");
    if text == "0" {
        return Ok(0);
    }
    let (mut seconds, mut digits) = (0u64, String::new());
    for c in text.chars() {
        match c {
            '0'..='9' => digits.push(c),
            'h' | 'm' | 's' if !digits.is_empty() => {
                let unit = match c {
                    'h' => 3600,
                    'm' => 60,
                    _ => 1,
                };
                let amount: u64 = digits.parse().map_err(|_| bad())?;
                seconds = amount
                    .checked_mul(unit)
                    .and_then(|a| seconds.checked_add(a))
                    .ok_or_else(bad)?;
                digits.clear();
            }
            _ => return Err(bad()),
        }
    }
    if text.is_empty() || !digits.is_empty() {
        return Err(bad());
    }
    Ok(seconds)
}

#[cfg(test)]
mod duration_tests {
    use super::go_duration_seconds;

    #[test]
    fn go_durations_read_as_seconds() {
        assert_eq!(go_duration_seconds("1h0m0s"), Ok(3600));
        assert_eq!(go_duration_seconds("90m"), Ok(5400));
        assert_eq!(go_duration_seconds("1h30m15s"), Ok(5415));
        assert_eq!(go_duration_seconds("0"), Ok(0));
        for bad in ["", "10", "1x", "h", "1.5h", "-1h"] {
            assert!(go_duration_seconds(bad).is_err(), "{bad}");
        }
    }
}
