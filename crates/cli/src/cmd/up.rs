//! `volhealth up`: the whole system on this machine.

pub mod duration;

use std::process::ExitCode;

/// Flags of `volhealth up`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `volhealth up`.
pub async fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`volhealth up` is not available in this build yet")
}
