//! `volhealth-agent`: the node agent alone, built as its own small binary for the DaemonSet.
//!
//! It takes exactly the flags of `volhealth agent`. A process started from the multi-call
//! `volhealth` binary maps much more of that binary's code than the agent runs, and the agent runs
//! on every node, so its image carries only what it needs.

use clap::Parser;
use std::process::ExitCode;
use volhealth_sidecar_cli::{agent, go_flags, runtime, single};

/// The node-side agent that writes pod.status.volumeHealth and csinode.status.storageHealth.
#[derive(Debug, Parser)]
#[command(name = "volhealth-agent", version = volhealth_daemon::build_info::VERSION, about, long_about = None, args_override_self = true)]
struct Cli {
    #[command(flatten)]
    args: agent::Args,
}

fn main() -> ExitCode {
    // Flags as Go's flag package takes them (`-v=5`, `-csi-address=…`), as the Go sidecar did.
    let Cli { args } = Cli::parse_from(go_flags::normalize(std::env::args_os(), 1));
    let log = args.log.clone();
    single::main_of(
        "volhealth-agent",
        "agent",
        &log,
        runtime::Threads::One,
        agent::run(args),
    )
}
