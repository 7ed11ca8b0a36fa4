//! What can go wrong in `status`, each with what was being done.

use std::time::Duration;

/// An error of `status`; its message (with its sources) is what the user reads.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No usable kubeconfig, or an unreadable one; the message names the file and the cause.
    #[error("{0}")]
    Kubeconfig(String),
    /// Loading the client configuration failed otherwise.
    #[error(transparent)]
    Load(volhealth_kube_access::Error),
    /// The configuration loaded but no client could be built from it.
    #[error("building a client for {server}")]
    Client {
        /// The API server's URL.
        server: String,
        /// Why.
        #[source]
        source: volhealth_kube_access::Error,
    },
    /// An API call failed; the message says what was asked, of which server, and why.
    #[error("{0}")]
    Api(String),
    /// The report could not be encoded.
    #[error("encoding the report as {format}: {reason}")]
    Encode {
        /// JSON or YAML.
        format: &'static str,
        /// The encoder's message.
        reason: String,
    },
    /// `--wait-for` ran out of time.
    #[error("waited {waited:?} and the cluster does not show {expected} yet; it shows:\n{shows}")]
    WaitTimedOut {
        /// How long it waited.
        waited: Duration,
        /// The expectations not met, comma-separated.
        expected: String,
        /// What the cluster shows instead, as it would be printed.
        shows: String,
    },
    /// Writing the output failed.
    #[error("writing to stdout")]
    Write(#[source] std::io::Error),
    /// Every watch of `--watch` ended, which they never do on their own.
    #[error("the watches ended unexpectedly")]
    WatchesEnded,
}

/// The result of `status`'s operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;
