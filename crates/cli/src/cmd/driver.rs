//! `volhealth driver` (not built yet).

use std::process::ExitCode;

/// Flags of `volhealth driver`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `volhealth driver`.
pub async fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`volhealth driver` is not available in this build yet")
}
