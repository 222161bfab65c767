//! Built-in container images and the resource-limit launcher: what the node agent runs when a
//! container names a kplane image instead of a command. Both are hidden `kplane` subcommands.
//!
//! # Layout
//! - `pod.rs`: what every image reads from its environment (pod name, pod IP).
//! - `pause.rs`: `kplane image pause`, sleeps until SIGTERM or SIGINT.
//! - `agnhost/`: `kplane image agnhost <subcommand>`, a subset of Kubernetes' agnhost test image
//!   with its subcommand and flag names.
//! - `exec_limited.rs`: `kplane exec-limited`, lowers rlimits then becomes the container's program.
//! - `first_process.rs`: `kplane exec-limited --exit-file`, stays the container's first process
//!   and notes how its program ended.
//! - `log_writer.rs`: `kplane log-writer`, writes a container's output to its log, line by line
//!   with times.
//!
//! Exit codes: 0 after SIGTERM/SIGINT (or what `/exit` asked for), 1 when an image cannot run
//! (busy port, bad `POD_IP`), 2 for bad flags.

mod agnhost;
mod exec_limited;
mod first_process;
mod log_writer;
mod pause;
mod pod;

use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;

pub use exec_limited::{exec_limited, ExecLimitedArgs};
pub use log_writer::{log_writer, LogWriterArgs};

/// `kplane image <name>`: runs a built-in image in the foreground.
#[derive(clap::Args, Debug)]
pub struct ImageArgs {
    #[command(subcommand)]
    image: Image,
}

#[derive(clap::Subcommand, Debug)]
enum Image {
    /// Sleeps until SIGTERM or SIGINT, then exits 0 (the pause container).
    Pause {
        /// Ignored, as the pause image ignores its arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
        ignored: Vec<String>,
    },
    /// Kubernetes' agnhost test image: serve-hostname, netexec, liveness, pause.
    Agnhost(agnhost::AgnhostArgs),
}

/// Why an image could not run (or stopped running).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ImageError {
    #[error("POD_IP={value:?} is not an IP address")]
    PodIp { value: String },
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: io::Error },
    #[error("cannot handle SIGTERM/SIGINT: {0}")]
    Signals(#[source] io::Error),
    #[error("cannot build the HTTP client: {0}")]
    HttpClient(#[from] reqwest::Error),
    /// Flags that parse but do not make sense together.
    #[error("{0}")]
    Usage(&'static str),
}

/// Runs the image named by `args` until it is told to stop; returns the process exit code.
pub fn run(args: ImageArgs) -> ExitCode {
    let outcome = match args.image {
        Image::Pause { .. } => pause::run().map(|()| 0),
        Image::Agnhost(args) => agnhost::run(args),
    };
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("kplane image: {e}");
            ExitCode::from(if matches!(e, ImageError::Usage(_)) { 2 } else { 1 })
        }
    }
}
