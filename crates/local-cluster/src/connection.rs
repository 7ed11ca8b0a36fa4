//! The admin connection to the cluster `up` and `bench` start, and to the one a kubeconfig
//! names for the cluster controllers: `volhealth status`'s connection (the configuration found
//! as every volhealth component finds it, a timeout on connecting and on each response), without
//! a context or impersonation.

use crate::failure::{Failure, Result};
use std::path::Path;
use std::time::Duration;
use volhealth_status::kubeconfig;

pub(crate) use volhealth_status::kubeconfig::Connection;

/// Builds a client whose connecting and responses are each bounded by `timeout`.
pub(crate) async fn connect(kubeconfig: Option<&Path>, timeout: Duration) -> Result<Connection> {
    Ok(kubeconfig::connect(kubeconfig, None, timeout, false).await?)
}

/// Explains a failed API call: unreachable, refused credentials, or another API error.
pub(crate) fn explain(err: &kube::Error, what: &str, conn: &Connection) -> Failure {
    Failure::Connection(kubeconfig::explain(err, what, conn))
}
