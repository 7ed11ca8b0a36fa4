//! The writer crate's error type.

/// What can fail while setting a writer up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Kubernetes client configuration could not be loaded or used.
    #[error("loading the Kubernetes client configuration: {0}")]
    KubeConfig(String),
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
