//! `volhealth-monitor`: the controller-side monitor alone, built as its own small binary for the
//! sidecar next to a CSI controller. It takes exactly the flags of `volhealth monitor`; see
//! `agent_main.rs` for why the sidecars get binaries of their own.

use clap::Parser;
use std::process::ExitCode;

#[path = "cmd/logging.rs"]
mod logging;
#[path = "cmd/monitor.rs"]
mod monitor;
// Shared with the multi-call binary, which uses more of it than this one does.
#[allow(dead_code)]
#[path = "runtime.rs"]
mod runtime;
#[path = "single.rs"]
mod single;

/// The paths the monitor's command module names, as the multi-call binary has them.
mod cmd {
    pub(crate) use super::logging;
    pub(crate) use super::runtime::set_metrics_path;
}

/// The controller-side monitor that writes pvc.status.healthStatus.
#[derive(Debug, Parser)]
#[command(name = "volhealth-monitor", version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    args: monitor::Args,
}

fn main() -> ExitCode {
    let Cli { args } = Cli::parse();
    let log = args.log.clone();
    single::main_of(
        "volhealth-monitor",
        "monitor",
        &log,
        runtime::MONITOR_THREADS,
        monitor::run(args),
    )
}
