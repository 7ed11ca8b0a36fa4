//! The monitor's error type.

/// Everything that can stop the monitor or one of its steps.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag or configuration value could not be used.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// Talking to the CSI driver failed.
    #[error("CSI driver: {0}")]
    Csi(#[from] volhealth_csi::Error),
    /// Talking to the Kubernetes API failed.
    #[error("{what}: {source}")]
    Kube {
        /// What the monitor was doing.
        what: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// Building the Kubernetes client configuration failed.
    #[error("loading the Kubernetes client configuration: {0}")]
    KubeConfig(#[from] volhealth_kube_access::Error),
    /// Leader election could not start.
    #[error("leader election: {0}")]
    Lease(#[from] volhealth_kube_access::leader::LeaseManagerError),
    /// The metrics/health HTTP endpoint could not be served.
    #[error(transparent)]
    Http(#[from] volhealth_daemon::Error),
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
