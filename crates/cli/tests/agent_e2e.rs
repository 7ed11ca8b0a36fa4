//! End to end: the agent reports every volume and storage condition and clears it, probes only the volumes the
//! kubelet attempted to mount (including one whose stage failed), and writes nothing in steady state.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod agent_world;
mod support;

use agent_world::*;
use support::wait_for_async;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_reports_and_clears_every_condition() {
    let w = World::start().await;
    let handle = w.create_volume("vol-web").await;
    let uid = w.pod_with_volume("web", &handle, NODE).await;
    assert!(
        w.kubelet_mount(&handle, &uid, "pv-web").await,
        "staging a created volume succeeds"
    );
    let (_agent, url) = w.start_agent("agent", "nodeatok", NODE).await;

    // The driver is found through plugins_registry and listed in the CSINode the agent creates.
    wait_for_async(WAIT, "the CSINode listing the driver", || async {
        w.csinode().await.filter(|c| {
            c.spec
                .drivers
                .iter()
                .any(|d| d.name == DRIVER && d.node_id == NODE)
        })
    })
    .await;
    wait_cycles(&url, 2.0).await;
    assert!(
        w.pod_conditions("web").await.is_empty(),
        "a healthy volume has no conditions"
    );

    for (status, reason) in [
        ("Inaccessible", "InjectedGone"),
        ("DataLoss", "InjectedCorrupt"),
        ("Degraded", "InjectedSlow"),
    ] {
        w.inject(&[
            "volume", &handle, "--side", "node", "--status", status, "--reason", reason,
        ]);
        let want = vec![("data".to_string(), status.to_string(), reason.to_string())];
        wait_for_async(WAIT, &format!("{status} on the pod"), || async {
            (w.pod_conditions("web").await == want).then_some(())
        })
        .await;
        let series = format!(
            "csi_node_volume_health_status{{namespace=\"default\",pod=\"web\",volume=\"data\",status=\"{status}\",reason=\"{reason}\"}} 1"
        );
        let text = reqwest::get(&url).await.unwrap().text().await.unwrap();
        assert!(text.contains(&series), "missing {series}");
        w.inject(&["clear", "volume", &handle, "--side", "node"]);
        wait_for_async(WAIT, &format!("{status} to clear"), || async {
            w.pod_conditions("web").await.is_empty().then_some(())
        })
        .await;
    }

    for (status, reason, scoped) in [
        ("StorageUnreachable", "InjectedPartition", false),
        ("StorageDegraded", "InjectedSlowDisks", true),
    ] {
        let mut args = vec!["storage", "--status", status, "--reason", reason];
        if scoped {
            args.extend([
                "--access-mode",
                "ReadWriteOnce",
                "--volume-mode",
                "Filesystem",
            ]);
        }
        w.inject(&args);
        let cond = wait_for_async(WAIT, &format!("{status} on the CSINode"), || async {
            let c = w.csinode().await?;
            let entry = c
                .status?
                .storage_health?
                .into_iter()
                .find(|e| e.name == DRIVER)?;
            entry
                .health_conditions?
                .into_iter()
                .find(|c| c.status == status && c.reason == reason)
        })
        .await;
        if scoped {
            assert_eq!(cond.access_mode.as_deref(), Some("ReadWriteOnce"));
            assert_eq!(cond.volume_mode.as_deref(), Some("Filesystem"));
        } else {
            assert_eq!((cond.access_mode, cond.volume_mode), (None, None));
        }
        assert!(cond.last_transition_time.is_some());
        w.inject(&["clear", "storage"]);
        wait_for_async(WAIT, &format!("{status} to clear"), || async {
            let c = w.csinode().await?;
            let empty = c
                .status
                .and_then(|s| s.storage_health)
                .unwrap_or_default()
                .iter()
                .all(|e| e.name != DRIVER);
            empty.then_some(())
        })
        .await;
    }

    // Steady state: several more cycles, not one more status write.
    let pods_before = api_patches(&w.api, "pods", "status").await;
    let csinodes_before = api_patches(&w.api, "csinodes", "status").await;
    assert!(
        pods_before >= 6.0 && csinodes_before >= 4.0,
        "the writes above were counted"
    );
    wait_cycles(&url, 4.0).await;
    assert_eq!(api_patches(&w.api, "pods", "status").await, pods_before);
    assert_eq!(
        api_patches(&w.api, "csinodes", "status").await,
        csinodes_before
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_raises_events_on_the_pod_and_the_csinode() {
    let w = World::start().await;
    let handle = w.create_volume("vol-web").await;
    let uid = w.pod_with_volume("web", &handle, NODE).await;
    assert!(w.kubelet_mount(&handle, &uid, "pv-web").await);
    let (_agent, url) = w.start_agent("agent", "nodeatok", NODE).await;
    wait_cycles(&url, 1.0).await;
    w.inject(&[
        "volume",
        &handle,
        "--side",
        "node",
        "--status",
        "Inaccessible",
        "--reason",
        "Gone",
    ]);
    w.inject(&[
        "storage",
        "--status",
        "StorageUnreachable",
        "--reason",
        "Partition",
    ]);
    let has = |events: &[(String, String, String)], kind: &str, reason: &str| {
        events
            .iter()
            .any(|(t, r, c)| t == kind && r == reason && c == "volhealth-agent")
    };
    wait_for_async(WAIT, "a Warning Event on the pod", || async {
        has(
            &w.events_about("Pod", "web").await,
            "Warning",
            "VolumeHealthDegraded",
        )
        .then_some(())
    })
    .await;
    wait_for_async(WAIT, "a Warning Event on the CSINode", || async {
        has(
            &w.events_about("CSINode", NODE).await,
            "Warning",
            "StorageHealthDegraded",
        )
        .then_some(())
    })
    .await;
    w.inject(&["clear", "volume", &handle, "--side", "node"]);
    w.inject(&["clear", "storage"]);
    wait_for_async(WAIT, "a Normal Event on the pod", || async {
        has(
            &w.events_about("Pod", "web").await,
            "Normal",
            "VolumeHealthRecovered",
        )
        .then_some(())
    })
    .await;
    wait_for_async(WAIT, "a Normal Event on the CSINode", || async {
        has(
            &w.events_about("CSINode", NODE).await,
            "Normal",
            "StorageHealthRecovered",
        )
        .then_some(())
    })
    .await;
    // One Event per transition, not one per cycle.
    wait_cycles(&url, 3.0).await;
    assert_eq!(w.events_about("Pod", "web").await.len(), 2);
    assert_eq!(w.events_about("CSINode", NODE).await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_probes_only_attempted_volumes_and_reports_failed_stage() {
    let w = World::start().await;
    let mounted = w.create_volume("vol-mounted").await;
    let idle = w.create_volume("vol-idle").await;
    let uid_mounted = w.pod_with_volume("mounted", &mounted, NODE).await;
    let _uid_idle = w.pod_with_volume("idle", &idle, NODE).await;
    // A volume the driver does not have: its stage fails, and the kubelet has still attempted it.
    let uid_broken = w
        .pod_with_volume("broken", "vol-does-not-exist", NODE)
        .await;
    assert!(w.kubelet_mount(&mounted, &uid_mounted, "pv-mounted").await);
    assert!(
        !w.kubelet_mount("vol-does-not-exist", &uid_broken, "pv-broken")
            .await,
        "stage must fail"
    );
    // The idle volume is unhealthy in the driver, but the kubelet never tried to mount it.
    w.inject(&[
        "volume",
        &idle,
        "--side",
        "node",
        "--status",
        "Degraded",
        "--reason",
        "NeverAsked",
    ]);
    let (_agent, url) = w.start_agent("agent", "nodeatok", NODE).await;

    let broken = wait_for_async(WAIT, "the failed stage reported on the pod", || async {
        let c = w.pod_conditions("broken").await;
        (!c.is_empty()).then_some(c)
    })
    .await;
    assert!(
        broken
            .iter()
            .all(|(v, s, _)| v == "data" && s == "Inaccessible"),
        "{broken:?}"
    );
    wait_cycles(&url, 4.0).await;
    assert!(
        w.pod_conditions("idle").await.is_empty(),
        "a never-attempted volume is not probed"
    );
    assert!(w.pod_conditions("mounted").await.is_empty());
    // Two attempted volumes per cycle, never three.
    let cycles = storage_probes(&url).await;
    let volume_probes = metric(
        &url,
        &[
            "csi_volume_health_probe_total{",
            "method=\"NodeGetVolumeHealth\"",
        ],
    )
    .await;
    assert!(
        volume_probes <= 2.0 * (cycles + 1.0),
        "{volume_probes} volume probes in {cycles} cycles"
    );
    assert!(
        volume_probes >= 2.0 * (cycles - 1.0),
        "{volume_probes} volume probes in {cycles} cycles"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_with_the_gate_off_makes_no_calls_and_no_writes() {
    let w = World::start().await;
    let handle = w.create_volume("vol-web").await;
    let uid = w.pod_with_volume("web", &handle, NODE).await;
    assert!(w.kubelet_mount(&handle, &uid, "pv-web").await);
    w.inject(&[
        "volume", &handle, "--side", "node", "--status", "Degraded", "--reason", "Slow",
    ]);
    let gate = ["--feature-gates", "CSIVolumeHealth=false"];
    let (_off, off_url) = w
        .start_agent_with("agent-off", "nodeatok", NODE, &gate)
        .await;
    let ready = off_url.replace("/metrics", "/readyz");
    wait_for_async(WAIT, "the gated agent ready", || async {
        let r = reqwest::get(&ready).await.ok()?;
        r.status().is_success().then_some(())
    })
    .await;
    // A witness with the gate on: by the time it has run several cycles, the gated agent would have too.
    let (_on, on_url) = w.start_agent("agent-on", "nodeatok", NODE).await;
    wait_cycles(&on_url, 3.0).await;
    let text = reqwest::get(&off_url).await.unwrap().text().await.unwrap();
    assert!(
        !text.contains("csi_volume_health_probe_total{"),
        "the gated agent called a driver:\n{text}"
    );
    assert!(
        !text.contains("csi_volume_health_status_writes_total{"),
        "the gated agent wrote:\n{text}"
    );
    let log = std::fs::read_to_string(w.dir.path().join("agent-off.log")).unwrap();
    assert!(log.contains("CSIVolumeHealth is off"), "{log}");
}
