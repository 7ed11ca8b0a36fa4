//! One module per subcommand. Each exposes `Args` (clap) and `async fn run(Args)`.

pub mod apiserver;
pub mod bench;
pub mod cluster_controllers;
pub mod completions;
pub mod conformance;
pub mod driver;
pub mod health_proxy;
pub mod inject;
pub mod kubectl_plugin;
pub mod man;
pub mod remediate;
pub mod scheduler_extender;
pub mod status;
pub mod up;

// The sidecars' command lines, shared with the `volhealth-agent` and `volhealth-monitor` binaries.
pub use volhealth_sidecar_cli::runtime::{MONITOR_THREADS, Threads, block_on, block_on_with};
pub use volhealth_sidecar_cli::{agent, go_flags, legacy_flags, logging, monitor};

/// Sets up `tracing` on stderr from the log flags (see [`logging`]) and `RUST_LOG`.
pub fn init_logging(args: &logging::LogArgs) {
    logging::init(args);
}
