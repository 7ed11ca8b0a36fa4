//! `volhealth agent`: the node-side writer of pod.status.volumeHealth and csinode.status.storageHealth.

use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;
use volhealth_agent::{AgentConfig, config};
use volhealth_daemon::{duration, http_endpoint, shutdown_signal};

/// Flags of `volhealth agent`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// --upstream-event-reasons.
    #[command(flatten)]
    pub upstream_events: crate::upstream_events::UpstreamEvents,
    /// The node this agent acts for; its credentials must be this node's (system:node:NODE).
    #[arg(long, env = "NODE_NAME")]
    pub node_name: String,
    /// Kubeconfig file (default: KUBECONFIG, else in-cluster, else ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The kubelet's root directory, read to learn which volumes were staged or published.
    #[arg(long, default_value = config::DEFAULT_KUBELET_ROOT_DIR)]
    pub kubelet_root_dir: PathBuf,
    /// A CSI driver as NAME=unix:///PATH (repeatable); without it, drivers are found through
    /// <kubelet-root-dir>/plugins_registry.
    #[arg(long = "csi-driver", value_name = "NAME=ENDPOINT")]
    pub csi_driver: Vec<String>,
    /// Probe interval (e.g. 90s, 1m, 1m30s).
    #[arg(long, default_value = "1m")]
    pub interval: String,
    /// Timeout of each CSI call.
    #[arg(long, default_value = "15s")]
    pub timeout: String,
    /// Where to serve /metrics, /healthz and /readyz: :PORT or HOST:PORT.
    #[arg(long, default_value = ":8081")]
    pub http_endpoint: String,
    /// Older name of --http-endpoint, accepted as the upstream sidecars accept it.
    #[arg(long, value_name = "ADDR", conflicts_with = "http_endpoint")]
    pub metrics_address: Option<String>,
    /// Path of the metrics page on the HTTP endpoint.
    #[arg(long, default_value = volhealth_daemon::endpoint_server::DEFAULT_METRICS_PATH)]
    pub metrics_path: String,
    /// Node fault detection (mount table, statfs probes, kernel log, sysfs) for the volumes of
    /// drivers without node health: auto (only where the driver lacks NodeGetVolumeHealth or
    /// NodeGetStorageHealth), always (beside the driver's own answer too) or off.
    #[arg(long, default_value = "auto", value_parser = ["auto", "always", "off"])]
    pub detect_node_faults: String,
    /// How long a statfs of a mounted volume may take before it is reported MountUnresponsive.
    #[arg(long, default_value = "5s")]
    pub probe_timeout: String,
    /// How long a volume stays degraded after the kernel's last I/O error line for it.
    #[arg(long, default_value = "10m")]
    pub io_error_window: String,
    /// The host's mount table for node fault detection: files in mountinfo format, the first
    /// readable one is used. /proc/1/mountinfo is the host's only with hostPID; a container
    /// without it can be given the host's as a read-only file mounted elsewhere.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "PATH,...",
        default_value = "/proc/1/mountinfo,/proc/self/mountinfo"
    )]
    pub mountinfo: Vec<PathBuf>,
    /// Feature gates, e.g. CSIVolumeHealth=false.
    #[arg(long, default_value = "")]
    pub feature_gates: String,
    /// Drivers that speak only the legacy VOLUME_CONDITION shape.
    #[command(flatten)]
    pub legacy: crate::legacy_flags::LegacyArgs,
    /// Log verbosity and format.
    #[command(flatten)]
    pub log: crate::logging::LogArgs,
}

/// Turns the flags into the library's configuration.
pub fn config_from(args: &Args) -> anyhow::Result<AgentConfig> {
    let mut cfg = AgentConfig::new(args.node_name.clone());
    cfg.kubeconfig = args.kubeconfig.clone();
    cfg.kubelet_root_dir = args.kubelet_root_dir.clone();
    cfg.drivers = args
        .csi_driver
        .iter()
        .map(|d| config::parse_driver(d))
        .collect::<Result<_, _>>()?;
    cfg.interval = duration::parse(&args.interval).context("--interval")?;
    cfg.timeout = duration::parse(&args.timeout).context("--timeout")?;
    anyhow::ensure!(
        !cfg.interval.is_zero(),
        "--interval must be greater than zero"
    );
    anyhow::ensure!(
        !cfg.timeout.is_zero(),
        "--timeout must be greater than zero"
    );
    cfg.node_faults = args.detect_node_faults.parse()?;
    cfg.probe_timeout = duration::parse(&args.probe_timeout).context("--probe-timeout")?;
    cfg.io_error_window = duration::parse(&args.io_error_window).context("--io-error-window")?;
    anyhow::ensure!(
        !cfg.probe_timeout.is_zero() && !cfg.io_error_window.is_zero(),
        "--probe-timeout and --io-error-window must be greater than zero"
    );
    anyhow::ensure!(
        args.mountinfo.iter().all(|p| p.is_absolute()),
        "--mountinfo takes absolute paths"
    );
    cfg.mountinfo = args.mountinfo.clone();
    cfg.http_endpoint = Some(match &args.metrics_address {
        Some(addr) => http_endpoint::parse(addr).context("--metrics-address")?,
        None => http_endpoint::parse(&args.http_endpoint)?,
    });
    crate::runtime::set_metrics_path(&args.metrics_path)?;
    cfg.volume_health_enabled = config::parse_feature_gates(&args.feature_gates)?;
    cfg.legacy = config::Legacy {
        enabled: args.legacy.enabled(),
        rules: args.legacy.rules()?,
        debounce: args.legacy.legacy_debounce,
    };
    anyhow::ensure!(!cfg.node_name.is_empty(), "--node-name is empty");
    Ok(cfg)
}

/// Runs `volhealth agent` until SIGINT or SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    args.upstream_events.apply();
    let cfg = config_from(&args)?;
    volhealth_daemon::in_progress::name_run_loop(format!(
        "the node agent of node {}",
        cfg.node_name
    ));
    volhealth_agent::run(cfg, shutdown_signal::sigint_or_sigterm()).await?;
    Ok(ExitCode::SUCCESS)
}
