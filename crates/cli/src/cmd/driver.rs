//! `volhealth driver`: the reference CSI driver (hostpath-style, real health detection).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use volhealth_driver::{BackendKind, DriverConfig, HealthCapabilities, Mode};

/// Flags of `volhealth driver`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// CSI endpoint to serve, e.g. unix:///run/csi/csi.sock.
    #[arg(long)]
    endpoint: String,
    /// Directory holding volumes, the driver's records and injections.
    #[arg(long)]
    state_dir: PathBuf,
    /// Node id returned by NodeGetInfo.
    #[arg(long)]
    node_id: String,
    /// CSI driver name.
    #[arg(long, default_value = volhealth_driver::config::DEFAULT_DRIVER_NAME)]
    driver_name: String,
    /// Which services to serve besides Identity.
    #[arg(long, value_enum, default_value = "all")]
    mode: Mode,
    /// How new volumes are stored: directories, or sparse ext4 images.
    #[arg(long, value_enum, default_value = "dir")]
    volume_backend: BackendKind,
    /// Health capabilities to advertise: any of list,get,node-volume,node-storage (or none).
    #[arg(long, default_value = "list,get,node-volume,node-storage")]
    health_capabilities: String,
    /// Also serve the kubelet plugin-registration API as <DIR>/<driver-name>-reg.sock.
    #[arg(long)]
    registration_dir: Option<PathBuf>,
    /// Milliseconds between refreshes of the controller's health view.
    #[arg(long, default_value_t = 1000)]
    refresh_interval_ms: u64,
    /// Deadline of a node I/O probe in milliseconds; past it the volume is Inaccessible.
    #[arg(long, default_value_t = 2000)]
    io_probe_timeout_ms: u64,
    /// A node I/O probe slower than this many milliseconds makes the volume Degraded.
    #[arg(long, default_value_t = 500)]
    io_probe_slow_ms: u64,
    /// Report StorageDegraded LowFreeSpace when less than this share of the backing filesystem is
    /// free (0 turns the check off, e.g. for benchmarks on a nearly full disk).
    #[arg(long, default_value_t = 0.10)]
    low_space_fraction: f64,
    /// Never mount: stage and publish with symlinks, as on a machine without mount privilege.
    #[arg(long)]
    no_mounts: bool,
    /// Refuse ControllerListVolumeHealth and ControllerGetVolumeHealth with UNAUTHENTICATED unless
    /// the request's secrets hold KEY with VALUE (tests a consumer's secret plumbing).
    #[arg(long, value_name = "KEY=VALUE")]
    require_secret: Option<volhealth_driver::required_secret::RequiredSecret>,
    /// Log verbosity and format.
    #[command(flatten)]
    pub log: crate::cmd::logging::LogArgs,
}

/// Runs `volhealth driver` until SIGINT or SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut config = DriverConfig::new(args.endpoint, args.state_dir, args.node_id);
    config.driver_name = args.driver_name;
    config.mode = args.mode;
    config.backend = args.volume_backend;
    config.health = HealthCapabilities::parse(&args.health_capabilities)?;
    config.registration_dir = args.registration_dir;
    config.refresh_interval = Duration::from_millis(args.refresh_interval_ms.max(10));
    config.io_probe_timeout = Duration::from_millis(args.io_probe_timeout_ms.max(1));
    config.io_probe_slow = Duration::from_millis(args.io_probe_slow_ms);
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.low_space_fraction),
        "--low-space-fraction must be within [0, 1], got {}",
        args.low_space_fraction
    );
    config.low_space_fraction = args.low_space_fraction;
    config.allow_mounts = !args.no_mounts;
    config.require_secret = args.require_secret;
    volhealth_driver::run(
        config,
        volhealth_daemon::shutdown_signal::sigint_or_sigterm(),
    )
    .await?;
    Ok(ExitCode::SUCCESS)
}
