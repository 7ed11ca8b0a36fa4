//! The agent in this process with the reference driver (also in this process) registered through
//! the kubelet's plugin registration directory, against the embedded API server, with the
//! kubelet's part played by hand: the agent reports every volume and storage condition and
//! clears it, raises one Event per transition, probes only the volumes the kubelet attempted to
//! mount (including one whose stage failed), and writes nothing in steady state. Conditions are
//! injected through the same library as `volhealth inject`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

mod support;

use support::{DRIVER, NODE, WAIT, World};
use volhealth_testkit::wait_for as wait_for_async;
use volhealth_testkit::{api_patches, metric, storage_probes, wait_cycles};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_reports_and_clears_every_condition() {
    let w = World::start().await;
    let handle = w.mounted_pod("web").await;
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
        w.inject_node_volume(&handle, status, reason);
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
    let handle = w.mounted_pod("web").await;
    let (_agent, url) = w.start_agent("agent", "nodeatok", NODE).await;
    wait_cycles(&url, 1.0).await;
    w.inject_node_volume(&handle, "Inaccessible", "Gone");
    w.inject(&[
        "storage",
        "--status",
        "StorageUnreachable",
        "--reason",
        "Partition",
    ]);
    w.wait_event("Pod", "web", "Warning", "VolumeHealthDegraded")
        .await;
    w.wait_event("CSINode", NODE, "Warning", "StorageHealthDegraded")
        .await;
    w.inject(&["clear", "volume", &handle, "--side", "node"]);
    w.inject(&["clear", "storage"]);
    w.wait_event("Pod", "web", "Normal", "VolumeHealthRecovered")
        .await;
    w.wait_event("CSINode", NODE, "Normal", "StorageHealthRecovered")
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
    w.inject_node_volume(&idle, "Degraded", "NeverAsked");
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
