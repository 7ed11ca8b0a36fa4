//! The monitor against the embedded API server and the reference driver, all in this process.
//! Each volume status surfaces on its claim and clears on recovery, in List and in Get mode;
//! steady state and a restart write nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use support::World;

const STATUSES: [(&str, &str); 3] = [
    ("Inaccessible", "PathGone"),
    ("DataLoss", "BlocksLost"),
    ("Degraded", "SlowDisk"),
];

/// Injects each status on its own volume, waits for it on the claim, checks the Events, then
/// clears all and waits for the claims to be clean; finally, nothing is written while nothing changes.
async fn each_status_appears_and_clears(caps: &str, probes_per_cycle: f64) {
    let world = World::start(caps).await;
    let mut volumes = Vec::new();
    for (i, _) in STATUSES.iter().enumerate() {
        volumes.push(world.bound_claim(&format!("claim-{i}")).await);
    }
    let healthy = world.bound_claim("claim-healthy").await;
    // Binding the claims patched their status too: count from here.
    let base = world.status_patches().await;
    let monitor = world.start_monitor("monitor").await;
    monitor.wait_probes(probes_per_cycle).await;
    assert_eq!(
        world.status_patches().await,
        base,
        "healthy volumes: nothing to write"
    );

    for (i, (status, reason)) in STATUSES.iter().enumerate() {
        world.inject_condition(&volumes[i], status, reason);
    }
    for (i, (status, reason)) in STATUSES.iter().enumerate() {
        world
            .wait_conditions(&format!("claim-{i}"), &[(status, reason)])
            .await;
    }
    assert!(
        world.conditions("claim-healthy").await.is_empty(),
        "{healthy} stays clean"
    );
    world.wait_event("claim-0", "VolumeHealthDegraded").await;
    monitor
        .wait_metrics("the DataLoss series of claim-1", |text| {
            text.contains(r#"csi_controller_volume_health_status{namespace="default",persistentvolumeclaim="claim-1",status="DataLoss",reason="BlocksLost"} 1"#)
        })
        .await;

    let written = world.status_patches().await;
    assert_eq!(written - base, 3.0, "one write per change");
    monitor.wait_probes(3.0 * probes_per_cycle).await;
    assert_eq!(
        world.status_patches().await,
        written,
        "steady state writes nothing"
    );

    for v in &volumes {
        world.clear_condition(v);
    }
    for i in 0..STATUSES.len() {
        world.wait_conditions(&format!("claim-{i}"), &[]).await;
    }
    world.wait_event("claim-2", "VolumeHealthRecovered").await;
    monitor
        .wait_metrics("claim-1's series to be removed on recovery", |text| {
            !text.contains(r#"persistentvolumeclaim="claim-1""#)
        })
        .await;
    let written = world.status_patches().await;
    assert_eq!(written - base, 6.0);
    monitor.wait_probes(3.0 * probes_per_cycle).await;
    assert_eq!(
        world.status_patches().await,
        written,
        "steady state after recovery writes nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_list_mode_each_status_appears_and_clears() {
    each_status_appears_and_clears("list,get", 1.0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_get_mode_each_status_appears_and_clears() {
    // Four bound volumes: one cycle is four Get calls.
    each_status_appears_and_clears("get", 4.0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_list_without_get_still_detects_and_clears() {
    let world = World::start("list").await;
    let vol = world.bound_claim("claim-a").await;
    let monitor = world.start_monitor("monitor").await;
    world
        .inject_and_wait(&vol, "claim-a", "Degraded", "SlowDisk")
        .await;
    world.clear_condition(&vol);
    world.wait_conditions("claim-a", &[]).await;
    assert_eq!(
        monitor
            .metric(
                "csi_volume_health_probe_total",
                &[r#"method="ControllerGetVolumeHealth""#]
            )
            .await,
        0.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_restart_writes_nothing_when_nothing_changed() {
    let world = World::start("list,get").await;
    let a = world.bound_claim("claim-a").await;
    let _b = world.bound_claim("claim-b").await;
    let first = world.start_monitor("monitor-1").await;
    world
        .inject_and_wait(&a, "claim-a", "Inaccessible", "PathGone")
        .await;
    first.stop();
    let written = world.status_patches().await;
    let second = world.start_monitor("monitor-2").await;
    second.wait_probes(4.0).await;
    assert_eq!(
        world.status_patches().await,
        written,
        "a restart with unchanged health writes nothing"
    );
    assert_eq!(
        second
            .metric("csi_volume_health_status_writes_total", &[])
            .await,
        0.0
    );
    // The restarted monitor still knows the stored condition: its series is there.
    let text = second.metrics().await;
    assert!(
        text.contains(
            r#"persistentvolumeclaim="claim-a",status="Inaccessible",reason="PathGone"} 1"#
        ),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monitor_picks_up_claims_bound_after_start() {
    let world = World::start("get").await;
    let monitor = world.start_monitor("monitor").await;
    // A new PV and claim, created while the monitor runs.
    let vol = world.bound_claim("late").await;
    world
        .inject_and_wait(&vol, "late", "DataLoss", "BlocksLost")
        .await;
    // A claim that is still Pending is not written; once Bound, it is.
    let pending = world.pending_claim("pending").await;
    world.inject_condition(&pending, "Degraded", "SlowDisk");
    monitor.wait_probes(4.0).await;
    assert!(
        world.conditions("pending").await.is_empty(),
        "a Pending claim is not written"
    );
    world.mark_bound("pending").await;
    world
        .wait_conditions("pending", &[("Degraded", "SlowDisk")])
        .await;
}
