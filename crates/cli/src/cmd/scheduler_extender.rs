//! `volhealth scheduler-extender`: KEP-1432's CSIStorageHealth filter as a kube-scheduler extender.

use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;
use volhealth_daemon::{http_endpoint, shutdown_signal};

/// Flags of `volhealth scheduler-extender`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kubeconfig file (default: KUBECONFIG, else in-cluster, else ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Where to serve POST /filter, /metrics, /healthz and /readyz: :PORT or HOST:PORT.
    #[arg(long, default_value = ":8888")]
    pub listen: String,
    /// Log verbosity and format.
    #[command(flatten)]
    pub log: crate::cmd::logging::LogArgs,
}

/// Runs the extender until SIGINT or SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let addr = http_endpoint::parse(&args.listen).context("--listen")?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("listening on {addr}"))?;
    volhealth_daemon::in_progress::name_run_loop(format!("the scheduler extender on {addr}"));
    let config = volhealth_scheduler::ExtenderConfig {
        kubeconfig: args.kubeconfig,
    };
    volhealth_scheduler::run(config, listener, shutdown_signal::sigint_or_sigterm())
        .await
        .context("volhealth scheduler-extender")?;
    Ok(ExitCode::SUCCESS)
}
