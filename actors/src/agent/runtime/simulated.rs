//! The simulated runtime (like kwok): nothing runs; a container "runs" until it is signalled.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use async_trait::async_trait;
use futures::FutureExt;
use tokio::sync::oneshot;

use super::{Exit, Launch, Runtime, RuntimeError, Started, StopSignal};

/// The first fake pid: above the highest pid Linux hands out (`pid_max` is at most 2^22), so
/// that no fake one names a real process (whose usage would be reported as the container's).
const FIRST_PID: u32 = (1 << 22) + 1;

/// Hands out fake pids and ends a "container" when it is signalled.
#[derive(Default)]
pub struct SimulatedRuntime {
    next_pid: AtomicU32,
    running: Mutex<HashMap<u32, oneshot::Sender<i32>>>,
}

#[async_trait]
impl Runtime for SimulatedRuntime {
    fn name(&self) -> &'static str {
        "simulated"
    }

    fn runs_processes(&self) -> bool {
        false
    }

    async fn start(&self, _launch: Launch) -> Result<Started, RuntimeError> {
        let pid = FIRST_PID + self.next_pid.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.running.lock().expect("simulated runtime lock").insert(pid, tx);
        let exit = rx.map(|code| Exit { code: code.unwrap_or(137), oom_killed: false }).boxed();
        Ok(Started { pid, start_ticks: 0, exit, io: None })
    }

    fn signal(&self, pid: u32, signal: StopSignal) {
        if let Some(tx) = self.running.lock().expect("simulated runtime lock").remove(&pid) {
            let _ = tx.send(if signal == StopSignal::Term { 143 } else { 137 });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_simulated_container_runs_until_signalled() {
        let runtime = SimulatedRuntime::default();
        let launch = Launch {
            argv: vec![],
            program: String::new(),
            env: vec![],
            working_dir: None,
            log_path: "/nonexistent".into(),
            log_writer: None,
            interactive: Default::default(),
            group: "pod1/c".into(),
            resources: Default::default(),
        };
        let started = runtime.start(launch).await.unwrap();
        let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max").unwrap();
        assert!(started.pid > pid_max.trim().parse::<u32>().unwrap(), "no real process's pid");
        runtime.signal(started.pid, StopSignal::Term);
        assert_eq!(started.exit.await.code, 143);
    }
}
