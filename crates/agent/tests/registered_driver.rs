//! The agent in this process with the reference driver (also in this process) registered through
//! the kubelet's plugin registration directory, against the embedded API server, with the
//! kubelet's part played by hand: the agent reports every volume and storage condition and
//! clears it, raises one Event per transition, probes only the volumes the kubelet attempted to
//! mount (including one whose stage failed), and writes nothing in steady state. Conditions are
//! injected through the same library as `volhealth inject`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use std::time::Duration;
use volhealth_agent::AgentConfig;
use volhealth_driver::injection::Side;
use volhealth_local_cluster::inject::{Clear, InjectRequest, Injection, VolumeCondition};
use volhealth_testkit::wait_for as wait_for_async;
use volhealth_testkit::{
    Driver, KUBELET_DRIVER as DRIVER, KUBELET_NODE as NODE, KubeletNode, Service, api_patches,
    free_addr, http_text, metric, run_agent, storage_probes, wait_cycles,
};

const WAIT: Duration = Duration::from_secs(40);

/// One node's world: the node cluster, and the reference driver registered in its kubelet root.
struct World {
    node: KubeletNode,
    _driver: Driver,
}

impl std::ops::Deref for World {
    type Target = KubeletNode;
    fn deref(&self) -> &KubeletNode {
        &self.node
    }
}

/// What `volhealth inject ARGS` asks for, for the forms these tests use.
fn injection(args: &[&str]) -> Injection {
    let flag = |name: &str| {
        args.iter()
            .position(|a| *a == name)
            .map(|i| args[i + 1].to_string())
    };
    let side = |s: Option<String>| match s.as_deref() {
        Some("node") => Side::Node,
        Some("controller") => Side::Controller,
        other => panic!("no side {other:?}"),
    };
    let required = |name: &str| flag(name).unwrap_or_else(|| panic!("{args:?} needs {name}"));
    match args {
        ["clear", "volume", id, ..] => Injection::Clear {
            what: Clear::Volume {
                volume_id: id.to_string(),
                side: flag("--side").map(|s| side(Some(s))),
            },
        },
        ["clear", "storage"] => Injection::Clear {
            what: Clear::Storage { node: None },
        },
        ["volume", id, ..] => Injection::Volume {
            volume_id: id.to_string(),
            condition: VolumeCondition {
                side: side(flag("--side")),
                status: required("--status"),
                reason: required("--reason"),
                message: String::new(),
            },
        },
        ["storage", ..] => Injection::Storage {
            node: None,
            status: required("--status"),
            reason: required("--reason"),
            message: String::new(),
            access_mode: flag("--access-mode"),
            volume_mode: flag("--volume-mode"),
        },
        other => panic!("no such injection in these tests: {other:?}"),
    }
}

impl World {
    async fn start() -> World {
        let node = KubeletNode::start(&[]).await;
        let registration = node.registration_dir();
        let driver = Driver::start_configured(node.dir.path(), DRIVER, NODE, |c| {
            c.registration_dir = Some(registration);
            // These tests inject their conditions; a probe slowed by a busy test machine must
            // not add a real SlowIo or IoProbeTimedOut of its own.
            c.io_probe_slow = Duration::from_secs(10);
            c.io_probe_timeout = Duration::from_secs(20);
        })
        .await;
        World {
            node,
            _driver: driver,
        }
    }

    /// `volhealth inject --state-dir STATE ARGS...`, through the library the command runs.
    fn inject(&self, args: &[&str]) {
        let request = InjectRequest {
            dir: None,
            state_dir: Some(self.state.clone()),
            what: injection(args),
        };
        let done = std::thread::scope(|s| {
            s.spawn(|| volhealth_testkit::block_on(volhealth_local_cluster::inject::run(request)))
                .join()
                .expect("the injection's thread")
        });
        assert!(done.is_ok(), "inject {args:?} failed: {done:?}");
    }

    /// Waits until object `kind` `name` has an Event of `event_type` and `reason` from the agent.
    async fn wait_event(&self, kind: &str, name: &str, event_type: &str, reason: &str) {
        let what = format!("a {event_type} {reason} Event on {kind} {name}");
        wait_for_async(WAIT, &what, || async {
            self.events_about(kind, name)
                .await
                .iter()
                .any(|(t, r, c)| t == event_type && r == reason && c == "volhealth-agent")
                .then_some(())
        })
        .await;
    }

    /// Starts the agent for `node_name` as the user of `token` (as `volhealth agent --interval
    /// 1s --timeout 5s` discovering its drivers in the kubelet root); returns it and its
    /// /metrics URL once that answers.
    async fn start_agent(&self, name: &str, token: &str, node_name: &str) -> (Service, String) {
        let address = free_addr();
        let mut config = AgentConfig::new(node_name);
        config.kubeconfig = Some(self.token_kubeconfig(token));
        config.kubelet_root_dir = self.root.clone();
        config.interval = Duration::from_secs(1);
        config.timeout = Duration::from_secs(5);
        config.http_endpoint = Some(address);
        let agent = run_agent(name, config);
        let url = format!("http://{address}/metrics");
        wait_for_async(WAIT, "the agent's HTTP endpoint", || async {
            assert!(!agent.ended(), "agent {name} ended before serving HTTP");
            http_text(&url).await.map(|_| ())
        })
        .await;
        (agent, url)
    }
}

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
