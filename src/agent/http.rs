//! The agent's HTTP port (the kubelet's): health, the pods it runs, machine spec, resource
//! usage, Prometheus metrics, its log directory and container logs.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use actix::Addr;
use actix_web::http::StatusCode;
use actix_web::{web, HttpRequest, HttpResponse, ResponseError};
use kplane_actors::agent::log_lines::LogReader;
use kplane_actors::agent::node_status::Machine;
use kplane_actors::agent::{AgentPods, NodeAgent, PodLookup};
use kplane_actors::model::validation::validate_pod_log_options;
use serde_json::{json, Value};

use super::stats::{self, Usage};
use crate::api::params::Query;
use crate::health::{self, HealthQuery};

/// What the handlers share.
pub struct AgentHttp {
    agent: Addr<NodeAgent>,
    node_name: String,
    data_dir: PathBuf,
    /// Serve `/run`, `/exec`, `/attach`, `/portForward`, `/debug/pprof/` and the logs.
    debugging: bool,
}

impl AgentHttp {
    pub fn new(
        agent: Addr<NodeAgent>,
        node_name: String,
        data_dir: PathBuf,
        debugging: bool,
    ) -> Self {
        Self { agent, node_name, data_dir, debugging }
    }

    pub fn agent(&self) -> &Addr<NodeAgent> {
        &self.agent
    }
}

/// Errors of the agent's port: plain text, as the kubelet answers.
#[derive(Debug, thiserror::Error)]
pub enum AgentHttpError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("the agent is not available")]
    Unavailable,
}

impl ResponseError for AgentHttpError {
    fn status_code(&self) -> StatusCode {
        match self {
            AgentHttpError::NotFound(_) => StatusCode::NOT_FOUND,
            AgentHttpError::BadRequest(_) => StatusCode::BAD_REQUEST,
            AgentHttpError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// Starts serving on `listener`; returns the server and the address it listens on.
pub fn serve(
    state: AgentHttp,
    listener: std::net::TcpListener,
) -> std::io::Result<(actix_web::dev::Server, Option<SocketAddr>)> {
    let debugging = state.debugging;
    let state = web::Data::new(state);
    let server = actix_web::HttpServer::new(move || {
        // Called on each worker's thread: a handler's panic drops its connection, as Go's
        // HTTP server does the kubelet's, and the agent goes on.
        crate::panics::mark_request_thread();
        actix_web::App::new()
            .app_data(state.clone())
            .configure(|cfg| {
                if debugging {
                    super::debugging::configure(cfg);
                    cfg.route("/runningpods/", web::get().to(running_pods))
                        .route("/logs/{path:.*}", web::get().to(logs))
                        .route(
                            "/containerLogs/{namespace}/{pod}/{container}",
                            web::get().to(container_logs),
                        );
                } else {
                    // As the kubelet's: each is refused, not missing.
                    for prefix in DEBUGGING_PATHS {
                        cfg.service(
                            web::scope(prefix).default_service(web::to(debugging_disabled)),
                        );
                    }
                }
            })
            .route("/healthz", web::route().to(healthz))
            .route("/healthz/{check}", web::route().to(healthz_check))
            .route("/pods", web::get().to(pods))
            .route("/pods/", web::get().to(pods))
            .route("/spec/", web::get().to(spec))
            .route("/stats/summary", web::get().to(summary))
            .route("/stats/summary", web::post().to(summary))
            .route("/metrics", web::get().to(metrics))
            .route("/metrics/resource", web::get().to(resource_metrics))
            .default_service(web::to(not_found))
    })
    .workers(1)
    .keep_alive(crate::peer::IDLE_KEEP_ALIVE)
    .on_connect(crate::peer::note_socket)
    .disable_signals()
    // A followed log or exec stream is cut 2 s into a stop, as the API server's streams are.
    .shutdown_timeout(2)
    .listen(listener)?;
    let addr = server.addrs().first().copied();
    Ok((server.run(), addr))
}

/// The paths the debugging handlers serve, refused (405) when they are off, as the kubelet's
/// `InstallDebuggingDisabledHandlers` refuses them.
const DEBUGGING_PATHS: [&str; 8] = [
    "/run",
    "/exec",
    "/attach",
    "/portForward",
    "/containerLogs",
    "/runningpods",
    "/debug/pprof",
    "/logs",
];

async fn debugging_disabled() -> HttpResponse {
    HttpResponse::MethodNotAllowed()
        .content_type("text/plain; charset=utf-8")
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .body("Debug endpoints are disabled.\n")
}

/// A path the agent does not serve, answered as Go's mux answers it.
async fn not_found() -> HttpResponse {
    HttpResponse::NotFound().content_type("text/plain; charset=utf-8").body("404 page not found\n")
}

/// The kubelet's health checks: `ping`, `log` (logging is not blocked: it never is, a
/// failing write is dropped) and `syncloop` (the agent answers its mailbox).
const HEALTH_CHECKS: [&str; 3] = ["ping", "log", "syncloop"];

/// `/healthz` as the kubelet's (any method, as Go's mux serves it).
async fn healthz(state: web::Data<AgentHttp>, req: HttpRequest) -> HttpResponse {
    let query = HealthQuery::of(req.query_string());
    let mut outcomes = Vec::new();
    for name in HEALTH_CHECKS {
        let skipped = query.excludes(name);
        outcomes.push((name, if skipped { None } else { Some(check(&state, name).await) }));
    }
    health::answer("healthz", &query, outcomes)
}

/// `/healthz/{check}`: that check alone; a 404 for a check there is not.
async fn healthz_check(state: web::Data<AgentHttp>, name: web::Path<String>) -> HttpResponse {
    let name = name.into_inner();
    let known = HEALTH_CHECKS.contains(&name.as_str());
    health::answer_one(if known { Some(check(&state, &name).await) } else { None })
}

async fn check(state: &AgentHttp, name: &str) -> Result<(), String> {
    match name {
        "syncloop" => agent_pods(state).await.map(|_| ()).map_err(|e| e.to_string()),
        _ => Ok(()),
    }
}

async fn agent_pods(state: &AgentHttp) -> Result<Vec<Value>, AgentHttpError> {
    state.agent.send(AgentPods).await.map_err(|_| AgentHttpError::Unavailable)
}

fn pod_list(items: Vec<Value>) -> HttpResponse {
    HttpResponse::Ok()
        .json(json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}))
}

async fn pods(state: web::Data<AgentHttp>) -> Result<HttpResponse, AgentHttpError> {
    Ok(pod_list(agent_pods(&state).await?))
}

/// The kubelet's `/runningpods/`: the pods with running containers, as its runtime knows
/// them (`ToAPIPod`): each pod's name, namespace and uid, and its running containers' names
/// and images, nothing else.
async fn running_pods(state: web::Data<AgentHttp>) -> Result<HttpResponse, AgentHttpError> {
    let running = agent_pods(&state)
        .await?
        .iter()
        .filter_map(|pod| {
            let running: BTreeSet<String> =
                container_pids(pod).into_iter().map(|(name, _)| name).collect();
            let containers: Vec<Value> = CONTAINER_KINDS
                .iter()
                .filter_map(|(specs, _)| pod.pointer(specs).and_then(Value::as_array))
                .flatten()
                .filter(|c| c["name"].as_str().is_some_and(|name| running.contains(name)))
                .map(|c| json!({"name": c["name"], "image": c["image"], "resources": {}}))
                .collect();
            let meta = &pod["metadata"];
            (!containers.is_empty()).then(|| {
                json!({
                    "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                        "uid": meta["uid"], "creationTimestamp": null},
                    "spec": {"containers": containers},
                    "status": {},
                })
            })
        })
        .collect();
    Ok(pod_list(running))
}

/// Where a pod lists its containers of each kind, and their statuses: init containers
/// (sidecars run on among them), app containers, ephemeral containers.
const CONTAINER_KINDS: [(&str, &str); 3] = [
    ("/spec/initContainers", "/status/initContainerStatuses"),
    ("/spec/containers", "/status/containerStatuses"),
    ("/spec/ephemeralContainers", "/status/ephemeralContainerStatuses"),
];

/// The running containers of a pod, of every kind.
fn running_containers(pod: &Value) -> impl Iterator<Item = &Value> {
    CONTAINER_KINDS
        .iter()
        .filter_map(|(_, statuses)| pod.pointer(statuses).and_then(Value::as_array))
        .flatten()
        .filter(|c| c.pointer("/state/running").is_some())
}

/// (container name, pid) of the running containers of a pod, from their container IDs
/// (`kplane://<pod uid>/<container>/<pid>`).
fn container_pids(pod: &Value) -> Vec<(String, u32)> {
    running_containers(pod)
        .filter_map(|c| Some((c["name"].as_str()?.to_string(), container_pid(c)?)))
        .collect()
}

/// The pid of a running container, from its status's container ID.
fn container_pid(status: &Value) -> Option<u32> {
    status["containerID"].as_str()?.rsplit('/').next()?.parse().ok()
}

async fn spec(state: web::Data<AgentHttp>) -> HttpResponse {
    let machine = Machine::read(&state.data_dir);
    HttpResponse::Ok().json(json!({
        "num_cores": machine.cpus,
        "memory_capacity": machine.memory_bytes,
        "machine_id": machine.machine_id,
        "system_uuid": machine.machine_id,
        "boot_id": machine.boot_id,
        "kernel_version": machine.kernel_version,
        "os_image": machine.os_image,
    }))
}

fn usage_json(usage: Usage, now: &str) -> (Value, Value) {
    (
        json!({"time": now, "usageCoreNanoSeconds": usage.cpu_nanoseconds}),
        json!({"time": now, "workingSetBytes": usage.rss_bytes, "rssBytes": usage.rss_bytes}),
    )
}

/// What the node, its pods and their running containers use now (from /proc).
struct UsageSnapshot {
    node: Usage,
    pods: Vec<PodUsage>,
}

struct PodUsage {
    namespace: String,
    name: String,
    uid: String,
    start_time: Value,
    /// Each running container: its name, when it started, what it uses.
    containers: Vec<(String, Value, Usage)>,
    total: Usage,
}

async fn usage_snapshot(state: &AgentHttp) -> Result<UsageSnapshot, AgentHttpError> {
    let pods = agent_pods(state).await?;
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    // Off the (single) HTTP worker: a pass over /proc reads a file per process.
    let (groups, node) = web::block(|| (stats::group_usages(), stats::machine_usage()))
        .await
        .map_err(|_| AgentHttpError::Unavailable)?;
    let pods = pods
        .iter()
        .map(|pod| {
            let containers: Vec<(String, Value, Usage)> = running_containers(pod)
                .filter_map(|c| {
                    let usage = groups.get(&container_pid(c)?).copied().unwrap_or_default();
                    let started = c.pointer("/state/running/startedAt").cloned();
                    Some((text(&c["name"]), started.unwrap_or(Value::Null), usage))
                })
                .collect();
            let total = containers.iter().fold(Usage::default(), |sum, (_, _, u)| sum + *u);
            PodUsage {
                namespace: text(&pod["metadata"]["namespace"]),
                name: text(&pod["metadata"]["name"]),
                uid: text(&pod["metadata"]["uid"]),
                start_time: pod["status"]["startTime"].clone(),
                containers,
                total,
            }
        })
        .collect();
    Ok(UsageSnapshot { node, pods })
}

/// The kubelet's `/stats/summary`: CPU time and memory per container and pod, and of the
/// node (the whole machine), each stamped to the nanosecond, as the kubelet does (the metrics
/// scraper works rates out between two summaries).
async fn summary(state: web::Data<AgentHttp>) -> Result<HttpResponse, AgentHttpError> {
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
    let snapshot = usage_snapshot(&state).await?;
    let pod_stats: Vec<Value> = snapshot
        .pods
        .iter()
        .map(|pod| {
            let containers: Vec<Value> = pod
                .containers
                .iter()
                .map(|(name, started, usage)| {
                    let (cpu, memory) = usage_json(*usage, &now);
                    json!({"name": name, "startTime": started, "cpu": cpu, "memory": memory})
                })
                .collect();
            let (cpu, memory) = usage_json(pod.total, &now);
            json!({
                "podRef": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
                "startTime": pod.start_time,
                "containers": containers,
                "cpu": cpu,
                "memory": memory,
            })
        })
        .collect();
    let (cpu, memory) = usage_json(snapshot.node, &now);
    Ok(HttpResponse::Ok().json(json!({
        "node": {"nodeName": state.node_name, "cpu": cpu, "memory": memory},
        "pods": pod_stats,
    })))
}

/// One metric family to write: its name, type, help and labelled samples.
struct Family(&'static str, &'static str, &'static str, Vec<(String, f64)>);

/// The kubelet's `/metrics/resource` (what metrics-server scrapes): the stable families of
/// CPU seconds, working set and start times of the node, its pods and their containers, each
/// sample stamped with the time it was read (milliseconds), as the kubelet writes them.
async fn resource_metrics(state: web::Data<AgentHttp>) -> Result<HttpResponse, AgentHttpError> {
    let snapshot = usage_snapshot(&state).await?;
    let stamp = chrono::Utc::now().timestamp_millis();
    let seconds = |usage: Usage| usage.cpu_nanoseconds as f64 / 1e9;
    let bytes = |usage: Usage| usage.rss_bytes as f64;
    let mut families: Vec<Family> = Vec::new();
    let container_labels = |pod: &PodUsage, container: &str| {
        format!("container={container:?},namespace={:?},pod={:?}", pod.namespace, pod.name)
    };
    let containers =
        || snapshot.pods.iter().flat_map(|pod| pod.containers.iter().map(move |c| (pod, c)));
    families.push(Family(
        "container_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed by the container in core-seconds",
        containers()
            .map(|(pod, (name, _, u))| (container_labels(pod, name), seconds(*u)))
            .collect(),
    ));
    families.push(Family(
        "container_memory_working_set_bytes",
        "gauge",
        "Current working set of the container in bytes",
        containers().map(|(pod, (name, _, u))| (container_labels(pod, name), bytes(*u))).collect(),
    ));
    families.push(Family(
        "container_start_time_seconds",
        "gauge",
        "Start time of the container since unix epoch in seconds",
        containers()
            .filter_map(|(pod, (name, started, _))| {
                let started = chrono::DateTime::parse_from_rfc3339(started.as_str()?).ok()?;
                Some((container_labels(pod, name), started.timestamp() as f64))
            })
            .collect(),
    ));
    families.push(Family(
        "node_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed by the node in core-seconds",
        vec![(String::new(), seconds(snapshot.node))],
    ));
    families.push(Family(
        "node_memory_working_set_bytes",
        "gauge",
        "Current working set of the node in bytes",
        vec![(String::new(), bytes(snapshot.node))],
    ));
    let pod_labels = |pod: &PodUsage| format!("namespace={:?},pod={:?}", pod.namespace, pod.name);
    families.push(Family(
        "pod_cpu_usage_seconds_total",
        "counter",
        "Cumulative cpu time consumed by the pod in core-seconds",
        snapshot.pods.iter().map(|pod| (pod_labels(pod), seconds(pod.total))).collect(),
    ));
    families.push(Family(
        "pod_memory_working_set_bytes",
        "gauge",
        "Current working set of the pod in bytes",
        snapshot.pods.iter().map(|pod| (pod_labels(pod), bytes(pod.total))).collect(),
    ));
    let mut text = String::new();
    for Family(name, kind, help, samples) in families {
        text.push_str(&format!("# HELP {name} [STABLE] {help}\n# TYPE {name} {kind}\n"));
        for (labels, value) in samples {
            let labels = if labels.is_empty() { labels } else { format!("{{{labels}}}") };
            text.push_str(&format!("{name}{labels} {value} {stamp}\n"));
        }
    }
    text.push_str(
        "# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container \
         metrics, 0 otherwise\n# TYPE resource_scrape_error gauge\nresource_scrape_error 0\n",
    );
    Ok(HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(text))
}

/// Prometheus text: running pods and containers, restarts per container.
async fn metrics(state: web::Data<AgentHttp>) -> Result<HttpResponse, AgentHttpError> {
    use prometheus::{Encoder, IntGauge, IntGaugeVec, Opts, Registry, TextEncoder};
    let pods = agent_pods(&state).await?;
    let registry = Registry::new();
    let running_pods = IntGauge::new("kplane_agent_running_pods", "Pods with a running container")
        .expect("valid metric");
    let running_containers = IntGauge::new("kplane_agent_running_containers", "Running containers")
        .expect("valid metric");
    let restarts = IntGaugeVec::new(
        Opts::new("kplane_agent_container_restarts", "Restarts of each container"),
        &["namespace", "pod", "container"],
    )
    .expect("valid metric");
    for pod in &pods {
        let running = container_pids(pod).len() as i64;
        running_containers.add(running);
        if running > 0 {
            running_pods.inc();
        }
        for c in
            pod.pointer("/status/containerStatuses").and_then(Value::as_array).into_iter().flatten()
        {
            let labels = [
                pod["metadata"]["namespace"].as_str().unwrap_or(""),
                pod["metadata"]["name"].as_str().unwrap_or(""),
                c["name"].as_str().unwrap_or(""),
            ];
            restarts.with_label_values(&labels).set(c["restartCount"].as_i64().unwrap_or(0));
        }
    }
    for collector in [
        Box::new(running_pods) as Box<dyn prometheus::core::Collector>,
        Box::new(running_containers),
        Box::new(restarts),
    ] {
        registry.register(collector).expect("metric names are unique");
    }
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut out)
        .map_err(|_| AgentHttpError::Unavailable)?;
    Ok(HttpResponse::Ok().content_type("text/plain; version=0.0.4").body(out))
}

/// The agent's own data directory, read-only: a listing for a directory, the bytes of a file.
/// Paths may not leave the directory.
async fn logs(
    state: web::Data<AgentHttp>,
    path: web::Path<String>,
) -> Result<HttpResponse, AgentHttpError> {
    let relative = Path::new(path.as_str());
    if relative.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(AgentHttpError::BadRequest(format!("invalid path {:?}", path.as_str())));
    }
    let root = std::fs::canonicalize(&state.data_dir)
        .map_err(|_| AgentHttpError::NotFound("no logs yet".into()))?;
    let target = std::fs::canonicalize(root.join(relative))
        .map_err(|_| AgentHttpError::NotFound(format!("{} not found", path.as_str())))?;
    if !target.starts_with(&root) {
        return Err(AgentHttpError::BadRequest("the path leaves the log directory".into()));
    }
    if target.is_dir() {
        let mut names: Vec<String> = std::fs::read_dir(&target)
            .map_err(|_| AgentHttpError::NotFound(path.to_string()))?
            .flatten()
            .map(|e| {
                let name = e.file_name().to_string_lossy().to_string();
                if e.path().is_dir() {
                    format!("{name}/")
                } else {
                    name
                }
            })
            .collect();
        names.sort();
        return Ok(HttpResponse::Ok().content_type("text/plain").body(names.join("\n") + "\n"));
    }
    // Off the (single) HTTP worker: log files can be large.
    let bytes = web::block(move || std::fs::read(target))
        .await
        .map_err(|_| AgentHttpError::Unavailable)?
        .map_err(|_| AgentHttpError::NotFound(path.to_string()))?;
    Ok(HttpResponse::Ok().content_type("text/plain").body(bytes))
}

/// A container log's options, read as the kubelet reads them: any flag value but `0` or
/// `false` is true (`?previous` too), `tail` names `tailLines` (`all`: every line), an empty
/// `sinceTime` is none.
#[derive(Debug)]
struct LogQuery {
    tail_lines: Option<i64>,
    limit_bytes: Option<i64>,
    previous: bool,
    follow: bool,
    timestamps: bool,
    since_seconds: Option<i64>,
    since_time: Option<String>,
}

impl LogQuery {
    fn of(query: &str) -> Result<Self, AgentHttpError> {
        let bad = |e: crate::error::HttpError| AgentHttpError::BadRequest(e.to_string());
        let query = Query::of(query).map_err(bad)?;
        // `tail` replaces `tailLines`, as the kubelet reads them.
        let tail_lines = match query.get("tail") {
            None => query.number("tailLines").map_err(bad)?,
            Some("all") => None,
            Some(_) => query.number("tail").map_err(bad)?,
        };
        Ok(Self {
            tail_lines,
            limit_bytes: query.number("limitBytes").map_err(bad)?,
            previous: query.flag("previous"),
            follow: query.flag("follow"),
            timestamps: query.flag("timestamps"),
            since_seconds: query.number("sinceSeconds").map_err(bad)?,
            since_time: query.get("sinceTime").filter(|t| !t.is_empty()).map(String::from),
        })
    }
}

/// `/containerLogs/{namespace}/{pod}/{container}`: the current (or previous) log of a
/// container, with tailLines, limitBytes, follow, timestamps and sinceSeconds or sinceTime.
async fn container_logs(
    req: HttpRequest,
    state: web::Data<AgentHttp>,
    path: web::Path<(String, String, String)>,
) -> Result<HttpResponse, AgentHttpError> {
    let (namespace, pod_name, container) = path.into_inner();
    let query = LogQuery::of(req.query_string())?;
    let causes = validate_pod_log_options(
        query.tail_lines,
        query.limit_bytes,
        query.since_seconds,
        query.since_time.is_some(),
    );
    if let Some(cause) = causes.first() {
        return Err(AgentHttpError::BadRequest(format!("{}: {}", cause.field, cause.message)));
    }
    let since = match (query.since_seconds, query.since_time.as_deref()) {
        (Some(seconds), _) => Some(
            chrono::TimeDelta::try_seconds(seconds)
                .and_then(|ago| chrono::Utc::now().checked_sub_signed(ago))
                .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC),
        ),
        (None, Some(time)) => Some(
            chrono::DateTime::parse_from_rfc3339(time)
                .map_err(|e| AgentHttpError::BadRequest(format!("sinceTime {time:?}: {e}")))?
                .with_timezone(&chrono::Utc),
        ),
        (None, None) => None,
    };
    let lookup = PodLookup { namespace: namespace.clone(), name: pod_name.clone() };
    let pod = state
        .agent
        .send(lookup)
        .await
        .map_err(|_| AgentHttpError::Unavailable)?
        .ok_or_else(|| AgentHttpError::NotFound(format!("pod {pod_name:?} does not exist")))?;
    let status = container_status(&pod, &container).ok_or_else(|| {
        AgentHttpError::NotFound(format!("container {container:?} not found in pod {pod_name:?}"))
    })?;
    let restarts = status["restartCount"].as_u64().unwrap_or(0);
    let waiting = status.pointer("/state/waiting");
    let ended = status.pointer("/lastState/terminated").is_some();
    let index = if query.previous {
        // As the kubelet: the container's last state, which for one waiting to run again is
        // the run that just ended (the restart count is that run's until the next starts).
        let last = if waiting.is_some() { Some(restarts) } else { restarts.checked_sub(1) };
        last.filter(|_| ended).ok_or_else(|| {
            AgentHttpError::BadRequest(format!(
                "previous terminated container \"{container}\" in pod \"{pod_name}\" not found"
            ))
        })?
    } else if let Some(waiting) = waiting {
        // As the kubelet: a container waiting to run again shows the run that just ended
        // (the restart count is that run's until the next starts); one that has never run has
        // none.
        if !ended {
            // In the kubelet's words, which say more of image pulls than their reasons.
            let reason = match waiting["reason"].as_str().unwrap_or("ContainerCreating") {
                "ErrImagePull" => "image can't be pulled",
                "ImagePullBackOff" => "trying and failing to pull image",
                other => other,
            };
            return Err(AgentHttpError::BadRequest(format!(
                "container \"{container}\" in pod \"{pod_name}\" is waiting to start: {reason}"
            )));
        }
        restarts
    } else {
        restarts
    };
    let uid = pod["metadata"]["uid"].as_str().unwrap_or("");
    use kplane_actors::agent::pod_worker::{log_path, pod_dir};
    let dir = pod_dir(&state.data_dir, &namespace, &pod_name, uid);
    let file = log_path(&dir, &container, index as u32);
    // Off the (single) HTTP worker: log files can be large.
    let read = file.clone();
    let content = web::block(move || std::fs::read(read).unwrap_or_default())
        .await
        .map_err(|_| AgentHttpError::Unavailable)?;
    let mut output = LogReader::new(query.timestamps, since);
    let mut body = output.read(&content);
    // Without follow (or for a run that has ended: a previous one, or the last one of a
    // container waiting to run again), the file is read whole, once, as the kubelet does.
    let whole = !query.follow || query.previous || run_ended(&pod, &container, index);
    if whole {
        body.extend(output.finish());
    }
    let mut body = select(&body, query.tail_lines, query.limit_bytes);
    // A limit the log already reaches ends a follow too, as the kubelet's writer does.
    let limit = query.limit_bytes.map(|l| l as usize);
    if whole || limit.is_some_and(|l| body.len() >= l) {
        return Ok(HttpResponse::Ok().content_type("text/plain").body(body));
    }
    // Follow: what is there, then what is appended, until this run of the container has ended
    // (as the kubelet's follow does) or the pod has left this node.
    let agent = state.agent.clone();
    let mut followed = FollowedFile::new(file, content.len() as u64);
    let mut sent = body.len();
    let stream = async_stream(move |tx| async move {
        if !body.is_empty()
            && tx.send(Ok(web::Bytes::from(std::mem::take(&mut body)))).await.is_err()
        {
            return;
        }
        let mut ended = false;
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            // Nobody reads any longer (the client went).
            if tx.is_closed() {
                return;
            }
            let more = output.read(&followed.read_more());
            if !more.is_empty() {
                let take = limit.map_or(more.len(), |l| l.saturating_sub(sent).min(more.len()));
                sent += take;
                if tx.send(Ok(web::Bytes::copy_from_slice(&more[..take]))).await.is_err() {
                    return;
                }
                if limit.is_some_and(|l| sent >= l) {
                    return;
                }
            }
            // A run that had ended before this read wrote nothing after it: done, with what is
            // left of a last line without a newline.
            if ended {
                let rest = output.finish();
                if !rest.is_empty() {
                    let _ = tx.send(Ok(web::Bytes::from(rest))).await;
                }
                return;
            }
            // A pod gone from this node has stopped: what it wrote is read once more, and
            // that is all.
            let lookup = PodLookup { namespace: namespace.clone(), name: pod_name.clone() };
            ended = match agent.send(lookup).await {
                Ok(Some(pod)) => run_ended(&pod, &container, index),
                _ => true,
            };
        }
    });
    // A follower whose client has gone stops (it would otherwise read a silent container's
    // log until the container ends).
    Ok(HttpResponse::Ok()
        .content_type("text/plain")
        .streaming(crate::peer::until_gone(&req, stream)))
}

/// The status of `container` (an app or init container) in `pod`.
fn container_status<'a>(pod: &'a Value, container: &str) -> Option<&'a Value> {
    let lists = [
        "/status/containerStatuses",
        "/status/initContainerStatuses",
        "/status/ephemeralContainerStatuses",
    ];
    lists
        .iter()
        .filter_map(|p| pod.pointer(p).and_then(Value::as_array))
        .flatten()
        .find(|c| c["name"] == container)
}

/// Whether run `index` (0 for the first, then one more per restart) of `container` has ended:
/// it has terminated, waits to run again (its restart count stays that run's until the next
/// starts), or a later run has started.
fn run_ended(pod: &Value, container: &str, index: u64) -> bool {
    container_status(pod, container).is_some_and(|c| {
        let restarts = c["restartCount"].as_u64().unwrap_or(0);
        let not_running = c.pointer("/state/running").is_none();
        restarts > index || (restarts == index && not_running)
    })
}

/// A stream fed by a task through a channel (ends when the task ends or the client leaves).
fn async_stream<F, Fut>(
    task: F,
) -> impl futures::Stream<Item = Result<web::Bytes, actix_web::Error>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<web::Bytes, actix_web::Error>>) -> Fut,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    actix_web::rt::spawn(task(tx));
    tokio_stream_from(rx)
}

fn tokio_stream_from<T>(mut rx: tokio::sync::mpsc::Receiver<T>) -> impl futures::Stream<Item = T> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// A container's log file followed as it grows. The file, once opened, stays open: when its
/// pod is deleted the agent removes the pod's directory as soon as the container has stopped,
/// and the last lines it wrote on its way out are still read from the open file. A file
/// replaced at its path (rotated: renamed, a new one made there) is read to its end, and once
/// more at the next read (for a line its writer wrote there as it was renamed), then the one
/// rotated after it if it was rotated twice since the last read (the `.1` kept), and the new
/// one from its start; one cut shorter is read anew from its start.
pub(super) struct FollowedFile {
    path: PathBuf,
    file: Option<std::fs::File>,
    /// How much of the file has been read.
    offset: u64,
    /// The file rotated away at the last read, and how much of it has been read.
    rotated: Option<(std::fs::File, u64)>,
}

impl FollowedFile {
    /// Follows `path` from `offset` on.
    pub(super) fn new(path: PathBuf, offset: u64) -> Self {
        let file = std::fs::File::open(&path).ok();
        Self { path, file, offset, rotated: None }
    }

    /// What has been appended since the last read.
    pub(super) fn read_more(&mut self) -> Vec<u8> {
        use kplane_actors::agent::log_lines::same_file;
        let mut out = Vec::new();
        if let Some((mut old, offset)) = self.rotated.take() {
            read_from(&mut old, offset, &mut out);
        }
        if let Ok(named) = std::fs::metadata(&self.path) {
            let same = |f: &std::fs::File| f.metadata().is_ok_and(|m| same_file(&m, &named));
            if !self.file.as_ref().is_some_and(same) {
                if let Ok(reopened) = std::fs::File::open(&self.path) {
                    if let Some(mut old) = self.file.replace(reopened) {
                        let mut read = self.offset + read_from(&mut old, self.offset, &mut out);
                        // Rotated twice: the one in between is the rotated one now.
                        let rotated = self.path.with_extension("log.1");
                        if let Ok(mut between) = std::fs::File::open(&rotated) {
                            let metadata = (between.metadata(), old.metadata());
                            if matches!(metadata, (Ok(a), Ok(b)) if !same_file(&a, &b)) {
                                read = read_from(&mut between, 0, &mut out);
                                old = between;
                            }
                        }
                        self.rotated = Some((old, read));
                        self.offset = 0;
                    }
                }
            }
        }
        let Some(file) = self.file.as_mut() else { return out };
        if file.metadata().map(|m| m.len()).unwrap_or(0) < self.offset {
            self.offset = 0;
        }
        self.offset += read_from(file, self.offset, &mut out);
        out
    }
}

/// Appends what `file` has from `offset` on to `out`; how much that was.
fn read_from(file: &mut std::fs::File, offset: u64, out: &mut Vec<u8>) -> u64 {
    use std::io::{Read, Seek, SeekFrom};
    let before = out.len();
    if file.seek(SeekFrom::Start(offset)).is_err() || file.read_to_end(out).is_err() {
        out.truncate(before);
    }
    (out.len() - before) as u64
}

/// The last `tail` lines of `content`, then at most `limit` bytes of them.
fn select(content: &[u8], tail: Option<i64>, limit: Option<i64>) -> Vec<u8> {
    let mut start = 0;
    if let Some(tail) = tail {
        let tail = tail as usize;
        let body = content.strip_suffix(b"\n").unwrap_or(content);
        let mut seen = 0;
        start = content.len();
        if tail > 0 {
            start = 0;
            for (i, b) in body.iter().enumerate().rev() {
                if *b == b'\n' {
                    seen += 1;
                    if seen == tail {
                        start = i + 1;
                        break;
                    }
                }
            }
        }
    }
    let selected = &content[start..];
    let end = limit.map_or(selected.len(), |l| (l as usize).min(selected.len()));
    selected[..end].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_and_limit_select_like_the_kubelet() {
        let log = b"one\ntwo\nthree\n";
        assert_eq!(select(log, None, None), log);
        assert_eq!(select(log, Some(2), None), b"two\nthree\n");
        assert_eq!(select(log, Some(5), None), log);
        assert_eq!(select(log, Some(0), None), b"");
        assert_eq!(select(log, Some(1), Some(3)), b"thr");
        assert_eq!(select(b"no newline", Some(1), None), b"no newline");
    }

    #[test]
    fn a_run_ends_when_it_terminates_waits_to_run_again_or_a_later_one_starts() {
        let pod = |restarts: u64, state: Value| {
            json!({"status": {"containerStatuses": [
                {"name": "c", "restartCount": restarts, "state": state}]}})
        };
        assert!(!run_ended(&pod(0, json!({"running": {}})), "c", 0));
        assert!(run_ended(&pod(0, json!({"terminated": {"exitCode": 0}})), "c", 0));
        // A crash-looping container waits with the count of the run that just ended.
        let waiting = json!({"waiting": {"reason": "CrashLoopBackOff"}});
        assert!(run_ended(&pod(2, waiting), "c", 2));
        assert!(run_ended(&pod(1, json!({"running": {}})), "c", 0));
        assert!(!run_ended(&pod(1, json!({"running": {}})), "c", 1));
        assert!(!run_ended(&pod(0, json!({"running": {}})), "other", 0));
    }

    #[test]
    fn container_ids_name_the_process() {
        let pod = json!({"status": {"containerStatuses": [
            {"name": "a", "containerID": "kplane://u/a/42", "state": {"running": {}}},
            {"name": "b", "containerID": "kplane://u/b/43", "state": {"terminated": {}}}]}});
        assert_eq!(container_pids(&pod), vec![("a".to_string(), 42)]);
    }
}
