//! The agent's error type.

use std::path::PathBuf;

/// Everything that can stop the agent or reject its configuration.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--csi-driver` is not `NAME=ENDPOINT`.
    #[error("invalid --csi-driver {input:?}: {reason}")]
    DriverFlag {
        /// What was given.
        input: String,
        /// Why it was refused.
        reason: String,
    },
    /// `--feature-gates` could not be parsed.
    #[error("invalid --feature-gates {input:?}: {reason}")]
    FeatureGates {
        /// What was given.
        input: String,
        /// Why it was refused.
        reason: volhealth_daemon::feature_gates::GateError,
    },
    /// `--detect-node-faults` is not auto, always or off.
    #[error("invalid --detect-node-faults {0:?}: expected auto, always or off")]
    NodeFaultFlag(String),
    /// The kubeconfig could not be loaded.
    #[error("loading the Kubernetes client configuration: {0}")]
    KubeConfig(#[from] volhealth_kube_access::Error),
    /// The credentials do not belong to the node named by `--node-name`.
    #[error(
        "the credentials are not allowed to act for node {node:?} ({detail}); \
         --node-name does not match the node the credentials belong to, refusing to continue"
    )]
    NodeIdentity {
        /// The `--node-name`.
        node: String,
        /// What was refused.
        detail: String,
    },
    /// The Node object does not exist.
    #[error("node {0:?} does not exist in the cluster; start the agent on a registered node")]
    NodeMissing(String),
    /// A Kubernetes request failed where the agent cannot continue without it.
    #[error("{action}: {message}")]
    Kube {
        /// What was being done.
        action: String,
        /// The failure.
        message: String,
    },
    /// A flag value or the metrics and health endpoint could not be used.
    #[error(transparent)]
    Daemon(#[from] volhealth_daemon::Error),
    /// A CSI call needed at start-up failed.
    #[error("{action}: {message}")]
    Csi {
        /// What was being done.
        action: String,
        /// The failure.
        message: String,
    },
    /// A file or directory of the kubelet could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
