//! `kplane image pause` (and `agnhost pause`): holds a pod open doing nothing until SIGTERM or
//! SIGINT, then exits 0, like Kubernetes' pause container.

use tokio::signal::unix::{signal, SignalKind};

use super::ImageError;

/// Blocks the calling thread until SIGTERM or SIGINT arrives.
///
/// Handlers (rather than blocking the signals and `sigwait`ing) make readiness visible: once
/// both signals show as caught in `/proc/<pid>/status` (`SigCgt`), a SIGTERM ends pause cleanly.
pub(crate) fn run() -> Result<(), ImageError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(ImageError::Signals)?;
    runtime.block_on(async {
        let mut term = signal(SignalKind::terminate()).map_err(ImageError::Signals)?;
        let mut int = signal(SignalKind::interrupt()).map_err(ImageError::Signals)?;
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        Ok(())
    })
}
