//! Leader election on a Lease, so that of several replicas only one acts: the shared election of
//! `volhealth_kube_access::leader`, which confirms every retry period that the Lease is this
//! replica's and fresh. The controller asks its [`Leadership`] before every action, so it stops
//! evicting the moment the Lease is not fresh (the component that evicts pods must not act on a
//! Lease that may have passed on).

pub use volhealth_kube_access::leader::{Election, LeaderElection, Leadership};
use volhealth_kube_access::leader::{LeaseManagerError, TimingError};

/// The Lease name.
pub const LEASE_NAME: &str = "volhealth-remediate";

/// A default holder identity: host name (else `volhealth-remediate`) plus a per-process suffix.
pub fn default_identity() -> String {
    volhealth_kube_access::leader::default_identity("volhealth-remediate")
}

/// Starts electing on Lease [`LEASE_NAME`], in `le.namespace` (else `default`), as `le.identity`
/// (else [`default_identity`]); the timings are checked as client-go checks them first.
pub async fn start(client: kube::Client, le: &LeaderElection) -> Result<Election, StartError> {
    le.validate()?;
    let namespace = volhealth_kube_access::leader::namespace(le, "default");
    let identity = le.identity.clone().unwrap_or_else(default_identity);
    let election =
        volhealth_kube_access::leader::start(client, &namespace, LEASE_NAME, &identity, le).await?;
    tracing::info!(lease = LEASE_NAME, %namespace, %identity, "leader election on");
    Ok(election)
}

/// Why the election did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Timings client-go would refuse.
    #[error(transparent)]
    Timings(#[from] TimingError),
    /// The Lease manager failed.
    #[error(transparent)]
    Lease(#[from] LeaseManagerError),
}
