//! `volhealth health-proxy`: a CSI endpoint in front of any driver that serves the v1.13 health
//! RPCs from the legacy VOLUME_CONDITION shape and forwards every other call unchanged.

use crate::cmd::legacy_flags::LegacyArgs;
use anyhow::Context as _;
use std::path::PathBuf;
use std::process::ExitCode;
use volhealth_daemon::duration;

/// Flags of `volhealth health-proxy`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The driver's CSI endpoint, e.g. unix:///csi/csi.sock.
    #[arg(long)]
    pub csi_address: String,
    /// The endpoint to serve, e.g. unix:///csi/health.sock; point the consumers (kubelet
    /// registration, sidecars) at it instead of the driver's.
    #[arg(long)]
    pub listen: String,
    /// Where the staging and publish paths learned from forwarded calls are kept across
    /// restarts (default: memory only).
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// Deadline of the proxy's own calls to the driver.
    #[arg(long, default_value = "15s")]
    pub timeout: String,
    /// How legacy conditions are read and mapped.
    #[command(flatten)]
    pub legacy: LegacyArgs,
    /// Log verbosity and format.
    #[command(flatten)]
    pub log: crate::cmd::logging::LogArgs,
}

/// Runs the proxy until SIGINT or SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let timeout = duration::parse(&args.timeout).context("--timeout")?;
    anyhow::ensure!(!timeout.is_zero(), "--timeout must be greater than zero");
    let config = volhealth_health_proxy::ProxyConfig {
        csi_address: args.csi_address.clone(),
        listen: args.listen.clone(),
        state_dir: args.state_dir.clone(),
        timeout,
        legacy: args.legacy.enabled(),
        rules: args.legacy.rules()?,
        debounce: args.legacy.legacy_debounce,
    };
    volhealth_daemon::in_progress::name_run_loop(format!(
        "the health proxy in front of {}",
        args.csi_address
    ));
    volhealth_health_proxy::run(
        config,
        volhealth_daemon::shutdown_signal::sigint_or_sigterm(),
    )
    .await
    .context("volhealth health-proxy")?;
    Ok(ExitCode::SUCCESS)
}
