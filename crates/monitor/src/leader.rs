//! Leader election on a Lease, so two replicas never both write: volhealth-writer's, which
//! confirms every retry period that the Lease is this replica's and fresh
//! ([`volhealth_writer::lease`]).

use crate::Result;
use crate::config::LeaderElection;
use kube::Client;
pub use volhealth_writer::lease::{Election, namespace};

/// A default holder identity: host name (else `volhealth-monitor`) plus a per-process suffix.
pub fn default_identity() -> String {
    volhealth_writer::lease::default_identity("volhealth-monitor")
}

/// Starts electing on Lease `name` in `namespace` as `identity`.
pub async fn start(
    client: Client,
    namespace: &str,
    name: &str,
    identity: &str,
    le: &LeaderElection,
) -> Result<Election> {
    Ok(volhealth_writer::lease::start(client, namespace, name, identity, le).await?)
}
