//! Leader election on a Lease, so that of several replicas only one acts: volhealth-writer's,
//! which also ends leadership the moment this replica's renewal is not confirmed within the renew
//! deadline (the component that evicts pods must not act on a Lease that may have passed on).

use kube_lease_manager::LeaseManagerError;
pub use volhealth_writer::lease::{Election, LeaderElection};

/// The Lease name.
pub const LEASE_NAME: &str = "volhealth-remediate";

/// A default holder identity: host name (else `volhealth-remediate`) plus a per-process suffix.
pub fn default_identity() -> String {
    volhealth_writer::lease::default_identity("volhealth-remediate")
}

/// Starts electing on Lease [`LEASE_NAME`], in `le.namespace` (else `default`), as `le.identity`
/// (else [`default_identity`]); the timings are checked as client-go checks them first.
pub async fn start(client: kube::Client, le: &LeaderElection) -> Result<Election, StartError> {
    le.validate()?;
    let namespace = volhealth_writer::lease::namespace(le, "default");
    let identity = le.identity.clone().unwrap_or_else(default_identity);
    let election =
        volhealth_writer::lease::start(client, &namespace, LEASE_NAME, &identity, le).await?;
    tracing::info!(lease = LEASE_NAME, %namespace, %identity, "leader election on");
    Ok(election)
}

/// Why the election did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Timings client-go would refuse.
    #[error(transparent)]
    Timings(#[from] volhealth_writer::lease::TimingError),
    /// The Lease manager failed.
    #[error(transparent)]
    Lease(#[from] LeaseManagerError),
}
