//! One module per subcommand. Each exposes `Args` (clap) and `async fn run(Args)`.

pub mod agent;
pub mod apiserver;
pub mod bench;
pub mod cluster_controllers;
pub mod completions;
pub mod conformance;
pub mod driver;
pub mod inject;
pub mod kubectl_plugin;
pub mod logging;
pub mod man;
pub mod monitor;
pub mod remediate;
pub mod scheduler_extender;
pub mod status;
pub mod up;

use std::future::Future;
use std::process::ExitCode;

/// Sets up `tracing` on stderr from the log flags (see [`logging`]) and `RUST_LOG`.
pub fn init_logging(args: &logging::LogArgs) {
    logging::init(args);
}

/// `--metrics-path`: where the HTTP endpoint serves the metrics page, for the whole process.
pub fn set_metrics_path(path: &str) -> anyhow::Result<()> {
    volhealth_daemon::endpoint_server::set_metrics_path(path)
        .map_err(|reason| anyhow::anyhow!("invalid --metrics-path {path:?}: {reason}"))
}

/// Runs a subcommand on a multi-threaded tokio runtime.
pub fn block_on<F>(fut: F) -> anyhow::Result<ExitCode>
where
    F: Future<Output = anyhow::Result<ExitCode>>,
{
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("starting the async runtime: {e}"))?;
    rt.block_on(fut)
}
