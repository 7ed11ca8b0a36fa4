//! Checks of the Kubernetes manifests in `deploy/kubernetes/`, which no crate builds on.
//!
//! - [`manifests`]: reading the shipped YAML files as the JSON objects the API server would see,
//!   and rendering a kustomization with `kubectl kustomize`.
//! - [`admission`]: a ValidatingAdmissionPolicy applied to one admission request, as the API
//!   server applies it (match constraints, match conditions, variables, validations), with the
//!   policy's CEL expressions run by the `cel` interpreter.
//!
//! The tests in `tests/` run the agent's policy against allowed and refused requests.

pub mod admission;
pub mod manifests;

/// What went wrong reading a manifest or evaluating a policy.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A manifest file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A manifest file is not YAML, or not the objects expected.
    #[error("parsing {path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// Why.
        message: String,
    },
    /// The policy lacks a field the API server requires, or has one of the wrong shape.
    #[error("the policy: {0}")]
    Policy(String),
    /// `kubectl kustomize` could not be run, or refused the kustomization.
    #[error("kubectl kustomize {dir}: {message}")]
    Kustomize {
        /// The kustomization's directory.
        dir: String,
        /// Why.
        message: String,
    },
}

/// Result with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
volhealth_module_graph::imports_run_one_way!();
