//! `volhealth-agent`: the node agent alone, built as its own small binary for the DaemonSet.
//!
//! It takes exactly the flags of `volhealth agent`. A process started from the multi-call
//! `volhealth` binary maps much more of that binary's code than the agent runs, and the agent runs
//! on every node, so its image carries only what it needs.

use std::process::ExitCode;
use volhealth_sidecar_cli::{agent, runtime, single};

fn main() -> ExitCode {
    single::main(
        "volhealth-agent",
        "The node-side agent that writes pod.status.volumeHealth and csinode.status.storageHealth",
        "agent",
        runtime::Threads::One,
        agent::run,
    )
}
