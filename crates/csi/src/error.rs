//! The crate's error type. Messages name the endpoint or RPC involved and
//! never include request contents (requests may carry secrets).

use std::path::PathBuf;
use std::time::Duration;

/// Why the last attempt to connect to a CSI socket failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectFailure {
    /// The attempt did not finish in the time that was left.
    #[error("connection attempt timed out")]
    TimedOut,
    /// The transport failed; shown with its causes, since it is the final message's reason (and
    /// so not a `source` of its own, which would print them twice).
    #[error("{}", with_causes(.0))]
    Transport(tonic::transport::Error),
}

/// `error: cause: cause …`.
fn with_causes(e: &tonic::transport::Error) -> String {
    let mut reason = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        reason = format!("{reason}: {s}");
        source = s.source();
    }
    reason
}

/// Errors of the CSI helpers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The endpoint string could not be turned into a socket path.
    #[error("invalid CSI endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint {
        /// The endpoint as given.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The socket never appeared within the connect timeout.
    #[error("CSI socket {} does not exist (waited {waited:?}); is the driver running?", path.display())]
    SocketMissing {
        /// Socket path.
        path: PathBuf,
        /// How long we waited for it.
        waited: Duration,
    },
    /// The socket exists but no connection could be made within the timeout.
    #[error("could not connect to CSI socket {} within {waited:?}: {reason}", path.display())]
    Connect {
        /// Socket path.
        path: PathBuf,
        /// How long we kept trying.
        waited: Duration,
        /// The last failure seen.
        reason: ConnectFailure,
    },
    /// A file that is not a socket is in the way of the server socket.
    #[error("{} exists and is not a socket; refusing to remove it", path.display())]
    NotASocket {
        /// The path in the way.
        path: PathBuf,
    },
    /// Another process is serving on the socket path.
    #[error("{} is in use by a running server; refusing to replace it", path.display())]
    SocketInUse {
        /// Socket path.
        path: PathBuf,
    },
    /// The socket path cannot be put into a unix socket address.
    #[error(transparent)]
    Address(#[from] crate::socket_address::AddressError),
    /// A file system operation failed.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The gRPC server failed.
    #[error("serving CSI on {}: {source}", path.display())]
    Serve {
        /// Socket path.
        path: PathBuf,
        /// The transport error.
        #[source]
        source: tonic::transport::Error,
    },
    /// A server's task ended without returning (it panicked, or was cancelled).
    #[error("serving {endpoint} ended abnormally: {reason}")]
    ServerTask {
        /// The endpoint it served.
        endpoint: String,
        /// What ended it.
        reason: String,
    },
    /// The driver answered an RPC with an error status.
    #[error("{rpc} failed: {code:?}: {message}")]
    Rpc {
        /// The RPC name.
        rpc: &'static str,
        /// The gRPC status code returned by the driver.
        code: tonic::Code,
        /// The status message returned by the driver.
        message: String,
    },
    /// The driver did not answer an RPC in time.
    #[error("{rpc} did not answer within {timeout:?}")]
    Timeout {
        /// The RPC name.
        rpc: &'static str,
        /// The deadline that passed.
        timeout: Duration,
    },
}

impl Error {
    /// An [`Error::Rpc`] from a status returned by the driver; only the code and
    /// the driver's message are kept.
    pub fn rpc(rpc: &'static str, status: &tonic::Status) -> Self {
        Error::Rpc {
            rpc,
            code: status.code(),
            message: status.message().to_string(),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
