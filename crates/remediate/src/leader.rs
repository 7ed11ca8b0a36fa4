//! Leader election on a Lease (kube-lease-manager), so that of several replicas only one acts.

use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use std::time::Duration;
use tokio::sync::watch;

/// The Lease name.
pub const LEASE_NAME: &str = "volhealth-remediate";

/// Where and as whom to elect.
#[derive(Debug, Clone)]
pub struct LeaderElection {
    /// Namespace of the Lease.
    pub namespace: String,
    /// This replica's holder identity.
    pub identity: String,
    /// How long a holder's claim lasts without renewal (at least 2 s).
    pub lease_duration: Duration,
}

/// A running election.
pub struct Election {
    /// True while this replica leads.
    pub leader: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<Result<kube_lease_manager::LeaseManager, LeaseManagerError>>,
}

impl Election {
    /// Stops electing and releases the Lease, so a successor need not wait for it to expire.
    pub async fn release(self) {
        drop(self.leader);
        if tokio::time::timeout(Duration::from_secs(5), self.task)
            .await
            .is_err()
        {
            tracing::warn!("the leader Lease was not released in time; it will expire");
        }
    }
}

/// Starts electing on Lease [`LEASE_NAME`].
pub async fn start(
    client: kube::Client,
    le: &LeaderElection,
) -> Result<Election, LeaseManagerError> {
    let duration = le.lease_duration.as_secs().max(2);
    let manager = LeaseManagerBuilder::new(client, LEASE_NAME)
        .with_namespace(&le.namespace)
        .with_identity(&le.identity)
        .with_duration(duration)
        .with_grace((duration / 3).max(1))
        .build()
        .await?;
    let (leader, task) = manager.watch().await;
    tracing::info!(lease = LEASE_NAME, namespace = %le.namespace, identity = %le.identity, "leader election on");
    Ok(Election { leader, task })
}

/// A default holder identity: host name plus the process id.
pub fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "volhealth-remediate".to_string());
    format!("{host}_{:x}", std::process::id())
}
