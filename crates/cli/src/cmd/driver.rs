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
    /// Which health API the driver speaks: the CSI v1.13 health RPCs (new), the legacy
    /// VOLUME_CONDITION shape of CSI v1.3 to v1.12 (legacy), both, or none.
    #[arg(long, value_enum, default_value = "new")]
    health_api: HealthApi,
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
    /// Milliseconds a fast, successful node I/O probe of a volume stands for later health calls
    /// (0: write and sync on every call). Failed and slow probes are repeated on the next call.
    #[arg(long, default_value_t = 30_000)]
    io_probe_interval_ms: u64,
    /// Report StorageDegraded LowFreeSpace when less than this share of the backing filesystem is
    /// free (0 turns the check off, e.g. for benchmarks on a nearly full disk).
    #[arg(long, default_value_t = 0.10)]
    low_space_fraction: f64,
    /// Never mount: stage and publish with symlinks, as on a machine without mount privilege.
    #[arg(long)]
    no_mounts: bool,
    /// Refuse ControllerListVolumeHealth and ControllerGetVolumeHealth with UNAUTHENTICATED unless
    /// the request's secrets hold KEY with VALUE, read from this file (`KEY=VALUE`; a trailing
    /// newline is ignored) or from the environment variable VOLHEALTH_REQUIRE_SECRET. Tests a
    /// consumer's secret plumbing; the value is a credential, so no flag takes it directly.
    #[arg(long, value_name = "PATH")]
    require_secret_file: Option<PathBuf>,
    /// Log verbosity and format.
    #[command(flatten)]
    pub log: crate::cmd::logging::LogArgs,
}

/// `--health-api`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum HealthApi {
    /// The CSI v1.13 health RPCs, as `--health-capabilities` lists them.
    New,
    /// Only the legacy VOLUME_CONDITION shape (controller capability 11, node capability 4).
    Legacy,
    /// Both.
    Both,
    /// Neither: a driver that reports no health at all.
    None,
}

/// The environment variable that may hold the `KEY=VALUE` pair the controller health RPCs demand.
pub const REQUIRE_SECRET_ENV: &str = "VOLHEALTH_REQUIRE_SECRET";

/// The pair from `--require-secret-file` or from [`REQUIRE_SECRET_ENV`] (not both). Errors name
/// the source, never the value.
fn required_secret(
    file: Option<&std::path::Path>,
    env: Option<String>,
) -> anyhow::Result<Option<volhealth_driver::required_secret::RequiredSecret>> {
    let text = match (file, env) {
        (Some(_), Some(_)) => anyhow::bail!(
            "--require-secret-file and {REQUIRE_SECRET_ENV} both name a required secret; give one"
        ),
        (Some(path), None) => std::fs::read_to_string(path).map_err(|e| {
            anyhow::anyhow!("reading --require-secret-file {}: {e}", path.display())
        })?,
        (None, Some(text)) => text,
        (None, None) => return Ok(None),
    };
    let pair = text.strip_suffix('\n').unwrap_or(&text);
    let pair = pair.strip_suffix('\r').unwrap_or(pair);
    pair.parse().map(Some).map_err(|e| {
        let source = file.map_or(REQUIRE_SECRET_ENV.to_string(), |p| p.display().to_string());
        anyhow::anyhow!("{source}: {e}")
    })
}

/// Runs `volhealth driver` until SIGINT or SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut config = DriverConfig::new(args.endpoint, args.state_dir, args.node_id);
    config.driver_name = args.driver_name;
    config.mode = args.mode;
    config.backend = args.volume_backend;
    config.health = HealthCapabilities::parse(&args.health_capabilities)?;
    if matches!(args.health_api, HealthApi::Legacy | HealthApi::None) {
        config.health = HealthCapabilities::NONE;
    }
    config.legacy_condition = matches!(args.health_api, HealthApi::Legacy | HealthApi::Both);
    config.registration_dir = args.registration_dir;
    config.refresh_interval = Duration::from_millis(args.refresh_interval_ms.max(10));
    config.io_probe_timeout = Duration::from_millis(args.io_probe_timeout_ms.max(1));
    config.io_probe_slow = Duration::from_millis(args.io_probe_slow_ms);
    config.io_probe_interval = Duration::from_millis(args.io_probe_interval_ms);
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.low_space_fraction),
        "--low-space-fraction must be within [0, 1], got {}",
        args.low_space_fraction
    );
    config.low_space_fraction = args.low_space_fraction;
    config.allow_mounts = !args.no_mounts;
    config.require_secret = required_secret(
        args.require_secret_file.as_deref(),
        std::env::var(REQUIRE_SECRET_ENV).ok(),
    )?;
    volhealth_daemon::in_progress::name_run_loop(format!(
        "the driver {} on {}",
        config.driver_name, config.endpoint
    ));
    volhealth_driver::run(
        config,
        volhealth_daemon::shutdown_signal::sigint_or_sigterm(),
    )
    .await?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_required_secret_comes_from_a_file_or_the_environment_never_echoed() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pair");
        std::fs::write(&file, "token=s3cr3t-Xq\n").unwrap();
        let from_file = required_secret(Some(&file), None).unwrap().unwrap();
        assert_eq!(from_file.key(), "token");
        let from_env = required_secret(None, Some("token=s3cr3t-Xq".into()))
            .unwrap()
            .unwrap();
        assert_eq!(
            from_env, from_file,
            "a trailing newline is not part of the value"
        );
        assert!(required_secret(None, None).unwrap().is_none());
        let both = required_secret(Some(&file), Some("token=x".into())).unwrap_err();
        assert!(both.to_string().contains("give one"), "{both}");
        std::fs::write(&file, "=s3cr3t-Xq\n").unwrap();
        let bad = required_secret(Some(&file), None).unwrap_err().to_string();
        assert!(
            bad.contains(&file.display().to_string()) && !bad.contains("s3cr3t"),
            "names the file, not the value: {bad}"
        );
        let missing = required_secret(Some(&dir.path().join("absent")), None).unwrap_err();
        assert!(
            missing
                .to_string()
                .contains("reading --require-secret-file")
        );
    }
}
