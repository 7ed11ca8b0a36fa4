//! `volhealth agent` (not built yet).

use std::process::ExitCode;

/// Flags of `volhealth agent`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `volhealth agent`.
pub async fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`volhealth agent` is not available in this build yet")
}
