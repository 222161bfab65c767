//! Configuration: the raw TOML/environment form, checked into the settings the daemon uses.
//!
//! Sources, later ones winning: built-in defaults, the `--config` TOML file, `KPLANE_*`
//! environment variables (`KPLANE_STORE__SHARDS=4` sets `store.shards`), then CLI flags.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// Why the configuration was refused; one line, naming the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config: {0}")]
    Load(String),
    #[error("config key {key}: {message}")]
    Invalid { key: &'static str, message: String },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawConfig {
    data_dir: PathBuf,
    log_level: String,
    disable_transparent_huge_pages: bool,
    server: RawServer,
    store: RawStore,
    watch: RawWatch,
    agent: RawAgent,
    runtime: RawRuntime,
    scheduler: RawScheduler,
    controllers: RawControllers,
    metrics_server: RawMetricsServer,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawMetricsServer {
    enabled: bool,
    resolution_seconds: u64,
}

impl Default for RawMetricsServer {
    fn default() -> Self {
        let defaults = kplane_actors::metrics::ScraperConfig::default();
        Self { enabled: true, resolution_seconds: defaults.resolution.as_secs() }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawControllers {
    node_monitor_grace_period_seconds: u64,
    node_eviction_rate: f64,
    secondary_node_eviction_rate: f64,
    unhealthy_zone_threshold: f64,
    large_cluster_size_threshold: usize,
    terminated_pod_gc_threshold: usize,
    load_balancer_ip_range: String,
}

impl Default for RawControllers {
    fn default() -> Self {
        let defaults = kplane_actors::controllers::node_lifecycle::NodeLifecycleConfig::default();
        Self {
            node_monitor_grace_period_seconds: defaults.grace_period.as_secs(),
            node_eviction_rate: defaults.eviction_rate,
            secondary_node_eviction_rate: defaults.secondary_eviction_rate,
            unhealthy_zone_threshold: defaults.unhealthy_zone_threshold,
            large_cluster_size_threshold: defaults.large_cluster_size,
            terminated_pod_gc_threshold: kplane_actors::controllers::pod_gc::PodGcConfig::default()
                .terminated_threshold,
            load_balancer_ip_range: "127.128.0.0/16".into(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawAgent {
    enabled: bool,
    node_name: String,
    address: String,
    port: u16,
    runtime: String,
    cluster_cidr: String,
    node_status_update_period_seconds: u64,
    lease_duration_seconds: u64,
    sync_period_millis: u64,
    restart_backoff_seconds: u64,
    max_restart_backoff_seconds: u64,
    max_pods: u32,
    capacity: std::collections::HashMap<String, String>,
    labels: std::collections::HashMap<String, String>,
    max_log_bytes: u64,
    stop_containers_on_shutdown: bool,
    shutdown_grace_period_seconds: u64,
    enable_debugging_handlers: bool,
    service_proxy: bool,
    cgroups: bool,
    allowed_unsafe_sysctls: String,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawRuntime {
    images: std::collections::HashMap<String, Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawScheduler {
    enabled: bool,
}

impl Default for RawAgent {
    fn default() -> Self {
        Self {
            enabled: true,
            node_name: String::new(),
            address: "127.0.0.1".into(),
            port: 10250,
            runtime: "process".into(),
            cluster_cidr: "127.64.0.0/10".into(),
            node_status_update_period_seconds: 10,
            lease_duration_seconds: 40,
            sync_period_millis: 1000,
            restart_backoff_seconds: 10,
            max_restart_backoff_seconds: 300,
            max_pods: 110,
            capacity: Default::default(),
            labels: Default::default(),
            max_log_bytes: 10 * 1024 * 1024,
            stop_containers_on_shutdown: true,
            shutdown_grace_period_seconds: 5,
            enable_debugging_handlers: true,
            service_proxy: true,
            cgroups: true,
            allowed_unsafe_sysctls: String::new(),
        }
    }
}

impl Default for RawScheduler {
    fn default() -> Self {
        Self { enabled: true }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawServer {
    insecure_port: u16,
    insecure_bind_address: String,
    secure_port: u16,
    bind_address: String,
    advertise_address: String,
    max_request_body_bytes: usize,
    max_requests_inflight: usize,
    max_mutating_requests_inflight: usize,
    event_ttl_seconds: u64,
    service_cluster_ip_range: String,
    service_node_port_range: String,
    tls_cert_file: String,
    tls_private_key_file: String,
    client_ca_file: String,
    token_auth_file: String,
    basic_auth_file: String,
    anonymous_auth: bool,
    authorization_mode: String,
    authorization_policy_file: String,
    audit_log_path: String,
    audit_log_maxsize: u64,
    audit_log_maxbackup: usize,
    audit_log_maxage: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawStore {
    shards: usize,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawWatch {
    window_events: usize,
    window_megabytes: usize,
    buffer: usize,
    bookmark_interval_seconds: u64,
    max_timeout_seconds: u64,
}

impl Default for RawConfig {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("./data"),
            log_level: "info".into(),
            disable_transparent_huge_pages: true,
            server: RawServer::default(),
            store: RawStore::default(),
            watch: RawWatch::default(),
            agent: RawAgent::default(),
            runtime: RawRuntime::default(),
            scheduler: RawScheduler::default(),
            controllers: RawControllers::default(),
            metrics_server: RawMetricsServer::default(),
        }
    }
}

impl Default for RawServer {
    fn default() -> Self {
        Self {
            insecure_port: 8080,
            insecure_bind_address: "127.0.0.1".into(),
            secure_port: 6443,
            bind_address: "0.0.0.0".into(),
            advertise_address: String::new(),
            max_request_body_bytes: 3 * 1024 * 1024,
            max_requests_inflight: 400,
            max_mutating_requests_inflight: 200,
            event_ttl_seconds: 3600,
            service_cluster_ip_range: "127.192.0.0/16".into(),
            service_node_port_range: "30000-32767".into(),
            tls_cert_file: String::new(),
            tls_private_key_file: String::new(),
            client_ca_file: String::new(),
            token_auth_file: String::new(),
            basic_auth_file: String::new(),
            anonymous_auth: true,
            authorization_mode: "RBAC".into(),
            authorization_policy_file: String::new(),
            audit_log_path: String::new(),
            audit_log_maxsize: 0,
            audit_log_maxbackup: 0,
            audit_log_maxage: 0,
        }
    }
}

impl Default for RawStore {
    fn default() -> Self {
        Self { shards: 2 }
    }
}

impl Default for RawWatch {
    fn default() -> Self {
        Self {
            window_events: 100_000,
            window_megabytes: 512,
            buffer: 10_000,
            bookmark_interval_seconds: 60,
            max_timeout_seconds: 3600,
        }
    }
}

/// Values given on the command line; they override the file and the environment.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub config: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub insecure_port: Option<u16>,
    pub insecure_bind_address: Option<String>,
    pub secure_port: Option<u16>,
    pub bind_address: Option<String>,
    pub embedded_agent: Option<bool>,
    pub node_name: Option<String>,
    pub agent_port: Option<u16>,
    pub runtime: Option<String>,
    /// `[server]` keys given by their kube-apiserver flags (`--token-auth-file`, ...), by key.
    pub server_flags: Vec<(&'static str, String)>,
    pub anonymous_auth: Option<bool>,
}

/// The checked settings of the server.
#[derive(Debug, Clone)]
pub struct Settings {
    pub data_dir: PathBuf,
    pub log_level: String,
    /// Turn transparent huge pages off for the server's process (`daemon::start`).
    pub disable_transparent_huge_pages: bool,
    pub insecure_addr: SocketAddr,
    pub secure_addr: SocketAddr,
    /// Where the `kubernetes` Service sends pods (`--advertise-address`); None: the secure
    /// port's own address, 127.0.0.1 for a wildcard.
    pub advertise_address: Option<std::net::Ipv4Addr>,
    pub max_request_body_bytes: usize,
    /// Requests in flight past which the server answers 429 (`0`: no limit).
    pub max_requests_inflight: usize,
    pub max_mutating_requests_inflight: usize,
    /// How long after its last write an Event is deleted (`None`: kept).
    pub event_ttl: Option<Duration>,
    pub shards: usize,
    pub watch_window_events: usize,
    pub watch_window_bytes: usize,
    pub watch_buffer: usize,
    pub bookmark_interval: Duration,
    pub watch_max_timeout: Duration,
    pub agent: AgentSettings,
    pub scheduler_enabled: bool,
    /// Read the agents' usage for metrics.k8s.io (`None`: not served).
    pub metrics_server: Option<kplane_actors::metrics::ScraperConfig>,
    pub service_ranges: kplane_actors::core::ServiceRanges,
    pub node_lifecycle: kplane_actors::controllers::node_lifecycle::NodeLifecycleConfig,
    /// Finished pods kept before the oldest are deleted (`0`: all are kept).
    pub terminated_pod_gc_threshold: usize,
    pub load_balancer: kplane_actors::controllers::service::LoadBalancerConfig,
    /// Authentication, authorization and the audit log.
    pub security: std::sync::Arc<crate::auth::Security>,
    /// The secure port's certificates (a self-signed pair in the data dir without them).
    pub tls: crate::auth::tls::TlsFiles,
}

/// How the container runtime of a node agent runs containers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeKind {
    Process,
    Simulated,
}

/// The node agent's settings (embedded in the server, or `kplane agent`).
#[derive(Debug, Clone)]
pub struct AgentSettings {
    /// Run one agent inside `kplane server`.
    pub enabled: bool,
    pub runtime: RuntimeKind,
    /// Serve /run, /exec, /attach, /portForward and /debug/pprof/ on the agent's port.
    pub enable_debugging_handlers: bool,
    /// Serve services at their cluster IPs and node ports (process runtime only).
    pub service_proxy: bool,
    /// Put each container in control groups of its own where the agent can (process runtime).
    pub cgroups: bool,
    /// Everything the agent actor needs (node name, address, port, periods, images...).
    pub agent: kplane_actors::agent::AgentConfig,
}

impl Settings {
    /// Loads the file (if any) and the environment, applies `overrides`, and checks everything.
    pub fn load(overrides: &Overrides) -> Result<Self, ConfigError> {
        let env: Vec<(String, String)> =
            std::env::vars().filter(|(k, _)| k.starts_with("KPLANE_")).collect();
        Self::load_from(overrides, env)
    }

    fn load_from(overrides: &Overrides, env: Vec<(String, String)>) -> Result<Self, ConfigError> {
        let mut builder = config::Config::builder();
        if let Some(path) = &overrides.config {
            if !path.is_file() {
                return Err(ConfigError::Load(format!("{}: no such file", path.display())));
            }
            builder = builder
                .add_source(config::File::from(path.as_path()).format(config::FileFormat::Toml));
        }
        let env_names: Vec<String> = env.iter().map(|(name, _)| name.clone()).collect();
        let env_source = config::Environment::with_prefix("KPLANE")
            .prefix_separator("_")
            .separator("__")
            .try_parsing(true)
            .source(Some(env.into_iter().collect()));
        builder = builder.add_source(env_source);
        // `[server]` keys given by their flags, over the file and the environment.
        let flag = |e: config::ConfigError| ConfigError::Load(e.to_string());
        for (key, value) in &overrides.server_flags {
            builder =
                builder.set_override(format!("server.{key}"), value.as_str()).map_err(flag)?;
        }
        if let Some(anonymous) = overrides.anonymous_auth {
            builder = builder.set_override("server.anonymous_auth", anonymous).map_err(flag)?;
        }
        let raw: RawConfig = builder.build().and_then(|c| c.try_deserialize()).map_err(|e| {
            let message = e.to_string().replace('\n', " ");
            match unknown_from_environment(&message, &env_names) {
                Some(variable) => ConfigError::Load(format!("{message} (set by {variable})")),
                None => ConfigError::Load(message),
            }
        })?;
        Self::check(raw, overrides)
    }

    /// The defaults for tests that start a server in-process: the store under `data_dir`, the
    /// insecure port picked by the OS (port 0), no secure port (its fixed 6443 would clash
    /// between tests running at once, and with anything else on the machine), and only the
    /// API (no embedded agent, whose fixed port would clash too, and no scheduler writing to
    /// the test's pods).
    #[cfg(test)]
    pub fn for_tests(data_dir: &std::path::Path) -> Self {
        let overrides = Overrides {
            data_dir: Some(data_dir.to_path_buf()),
            insecure_port: Some(0),
            secure_port: Some(0),
            embedded_agent: Some(false),
            ..Overrides::default()
        };
        let mut settings =
            Self::check(RawConfig::default(), &overrides).expect("the defaults are valid");
        settings.scheduler_enabled = false;
        settings
    }

    fn check(mut raw: RawConfig, o: &Overrides) -> Result<Self, ConfigError> {
        if let Some(v) = &o.data_dir {
            raw.data_dir = v.clone();
        }
        if let Some(v) = o.insecure_port {
            raw.server.insecure_port = v;
        }
        if let Some(v) = &o.insecure_bind_address {
            raw.server.insecure_bind_address = v.clone();
        }
        if let Some(v) = o.secure_port {
            raw.server.secure_port = v;
        }
        if let Some(v) = &o.bind_address {
            raw.server.bind_address = v.clone();
        }
        if let Some(v) = o.embedded_agent {
            raw.agent.enabled = v;
        }
        if let Some(v) = &o.node_name {
            raw.agent.node_name = v.clone();
        }
        if let Some(v) = o.agent_port {
            raw.agent.port = v;
        }
        if let Some(v) = &o.runtime {
            raw.agent.runtime = v.clone();
        }
        let ip = |key: &'static str, value: &str| {
            value.parse::<IpAddr>().map_err(|_| ConfigError::Invalid {
                key,
                message: format!("{value:?} is not an IP address"),
            })
        };
        let insecure_ip = ip("server.insecure_bind_address", &raw.server.insecure_bind_address)?;
        let secure_ip = ip("server.bind_address", &raw.server.bind_address)?;
        let advertise_address = match raw.server.advertise_address.as_str() {
            "" => None,
            text => match ip("server.advertise_address", text)? {
                IpAddr::V4(v4) if !v4.is_unspecified() => Some(v4),
                _ => {
                    return Err(ConfigError::Invalid {
                        key: "server.advertise_address",
                        message: format!("{text:?} is not an IPv4 address pods can reach"),
                    })
                }
            },
        };
        let at_least = |key: &'static str, value: usize, min: usize| {
            if value < min {
                Err(ConfigError::Invalid {
                    key,
                    message: format!("must be at least {min}, got {value}"),
                })
            } else {
                Ok(value)
            }
        };
        if raw.store.shards > 256 {
            return Err(ConfigError::Invalid {
                key: "store.shards",
                message: "must be at most 256".into(),
            });
        }
        if raw.data_dir.as_os_str().is_empty() {
            return Err(ConfigError::Invalid {
                key: "data_dir",
                message: "must not be empty".into(),
            });
        }
        // Made absolute here, once: paths under it are handed to processes that run in other
        // directories (a container's volume mounts are made in its working directory).
        raw.data_dir = std::path::absolute(&raw.data_dir).map_err(|error| {
            ConfigError::Invalid { key: "data_dir", message: error.to_string() }
        })?;
        if !is_log_filter(&raw.log_level) {
            return Err(ConfigError::Invalid {
                key: "log_level",
                message: format!(
                    "{:?} is not a log level (trace, debug, info, warn, error, off) or a filter \
                     of `target=level` directives",
                    raw.log_level
                ),
            });
        }
        let agent = agent_settings(&raw)?;
        let service_ranges = service_ranges(&raw.server)?;
        let node_lifecycle = node_lifecycle(&raw.controllers)?;
        let load_balancer = load_balancer(&raw.controllers)?;
        let (security, tls) = security(&raw.server)?;
        let overlaps = |a: (std::net::Ipv4Addr, u8), b: (std::net::Ipv4Addr, u8)| {
            use kplane_actors::model::cidr::contains as cidr_contains;
            cidr_contains(a, b.0) || cidr_contains(b, a.0)
        };
        if overlaps(agent.agent.cluster_cidr, service_ranges.cluster_ips) {
            return Err(ConfigError::Invalid {
                key: "agent.cluster_cidr",
                message: format!(
                    "{:?} overlaps server.service_cluster_ip_range",
                    raw.agent.cluster_cidr
                ),
            });
        }
        for (other, range) in [
            ("server.service_cluster_ip_range", service_ranges.cluster_ips),
            ("agent.cluster_cidr", agent.agent.cluster_cidr),
        ] {
            if overlaps(load_balancer.ip_range, range) {
                return Err(ConfigError::Invalid {
                    key: "controllers.load_balancer_ip_range",
                    message: format!(
                        "{:?} overlaps {other}",
                        raw.controllers.load_balancer_ip_range
                    ),
                });
            }
        }
        Ok(Settings {
            load_balancer,
            security,
            tls,
            agent,
            service_ranges,
            node_lifecycle,
            terminated_pod_gc_threshold: raw.controllers.terminated_pod_gc_threshold,
            scheduler_enabled: raw.scheduler.enabled,
            metrics_server: metrics_server(&raw.metrics_server)?,
            data_dir: raw.data_dir,
            log_level: raw.log_level,
            disable_transparent_huge_pages: raw.disable_transparent_huge_pages,
            insecure_addr: SocketAddr::new(insecure_ip, raw.server.insecure_port),
            secure_addr: SocketAddr::new(secure_ip, raw.server.secure_port),
            advertise_address,
            max_request_body_bytes: at_least(
                "server.max_request_body_bytes",
                raw.server.max_request_body_bytes,
                1024,
            )?,
            max_requests_inflight: raw.server.max_requests_inflight,
            max_mutating_requests_inflight: raw.server.max_mutating_requests_inflight,
            event_ttl: (raw.server.event_ttl_seconds > 0)
                .then(|| Duration::from_secs(raw.server.event_ttl_seconds)),
            shards: at_least("store.shards", raw.store.shards, 1)?,
            watch_window_events: at_least("watch.window_events", raw.watch.window_events, 1)?,
            watch_window_bytes: at_least("watch.window_megabytes", raw.watch.window_megabytes, 1)?
                .saturating_mul(1 << 20),
            watch_buffer: at_least("watch.buffer", raw.watch.buffer, 1)?,
            bookmark_interval: Duration::from_secs(at_least(
                "watch.bookmark_interval_seconds",
                raw.watch.bookmark_interval_seconds as usize,
                1,
            )? as u64),
            watch_max_timeout: Duration::from_secs(at_least(
                "watch.max_timeout_seconds",
                raw.watch.max_timeout_seconds as usize,
                1,
            )? as u64),
        })
    }
}

/// Checks the `[metrics_server]` section.
fn metrics_server(
    raw: &RawMetricsServer,
) -> Result<Option<kplane_actors::metrics::ScraperConfig>, ConfigError> {
    if !raw.enabled {
        return Ok(None);
    }
    if raw.resolution_seconds == 0 {
        return Err(ConfigError::Invalid {
            key: "metrics_server.resolution_seconds",
            message: "must be at least 1, got 0".into(),
        });
    }
    let resolution = Duration::from_secs(raw.resolution_seconds);
    // An agent may take most of a round to answer, never longer than metrics-server's 10 s.
    let scrape_timeout =
        Duration::from_secs(10).min(resolution.mul_f64(0.9)).max(Duration::from_millis(500));
    Ok(Some(kplane_actors::metrics::ScraperConfig { resolution, scrape_timeout }))
}

/// Checks the `[controllers]` section.
fn node_lifecycle(
    raw: &RawControllers,
) -> Result<kplane_actors::controllers::node_lifecycle::NodeLifecycleConfig, ConfigError> {
    let invalid = |key: &'static str, message: &str| ConfigError::Invalid {
        key,
        message: message.to_string(),
    };
    if raw.node_monitor_grace_period_seconds == 0 {
        return Err(invalid("controllers.node_monitor_grace_period_seconds", "must be at least 1"));
    }
    let rates = [
        ("controllers.node_eviction_rate", raw.node_eviction_rate),
        ("controllers.secondary_node_eviction_rate", raw.secondary_node_eviction_rate),
    ];
    for (key, rate) in rates {
        if !(rate.is_finite() && rate >= 0.0) {
            return Err(invalid(key, "must be a number of nodes a second, 0 or more"));
        }
    }
    let threshold = raw.unhealthy_zone_threshold;
    if !(threshold > 0.0 && threshold <= 1.0) {
        return Err(invalid(
            "controllers.unhealthy_zone_threshold",
            "must be above 0 and at most 1",
        ));
    }
    Ok(kplane_actors::controllers::node_lifecycle::NodeLifecycleConfig {
        grace_period: Duration::from_secs(raw.node_monitor_grace_period_seconds),
        eviction_rate: raw.node_eviction_rate,
        secondary_eviction_rate: raw.secondary_node_eviction_rate,
        unhealthy_zone_threshold: threshold,
        large_cluster_size: raw.large_cluster_size_threshold,
        ..Default::default()
    })
}

/// Checks the load balancer's address range: in 127.0.0.0/8, where every address is this
/// machine's, and clear of the cluster IPs and pod IPs (whose listeners would clash).
fn load_balancer(
    raw: &RawControllers,
) -> Result<kplane_actors::controllers::service::LoadBalancerConfig, ConfigError> {
    let ip_range = kplane_actors::model::cidr::parse(&raw.load_balancer_ip_range)
        .filter(|(ip, bits)| *bits <= 30 && ip.is_loopback())
        .ok_or_else(|| ConfigError::Invalid {
            key: "controllers.load_balancer_ip_range",
            message: format!(
                "{:?} is not an IPv4 CIDR of /30 or wider inside 127.0.0.0/8",
                raw.load_balancer_ip_range
            ),
        })?;
    Ok(kplane_actors::controllers::service::LoadBalancerConfig { ip_range })
}

/// Reads the secure port's credentials and policy, and opens the audit log.
fn security(
    server: &RawServer,
) -> Result<(std::sync::Arc<crate::auth::Security>, crate::auth::tls::TlsFiles), ConfigError> {
    use crate::auth::{
        audit::AuditLog, audit::Rotation, authn::Authenticator, authz::Authorizer, Security,
    };
    let path = |value: &str| (!value.is_empty()).then(|| PathBuf::from(value));
    let invalid = |key: &'static str, message: String| ConfigError::Invalid { key, message };
    let authenticator = Authenticator::load(
        path(&server.token_auth_file).as_deref(),
        path(&server.basic_auth_file).as_deref(),
    )
    .map_err(|e| invalid("server.token_auth_file/basic_auth_file", e.to_string()))?;
    let authorizer = Authorizer::new(
        &server.authorization_mode,
        path(&server.authorization_policy_file).as_deref(),
    )
    .map_err(|e| invalid("server.authorization_mode/authorization_policy_file", e))?;
    let rotation = Rotation {
        max_bytes: server.audit_log_maxsize.saturating_mul(1024 * 1024),
        max_backups: server.audit_log_maxbackup,
        max_age: (server.audit_log_maxage > 0).then(|| {
            std::time::Duration::from_secs(server.audit_log_maxage.saturating_mul(86_400))
        }),
    };
    let audit = path(&server.audit_log_path)
        .map(|p| AuditLog::open(&p, rotation))
        .transpose()
        .map_err(|e| invalid("server.audit_log_path", e.to_string()))?;
    // As kube-apiserver: AlwaysAllow would let anyone in, so it allows no anonymous requests.
    let anonymous = server.anonymous_auth && !authorizer.always_allows();
    let tls = crate::auth::tls::TlsFiles {
        cert: path(&server.tls_cert_file),
        key: path(&server.tls_private_key_file),
        client_ca: path(&server.client_ca_file),
    };
    let security = Security { authenticator, authorizer, anonymous, audit };
    Ok((std::sync::Arc::new(security), tls))
}

/// Whether `text` is a level or a filter of `target=level` directives (one of them may be a
/// bare level). A bare word that is no level would be a target of its own to `tracing`: a
/// mistyped level that silences every log line.
fn is_log_filter(text: &str) -> bool {
    const LEVELS: &[&str] = &["trace", "debug", "info", "warn", "error", "off"];
    let directives: Vec<&str> = text.split(',').map(str::trim).filter(|d| !d.is_empty()).collect();
    !directives.is_empty()
        && directives
            .iter()
            .all(|d| d.contains('=') || LEVELS.contains(&d.to_ascii_lowercase().as_str()))
        && tracing_subscriber::EnvFilter::try_new(text).is_ok()
}

/// Checks the service IP and node port ranges.
fn service_ranges(server: &RawServer) -> Result<kplane_actors::core::ServiceRanges, ConfigError> {
    // Inside the loopback network, which every machine has: the node agents' service proxies
    // listen on the cluster IPs there.
    let cluster_ips = kplane_actors::model::cidr::parse(&server.service_cluster_ip_range)
        .filter(|(ip, bits)| *bits <= 30 && ip.is_loopback())
        .ok_or_else(|| ConfigError::Invalid {
            key: "server.service_cluster_ip_range",
            message: format!(
                "{:?} is not an IPv4 CIDR of /30 or wider inside 127.0.0.0/8",
                server.service_cluster_ip_range
            ),
        })?;
    let node_ports = server
        .service_node_port_range
        .split_once('-')
        .and_then(|(low, high)| {
            Some((low.trim().parse::<u16>().ok()?, high.trim().parse::<u16>().ok()?))
        })
        .filter(|(low, high)| *low > 0 && low <= high)
        .ok_or_else(|| ConfigError::Invalid {
            key: "server.service_node_port_range",
            message: format!(
                "{:?} is not a port range like 30000-32767",
                server.service_node_port_range
            ),
        })?;
    Ok(kplane_actors::core::ServiceRanges { cluster_ips, node_ports })
}

/// The environment variable that set the unknown key a load error names (`unknown field
/// `nope` ... for key `server``: `KPLANE_SERVER__NOPE`), when one of `names` did: the file
/// is not where to look for it.
fn unknown_from_environment(message: &str, names: &[String]) -> Option<String> {
    let quoted = |after: &str| -> Option<String> {
        let start = message.find(after)? + after.len();
        let end = message[start..].find('`')?;
        Some(message[start..start + end].to_string())
    };
    let field = quoted("unknown field `")?;
    let path = match quoted("for key `") {
        Some(section) => format!("{section}.{field}"),
        None => field,
    };
    let variable = format!("KPLANE_{}", path.replace('.', "__").to_uppercase());
    names.iter().find(|name| name.eq_ignore_ascii_case(&variable)).cloned()
}

/// Checks the `[agent]` and `[runtime]` sections.
fn agent_settings(raw: &RawConfig) -> Result<AgentSettings, ConfigError> {
    let a = &raw.agent;
    let invalid = |key: &'static str, message: String| ConfigError::Invalid { key, message };
    let runtime = match a.runtime.as_str() {
        "process" => RuntimeKind::Process,
        "simulated" => RuntimeKind::Simulated,
        other => {
            return Err(invalid(
                "agent.runtime",
                format!("{other:?}: must be \"process\" or \"simulated\""),
            ))
        }
    };
    // Lower-cased and trimmed, as the kubelet takes its `--hostname-override`.
    let given = a.node_name.trim().to_lowercase();
    // The machine's host name, lower-cased as node names must be.
    let machine = || kplane_actors::machine::host_name().to_lowercase();
    let node_name = if given.is_empty() { machine() } else { given };
    if !kplane_actors::model::validation::dns1123_subdomain_errors(&node_name).is_empty() {
        return Err(invalid("agent.node_name", format!("{node_name:?} is not a valid node name")));
    }
    let address: std::net::Ipv4Addr = a
        .address
        .parse()
        .map_err(|_| invalid("agent.address", format!("{:?} is not an IPv4 address", a.address)))?;
    // Containers are processes of this machine, listening on their pod's IP: one of the
    // loopback network's, which every machine has (a simulated node binds nothing).
    let loopback = |(ip, _): &(std::net::Ipv4Addr, u8)| ip.is_loopback();
    let cluster_cidr = kplane_actors::model::cidr::parse(&a.cluster_cidr)
        .filter(|(_, bits)| *bits <= 24)
        .filter(|cidr| runtime == RuntimeKind::Simulated || loopback(cidr))
        .ok_or_else(|| {
            let inside = match runtime {
                RuntimeKind::Process => " inside 127.0.0.0/8",
                RuntimeKind::Simulated => "",
            };
            invalid(
                "agent.cluster_cidr",
                format!("{:?} is not an IPv4 CIDR of /24 or wider{inside}", a.cluster_cidr),
            )
        })?;
    let positive = |key: &'static str, v: u64| {
        if v == 0 {
            Err(invalid(key, "must be at least 1".into()))
        } else {
            Ok(v)
        }
    };
    for (resource, value) in &a.capacity {
        let parsed = match resource.as_str() {
            "cpu" => kplane_actors::model::quantity::milli_value(value),
            _ => kplane_actors::model::quantity::value(value),
        };
        if parsed.is_err() {
            return Err(invalid(
                "agent.capacity",
                format!("{resource} = {value:?} is not a quantity"),
            ));
        }
    }
    // The node's labels, refused here rather than by every registration the agent tries.
    for (key, value) in &a.labels {
        let validation = kplane_actors::model::validation::label_key_errors;
        let errors = [validation(key), kplane_actors::model::validation::label_value_errors(value)];
        if let Some(error) = errors.iter().flatten().next() {
            return Err(invalid("agent.labels", format!("{key} = {value:?}: {error}")));
        }
    }
    if a.restart_backoff_seconds > a.max_restart_backoff_seconds {
        return Err(invalid(
            "agent.restart_backoff_seconds",
            format!(
                "{} is more than agent.max_restart_backoff_seconds ({})",
                a.restart_backoff_seconds, a.max_restart_backoff_seconds
            ),
        ));
    }
    for (image, command) in &raw.runtime.images {
        if command.is_empty() {
            return Err(invalid("runtime.images", format!("{image:?} maps to an empty command")));
        }
    }
    // One directory per node, so agents sharing a data dir never touch each other's pods.
    let agent_dir = raw.data_dir.join("agent").join(&node_name);
    let mut config = kplane_actors::agent::AgentConfig::new(&node_name, agent_dir);
    config.address = address;
    config.port = a.port;
    config.cluster_cidr = cluster_cidr;
    config.node_status_update_period = Duration::from_secs(positive(
        "agent.node_status_update_period_seconds",
        a.node_status_update_period_seconds,
    )?);
    // Written into the node's Lease, whose field is a 32-bit integer.
    let lease_seconds = positive("agent.lease_duration_seconds", a.lease_duration_seconds)?;
    if lease_seconds > i32::MAX as u64 {
        return Err(invalid(
            "agent.lease_duration_seconds",
            format!("must be at most {}", i32::MAX),
        ));
    }
    config.lease_duration = Duration::from_secs(lease_seconds);
    config.sync_period =
        Duration::from_millis(positive("agent.sync_period_millis", a.sync_period_millis)?);
    config.restart_backoff =
        Duration::from_secs(positive("agent.restart_backoff_seconds", a.restart_backoff_seconds)?);
    config.max_restart_backoff = Duration::from_secs(positive(
        "agent.max_restart_backoff_seconds",
        a.max_restart_backoff_seconds,
    )?);
    config.max_pods = a.max_pods;
    config.capacity_overrides = a.capacity.clone();
    config.labels = a.labels.clone();
    config.max_log_bytes = positive("agent.max_log_bytes", a.max_log_bytes)?;
    config.stop_containers_on_shutdown = a.stop_containers_on_shutdown;
    config.shutdown_grace_period = Duration::from_secs(a.shutdown_grace_period_seconds);
    config.images = raw.runtime.images.clone();
    config.sysctls = kplane_actors::agent::sysctls::SysctlAllowlist::new(&a.allowed_unsafe_sysctls)
        .map_err(|message| invalid("agent.allowed_unsafe_sysctls", message))?;
    Ok(AgentSettings {
        enabled: a.enabled,
        runtime,
        enable_debugging_handlers: a.enable_debugging_handlers,
        service_proxy: a.service_proxy,
        cgroups: a.cgroups,
        agent: config,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(toml: &str, env: &[(&str, &str)], o: Overrides) -> Result<Settings, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k.toml");
        std::fs::write(&path, toml).unwrap();
        let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Settings::load_from(&Overrides { config: Some(path), ..o }, env)
    }

    #[test]
    fn only_namespaced_unsafe_sysctls_can_be_allowed() {
        let env = [("KPLANE_AGENT__ALLOWED_UNSAFE_SYSCTLS", "kernel.msg*,net.core.somaxconn")];
        let s = load("", &env, Overrides::default()).unwrap();
        let pod = serde_json::json!({"spec": {"securityContext": {"sysctls": [
            {"name": "kernel.msgmax", "value": "1"}]}}});
        assert_eq!(s.agent.agent.sysctls.admit(&pod), Ok(()));
        let bad = load(
            "[agent]\nallowed_unsafe_sysctls = \"vm.swappiness\"\n",
            &[],
            Overrides::default(),
        );
        let error = bad.unwrap_err().to_string();
        assert!(
            error.starts_with("config key agent.allowed_unsafe_sysctls: \"vm.swappiness\""),
            "{error}"
        );
    }

    #[test]
    fn a_relative_data_dir_is_made_absolute() {
        // Pods' volume mounts under it are made by processes in other working directories.
        let settings = load("data_dir = \"./rel\"\n", &[], Overrides::default()).unwrap();
        let here = std::env::current_dir().unwrap();
        assert!(settings.data_dir.is_absolute(), "{:?}", settings.data_dir);
        assert!(settings.data_dir.starts_with(&here) && settings.data_dir.ends_with("rel"));
        let agent_dir = &settings.agent.agent.data_dir;
        assert!(agent_dir.is_absolute() && agent_dir.starts_with(&settings.data_dir));
    }

    #[test]
    fn an_unknown_key_from_the_environment_names_its_variable() {
        let error = load("", &[("KPLANE_SERVER__NOPE", "1")], Overrides::default());
        let error = error.unwrap_err().to_string();
        assert!(
            error.contains("unknown field `nope`")
                && error.ends_with("(set by KPLANE_SERVER__NOPE)"),
            "{error}"
        );
        let error =
            load("[server]\nnope = 1\n", &[], Overrides::default()).unwrap_err().to_string();
        assert!(!error.contains("set by"), "{error}");
    }

    #[test]
    fn node_labels_and_back_off_bounds_are_checked_at_start() {
        let ok =
            load("[agent.labels]\n\"example.com/zone\" = \"a-1\"\n", &[], Overrides::default());
        assert_eq!(ok.unwrap().agent.agent.labels["example.com/zone"], "a-1");
        for toml in
            ["[agent.labels]\n\"bad key!\" = \"a\"\n", "[agent.labels]\nzone = \"with spaces\"\n"]
        {
            let error = load(toml, &[], Overrides::default()).unwrap_err().to_string();
            assert!(error.starts_with("config key agent.labels: "), "{error}");
        }
        let env = [
            ("KPLANE_AGENT__RESTART_BACKOFF_SECONDS", "100"),
            ("KPLANE_AGENT__MAX_RESTART_BACKOFF_SECONDS", "5"),
        ];
        let error = load("", &env, Overrides::default()).unwrap_err().to_string();
        assert!(error.contains("agent.restart_backoff_seconds: 100 is more than"), "{error}");
    }

    #[test]
    fn a_node_name_is_taken_lower_cased() {
        let s = load("", &[("KPLANE_AGENT__NODE_NAME", " Node-Upper ")], Overrides::default());
        assert_eq!(s.unwrap().agent.agent.node_name, "node-upper");
        let bad = load("", &[("KPLANE_AGENT__NODE_NAME", "no_way")], Overrides::default());
        assert!(bad.unwrap_err().to_string().contains("is not a valid node name"));
    }

    #[test]
    fn defaults_file_env_and_flags_layer() {
        let s = load("", &[], Overrides::default()).unwrap();
        assert_eq!(s.insecure_addr.to_string(), "127.0.0.1:8080");
        assert_eq!(s.shards, 2);
        assert!(s.disable_transparent_huge_pages);
        let s =
            load("[store]\nshards = 4\n", &[("KPLANE_WATCH__BUFFER", "7")], Overrides::default())
                .unwrap();
        assert_eq!((s.shards, s.watch_buffer), (4, 7));
        let s =
            load("disable_transparent_huge_pages = false\n", &[], Overrides::default()).unwrap();
        assert!(!s.disable_transparent_huge_pages);
        let s = load(
            "[store]\nshards = 4\n",
            &[("KPLANE_STORE__SHARDS", "3")],
            Overrides { insecure_port: Some(9999), ..Overrides::default() },
        )
        .unwrap();
        assert_eq!((s.shards, s.insecure_addr.port()), (3, 9999));
    }

    #[test]
    fn bad_keys_and_values_are_named() {
        let e = load("[store]\nshardz = 4\n", &[], Overrides::default()).unwrap_err().to_string();
        assert!(e.contains("shardz"), "{e}");
        let e = load("[server]\ninsecure_port = 70000\n", &[], Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("insecure_port"), "{e}");
        let e = load("[store]\nshards = 0\n", &[], Overrides::default()).unwrap_err().to_string();
        assert!(e.contains("store.shards"), "{e}");
        let e = load("", &[("KPLANE_NOPE__X", "1")], Overrides::default()).unwrap_err().to_string();
        assert!(e.contains("nope"), "{e}");
        let e = load("[server]\ninsecure_bind_address = \"x\"\n", &[], Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("server.insecure_bind_address"), "{e}");
        for bad in ["x", "0.0.0.0", "::1"] {
            let file = format!("[server]\nadvertise_address = \"{bad}\"\n");
            let e = load(&file, &[], Overrides::default()).unwrap_err().to_string();
            assert!(e.contains("server.advertise_address"), "{bad}: {e}");
        }
        let file = "[server]\nadvertise_address = \"10.1.2.3\"\n";
        let settings = load(file, &[], Overrides::default()).unwrap();
        assert_eq!(settings.advertise_address, Some(std::net::Ipv4Addr::new(10, 1, 2, 3)));
    }

    #[test]
    fn server_flags_override_the_file_and_the_environment() {
        let env = [("KPLANE_SERVER__AUTHORIZATION_MODE", "Nonsense")];
        let flags = Overrides {
            server_flags: vec![("authorization_mode", "AlwaysDeny".into())],
            anonymous_auth: Some(false),
            ..Overrides::default()
        };
        let s = load("[server]\nanonymous_auth = true\n", &env, flags).unwrap();
        assert!(!s.security.anonymous);
        let asked = crate::auth::attributes::Attributes::default();
        let anyone = crate::auth::UserInfo::anonymous();
        let decision = s.security.authorizer.decide(&anyone, &asked);
        assert_eq!(decision.reason, "Everything is forbidden.");
    }

    #[test]
    fn log_levels_are_levels_or_filters() {
        for good in ["info", "DEBUG", "warn,kplane_actors=debug", "kplane=trace"] {
            assert!(is_log_filter(good), "{good}");
        }
        for bad in ["", " ", "debg", "verbose!!", "info,chatty"] {
            assert!(!is_log_filter(bad), "{bad:?}");
        }
    }

    #[test]
    fn the_pod_range_is_loopback_and_clear_of_the_service_range() {
        for (range, expected) in [
            ("10.0.0.0/16", "inside 127.0.0.0/8"),
            ("127.192.0.0/16", "overlaps server.service_cluster_ip_range"),
            ("127.0.0.0/8", "overlaps server.service_cluster_ip_range"),
        ] {
            let env = [("KPLANE_AGENT__CLUSTER_CIDR", range)];
            let e = load("", &env, Overrides::default()).unwrap_err().to_string();
            assert!(e.contains("agent.cluster_cidr") && e.contains(expected), "{e}");
        }
        let simulated =
            [("KPLANE_AGENT__CLUSTER_CIDR", "10.0.0.0/16"), ("KPLANE_AGENT__RUNTIME", "simulated")];
        assert!(load("", &simulated, Overrides::default()).is_ok(), "nothing binds them");
        let lease = [("KPLANE_AGENT__LEASE_DURATION_SECONDS", "9223372036854775807")];
        let e = load("", &lease, Overrides::default()).unwrap_err().to_string();
        assert!(
            e.contains("agent.lease_duration_seconds") && e.contains("at most 2147483647"),
            "{e}"
        );
    }

    #[test]
    fn the_service_range_is_loopback() {
        let env = [("KPLANE_SERVER__SERVICE_CLUSTER_IP_RANGE", "10.96.0.0/12")];
        let e = load("", &env, Overrides::default()).unwrap_err().to_string();
        assert!(e.contains("server.service_cluster_ip_range") && e.contains("inside 127.0.0.0/8"));
        let env = [("KPLANE_SERVER__SERVICE_CLUSTER_IP_RANGE", "127.50.0.0/16")];
        assert!(load("", &env, Overrides::default()).is_ok());
    }

    #[test]
    fn the_load_balancer_range_is_loopback_and_clear_of_the_other_ranges() {
        let s = load("", &[], Overrides::default()).unwrap();
        assert_eq!(s.load_balancer.ip_range, ("127.128.0.0".parse().unwrap(), 16));
        for (range, expected) in [
            ("10.0.0.0/24", "inside 127.0.0.0/8"),
            ("127.192.3.0/24", "overlaps server.service_cluster_ip_range"),
            ("127.0.0.0/8", "overlaps server.service_cluster_ip_range"),
            ("127.64.0.0/16", "overlaps agent.cluster_cidr"),
        ] {
            let env = [("KPLANE_CONTROLLERS__LOAD_BALANCER_IP_RANGE", range)];
            let e = load("", &env, Overrides::default()).unwrap_err().to_string();
            assert!(
                e.contains("controllers.load_balancer_ip_range") && e.contains(expected),
                "{e}"
            );
        }
    }
}
