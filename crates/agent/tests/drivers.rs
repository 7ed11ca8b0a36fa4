//! The agent in this process follows drivers that come, go and die, and backs off when the API
//! server drops its writes: the reference driver also runs in this process, registered through
//! the kubelet's plugin registration directory, and dies as a killed process does (its sockets
//! left behind); the embedded API server runs with the flags a test gives it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use support::{DRIVER, NODE, WAIT, World, start_driver};
use volhealth_testkit::wait_for as wait_for_async;
use volhealth_testkit::{CapturedLog, api_patches, metric, storage_probes, wait_cycles};

/// Waits until the sum of the samples on the metrics page at `url` that contain all of `parts`
/// is at least `n`.
async fn wait_metric_at_least(url: &str, what: &str, parts: &[&str], n: f64) {
    wait_for_async(WAIT, what, || async {
        (metric(url, parts).await >= n).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_keeps_conditions_when_the_driver_dies() {
    let mut w = World::start().await;
    let handle = w.slow_web_pod().await;
    w.inject(&[
        "storage",
        "--status",
        "StorageDegraded",
        "--reason",
        "SlowDisks",
    ]);
    let (_agent, url) = w.start_agent("agent", "nodeatok", NODE).await;
    wait_for_async(WAIT, "Degraded on the pod", || async {
        (!w.pod_conditions("web").await.is_empty()).then_some(())
    })
    .await;
    wait_for_async(WAIT, "StorageDegraded on the CSINode", || async {
        w.csinode()
            .await?
            .status?
            .storage_health
            .filter(|s| !s.is_empty())
            .map(|_| ())
    })
    .await;
    // A status number this version does not know is never taken for health: Degraded stays.
    w.inject(&["clear", "volume", &handle, "--side", "node"]);
    w.inject_node_volume(&handle, "9", "FromTheFuture");
    let unknown = ["csi_volume_health_unknown_condition_total{", "status=\"9\""];
    wait_metric_at_least(&url, "the unknown status counted", &unknown, 1.0).await;
    wait_cycles(&url, 2.0).await;
    assert_eq!(
        metric(&url, &unknown).await,
        1.0,
        "counted once per transition, as the monitor counts it"
    );
    assert_eq!(
        w.pod_conditions("web").await,
        vec![("data".into(), "Degraded".into(), "Slow".into())]
    );
    w.kill_driver();
    let errors = [
        "csi_volume_health_probe_total{",
        "method=\"NodeGetVolumeHealth\"",
        "result=\"error\"",
    ];
    wait_metric_at_least(&url, "failed probes of the dead driver", &errors, 3.0).await;
    assert_eq!(
        w.pod_conditions("web").await,
        vec![("data".into(), "Degraded".into(), "Slow".into())]
    );
    let storage = w
        .csinode()
        .await
        .and_then(|c| c.status?.storage_health)
        .unwrap_or_default();
    assert_eq!(
        storage.len(),
        1,
        "a dead driver clears nothing: {storage:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_picks_up_drivers_that_come_and_go() {
    let mut w = World::start().await;
    w.kill_driver();
    let reg_sock = w
        .root
        .join("plugins_registry")
        .join(format!("{DRIVER}-reg.sock"));
    let _ = std::fs::remove_file(&reg_sock);
    let (_agent, url) = w.start_agent("agent", "nodeatok", NODE).await;
    assert!(w.csinode().await.is_none(), "no driver, no CSINode");

    // A driver appears: registered, listed in a new CSINode, probed.
    let first = format!("unix://{}", w.dir.path().join("csi-1.sock").display());
    let logs = [
        ("driver-1", CapturedLog::new("info")),
        ("driver-2", CapturedLog::new("info")),
    ];
    let mut driver = start_driver(&w, &first, &logs[0].1).await;
    w.inject(&[
        "storage",
        "--status",
        "StorageUnreachable",
        "--reason",
        "InjectedPartition",
    ]);
    wait_for_async(WAIT, "StorageUnreachable from the new driver", || async {
        let c = w.csinode().await?;
        c.spec
            .drivers
            .iter()
            .any(|d| d.name == DRIVER)
            .then_some(())?;
        c.status?
            .storage_health
            .filter(|s| !s.is_empty())
            .map(|_| ())
    })
    .await;

    // It goes away and comes back on a different endpoint: only a new registration can find it.
    driver.kill();
    let _ = std::fs::remove_file(&reg_sock);
    let second = format!("unix://{}", w.dir.path().join("csi-2.sock").display());
    let _driver = start_driver(&w, &second, &logs[1].1).await;
    w.inject(&["clear", "storage"]);
    wait_for_async(
        WAIT,
        "the storage condition cleared through the re-registered driver",
        || async {
            let c = w.csinode().await?;
            c.status
                .and_then(|s| s.storage_health)
                .unwrap_or_default()
                .is_empty()
                .then_some(())
        },
    )
    .await;
    assert!(storage_probes(&url).await >= 2.0);
    // Registration is the kubelet's: the agent read both registrars' GetInfo but answered
    // neither's NotifyRegistrationStatus (the reference registrar logs every answer it gets).
    for (name, log) in &logs {
        let log = log.text();
        assert!(
            log.contains("starting the driver"),
            "{name}'s log was not caught:\n{log}"
        );
        assert!(
            !log.contains("registered with the node agent")
                && !log.contains("registration was refused"),
            "{name} got a registration answer:\n{log}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_backs_off_when_the_api_server_drops_health_fields() {
    let w = World::start_with(&["--feature-gates", "CSIVolumeHealth=false"]).await;
    w.slow_web_pod().await;
    let log = CapturedLog::new("info");
    let (_agent, url) = w.start_agent_logged("agent", "nodeatok", NODE, &log).await;
    let dropped = [
        "csi_volume_health_status_writes_total{",
        "resource=\"pods/status\"",
        "result=\"dropped\"",
    ];
    wait_metric_at_least(&url, "a dropped pod status write", &dropped, 1.0).await;
    let before = api_patches(&w.api, "pods", "status").await;
    wait_cycles(&url, 8.0).await;
    let added = api_patches(&w.api, "pods", "status").await - before;
    assert!(
        added <= 3.0,
        "{added} pod status writes in 8 cycles: not backed off"
    );
    assert!(
        w.pod_conditions("web").await.is_empty(),
        "the gated server stored nothing"
    );
    let log = log.text();
    let warnings = log
        .lines()
        .filter(|l| l.contains("default/web") && l.contains("did not store"))
        .count();
    assert_eq!(warnings, 1, "logged once:\n{log}");
}
