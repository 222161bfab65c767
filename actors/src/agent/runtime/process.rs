//! The process runtime: each container is a host process in its own process group, with its
//! output appended to its log file.

use std::fs::OpenOptions;
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;

use async_trait::async_trait;
use futures::FutureExt;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

use super::{Launch, Runtime, RuntimeError, Started, StopSignal};

/// Runs containers as host processes.
#[derive(Debug, Default)]
pub struct ProcessRuntime;

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
        let Some(mut command) =
            super::command(&launch.argv, &launch.env, launch.working_dir.as_deref())
        else {
            return Err(RuntimeError::Start("the command line is empty".into()));
        };
        if let Some(dir) = launch.log_path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| RuntimeError::Start(e.to_string()))?;
        }
        let (stdout, stderr, log_writer) = output(&launch)?;
        command.stdin(Stdio::null()).stdout(stdout).stderr(stderr).process_group(0);
        let spawned = super::huge_pages::spawn(&mut command);
        // The command holds this end of the log writer's pipe: it must close here, so that the
        // writer sees the output end when the container's processes have all exited.
        drop(command);
        let mut child = spawned.map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => RuntimeError::NotFound(program.clone()),
            _ => RuntimeError::Start(format!("{program}: {e}")),
        })?;
        let pid = child.id().ok_or_else(|| RuntimeError::Start("exited at once".into()))?;
        let exit = async move {
            let code = match child.wait().await {
                Ok(status) => status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(9)),
                Err(_) => 255,
            };
            // The exit is reported once the log writer has written the last lines too (it ends
            // with the output; a process the container left behind may hold the output open,
            // hence the limit).
            if let Some(mut writer) = log_writer {
                let _ = tokio::time::timeout(LOG_WRITER_DRAIN, writer.wait()).await;
            }
            code
        };
        // Reap the child even when nobody awaits the exit.
        let exit = tokio::spawn(exit).map(|r| r.unwrap_or(255)).boxed();
        Ok(Started { pid, start_ticks: start_ticks(pid).unwrap_or(0), exit })
    }

    fn signal(&self, pid: u32, signal: StopSignal) {
        let Ok(raw) = i32::try_from(pid) else { return };
        if raw <= 1 {
            return;
        }
        let signal = match signal {
            StopSignal::Term => Signal::SIGTERM,
            StopSignal::Kill => Signal::SIGKILL,
        };
        if let Err(error) = killpg(Pid::from_raw(raw), signal) {
            tracing::debug!(pid, %error, "signalling a process group");
        }
    }
}

/// How long a container's exit waits for its log writer to write the last of its output.
const LOG_WRITER_DRAIN: std::time::Duration = std::time::Duration::from_secs(2);

/// Where a container's stdout and stderr go: the write end of a pipe into a log writer of
/// its own (in its own process group, so that it outlives the container's signals and writes
/// its last lines), or the log file itself.
fn output(launch: &Launch) -> Result<(Stdio, Stdio, Option<tokio::process::Child>), RuntimeError> {
    let failed =
        |e: std::io::Error| RuntimeError::Start(format!("{}: {e}", launch.log_path.display()));
    let Some((program, args)) = launch.log_writer.as_ref().and_then(|w| w.split_first()) else {
        let log =
            OpenOptions::new().create(true).append(true).open(&launch.log_path).map_err(failed)?;
        let log_err = log.try_clone().map_err(failed)?;
        return Ok((Stdio::from(log), Stdio::from(log_err), None));
    };
    let (reader, writer) = std::io::pipe().map_err(failed)?;
    let writer_err = writer.try_clone().map_err(failed)?;
    let mut log_writer = tokio::process::Command::new(program);
    log_writer
        .args(args)
        .arg(&launch.log_path)
        .stdin(Stdio::from(reader))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    let log_writer = log_writer.spawn().map_err(failed)?;
    Ok((Stdio::from(writer), Stdio::from(writer_err), Some(log_writer)))
}

/// What kplane reads of /proc/PID/stat (fields numbered as in proc(5)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// Field 3: `R`, `S`, `Z`, ...
    pub state: char,
    /// Field 5.
    pub process_group: u32,
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

    fn launch(argv: &[&str], dir: &std::path::Path) -> Launch {
        Launch {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: vec![("GREETING".into(), "hello".into())],
            working_dir: None,
            log_path: dir.join("c/0.log"),
            log_writer: None,
        }
    }

    #[tokio::test]
    async fn runs_logs_and_reports_the_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let runtime = ProcessRuntime;
        let started = runtime
            .start(launch(&["sh", "-c", "echo $GREETING; exit 3"], dir.path()))
            .await
            .unwrap();
        assert_eq!(started.exit.await, 3);
        assert_eq!(std::fs::read_to_string(dir.path().join("c/0.log")).unwrap(), "hello\n");
    }

    #[tokio::test]
    async fn a_signal_stops_the_whole_process_group() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = launch(&["sh", "-c", "sleep 1000 & echo $! > child; wait"], dir.path());
        spec.working_dir = Some(dir.path().to_path_buf());
        let started = ProcessRuntime.start(spec).await.unwrap();
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
        ProcessRuntime.signal(started.pid, StopSignal::Term);
        assert_eq!(started.exit.await, 143);
        while process_alive(child, child_ticks) {
            assert!(std::time::Instant::now() < deadline, "the grandchild survived");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn a_missing_program_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let result = ProcessRuntime.start(launch(&["/no/such/program"], dir.path())).await;
        assert!(matches!(result, Err(RuntimeError::NotFound(_))));
    }
}
