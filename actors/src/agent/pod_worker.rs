//! The pod worker: one actor per pod bound to the node. Level-triggered: every sync compares the
//! pod's spec with what runs and acts (start, restart with back-off, probe, stop), then writes
//! the pod status through the status subresource when it changed. A pod marked for deletion is
//! stopped (preStop hooks, SIGTERM, then SIGKILL after its grace period) and then removed from
//! the API.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use actix::prelude::*;
use chrono::SecondsFormat;
use k8s_openapi::api::core::v1::{Container, ContainerStateTerminated, Pod, Probe};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{json, Value};

use super::eviction;
use super::hooks::{self, Hook, HookTarget};
use super::launch::{self, Identity, LaunchError, PodContext};
use super::pod_ips::PodIps;
use super::probes::{self, Outcome};
use super::runtime::{self, process_alive, ContainerIo, ExitNote, Launch, Runtime, StopSignal};
use super::shutdown;
use super::volumes::{self, Volumes};
use super::AgentConfig;
use crate::client::events::{self, EventKind, ObjectRef};
use crate::client::ApiClient;
use crate::core::{set_condition, ApiError, DeleteOptions, PatchType, MAX_GRACE_SECONDS};
use crate::forwarding::{Backends, Forwarder};
use crate::model::text::go_duration;
use crate::model::{now, resources};

/// The component name events carry (as the kubelet's).
pub(super) const COMPONENT: &str = "kubelet";
/// A container that ran this long without failing has its back-off reset and restarts at once
/// (the kubelet's back-off entry expires after twice its longest wait).
const BACKOFF_RESET_AFTER: Duration = Duration::from_secs(600);
/// How long a shutting-down agent waits for its stopped children's exit codes.
const REAP_WAIT: Duration = Duration::from_secs(1);
/// How long a shutting-down agent tries to post the status of the pods it stopped.
const LAST_STATUS_WAIT: Duration = Duration::from_secs(2);
/// How long past its deadline a preStop hook's end is waited for (its task reports it).
const HOOK_SLACK: Duration = Duration::from_secs(1);
/// The least time a container gets between its SIGTERM and SIGKILL once its preStop hook has
/// ended (the kubelet's `minimumGracePeriodInSeconds`).
const MIN_STOP_AFTER_HOOK: Duration = Duration::from_secs(2);
/// The least time a container the agent restarts (a failed probe or postStart hook, a new
/// image) gets between SIGTERM and SIGKILL, whatever its grace period says: the kubelet's
/// "minimal shutdown window". A pod's deletion is not held to it.
const MIN_RESTART_GRACE: Duration = Duration::from_secs(2);
/// How often the files of a running pod's volumes are brought up to date (a ConfigMap's new
/// values), as the kubelet's periodic sync does; a change of the pod's labels or annotations
/// (the downward API's) brings them up to date at once.
const VOLUME_RESYNC: Duration = Duration::from_secs(60);

/// What every pod worker of one agent shares.
pub struct WorkerContext {
    pub client: Arc<dyn ApiClient>,
    pub runtime: Arc<dyn Runtime>,
    pub config: Arc<AgentConfig>,
    pub ips: Mutex<PodIps>,
    /// The machine's memory, in bytes: what a Burstable container's OOM score is weighed
    /// against.
    pub memory_capacity: u64,
}

/// A newer version of the pod, from the agent's watch.
#[derive(Message)]
#[rtype(result = "()")]
pub struct PodUpdated(pub Value);

/// The pod is gone from the API (deleted with a grace period of 0, or no longer bound here).
#[derive(Message)]
#[rtype(result = "()")]
pub struct PodGone;

/// The agent shuts down: stop the containers (when configured) and stop.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Shutdown {
    pub stop_containers: bool,
    /// The pod is another agent's now: nothing is written about it (no events, no status).
    pub quietly: bool,
}

/// The pod as the worker last wrote it: spec from the API, status as it reported it.
#[derive(Message)]
#[rtype(result = "Value")]
pub struct Snapshot;

/// How to run a command inside a running container: its environment, working directory and
/// process id (`None` when the container is not running).
#[derive(Message)]
#[rtype(result = "Option<ExecTarget>")]
pub struct FindContainer(pub String);

/// A running container, as `exec`, `attach` and `run` need it.
#[derive(Debug, Clone)]
pub struct ExecTarget {
    pub env: Vec<(String, String)>,
    pub working_dir: Option<PathBuf>,
    /// The command-line prefix that runs what is exec'd with the container's host name and as
    /// its user and groups (empty: as the agent, with the machine's).
    pub launchers: Vec<String>,
    pub pid: u32,
    pub pod_ip: Option<Ipv4Addr>,
    /// The container's current log file.
    pub log_path: PathBuf,
    /// Its stdin and terminal; `None` for a container adopted after an agent restart (they
    /// closed with the agent that started it) or a simulated one.
    pub io: Option<Arc<ContainerIo>>,
}

impl ExecTarget {
    /// `argv` run through the container's launchers.
    pub fn launched(&self, argv: &[String]) -> Vec<String> {
        [&self.launchers[..], argv].concat()
    }
}

impl Handler<FindContainer> for PodWorker {
    type Result = Option<ExecTarget>;

    fn handle(&mut self, msg: FindContainer, _: &mut Context<Self>) -> Option<ExecTarget> {
        let state = self.state.as_ref()?;
        let c = state.containers.iter().find(|c| c.name == msg.0)?;
        let running = c.running.as_ref()?;
        let spec = state.container_spec(&c.name)?;
        Some(ExecTarget {
            env: c.env.clone(),
            working_dir: Some(runtime::working_dir(spec)),
            launchers: state.launchers(spec, Some(running.pid), &self.ctx),
            pid: running.pid,
            pod_ip: state.pod_ip,
            log_path: log_path(&state.dir, &c.name, c.restart_count),
            io: running.io.clone(),
        })
    }
}

/// A container's process exited.
#[derive(Message)]
#[rtype(result = "()")]
struct Exited {
    container: String,
    pid: u32,
    code: i32,
    /// The kernel's OOM killer ended one of its processes.
    oom_killed: bool,
}

/// Which of a container's probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProbeKind {
    Startup,
    Liveness,
    Readiness,
}

impl ProbeKind {
    /// As the kubelet's events name it.
    fn name(self) -> &'static str {
        match self {
            ProbeKind::Startup => "Startup",
            ProbeKind::Liveness => "Liveness",
            ProbeKind::Readiness => "Readiness",
        }
    }

    fn of(self, spec: &Container) -> Option<&Probe> {
        match self {
            ProbeKind::Startup => spec.startup_probe.as_ref(),
            ProbeKind::Liveness => spec.liveness_probe.as_ref(),
            ProbeKind::Readiness => spec.readiness_probe.as_ref(),
        }
    }
}

/// A probe run has ended. Each runs on its own, as the kubelet's probe workers do, so that a
/// slow one holds up neither the pod (its exits, deletion, exec) nor the other probes.
#[derive(Message)]
#[rtype(result = "()")]
struct ProbeDone {
    container: String,
    /// The run it probed.
    pid: u32,
    kind: ProbeKind,
    outcome: Outcome,
}

/// A container's lifecycle hook has ended (or, for preStop, run out of time).
#[derive(Message)]
#[rtype(result = "()")]
struct HookDone {
    container: String,
    /// The run it was for.
    pid: u32,
    hook: Hook,
    /// The hook's failure, or the warning it gave on the way.
    outcome: Result<Option<String>, String>,
}

/// The pod worker actor. A sync holds the mailbox (`ctx.wait`), so every message is handled
/// between syncs, with the pod state in place.
pub struct PodWorker {
    ctx: Arc<WorkerContext>,
    /// Taken out while a sync runs (the sync owns it), put back when it ends.
    state: Option<PodState>,
}

impl PodWorker {
    pub fn new(ctx: Arc<WorkerContext>, pod: Value) -> Option<Self> {
        let state = PodState::new(&ctx, pod)?;
        Some(Self { ctx, state: Some(state) })
    }

    fn request_sync(&mut self, ctx: &mut Context<Self>) {
        let Some(mut state) = self.state.take() else { return };
        let worker = self.ctx.clone();
        let addr = ctx.address();
        let sync = async move {
            state.sync(&worker, &addr).await;
            state
        };
        ctx.wait(sync.into_actor(self).map(|state, act, ctx| {
            let done = state.done;
            act.state = Some(state);
            if done {
                ctx.stop();
            }
        }));
    }
}

impl Actor for PodWorker {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        // Simulated containers change only when the pod does: a slow resync is enough.
        let period = if self.ctx.runtime.runs_processes() {
            self.ctx.config.sync_period
        } else {
            self.ctx.config.sync_period * 10
        };
        ctx.run_interval(period, |act, ctx| act.request_sync(ctx));
        self.request_sync(ctx);
    }
}

impl Handler<PodUpdated> for PodWorker {
    type Result = ();

    fn handle(&mut self, msg: PodUpdated, ctx: &mut Context<Self>) {
        if let Some(state) = &mut self.state {
            state.update(msg.0);
        }
        self.request_sync(ctx);
    }
}

impl Handler<PodGone> for PodWorker {
    type Result = ();

    fn handle(&mut self, _: PodGone, ctx: &mut Context<Self>) {
        if let Some(state) = &mut self.state {
            state.gone = true;
        }
        self.request_sync(ctx);
    }
}

impl Handler<Exited> for PodWorker {
    type Result = ();

    fn handle(&mut self, msg: Exited, ctx: &mut Context<Self>) {
        if let Some(state) = &mut self.state {
            state.exited(&msg.container, msg.pid, msg.code, msg.oom_killed, false);
        }
        self.request_sync(ctx);
    }
}

impl Handler<ProbeDone> for PodWorker {
    type Result = ();

    fn handle(&mut self, msg: ProbeDone, ctx: &mut Context<Self>) {
        let decided = match &mut self.state {
            Some(state) => state.probe_done(&self.ctx, &ctx.address(), msg),
            None => false,
        };
        // A verdict changes what the pod's status says (readiness) or does (a restart).
        if decided {
            self.request_sync(ctx);
        }
    }
}

/// Probes are due: those due are run (between syncs, which run them too).
#[derive(Message)]
#[rtype(result = "()")]
struct ProbesDue;

impl Handler<ProbesDue> for PodWorker {
    type Result = ();

    fn handle(&mut self, _: ProbesDue, ctx: &mut Context<Self>) {
        if let Some(state) = &mut self.state {
            // As a sync would probe: not once the pod is stopped for good or the agent stops.
            if !(state.done || state.gone || state.stopping || state.stopped_for.is_some()) {
                state.probe(&self.ctx, &ctx.address());
            }
        }
    }
}

impl Handler<HookDone> for PodWorker {
    type Result = ();

    fn handle(&mut self, msg: HookDone, ctx: &mut Context<Self>) {
        if let Some(state) = &mut self.state {
            state.hook_done(&self.ctx, &ctx.address(), msg);
        }
        self.request_sync(ctx);
    }
}

impl Handler<Shutdown> for PodWorker {
    /// Answered once the containers are stopped (and their ends noted).
    type Result = ResponseFuture<()>;

    fn handle(&mut self, msg: Shutdown, ctx: &mut Context<Self>) -> Self::Result {
        let runtime = self.ctx.runtime.clone();
        let mut stopping = Vec::new();
        let mut files = Vec::new();
        let mut grace = self.ctx.config.shutdown_grace_period;
        if let Some(state) = &mut self.state {
            // Nothing starts or restarts from now on.
            state.stopping = true;
            if msg.stop_containers {
                // A second at least, as at a deletion: SIGTERM comes first, even for 0.
                grace = grace.min(termination_grace(&state.pod).max(Duration::from_secs(1)));
                stopping = state.shutdown_stops(&self.ctx, !msg.quietly);
            }
            files = (state.containers.iter())
                .filter_map(|c| Some((c.running.as_ref()?, c.name.clone())))
                .map(|(r, name)| {
                    let path = state.dir.join(&name).join("state.json");
                    (name, r.pid, r.exit_code.clone(), r.adopted, path)
                })
                .collect();
        }
        let stop = async move {
            if !msg.stop_containers {
                return (Vec::new(), Vec::new());
            }
            if !runtime.runs_processes() {
                for c in &stopping {
                    runtime.signal(c.pid, StopSignal::Term);
                }
                return (Vec::new(), Vec::new());
            }
            let stopped = shutdown::stop(runtime.as_ref(), &stopping, grace).await;
            let killed: Vec<u32> = stopped.iter().filter(|s| s.killed).map(|s| s.pid).collect();
            let failed_hooks: Vec<(String, String)> = (stopping.iter().zip(stopped))
                .filter_map(|(c, s)| Some((c.name.clone(), s.hook_failure?)))
                .collect();
            // How they ended, for the agent that comes next (the exits themselves are not
            // handled any more): the code of each of its children, once reaped; SIGTERM's or
            // SIGKILL's for an adopted one, whose code it cannot know.
            let reaped = Instant::now() + REAP_WAIT;
            while Instant::now() < reaped
                && files.iter().any(|(_, _, code, adopted, _)| !adopted && code.get().is_none())
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let mut ends = Vec::new();
            for (name, pid, code, _, path) in files {
                let signalled = if killed.contains(&pid) { 137 } else { 143 };
                let code = code.get().copied().unwrap_or(signalled);
                record_exit(&path, pid, code);
                ends.push((name, pid, code));
            }
            (ends, failed_hooks)
        };
        // The mailbox waits meanwhile: an exit handled now would take its state file away.
        let (done, stopped) = tokio::sync::oneshot::channel();
        let worker = self.ctx.clone();
        let quietly = msg.quietly;
        ctx.wait(stop.into_actor(self).then(move |(ends, failed_hooks), act, _| {
            if let Some(state) = act.state.as_ref().filter(|_| !quietly) {
                for (name, message) in failed_hooks {
                    state.pre_stop_failed(&act.ctx, &name, &message);
                }
            }
            // The pod's last status shows what was stopped (not ready, its runs ended), as
            // the kubelet's at a node's shutdown, for as long as the server answers soon.
            let state = if ends.is_empty() || quietly { None } else { act.state.take() };
            async move {
                let mut state = state?;
                for (name, pid, code) in ends {
                    state.stopped_at_shutdown(&name, pid, code);
                }
                let _ = tokio::time::timeout(LAST_STATUS_WAIT, state.write_status(&worker)).await;
                Some(state)
            }
            .into_actor(act)
            .map(|state, act, ctx| {
                act.state = act.state.take().or(state);
                let _ = done.send(());
                ctx.stop();
            })
        }));
        Box::pin(async move {
            let _ = stopped.await;
        })
    }
}

impl Handler<Snapshot> for PodWorker {
    type Result = MessageResult<Snapshot>;

    fn handle(&mut self, _: Snapshot, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.snapshot())
    }
}

impl PodWorker {
    fn snapshot(&self) -> Value {
        match &self.state {
            Some(state) => {
                let mut pod = state.raw.clone();
                if let Some(status) = &state.last_status {
                    pod["status"] = status.clone();
                }
                pod
            }
            None => Value::Null,
        }
    }
}

/// Which list a container belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Init,
    App,
    /// Added to a running pod (`kubectl debug`): run once, never restarted.
    Ephemeral,
}

#[derive(Debug, Clone)]
struct RunningContainer {
    pid: u32,
    start_ticks: u64,
    started_at: String,
    since: Instant,
    image: String,
    /// Adopted after an agent restart: not our child, so its exit is found by polling.
    adopted: bool,
    /// Adopted while it ran (not found ended already, maybe in an earlier boot): what it
    /// leaves running when it ends is this agent's to kill.
    adopted_running: bool,
    /// Its stdin and terminal (not for an adopted one).
    io: Option<Arc<ContainerIo>>,
    /// Its lifecycle hook under way: postStart until it has passed (the container is not
    /// shown running before), preStop until it has ended (SIGTERM comes after). It ends with
    /// the run.
    hook: Option<(Hook, tokio::task::AbortHandle)>,
    /// Its preStop hook has been run (once per run).
    pre_stopped: bool,
    /// When its preStop hook's time is up (its SIGTERM comes then at the latest).
    pre_stop_deadline: Option<Instant>,
    /// Its postStart hook failed: it is being killed, and not shown running.
    post_start_failed: bool,
    /// While its postStart hook runs, the container's status is the one from before this run
    /// (the kubelet reports none until the start, hook included, has returned).
    shown_before: Option<ShownBefore>,
    /// Told to stop, its SIGTERM waits for its turn (a sidecar's: after the app containers and
    /// the sidecars after it).
    term_held: bool,
    /// Its exit code, once its process has been reaped (never, for an adopted one): read at
    /// the agent's shutdown, when exits are no longer handled.
    exit_code: Arc<OnceLock<i32>>,
}

/// What a container's status said before a run started: its restarts and why it waited.
#[derive(Debug, Clone)]
struct ShownBefore {
    restart_count: u32,
    waiting: Option<(String, String)>,
}

#[derive(Debug, Clone)]
struct Terminated {
    exit_code: i32,
    /// The id of the run that ended (none for a run that never started).
    container_id: Option<String>,
    reason: String,
    message: Option<String>,
    started_at: String,
    finished_at: String,
}

impl Terminated {
    /// An end as a status reported it (read back after an agent restart).
    fn reported(t: &ContainerStateTerminated) -> Self {
        let time = |at: &Option<Time>| at.as_ref().map(|t| t.0.to_rfc3339()).unwrap_or_default();
        Terminated {
            exit_code: t.exit_code,
            container_id: t.container_id.clone(),
            reason: t.reason.clone().unwrap_or_default(),
            message: t.message.clone(),
            started_at: time(&t.started_at),
            finished_at: time(&t.finished_at),
        }
    }

    /// A run the kubelet cannot account for when the pod ends (one that never started), in
    /// its words.
    fn unaccounted() -> Self {
        Terminated {
            exit_code: 137,
            container_id: None,
            reason: "ContainerStatusUnknown".into(),
            message: Some("The container could not be located when the pod was terminated".into()),
            started_at: String::new(),
            finished_at: String::new(),
        }
    }
}

#[derive(Debug, Default, Clone)]
struct ProbeState {
    successes: i32,
    failures: i32,
    next_run: Option<Instant>,
    /// A run is under way (the next waits for it, and for its period).
    in_flight: bool,
}

#[derive(Debug, Clone)]
struct ContainerState {
    name: String,
    kind: Kind,
    /// An init container with `restartPolicy: Always`: a native sidecar, which keeps running
    /// beside the app containers and is restarted whenever it exits.
    sidecar: bool,
    /// Has been started (its startup probe passed) at least once.
    ever_started: bool,
    running: Option<RunningContainer>,
    /// The last exit, shown as `state.terminated` while not restarting and as `lastState`.
    terminated: Option<Terminated>,
    /// The exit before it: `lastState` once the last one is its state (it has finished).
    previous: Option<Terminated>,
    /// Why it is not running, when it is waiting.
    waiting: Option<(String, String)>,
    restart_count: u32,
    /// Next restart not before this instant (crash-loop back-off).
    not_before: Option<Instant>,
    /// The back-off `not_before` was set with (the wait the CrashLoopBackOff message names).
    waiting_for: Duration,
    /// The back-off the next restart waits.
    backoff: Duration,
    /// Exited and will not run again (init container done, or restartPolicy says no).
    finished: bool,
    ready: bool,
    started: bool,
    liveness: ProbeState,
    readiness: ProbeState,
    startup: ProbeState,
    /// The environment it was started with (exec probes run in it).
    env: Vec<(String, String)>,
    /// Stopping for a restart (liveness failure, image change): SIGKILL not before this.
    restarting_deadline: Option<Instant>,
    /// Being stopped because a liveness or startup probe failed: it is started again whatever
    /// its exit, unless the pod's policy is `Never` (the kubelet decides the restart with the
    /// kill).
    probe_killed: bool,
    /// The image its last start tried: a back-off holds that image's container back, not
    /// one of another image (the kubelet keys its back-off by the container's definition).
    tried_image: Option<String>,
    /// Its current run has a mount namespace of its own (its volumes, its termination
    /// message file), which what is exec'd in it joins.
    mounted: bool,
}

impl ContainerState {
    fn new(name: &str, kind: Kind, backoff: Duration) -> Self {
        Self {
            name: name.to_string(),
            kind,
            sidecar: false,
            ever_started: false,
            running: None,
            terminated: None,
            previous: None,
            waiting: Some(("ContainerCreating".into(), String::new())),
            restart_count: 0,
            not_before: None,
            waiting_for: Duration::ZERO,
            backoff,
            finished: false,
            ready: false,
            started: false,
            liveness: ProbeState::default(),
            readiness: ProbeState::default(),
            startup: ProbeState::default(),
            env: Vec::new(),
            restarting_deadline: None,
            probe_killed: false,
            tried_image: None,
            mounted: false,
        }
    }

    fn probe_state(&mut self, kind: ProbeKind) -> &mut ProbeState {
        match kind {
            ProbeKind::Startup => &mut self.startup,
            ProbeKind::Liveness => &mut self.liveness,
            ProbeKind::Readiness => &mut self.readiness,
        }
    }

    /// Holds its next start back by the back-off, which then doubles (up to `max`).
    fn back_off(&mut self, max: Duration) {
        self.not_before = Some(Instant::now() + self.backoff);
        self.waiting_for = self.backoff;
        self.backoff = (self.backoff * 2).min(max);
    }
}

/// What the container state file records, to adopt the process after an agent restart.
#[derive(serde::Serialize, serde::Deserialize)]
struct StateFile {
    pid: u32,
    start_ticks: u64,
    started_at: String,
    restart_count: u32,
    image: String,
    /// The environment it was started with (its exec probes and hooks run in it).
    #[serde(default)]
    env: Vec<(String, String)>,
    /// How it ended, when the agent stopped it as it shut down.
    #[serde(default)]
    exit_code: Option<i32>,
}

/// Notes in a container's state file how its run (of process `pid`) ended.
fn record_exit(path: &std::path::Path, pid: u32, code: i32) {
    let Ok(mut file) = std::fs::read(path)
        .map_err(|_| ())
        .and_then(|b| serde_json::from_slice::<StateFile>(&b).map_err(|_| ()))
    else {
        return;
    };
    if file.pid != pid {
        return;
    }
    file.exit_code = Some(code);
    if let Err(e) = std::fs::write(path, serde_json::to_vec(&file).unwrap_or_default()) {
        tracing::warn!(path = %path.display(), error = %e, "noting a container's end");
    }
}

/// A pod's directory under the agent's data directory (logs, container state files).
pub fn pod_dir(data_dir: &std::path::Path, namespace: &str, name: &str, uid: &str) -> PathBuf {
    data_dir.join("pods").join(format!("{namespace}_{name}_{uid}"))
}

/// The kubelet's events of a container's image, which is a program of the node's, always
/// there: pulled at once when the policy says `Always`, else found present.
fn pulled(spec: &Container) -> Vec<(EventKind, String, String)> {
    let image = spec.image.as_deref().unwrap_or_default();
    let normal = |reason: &str, message: String| (EventKind::Normal, reason.into(), message);
    match spec.image_pull_policy.as_deref() {
        Some("Always") => vec![
            normal("Pulling", format!("Pulling image \"{image}\"")),
            // (Nothing was fetched: the image's size is 0 bytes, in the kubelet's words.)
            normal(
                "Pulled",
                format!(
                    "Successfully pulled image \"{image}\" in 0s (0s including waiting). \
                     Image size: 0 bytes."
                ),
            ),
        ],
        _ => vec![normal(
            "Pulled",
            format!("Container image \"{image}\" already present on machine"),
        )],
    }
}

/// Whether process `pid` is in a mount namespace other than the agent's.
fn own_mount_namespace(pid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let inode = |path: String| std::fs::metadata(path).map(|m| m.ino()).ok();
    let theirs = inode(format!("/proc/{pid}/ns/mnt"));
    theirs.is_some() && theirs != inode("/proc/self/ns/mnt".into())
}

/// Where run `restart` of `container` writes its termination message, on the node.
fn termination_log_path(pod_dir: &std::path::Path, container: &str, restart: u32) -> PathBuf {
    pod_dir.join(container).join(format!("{restart}.termination-log"))
}

/// The bind of a run's termination message file at the container's `terminationMessagePath`
/// (`/dev/termination-log` by default): the file made empty, writable by any user (0666, as
/// the kubelet makes it), and the path made on the node when it is not there; `None` (no
/// message read) when either cannot be.
fn termination_log(
    pod_dir: &std::path::Path,
    spec: &Container,
    restart: u32,
) -> Option<volumes::Mount> {
    use std::os::unix::fs::PermissionsExt;
    let target = spec.termination_message_path.as_deref().unwrap_or("/dev/termination-log");
    let target = PathBuf::from(target);
    if !target.is_absolute() {
        return None;
    }
    let source = termination_log_path(pod_dir, &spec.name, restart);
    let made = (|| -> std::io::Result<()> {
        std::fs::create_dir_all(source.parent().unwrap_or(pod_dir))?;
        std::fs::write(&source, b"")?;
        std::fs::set_permissions(&source, std::fs::Permissions::from_mode(0o666))?;
        if std::fs::symlink_metadata(&target).is_err() {
            std::fs::create_dir_all(target.parent().unwrap_or(std::path::Path::new("/")))?;
            std::fs::write(&target, b"")?;
        }
        Ok(())
    })();
    if let Err(error) = made {
        tracing::warn!(path = %target.display(), %error, "no termination message file");
        return None;
    }
    Some(volumes::Mount { source, target, read_only: false })
}

/// Where a container finds its hosts file.
const HOSTS: &str = "/etc/hosts";

/// The pod's hosts file (see [`launch::hosts_file`]), written under its directory, as a mount
/// over the node's; `None` (the node's own) when it cannot be written.
fn hosts_file(pod_dir: &std::path::Path, pod: &Pod, pod_ip: &str) -> Option<volumes::Mount> {
    let node_hosts = std::fs::read_to_string(HOSTS).unwrap_or_default();
    let source = pod_dir.join("etc-hosts");
    let written = std::fs::create_dir_all(pod_dir)
        .and_then(|()| std::fs::write(&source, launch::hosts_file(pod, pod_ip, &node_hosts)));
    if let Err(error) = written {
        tracing::warn!(path = %source.display(), %error, "no hosts file for the pod");
        return None;
    }
    Some(volumes::Mount { source, target: PathBuf::from(HOSTS), read_only: false })
}

/// Whether a container's run that ended with `code` (or could not start: runc's 128) runs
/// again, as the pod's restart policy says: an init container until it succeeds (not under
/// `Never`), an app container as the policy says, a sidecar until the pod has `ended`, an
/// ephemeral container never.
fn runs_again(kind: Kind, sidecar: bool, policy: &str, code: i32, ended: bool) -> bool {
    match (kind, policy) {
        _ if sidecar => !ended,
        (Kind::Init, "Never") => false,
        (Kind::Init, _) => code != 0,
        (Kind::App, "Always") => true,
        (Kind::App, "OnFailure") => code != 0,
        _ => false,
    }
}

/// A run's termination message: what it wrote to its file, its last 4,096 bytes at most (the
/// kubelet's limit per container, read as its `tail.ReadAtMost`); `None` when it wrote
/// nothing.
fn termination_message(path: &std::path::Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    const MAX_BYTES: u64 = 4096;
    let mut bytes = Vec::new();
    let mut file = std::fs::File::open(path).ok()?;
    let length = file.metadata().ok()?.len();
    file.seek(SeekFrom::Start(length.saturating_sub(MAX_BYTES))).ok()?;
    file.take(MAX_BYTES).read_to_end(&mut bytes).ok()?;
    (!bytes.is_empty()).then(|| String::from_utf8_lossy(&bytes).into_owned())
}

/// The end of a run's output, as the kubelet reads a failed container's message from its
/// log (`FallbackToLogsOnError`): its last 80 lines, at most their last 2,048 bytes; none when
/// it wrote nothing.
fn last_output(log: &std::path::Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    const LINES: usize = 80;
    const BYTES: usize = 2048;
    // 80 lines of output, with their times, are within the file's last 64 KiB but for long
    // lines, whose ends are what is kept anyway.
    let mut file = std::fs::File::open(log).ok()?;
    let length = file.metadata().ok()?.len();
    let from = length.saturating_sub(64 * 1024);
    file.seek(SeekFrom::Start(from)).ok()?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    if from > 0 {
        // Start at a whole line.
        let first = bytes.iter().position(|b| *b == b'\n').map_or(bytes.len(), |i| i + 1);
        bytes.drain(..first);
    }
    let output = super::log_lines::read_all(&bytes, false, None);
    let text = String::from_utf8_lossy(&output);
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let tail = lines[lines.len().saturating_sub(LINES)..].concat();
    let mut start = tail.len().saturating_sub(BYTES);
    while !tail.is_char_boundary(start) {
        start += 1;
    }
    Some(tail[start..].to_string()).filter(|message| !message.is_empty())
}

/// A container's log file for one run: `{pod dir}/{container}/{restart}.log`.
pub fn log_path(pod_dir: &std::path::Path, container: &str, restart: u32) -> PathBuf {
    pod_dir.join(container).join(format!("{restart}.log"))
}

/// Removes the logs and termination messages of `container`'s runs before `kept` (the
/// previous run's stay, for `logs --previous`), as the kubelet's container collector keeps one
/// ended container a container.
fn remove_runs_before(pod_dir: &std::path::Path, container: &str, kept: u32) {
    let Ok(entries) = std::fs::read_dir(pod_dir.join(container)) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let run = name.split_once('.').and_then(|(run, rest)| {
            let ours = matches!(rest, "log" | "log.1" | "termination-log");
            run.parse::<u32>().ok().filter(|_| ours)
        });
        if run.is_some_and(|run| run < kept) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Where a container's first process notes how its run ended (see [`ExitNote`]).
fn exit_note_path(pod_dir: &std::path::Path, container: &str) -> PathBuf {
    pod_dir.join(container).join("exit.json")
}

struct PodState {
    config: Arc<AgentConfig>,
    uid: String,
    namespace: String,
    name: String,
    pod: Pod,
    raw: Value,
    /// The pod's ephemeral containers, as the containers they run as.
    ephemeral: Vec<Container>,
    gone: bool,
    done: bool,
    pod_ip: Option<Ipv4Addr>,
    /// Whether its address went back to the node's range (its sandbox torn down, once it has
    /// ended): its status keeps it, as the kubelet's does.
    address_released: bool,
    /// Its containers' host ports, served at the node's address while the pod lasts (`None`:
    /// not yet).
    host_ports: Option<Vec<Forwarder>>,
    dir: PathBuf,
    start_time: String,
    containers: Vec<ContainerState>,
    last_status: Option<Value>,
    /// The resourceVersion our last status write made: older news of the pod is stale.
    last_written: u64,
    /// The server's copy of the status no longer says what the agent wrote: write it again
    /// (with the times it had, as the kubelet writes its cached status back).
    rewrite: bool,
    /// SIGKILL everything at this instant when still running (deletion grace period).
    kill_at: Option<Instant>,
    /// The grace period that stop was given (a shorter one brings it forward).
    stop_grace: Option<u64>,
    /// The agent is shutting down: start nothing more.
    stopping: bool,
    /// Why the agent stopped the pod for good, as the kubelet does (it is Failed with this
    /// reason and message): it ran longer than its `activeDeadlineSeconds`, or was evicted
    /// for its local storage.
    stopped_for: Option<(&'static str, String)>,
    /// When its local storage was last measured (for eviction).
    storage_measured: Option<Instant>,
    /// The pod's events, recorded one after the other in the background, in the order they
    /// happened (the task is started with the first).
    event_queue: OnceLock<tokio::sync::mpsc::UnboundedSender<QueuedEvent>>,
    /// Its volumes, once set up (containers start only then, where processes run).
    volumes: Option<Volumes>,
    /// When its volumes were last set up or brought up to date (`None`: due now).
    volumes_synced: Option<Instant>,
    /// A failed set-up is tried again at this instant.
    volumes_retry_at: Option<Instant>,
    /// Its volumes have been set up once: its "sandbox" is up, and its IP told, as the
    /// kubelet creates a pod's sandbox only once its volumes are mounted.
    sandbox_ready: bool,
    /// When the worker is woken next to run the probes due then.
    probe_wake: Option<Instant>,
}

/// An event waiting in a pod's queue: about what, and what it says.
struct QueuedEvent {
    about: ObjectRef,
    kind: EventKind,
    reason: String,
    message: String,
}

impl PodState {
    fn new(ctx: &WorkerContext, raw: Value) -> Option<Self> {
        let pod: Pod = serde_json::from_value(raw.clone()).ok()?;
        let uid = pod.metadata.uid.clone()?;
        let namespace = pod.metadata.namespace.clone().unwrap_or_else(|| "default".into());
        let name = pod.metadata.name.clone()?;
        let dir = pod_dir(&ctx.config.data_dir, &namespace, &name, &uid);
        let spec = pod.spec.as_ref()?;
        let backoff = ctx.config.restart_backoff;
        let mut containers: Vec<ContainerState> = spec
            .init_containers
            .iter()
            .flatten()
            .map(|c| ContainerState {
                sidecar: c.restart_policy.as_deref() == Some("Always"),
                ..ContainerState::new(&c.name, Kind::Init, backoff)
            })
            .collect();
        containers.extend(
            spec.containers.iter().map(|c| ContainerState::new(&c.name, Kind::App, backoff)),
        );
        let ephemeral = ephemeral_containers(&pod);
        containers.extend(
            ephemeral.iter().map(|c| ContainerState::new(&c.name, Kind::Ephemeral, backoff)),
        );
        let status = pod.status.as_ref();
        let start_time = status
            .and_then(|s| s.start_time.as_ref())
            .map(|t| t.0.to_rfc3339_opts(SecondsFormat::Secs, true))
            .unwrap_or_else(now);
        let mut state = Self {
            config: ctx.config.clone(),
            uid,
            namespace,
            name,
            pod,
            raw,
            ephemeral,
            gone: false,
            done: false,
            pod_ip: None,
            address_released: false,
            dir,
            start_time,
            containers,
            last_status: None,
            last_written: 0,
            rewrite: false,
            kill_at: None,
            stop_grace: None,
            stopping: false,
            stopped_for: None,
            storage_measured: None,
            event_queue: OnceLock::new(),
            host_ports: None,
            volumes: None,
            volumes_synced: None,
            volumes_retry_at: None,
            sandbox_ready: false,
            probe_wake: None,
        };
        state.recover(ctx);
        Some(state)
    }

    /// Serves each TCP host port of the pod's containers at the port's `hostIP` (else the
    /// node's address), forwarding every connection to the pod's IP and the container port,
    /// as the portmap CNI plugin maps them; a pod on the host's network listens there itself.
    fn serve_host_ports(&self, ctx: &WorkerContext) -> Vec<Forwarder> {
        let spec = self.pod.spec.as_ref();
        let host_network = spec.and_then(|s| s.host_network).unwrap_or(false);
        let Some(pod_ip) = self.pod_ip.filter(|_| !host_network) else { return Vec::new() };
        let containers =
            spec.into_iter().flat_map(|s| s.init_containers.iter().flatten().chain(&s.containers));
        let ports = containers.flat_map(|c| c.ports.iter().flatten());
        let mut served = Vec::new();
        for port in ports.filter(|p| p.protocol.as_deref().unwrap_or("TCP") == "TCP") {
            let (Some(host_port), Ok(container_port)) = (
                port.host_port.and_then(|p| u16::try_from(p).ok()).filter(|p| *p > 0),
                u16::try_from(port.container_port),
            ) else {
                continue;
            };
            let host_ip = port.host_ip.as_deref().and_then(|ip| ip.parse::<Ipv4Addr>().ok());
            let host_ip = host_ip.filter(|ip| !ip.is_unspecified()).unwrap_or(ctx.config.address);
            let backend = std::net::SocketAddr::from((pod_ip, container_port));
            match Forwarder::bind((host_ip, host_port).into(), Backends::new(vec![backend])) {
                Ok(forwarder) => served.push(forwarder),
                Err(error) => {
                    tracing::warn!(pod = %self.name, %host_ip, host_port, %error, "serving a host port")
                }
            }
        }
        served
    }

    /// After an agent restart: keep the pod's IP, take over still-running processes and
    /// carry restart counts and terminations over from the reported status.
    fn recover(&mut self, ctx: &WorkerContext) {
        let status = self.pod.status.clone().unwrap_or_default();
        if let Some(ip) = status.pod_ip.as_deref().and_then(|ip| ip.parse().ok()) {
            // A pod that had ended gave its address back: its status only tells it.
            if matches!(status.phase.as_deref(), Some("Succeeded" | "Failed")) {
                self.pod_ip = Some(ip);
                self.address_released = true;
                self.sandbox_ready = true;
            } else if ctx.ips.lock().expect("pod ip lock").reserve(&self.uid, ip) {
                self.pod_ip = Some(ip);
                self.sandbox_ready = true;
            }
        }
        let reported: Vec<_> = status
            .init_container_statuses
            .iter()
            .flatten()
            .chain(status.container_statuses.iter().flatten())
            .chain(status.ephemeral_container_statuses.iter().flatten())
            .cloned()
            .collect();
        let mut ended = Vec::new();
        for container in &mut self.containers {
            if let Some(old) = reported.iter().find(|s| s.name == container.name) {
                container.restart_count = old.restart_count.max(0) as u32;
                // How its last run ended: its state's, or (running or waiting again) its last
                // state's, which `kubectl logs --previous` reads.
                let ended = old.state.as_ref().and_then(|s| s.terminated.as_ref());
                let before = old.last_state.as_ref().and_then(|s| s.terminated.as_ref());
                if let Some(t) = ended.or(before) {
                    container.terminated = Some(Terminated::reported(t));
                    container.previous =
                        before.filter(|_| ended.is_some()).map(Terminated::reported);
                    // Finished unless the restart policy would run it again.
                    let policy = self.pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref());
                    container.finished = ended.is_some()
                        && match (container.kind, policy.unwrap_or("Always")) {
                            _ if container.sidecar => false,
                            (Kind::Init, "Never") => true,
                            (Kind::Init, _) => t.exit_code == 0,
                            (Kind::App, "Always") => false,
                            (Kind::App, "OnFailure") => t.exit_code == 0,
                            _ => true,
                        };
                }
            }
            if !ctx.runtime.runs_processes() {
                continue;
            }
            let path = self.dir.join(&container.name).join("state.json");
            let Some(file) = std::fs::read(&path)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<StateFile>(&bytes).ok())
            else {
                continue;
            };
            // A run the file records was started; one that has since ended ended while the
            // agent was down (or was stopped as it shut down): adopted all the same, its end is
            // taken below, so that the restart policy decides whether it runs again (a
            // run-once pod never runs twice).
            tracing::info!(pod = %self.name, container = %container.name, pid = file.pid,
                "adopting a container");
            let dead = !process_alive(file.pid, file.start_ticks);
            let not_app = container.kind != Kind::App;
            container.restart_count = file.restart_count;
            container.waiting = None;
            container.env = file.env;
            container.mounted = !dead && own_mount_namespace(file.pid);
            let mut adopted = RunningContainer::new(
                file.pid,
                file.start_ticks,
                file.started_at,
                file.image,
                None,
            );
            adopted.adopted = true;
            adopted.adopted_running = !dead;
            ctx.runtime.adopt(file.pid, &group_name(&self.uid, &container.name));
            if dead {
                // Its first process's note first: the code a stop at the agent's shutdown
                // recorded is a guess for an adopted one.
                let noted = ExitNote::read(&exit_note_path(&self.dir, &container.name), file.pid);
                let recorded = (file.exit_code).map(|exit_code| ExitNote {
                    pid: file.pid,
                    exit_code,
                    finished_at: None,
                });
                let oom_killed = ctx.runtime.oom_killed(file.pid);
                // What it left in its control group (all of it, when its first process alone
                // was killed) goes now; its process group is not looked for, as its number
                // may be another's since a reboot.
                ctx.runtime.kill_group_left_behind(file.pid);
                let end = (noted.or(recorded), oom_killed);
                ended.push((not_app, container.name.clone(), file.pid, end));
            }
            container.running = Some(adopted);
        }
        // Once an app container has run, the pod has been initialized: its sidecars hold up
        // nothing again (their startup probes run again all the same), as the kubelet reads
        // it after a restart.
        let app_ran = (self.containers.iter())
            .any(|c| c.kind == Kind::App && (c.running.is_some() || c.terminated.is_some()));
        if app_ran {
            self.containers.iter_mut().filter(|c| c.sidecar).for_each(|c| c.ever_started = true);
        }
        // The app containers' ends first: a sidecar's restart depends on whether they have.
        ended.sort_by_key(|(not_app, ..)| *not_app);
        for (_, name, pid, (note, oom_killed)) in ended {
            self.adopted_exited(&name, pid, note.as_ref(), oom_killed);
        }
        self.poll_adopted(ctx);
    }

    /// An adopted container's end (of first process `pid`): as its `note` tells it (at its
    /// time, when it has one); without one, its code is unknown, so it counts as a failure
    /// (restartPolicy Always and OnFailure restart it), in the kubelet's words for a container
    /// whose end it did not see, unless the OOM killer was seen in its group.
    fn adopted_exited(&mut self, name: &str, pid: u32, note: Option<&ExitNote>, oom: bool) {
        let code = note.map_or(137, |note| note.exit_code);
        self.exited(name, pid, code, oom, true);
        let c = self.containers.iter_mut().find(|c| c.name == name);
        let Some(t) = c.and_then(|c| c.terminated.as_mut()) else { return };
        if let Some(at) = note.and_then(|note| note.finished_at.as_ref()) {
            t.finished_at = at.clone();
        }
        if note.is_none() && !oom {
            t.reason = "ContainerStatusUnknown".into();
            t.message = Some("adopted after an agent restart, its exit code is unknown".into());
        }
    }

    /// Records an event about this pod (in the background; simulated nodes record none).
    fn event(&self, ctx: &WorkerContext, kind: EventKind, reason: &str, message: String) {
        self.events(ctx, None, vec![(kind, reason.to_string(), message)]);
    }

    /// Records an event about the pod's container `container`.
    fn container_event(
        &self,
        ctx: &WorkerContext,
        container: &str,
        kind: EventKind,
        reason: &str,
        message: String,
    ) {
        self.events(ctx, Some(container), vec![(kind, reason.to_string(), message)]);
    }

    /// Records `events` about the pod, or its container `container`, after those recorded
    /// before, so that they are listed (and described) in the order they happened; as the
    /// kubelet's, they name their node and the container's place in the spec
    /// (`spec.containers{web}`).
    fn events(
        &self,
        ctx: &WorkerContext,
        container: Option<&str>,
        events: Vec<(EventKind, String, String)>,
    ) {
        if !ctx.runtime.runs_processes() {
            return;
        }
        let mut about = ObjectRef::pod(self.namespace.clone(), self.name.clone(), self.uid.clone());
        about.field_path = container.map(|name| self.field_path(name));
        let queue = self.event_queue.get_or_init(|| {
            let (queue, mut queued) = tokio::sync::mpsc::unbounded_channel::<QueuedEvent>();
            let client = ctx.client.clone();
            let node = ctx.config.node_name.clone();
            // Ends once the pod's worker is gone and what it queued is recorded.
            tokio::spawn(async move {
                while let Some(event) = queued.recv().await {
                    let QueuedEvent { about, kind, reason, message } = event;
                    let client = client.as_ref();
                    events::record_on_node(
                        client, &about, kind, &reason, &message, COMPONENT, &node,
                    )
                    .await;
                }
            });
            queue
        });
        for (kind, reason, message) in events {
            let event = QueuedEvent { about: about.clone(), kind, reason, message };
            // (The recording task ends only when the queue's sender is dropped.)
            let _ = queue.send(event);
        }
    }

    /// Where the container `name` is in the pod's spec, as the kubelet names it in events.
    fn field_path(&self, name: &str) -> String {
        let list = match self.containers.iter().find(|c| c.name == name).map(|c| c.kind) {
            Some(Kind::Init) => "initContainers",
            Some(Kind::Ephemeral) => "ephemeralContainers",
            _ => "containers",
        };
        format!("spec.{list}{{{name}}}")
    }

    /// The command-line prefix that runs a command as container `spec` runs: in its control
    /// groups (held to its limits, and stopped with it, as runc's exec joins them), with its
    /// OOM score, host name and mounts (those of its running process `pid`) and as its user
    /// and groups. What is exec'd in it, its hooks and its exec probes run through it.
    fn launchers(&self, spec: &Container, pid: Option<u32>, ctx: &WorkerContext) -> Vec<String> {
        let groups = pid.map(|pid| ctx.runtime.joining_groups_of(pid));
        let score = launch::with_oom_score(
            &ctx.config,
            &self.raw,
            &spec.name,
            ctx.memory_capacity,
            Vec::new(),
        );
        let identity = Identity::of(&self.pod, spec).ok().flatten();
        let hostname = pid.map(|pid| launch::join_hostname(&self.config, &self.pod, pid));
        // Its mounts after its host name: a container has them all once it is named.
        let mounted = self.containers.iter().any(|c| c.name == spec.name && c.mounted);
        let mounts = pid.map(|pid| launch::join_mounts(&self.config, mounted, pid));
        [
            groups.unwrap_or_default(),
            score,
            hostname.unwrap_or_default(),
            mounts.unwrap_or_default(),
            Identity::wrap(&self.config, identity.as_ref(), Vec::new()),
        ]
        .concat()
    }

    fn container_spec(&self, name: &str) -> Option<&Container> {
        let spec = self.pod.spec.as_ref()?;
        let all = spec.init_containers.iter().flatten().chain(spec.containers.iter());
        all.chain(self.ephemeral.iter()).find(|c| c.name == name)
    }

    fn restart_policy(&self) -> &str {
        self.pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()).unwrap_or("Always")
    }

    /// Whether the pod has come to its end: its app containers have all run to theirs, not to
    /// run again (never so under `restartPolicy: Always`), or an init container failed for
    /// good. Its sidecars then stop, and are not restarted.
    fn ended(&self) -> bool {
        let mut apps = self.containers.iter().filter(|c| c.kind == Kind::App).peekable();
        let completed =
            self.restart_policy() != "Always" && apps.peek().is_some() && apps.all(|c| c.finished);
        completed || self.containers.iter().any(ContainerState::failed_init)
    }

    /// Takes a newer version of the pod from the API.
    fn update(&mut self, raw: Value) {
        // The agent is the source of truth for the status it writes, as the kubelet is: when
        // the server's no longer says what it wrote (the node controller marked the pod not
        // ready while the node was out of touch, or a client patched it), it is written again.
        let revision = resource_version(&raw);
        if revision >= self.last_written
            && self.last_status.as_ref().is_some_and(|ours| !status_agrees(ours, &raw["status"]))
        {
            tracing::debug!(pod = %self.name, "the pod's status differs from ours: writing it again");
            self.rewrite = true;
        }
        match serde_json::from_value::<Pod>(raw.clone()) {
            Ok(pod) => {
                // New labels or annotations reach the downward API's files at once.
                let (old, new) = (&self.pod.metadata, &pod.metadata);
                if old.labels != new.labels || old.annotations != new.annotations {
                    self.volumes_synced = None;
                }
                self.pod = pod;
                self.raw = raw;
                // Ephemeral containers only come (the API server refuses any other change).
                self.ephemeral = ephemeral_containers(&self.pod);
                let backoff = self.config.restart_backoff;
                for c in &self.ephemeral {
                    if !self.containers.iter().any(|known| known.name == c.name) {
                        self.containers.push(ContainerState::new(
                            &c.name,
                            Kind::Ephemeral,
                            backoff,
                        ));
                    }
                }
            }
            Err(error) => tracing::warn!(pod = %self.name, %error, "ignoring an unreadable pod"),
        }
    }

    /// Notes the end of a run stopped as the agent shut down, for the last status it posts;
    /// what comes next for the container is the next agent's to decide (from the run's state
    /// file, as for a run that ended while no agent watched).
    fn stopped_at_shutdown(&mut self, name: &str, pid: u32, code: i32) {
        let Some(c) = self.containers.iter_mut().find(|c| c.name == name) else { return };
        let Some(running) = c.running.take().filter(|r| r.pid == pid) else { return };
        c.previous = c.terminated.take();
        c.terminated = Some(Terminated {
            exit_code: code,
            container_id: Some(container_id(&self.uid, name, pid)),
            reason: if code == 0 { "Completed" } else { "Error" }.into(),
            message: None,
            started_at: running.started_at,
            finished_at: now(),
        });
        c.ready = false;
        c.started = false;
        // Shown ended, not waiting for a restart that is not this agent's to make.
        c.finished = true;
    }

    /// Records an exit (`oom_killed`: the kernel's OOM killer ended one of its processes) and
    /// decides what comes next for that container. A run begun before this agent started
    /// (`before_this_agent`: one an agent stopped as it shut down, or one adopted that has
    /// since ended) has no back-off here: when its restart policy runs it again, it runs at
    /// once, its back-off reset, as a restarted kubelet (whose back-off is in memory) restarts
    /// it.
    fn exited(
        &mut self,
        name: &str,
        pid: u32,
        code: i32,
        oom_killed: bool,
        before_this_agent: bool,
    ) {
        let config = self.config.clone();
        let policy = self.restart_policy().to_string();
        // A failed run's last output is its message when the container asks for it.
        let falls_back = self.container_spec(name).is_some_and(|spec| {
            spec.termination_message_policy.as_deref() == Some("FallbackToLogsOnError")
        });
        let wanted_image = self.container_spec(name).and_then(|spec| spec.image.clone());
        let completing = self.ended();
        let Some(c) = self.containers.iter_mut().find(|c| c.name == name) else { return };
        let Some(running) = c.running.take().filter(|r| r.pid == pid) else { return };
        // A hook still under way ends with the run it was for.
        if let Some((_, task)) = &running.hook {
            task.abort();
        }
        // Stopped for a new image: a new container, which starts afresh (the kubelet's back-off
        // is kept per container definition).
        let redefined = wanted_image.is_some_and(|image| image != running.image)
            && (c.kind != Kind::Init || c.sidecar);
        let _ = std::fs::remove_file(self.dir.join(&c.name).join("state.json"));
        let reason = match code {
            _ if oom_killed => "OOMKilled",
            0 => "Completed",
            _ => "Error",
        };
        // What the run wrote to its termination message file, else (when it asks for it) a
        // failed run's last output.
        let written = termination_message(&termination_log_path(&self.dir, name, c.restart_count));
        let message = written.or_else(|| {
            (falls_back && code != 0)
                .then(|| last_output(&log_path(&self.dir, name, c.restart_count)))
                .flatten()
        });
        // The same run's end seen again (a status posted as an agent shut down, read back) is
        // not an end before it.
        let id = container_id(&self.uid, name, pid);
        if c.terminated.as_ref().is_none_or(|t| t.container_id.as_ref() != Some(&id)) {
            c.previous = c.terminated.take();
        }
        c.terminated = Some(Terminated {
            exit_code: code,
            container_id: Some(id),
            reason: reason.into(),
            message,
            started_at: running.started_at,
            finished_at: now(),
        });
        c.ready = false;
        c.started = false;
        c.liveness = ProbeState::default();
        c.readiness = ProbeState::default();
        c.startup = ProbeState::default();
        c.restarting_deadline = None;
        let probe_killed = std::mem::take(&mut c.probe_killed);
        // A new image restarts whatever the policy says, a probe's kill whatever the exit
        // code (but under `Never`); other exits as the policy says.
        let restart = redefined
            || (probe_killed && policy != "Never")
            || runs_again(c.kind, c.sidecar, &policy, code, completing);
        c.finished = !restart;
        if restart {
            let afresh = redefined || before_this_agent;
            // A run longer than the back-off's expiry starts it over: this restart is at once,
            // as the kubelet's back-off entry has expired (twice its longest wait).
            let expired = running.since.elapsed() >= BACKOFF_RESET_AFTER;
            if expired || afresh {
                c.backoff = config.restart_backoff;
            }
            // The first restart is immediate; later ones back off, doubling each time, whether
            // the container exited or a probe had it killed, as the kubelet backs off every
            // restart of a container.
            if c.restart_count > 0 && !afresh && !expired {
                c.back_off(config.max_restart_backoff);
            }
        }
    }

    /// The pod's IP, as told in its status: once its sandbox is up (or it had one already,
    /// when adopted).
    fn sandbox_ip(&self) -> Option<Ipv4Addr> {
        self.pod_ip.filter(|_| self.sandbox_ready)
    }

    async fn sync(&mut self, ctx: &WorkerContext, addr: &Addr<PodWorker>) {
        if self.stopping {
            return;
        }
        self.poll_adopted(ctx);
        if self.gone || self.pod.metadata.deletion_timestamp.is_some() {
            self.terminate(ctx, addr).await;
            return;
        }
        if self.pod_ip.is_none() {
            let host_network = self.pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false);
            self.pod_ip = if host_network {
                Some(ctx.config.address)
            } else {
                ctx.ips.lock().expect("pod ip lock").allocate(&self.uid)
            };
        }
        if self.host_ports.is_none() && ctx.runtime.runs_processes() {
            self.host_ports = Some(self.serve_host_ports(ctx));
        }
        // A pod that has come to its end is terminal: its deadline and its limits no longer
        // apply.
        if self.stopped_for.is_none() && !self.ended() {
            if self.past_deadline() {
                self.stopped_for = Some((DEADLINE_REASON, DEADLINE_MESSAGE.into()));
                self.event(ctx, EventKind::Normal, DEADLINE_REASON, DEADLINE_MESSAGE.into());
            } else if let Some(message) = self.storage_violation(ctx).await {
                tracing::info!(pod = %self.name, %message, "evicting the pod");
                self.event(ctx, EventKind::Warning, EVICTED_REASON, message.clone());
                self.stopped_for = Some((EVICTED_REASON, message));
            }
        }
        if let Some((reason, _)) = &self.stopped_for {
            // As the kubelet: the containers are stopped (within the grace period; at once for
            // an eviction) and stay so.
            let grace = match *reason {
                EVICTED_REASON => 0,
                _ => termination_grace(&self.pod).as_secs(),
            };
            self.stop_containers(ctx, addr, grace);
            self.release_address(ctx);
            // Not to run again. As the kubelet's `TerminatePod` reports them: a container
            // whose run ended keeps that end (the deadline's SIGTERM, 143); one waiting to run
            // again (a crash loop), and one that never ran once the pod had got that far (an
            // app container of an initialized pod, an init container up to the last that
            // started), are containers it cannot account for, a waiting one's last exit its
            // last state; later ones still wait.
            let initialized = self
                .containers
                .iter()
                .filter(|c| c.kind == Kind::Init)
                .all(ContainerState::initialized);
            let started = |c: &ContainerState| c.running.is_some() || c.terminated.is_some();
            let last_init_started =
                self.containers.iter().rposition(|c| c.kind == Kind::Init && started(c));
            for (i, c) in self.containers.iter_mut().enumerate() {
                if c.running.is_some() || c.finished {
                    continue;
                }
                let rerun_waits = c.terminated.is_some() && c.waiting.is_some();
                let never_ran = c.terminated.is_none();
                let reached = match c.kind {
                    Kind::App => initialized,
                    Kind::Init => last_init_started.is_some_and(|last| i <= last),
                    Kind::Ephemeral => false,
                };
                if rerun_waits {
                    c.previous = c.terminated.take();
                }
                if rerun_waits || (never_ran && reached) {
                    c.terminated = Some(Terminated::unaccounted());
                }
                if c.terminated.is_some() {
                    c.finished = true;
                    c.waiting = None;
                }
            }
            self.write_status(ctx).await;
            return;
        }
        if self.prepare_volumes(ctx).await {
            self.sandbox_ready = true;
            self.start_what_should_run(ctx, addr).await;
        }
        // The pod has ended: its sidecars (and ephemeral containers) stop.
        if self.ended() {
            if self.containers.iter().any(|c| c.running.is_some()) {
                self.stop_containers(ctx, addr, termination_grace(&self.pod).as_secs());
            }
            self.release_address(ctx);
        }
        self.probe(ctx, addr);
        self.rotate_logs(ctx.config.max_log_bytes, ctx.config.log_writer.is_some()).await;
        self.write_status(ctx).await;
    }

    /// Gives the address of a pod that has ended back to the node's range once none of its
    /// containers runs (the kubelet tears its sandbox down then), and its host ports with
    /// it: a node of finished pods would otherwise have none left for new ones.
    fn release_address(&mut self, ctx: &WorkerContext) {
        if self.address_released || self.containers.iter().any(|c| c.running.is_some()) {
            return;
        }
        ctx.ips.lock().expect("pod ip lock").release(&self.uid);
        self.host_ports = Some(Vec::new());
        self.address_released = true;
    }

    /// Sets the pod's volumes up before its first container starts, and brings their files up
    /// to date now and then after (see [`VOLUME_RESYNC`]). False while they cannot be set up:
    /// no container starts, each waits as `ContainerCreating` and a `FailedMount` event says
    /// why, as with the kubelet. A later failure (a ConfigMap deleted) leaves the files as
    /// they were. A simulated runtime runs nothing that could see volumes.
    async fn prepare_volumes(&mut self, ctx: &WorkerContext) -> bool {
        if !ctx.runtime.runs_processes() {
            return true;
        }
        let now = Instant::now();
        let due = match (&self.volumes, self.volumes_synced) {
            (None, _) => self.volumes_retry_at.is_none_or(|at| now >= at),
            (Some(_), Some(synced)) => now.duration_since(synced) >= VOLUME_RESYNC,
            (Some(_), None) => true,
        };
        if !due {
            return self.volumes.is_some();
        }
        let pod_ip = self.pod_ip.map(|ip| ip.to_string()).unwrap_or_default();
        let host_ip = ctx.config.address.to_string();
        let pod_ctx = PodContext {
            pod: &self.pod,
            node_name: &ctx.config.node_name,
            pod_ip: &pod_ip,
            host_ip: &host_ip,
        };
        self.volumes_synced = Some(now);
        if let Some(current) = &mut self.volumes {
            // Brought up to date each on its own: one that fails (its ConfigMap deleted) keeps
            // its files, and the others, a token's renewal among them, go on.
            let (mut set_up, failed) =
                volumes::set_up_each(ctx.client.as_ref(), &pod_ctx, &self.dir).await;
            let mut messages = Vec::with_capacity(failed.len());
            for error in failed {
                tracing::warn!(pod = %self.name, %error, "bringing the pod's volumes up to date");
                messages.push(error.to_string());
                if let Some(kept) = current.set_up.remove(&error.volume) {
                    set_up.set_up.insert(error.volume, kept);
                }
            }
            *current = set_up;
            // Said as the kubelet's remount says it (events of one message are counted).
            for message in messages {
                self.event(ctx, EventKind::Warning, "FailedMount", message);
            }
            return true;
        }
        let set_up = volumes::set_up(ctx.client.as_ref(), &pod_ctx, &self.dir).await;
        match set_up {
            Ok(set_up) => {
                for (name, kind) in &set_up.unsupported {
                    let message = format!(
                        "volume {name:?}: this node does not set up {kind} sources; the pod's \
                         containers run without it"
                    );
                    self.event(ctx, EventKind::Warning, "FailedMount", message);
                }
                self.volumes = Some(set_up);
                true
            }
            Err(error) => {
                self.event(ctx, EventKind::Warning, "FailedMount", error.to_string());
                self.volumes_retry_at = Some(now + ctx.config.restart_backoff);
                false
            }
        }
    }

    /// Adopted processes are not our children: notice their exit by looking. Their exit code
    /// is the one their first process noted (see [`AgentConfig::exit_launcher`] and
    /// [`Self::adopted_exited`]). What it left running (its process group and session) is
    /// killed, as for a container of this agent's.
    fn poll_adopted(&mut self, ctx: &WorkerContext) {
        let gone: Vec<(String, u32, u64, bool)> = self
            .containers
            .iter()
            .filter_map(|c| c.running.as_ref().filter(|r| r.adopted).map(|r| (c, r)))
            .filter(|(_, r)| !process_alive(r.pid, r.start_ticks))
            .map(|(c, r)| (c.name.clone(), r.pid, r.start_ticks, r.adopted_running))
            .collect();
        for (name, pid, start_ticks, seen_running) in gone {
            let oom_killed = ctx.runtime.oom_killed(pid);
            if seen_running {
                ctx.runtime.kill_left_behind(pid, start_ticks);
            }
            let note = ExitNote::read(&exit_note_path(&self.dir, &name), pid);
            self.adopted_exited(&name, pid, note.as_ref(), oom_killed);
        }
    }

    /// Why the kubelet's eviction manager would evict the pod for its local storage, when it
    /// is time to measure it again ([`eviction::CHECK_EVERY`]) and it has passed a limit.
    /// Measured on the blocking pool: a tree of many files takes a while to walk, and this
    /// thread runs other actors.
    async fn storage_violation(&mut self, ctx: &WorkerContext) -> Option<String> {
        if !ctx.runtime.runs_processes()
            || self.storage_measured.is_some_and(|at| at.elapsed() < eviction::CHECK_EVERY)
        {
            return None;
        }
        self.storage_measured = Some(Instant::now());
        let (pod, dir) = (self.pod.clone(), self.dir.clone());
        let measure = move || eviction::storage_violation(&pod, &dir, &eviction::disk_usage);
        tokio::task::spawn_blocking(measure).await.unwrap_or_default()
    }

    /// Whether the pod has run longer than its `activeDeadlineSeconds` (from its start time).
    fn past_deadline(&self) -> bool {
        let deadline = self.pod.spec.as_ref().and_then(|s| s.active_deadline_seconds);
        let started = chrono::DateTime::parse_from_rfc3339(&self.start_time).ok();
        match (deadline, started) {
            (Some(seconds), Some(started)) => {
                chrono::Utc::now().signed_duration_since(started).num_seconds() >= seconds
            }
            _ => false,
        }
    }

    /// Deletion: SIGTERM every container, SIGKILL after the grace period, then remove the pod.
    async fn terminate(&mut self, ctx: &WorkerContext, addr: &Addr<PodWorker>) {
        let grace = if self.gone {
            0
        } else {
            self.pod.metadata.deletion_grace_period_seconds.unwrap_or(30).max(0) as u64
        };
        if !self.stop_containers(ctx, addr, grace) {
            if !self.gone {
                // While its containers stop, the pod's status follows them: readiness as
                // probed, a container that has ended as terminated.
                self.probe(ctx, addr);
                self.write_status(ctx).await;
            }
            return;
        }
        if !self.gone {
            // Its containers' ends first, as the kubelet reports them: a pod that finalizers
            // keep shows that it no longer runs. Once initialized, an app container that never
            // ran is one the kubelet cannot account for (its `TerminatePod`).
            let initialized = self
                .containers
                .iter()
                .filter(|c| c.kind == Kind::Init)
                .all(ContainerState::initialized);
            let unstarted = self.containers.iter_mut().filter(|c| {
                initialized && c.kind == Kind::App && c.running.is_none() && c.terminated.is_none()
            });
            for c in unstarted {
                c.terminated = Some(Terminated::unaccounted());
                c.waiting = None;
                c.finished = true;
            }
            self.write_status(ctx).await;
        }
        // (The status write may have found the pod gone.)
        if !self.gone {
            let options = DeleteOptions {
                grace_period_seconds: Some(0),
                precondition_uid: Some(self.uid.clone()),
                ..DeleteOptions::default()
            };
            let pods = resources::core("pods");
            match ctx.client.delete(pods, &self.namespace, &self.name, &options).await {
                Ok(_) | Err(ApiError::NotFound { .. }) | Err(ApiError::Conflict { .. }) => {}
                Err(error) => {
                    tracing::warn!(pod = %self.name, %error, "removing a stopped pod; will retry");
                    return;
                }
            }
        }
        ctx.ips.lock().expect("pod ip lock").release(&self.uid);
        self.host_ports = Some(Vec::new());
        let _ = std::fs::remove_dir_all(&self.dir);
        self.done = true;
    }

    /// Stops every running container (once: its preStop hook, then SIGTERM), SIGKILL what
    /// still runs after `grace` seconds (a preStop hook's end gives its container two more);
    /// a later call with a shorter grace period brings the stop forward, never back. As the
    /// kubelet orders it, sidecars are told to stop only once the other containers have
    /// stopped. True once none runs.
    fn stop_containers(&mut self, ctx: &WorkerContext, addr: &Addr<PodWorker>, grace: u64) -> bool {
        // As the kubelet: never less than a second, so that even a forced stop is SIGTERM
        // first (and SIGKILL two seconds later).
        let grace = grace.clamp(1, MAX_GRACE_SECONDS as u64);
        let running: Vec<u32> =
            self.containers.iter().filter_map(|c| c.running.as_ref().map(|r| r.pid)).collect();
        let now = Instant::now();
        let until = now + Duration::from_secs(grace);
        let at = match (self.kill_at, self.stop_grace) {
            // A shorter grace period (a deletion during a deadline's stop, a forced one) ends
            // a stop under way sooner.
            (Some(at), Some(before)) if grace < before => at.min(until),
            (Some(at), _) => at,
            (None, _) => until,
        };
        let first = self.kill_at.is_none();
        self.kill_at = Some(at);
        self.stop_grace = Some(self.stop_grace.map_or(grace, |before| before.min(grace)));
        if now >= at && !first {
            // The time is up. As the kubelet, every container gets a SIGTERM and two seconds
            // before SIGKILL (a grace period is a second at least): one whose preStop hook was given
            // until this very time gets them when the hook ends (soon); one whose hook was cut
            // short, or whose SIGTERM waited for its turn, gets them now.
            let mut termed = false;
            for c in &mut self.containers {
                let Some(r) = c.running.as_mut() else { continue };
                let hook_ends =
                    r.pre_stop_deadline.is_some_and(|d| d <= at && now < d + HOOK_SLACK);
                if r.pre_stopping() && hook_ends {
                    continue;
                }
                let unsignalled = r.pre_stopping() || r.term_held;
                if let Some((_, task)) = r.hook.take() {
                    task.abort();
                }
                if unsignalled {
                    r.term_held = false;
                    ctx.runtime.signal(r.pid, StopSignal::Term);
                    termed = true;
                } else {
                    ctx.runtime.signal(r.pid, StopSignal::Kill);
                }
            }
            if termed {
                self.kill_at = Some(now + MIN_STOP_AFTER_HOOK);
            }
            return running.is_empty();
        }
        if first {
            let told: Vec<usize> = (0..self.containers.len())
                .filter(|i| self.containers[*i].running.is_some())
                .collect();
            for i in told {
                let name = self.containers[i].name.clone();
                let message = format!("Stopping container {name}");
                self.container_event(ctx, &name, EventKind::Normal, "Killing", message);
                // A sidecar's preStop hook runs now, its SIGTERM waits for its turn.
                let hold = self.containers[i].sidecar;
                self.begin_stop(i, ctx, addr, at, hold);
            }
        }
        // Sidecars get their SIGTERM in reverse order, once the app containers have stopped:
        // each after the sidecars that follow it.
        let apps_running =
            self.containers.iter().any(|c| c.kind == Kind::App && c.running.is_some());
        if !apps_running {
            let sidecars: Vec<usize> =
                (0..self.containers.len()).filter(|i| self.containers[*i].sidecar).collect();
            for &i in sidecars.iter().rev() {
                let Some(r) = self.containers[i].running.as_mut() else { continue };
                if r.term_held && !r.pre_stopping() {
                    r.term_held = false;
                    ctx.runtime.signal(r.pid, StopSignal::Term);
                    let least = now + MIN_STOP_AFTER_HOOK;
                    self.kill_at = self.kill_at.map(|at| at.max(least));
                }
                // The ones before it wait until it has stopped.
                break;
            }
        }
        running.is_empty()
    }

    /// Starts stopping container `i`'s run, as the kubelet kills a container: its preStop hook
    /// first, when it has one and there is time (until `deadline`), then SIGTERM once the hook
    /// has ended or the time is up; SIGTERM at once otherwise, SIGKILL with no time at all.
    /// With `hold`, the SIGTERM waits for the container's turn (`stop_containers` sends it).
    /// (When the SIGKILL comes is the caller's.)
    fn begin_stop(
        &mut self,
        i: usize,
        ctx: &WorkerContext,
        addr: &Addr<PodWorker>,
        deadline: Instant,
        hold: bool,
    ) {
        let pre_stop = self
            .container_spec(&self.containers[i].name)
            .and_then(|spec| spec.lifecycle.as_ref()?.pre_stop.clone());
        let now = Instant::now();
        let Some(running) = self.containers[i].running.as_mut() else { return };
        // A postStart hook under way is given up: the container is going.
        if !running.pre_stopping() {
            if let Some((_, task)) = running.hook.take() {
                task.abort();
            }
        }
        if deadline <= now {
            if let Some((_, task)) = running.hook.take() {
                task.abort();
            }
            ctx.runtime.signal(running.pid, StopSignal::Kill);
            return;
        }
        if running.pre_stopped {
            // Its hook has run (or runs): SIGTERM is sent, or comes when the hook ends.
            if !running.pre_stopping() && !running.term_held {
                ctx.runtime.signal(running.pid, StopSignal::Term);
            }
            return;
        }
        running.pre_stopped = true;
        running.term_held = hold;
        match pre_stop.filter(|_| ctx.runtime.runs_processes()) {
            Some(handler) => {
                let limit = deadline - now;
                let task = self.spawn_hook(i, Hook::PreStop, handler, Some(limit), ctx, addr);
                if let Some(running) = self.containers[i].running.as_mut() {
                    running.hook = Some((Hook::PreStop, task));
                    running.pre_stop_deadline = Some(deadline);
                }
            }
            None if hold => {}
            None => ctx.runtime.signal(running.pid, StopSignal::Term),
        }
    }

    /// Runs `handler`, container `i`'s `hook`, in the background (for at most `limit`), and
    /// tells the worker its outcome.
    fn spawn_hook(
        &self,
        i: usize,
        hook: Hook,
        handler: k8s_openapi::api::core::v1::LifecycleHandler,
        limit: Option<Duration>,
        ctx: &WorkerContext,
        addr: &Addr<PodWorker>,
    ) -> tokio::task::AbortHandle {
        let c = &self.containers[i];
        let pid = c.running.as_ref().map_or(0, |r| r.pid);
        let (spec, target) = self.hook_target(i, ctx);
        let (container, addr) = (c.name.clone(), addr.clone());
        tokio::spawn(async move {
            let run = hooks::run(&handler, &spec, &target);
            let outcome = match limit {
                // Out of time is no failure: the container is stopped all the same.
                Some(limit) => tokio::time::timeout(limit, run).await.unwrap_or(Ok(None)),
                None => run.await,
            };
            addr.do_send(HookDone { container, pid, hook, outcome });
        })
        .abort_handle()
    }

    /// Container `i`'s spec, and where its hooks run.
    fn hook_target(&self, i: usize, ctx: &WorkerContext) -> (Container, HookTarget) {
        let c = &self.containers[i];
        // The container's group, while it is the container's (not a reused pid's).
        let group =
            c.running.as_ref().filter(|r| process_alive(r.pid, r.start_ticks)).map(|r| r.pid);
        let spec = self.container_spec(&c.name).cloned().unwrap_or_default();
        let target = HookTarget {
            env: c.env.clone(),
            working_dir: Some(runtime::working_dir(&spec)),
            launchers: self.launchers(&spec, group, ctx),
            group,
            pod_ip: self.pod_ip.map(|ip| ip.to_string()).unwrap_or_default(),
            named: format!(
                "Container {:?} in Pod \"{}_{}({})\"",
                c.name, self.name, self.namespace, self.uid
            ),
        };
        (spec, target)
    }

    /// The running containers as the agent's shutdown stops them, each with its preStop hook
    /// unless that has run (a deletion under way began it); postStart hooks under way are
    /// given up, as the containers are going. A `Killing` event each when `recorded`.
    fn shutdown_stops(&mut self, ctx: &WorkerContext, recorded: bool) -> Vec<shutdown::Stopping> {
        let mut stops = Vec::new();
        for i in 0..self.containers.len() {
            let c = &self.containers[i];
            let Some(r) = c.running.as_ref() else { continue };
            let pre_stop = (!r.pre_stopped)
                .then(|| self.container_spec(&c.name)?.lifecycle.as_ref()?.pre_stop.clone())
                .flatten()
                .map(|handler| {
                    let (spec, target) = self.hook_target(i, ctx);
                    shutdown::PreStop { handler, spec, target }
                });
            let (name, pid, start_ticks, sidecar) =
                (c.name.clone(), r.pid, r.start_ticks, c.sidecar);
            stops.push(shutdown::Stopping { name, pid, start_ticks, sidecar, pre_stop });
            if recorded {
                let message = format!("Stopping container {name}", name = c.name);
                self.container_event(ctx, &c.name, EventKind::Normal, "Killing", message);
            }
            let r = self.containers[i].running.as_mut().expect("running");
            if !r.pre_stopping() {
                if let Some((_, task)) = r.hook.take() {
                    task.abort();
                }
            }
        }
        stops
    }

    /// Records that container `name`'s preStop hook failed (`message`: why), as the kubelet.
    fn pre_stop_failed(&self, ctx: &WorkerContext, name: &str, message: &str) {
        tracing::info!(pod = %self.name, container = %name, %message, "preStop hook failed");
        let failed = "PreStopHook failed".to_string();
        self.container_event(ctx, name, EventKind::Warning, "FailedPreStopHook", failed);
    }

    /// A hook of a run still under way has ended: a postStart that failed kills the
    /// container (which its restart policy may then restart); after a preStop, SIGTERM.
    fn hook_done(&mut self, ctx: &WorkerContext, addr: &Addr<PodWorker>, done: HookDone) {
        let Some(i) = self.containers.iter().position(|c| {
            c.name == done.container
                && c.running.as_ref().is_some_and(|r| {
                    r.pid == done.pid && r.hook.as_ref().is_some_and(|(h, _)| *h == done.hook)
                })
        }) else {
            return;
        };
        let name = done.container;
        if let Ok(Some(warning)) = &done.outcome {
            // About the pod, as the kubelet records its hooks' HTTP fallback.
            let fallback = (EventKind::Warning, "LifecycleHTTPFallback".into(), warning.clone());
            self.events(ctx, None, vec![fallback]);
        }
        let Some(running) = self.containers[i].running.as_mut() else { return };
        running.hook = None;
        let (pid, held) = (running.pid, running.term_held);
        match (done.hook, done.outcome) {
            (Hook::PostStart, Ok(_)) => {}
            (Hook::PostStart, Err(message)) => {
                tracing::info!(pod = %self.name, container = %name, %message, "postStart hook failed");
                running.post_start_failed = true;
                // As the kubelet's events, which leave the hook's words out (they may hold
                // secrets); the container's waiting reason has them.
                let events = vec![
                    (
                        EventKind::Warning,
                        "FailedPostStartHook".into(),
                        "PostStartHook failed".into(),
                    ),
                    (EventKind::Normal, "Killing".into(), "FailedPostStartHook".into()),
                ];
                self.events(ctx, Some(&name), events);
                let deadline = Instant::now() + termination_grace(&self.pod).max(MIN_RESTART_GRACE);
                let c = &mut self.containers[i];
                c.waiting = Some(("PostStartHookError".into(), message));
                c.restarting_deadline = Some(deadline);
                self.begin_stop(i, ctx, addr, deadline, false);
            }
            (Hook::PreStop, outcome) => {
                if let Err(message) = outcome {
                    self.pre_stop_failed(ctx, &name, &message);
                }
                if held {
                    // Its SIGTERM waits for its turn (or for the grace period's end), which
                    // the sync this message brings sees to.
                    return;
                }
                ctx.runtime.signal(pid, StopSignal::Term);
                // The kubelet gives a container at least two seconds after its SIGTERM.
                let least = Instant::now() + MIN_STOP_AFTER_HOOK;
                self.kill_at = self.kill_at.map(|at| at.max(least));
                let c = &mut self.containers[i];
                c.restarting_deadline = c.restarting_deadline.map(|at| at.max(least));
            }
        }
    }

    /// Starts the next init container, or (all init containers done) every app container that
    /// should run and whose back-off has passed; restarts containers whose image changed.
    async fn start_what_should_run(&mut self, ctx: &WorkerContext, addr: &Addr<PodWorker>) {
        let now = Instant::now();
        // An image change restarts that container (SIGTERM now, SIGKILL after the pod's
        // termination grace period, as the kubelet kills a changed container).
        let grace = termination_grace(&self.pod).max(MIN_RESTART_GRACE);
        let mut redefined = Vec::new();
        for i in 0..self.containers.len() {
            let wanted =
                self.container_spec(&self.containers[i].name).and_then(|s| s.image.clone());
            let c = &mut self.containers[i];
            // A running init container (not a sidecar) runs to its end as it was defined, as
            // the kubelet leaves it.
            let redefinable = c.kind != Kind::Init || c.sidecar;
            if let (Some(running), Some(wanted)) = (&c.running, wanted) {
                if running.image != wanted && c.restarting_deadline.is_none() && redefinable {
                    c.restarting_deadline = Some(now + grace);
                    let message = match c.sidecar {
                        true => format!("Init container {} definition changed", c.name),
                        false => {
                            format!("Container {} definition changed, will be restarted", c.name)
                        }
                    };
                    redefined.push((i, message));
                }
            }
            if let (Some(deadline), Some(running)) = (c.restarting_deadline, &c.running) {
                if now >= deadline && !running.pre_stopping() {
                    ctx.runtime.signal(running.pid, StopSignal::Kill);
                }
            }
        }
        for (i, message) in redefined {
            let name = self.containers[i].name.clone();
            self.container_event(ctx, &name, EventKind::Normal, "Killing", message);
            self.begin_stop(i, ctx, addr, now + grace, false);
        }
        let init_pending =
            self.containers.iter().position(|c| c.kind == Kind::Init && !c.initialized());
        let mut candidates: Vec<usize> = match init_pending {
            Some(i) => {
                let c = &self.containers[i];
                if c.finished || c.running.is_some() {
                    // A failed init container that will not be retried (the pod has failed),
                    // or a sidecar that has not started yet: the next ones wait.
                    vec![]
                } else {
                    vec![i]
                }
            }
            None => (0..self.containers.len())
                .filter(|i| self.containers[*i].kind == Kind::App)
                .collect(),
        };
        // Sidecars started before are restarted when they exit, until the pod has ended.
        if !self.ended() {
            let started = init_pending.unwrap_or(self.containers.len());
            candidates.extend((0..started).filter(|i| self.containers[*i].sidecar));
        }
        // Ephemeral containers start even while the pod initializes, as the kubelet's do.
        let ephemeral =
            (0..self.containers.len()).filter(|i| self.containers[*i].kind == Kind::Ephemeral);
        candidates.extend(ephemeral);
        for i in candidates {
            // Containers start one after the other: none while one waits for its postStart.
            if self.containers.iter().any(ContainerState::post_starting) {
                break;
            }
            let image = self.container_spec(&self.containers[i].name).and_then(|s| s.image.clone());
            let c = &mut self.containers[i];
            if c.running.is_some() || c.finished {
                continue;
            }
            // A new image (`kubectl set image` to mend a crash or a bad name) starts at once.
            if c.not_before.is_some() && c.tried_image.is_some() && c.tried_image != image {
                c.not_before = None;
                c.backoff = ctx.config.restart_backoff;
            }
            let c = &self.containers[i];
            if c.not_before.is_some_and(|t| now < t) {
                let waiting = match c.waiting.clone() {
                    // Image and config errors keep their own message while backing off (a
                    // pull's behind the kubelet's words for the back-off).
                    Some((r, m)) if r == "ErrImagePull" => {
                        let image = self.container_spec(&c.name).and_then(|s| s.image.clone());
                        let image = image.unwrap_or_default();
                        let message = format!("Back-off pulling image \"{image}\": {r}: {m}");
                        ("ImagePullBackOff".to_string(), message)
                    }
                    Some((r, m)) if r == "ImagePullBackOff" => (r, m),
                    Some((r, m)) if r == CONFIG_ERROR || r == IMAGE_NEVER_PULLED => (r, m),
                    _ => {
                        // The wait in Go's words, as the kubelet's message has it (`1m20s`).
                        let wait = go_duration(c.waiting_for.as_nanos() as i64);
                        let message = format!(
                            "back-off {wait} restarting failed container={} pod={}_{}({})",
                            c.name, self.name, self.namespace, self.uid
                        );
                        ("CrashLoopBackOff".to_string(), message)
                    }
                };
                let entering =
                    self.containers[i].waiting.as_ref().map(|(r, _)| r) != Some(&waiting.0);
                let name = self.containers[i].name.clone();
                if entering && waiting.0 == "CrashLoopBackOff" {
                    let message = format!(
                        "Back-off restarting failed container {} in pod {}_{}({})",
                        name, self.name, self.namespace, self.uid
                    );
                    self.container_event(ctx, &name, EventKind::Warning, "BackOff", message);
                }
                if entering && waiting.0 == "ImagePullBackOff" {
                    let image = self.container_spec(&name).and_then(|s| s.image.clone());
                    let image = image.unwrap_or_default();
                    let events = vec![
                        (
                            EventKind::Normal,
                            "BackOff".into(),
                            format!("Back-off pulling image \"{image}\""),
                        ),
                        (EventKind::Warning, "Failed".into(), "Error: ImagePullBackOff".into()),
                    ];
                    self.events(ctx, Some(&name), events);
                }
                self.containers[i].waiting = Some(waiting);
                continue;
            }
            self.start_container(i, ctx, addr).await;
        }
    }

    async fn start_container(&mut self, i: usize, ctx: &WorkerContext, addr: &Addr<PodWorker>) {
        let name = self.containers[i].name.clone();
        // Each start after the first is a restart, whether or not it starts (as the kubelet
        // counts its container instances).
        let restart = {
            let c = &self.containers[i];
            c.restart_count + u32::from(c.terminated.is_some())
        };
        let Some(spec) = self.container_spec(&name).cloned() else { return };
        self.containers[i].tried_image = spec.image.clone();
        let pod_ip = self.pod_ip.map(|ip| ip.to_string()).unwrap_or_default();
        let host_ip = ctx.config.address.to_string();
        let pod_ctx = PodContext {
            pod: &self.pod,
            node_name: &ctx.config.node_name,
            pod_ip: &pod_ip,
            host_ip: &host_ip,
        };
        let environment = launch::environment(ctx.client.as_ref(), &pod_ctx, &spec).await;
        remove_runs_before(&self.dir, &name, restart.saturating_sub(1));
        // An earlier run's note is no answer for this one.
        let exit_note = exit_note_path(&self.dir, &name);
        if ctx.runtime.runs_processes() {
            let _ = std::fs::remove_file(&exit_note);
        }
        // Who it runs as matters to processes only (a simulated container has no user).
        let prepared = match environment {
            Ok(env) if !ctx.runtime.runs_processes() => Ok((launch::CommandLine::default(), env)),
            Ok(mut env) => Identity::of(&self.pod, &spec).and_then(|identity| {
                let hostname = launch::own_hostname(&self.pod);
                let mut mounts = match &self.volumes {
                    Some(set_up) => volumes::mounts(&spec, set_up, &env)?,
                    None => Vec::new(),
                };
                if ctx.config.mount_launcher.is_none() {
                    // A node that cannot mount runs containers without their API token (which
                    // every pod mounts) rather than not at all; other volumes are refused.
                    mounts.retain(|m| m.target != Path::new(crate::core::API_ACCESS_MOUNT_PATH));
                } else {
                    mounts.extend(termination_log(&self.dir, &spec, restart));
                    // The pod's hosts file, unless the container mounts one of its own.
                    if !mounts.iter().any(|m| m.target == std::path::Path::new(HOSTS)) {
                        mounts.extend(hosts_file(&self.dir, &self.pod, &pod_ip));
                    }
                }
                launch::command_line(
                    &ctx.config,
                    &spec,
                    &env,
                    identity.as_ref(),
                    hostname.as_deref(),
                    &mounts,
                    Some(&exit_note),
                )
                .map(|mut line| {
                    launch::add_runtime_variables(&mut env, &self.pod, identity.as_ref());
                    line.argv = launch::with_oom_score(
                        &ctx.config,
                        &self.raw,
                        &spec.name,
                        ctx.memory_capacity,
                        line.argv,
                    );
                    (line, env)
                })
            }),
            Err(e) => Err(e),
        };
        let interactive = launch::interactive(&ctx.config, &spec);
        let c = &mut self.containers[i];
        let (line, mut env) = match prepared {
            Ok(ready) => ready,
            Err(error) => {
                // The kubelet's events: each try of an image a pull that fails (or, under
                // `imagePullPolicy: Never`, an image not present); a configuration's error
                // once.
                let image = spec.image.as_deref().unwrap_or_default();
                let never = spec.image_pull_policy.as_deref() == Some("Never");
                let failed = |message: String| (EventKind::Warning, "Failed".to_string(), message);
                let (reason, message, events) = match error {
                    LaunchError::UnknownImage(_) if never => {
                        let message = format!(
                            "Container image \"{image}\" is not present with pull policy of Never"
                        );
                        let absent =
                            (EventKind::Warning, IMAGE_NEVER_PULLED.into(), message.clone());
                        let events = vec![absent, failed(format!("Error: {IMAGE_NEVER_PULLED}"))];
                        (IMAGE_NEVER_PULLED, message, events)
                    }
                    LaunchError::UnknownImage(m) => {
                        let events = vec![
                            (
                                EventKind::Normal,
                                "Pulling".into(),
                                format!("Pulling image \"{image}\""),
                            ),
                            failed(format!("Failed to pull image \"{image}\": {m}")),
                            failed("Error: ErrImagePull".into()),
                        ];
                        ("ErrImagePull", m, events)
                    }
                    LaunchError::Config(m) => {
                        // The image is there before the configuration is made, as the
                        // kubelet's events show it.
                        let mut events = pulled(&spec);
                        events.push(failed(format!("Error: {m}")));
                        (CONFIG_ERROR, m, events)
                    }
                };
                c.waiting = Some((reason.to_string(), message));
                if reason == CONFIG_ERROR {
                    // Tried again at the first back-off's pace, not a doubling one (the
                    // kubelet's pod worker retries a failed sync every 10 s): a ConfigMap or
                    // Secret created late is found soon. Each try is an event (counted).
                    c.waiting_for = ctx.config.restart_backoff;
                    c.not_before = Some(Instant::now() + ctx.config.restart_backoff);
                } else {
                    c.back_off(ctx.config.max_restart_backoff);
                }
                self.events(ctx, Some(&name), events);
                return;
            }
        };
        if interactive.tty {
            launch::with_terminal_type(&mut env);
        }
        let log_path = log_path(&self.dir, &name, restart);
        let working_dir = Some(runtime::working_dir(&spec));
        let log_writer = ctx.config.log_writer.clone();
        let mounted = line.mounted;
        let launch = Launch {
            argv: line.argv,
            program: line.program,
            env: env.clone(),
            working_dir,
            log_path,
            log_writer,
            interactive,
            group: group_name(&self.uid, &name),
            resources: launch::resources(&spec),
        };
        // The kubelet's events of a start: its image pulled (an image here is a program of
        // the node's, always there: pulled at once when the policy says `Always`, else found
        // present), the container created, then started or failed.
        let mut events = pulled(&spec);
        events.push((EventKind::Normal, "Created".into(), format!("Created container {name}")));
        let outcome = ctx.runtime.start(launch).await;
        events.push(match &outcome {
            Ok(_) => (EventKind::Normal, "Started".into(), format!("Started container {name}")),
            Err(error) => (EventKind::Warning, "Failed".into(), format!("Error: {error}")),
        });
        self.events(ctx, Some(&name), events);
        match outcome {
            Ok(started) => {
                let c = &mut self.containers[i];
                let before =
                    ShownBefore { restart_count: c.restart_count, waiting: c.waiting.take() };
                c.restart_count = restart;
                c.not_before = None;
                c.env = env;
                c.mounted = mounted;
                let image = spec.image.clone().unwrap_or_default();
                let running = RunningContainer::new(
                    started.pid,
                    started.start_ticks,
                    now(),
                    image,
                    started.io,
                );
                if ctx.runtime.runs_processes() {
                    let file = StateFile {
                        pid: running.pid,
                        start_ticks: running.start_ticks,
                        started_at: running.started_at.clone(),
                        restart_count: c.restart_count,
                        image: running.image.clone(),
                        env: c.env.clone(),
                        exit_code: None,
                    };
                    let path = self.dir.join(&name).join("state.json");
                    if let Err(e) =
                        std::fs::write(&path, serde_json::to_vec(&file).unwrap_or_default())
                    {
                        tracing::warn!(path = %path.display(), error = %e, "writing container state");
                    }
                }
                let exit_code = running.exit_code.clone();
                c.running = Some(running);
                let post_start = spec.lifecycle.as_ref().and_then(|l| l.post_start.clone());
                if let Some(handler) = post_start.filter(|_| ctx.runtime.runs_processes()) {
                    let task = self.spawn_hook(i, Hook::PostStart, handler, None, ctx, addr);
                    if let Some(running) = self.containers[i].running.as_mut() {
                        running.hook = Some((Hook::PostStart, task));
                        running.shown_before = Some(before);
                    }
                }
                let pid = started.pid;
                let addr = addr.clone();
                let container = name.clone();
                tokio::spawn(async move {
                    let exit = started.exit.await;
                    let _ = exit_code.set(exit.code);
                    let (code, oom_killed) = (exit.code, exit.oom_killed);
                    addr.do_send(Exited { container, pid, code, oom_killed });
                });
            }
            Err(error) => {
                let c = &mut self.containers[i];
                c.restart_count = restart;
                let message = error.to_string();
                // runc's code for a container that could not start, whatever the cause.
                let code = 128;
                c.previous = c.terminated.take();
                c.terminated = Some(Terminated {
                    exit_code: code,
                    container_id: None,
                    reason: "StartError".into(),
                    message: Some(message),
                    started_at: now(),
                    finished_at: now(),
                });
                // As an exit with that code (an init container that cannot start fails its
                // pod under `Never`, as the kubelet takes runc's exit).
                let (policy, ended) = (self.restart_policy().to_string(), self.ended());
                let c = &mut self.containers[i];
                c.finished = !runs_again(c.kind, c.sidecar, &policy, code, ended);
                // As an exit: the first restart is immediate, later ones back off.
                if !c.finished && c.restart_count > 0 {
                    c.back_off(ctx.config.max_restart_backoff);
                }
            }
        }
    }

    /// Starts the probes that are due, each on its own task (`ProbeDone` brings its outcome).
    fn probe(&mut self, ctx: &WorkerContext, addr: &Addr<PodWorker>) {
        let pod_ip = self.pod_ip.map(|ip| ip.to_string()).unwrap_or_default();
        let terminating = self.pod.metadata.deletion_timestamp.is_some();
        // When the next probe is due, to be woken for it (not a sync period later).
        let mut next_wake: Option<Instant> = None;
        for i in 0..self.containers.len() {
            let name = self.containers[i].name.clone();
            let Some(spec) = self.container_spec(&name).cloned() else { continue };
            let c = &mut self.containers[i];
            let Some(running) = &c.running else { continue };
            // Not probed: a run waiting for its postStart hook, or being stopped (but for the
            // pod's deletion: see below).
            let stopped_alone = running.pre_stopped && !terminating;
            if c.restarting_deadline.is_some() || c.post_starting() || stopped_alone {
                continue;
            }
            let (since, pid) = (running.since, running.pid);
            if !ctx.runtime.runs_processes() {
                (c.started, c.ever_started, c.ready) = (true, true, true);
                continue;
            }
            if terminating {
                // As the kubelet's prober once the pod is being deleted: startup and liveness
                // count as passed and are probed no more (nothing is restarted now), readiness
                // is probed until the container stops, so that endpoints see it stop serving.
                (c.started, c.ever_started) = (true, true);
            }
            // Startup probe first: liveness and readiness wait for it.
            let mut due_now = Vec::new();
            let mut consider = |kind: ProbeKind, probe: &Probe, state: &mut ProbeState| {
                let at = match due(probe, state, since) {
                    Due::Now => {
                        due_now.push(kind);
                        state.next_run
                    }
                    Due::At(at) => Some(at),
                    Due::Later => None,
                };
                if let Some(at) = at {
                    next_wake = Some(next_wake.map_or(at, |wake: Instant| wake.min(at)));
                }
            };
            if !c.started {
                match &spec.startup_probe {
                    None => c.started = true,
                    Some(probe) => consider(ProbeKind::Startup, probe, &mut c.startup),
                }
            }
            if c.started {
                c.ever_started = true;
                if let Some(probe) = spec.liveness_probe.as_ref().filter(|_| !terminating) {
                    consider(ProbeKind::Liveness, probe, &mut c.liveness);
                }
                match &spec.readiness_probe {
                    None => c.ready = true,
                    Some(probe) => consider(ProbeKind::Readiness, probe, &mut c.readiness),
                }
            }
            if due_now.is_empty() {
                continue;
            }
            let env = c.env.clone();
            let launchers = self.launchers(&spec, Some(pid), ctx);
            for kind in due_now {
                let probe = kind.of(&spec).cloned().expect("due probes are in the spec");
                let (spec, env, launchers, pod_ip) =
                    (spec.clone(), env.clone(), launchers.clone(), pod_ip.clone());
                let (addr, container) = (addr.clone(), name.clone());
                tokio::spawn(async move {
                    let outcome = probes::run(&probe, &spec, &pod_ip, &env, &launchers).await;
                    addr.do_send(ProbeDone { container, pid, kind, outcome });
                });
            }
        }
        // One wake-up at a time, for the earliest probe due.
        let now = Instant::now();
        if let Some(at) = next_wake.filter(|at| self.probe_wake.is_none_or(|w| w <= now || *at < w))
        {
            self.probe_wake = Some(at);
            let addr = addr.clone();
            tokio::spawn(async move {
                tokio::time::sleep_until(at.into()).await;
                addr.do_send(ProbesDue);
            });
        }
    }

    /// Takes a probe run's outcome to its verdict, if it reaches one: a container started or
    /// ready (or not), or restarted for a failed liveness or startup probe as the kubelet does
    /// (its preStop hook, SIGTERM, SIGKILL after the grace period, the probe's own if it has
    /// one). True when it reached a verdict.
    fn probe_done(&mut self, ctx: &WorkerContext, addr: &Addr<PodWorker>, done: ProbeDone) -> bool {
        let Some(i) = self.containers.iter().position(|c| c.name == done.container) else {
            return false;
        };
        let Some(spec) = self.container_spec(&done.container).cloned() else { return false };
        let terminating = self.pod.metadata.deletion_timestamp.is_some();
        let pod_grace = termination_grace(&self.pod);
        let never = self.restart_policy() == "Never";
        // Under `Never`, an app container whose kill leaves none of the pod's app containers
        // running ends the pod: the kubelet kills the pod, not the container.
        let others_run = self
            .containers
            .iter()
            .enumerate()
            .any(|(j, other)| j != i && other.kind == Kind::App && other.running.is_some());
        let c = &mut self.containers[i];
        let kills_pod = never && c.kind == Kind::App && !others_run;
        let kind = done.kind;
        // For a run that has since ended (its probes start afresh with the next), or is being
        // stopped: nothing to judge.
        if c.running.as_ref().is_none_or(|r| r.pid != done.pid) {
            return false;
        }
        c.probe_state(kind).in_flight = false;
        let stopped_alone = c.running.as_ref().is_some_and(|r| r.pre_stopped) && !terminating;
        if c.restarting_deadline.is_some() || c.post_starting() || stopped_alone {
            return false;
        }
        let Some(probe) = done.kind.of(&spec) else { return false };
        let run = judge(probe, c.probe_state(kind), done.outcome);
        let mut events = Vec::new();
        let name = done.container;
        let verdict = ProbeRun::reported(Some(run), done.kind.name(), &name, &mut events);
        let mut killed = None;
        match (done.kind, verdict) {
            (ProbeKind::Startup, Some(true)) => c.started = true,
            (ProbeKind::Readiness, Some(ready)) => c.ready = ready,
            (ProbeKind::Liveness, Some(true)) | (_, None) => {}
            (kind, Some(false)) => {
                let which = if kind == ProbeKind::Startup { "startup" } else { "liveness" };
                tracing::info!(pod = %self.name, container = %name, "{which} probe failed; restarting");
                // In the kubelet's words: a sidecar's names it an init container and says
                // nothing of its restart; an app container's says it will be restarted unless
                // the pod's policy is `Never`.
                let message = if kills_pod {
                    format!("Stopping container {name}")
                } else if c.kind == Kind::Init {
                    format!("Init container {name} failed {which} probe")
                } else if never {
                    format!("Container {name} failed {which} probe")
                } else {
                    format!("Container {name} failed {which} probe, will be restarted")
                };
                events.push((name.clone(), EventKind::Normal, "Killing", message));
                // The probe's own grace period, but for a pod killed (the pod's).
                let seconds = (probe.termination_grace_period_seconds)
                    .filter(|_| !kills_pod)
                    .map(|s| s.clamp(0, MAX_GRACE_SECONDS));
                let grace = seconds.map_or(pod_grace, |s| Duration::from_secs(s as u64));
                let deadline = Instant::now() + grace.max(MIN_RESTART_GRACE);
                c.restarting_deadline = Some(deadline);
                c.probe_killed = true;
                // Its readiness stays what it was until it has stopped.
                killed = Some(deadline);
            }
        }
        for (container, kind, reason, message) in events {
            self.container_event(ctx, &container, kind, reason, message);
        }
        if let Some(deadline) = killed {
            self.begin_stop(i, ctx, addr, deadline, false);
        }
        verdict.is_some()
    }

    /// Rotates the logs of running containers past `max_bytes`, on a blocking thread: a copy
    /// of a large log must not hold up the other actors of the arbiter. Logs written by log
    /// writers are renamed, as the kubelet rotates them, and a new one made at their path,
    /// which the writers take to from their next line on (see `kplane log-writer`): no line is
    /// lost, and one following the log reads the renamed file to its end first. A container
    /// writing its log itself keeps its file: that is copied, then cut.
    async fn rotate_logs(&self, max_bytes: u64, by_log_writers: bool) {
        let logs: Vec<PathBuf> = self
            .containers
            .iter()
            .filter(|c| c.running.is_some())
            .map(|c| log_path(&self.dir, &c.name, c.restart_count))
            .collect();
        let rotate = move || {
            for path in logs {
                if std::fs::metadata(&path).is_ok_and(|m| m.len() > max_bytes) {
                    let rotated = path.with_extension("log.1");
                    let mut new_log = std::fs::OpenOptions::new();
                    if by_log_writers {
                        if std::fs::rename(&path, &rotated).is_ok() {
                            let _ = new_log.create(true).append(true).open(&path);
                        }
                    } else if std::fs::copy(&path, &rotated).is_ok() {
                        // The process keeps its (O_APPEND) file descriptor.
                        let _ = new_log.write(true).truncate(true).open(&path);
                    }
                }
            }
        };
        let _ = tokio::task::spawn_blocking(rotate).await;
    }

    /// Why the pod's readiness gates keep it from being ready, in the kubelet's words, if they
    /// do: a gate's condition type missing from the pod's conditions (as the server has them:
    /// others set them), or not `True`.
    fn readiness_gates_unready(&self) -> Option<String> {
        let gates = self.pod.spec.as_ref().and_then(|s| s.readiness_gates.as_ref())?;
        let conditions = self.pod.status.as_ref().and_then(|s| s.conditions.as_ref());
        let unready: Vec<String> = gates
            .iter()
            .filter_map(|gate| {
                let kind = &gate.condition_type;
                let found = conditions.into_iter().flatten().find(|c| c.type_ == *kind);
                match found {
                    None => Some(format!(
                        "corresponding condition of pod readiness gate {kind:?} does not exist."
                    )),
                    Some(c) if c.status != "True" => Some(format!(
                        "the status of pod readiness gate {kind:?} is not \"True\", but {}",
                        c.status
                    )),
                    Some(_) => None,
                }
            })
            .collect();
        (!unready.is_empty()).then(|| unready.join(", "))
    }

    /// The pod status as it stands.
    fn status(&self, ctx: &WorkerContext) -> Value {
        let policy = self.restart_policy();
        let has_init_containers = self.containers.iter().any(|c| c.kind == Kind::Init);
        // Being deleted: what has stopped stays stopped (no restart), as the kubelet shows it.
        let deleting = self.pod.metadata.deletion_timestamp.is_some();
        let containers =
            (self.containers.iter()).filter(|c| matches!(c.kind, Kind::Init | Kind::App)).count();
        let shown = StatusShown {
            uid: &self.uid,
            has_init_containers,
            deleting,
            restart_policy: policy,
            message_bytes: MAX_POD_TERMINATION_MESSAGES / containers.max(1),
        };
        let statuses = |kind: Kind| -> Vec<Value> {
            let specs: Vec<&Container> = match (kind, self.pod.spec.as_ref()) {
                (Kind::Init, Some(s)) => s.init_containers.iter().flatten().collect(),
                (Kind::App, Some(s)) => s.containers.iter().collect(),
                (Kind::Ephemeral, _) => self.ephemeral.iter().collect(),
                _ => vec![],
            };
            specs
                .iter()
                .filter_map(|spec| {
                    self.containers
                        .iter()
                        .find(|c| c.name == spec.name && c.kind == kind)
                        .map(|c| (spec, c))
                })
                .map(|(spec, c)| container_status(spec, c, &shown))
                .collect()
        };
        let init = statuses(Kind::Init);
        let app = statuses(Kind::App);
        let ephemeral = statuses(Kind::Ephemeral);
        let inits_done = self
            .containers
            .iter()
            .filter(|c| c.kind == Kind::Init)
            .all(ContainerState::initialized);
        let init_failed = self.containers.iter().any(ContainerState::failed_init);
        let apps: Vec<&ContainerState> =
            self.containers.iter().filter(|c| c.kind == Kind::App).collect();
        let all_finished = apps.iter().all(|c| c.finished);
        // Every app container has started (it runs, or ran): until then the pod is Pending,
        // as the kubelet's `getPhase` counts a container waiting for its first start.
        let all_started = !apps.is_empty()
            && apps.iter().all(|c| c.terminated.is_some() || c.shown_running().is_some());
        let nothing_runs = self.containers.iter().all(|c| c.running.is_none());
        // A sidecar still running (stopping once the app containers have ended) keeps the pod
        // Running, as the kubelet's `getPhase` counts it.
        let sidecar_runs = self.containers.iter().any(|c| c.sidecar && c.running.is_some());
        let phase = if init_failed || self.stopped_for.is_some() {
            "Failed"
        } else if (all_finished && policy != "Always" && !sidecar_runs)
            || (deleting && nothing_runs)
        {
            // Finished, or stopped for its deletion (whether or not it got to run): the
            // kubelet's terminal phase.
            if apps.iter().all(|c| c.terminated.as_ref().is_some_and(|t| t.exit_code == 0)) {
                "Succeeded"
            } else {
                "Failed"
            }
        } else if !inits_done || !all_started {
            "Pending"
        } else {
            "Running"
        };
        // Sidecars count for the pod's readiness, as the kubelet counts them.
        let sidecars = self.containers.iter().filter(|c| c.sidecar);
        let counted: Vec<&ContainerState> = sidecars.chain(apps.iter().copied()).collect();
        let ready = !apps.is_empty() && counted.iter().all(|c| c.ready && c.running.is_some());
        let mut pod = json!({"status": self.last_status.clone().unwrap_or_else(|| {
            json!({"conditions": self.pod.status.as_ref().and_then(|s| serde_json::to_value(&s.conditions).ok()).unwrap_or(Value::Null)})
        })});
        if !pod["status"]["conditions"].is_array() {
            pod["status"]["conditions"] = json!([]);
        }
        let unready: Vec<&str> = counted
            .iter()
            .filter(|c| !(c.ready && c.running.is_some()))
            .map(|c| c.name.as_str())
            .collect();
        let message = format!("containers with unready status: [{}]", unready.join(" "));
        // The pod's "sandbox" (its IP, once its volumes are set up) is there until the pod has
        // completed.
        let sandbox = self.sandbox_ip().is_some() && phase != "Succeeded" && phase != "Failed";
        let sandbox = if sandbox { "True" } else { "False" };
        set_condition(&mut pod, "PodReadyToStartContainers", sandbox, None, None);
        if phase == "Succeeded" {
            set_condition(&mut pod, "Initialized", "True", Some("PodCompleted"), None);
        } else if inits_done {
            set_condition(&mut pod, "Initialized", "True", None, None);
        } else {
            let pending: Vec<&str> = self
                .containers
                .iter()
                .filter(|c| c.kind == Kind::Init && !c.initialized())
                .map(|c| c.name.as_str())
                .collect();
            let message = format!("containers with incomplete status: [{}]", pending.join(" "));
            set_condition(
                &mut pod,
                "Initialized",
                "False",
                Some("ContainersNotInitialized"),
                Some(&message),
            );
        }
        let gates_unready = self.readiness_gates_unready();
        for kind in ["Ready", "ContainersReady"] {
            match phase {
                "Failed" => set_condition(&mut pod, kind, "False", Some("PodFailed"), None),
                "Succeeded" => set_condition(&mut pod, kind, "False", Some("PodCompleted"), None),
                _ if ready && kind == "Ready" && gates_unready.is_some() => set_condition(
                    &mut pod,
                    kind,
                    "False",
                    Some("ReadinessGatesNotReady"),
                    gates_unready.as_deref(),
                ),
                _ if ready => set_condition(&mut pod, kind, "True", None, None),
                _ => set_condition(
                    &mut pod,
                    kind,
                    "False",
                    Some("ContainersNotReady"),
                    Some(&message),
                ),
            }
        }
        set_condition(&mut pod, "PodScheduled", "True", None, None);
        // An evicted pod says why it is disrupted, as the kubelet's eviction manager does.
        if let Some((EVICTED_REASON, message)) = &self.stopped_for {
            let by_kubelet = Some("TerminationByKubelet");
            set_condition(&mut pod, "DisruptionTarget", "True", by_kubelet, Some(message));
        }
        // Others' conditions (DisruptionTarget) first, then the kubelet's, in its order.
        if let Some(conditions) = pod["status"]["conditions"].as_array_mut() {
            let rank = |c: &Value| {
                KUBELET_CONDITIONS.iter().position(|kind| c["type"] == *kind).map_or(0, |i| i + 1)
            };
            conditions.sort_by_key(rank);
        }
        let host_ip = ctx.config.address.to_string();
        let mut status = json!({
            "phase": phase,
            "conditions": pod["status"]["conditions"],
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "startTime": self.start_time,
            "containerStatuses": app,
        });
        if !init.is_empty() {
            status["initContainerStatuses"] = json!(init);
        }
        if !ephemeral.is_empty() {
            status["ephemeralContainerStatuses"] = json!(ephemeral);
        }
        if let Some((reason, message)) = &self.stopped_for {
            status["reason"] = json!(reason);
            status["message"] = json!(message);
        }
        // As the kubelet's mergePodStatus: a pod is reported terminal only once nothing of it
        // runs (a container past the deadline within its grace period, a sidecar stopping);
        // until then its phase, reason and message stay as they were.
        let terminal = |phase: &Value| matches!(phase.as_str(), Some("Failed" | "Succeeded"));
        let before = self.last_status.as_ref().unwrap_or(&self.raw["status"]);
        let still_running = self.containers.iter().any(|c| c.running.is_some());
        if still_running && terminal(&status["phase"]) && !terminal(&before["phase"]) {
            let held = status.as_object_mut().expect("built as an object");
            for field in ["phase", "reason", "message"] {
                match before.get(field).filter(|v| !v.is_null()) {
                    Some(value) => held.insert(field.into(), value.clone()),
                    None => held.remove(field),
                };
            }
            held.entry("phase").or_insert_with(|| json!("Pending"));
        }
        if let Some(ip) = self.sandbox_ip() {
            status["podIP"] = json!(ip.to_string());
            status["podIPs"] = json!([{"ip": ip.to_string()}]);
        }
        status
    }

    /// Writes the status through the status subresource when it changed since the last write:
    /// a strategic merge patch, as the kubelet's, so that the conditions others set (readiness
    /// gates', `DisruptionTarget`) stay as they are.
    async fn write_status(&mut self, ctx: &WorkerContext) {
        let status = self.status(ctx);
        if self.last_status.as_ref() == Some(&status) && !self.rewrite {
            return;
        }
        let pods = resources::core("pods");
        let patch = json!({"status": status_patch(&status, &self.raw["status"])});
        match ctx
            .client
            .patch(pods, &self.namespace, &self.name, PatchType::StrategicMerge, &patch, true)
            .await
        {
            Ok(written) => {
                self.last_written = resource_version(&written);
                self.last_status = Some(status);
                self.rewrite = false;
            }
            Err(ApiError::NotFound { .. }) => self.gone = true,
            Err(error) => {
                tracing::warn!(pod = %self.name, %error, "writing pod status; will retry")
            }
        }
    }
}

/// A container's waiting reason (and event) when its image is not on the node and its
/// `imagePullPolicy` is `Never`.
const IMAGE_NEVER_PULLED: &str = "ErrImageNeverPull";

/// The status reason and message of a pod stopped at its `activeDeadlineSeconds`.
const DEADLINE_REASON: &str = "DeadlineExceeded";
/// The status reason (and event) of a pod evicted for its local storage.
const EVICTED_REASON: &str = "Evicted";
/// A container whose environment cannot be made (a missing ConfigMap, Secret or key).
const CONFIG_ERROR: &str = "CreateContainerConfigError";
const DEADLINE_MESSAGE: &str = "Pod was active on the node longer than the specified deadline";

/// A pod's ephemeral containers as containers (the same fields, less the target's name).
fn ephemeral_containers(pod: &Pod) -> Vec<Container> {
    let listed = pod.spec.as_ref().and_then(|s| s.ephemeral_containers.as_ref());
    listed
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let mut fields = serde_json::to_value(c).ok()?;
            fields.as_object_mut()?.remove("targetContainerName");
            serde_json::from_value(fields).ok()
        })
        .collect()
}

fn termination_grace(pod: &Pod) -> Duration {
    let seconds = pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds).unwrap_or(30);
    let seconds = seconds.min(MAX_GRACE_SECONDS);
    Duration::from_secs(seconds.max(0) as u64)
}

/// One run of a probe: why it failed or what it warned of, if it did (each failure is an
/// `Unhealthy` event, each warning a `ProbeWarning`, as the kubelet records them), and the
/// verdict once the run reaches its threshold of successes (true) or failures (false).
struct ProbeRun {
    said: Option<ProbeSaid>,
    verdict: Option<bool>,
}

/// What a probe run said beyond its verdict.
enum ProbeSaid {
    Failed(String),
    Errored(String),
    Warned(String),
}

impl ProbeRun {
    /// The verdict of `run` (of a `what` probe: "Liveness"), its failure added to `events`.
    fn reported(
        run: Option<ProbeRun>,
        what: &str,
        container: &str,
        events: &mut Vec<(String, EventKind, &'static str, String)>,
    ) -> Option<bool> {
        let run = run?;
        let event = match run.said {
            Some(ProbeSaid::Failed(reason)) => {
                Some(("Unhealthy", format!("{what} probe failed: {reason}")))
            }
            Some(ProbeSaid::Errored(error)) => {
                Some(("Unhealthy", format!("{what} probe errored: {error}")))
            }
            Some(ProbeSaid::Warned(warning)) => {
                Some(("ProbeWarning", format!("{what} probe warning: {warning}")))
            }
            None => None,
        };
        if let Some((reason, message)) = event {
            events.push((container.to_string(), EventKind::Warning, reason, message));
        }
        run.verdict
    }
}

/// When a probe runs next.
#[derive(Debug, PartialEq, Eq)]
enum Due {
    /// Now: its run is taken to be under way.
    Now,
    At(Instant),
    /// After the run under way.
    Later,
}

/// When `probe` is due: its initial delay from `since`, then a period after each run's
/// planned time, as the kubelet's ticker keeps its phase (runs missed while one was under way
/// are not made up); if now, its run is taken to be under way.
fn due(probe: &Probe, state: &mut ProbeState, since: Instant) -> Due {
    if state.in_flight {
        return Due::Later;
    }
    let now = Instant::now();
    let first = since + Duration::from_secs(probe.initial_delay_seconds.unwrap_or(0).max(0) as u64);
    let planned = state.next_run.unwrap_or(first);
    if now < planned {
        return Due::At(planned);
    }
    let period = Duration::from_secs(probe.period_seconds.unwrap_or(10).max(1) as u64);
    let mut next = planned + period;
    while next <= now {
        next += period;
    }
    state.next_run = Some(next);
    state.in_flight = true;
    Due::Now
}

/// A run's `outcome` counted: whether it failed, and a verdict once the success or failure
/// threshold is reached (an errored run counts for neither).
fn judge(probe: &Probe, state: &mut ProbeState, outcome: Outcome) -> ProbeRun {
    let succeeded = |state: &mut ProbeState, said| {
        state.failures = 0;
        state.successes += 1;
        let reached = state.successes >= probe.success_threshold.unwrap_or(1).max(1);
        ProbeRun { said, verdict: reached.then_some(true) }
    };
    let failed = |state: &mut ProbeState, said| {
        state.successes = 0;
        state.failures += 1;
        let reached = state.failures >= probe.failure_threshold.unwrap_or(3).max(1);
        ProbeRun { said: Some(said), verdict: reached.then_some(false) }
    };
    match outcome {
        Outcome::Success => succeeded(state, None),
        Outcome::Warning(warning) => succeeded(state, Some(ProbeSaid::Warned(warning))),
        Outcome::Failure(reason) => failed(state, ProbeSaid::Failed(reason)),
        // The kubelet's prober throws away an errored run's result (a port name the container
        // does not have, a body it could not read): said, but not counted either way.
        Outcome::Error(error) => ProbeRun { said: Some(ProbeSaid::Errored(error)), verdict: None },
    }
}

/// A container's name among the node's, for its runtime's groups: `pod<uid>/<name>`.
fn group_name(uid: &str, name: &str) -> String {
    format!("pod{uid}/{name}")
}

/// The id a container's run is known by: its pod, name and process.
fn container_id(uid: &str, name: &str, pid: u32) -> String {
    format!("kplane://{uid}/{name}/{pid}")
}

/// A pod's `metadata.resourceVersion` as a number (0 when it has none).
fn resource_version(pod: &Value) -> u64 {
    pod["metadata"]["resourceVersion"].as_str().and_then(|v| v.parse().ok()).unwrap_or(0)
}

/// The strategic merge patch that writes `status` over the server's (`theirs`), as the
/// kubelet's two-way patch does: only the kubelet's own conditions (the merge by type keeps
/// others'; an eviction's DisruptionTarget is its own), each with its `reason` and `message` cleared when it has none now, and the pod's
/// and host's addresses the server lists but the agent no longer does taken out.
fn status_patch(status: &Value, theirs: &Value) -> Value {
    let mut patch = status.clone();
    // The whole list's order (others' conditions first, then the kubelet's in its order), as
    // the kubelet's two-way patch sends it: the server's list is put in that order.
    if let Some(conditions) = status["conditions"].as_array() {
        let order: Vec<Value> = conditions.iter().map(|c| json!({"type": c["type"]})).collect();
        patch["$setElementOrder/conditions"] = json!(order);
    }
    if let Some(conditions) = patch["conditions"].as_array_mut() {
        // (And the DisruptionTarget of its own eviction.)
        let own_disruption =
            |c: &Value| c["type"] == "DisruptionTarget" && c["reason"] == "TerminationByKubelet";
        conditions.retain(|c| {
            KUBELET_CONDITIONS.iter().any(|kind| c["type"] == *kind) || own_disruption(c)
        });
        for condition in conditions.iter_mut().filter_map(Value::as_object_mut) {
            for field in ["reason", "message"] {
                condition.entry(field).or_insert(Value::Null);
            }
        }
    }
    for list in ["podIPs", "hostIPs"] {
        let ours: Vec<&Value> =
            status[list].as_array().into_iter().flatten().map(|a| &a["ip"]).collect();
        let gone: Vec<Value> = (theirs[list].as_array().into_iter().flatten())
            .filter(|a| !ours.contains(&&a["ip"]))
            .map(|a| json!({"ip": a["ip"], "$patch": "delete"}))
            .collect();
        if let (false, Some(listed)) = (gone.is_empty(), patch[list].as_array_mut()) {
            listed.extend(gone);
        }
    }
    patch
}

/// Whether the server's pod status `theirs` still says what the agent wrote (`ours`): the
/// phase, the pod IP, the kubelet's own conditions (statuses, reasons and messages) and each
/// container's state, readiness, restarts and container. (The kubelet's `needsReconcile`.)
fn status_agrees(ours: &Value, theirs: &Value) -> bool {
    let conditions = |status: &Value| -> Vec<[Value; 4]> {
        KUBELET_CONDITIONS
            .iter()
            .map(|kind| {
                let mut listed = status["conditions"].as_array().into_iter().flatten();
                let c = listed.find(|c| c["type"] == *kind).unwrap_or(&Value::Null);
                [c["type"].clone(), c["status"].clone(), c["reason"].clone(), c["message"].clone()]
            })
            .collect()
    };
    let containers = |status: &Value| -> Vec<[Value; 6]> {
        ["initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"]
            .iter()
            .flat_map(|list| status[*list].as_array().into_iter().flatten())
            .map(|c| {
                let state: Vec<&String> =
                    c["state"].as_object().into_iter().flatten().map(|(k, _)| k).collect();
                let (name, ready, started) =
                    (c["name"].clone(), c["ready"].clone(), c["started"].clone());
                [
                    name,
                    json!(state),
                    ready,
                    started,
                    c["restartCount"].clone(),
                    c["containerID"].clone(),
                ]
            })
            .collect()
    };
    ours["phase"] == theirs["phase"]
        && ours["podIP"] == theirs["podIP"]
        && conditions(ours) == conditions(theirs)
        && containers(ours) == containers(theirs)
}

/// The conditions the kubelet owns, in the order it writes them.
const KUBELET_CONDITIONS: [&str; 5] =
    ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"];

impl RunningContainer {
    /// A run of process `pid` (started at kernel time `start_ticks`), ours unless marked
    /// adopted, with no hook run yet.
    fn new(
        pid: u32,
        start_ticks: u64,
        started_at: String,
        image: String,
        io: Option<Arc<ContainerIo>>,
    ) -> Self {
        Self {
            pid,
            start_ticks,
            started_at,
            since: Instant::now(),
            image,
            adopted: false,
            adopted_running: false,
            io,
            hook: None,
            pre_stopped: false,
            pre_stop_deadline: None,
            post_start_failed: false,
            shown_before: None,
            term_held: false,
            exit_code: Arc::default(),
        }
    }

    /// Its preStop hook is under way (its SIGTERM comes when the hook ends).
    fn pre_stopping(&self) -> bool {
        matches!(self.hook, Some((Hook::PreStop, _)))
    }
}

impl ContainerState {
    /// Its run is waiting for its postStart hook: not yet shown running, probed, or followed
    /// by the containers after it.
    fn post_starting(&self) -> bool {
        self.running.as_ref().is_some_and(|r| matches!(r.hook, Some((Hook::PostStart, _))))
    }

    /// Its run, once shown as running (its postStart hook has passed).
    fn shown_running(&self) -> Option<&RunningContainer> {
        self.running.as_ref().filter(|r| !self.post_starting() && !r.post_start_failed)
    }

    /// Whether this is an init container (not a sidecar) that failed and will not run again.
    fn failed_init(&self) -> bool {
        self.kind == Kind::Init
            && !self.sidecar
            && self.finished
            && self.terminated.as_ref().is_some_and(|t| t.exit_code != 0)
    }

    /// Whether this init container no longer holds up the ones after it and the app
    /// containers: it has completed, or it is a sidecar that has started (once is enough).
    fn initialized(&self) -> bool {
        match self.sidecar {
            true => self.ever_started,
            false => completed(self),
        }
    }
}

/// Whether `c` is an init container that has completed (exited 0, not to run again).
fn completed(c: &ContainerState) -> bool {
    c.kind == Kind::Init && c.finished && c.terminated.as_ref().is_some_and(|t| t.exit_code == 0)
}

/// What a pod's container statuses depend on besides each container.
struct StatusShown<'a> {
    uid: &'a str,
    /// A container being created waits as `PodInitializing` in a pod with init containers
    /// (the kubelet's default waiting reason there), as `ContainerCreating` in others.
    has_init_containers: bool,
    /// The pod is being deleted: a container that has stopped shows as terminated.
    deleting: bool,
    /// The pod's `restartPolicy`.
    restart_policy: &'a str,
    /// How much of each termination message is shown: the pod's share of
    /// `MAX_POD_TERMINATION_MESSAGES`, each container (init or app) an equal part.
    message_bytes: usize,
}

/// The most termination messages a pod's status shows, all its containers together, as the
/// kubelet's status manager cuts them (12 KiB).
const MAX_POD_TERMINATION_MESSAGES: usize = 12 * 1024;

/// A container's status as the kubelet reports it.
fn container_status(spec: &Container, c: &ContainerState, shown: &StatusShown) -> Value {
    let terminated = |t: &Terminated| {
        let mut v = json!({"exitCode": t.exit_code, "reason": t.reason});
        // (A container that never ran has neither time.)
        for (field, time) in [("startedAt", &t.started_at), ("finishedAt", &t.finished_at)] {
            if !time.is_empty() {
                v[field] = json!(time);
            }
        }
        if let Some(m) = &t.message {
            let mut end = m.len().min(shown.message_bytes);
            while !m.is_char_boundary(end) {
                end -= 1;
            }
            v["message"] = json!(m[..end]);
        }
        if let Some(id) = &t.container_id {
            v["containerID"] = json!(id);
        }
        json!({"terminated": v})
    };
    let creating = if shown.has_init_containers { "PodInitializing" } else { "ContainerCreating" };
    let before =
        c.running.as_ref().filter(|_| c.post_starting()).and_then(|r| r.shown_before.as_ref());
    let waiting = before.map_or(&c.waiting, |b| &b.waiting);
    // A sidecar's exit the pod's policy would not restart shows as its end while it waits for
    // its restart (1.32's kubelet asks the pod's policy of sidecars too before it shows a
    // restart's wait).
    let ended_for_the_pod = |t: &Terminated| {
        c.sidecar
            && match shown.restart_policy {
                "Never" => true,
                "OnFailure" => t.exit_code == 0,
                _ => false,
            }
    };
    let (state, last) = match (c.shown_running(), waiting, &c.terminated) {
        (Some(r), _, t) => {
            (json!({"running": {"startedAt": r.started_at}}), t.as_ref().map(terminated))
        }
        (None, _, Some(t)) if c.finished || shown.deleting || ended_for_the_pod(t) => {
            (terminated(t), c.previous.as_ref().map(terminated))
        }
        (None, Some((reason, message)), t) => {
            let reason = if reason == "ContainerCreating" { creating } else { reason.as_str() };
            let mut waiting = json!({"reason": reason});
            if !message.is_empty() {
                waiting["message"] = json!(message);
            }
            (json!({"waiting": waiting}), t.as_ref().map(terminated))
        }
        (None, None, t) => (json!({"waiting": {"reason": creating}}), t.as_ref().map(terminated)),
    };
    // An init container is ready once it has completed, as the kubelet's prober reports it;
    // a sidecar as an app container is; an ephemeral container never (the prober leaves it
    // out, and says nothing of it having started).
    let ready = match c.kind {
        Kind::Init if !c.sidecar => completed(c),
        Kind::Ephemeral => false,
        _ => c.ready && c.shown_running().is_some(),
    };
    let mut status = json!({
        "name": spec.name,
        "image": spec.image.clone().unwrap_or_default(),
        "imageID": "",
        "ready": ready,
        "started": c.shown_running().is_some() && c.started,
        "restartCount": before.map_or(c.restart_count, |b| b.restart_count),
        "state": state,
        "lastState": last.unwrap_or_else(|| json!({})),
    });
    if c.kind == Kind::Ephemeral {
        status.as_object_mut().expect("an object").remove("started");
    }
    let id = match (&c.running, &c.terminated) {
        (Some(r), _) if before.is_none() => Some(container_id(shown.uid, &spec.name, r.pid)),
        (_, Some(t)) => t.container_id.clone(),
        (_, None) => None,
    };
    if let Some(id) = id {
        status["containerID"] = json!(id);
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_errored_probe_run_counts_neither_way() {
        let probe: Probe = serde_json::from_value(json!({"failureThreshold": 2})).unwrap();
        let mut state = ProbeState::default();
        let fail = || Outcome::Failure("nope".into());
        assert_eq!(judge(&probe, &mut state, fail()).verdict, None);
        for _ in 0..3 {
            let run = judge(&probe, &mut state, Outcome::Error("strconv.Atoi".into()));
            assert!(matches!(run.said, Some(ProbeSaid::Errored(_))));
            assert_eq!(run.verdict, None);
        }
        assert_eq!(judge(&probe, &mut state, fail()).verdict, Some(false), "the second failure");
    }

    #[test]
    fn probes_keep_their_period_from_when_each_run_was_due() {
        let probe: Probe =
            serde_json::from_value(json!({"initialDelaySeconds": 5, "periodSeconds": 2})).unwrap();
        let mut state = ProbeState::default();
        let started = Instant::now();
        assert_eq!(due(&probe, &mut state, started), Due::At(started + Duration::from_secs(5)));
        // Run a little after it was due (as woken): the next is two seconds after it was due,
        // not after it ran.
        let since = Instant::now() - Duration::from_millis(5_300);
        assert_eq!(due(&probe, &mut state, since), Due::Now);
        assert_eq!(state.next_run, Some(since + Duration::from_secs(7)));
        assert_eq!(due(&probe, &mut state, since), Due::Later, "one run at a time");
        // Runs missed while one was under way are not made up.
        state.in_flight = false;
        state.next_run = Some(Instant::now() - Duration::from_millis(4_500));
        let planned = state.next_run.unwrap();
        assert_eq!(due(&probe, &mut state, since), Due::Now);
        assert_eq!(state.next_run, Some(planned + Duration::from_secs(6)));
    }

    #[test]
    fn the_status_patch_clears_what_the_agent_no_longer_says_and_leaves_others_conditions() {
        let ours = json!({"conditions": [{"type": "Ready", "status": "True"},
                {"type": "a.io/x", "status": "True"}],
            "podIPs": [{"ip": "127.0.0.6"}]});
        let theirs = json!({"podIPs": [{"ip": "127.0.0.5"}, {"ip": "127.0.0.6"}]});
        let patch = status_patch(&ours, &theirs);
        assert_eq!(
            patch["conditions"],
            json!([{"type": "Ready", "status": "True", "reason": null, "message": null}])
        );
        assert_eq!(
            patch["podIPs"],
            json!([{"ip": "127.0.0.6"}, {"ip": "127.0.0.5", "$patch": "delete"}])
        );
        assert_eq!(
            patch["$setElementOrder/conditions"],
            json!([{"type": "Ready"}, {"type": "a.io/x"}])
        );
    }

    #[test]
    fn the_server_s_status_agrees_while_it_says_what_the_agent_wrote() {
        let ours = json!({"phase": "Running", "podIP": "127.0.0.5", "startTime": "x",
            "conditions": [{"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "True", "lastProbeTime": null}],
            "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0}]});
        // As stored: nulls left out, conditions in another order, times as the server has them.
        let stored = json!({"phase": "Running", "podIP": "127.0.0.5", "startTime": "y",
            "conditions": [{"type": "Ready", "status": "True"},
                {"type": "Initialized", "status": "True"}],
            "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0}]});
        assert!(status_agrees(&ours, &stored));
        let changed = |pointer: &str, value: Value| {
            let mut theirs = stored.clone();
            *theirs.pointer_mut(pointer).unwrap() = value;
            status_agrees(&ours, &theirs)
        };
        assert!(!changed("/conditions/0/status", json!("False")));
        assert!(!changed("/conditions", json!([])));
        // Others' conditions are theirs.
        let mut theirs = stored.clone();
        theirs["conditions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "a.io/x", "status": "False"}));
        assert!(status_agrees(&ours, &theirs));
        assert!(!changed("/conditions/1/type", json!("DisruptionTarget")));
        let mut reasoned = stored.clone();
        reasoned["conditions"][0]["reason"] = json!("NodeNotReady");
        assert!(!status_agrees(&ours, &reasoned));
        let mut waiting = stored.clone();
        waiting["containerStatuses"][0]["state"] = json!({"waiting": {}});
        assert!(!status_agrees(&ours, &waiting));
        assert!(!changed("/containerStatuses/0/ready", json!(false)));
        assert!(!changed("/phase", json!("Pending")));
    }

    #[test]
    fn a_failed_run_s_message_is_the_end_of_its_output() {
        use super::super::log_lines::{write_line, Stream};
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        assert_eq!(last_output(&log), None, "no log");
        let mut bytes = Vec::new();
        for i in 0..100 {
            let line = format!("line {i}");
            write_line(chrono::Utc::now(), line.as_bytes(), true, Stream::Stdout, &mut bytes);
        }
        write_line(chrono::Utc::now(), b"no newline", false, Stream::Stdout, &mut bytes);
        std::fs::write(&log, &bytes).unwrap();
        let message = last_output(&log).unwrap();
        assert!(message.starts_with("line 21\n"), "the last 80 lines: {message}");
        assert!(message.ends_with("line 99\nno newline"), "{message}");
        let long: String = "é".repeat(3000);
        let mut bytes = Vec::new();
        write_line(chrono::Utc::now(), long.as_bytes(), true, Stream::Stderr, &mut bytes);
        std::fs::write(&log, &bytes).unwrap();
        let message = last_output(&log).unwrap();
        assert!(message.len() <= 2048 && message.ends_with("é\n"), "{}", message.len());
        std::fs::write(&log, b"").unwrap();
        assert_eq!(last_output(&log), None, "nothing written");
    }

    #[test]
    fn containers_of_pods_with_init_containers_wait_as_pod_initializing() {
        let spec: Container = serde_json::from_value(json!({"name": "app"})).unwrap();
        let app = ContainerState::new("app", Kind::App, Duration::from_secs(1));
        let shown = |has_init_containers| StatusShown {
            uid: "u",
            has_init_containers,
            deleting: false,
            restart_policy: "Always",
            message_bytes: 4096,
        };
        let waiting = |has_inits| container_status(&spec, &app, &shown(has_inits))["state"].clone();
        assert_eq!(waiting(true), json!({"waiting": {"reason": "PodInitializing"}}));
        assert_eq!(waiting(false), json!({"waiting": {"reason": "ContainerCreating"}}));
        let mut init = ContainerState::new("app", Kind::Init, Duration::from_secs(1));
        init.ready = true;
        init.running = Some(RunningContainer::new(7, 0, now(), String::new(), None));
        assert_eq!(container_status(&spec, &init, &shown(true))["ready"], false, "still running");
        init.running = None;
        init.finished = true;
        init.terminated = Some(Terminated {
            exit_code: 0,
            container_id: Some(container_id("u", "app", 7)),
            reason: "Completed".into(),
            message: None,
            started_at: now(),
            finished_at: now(),
        });
        let done = container_status(&spec, &init, &shown(true));
        assert_eq!(
            (&done["ready"], &done["containerID"]),
            (&json!(true), &json!("kplane://u/app/7"))
        );
    }

    #[test]
    fn a_sidecar_waiting_for_its_restart_shows_its_end_where_the_pod_would_not_restart_it() {
        let spec: Container = serde_json::from_value(json!({"name": "side"})).unwrap();
        let run = |exit_code: i32, pid: u32| Terminated {
            exit_code,
            container_id: Some(container_id("u", "side", pid)),
            reason: if exit_code == 0 { "Completed" } else { "Error" }.into(),
            message: None,
            started_at: now(),
            finished_at: now(),
        };
        let mut side = ContainerState::new("side", Kind::Init, Duration::from_secs(1));
        side.sidecar = true;
        side.restart_count = 2;
        side.previous = Some(run(3, 7));
        side.waiting = Some(("CrashLoopBackOff".to_string(), "back-off".to_string()));
        let state = |side: &ContainerState, restart_policy| {
            let shown = StatusShown {
                uid: "u",
                has_init_containers: true,
                deleting: false,
                restart_policy,
                message_bytes: 4096,
            };
            let status = container_status(&spec, side, &shown);
            let last = status["lastState"]["terminated"]["containerID"].clone();
            (status["state"].as_object().unwrap().keys().next().unwrap().clone(), last)
        };
        side.terminated = Some(run(3, 8));
        let previous = json!("kplane://u/side/7");
        assert_eq!(state(&side, "Never"), ("terminated".to_string(), previous.clone()));
        assert_eq!(state(&side, "OnFailure").0, "waiting");
        assert_eq!(state(&side, "Always").0, "waiting");
        side.terminated = Some(run(0, 8));
        assert_eq!(state(&side, "OnFailure"), ("terminated".to_string(), previous));
        assert_eq!(state(&side, "Always"), ("waiting".to_string(), json!("kplane://u/side/8")));
    }

    #[actix::test]
    async fn a_restart_in_its_post_start_hook_shows_the_status_from_before() {
        let spec: Container = serde_json::from_value(json!({"name": "app"})).unwrap();
        let shown = StatusShown {
            uid: "u",
            has_init_containers: false,
            deleting: false,
            restart_policy: "Always",
            message_bytes: 4096,
        };
        let mut app = ContainerState::new("app", Kind::App, Duration::from_secs(1));
        app.terminated = Some(Terminated {
            exit_code: 1,
            container_id: Some(container_id("u", "app", 7)),
            reason: "Error".into(),
            message: None,
            started_at: now(),
            finished_at: now(),
        });
        app.restart_count = 1;
        let backoff = ("CrashLoopBackOff".to_string(), "back-off".to_string());
        let mut run = RunningContainer::new(8, 0, now(), String::new(), None);
        let hook = tokio::spawn(std::future::pending::<()>());
        run.hook = Some((Hook::PostStart, hook.abort_handle()));
        run.shown_before = Some(ShownBefore { restart_count: 0, waiting: Some(backoff) });
        app.running = Some(run);
        let status = container_status(&spec, &app, &shown);
        assert_eq!(status["restartCount"], 0);
        assert_eq!(status["state"]["waiting"]["reason"], "CrashLoopBackOff");
        assert_eq!(status["lastState"]["terminated"]["exitCode"], 1);
        assert_eq!(status["containerID"], "kplane://u/app/7", "the run that ended");
        // Once the hook has passed, the new run is shown.
        app.running.as_mut().unwrap().hook = None;
        let status = container_status(&spec, &app, &shown);
        assert_eq!(status["restartCount"], 1);
        assert!(status["state"]["running"].is_object(), "{status}");
        assert_eq!(status["containerID"], "kplane://u/app/8");
        hook.abort();
    }
}
