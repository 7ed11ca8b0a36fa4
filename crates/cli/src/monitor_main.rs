//! `volhealth-monitor`: the controller-side monitor alone, built as its own small binary for the
//! sidecar next to a CSI controller. It takes exactly the flags of `volhealth monitor`; see
//! `agent_main.rs` for why the sidecars get binaries of their own.

use clap::Parser;
use std::process::ExitCode;

#[path = "cmd/go_flags.rs"]
mod go_flags;
#[path = "cmd/kube_json.rs"]
mod kube_json;
#[path = "cmd/legacy_flags.rs"]
mod legacy_flags;
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
    pub(crate) use super::runtime::set_metrics_path;
    pub(crate) use super::{go_flags, kube_json, legacy_flags, logging};
}

/// The controller-side monitor that writes pvc.status.healthStatus.
#[derive(Debug, Parser)]
#[command(name = "volhealth-monitor", version = volhealth_daemon::build_info::VERSION, about, long_about = None, args_override_self = true)]
struct Cli {
    #[command(flatten)]
    args: monitor::Args,
}

fn main() -> ExitCode {
    // Flags as Go's flag package takes them (`-v=5`, `-csi-address=…`), as the Go sidecar did.
    let Cli { args } = Cli::parse_from(go_flags::normalize(std::env::args_os(), 1));
    let log = args.log.clone();
    single::main_of(
        "volhealth-monitor",
        "monitor",
        &log,
        runtime::MONITOR_THREADS,
        monitor::run(args),
    )
}
