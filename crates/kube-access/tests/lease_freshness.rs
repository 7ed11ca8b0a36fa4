//! The one leader election the monitor and the remediation controller use
//! (`volhealth_kube_access::leader`), against the embedded API server: a replica leads once it holds
//! the Lease, and stops leading when the Lease stops being its own (another holder) or its
//! renewals stop being confirmed (the API server is gone) for longer than the renew deadline,
//! before another replica could take it over, whatever the Lease manager believes: the
//! remediation controller must not act on a Lease that may have passed on.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
use std::time::Duration;
use volhealth_kube_access::leader::{LeaderElection, start};
use volhealth_testkit::{ApiServer, client_for};

/// Waits until the election's leadership is `want`.
async fn leading(rx: &mut tokio::sync::watch::Receiver<bool>, want: bool, what: &str) {
    tokio::time::timeout(Duration::from_secs(20), rx.wait_for(|l| *l == want))
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leadership_ends_when_the_lease_is_not_this_replicas_or_not_fresh() {
    let dir = tempfile::tempdir().unwrap();
    let api = ApiServer::start(dir.path(), None).await;
    let client = client_for(&api.kubeconfig).await;
    let le = LeaderElection {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_secs(1),
        ..LeaderElection::default()
    };
    le.validate().unwrap();
    let mut election = start(client.clone(), "default", "test-lease", "replica-a", &le)
        .await
        .unwrap();
    leading(&mut election.leader, true, "the replica to lead").await;

    // Someone else's name on the Lease, freshly renewed: this replica stops at once.
    let leases = Api::<Lease>::namespaced(client, "default");
    let now = jiff::Timestamp::now().to_string();
    leases
        .patch(
            "test-lease",
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"spec": {"holderIdentity": "intruder", "renewTime": now}}),
            ),
        )
        .await
        .unwrap();
    leading(
        &mut election.leader,
        false,
        "leadership to end on another holder",
    )
    .await;

    // Back to this replica; then the API server goes away: no renewal is confirmed, and
    // leadership ends once the last confirmation is older than the renew deadline, although the
    // Lease (as stored) would still be valid for a while.
    leading(&mut election.leader, true, "the replica to lead again").await;
    let outage = api.stop_for_outage();
    let stopped = std::time::Instant::now();
    leading(
        &mut election.leader,
        false,
        "leadership to end in an outage",
    )
    .await;
    assert!(
        stopped.elapsed() < le.lease_duration + le.retry_period,
        "ended before another replica could take the Lease over: {:?}",
        stopped.elapsed()
    );
    let _api = outage.start_again().await;
    leading(
        &mut election.leader,
        true,
        "the replica to lead after the outage",
    )
    .await;
    election.release().await;
}
