//! `volhealth-agent`: the node agent alone, built as its own small binary for the DaemonSet.
//!
//! It takes exactly the flags of `volhealth agent`. A process started from the multi-call
//! `volhealth` binary maps much more of that binary's code than the agent runs, and the agent runs
//! on every node, so its image carries only what it needs.

use clap::Parser;
use std::process::ExitCode;

#[path = "cmd/agent.rs"]
mod agent;
#[path = "cmd/logging.rs"]
mod logging;
// Shared with the multi-call binary, which uses more of it than this one does.
#[allow(dead_code)]
#[path = "runtime.rs"]
mod runtime;
#[path = "single.rs"]
mod single;

/// The paths the agent's command module names, as the multi-call binary has them.
mod cmd {
    pub(crate) use super::logging;
    pub(crate) use super::runtime::set_metrics_path;
}

/// The node-side agent that writes pod.status.volumeHealth and csinode.status.storageHealth.
#[derive(Debug, Parser)]
#[command(name = "volhealth-agent", version, about, long_about = None)]
struct Cli {
    #[command(flatten)]
    args: agent::Args,
}

fn main() -> ExitCode {
    let Cli { args } = Cli::parse();
    let log = args.log.clone();
    single::main_of(
        "volhealth-agent",
        "agent",
        &log,
        runtime::Threads::One,
        agent::run(args),
    )
}
