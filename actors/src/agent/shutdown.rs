//! A pod's containers stopped as their agent shuts down, as the kubelet's graceful node
//! shutdown stops them: each pod gets its `terminationGracePeriodSeconds`, at most the agent's
//! `shutdown_grace_period`; a container's preStop hook runs first, then it gets SIGTERM, and
//! SIGKILL when the time is up. Sidecars' hooks run at once, but their SIGTERM waits until the
//! app containers have stopped and then comes in reverse order (each sidecar once those after
//! it have stopped), as at a pod's deletion. What the pod's state shows afterwards is the pod
//! worker's.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler};
use tokio::time::Instant;

use super::hooks::{self, HookTarget};
use super::runtime::{process_alive, Runtime, StopSignal};

/// How often a stop looks whether the processes it waits for have ended.
const POLL: Duration = Duration::from_millis(50);

/// A running container to stop.
pub(super) struct Stopping {
    pub name: String,
    pub pid: u32,
    pub start_ticks: u64,
    /// A native sidecar: its SIGTERM waits for the app containers and later sidecars.
    pub sidecar: bool,
    /// Its preStop hook, unless it ran already (a deletion under way began it).
    pub pre_stop: Option<PreStop>,
}

/// A preStop hook and where it runs.
pub(super) struct PreStop {
    pub handler: LifecycleHandler,
    pub spec: Container,
    pub target: HookTarget,
}

/// How a stop went for one container.
#[derive(Debug)]
pub(super) struct Stopped {
    pub pid: u32,
    /// It outlasted the grace period: SIGKILL ended it.
    pub killed: bool,
    /// Its preStop hook failed: the kubelet's message.
    pub hook_failure: Option<String>,
}

/// Stops `containers` within `grace`, and answers once each has ended or been killed.
pub(super) async fn stop(
    runtime: &dyn Runtime,
    containers: &[Stopping],
    grace: Duration,
) -> Vec<Stopped> {
    let deadline = Instant::now() + grace;
    let alive = |c: &Stopping| process_alive(c.pid, c.start_ticks);
    let each = containers.iter().enumerate().map(|(i, c)| async move {
        let hook_failure = match &c.pre_stop {
            Some(p) => {
                let run = hooks::run(&p.handler, &p.spec, &p.target);
                // Out of time is no failure: the container is stopped all the same.
                tokio::time::timeout_at(deadline, run).await.ok().and_then(Result::err)
            }
            None => None,
        };
        // A sidecar's turn: once the app containers and the sidecars after it have ended.
        let before = |(j, other): &(usize, &Stopping)| !other.sidecar || *j > i;
        let waited: Vec<&Stopping> = match c.sidecar {
            true => containers.iter().enumerate().filter(before).map(|(_, o)| o).collect(),
            false => Vec::new(),
        };
        while Instant::now() < deadline && waited.iter().any(|o| alive(o)) {
            tokio::time::sleep(POLL).await;
        }
        if Instant::now() < deadline {
            runtime.signal(c.pid, StopSignal::Term);
        }
        hook_failure
    });
    let failures = futures::future::join_all(each).await;
    while Instant::now() < deadline && containers.iter().any(alive) {
        tokio::time::sleep(POLL).await;
    }
    containers
        .iter()
        .zip(failures)
        .map(|(c, hook_failure)| {
            let killed = alive(c);
            if killed {
                runtime.signal(c.pid, StopSignal::Kill);
            }
            Stopped { pid: c.pid, killed, hook_failure }
        })
        .collect()
}
