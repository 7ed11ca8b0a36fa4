//! The monitor in this process, against the embedded API server and the reference driver over
//! real HTTP and a real unix socket: faults around it: a driver that dies, paging chaos,
//! unknown values, and two replicas with leader election.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use std::time::Duration;
use support::{Monitor, NS, WAIT, World};
use volhealth_driver::injection::ListChaos;
use volhealth_monitor::LeaderElection;
use volhealth_testkit::{http_get, metric_sum, wait_for, wait_until};

/// A world (the driver lists and gets) whose monitor has written the injected `status`/`reason`
/// on claim-a: the world, claim-a's volume and the monitor.
async fn monitor_showing(status: &str, reason: &str) -> (World, String, Monitor) {
    let world = World::start("list,get").await;
    let vol = world.bound_claim("claim-a").await;
    let monitor = world.start_monitor("monitor").await;
    world.inject_condition(&vol, status, reason);
    world.wait_conditions("claim-a", &[(status, reason)]).await;
    (world, vol, monitor)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_keeps_conditions_while_the_driver_is_down_and_resumes() {
    let (mut world, vol, monitor) = monitor_showing("Degraded", "SlowDisk").await;
    let written = world.status_patches().await;

    world.kill_driver();
    let errors = r#"result="error""#;
    wait_metric_at_least(
        &monitor,
        "probe errors to be counted",
        "csi_volume_health_probe_total",
        &[errors],
        3.0,
    )
    .await;
    assert_eq!(
        world.conditions("claim-a").await,
        vec![("Degraded".to_string(), "SlowDisk".to_string())]
    );
    assert_eq!(
        world.status_patches().await,
        written,
        "a failed RPC is not a recovery"
    );

    world.clear_condition(&vol);
    world.start_driver().await;
    world.wait_conditions("claim-a", &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_rpc_failures_keep_conditions() {
    let (world, vol, monitor) = monitor_showing("Inaccessible", "PathGone").await;
    world.fail_rpc("ControllerListVolumeHealth", "UNAVAILABLE", None);
    world.clear_condition(&vol);
    let errors = [
        r#"method="ControllerListVolumeHealth""#,
        r#"result="error""#,
    ];
    wait_metric_at_least(
        &monitor,
        "list errors to be counted",
        "csi_volume_health_probe_total",
        &errors,
        3.0,
    )
    .await;
    assert_eq!(
        world.conditions("claim-a").await.len(),
        1,
        "kept while listing fails"
    );
    world.inject(|i| i.rpc.clear());
    world.wait_conditions("claim-a", &[]).await;
}

/// Waits until the monitor's samples of `name` matching `labels` add up to at least `n`.
async fn wait_metric_at_least(monitor: &Monitor, what: &str, name: &str, labels: &[&str], n: f64) {
    monitor
        .wait_metrics(what, |text| metric_sum(text, name, labels) >= n)
        .await;
}

/// Asserts that the monitor's samples of `name` still add up to `n` after `probes` more
/// successful probes.
async fn assert_metric_stays(monitor: &Monitor, name: &str, n: f64, probes: f64, why: &str) {
    monitor.wait_probes(probes).await;
    assert_eq!(monitor.metric(name, &[]).await, n, "{why}");
}

async fn chaos_causes_no_false_clear(caps: &str) -> Monitor {
    let world = World::start(caps).await;
    let mut vols = Vec::new();
    for i in 0..10 {
        vols.push(world.bound_claim(&format!("claim-{i}")).await);
    }
    let base = world.status_patches().await;
    let monitor = world
        .start_monitor_with("monitor", |c| c.list_page_size = 3)
        .await;
    for v in &vols {
        world.inject_condition(v, "Degraded", "SlowDisk");
    }
    for i in 0..10 {
        world
            .wait_conditions(&format!("claim-{i}"), &[("Degraded", "SlowDisk")])
            .await;
    }
    let written = world.status_patches().await;
    assert_eq!(written - base, 10.0);
    world.inject(|i| {
        i.list_chaos = ListChaos {
            duplicates: true,
            omissions: true,
        }
    });
    // Ten cycles of four pages each, checking every claim as they go.
    let pages = r#"method="ControllerListVolumeHealth",result="success""#;
    let start = monitor
        .metric("csi_volume_health_probe_total", &[pages])
        .await;
    wait_until(2 * WAIT, "forty pages listed under chaos", || async {
        for i in 0..10 {
            assert_eq!(
                world.conditions(&format!("claim-{i}")).await.len(),
                1,
                "claim-{i} falsely cleared"
            );
        }
        monitor
            .metric("csi_volume_health_probe_total", &[pages])
            .await
            >= start + 40.0
    })
    .await;
    assert_eq!(world.status_patches().await, written, "chaos wrote nothing");
    monitor
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_list_chaos_causes_no_false_clear() {
    let monitor = chaos_causes_no_false_clear("list,get").await;
    // Omitted volumes were confirmed with Get (still degraded), so the chaos really happened.
    let gets = [
        r#"method="ControllerGetVolumeHealth""#,
        r#"result="success""#,
    ];
    assert!(monitor.metric("csi_volume_health_probe_total", &gets).await > 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_list_chaos_without_get_causes_no_false_clear() {
    let _monitor = chaos_causes_no_false_clear("list").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_unknown_status_warns_and_is_not_written() {
    let world = World::start("get").await;
    let vol = world.bound_claim("claim-a").await;
    let monitor = world.start_monitor("monitor").await;
    world.inject_condition(&vol, "9", "FromTheFuture");
    let unknown = "csi_volume_health_unknown_condition_total";
    let status_9 = [r#"status="9""#];
    wait_metric_at_least(
        &monitor,
        "the unknown-condition counter",
        unknown,
        &status_9,
        1.0,
    )
    .await;
    assert_metric_stays(&monitor, unknown, 1.0, 3.0, "once per transition").await;
    assert!(world.conditions("claim-a").await.is_empty());
    world
        .wait_event("claim-a", "UnknownVolumeHealthCondition")
        .await;
}

fn writes(text: &str) -> f64 {
    metric_sum(text, "csi_volume_health_status_writes_total", &[])
}

/// The monitors' leader-election Lease.
const LEASE: &str = "external-health-monitor-leader-hostpathvolhealthio";

/// Who holds `lease` (None when nobody does).
fn holder(lease: Lease) -> Option<String> {
    lease.spec?.holder_identity.filter(|h| !h.is_empty())
}

/// Leader election on a Lease in the claims' namespace, with the default timings.
fn leader_election() -> LeaderElection {
    LeaderElection {
        namespace: Some(NS.to_string()),
        ..LeaderElection::default()
    }
}

/// Waits until somebody holds the monitors' Lease.
async fn wait_for_a_holder(leases: &Api<Lease>, what: &str) {
    wait_for(WAIT, what, || async {
        holder(leases.get(LEASE).await.ok()?)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_two_replicas_with_leader_election_never_both_write() {
    let world = World::start("list,get").await;
    let vols = [
        world.bound_claim("claim-a").await,
        world.bound_claim("claim-b").await,
    ];
    let le = LeaderElection {
        lease_duration: Duration::from_secs(4),
        renew_deadline: Duration::from_secs(3),
        retry_period: Duration::from_secs(1),
        ..leader_election()
    };
    let base = world.status_patches().await;
    let one = world
        .start_monitor_with("replica-1", |c| c.leader_election = Some(le.clone()))
        .await;
    let two = world
        .start_monitor_with("replica-2", |c| c.leader_election = Some(le.clone()))
        .await;
    let leases = Api::<Lease>::namespaced(world.admin.clone(), NS);
    wait_for_a_holder(&leases, "a lease holder").await;

    world.inject_condition(&vols[0], "Degraded", "SlowDisk");
    world
        .wait_conditions("claim-a", &[("Degraded", "SlowDisk")])
        .await;
    // Several cycles later, exactly one replica has written.
    one.wait_probes(3.0).await;
    let (w1, w2) = (writes(&one.metrics().await), writes(&two.metrics().await));
    assert!(
        (w1 > 0.0) != (w2 > 0.0),
        "exactly one replica writes: {w1} vs {w2}"
    );
    assert_eq!(world.status_patches().await - base, 1.0);

    // The leader goes away (as a killed process: its Lease is not released, it expires); the
    // other takes over and writes the next change.
    let (leader, follower) = if w1 > 0.0 { (one, two) } else { (two, one) };
    leader.service.kill().expect("the leader is killed");
    world.inject_condition(&vols[1], "Inaccessible", "PathGone");
    world
        .wait_conditions("claim-b", &[("Inaccessible", "PathGone")])
        .await;
    assert!(
        writes(&follower.metrics().await) > 0.0,
        "the new leader wrote"
    );
    assert_eq!(world.status_patches().await - base, 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_counts_writes_dropped_by_a_gated_api_server_and_retries_slowly() {
    let world =
        World::start_with("get", &["--feature-gates", "CSIVolumeHealth=false"], |_| {}).await;
    let vol = world.bound_claim("claim-a").await;
    let base = world.status_patches().await;
    let monitor = world.start_monitor("monitor").await;
    world.inject_condition(&vol, "Degraded", "SlowDisk");
    wait_metric_at_least(
        &monitor,
        "a dropped write to be counted",
        "csi_volume_health_status_writes_dropped_total",
        &[],
        1.0,
    )
    .await;
    // One more cycle (of 1s, one Get each): inside the first hold of two intervals, so no new write.
    monitor.wait_probes(1.0).await;
    assert_eq!(
        world.status_patches().await - base,
        1.0,
        "held back after a dropped write"
    );
    // The hold ends after two intervals, the next one after four more: retried slowly, not dropped.
    wait_metric_at_least(
        &monitor,
        "the retry after the first hold",
        "csi_volume_health_status_writes_dropped_total",
        &[],
        2.0,
    )
    .await;
    assert_metric_stays(
        &monitor,
        "csi_volume_health_status_writes_dropped_total",
        2.0,
        2.0,
        "the second hold is longer than the first",
    )
    .await;
    assert!(world.conditions("claim-a").await.is_empty());
    assert_eq!(
        monitor
            .log
            .text()
            .matches("retrying this object slowly")
            .count(),
        1,
        "logged once"
    );
    // Said where an operator looks: /readyz (still 200), a gauge, and one Event.
    let readyz = monitor.metrics_url.replace("/metrics", "/readyz");
    let (code, _, body) = http_get(&readyz, None).unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains(
            "warning: the API server accepts pvc.status.healthStatus writes but drops the field"
        ),
        "{body}"
    );
    assert_eq!(
        monitor
            .metric("csi_volume_health_status_field_dropped", &[])
            .await,
        1.0
    );
    world.wait_event("claim-a", "HealthStatusNotStored").await;
}

/// Stopped as SIGTERM stops `volhealth monitor` (its shutdown future completes), the leader
/// releases its Lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_releases_its_lease_on_shutdown() {
    let world = World::start("list,get").await;
    let one = world
        .start_monitor_with("replica-1", |c| c.leader_election = Some(leader_election()))
        .await;
    let leases = Api::<Lease>::namespaced(world.admin.clone(), NS);
    wait_for_a_holder(&leases, "replica-1 to hold the lease").await;
    let exit = one.service.stop();
    assert!(exit.is_ok(), "clean exit on shutdown: {exit:?}");
    // Released, not merely left to expire: the holder is gone from the Lease.
    let lease = leases.get(LEASE).await.expect("get lease");
    assert_eq!(holder(lease), None, "the lease was released on shutdown");
}
