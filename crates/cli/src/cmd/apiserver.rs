//! `volhealth apiserver` (not built yet).

use std::process::ExitCode;

/// Flags of `volhealth apiserver`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs `volhealth apiserver`.
pub async fn run(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`volhealth apiserver` is not available in this build yet")
}
