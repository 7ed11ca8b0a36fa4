//! `volhealth status` (not built yet).

use std::process::ExitCode;

/// Flags of `volhealth status`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `volhealth status`.
pub async fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`volhealth status` is not available in this build yet")
}
