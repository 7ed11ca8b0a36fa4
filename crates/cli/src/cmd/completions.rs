//! `volhealth completions SHELL`: shell completion scripts generated from the clap definitions.

use std::io::Write as _;
use std::process::ExitCode;

/// Flags of `volhealth completions`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell to complete for, e.g. `volhealth completions bash > /etc/bash_completion.d/volhealth`.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Writes the completion script for `args.shell` to stdout.
pub fn run(args: Args, mut command: clap::Command) -> anyhow::Result<ExitCode> {
    let name = command.get_name().to_string();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, name, &mut script);
    match std::io::stdout().write_all(&script) {
        // A reader that stops early (`| head`) is not an error of ours.
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::Error::new(e).context("writing the completion script"))
        }
        _ => Ok(ExitCode::SUCCESS),
    }
}
