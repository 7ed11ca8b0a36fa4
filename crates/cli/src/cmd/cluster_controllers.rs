//! `volhealth cluster-controllers` (hidden; `up` runs it): the provisioner, PV controller,
//! scheduler and kubelet volume role of a local cluster (see
//! `volhealth_local_cluster::cluster_controllers`); here only its flags.

use std::path::PathBuf;
use std::process::ExitCode;
use volhealth_local_cluster::cluster_controllers::{self, ControllersConfig};

/// Flags of `volhealth cluster-controllers`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kubeconfig file (default: KUBECONFIG, else in-cluster, else ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The CSI driver's name (the StorageClass provisioner these controllers serve).
    #[arg(long)]
    pub driver: String,
    /// The driver's controller plugin, e.g. unix:///run/csi/controller.sock.
    #[arg(long, value_name = "ENDPOINT")]
    pub controller_endpoint: String,
    /// A node and its node plugin (repeat for each node): NODE=ENDPOINT.
    #[arg(long = "node", value_name = "NODE=ENDPOINT", required = true)]
    pub nodes: Vec<String>,
    /// A node's kubelet root directory (repeat for each node): NODE=DIR.
    #[arg(long = "kubelet-root", value_name = "NODE=DIR")]
    pub kubelet_roots: Vec<String>,
    /// Log verbosity and format.
    #[command(flatten)]
    pub log: crate::cmd::logging::LogArgs,
}

impl From<Args> for ControllersConfig {
    fn from(a: Args) -> Self {
        ControllersConfig {
            kubeconfig: a.kubeconfig,
            driver: a.driver,
            controller_endpoint: a.controller_endpoint,
            nodes: a.nodes,
            kubelet_roots: a.kubelet_roots,
        }
    }
}

/// Runs the controllers until SIGINT or SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<ExitCode> {
    cluster_controllers::run(args.into()).await?;
    Ok(ExitCode::SUCCESS)
}
