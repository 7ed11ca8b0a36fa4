//! What went wrong inside `up`, `bench`, `inject` and the cluster controllers, below their
//! entry-point [`crate::Error`]: each step that can fail wraps the error it met in what it was
//! doing (`creating DIR`, `CreateVolume NAME`, `applying the ClusterRole X`), so the message is
//! that step and its `source` chain the causes, as the CLI prints them (`step: cause: cause`).
//!
//! [`Context`] adds the step to a `Result` or an `Option`; [`bail!`], [`ensure!`] and
//! [`invalid!`] make a [`Failure::Invalid`] of a check of the step's own.

/// A failed step: a check of its own, an error it met (each kind of error its own variant, shown
/// as itself), or a step around one of those, naming what it was doing.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// A check of the step's own failed (a flag, a missing object, a refused state): the message
    /// says what is wrong.
    #[error("{0}")]
    Invalid(String),
    /// What the step was doing when `source` failed.
    #[error("{what}")]
    Step {
        /// What was being done.
        what: String,
        /// What failed.
        #[source]
        source: Box<Failure>,
    },
    /// A file, socket or process operation.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A Kubernetes API request.
    #[error(transparent)]
    Kube(#[from] kube::Error),
    /// Connecting to the cluster, or a request explained for its user (unreachable, refused
    /// credentials, another API error).
    #[error(transparent)]
    Connection(#[from] volhealth_status::Error),
    /// A CSI call answered with an error status.
    #[error(transparent)]
    Rpc(#[from] tonic::Status),
    /// A CSI endpoint or connection.
    #[error(transparent)]
    Csi(#[from] volhealth_csi::Error),
    /// The reference driver's state (injections, records).
    #[error(transparent)]
    Driver(#[from] volhealth_driver::Error),
    /// The embedded API server's files (certificates, tokens).
    #[error(transparent)]
    ApiServer(#[from] volhealth_apiserver::Error),
    /// JSON encoding or decoding.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// YAML decoding.
    #[error(transparent)]
    Yaml(#[from] serde_saphyr::Error),
    /// Building an HTTP request.
    #[error(transparent)]
    Http(#[from] http::Error),
    /// An address that is not a URI.
    #[error(transparent)]
    Uri(#[from] http::uri::InvalidUri),
    /// An address that is not `HOST:PORT`.
    #[error(transparent)]
    Address(#[from] std::net::AddrParseError),
    /// A whole number that is not one.
    #[error(transparent)]
    Integer(#[from] std::num::ParseIntError),
    /// A number that is not one.
    #[error(transparent)]
    Number(#[from] std::num::ParseFloatError),
}

/// Names the step a `Result` or an `Option` belongs to.
pub trait Context<T> {
    /// On failure, the step `what` around it (on `None`, the check `what`).
    fn context(self, what: impl Into<String>) -> Result<T, Failure>;
    /// [`Context::context`], with the step's description made only on failure.
    fn with_context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T, Failure>;
}

fn step(what: String, failed: impl Into<Failure>) -> Failure {
    Failure::Step {
        what,
        source: Box::new(failed.into()),
    }
}

impl<T, E: Into<Failure>> Context<T> for Result<T, E> {
    fn context(self, what: impl Into<String>) -> Result<T, Failure> {
        self.map_err(|e| step(what.into(), e))
    }

    fn with_context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T, Failure> {
        self.map_err(|e| step(what().into(), e))
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, what: impl Into<String>) -> Result<T, Failure> {
        self.ok_or_else(|| Failure::Invalid(what.into()))
    }

    fn with_context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T, Failure> {
        self.ok_or_else(|| Failure::Invalid(what().into()))
    }
}

/// `error: cause: cause …`, for a log line (what `{:#}` shows of the entry points' errors).
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// A [`Failure::Invalid`] with a `format!` message.
macro_rules! invalid {
    ($($arg:tt)*) => {
        $crate::failure::Failure::Invalid(format!($($arg)*))
    };
}

/// Returns a [`Failure::Invalid`] with a `format!` message.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::failure::invalid!($($arg)*))
    };
}

/// Returns a [`Failure::Invalid`] with a `format!` message unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($arg:tt)*) => {
        if !$cond {
            $crate::failure::bail!($($arg)*);
        }
    };
}

pub(crate) use {bail, ensure, invalid};

/// The result of a step.
pub type Result<T, E = Failure> = std::result::Result<T, E>;
