//! `volhealth monitor` (not built yet).

use std::process::ExitCode;

/// Flags of `volhealth monitor`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `volhealth monitor`.
pub async fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`volhealth monitor` is not available in this build yet")
}
