//! The `main` of each single-component binary (`volhealth-agent`, `volhealth-monitor`): the same
//! flags, logging, runtime and exit codes as the component's subcommand of `volhealth`.

use crate::go_flags;
use crate::logging::{self, LogArgs};
use crate::runtime::{self, Threads};
use std::future::Future;
use std::process::ExitCode;

/// The flags of a component that has a binary of its own.
pub trait ComponentArgs: clap::Args + clap::FromArgMatches {
    /// Its log flags.
    fn log(&self) -> &LogArgs;
}

impl ComponentArgs for crate::agent::Args {
    fn log(&self) -> &LogArgs {
        &self.log
    }
}

impl ComponentArgs for crate::monitor::Args {
    fn log(&self) -> &LogArgs {
        &self.log
    }
}

/// The whole `main` of the binary `program` (described by `about` in its help): reads the
/// process's arguments as Go's flag package takes them (`-v=5`, `-csi-address=…`, as the Go
/// sidecars did; the last of a repeated flag wins), then runs `run` as [`main_of`] does. A
/// command line it cannot take is a usage error (exit status 2), as clap reports it.
pub fn main<A, F>(
    program: &'static str,
    about: &'static str,
    component: &'static str,
    threads: Threads,
    run: impl FnOnce(A) -> F,
) -> ExitCode
where
    A: ComponentArgs,
    F: Future<Output = anyhow::Result<ExitCode>>,
{
    let mut command = A::augment_args(clap::Command::new(program))
        .version(volhealth_daemon::build_info::VERSION)
        .about(about)
        .long_about(None)
        .args_override_self(true);
    let matches = command
        .clone()
        .get_matches_from(go_flags::normalize(std::env::args_os(), 1));
    let args = A::from_arg_matches(&matches).unwrap_or_else(|e| e.format(&mut command).exit());
    let log = args.log().clone();
    main_of(program, component, &log, threads, run(args))
}

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
