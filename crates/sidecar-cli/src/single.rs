//! The `main` of each single-component binary (`volhealth-agent`, `volhealth-monitor`): the same
//! flags, logging, runtime and exit codes as the component's subcommand of `volhealth`.

use crate::logging::{self, LogArgs};
use crate::runtime::{self, Threads};
use std::future::Future;
use std::process::ExitCode;

/// Sets up logging and the build-info component, runs `run` on a runtime of `threads`, and maps
/// an error to exit status 1 with one line on stderr.
pub fn main_of(
    program: &str,
    component: &'static str,
    log: &LogArgs,
    threads: Threads,
    run: impl Future<Output = anyhow::Result<ExitCode>>,
) -> ExitCode {
    logging::init(log);
    volhealth_daemon::build_info::set_component(component);
    volhealth_daemon::fd_limit::raise_to_hard();
    match runtime::block_on_with(threads, run) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("{program}: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
