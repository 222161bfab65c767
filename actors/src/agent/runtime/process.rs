//! The process runtime: each container is a host process in its own process group (and, where
//! the node lets the agent make them, in control groups of its own: see [`super::cgroups`]),
//! with its output appended to its log file.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use bytes::Bytes;
use futures::FutureExt;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;
use tokio::sync::broadcast;

use super::cgroups::{Cgroups, ContainerCgroup};
use super::terminal::{Controller, Pty};
#[cfg(test)]
use super::Resources;
use super::{ContainerIo, Exit, Interactive, Launch, Runtime, RuntimeError, Started, StopSignal};

/// Runs containers as host processes; in control groups when made [`ProcessRuntime::with_cgroups`]
/// on a node that has them.
#[derive(Debug, Default)]
pub struct ProcessRuntime {
    cgroups: Option<Cgroups>,
    /// The command-line prefix that joins the groups whose `cgroup.procs` files follow it
    /// (each after `--cgroup-procs`, then `--`) and then runs the rest.
    join_launcher: Vec<String>,
    /// The group of each container that has one, by its first process.
    groups: Arc<Groups>,
    /// The groups being emptied of what an adopted container left behind, by their name: a
    /// new run of that container waits for it (the cleanup would kill the run, or remove the
    /// group under it).
    cleanups: Mutex<HashMap<String, Cleanup>>,
}

/// An adopted container's group being emptied and removed.
type Cleanup = futures::future::Shared<futures::future::BoxFuture<'static, ()>>;

impl ProcessRuntime {
    /// A runtime that puts each container in control groups under `mount` (`/sys/fs/cgroup`)
    /// where this process can make them there, and runs them without otherwise. A container
    /// joins its groups through `join_launcher` (`kplane exec-limited`).
    pub fn with_cgroups(mount: &Path, join_launcher: Vec<String>) -> Self {
        let cgroups = Cgroups::detect(mount);
        match &cgroups {
            Some(_) => tracing::info!("containers run in control groups (cgroup v1 memory, cpu)"),
            None => tracing::info!(
                "no control groups for containers (needs root and cgroup v1's memory \
                 controller): memory limits are per process"
            ),
        }
        Self { cgroups, join_launcher, groups: Arc::default(), cleanups: Mutex::default() }
    }

    /// `argv` run by the launcher once it has joined `group`.
    fn joining(&self, group: &ContainerCgroup, argv: &[String]) -> Vec<String> {
        let mut joining = self.join_launcher.clone();
        for file in group.procs_files() {
            joining.push("--cgroup-procs".into());
            joining.push(file.to_string_lossy().into_owned());
        }
        joining.push("--".into());
        joining.extend(argv.iter().cloned());
        joining
    }

    /// Starts the container of `launch` (`program` its command), in `group` when it has one.
    async fn start_in(
        &self,
        launch: &Launch,
        program: &str,
        group: Option<Arc<ContainerCgroup>>,
    ) -> Result<Started, RuntimeError> {
        // The container's first process joins its groups before it runs anything (its
        // launcher's, which then becomes the container's command), so every process it
        // starts is in them.
        let argv = match &group {
            Some(group) => self.joining(group, &launch.argv),
            None => launch.argv.clone(),
        };
        let Some(mut command) = super::command(&argv, &launch.env, launch.working_dir.as_deref())
        else {
            return Err(RuntimeError::Start("the command line is empty".into()));
        };
        if let Some(dir) = launch.log_path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| RuntimeError::Start(e.to_string()))?;
        }
        // A working directory that is not there yet is made, as container runtimes make an
        // image's (here the node's file system is the container's).
        if let Some(dir) = &launch.working_dir {
            std::fs::create_dir_all(dir).map_err(|e| {
                RuntimeError::Start(format!("making the working directory {}: {e}", dir.display()))
            })?;
        }
        let (log, log_err, log_writers) = output(launch)?;
        let failed = |e: std::io::Error| RuntimeError::Start(format!("{program}: {e}"));
        let wiring = if launch.interactive.tty {
            // The command leads a session of its own on the terminal (its launcher's setsid),
            // which makes it its process group's leader too.
            let pty = Pty::open().map_err(failed)?;
            let stdio = || pty.terminal.try_clone().map(Stdio::from).map_err(failed);
            command.stdin(stdio()?).stdout(stdio()?).stderr(stdio()?);
            Wiring::Terminal(pty.controller, log)
        } else {
            let stdin = if launch.interactive.stdin {
                let (reader, writer) = std::io::pipe().map_err(failed)?;
                command.stdin(reader);
                Some(writer)
            } else {
                command.stdin(Stdio::null());
                None
            };
            let log_err = log_err.map_or_else(Stdio::null, Stdio::from);
            command.stdout(log).stderr(log_err).process_group(0);
            Wiring::Piped(stdin)
        };
        let spawned = super::huge_pages::spawn(&mut command);
        // The command holds this end of the log writer's pipe (or the terminal): it must close
        // here, so that the writer sees the output end when the container's processes have all
        // exited.
        drop(command);
        let mut child = spawned.map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => RuntimeError::NotFound(program.to_string()),
            _ => failed(e),
        })?;
        let io = match wiring.attach(launch.interactive) {
            Ok(io) => io,
            Err(e) => {
                let _ = child.start_kill();
                return Err(failed(e));
            }
        };
        let pid = child.id().ok_or_else(|| RuntimeError::Start("exited at once".into()))?;
        let groups = self.groups.clone();
        if let Some(group) = &group {
            locked(&groups).insert(pid, (launch.group.clone(), group.clone()));
        }
        let exit = async move {
            let code = child.wait().await.map_or(255, exit_code);
            // What it left running goes with it, as a container's processes end with its
            // first one (its PID namespace's init).
            signal_container(pid, Signal::SIGKILL);
            let oom_killed = match group {
                Some(group) => {
                    group.kill_all().await;
                    locked(&groups).remove(&pid);
                    let oom_killed = group.oom_killed();
                    group.remove().await;
                    oom_killed
                }
                None => false,
            };
            // The exit is reported once the log writer has written the last lines too (it ends
            // with the output; a process the container left behind may hold the output open,
            // hence the limit).
            let writers = log_writers.into_iter().map(|mut writer| async move {
                let _ = tokio::time::timeout(LOG_WRITER_DRAIN, writer.wait()).await;
            });
            futures::future::join_all(writers).await;
            Exit { code, oom_killed }
        };
        // Reap the child even when nobody awaits the exit.
        let exit =
            tokio::spawn(exit).map(|r| r.unwrap_or(Exit { code: 255, oom_killed: false })).boxed();
        Ok(Started { pid, start_ticks: start_ticks(pid).unwrap_or(0), exit, io: Some(io) })
    }

    fn group_of(&self, leader: u32) -> Option<Arc<ContainerCgroup>> {
        locked(&self.groups).get(&leader).map(|(_, group)| group.clone())
    }
}

#[async_trait]
impl Runtime for ProcessRuntime {
    fn name(&self) -> &'static str {
        "process"
    }

    fn runs_processes(&self) -> bool {
        true
    }

    async fn start(&self, launch: Launch) -> Result<Started, RuntimeError> {
        let program = launch.argv.first().cloned().unwrap_or_default();
        if program.is_empty() {
            return Err(RuntimeError::Start("the command line is empty".into()));
        }
        // Looked for here, as a spawn would: through a launcher (the one that joins the
        // groups, the agent's), a missing program would be an exit (127), not a container
        // that could not start.
        let launched = self.cgroups.is_some() || launch.program != program;
        if launched && !findable(&launch.program, launch.working_dir.as_deref()) {
            return Err(RuntimeError::NotFound(launch.program.clone()));
        }
        let cleanup = locked(&self.cleanups).remove(&launch.group);
        if let Some(cleanup) = cleanup {
            cleanup.await;
        }
        let group = match &self.cgroups {
            Some(cgroups) => {
                Some(Arc::new(cgroups.create(&launch.group, &launch.resources).map_err(|e| {
                    RuntimeError::Start(format!("making the container's control group: {e}"))
                })?))
            }
            None => None,
        };
        let started = self.start_in(&launch, &program, group.clone()).await;
        if let (true, Some(group)) = (started.is_err(), group) {
            group.remove().await;
        }
        started
    }

    /// SIGTERM goes to the container's first process alone, as a container runtime sends the
    /// stop signal to its PID 1 (a shell's trap runs once its foreground command ends, and the
    /// processes it started hear nothing from the agent); SIGKILL to all of them.
    fn signal(&self, pid: u32, signal: StopSignal) {
        match signal {
            StopSignal::Term => {
                if let Some(leader) = container_leader(pid) {
                    if let Err(error) = kill(leader, Signal::SIGTERM) {
                        tracing::debug!(pid, %error, "signalling a container");
                    }
                }
            }
            StopSignal::Kill => {
                signal_container(pid, Signal::SIGKILL);
                if let Some(group) = self.group_of(pid) {
                    group.kill_now();
                }
            }
        }
    }

    fn kill_left_behind(&self, leader: u32, start_ticks: u64) {
        // Gone, or not yet reaped by its new parent (it is no child of this agent's).
        if proc_stat(leader).is_none_or(|s| s.start_ticks == start_ticks) {
            signal_container(leader, Signal::SIGKILL);
        }
        self.kill_group_left_behind(leader);
    }

    fn kill_group_left_behind(&self, leader: u32) {
        use futures::FutureExt;
        let group = locked(&self.groups).remove(&leader);
        if let Some((name, group)) = group {
            let cleanup = tokio::spawn(async move {
                group.kill_all().await;
                group.remove().await;
            });
            let cleanup = cleanup.map(|_| ()).boxed().shared();
            let mut cleanups = locked(&self.cleanups);
            // Those done are no longer waited for (their container may never run again).
            cleanups.retain(|_, done| done.peek().is_none());
            cleanups.insert(name, cleanup);
        }
    }

    fn adopt(&self, leader: u32, group: &str) {
        if let Some(found) = self.cgroups.as_ref().and_then(|c| c.existing(group)) {
            locked(&self.groups).insert(leader, (group.to_string(), Arc::new(found)));
        }
    }

    fn oom_killed(&self, leader: u32) -> bool {
        self.group_of(leader).is_some_and(|group| group.oom_killed())
    }

    fn enforces_memory_limits(&self) -> bool {
        self.cgroups.is_some()
    }

    fn joining_groups_of(&self, leader: u32) -> Vec<String> {
        let group = self.group_of(leader);
        group.map(|group| self.joining(&group, &[])).unwrap_or_default()
    }
}

/// Each container's group (its name and the group), by the container's first process.
type Groups = Mutex<HashMap<u32, (String, Arc<ContainerCgroup>)>>;

/// A map of the runtime's, locked (a panic elsewhere leaves it usable).
fn locked<T>(map: &Mutex<T>) -> MutexGuard<'_, T> {
    map.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Whether `program` is there to run: a path (from `dir` when relative), or a name found in
/// the agent's `PATH`, which containers get.
pub fn findable(program: &str, dir: Option<&Path>) -> bool {
    if program.contains('/') {
        let path = Path::new(program);
        return match dir {
            Some(dir) if path.is_relative() => dir.join(path).exists(),
            _ => path.exists(),
        };
    }
    let search = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&search).any(|dir| dir.join(program).is_file())
}

/// A process's exit code, 128 + the signal that ended it, as container runtimes report it.
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(9))
}

/// A container's first process as a target of signals: never 0 or 1 (the agent's own group,
/// or init).
fn container_leader(pid: u32) -> Option<Pid> {
    i32::try_from(pid).ok().filter(|raw| *raw > 1).map(Pid::from_raw)
}

/// Signals every process of the container whose first process is `leader`: its process group,
/// and, for a container on a terminal, which leads a session, the session's other groups (a
/// shell with job control puts each job in a group of its own).
fn signal_container(leader: u32, signal: Signal) {
    let Some(group) = container_leader(leader) else { return };
    if let Err(error) = killpg(group, signal) {
        tracing::debug!(leader, %error, "signalling a process group");
    }
    let Ok(entries) = std::fs::read_dir("/proc") else { return };
    let processes = entries.flatten().filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok());
    for pid in processes {
        let in_other_group = |s: &ProcStat| s.session == leader && s.process_group != leader;
        if proc_stat(pid).is_some_and(|s| in_other_group(&s)) {
            if let Ok(pid) = i32::try_from(pid) {
                let _ = kill(Pid::from_raw(pid), signal);
            }
        }
    }
}

/// How long a container's exit waits for its log writer to write the last of its output.
const LOG_WRITER_DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Where a container's stdout and stderr go: the write ends of two pipes, each into a log
/// writer of its own that tags its lines with its stream (each in its own process group, so
/// that it outlives the container's signals and writes its last lines), or both the log file
/// itself. A container on a terminal has one stream, stdout: no stderr is made for it.
fn output(
    launch: &Launch,
) -> Result<(OwnedFd, Option<OwnedFd>, Vec<tokio::process::Child>), RuntimeError> {
    let failed =
        |e: std::io::Error| RuntimeError::Start(format!("{}: {e}", launch.log_path.display()));
    let Some((program, args)) = launch.log_writer.as_ref().and_then(|w| w.split_first()) else {
        let log =
            OpenOptions::new().create(true).append(true).open(&launch.log_path).map_err(failed)?;
        let log_err = match launch.interactive.tty {
            true => None,
            false => Some(log.try_clone().map_err(failed)?.into()),
        };
        return Ok((log.into(), log_err, Vec::new()));
    };
    let writer_of = |stream: &str| {
        let (reader, writer) = std::io::pipe().map_err(failed)?;
        let mut log_writer = tokio::process::Command::new(program);
        log_writer
            .args(args)
            .args(["--stream", stream])
            .arg(&launch.log_path)
            .stdin(Stdio::from(reader))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        let log_writer = log_writer.spawn().map_err(failed)?;
        Ok::<_, RuntimeError>((OwnedFd::from(writer), log_writer))
    };
    let (out, out_writer) = writer_of("stdout")?;
    if launch.interactive.tty {
        return Ok((out, None, vec![out_writer]));
    }
    let (err, err_writer) = writer_of("stderr")?;
    Ok((out, Some(err), vec![out_writer, err_writer]))
}

/// How a started container's stdin and output are wired, before the agent takes its ends.
enum Wiring {
    /// Output into the log; stdin from a pipe (its write end) or from nothing.
    Piped(Option<std::io::PipeWriter>),
    /// Everything on a terminal: its controlling side, and the log its output is copied to.
    Terminal(OwnedFd, OwnedFd),
}

impl Wiring {
    /// The container's stdin and terminal for `attach`. A terminal's output is copied to the
    /// log and to attached clients until every holder of the terminal has closed it.
    fn attach(self, interactive: Interactive) -> std::io::Result<Arc<ContainerIo>> {
        let io = match self {
            Wiring::Piped(stdin) => {
                let stdin = stdin.map(|w| pipe::Sender::from_owned_fd(w.into())).transpose()?;
                ContainerIo::piped(interactive, stdin)
            }
            Wiring::Terminal(controller, log) => {
                let controller = Arc::new(Controller::new(controller)?);
                let (shown, _) = broadcast::channel(SCREEN_CHUNKS);
                let screen = shown.downgrade();
                tokio::spawn(relay(controller.clone(), log, shown));
                ContainerIo::on_terminal(interactive, controller, screen)
            }
        };
        Ok(Arc::new(io))
    }
}

/// How many chunks of a terminal's output an attached client may fall behind before it
/// misses some.
const SCREEN_CHUNKS: usize = 256;

/// Copies what a container's terminal shows to its log and to attached clients, until the
/// terminal is closed by all its holders.
async fn relay(controller: Arc<Controller>, log: OwnedFd, shown: broadcast::Sender<Bytes>) {
    let mut log = LogSink::new(log);
    let mut buffer = vec![0u8; 16 * 1024];
    while let Ok(n @ 1..) = controller.read(&mut buffer).await {
        let chunk = Bytes::copy_from_slice(&buffer[..n]);
        // Nobody attached is no error.
        let _ = shown.send(chunk.clone());
        if let Err(error) = log.write_all(&chunk).await {
            tracing::debug!(%error, "writing a terminal's output to its log");
        }
    }
}

/// Where a terminal's output is logged: the log writer's pipe, or the log file itself.
enum LogSink {
    Pipe(pipe::Sender),
    File(std::fs::File),
}

impl LogSink {
    fn new(log: OwnedFd) -> LogSink {
        let log = std::fs::File::from(log);
        if !log.metadata().is_ok_and(|m| m.file_type().is_fifo()) {
            return LogSink::File(log);
        }
        match log.try_clone().and_then(pipe::Sender::from_file) {
            Ok(pipe) => LogSink::Pipe(pipe),
            Err(_) => LogSink::File(log),
        }
    }

    async fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match self {
            LogSink::Pipe(pipe) => pipe.write_all(bytes).await,
            // A log file of its own (no log writer): an append to the page cache.
            LogSink::File(file) => std::io::Write::write_all(file, bytes),
        }
    }
}

/// What kplane reads of /proc/PID/stat (fields numbered as in proc(5)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Field 3: `R`, `S`, `Z`, ...
    pub state: char,
    /// Field 5.
    pub process_group: u32,
    /// Field 6.
    pub session: u32,
    /// Fields 14 + 15: user and system time, in clock ticks.
    pub cpu_ticks: u64,
    /// Field 24: resident set size, in pages.
    pub rss_pages: u64,
    /// Field 22: when the process started, in clock ticks since boot.
    pub start_ticks: u64,
}

/// Reads /proc/PID/stat; `None` when the process does not exist.
pub fn proc_stat(pid: u32) -> Option<ProcStat> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may contain spaces and parentheses; the fields after its
    // last `)` are plain.
    let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    Some(ProcStat {
        state: fields.first()?.chars().next()?,
        process_group: u32::try_from(field(5)).ok()?,
        session: u32::try_from(field(6)).ok()?,
        cpu_ticks: field(14) + field(15),
        rss_pages: field(24),
        start_ticks: field(22),
    })
}

fn start_ticks(pid: u32) -> Option<u64> {
    proc_stat(pid).map(|s| s.start_ticks)
}

/// True when process `pid` still exists and is the one started at `ticks` (not a reused pid),
/// and is not a zombie.
pub fn process_alive(pid: u32, ticks: u64) -> bool {
    proc_stat(pid).is_some_and(|s| s.state != 'Z' && s.start_ticks == ticks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::runtime::InputError;

    /// A group name no other test (of this or another run) uses at the same time.
    fn unique_group() -> String {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("pod-test-{}-{n}/c", std::process::id())
    }

    fn launch(argv: &[&str], dir: &std::path::Path) -> Launch {
        Launch {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            program: argv.first().map(|s| s.to_string()).unwrap_or_default(),
            env: vec![("GREETING".into(), "hello".into())],
            working_dir: None,
            log_path: dir.join("c/0.log"),
            log_writer: None,
            interactive: Interactive::default(),
            group: unique_group(),
            resources: Default::default(),
        }
    }

    #[tokio::test]
    async fn runs_logs_and_reports_the_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = ProcessRuntime::default();
        let started = runtime
            .start(launch(&["sh", "-c", "echo $GREETING; exit 3"], dir.path()))
            .await
            .unwrap();
        assert_eq!(started.exit.await.code, 3);
        assert_eq!(std::fs::read_to_string(dir.path().join("c/0.log")).unwrap(), "hello\n");
        // A working directory not there yet is made.
        let mut spec = launch(&["sh", "-c", "pwd"], dir.path());
        spec.working_dir = Some(dir.path().join("app/src"));
        let started = ProcessRuntime::default().start(spec).await.unwrap();
        assert_eq!(started.exit.await.code, 0);
        let written = std::fs::read_to_string(dir.path().join("c/0.log")).unwrap();
        assert!(written.ends_with("/app/src\n"), "{written}");
    }

    #[tokio::test]
    async fn a_signal_stops_the_whole_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = launch(&["sh", "-c", "sleep 1000 & echo $! > child; wait"], dir.path());
        spec.working_dir = Some(dir.path().to_path_buf());
        let started = ProcessRuntime::default().start(spec).await.unwrap();
        assert!(process_alive(started.pid, started.start_ticks));
        let child_file = dir.path().join("child");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let child: u32 = loop {
            if let Some(pid) =
                std::fs::read_to_string(&child_file).ok().and_then(|s| s.trim().parse().ok())
            {
                break pid;
            }
            assert!(std::time::Instant::now() < deadline, "the shell never started its child");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        };
        let child_ticks = start_ticks(child).unwrap();
        ProcessRuntime::default().signal(started.pid, StopSignal::Term);
        assert_eq!(started.exit.await.code, 143);
        while process_alive(child, child_ticks) {
            assert!(std::time::Instant::now() < deadline, "the grandchild survived");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    fn interactive(stdin: bool, stdin_once: bool, tty: bool) -> Interactive {
        Interactive { stdin, stdin_once, tty }
    }

    #[tokio::test]
    async fn stdin_once_closes_when_the_first_attached_input_ends() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = launch(&["cat"], dir.path());
        spec.interactive = interactive(true, true, false);
        let started = ProcessRuntime::default().start(spec).await.unwrap();
        let io = started.io.unwrap();
        assert!(io.screen().is_none(), "no terminal");
        io.write(b"one\n").await.unwrap();
        io.attached_input_ended().await;
        assert_eq!(started.exit.await.code, 0, "cat read the end of its stdin");
        assert!(matches!(io.write(b"two\n").await, Err(InputError::Closed)));
        assert_eq!(std::fs::read_to_string(dir.path().join("c/0.log")).unwrap(), "one\n");
    }

    #[tokio::test]
    async fn stdin_stays_open_across_attaches_without_stdin_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = launch(&["sh", "-c", "read a; read b; echo $a $b"], dir.path());
        spec.interactive = interactive(true, false, false);
        let started = ProcessRuntime::default().start(spec).await.unwrap();
        let io = started.io.unwrap();
        io.write(b"first\n").await.unwrap();
        io.attached_input_ended().await;
        io.write(b"second\n").await.unwrap();
        assert_eq!(started.exit.await.code, 0);
        let log = std::fs::read_to_string(dir.path().join("c/0.log")).unwrap();
        assert_eq!(log, "first second\n");
    }

    #[tokio::test]
    async fn without_stdin_nothing_can_be_typed() {
        let dir = tempfile::tempdir().unwrap();
        let started = ProcessRuntime::default().start(launch(&["cat"], dir.path())).await.unwrap();
        assert_eq!(started.exit.await.code, 0, "cat read /dev/null");
        assert!(matches!(started.io.unwrap().write(b"x").await, Err(InputError::Closed)));
    }

    #[tokio::test]
    async fn a_container_on_a_terminal_has_one_log_writer_and_others_two() {
        let dir = tempfile::tempdir().unwrap();
        let streams = dir.path().join("streams");
        // A log writer that notes its stream ($2) and copies its input to the log ($3).
        let script = format!("echo $2 >> {}; exec cat >> \"$3\"", streams.display());
        let writer = ["sh", "-c", &script, "sh"].map(String::from).to_vec();
        for tty in [true, false] {
            std::fs::write(&streams, "").unwrap();
            let mut spec = launch(&["sh", "-c", "echo out; echo err >&2"], dir.path());
            spec.interactive = interactive(false, false, tty);
            spec.log_writer = Some(writer.clone());
            let started = ProcessRuntime::default().start(spec).await.unwrap();
            assert_eq!(started.exit.await.code, 0);
            let mut noted: Vec<String> =
                std::fs::read_to_string(&streams).unwrap().lines().map(String::from).collect();
            noted.sort();
            let expected: &[&str] = if tty { &["stdout"] } else { &["stderr", "stdout"] };
            assert_eq!(noted, expected, "tty: {tty}");
        }
    }

    #[tokio::test]
    async fn a_tty_container_is_typed_into_resized_shown_and_logged() {
        let dir = tempfile::tempdir().unwrap();
        // setsid -c: what the agent's terminal launcher does (a session on the terminal).
        let script = "read line; stty size; tty; echo got $line";
        let mut spec = launch(&["setsid", "-c", "sh", "-c", script], dir.path());
        spec.interactive = interactive(true, true, true);
        let started = ProcessRuntime::default().start(spec).await.unwrap();
        let io = started.io.unwrap();
        let mut screen = io.screen().expect("a terminal");
        io.resize(101, 33);
        io.write(b"hello\n").await.unwrap();
        assert_eq!(started.exit.await.code, 0);
        let mut shown = Vec::new();
        while let Ok(chunk) = screen.recv().await {
            shown.extend_from_slice(&chunk);
        }
        let shown = String::from_utf8_lossy(&shown).to_string();
        assert!(shown.contains("hello\r\n33 101\r\n/dev/pts/"), "{shown:?}");
        assert!(shown.ends_with("got hello\r\n"), "{shown:?}");
        let log = std::fs::read_to_string(dir.path().join("c/0.log")).unwrap();
        assert_eq!(log, shown, "the log has what the terminal showed");
        assert!(io.screen().is_none(), "the terminal has closed");
    }

    /// The pid a container's script wrote to `file`, once it has.
    async fn written_pid(file: &std::path::Path) -> u32 {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            if let Some(pid) =
                std::fs::read_to_string(file).ok().and_then(|s| s.trim().parse().ok())
            {
                return pid;
            }
            assert!(std::time::Instant::now() < deadline, "no pid in {}", file.display());
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn what_a_container_leaves_running_ends_with_it() {
        for (tty, script) in [
            (false, "sleep 1000 & echo $! > child.tmp; mv child.tmp child; exit 3"),
            // A shell with job control puts its job in a process group of its own.
            (true, "set -m; sleep 1000 & echo $! > child.tmp; mv child.tmp child; exit 3"),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let argv: &[&str] =
                if tty { &["setsid", "-c", "sh", "-c", script] } else { &["sh", "-c", script] };
            let mut spec = launch(argv, dir.path());
            spec.working_dir = Some(dir.path().to_path_buf());
            spec.interactive = interactive(false, false, tty);
            let started = ProcessRuntime::default().start(spec).await.unwrap();
            let io = started.io.unwrap();
            let child = written_pid(&dir.path().join("child")).await;
            let ticks = start_ticks(child).unwrap();
            assert_eq!(started.exit.await.code, 3);
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while process_alive(child, ticks) {
                assert!(std::time::Instant::now() < deadline, "the leftover survived (tty: {tty})");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            if tty {
                // Nothing holds the terminal any more: its output's relay has ended.
                while io.screen().is_some() {
                    assert!(std::time::Instant::now() < deadline, "the terminal stayed open");
                    tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            }
        }
    }

    #[tokio::test]
    async fn a_missing_program_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let result =
            ProcessRuntime::default().start(launch(&["/no/such/program"], dir.path())).await;
        assert!(matches!(result, Err(RuntimeError::NotFound(_))));
        if let Some(runtime) = grouping_runtime() {
            for program in ["/no/such/program", "no-such-program-anywhere"] {
                let result = runtime.start(launch(&[program], dir.path())).await;
                assert!(matches!(result, Err(RuntimeError::NotFound(_))), "{program}");
            }
        }
    }

    /// A runtime that puts containers in control groups, joined through a shell launcher
    /// (`kplane exec-limited` is the binary's); `None` where this machine has none to make.
    fn grouping_runtime() -> Option<ProcessRuntime> {
        let join = r#"while [ "$1" = --cgroup-procs ]; do echo 0 > "$2" || exit 125; shift 2; done
            shift; exec "$@""#;
        let launcher = ["sh", "-c", join, "join"].map(String::from).to_vec();
        // Judged apart from the runtime's own detection, which must then find them.
        let root = nix::unistd::geteuid().is_root();
        if !root || !Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes").is_file() {
            eprintln!("skipped: not root, or no cgroup v1 memory controller");
            return None;
        }
        let runtime = ProcessRuntime::with_cgroups(Path::new("/sys/fs/cgroup"), launcher);
        assert!(runtime.cgroups.is_some(), "root with a v1 memory controller makes groups");
        Some(runtime)
    }

    #[tokio::test]
    async fn a_container_past_its_memory_limit_is_oom_killed() {
        let Some(runtime) = grouping_runtime() else { return };
        let dir = tempfile::tempdir().unwrap();
        // `tail` keeps a whole line in memory, and /dev/zero has no end of line.
        let mut spec = launch(&["tail", "/dev/zero"], dir.path());
        spec.resources.memory_limit = Some(32 << 20);
        let started = runtime.start(spec).await.unwrap();
        assert_eq!(started.exit.await, Exit { code: 137, oom_killed: true });
        // Another run of a container that ends by itself is no OOM kill.
        let started = runtime.start(launch(&["sh", "-c", "exit 3"], dir.path())).await.unwrap();
        assert_eq!(started.exit.await, Exit { code: 3, oom_killed: false });
    }

    #[tokio::test]
    async fn a_containers_group_holds_its_limits_and_every_process_it_started() {
        let Some(runtime) = grouping_runtime() else { return };
        let dir = tempfile::tempdir().unwrap();
        // The leftover leaves the container's process group and session: only its control
        // group still knows it.
        let script = "setsid sleep 1000 & echo $! > child; read line";
        let mut spec = launch(&["sh", "-c", script], dir.path());
        spec.working_dir = Some(dir.path().to_path_buf());
        spec.interactive = interactive(true, false, false);
        spec.resources = Resources {
            memory_limit: Some(64 << 20),
            cpu_limit_millis: Some(500),
            cpu_request_millis: Some(250),
        };
        let group = spec.group.clone();
        let started = runtime.start(spec).await.unwrap();
        let child = written_pid(&dir.path().join("child")).await;
        let ticks = start_ticks(child).unwrap();
        assert_ne!(proc_stat(child).unwrap().session, started.pid, "the leftover left");
        let file = |controller: &str, name: &str| {
            let path = Path::new("/sys/fs/cgroup").join(controller).join("kplane").join(&group);
            std::fs::read_to_string(path.join(name)).map(|text| text.trim().to_string())
        };
        assert_eq!(file("memory", "memory.limit_in_bytes").unwrap(), (64 << 20).to_string());
        assert_eq!(file("cpu", "cpu.cfs_quota_us").unwrap(), "50000");
        assert_eq!(file("cpu", "cpu.shares").unwrap(), "256");
        let members = file("memory", "cgroup.procs").unwrap();
        assert!(members.lines().any(|pid| pid == child.to_string()), "{members}");
        // What is run in the container besides (exec) joins its groups, and ends with it.
        let execd = [
            runtime.joining_groups_of(started.pid),
            ["sh", "-c", "setsid sleep 1000 & echo $! > execd"].map(String::from).to_vec(),
        ]
        .concat();
        let status = std::process::Command::new(&execd[0])
            .args(&execd[1..])
            .current_dir(dir.path())
            .status()
            .unwrap();
        assert!(status.success());
        let exec_child = written_pid(&dir.path().join("execd")).await;
        let exec_ticks = start_ticks(exec_child).unwrap();
        for controller in ["memory", "cpu"] {
            let members = file(controller, "cgroup.procs").unwrap();
            assert!(members.lines().any(|pid| pid == exec_child.to_string()), "{members}");
        }
        assert!(runtime.joining_groups_of(exec_child).is_empty(), "not a container's leader");
        started.io.unwrap().write(b"done\n").await.unwrap();
        assert_eq!(started.exit.await, Exit { code: 0, oom_killed: false });
        assert!(!process_alive(child, ticks), "the leftover ended with the container");
        assert!(!process_alive(exec_child, exec_ticks), "the exec'd one ended with it");
        assert!(file("memory", "cgroup.procs").is_err(), "the group is removed");
        assert!(file("cpu", "cgroup.procs").is_err(), "the group is removed");
    }
}
