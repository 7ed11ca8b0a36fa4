//! One module per subcommand. Each exposes `Args` (clap) and `async fn run(Args)`.

pub mod agent;
pub mod apiserver;
pub mod conformance;
pub mod driver;
pub mod inject;
pub mod monitor;
pub mod status;
pub mod up;

use std::future::Future;
use std::process::ExitCode;

/// Sets up `tracing` with `RUST_LOG` (default `info`) on stderr.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
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
