//! `kplane image agnhost <subcommand>`: the part of Kubernetes' agnhost test image that kplane
//! serves itself, with agnhost's subcommand and flag names (`--flag=value`, bare `--flag` for
//! booleans), so pod specs written for `registry.k8s.io/e2e-test-images/agnhost` run unchanged.
//!
//! Every server binds the pod's `POD_IP` (else 0.0.0.0) and exits 0 on SIGTERM or SIGINT, but
//! `liveness`, which ends as the signal ends the real one (143 or 130).
//!
//! # Layout
//! - `serve.rs`: lifecycle (signals, exit requests), HTTP listener start/stop, query parameters.
//! - `netexec.rs`, `serve_hostname.rs`, `liveness.rs`, `grpc_health_checking.rs`: one file per
//!   subcommand.

mod grpc_health_checking;
mod liveness;
mod netexec;
mod serve;
mod serve_hostname;

use std::future::Future;

use super::pod::PodEnv;
use super::ImageError;

/// `kplane image agnhost`: which agnhost subcommand to run.
#[derive(clap::Args, Debug)]
pub(crate) struct AgnhostArgs {
    #[command(subcommand)]
    command: Agnhost,
}

#[derive(clap::Subcommand, Debug)]
enum Agnhost {
    /// Serves the pod name over HTTP (default), raw TCP or UDP.
    ServeHostname(serve_hostname::Args),
    /// HTTP (and optionally UDP) server with echo, hostname, exit, dial... endpoints.
    Netexec(netexec::Args),
    /// HTTP server whose /healthz answers 200 for a while after start, then 500.
    Liveness(liveness::Args),
    /// gRPC health service answering SERVING, NOT_SERVING after a delay or when told to.
    GrpcHealthChecking(grpc_health_checking::Args),
    /// Sleeps until SIGTERM or SIGINT, then exits 0.
    Pause,
}

/// Runs the subcommand until it stops; returns the exit code.
pub(crate) fn run(args: AgnhostArgs) -> Result<u8, ImageError> {
    match args.command {
        Agnhost::ServeHostname(args) => serve(|pod| serve_hostname::run(args, pod)),
        Agnhost::Netexec(args) => serve(|pod| netexec::run(args, pod)),
        Agnhost::Liveness(args) => serve(|pod| liveness::run(args, pod)),
        Agnhost::GrpcHealthChecking(args) => serve(|pod| grpc_health_checking::run(args, pod)),
        Agnhost::Pause => super::pause::run().map(|()| 0),
    }
}

/// Runs a server on a fresh actix system, with the pod it serves.
fn serve<F>(server: impl FnOnce(PodEnv) -> F) -> Result<u8, ImageError>
where
    F: Future<Output = Result<u8, ImageError>>,
{
    let pod = PodEnv::from_env()?;
    actix_web::rt::System::new().block_on(server(pod))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: AgnhostArgs,
    }

    /// Parses `agnhost <argv>` the way the `kplane image agnhost` subcommand does.
    pub(super) fn parse(argv: &[&str]) -> Result<AgnhostArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("agnhost").chain(argv.iter().copied()))
            .map(|cli| cli.args)
    }

    #[test]
    fn unknown_subcommands_and_flags_are_usage_errors() {
        for argv in [&["nosuch"][..], &[], &["netexec", "--nosuch=1"], &["netexec", "extra"]] {
            let error = parse(argv).unwrap_err();
            assert!(error.use_stderr(), "{argv:?} must be an error, got {error}");
            assert_eq!(error.exit_code(), 2, "{argv:?}");
        }
    }

    #[test]
    fn pause_is_a_subcommand() {
        assert!(matches!(parse(&["pause"]).unwrap().command, Agnhost::Pause));
    }
}
