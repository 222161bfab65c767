//! The `kplane` binary: a thin command line over the daemon.

mod api;
mod config;
mod daemon;
mod error;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::{Overrides, Settings};

#[derive(Parser)]
#[command(name = "kplane", version, about = "A Kubernetes-compatible control plane on actors")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the API server, store, watch hub and (later) controllers in one process.
    Server(ServerArgs),
    /// Prints the version and the Kubernetes API version served.
    Version,
}

#[derive(clap::Args)]
struct ServerArgs {
    /// TOML configuration file; without it the built-in defaults apply.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Where the store keeps its data (default ./data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Port of the unauthenticated HTTP listener (default 8080).
    #[arg(long)]
    insecure_port: Option<u16>,
    /// Address of the unauthenticated listener (default 127.0.0.1).
    #[arg(long)]
    insecure_bind_address: Option<String>,
    /// Port of the TLS listener (default 6443; accepted, not served yet).
    #[arg(long)]
    secure_port: Option<u16>,
    /// Address of the TLS listener (default 0.0.0.0; accepted, not served yet).
    #[arg(long)]
    bind_address: Option<String>,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::Version => {
            println!(
                "kplane {} (Kubernetes API v1.{})",
                env!("CARGO_PKG_VERSION"),
                api::KUBERNETES_MINOR
            );
            ExitCode::SUCCESS
        }
        Command::Server(args) => server(args),
    }
}

fn server(args: ServerArgs) -> ExitCode {
    let overrides = Overrides {
        config: args.config,
        data_dir: args.data_dir,
        insecure_port: args.insecure_port,
        insecure_bind_address: args.insecure_bind_address,
        secure_port: args.secure_port,
        bind_address: args.bind_address,
    };
    let settings = match Settings::load(&overrides) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(&settings.log_level));
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).init();
    let system = actix::System::new();
    let outcome = system.block_on(async {
        let running = daemon::start(&settings).await?;
        let addr = running.insecure_addr;
        running.serve().await.map_err(|source| daemon::StartError::Bind { addr, source })
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// Start-up failures: one line naming the key or port, exit code 2, no backtrace.
fn fail(error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("kplane: {error}");
    ExitCode::from(2)
}
