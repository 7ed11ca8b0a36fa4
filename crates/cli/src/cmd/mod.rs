//! One module per subcommand. Each exposes `Args` (clap) and `async fn run(Args)`.

pub mod agent;
pub mod apiserver;
pub mod bench;
pub mod cluster_controllers;
pub mod completions;
pub mod conformance;
pub mod driver;
pub mod go_flags;
pub mod health_proxy;
pub mod inject;
pub mod kube_json;
pub mod kubectl_plugin;
pub mod legacy_flags;
pub mod logging;
pub mod man;
pub mod monitor;
pub mod remediate;
pub mod scheduler_extender;
pub mod status;
pub mod up;

pub use runtime::{MONITOR_THREADS, Threads, block_on, block_on_with, set_metrics_path};

#[path = "../runtime.rs"]
mod runtime;

/// Sets up `tracing` on stderr from the log flags (see [`logging`]) and `RUST_LOG`.
pub fn init_logging(args: &logging::LogArgs) {
    logging::init(args);
}
