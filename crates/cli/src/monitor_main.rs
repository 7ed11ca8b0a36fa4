//! `volhealth-monitor`: the controller-side monitor alone, built as its own small binary for the
//! sidecar next to a CSI controller. It takes exactly the flags of `volhealth monitor`; see
//! `agent_main.rs` for why the sidecars get binaries of their own.

use std::process::ExitCode;
use volhealth_sidecar_cli::{monitor, runtime, single};

fn main() -> ExitCode {
    single::main(
        "volhealth-monitor",
        "The controller-side monitor that writes pvc.status.healthStatus",
        "monitor",
        runtime::MONITOR_THREADS,
        monitor::run,
    )
}
