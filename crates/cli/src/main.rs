//! `volhealth`: one multi-call binary for every volhealth component.
//!
//! Each subcommand lives in its own module under `cmd/`; the libraries in `crates/*` hold the
//! logic, this binary only parses flags, sets up logging and maps errors to exit codes.

mod cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Kubernetes volume health monitoring (KEP-1432), out of tree.
#[derive(Debug, Parser)]
#[command(name = "volhealth", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the embedded Kubernetes API server (v1.37 subset, persisted in SQLite).
    Apiserver(cmd::apiserver::Args),
    /// Run the reference CSI driver (hostpath-style, real health detection).
    Driver(cmd::driver::Args),
    /// Inject or clear health conditions and RPC faults in a running reference driver.
    Inject(cmd::inject::Args),
    /// Run the controller-side monitor that writes pvc.status.healthStatus.
    Monitor(cmd::monitor::Args),
    /// Run the node-side agent that writes pod.status.volumeHealth and csinode.status.storageHealth.
    Agent(cmd::agent::Args),
    /// Start the whole system on this machine: API server, driver, monitor, agents, sample workload.
    Up(cmd::up::Args),
    /// Show every volume and storage health condition in the cluster.
    Status(cmd::status::Args),
    /// Check any CSI driver's health RPCs against CSI v1.13.0 and KEP-1432.
    Conformance(cmd::conformance::Args),
}

fn main() -> ExitCode {
    // Installed as `kubectl-volhealth`, the binary is the kubectl plugin for `status`.
    let cli = Cli::parse_from(cmd::status::plugin_argv(std::env::args_os()));
    // `status` speaks for itself on stderr; client-library logs would only repeat its errors.
    if !matches!(cli.command, Command::Status(_)) {
        cmd::init_logging();
    }
    let result = match cli.command {
        Command::Apiserver(a) => cmd::block_on(cmd::apiserver::run(a)),
        Command::Driver(a) => cmd::block_on(cmd::driver::run(a)),
        Command::Inject(a) => cmd::block_on(cmd::inject::run(a)),
        Command::Monitor(a) => cmd::block_on(cmd::monitor::run(a)),
        Command::Agent(a) => cmd::block_on(cmd::agent::run(a)),
        Command::Up(a) => cmd::block_on(cmd::up::run(a)),
        Command::Status(a) => cmd::block_on(cmd::status::run(a)),
        Command::Conformance(a) => cmd::block_on(cmd::conformance::run(a)),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("volhealth: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
