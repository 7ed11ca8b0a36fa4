//! `volhealth up`: the whole system on this machine (see `volhealth_local_cluster::up`); here
//! only its flags.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use volhealth_local_cluster::up;

/// Flags of `volhealth up`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Where all state lives (API server database, driver backend, kubeconfigs, logs).
    #[arg(long, default_value = up::DEFAULT_DIR)]
    pub dir: PathBuf,
    /// Number of simulated nodes.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub nodes: u16,
    /// Sample PVCs per node, each with its PV and a pod using it (0: none; the cluster still
    /// provisions claims you create). `--nodes 100 --pvcs-per-node 50` is the bench's 5,000 x 100.
    #[arg(long, default_value_t = up::VOLUMES_PER_NODE, value_parser = clap::value_parser!(u16).range(0..=200))]
    pub pvcs_per_node: u16,
    /// Address of the API server (HTTPS); port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: String,
    /// How often the monitor asks the controller plugin about volume health (e.g. 5s, 1m).
    #[arg(long, default_value = "5s", value_parser = volhealth_daemon::duration::parse)]
    pub monitor_interval: Duration,
    /// How often each node agent asks its node plugin about volume and storage health.
    #[arg(long, default_value = "5s", value_parser = volhealth_daemon::duration::parse)]
    pub agent_interval: Duration,
    /// First metrics port: the monitor's; the agent of node N gets PORT + N (default: the
    /// --listen port + 1; 0 picks free ports).
    #[arg(long, value_name = "PORT")]
    pub metrics_port: Option<u16>,
    /// Run against this CSI driver (its controller plugin, already running) instead of starting
    /// the reference driver, e.g. unix:///run/csi/controller.sock.
    #[arg(long, value_name = "ENDPOINT")]
    pub driver_endpoint: Option<String>,
    /// With --driver-endpoint: the driver's node plugin on node NODE (repeat for each node; the
    /// nodes are then exactly those named). Without it, every node uses --driver-endpoint.
    #[arg(long, value_name = "NODE=ENDPOINT", requires = "driver_endpoint")]
    pub node_endpoint: Vec<String>,
    /// Run the reference driver as a driver of today: it speaks only the legacy
    /// VOLUME_CONDITION shape (CSI v1.3 to v1.12), so the monitor and the agents probe it through
    /// the legacy bridge. Conditions then show as Degraded/VolumeConditionAbnormal with the
    /// driver's message, unless a rule maps them (docs/legacy-drivers.md).
    #[arg(long, conflicts_with = "driver_endpoint")]
    pub legacy_driver: bool,
    /// Real mounts, and node faults seen by the agents: the volumes are ext4 images the node
    /// plugins loop-mount at stage and bind-mount at publish, and the node plugins report no node
    /// health, so the pods' conditions come from the agents' node fault detector alone
    /// (docs/node-faults.md). Remount a volume's filesystem read-only or unmount a pod's volume
    /// and its pod shows FilesystemReadOnly or NotMounted. Needs root and loop devices; `up`
    /// unmounts everything when it stops.
    #[arg(long, conflicts_with_all = ["driver_endpoint", "legacy_driver"])]
    pub node_faults: bool,
    /// The reference driver reports StorageDegraded/LowFreeSpace on every node when less than
    /// this share of the disk under --dir is free (default 0.10, as `volhealth driver`); 0 turns
    /// that check off, e.g. on a nearly full laptop disk.
    #[arg(long, value_name = "FRACTION", value_parser = fraction, conflicts_with = "driver_endpoint")]
    pub low_space_fraction: Option<f64>,
    /// The optional components.
    #[command(flatten)]
    pub extras: ExtrasArgs,
}

/// The flags of the optional components.
#[derive(Debug, clap::Args)]
pub struct ExtrasArgs {
    /// Also run the CSIStorageHealth scheduler extender (`volhealth scheduler-extender`).
    #[arg(long)]
    pub with_extender: bool,
    /// Also run the remediation controller (`volhealth remediate`) as its own service account.
    #[arg(long)]
    pub with_remediation: bool,
    /// With --with-remediation: the policy file (default: deploy/kubernetes/remediate/policy.yaml).
    #[arg(long, value_name = "FILE", requires = "with_remediation")]
    pub remediation_policy: Option<PathBuf>,
    /// With --with-remediation: only say what would be done (--remediation-dry-run=false acts).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub remediation_dry_run: bool,
    /// Where the extender serves POST /filter and its metrics, with --with-extender.
    #[arg(long, default_value = "127.0.0.1:8888", value_name = "HOST:PORT")]
    pub extender_listen: String,
}

impl From<ExtrasArgs> for up::Extras {
    fn from(a: ExtrasArgs) -> Self {
        up::Extras {
            with_extender: a.with_extender,
            with_remediation: a.with_remediation,
            remediation_policy: a.remediation_policy,
            remediation_dry_run: a.remediation_dry_run,
            extender_listen: a.extender_listen,
        }
    }
}

impl From<Args> for up::UpConfig {
    fn from(a: Args) -> Self {
        up::UpConfig {
            dir: a.dir,
            nodes: a.nodes,
            pvcs_per_node: a.pvcs_per_node,
            listen: a.listen,
            monitor_interval: a.monitor_interval,
            agent_interval: a.agent_interval,
            metrics_port: a.metrics_port,
            driver_endpoint: a.driver_endpoint,
            node_endpoint: a.node_endpoint,
            legacy_driver: a.legacy_driver,
            node_faults: a.node_faults,
            low_space_fraction: a.low_space_fraction,
            extras: a.extras.into(),
        }
    }
}

/// A share between 0 and 1.
fn fraction(s: &str) -> Result<f64, String> {
    let f: f64 = s
        .parse()
        .map_err(|e| format!("{s:?} is not a number: {e}"))?;
    if (0.0..=1.0).contains(&f) {
        Ok(f)
    } else {
        Err(format!("{s} is not between 0 and 1"))
    }
}

/// Runs `volhealth up` until Ctrl-C or SIGTERM; 130 when interrupted while starting.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    Ok(match up::run(args.into()).await? {
        up::Outcome::Stopped => ExitCode::SUCCESS,
        up::Outcome::Interrupted => ExitCode::from(130),
    })
}
