//! The crate's error type: what can fail while loading the Kubernetes client.

use std::path::PathBuf;

/// What can fail while loading the Kubernetes client configuration or building the client.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig named by `--kubeconfig` could not be read.
    #[error("reading kubeconfig {}: {source}", path.display())]
    ReadKubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// A kubeconfig was read but does not make a usable configuration (no such context, a
    /// missing certificate file, ...).
    #[error("using the {origin}: {source}")]
    UseKubeconfig {
        /// Where it came from ([`Source`](crate::client::Source)'s text).
        origin: String,
        /// Why.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// Neither a kubeconfig was given nor is this process in a cluster, and the default
    /// kubeconfig is missing or unusable.
    #[error(
        "no usable kubeconfig: {origin}: {source}; not in a cluster either (no KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT). Pass --kubeconfig FILE or set KUBECONFIG"
    )]
    NoKubeconfig {
        /// What was tried.
        origin: String,
        /// Why it failed.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// kube's in-cluster configuration (the service account) could not be loaded.
    #[error("in-cluster configuration: {0}")]
    InCluster(#[source] kube::config::InClusterError),
    /// An environment variable the in-cluster configuration needs is not set.
    #[error("in-cluster configuration: {name} is not set")]
    InClusterEnv {
        /// The variable.
        name: &'static str,
    },
    /// `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT` do not make a URL.
    #[error("in-cluster configuration: {url} is not a URL: {source}")]
    InClusterUrl {
        /// The URL they made.
        url: String,
        /// Why it is not one.
        #[source]
        source: http::uri::InvalidUri,
    },
    /// A service-account file could not be read.
    #[error("in-cluster configuration: reading {}: {source}", path.display())]
    ReadServiceAccount {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The service account's `ca.crt` holds no valid PEM certificate.
    #[error("in-cluster configuration: reading {}: {source}", path.display())]
    BadCa {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    /// The service account's token file is empty.
    #[error("the token file {} is empty", path.display())]
    EmptyToken {
        /// The file.
        path: PathBuf,
    },
    /// The service account's token cannot be sent as a header.
    #[error("the token in {} is not a valid header value", path.display())]
    BadToken {
        /// The file.
        path: PathBuf,
    },
    /// kube refused to build a client from the configuration.
    #[error("building the Kubernetes client: {0}")]
    Build(#[source] kube::Error),
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
