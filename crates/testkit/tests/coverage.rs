//! Coverage you can see: the monitor publishes what watches its driver's volumes on the
//! driver's CSIDriver, the agent what watches each driver's volumes on its node's CSINode, and
//! `volhealth status` shows both per volume, never a volume nothing watches as healthy. Three
//! drivers: one with the v1.13 health RPCs, one that speaks only the legacy VOLUME_CONDITION
//! shape, and one with no health at all (node fault detection off).
//!
//! `status` is the `volhealth` binary of this workspace (built by `cargo test -p volhealth`, or
//! `cargo build -p volhealth`); without it that part is skipped, unless
//! `VOLHEALTH_REQUIRE_TOOLS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use k8s_openapi::api::storage::v1::{CSIDriver, CSINode};
use kube::api::Api;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use support::{free_addr, more_cycles};
use volhealth_agent::NodeFaultMode;
use volhealth_driver::{DriverConfig, HealthCapabilities};
use volhealth_testkit::{NodeWorld, Service, create, run_agent, run_monitor, wait_for};
use volhealth_writer::coverage;

const DRIVER: &str = "hostpath.volhealth.io";
const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(40);

/// The monitor and the agent, in-process, every second, against the world's driver.
fn start_writers(w: &NodeWorld, node_faults: NodeFaultMode) -> (Service, Service, [SocketAddr; 2]) {
    let (monitor_http, agent_http) = (free_addr(), free_addr());
    let monitor_config = w.monitor_config(Some(monitor_http));
    let monitor = run_monitor("monitor", monitor_config);
    let mut agent_config = w.agent_config("nodetok", Some(agent_http));
    agent_config.node_faults = node_faults;
    let agent = run_agent("agent", agent_config);
    (monitor, agent, [monitor_http, agent_http])
}

/// A world whose driver `configure` sets up, registered as a CSIDriver, and both writers
/// started over it.
async fn registered(
    configure: impl FnOnce(&mut DriverConfig),
    node_faults: NodeFaultMode,
) -> (NodeWorld, Service, Service, [SocketAddr; 2]) {
    let w = NodeWorld::with_driver(DRIVER, NODE, configure).await;
    register_csidriver(&w).await;
    let (monitor, agent, writers) = start_writers(&w, node_faults);
    (w, monitor, agent, writers)
}

/// The world's driver registered as a CSIDriver, as a cluster has it.
async fn register_csidriver(w: &NodeWorld) {
    create(
        &Api::<CSIDriver>::all(w.admin.clone()),
        json!({"metadata": {"name": DRIVER}, "spec": {}}),
    )
    .await;
}

/// Waits until the CSIDriver says `source` (and some mode) and the CSINode says `node` for the
/// driver; returns the CSIDriver's mode and resourceVersion.
async fn wait_published(w: &NodeWorld, source: &str, node: &str) -> (String, String) {
    let csidrivers = Api::<CSIDriver>::all(w.admin.clone());
    let csinodes = Api::<CSINode>::all(w.admin.clone());
    wait_for(
        WAIT,
        "both writers to publish what watches the volumes",
        || async {
            let d = csidrivers.get(DRIVER).await.ok()?;
            let a = d.metadata.annotations.clone()?;
            let n = csinodes.get(NODE).await.ok()?.metadata.annotations?;
            let on_node = coverage::parse_node(n.get(coverage::NODE_SOURCES)?).ok()?;
            (a.get(coverage::CONTROLLER_SOURCE)? == source && on_node.get(DRIVER)?.value() == node)
                .then(|| {
                    (
                        a.get(coverage::CONTROLLER_MODE)
                            .cloned()
                            .unwrap_or_default(),
                        d.metadata.resource_version.unwrap_or_default(),
                    )
                })
        },
    )
    .await
}

/// The `volhealth` binary next to this test's, if it was built.
fn volhealth_bin() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?.parent()?.join("volhealth");
    if bin.is_file() {
        return Some(bin);
    }
    assert!(
        std::env::var("VOLHEALTH_REQUIRE_TOOLS").as_deref() != Ok("1"),
        "the volhealth binary is required (VOLHEALTH_REQUIRE_TOOLS=1) but {} does not exist: build it with cargo build -p volhealth",
        bin.display()
    );
    eprintln!("SKIPPED the status part: {} is not built", bin.display());
    None
}

/// `volhealth status -A ARGS` as the admin: its standard output.
fn status(w: &NodeWorld, bin: &PathBuf, args: &[&str]) -> String {
    let out = std::process::Command::new(bin)
        .args(["status", "-A", "--color", "never", "--kubeconfig"])
        .arg(&w.api.kubeconfig)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "status failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// What `status` says of the one volume: asserts its table row (split into cells) is
/// `default pvc/claim-web DRIVER` and then `cells` (controller side, node side,
/// health), and answers its JSON entry and whether `status` calls the whole lot healthy.
fn volume_row(w: &NodeWorld, bin: &PathBuf, cells: &[&str]) -> (Value, bool) {
    let table = status(w, bin, &[]);
    let row: Vec<&str> = table
        .lines()
        .find(|l| l.contains("pvc/claim-web"))
        .unwrap_or_else(|| panic!("no row for the volume in:\n{table}"))
        .split_whitespace()
        .collect();
    let want = [&["default", "pvc/claim-web", DRIVER], cells].concat();
    assert_eq!(row, want, "the volume's row in:\n{table}");
    let doc: Value = serde_json::from_str(&status(w, bin, &["-o", "json"])).unwrap();
    (doc["volumes"][0].clone(), doc["healthy"] == true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_driver_with_the_health_rpcs_is_watched_by_them_on_both_sides() {
    let (w, monitor, agent, writers) = registered(|_| {}, NodeFaultMode::Auto).await;
    let (mode, rv) = wait_published(&w, "health-rpcs", "health-rpcs").await;
    assert!(mode == "list" || mode == "get", "{mode}");

    // Steady: more cycles write nothing more to the CSIDriver.
    more_cycles(&writers, 3.0).await;
    let again = Api::<CSIDriver>::all(w.admin.clone())
        .get(DRIVER)
        .await
        .unwrap();
    assert_eq!(again.metadata.resource_version.unwrap(), rv);

    if let Some(bin) = volhealth_bin() {
        let (json, healthy) = volume_row(&w, &bin, &["rpc", "rpc", "healthy"]);
        assert_eq!(json["controller"], "rpc");
        assert_eq!(json["node"], "rpc");
        assert_eq!(json["health"], "healthy");
        assert!(healthy);
    }
    w.stop([monitor, agent]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_only_driver_is_watched_through_the_bridge_on_both_sides() {
    let (w, monitor, agent, _) = registered(
        |c| {
            c.health = HealthCapabilities::NONE;
            c.legacy_condition = true;
        },
        NodeFaultMode::Auto,
    )
    .await;
    wait_published(&w, "legacy-volume-condition", "legacy-volume-condition").await;
    if let Some(bin) = volhealth_bin() {
        let (json, healthy) = volume_row(&w, &bin, &["legacy", "legacy", "healthy"]);
        assert_eq!(json["controller"], "legacy");
        assert!(healthy);
    }
    w.stop([monitor, agent]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_volume_nothing_watches_is_never_shown_as_healthy() {
    let (w, monitor, agent, _) = registered(
        |c| {
            c.health = HealthCapabilities::NONE;
        },
        NodeFaultMode::Off,
    )
    .await;
    let (mode, _) = wait_published(&w, "none", "none").await;
    assert_eq!(mode, "off");
    if let Some(bin) = volhealth_bin() {
        let (json, healthy) = volume_row(&w, &bin, &["none", "none", "not", "watched"]);
        assert_eq!(json["health"], "notWatched");
        assert!(!healthy, "a volume nothing watches is not healthy");
        let table = status(&w, &bin, &[]);
        assert!(table.contains("1 not watched"), "{table}");
    }
    w.stop([monitor, agent]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_csidriver_the_controller_side_is_unknown_and_the_monitor_carries_on() {
    let w = NodeWorld::with_driver(DRIVER, NODE, |c| {
        c.health = HealthCapabilities::NONE;
    })
    .await;
    let (monitor, agent, writers) = start_writers(&w, NodeFaultMode::Off);
    let csinodes = Api::<CSINode>::all(w.admin.clone());
    wait_for(WAIT, "the agent to publish", || async {
        let n = csinodes.get(NODE).await.ok()?.metadata.annotations?;
        n.contains_key(coverage::NODE_SOURCES).then_some(())
    })
    .await;
    // A monitor with nothing to probe counts no cycles: the agent's show that time has passed.
    more_cycles(&writers[1..], 2.0).await;
    assert!(
        !monitor.ended(),
        "the monitor carries on without a CSIDriver"
    );
    if let Some(bin) = volhealth_bin() {
        let (json, healthy) = volume_row(&w, &bin, &["unknown", "none", "unknown"]);
        assert_eq!(json["health"], "unknown");
        assert!(healthy, "unknown is said, but is no warning");
    }
    w.stop([monitor, agent]);
}
