//! `volhealth monitor`: the controller-side writer of pvc.status.healthStatus.

use anyhow::Context;
use std::path::PathBuf;
use std::process::ExitCode;
use volhealth_daemon::{duration, http_endpoint, shutdown_signal};
use volhealth_monitor::{LeaderElection, MonitorConfig, SecretRef, config};

use crate::go_flags;

/// Flags of `volhealth monitor` (named as the upstream external-health-monitor names them).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// --upstream-event-reasons.
    #[command(flatten)]
    pub upstream_events: crate::upstream_events::UpstreamEvents,
    /// The CSI controller's endpoint (unix:///PATH or PATH).
    #[arg(long, default_value = config::DEFAULT_CSI_ADDRESS)]
    pub csi_address: String,
    /// Kubeconfig file (default: KUBECONFIG, else in-cluster, else ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// One probe cycle per interval (e.g. 90s, 1m, 1m30s).
    #[arg(long, default_value = "1m")]
    pub monitor_interval: String,
    /// Deadline of each CSI call; each list page has its own.
    #[arg(long, default_value = "15s")]
    pub timeout: String,
    /// max_entries of each ControllerListVolumeHealth page.
    #[arg(long, default_value_t = config::DEFAULT_LIST_PAGE_SIZE)]
    pub list_page_size: u32,
    /// Most ControllerGetVolumeHealth calls in flight.
    #[arg(long, default_value_t = config::DEFAULT_WORKER_THREADS)]
    pub worker_threads: usize,
    /// --leader-election and its timings.
    #[command(flatten)]
    pub leader: crate::leader_flags::LeaderFlags,
    /// Labels to put on the leader Lease, as KEY:VALUE,KEY2:VALUE2.
    #[arg(long, value_name = "KEY:VALUE,...", value_parser = parse_lease_labels)]
    pub leader_election_labels: Option<LeaseLabels>,
    /// Namespace of the Lease (default: the in-cluster namespace, else "default").
    #[arg(long)]
    pub leader_election_namespace: Option<String>,
    /// Where to serve /metrics, /healthz and /readyz: :PORT or HOST:PORT ("" = not served).
    #[arg(long, default_value = ":8080")]
    pub http_endpoint: String,
    /// Older name of --http-endpoint, still accepted as the upstream sidecar accepts it.
    #[arg(long, value_name = "ADDR", conflicts_with = "http_endpoint")]
    pub metrics_address: Option<String>,
    /// Path of the metrics page on the HTTP endpoint.
    #[arg(long, default_value = volhealth_daemon::endpoint_server::DEFAULT_METRICS_PATH)]
    pub metrics_path: String,
    /// Sustained writes per second to the API server.
    #[arg(long, default_value_t = config::DEFAULT_KUBE_API_QPS)]
    pub kube_api_qps: f64,
    /// Burst of writes to the API server.
    #[arg(long, default_value_t = config::DEFAULT_KUBE_API_BURST)]
    pub kube_api_burst: u32,
    /// Secret (NAMESPACE/NAME) whose data is passed as `secrets` in the health RPCs.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub health_secret: Option<String>,
    /// Drivers that speak only the legacy VOLUME_CONDITION shape.
    #[command(flatten)]
    pub legacy: crate::legacy_flags::LegacyArgs,
    /// For a driver with no health RPC (new or legacy), read each bound claim's
    /// volumehealth.storage.kubernetes.io/health annotation, as vSphere's CSI syncer writes it:
    /// inaccessible is Inaccessible/VolumeInaccessible, accessible is healthy.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          default_value = "false", action = clap::ArgAction::Set, value_parser = go_flags::parse_bool)]
    pub health_annotation: bool,
    /// Log verbosity and format.
    #[command(flatten)]
    pub log: crate::logging::LogArgs,
    /// Flags of the upstream sidecar that mean nothing here.
    #[command(flatten)]
    pub upstream: UpstreamFlags,
}

/// The Lease's labels of `--leader-election-labels`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseLabels(pub std::collections::BTreeMap<String, String>);

/// A `--leader-election-labels` item that is not `KEY:VALUE`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not KEY:VALUE")]
pub struct NotKeyValue(pub String);

/// Parses `KEY:VALUE,KEY2:VALUE2` as the upstream sidecar's `--leader-election-labels` does.
fn parse_lease_labels(s: &str) -> Result<LeaseLabels, NotKeyValue> {
    let mut out = std::collections::BTreeMap::new();
    for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = pair
            .split_once(':')
            .filter(|(k, _)| !k.trim().is_empty())
            .ok_or_else(|| NotKeyValue(pair.to_string()))?;
        out.insert(k.trim().to_string(), v.trim().to_string());
    }
    Ok(LeaseLabels(out))
}

/// Flags of csi-external-health-monitor-controller (v0.18 and v0.19) that have no meaning
/// for volhealth's monitor: accepted, so a manifest written for the Go sidecar starts, and named
/// in one warning.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct UpstreamFlags {
    /// v0.18's node watcher (removed in v0.19): no effect.
    #[arg(long, hide = true, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_flags::parse_bool)]
    pub enable_node_watcher: Option<bool>,
    /// Go's GOMAXPROCS from the cgroup: no effect.
    #[arg(long, hide = true, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = go_flags::parse_bool)]
    pub automaxprocs: Option<bool>,
    /// v0.18's ListVolumes interval: no effect (one --monitor-interval paces every mode).
    #[arg(long, hide = true, value_name = "D")]
    pub list_volumes_interval: Option<String>,
    /// The upstream work queue's refill interval: no effect.
    #[arg(long, hide = true, value_name = "D")]
    pub volume_list_add_interval: Option<String>,
    /// v0.18's node list interval (removed in v0.19): no effect.
    #[arg(long, hide = true, value_name = "D")]
    pub node_list_add_interval: Option<String>,
    /// The informers' resync period: no effect (the caches are watches).
    #[arg(long, hide = true, value_name = "D")]
    pub resync: Option<String>,
    /// The upstream work queue's first retry delay: no effect (volhealth's writer backs off itself).
    #[arg(long, hide = true, value_name = "D")]
    pub retry_interval_start: Option<String>,
    /// The upstream work queue's longest retry delay: no effect.
    #[arg(long, hide = true, value_name = "D")]
    pub retry_interval_max: Option<String>,
}

impl UpstreamFlags {
    /// The flags that were given, as `--name`.
    pub fn given(&self) -> Vec<&'static str> {
        [
            ("--enable-node-watcher", self.enable_node_watcher.is_some()),
            ("--automaxprocs", self.automaxprocs.is_some()),
            (
                "--list-volumes-interval",
                self.list_volumes_interval.is_some(),
            ),
            (
                "--volume-list-add-interval",
                self.volume_list_add_interval.is_some(),
            ),
            (
                "--node-list-add-interval",
                self.node_list_add_interval.is_some(),
            ),
            ("--resync", self.resync.is_some()),
            (
                "--retry-interval-start",
                self.retry_interval_start.is_some(),
            ),
            ("--retry-interval-max", self.retry_interval_max.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, given)| given.then_some(name))
        .collect()
    }
}

/// Turns the flags into the library's configuration.
pub fn config_from(args: &Args) -> anyhow::Result<MonitorConfig> {
    let d = |flag: &str, v: &str| duration::parse(v).with_context(|| format!("--{flag}"));
    let leader_election = args
        .leader
        .election(args.leader_election_namespace.clone())?
        .map(|le| LeaderElection {
            labels: args
                .leader_election_labels
                .clone()
                .map(|l| l.0)
                .unwrap_or_default(),
            ..le
        });
    let http_endpoint = match &args.metrics_address {
        Some(addr) => http_endpoint::parse_optional(addr).context("--metrics-address")?,
        None => http_endpoint::parse_optional(&args.http_endpoint)?,
    };
    crate::runtime::set_metrics_path(&args.metrics_path)?;
    let health_secret = args
        .health_secret
        .as_deref()
        .map(|s| {
            s.parse::<SecretRef>()
                .map_err(|e| anyhow::anyhow!(e))
                .context("--health-secret")
        })
        .transpose()?;
    let cfg = MonitorConfig {
        csi_address: args.csi_address.clone(),
        kubeconfig: args.kubeconfig.clone(),
        monitor_interval: d("monitor-interval", &args.monitor_interval)?,
        timeout: d("timeout", &args.timeout)?,
        list_page_size: args.list_page_size,
        worker_threads: args.worker_threads,
        leader_election,
        http_endpoint,
        kube_api_qps: args.kube_api_qps,
        kube_api_burst: args.kube_api_burst,
        health_secret,
        health_annotation: args.health_annotation,
        legacy: volhealth_monitor::config::Legacy {
            enabled: args.legacy.enabled(),
            rules: args.legacy.rules()?,
            debounce: args.legacy.legacy_debounce,
        },
    };
    cfg.validate().map_err(|e| anyhow::anyhow!(e))?;
    Ok(cfg)
}

/// Runs `volhealth monitor` until SIGINT or SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    args.upstream_events.apply();
    crate::logging::warn_ignored(&args.upstream.given());
    let cfg = config_from(&args)?;
    volhealth_daemon::in_progress::name_run_loop(format!("the monitor of {}", cfg.csi_address));
    volhealth_monitor::run(cfg, shutdown_signal::sigint_or_sigterm())
        .await
        .context("volhealth monitor")?;
    Ok(ExitCode::SUCCESS)
}
