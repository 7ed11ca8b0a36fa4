//! `volhealth-monitor`: the controller-side monitor alone, built as its own small binary for the
//! sidecar next to a CSI controller. It takes exactly the flags of `volhealth monitor`; see
//! `agent_main.rs` for why the sidecars get binaries of their own.

use clap::Parser;
use std::process::ExitCode;
use volhealth_sidecar_cli::{go_flags, monitor, runtime, single};

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
