//! `volhealth inject` (not built yet).

use std::process::ExitCode;

/// Flags of `volhealth inject`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `volhealth inject`.
pub async fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`volhealth inject` is not available in this build yet")
}
