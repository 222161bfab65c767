//! Container runtimes: how a container's command line becomes something running. The pod worker
//! drives either one the same way: start, signal, learn of the exit.

pub mod cgroups;
mod container_io;
mod exit_note;
pub mod huge_pages;
mod process;
mod simulated;
pub mod terminal;

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use futures::future::BoxFuture;

pub use container_io::{ContainerIo, InputError, Interactive};
pub use exit_note::ExitNote;
pub use process::{exit_code, findable, proc_stat, process_alive, ProcStat, ProcessRuntime};
pub use simulated::SimulatedRuntime;

/// A command with exactly `env` (and the agent's `PATH`), in `working_dir`: how container
/// processes, exec probes and exec'd commands start. `None` for an empty command line.
pub fn command(
    argv: &[String],
    env: &[(String, String)],
    working_dir: Option<&Path>,
) -> Option<tokio::process::Command> {
    let (program, args) = argv.split_first()?;
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()))
        .envs(env.iter().map(|(k, v)| (k, v)));
    if let Some(dir) = working_dir {
        command.current_dir(dir);
    }
    Some(command)
}

/// How `kplane exec-limited`, a container's launcher, begins what it writes when the program
/// it was to become could not be started (exiting 127 when missing, 126 otherwise).
pub const CANNOT_RUN: &str = "kplane exec-limited: cannot run ";

/// Where a container's processes (its own, exec'd commands, exec probes and hooks) start:
/// its `workingDir`, else `/`, as a container runtime starts them in an image that sets none.
pub fn working_dir(container: &k8s_openapi::api::core::v1::Container) -> PathBuf {
    let dir = container.working_dir.as_deref().filter(|dir| !dir.is_empty());
    PathBuf::from(dir.unwrap_or("/"))
}

/// What to run for one container.
#[derive(Debug, Clone)]
pub struct Launch {
    pub argv: Vec<String>,
    /// The container's own program, which `argv`'s launchers come down to: looked for before
    /// the start, so that a missing one is a container that could not start rather than a
    /// launcher's exit.
    pub program: String,
    pub env: Vec<(String, String)>,
    pub working_dir: Option<PathBuf>,
    /// stdout and stderr go here (appended).
    pub log_path: PathBuf,
    /// The log writer's command line (without the path), when the output goes through one.
    pub log_writer: Option<Vec<String>>,
    /// Whether the container gets a stdin to attach to, and a terminal. With `tty`, `argv`
    /// must make the container lead a session of its own with its stdin, the terminal, as its
    /// controlling one (`kplane exec-limited --tty`).
    pub interactive: Interactive,
    /// The container's name among the node's (`pod<uid>/<container>`): its control groups'
    /// where the runtime puts containers in groups.
    pub group: String,
    /// What the runtime holds the container to, where it can.
    pub resources: Resources,
}

/// A container's resources, as a runtime that enforces them reads them from its spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    /// `limits.memory`, in bytes.
    pub memory_limit: Option<u64>,
    /// `limits.cpu`, in thousandths of a core.
    pub cpu_limit_millis: Option<u64>,
    /// `requests.cpu`, in thousandths of a core.
    pub cpu_request_millis: Option<u64>,
}

/// How a container's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// Its first process's exit code (128 + the signal that killed it).
    pub code: i32,
    /// The kernel's OOM killer ended one of its processes (past its memory limit).
    pub oom_killed: bool,
}

/// A started container.
pub struct Started {
    /// Process (and process group) id; simulated containers get made-up ids.
    pub pid: u32,
    /// Kernel start time of the process, to recognise it again after an agent restart.
    pub start_ticks: u64,
    /// Resolves once the container has exited and what it left running has been killed.
    pub exit: BoxFuture<'static, Exit>,
    /// Its stdin and terminal, for `attach` (`None` where nothing runs).
    pub io: Option<std::sync::Arc<ContainerIo>>,
}

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("executable not found: {0}")]
    NotFound(String),
    #[error("cannot start: {0}")]
    Start(String),
}

/// Signals the pod worker sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    Term,
    Kill,
}

#[async_trait]
pub trait Runtime: Send + Sync + 'static {
    /// `process` or `simulated`: reported in the Node's containerRuntimeVersion.
    fn name(&self) -> &'static str;
    /// Whether images need a command line (a simulated runtime runs nothing).
    fn runs_processes(&self) -> bool;
    async fn start(&self, launch: Launch) -> Result<Started, RuntimeError>;
    /// Sends a container its stop signal (SIGTERM, to its first process) or kills every
    /// process it has (SIGKILL).
    fn signal(&self, pid: u32, signal: StopSignal);
    /// Kills what a container whose first process `leader` (started at kernel time
    /// `start_ticks`) has ended left running (its process group and session), once the agent
    /// sees the end of a run it did not start itself (an adopted one). Nothing when the number
    /// `leader` is another process's by now: then no process is left in its group (the
    /// kernel keeps a number in use while a group has it).
    fn kill_left_behind(&self, leader: u32, start_ticks: u64) {
        let _ = (leader, start_ticks);
    }
    /// Kills what is left in the control groups of the container whose first process `leader`
    /// had ended when it was adopted, and removes them (nothing where it has none).
    fn kill_group_left_behind(&self, leader: u32) {
        let _ = leader;
    }
    /// Whether the kernel's OOM killer has killed a process of the container (adopted) whose
    /// first process is `leader`, in its run.
    fn oom_killed(&self, leader: u32) -> bool {
        let _ = leader;
        false
    }
    /// Takes on a container (`group`, as [`Launch::group`]) whose first process `leader` an
    /// earlier agent started, so that its stop reaches every process it has.
    fn adopt(&self, leader: u32, group: &str) {
        let _ = (leader, group);
    }
    /// The command-line prefix that puts a process into the control groups of the container
    /// whose first process is `leader` (empty when it has none), so that what runs in the
    /// container besides (exec, hooks, exec probes) shares its limits and ends with it.
    fn joining_groups_of(&self, leader: u32) -> Vec<String> {
        let _ = leader;
        Vec::new()
    }
    /// Whether the runtime holds containers to their memory limits itself (else the agent's
    /// memory-limit launcher does, per process).
    fn enforces_memory_limits(&self) -> bool {
        false
    }
}
