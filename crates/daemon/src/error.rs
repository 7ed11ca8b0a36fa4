//! The crate's error type.

/// A flag value that cannot be used, or an endpoint that cannot be bound.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A duration flag could not be parsed.
    #[error("invalid duration {input:?}: {reason} (examples: 90s, 1m, 1m30s, 500ms)")]
    Duration {
        /// What was given.
        input: String,
        /// Why it was refused.
        reason: String,
    },
    /// `--http-endpoint` is neither `:PORT` nor `HOST:PORT`.
    #[error("invalid --http-endpoint {input:?}: expected :PORT or HOST:PORT")]
    HttpEndpoint {
        /// What was given.
        input: String,
    },
    /// The metrics and health endpoint could not be bound.
    #[error("serving HTTP on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
