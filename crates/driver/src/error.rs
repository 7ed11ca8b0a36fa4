//! The crate's error type.

use std::path::PathBuf;

/// Everything that can go wrong inside the reference driver.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A filesystem operation failed; `what` says which one and on which path.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A stored JSON document could not be read or written.
    #[error("{what} {path}: {source}")]
    Json {
        /// What was being done.
        what: &'static str,
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// An outside tool (mkfs.ext4, mount, e2fsck) failed or is missing.
    #[error("running {tool}: {detail}")]
    Tool {
        /// The program.
        tool: &'static str,
        /// What happened, with its output.
        detail: String,
    },
    /// A value given by the user or a caller is not acceptable.
    #[error("{0}")]
    Invalid(String),
    /// The gRPC server failed.
    #[error("serving {what}: {detail}")]
    Serve {
        /// Which service.
        what: &'static str,
        /// What happened.
        detail: String,
    },
}

impl Error {
    /// Wraps an I/O error with what was being done and where.
    pub fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            what,
            path: path.into(),
            source,
        }
    }

    /// The outcome of removing `path`: a path that is already gone counts as removed.
    pub fn unless_absent(
        removed: std::io::Result<()>,
        what: &'static str,
        path: &std::path::Path,
    ) -> Result<()> {
        match removed {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(what, path, e)),
            _ => Ok(()),
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
