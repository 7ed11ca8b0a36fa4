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
    /// Answer NodeGetVolumeHealth and NodeGetStorageHealth from the node's own signals (mount
    /// table, statfs, kernel log, sysfs) for a driver that has neither the RPC nor the legacy
    /// condition (auto), or never (off). See docs/node-faults.md for what it must see.
    #[arg(long, value_enum, default_value = "auto", value_name = "auto|off")]
    pub detect_node_faults: DetectMode,
    /// How long a statfs of a mounted volume may take before it counts as unresponsive.
    #[arg(long, default_value = "5s")]
    pub probe_timeout: String,
    /// How long a volume stays degraded after the kernel's last I/O error line for it.
    #[arg(long, default_value = "10m")]
    pub io_error_window: String,
    /// Log verbosity and format.
    #[command(flatten)]
    pub log: crate::cmd::logging::LogArgs,
}

/// `--detect-node-faults` of the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DetectMode {
    /// For a driver with neither the node health RPCs nor the legacy condition.
    Auto,
    /// Never.
    Off,
}

/// Runs the proxy until SIGINT or SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let timeout = duration::parse(&args.timeout).context("--timeout")?;
    anyhow::ensure!(!timeout.is_zero(), "--timeout must be greater than zero");
    let node_faults = match args.detect_node_faults {
        DetectMode::Off => None,
        DetectMode::Auto => {
            let probe_timeout = duration::parse(&args.probe_timeout).context("--probe-timeout")?;
            let io_error_window =
                duration::parse(&args.io_error_window).context("--io-error-window")?;
            anyhow::ensure!(
                !probe_timeout.is_zero() && !io_error_window.is_zero(),
                "--probe-timeout and --io-error-window must be greater than zero"
            );
            Some(std::sync::Arc::new(volhealth_node_faults::Detector::start(
                volhealth_node_faults::DetectorConfig {
                    probe_timeout,
                    io_error_window,
                    ..Default::default()
                },
                std::sync::Arc::new(volhealth_node_faults::NodeFaultMetrics::unregistered()),
            )))
        }
    };
    let config = volhealth_health_proxy::ProxyConfig {
        csi_address: args.csi_address.clone(),
        listen: args.listen.clone(),
        state_dir: args.state_dir.clone(),
        timeout,
        legacy: args.legacy.enabled(),
        rules: args.legacy.rules()?,
        debounce: args.legacy.legacy_debounce,
        node_faults,
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
