//! The driver in-process over a real unix socket, with injections made as `volhealth inject`
//! makes them (its status names parsed by the library, the change stored in the state dir):
//! injections take effect without a restart and survive one (the driver stopped and started
//! again on the same socket and state dir), bad input is refused.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod fixture;

use fixture::*;
use std::path::PathBuf;
use tonic::Code;
use tonic::transport::Channel;
use volhealth_csi::v1;
use volhealth_csi::v1::controller_client::ControllerClient;
use volhealth_driver::condition::{Condition, StorageCondition};
use volhealth_driver::injection::{self, ListChaos, Side, VolumeInjection};
use volhealth_driver::state::StateDir;
use volhealth_driver::{DriverConfig, HealthCapabilities, Mode};
use volhealth_testkit::{CapturedLog, Driver, WAIT, rpc_capabilities, wait_for};

/// `volhealth driver --node-id node-a`, the rest as `tune` sets it.
async fn start(
    dir: tempfile::TempDir,
    state: PathBuf,
    tune: impl FnOnce(&mut DriverConfig),
) -> TestDriver {
    TestDriver::start_with(dir, state, |c| {
        c.node_id = "node-a".into();
        tune(c);
    })
    .await
}

/// `volhealth driver` with its state in a fresh temporary directory.
async fn start_fresh(tune: impl FnOnce(&mut DriverConfig)) -> TestDriver {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    start(dir, state, tune).await
}

/// `volhealth inject volume ID --side SIDE --status STATUS --reason REASON --message MESSAGE`:
/// the status name (or raw number) parsed as the command parses it, the condition added.
fn inject_volume(
    state: &StateDir,
    id: &str,
    side: Side,
    status: &str,
    reason: &str,
    message: &str,
) -> volhealth_driver::Result<()> {
    let injected = VolumeInjection {
        volume_id: id.to_string(),
        side,
        condition: Condition::new(injection::parse_volume_status(status)?, reason, message),
    };
    injection::update(state, |i| i.add_volume(injected))
}

/// `volhealth inject rpc METHOD --code CODE`.
fn inject_rpc(state: &StateDir, method: &str, code: &str) {
    let code = injection::parse_grpc_code(code).unwrap();
    set_fault(state, method, code, 1.0, 0, None);
}

/// `volhealth inject list-chaos ...` (`ListChaos::default()` is `--off`).
fn inject_list_chaos(state: &StateDir, chaos: ListChaos) {
    injection::update(state, |i| i.list_chaos = chaos).unwrap();
}

async fn get_pairs(ctrl: &mut ControllerClient<Channel>, id: &str) -> Option<Vec<(i32, String)>> {
    controller_health(ctrl, id).await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injections_apply_without_restart_and_survive_one() {
    let driver = start_fresh(|_| {}).await;
    let state = StateDir::new(&driver.state);
    let mut ctrl = driver.controller().await;
    let id = create(&mut ctrl, "pvc-restart", 1 << 20, None).await;
    let side = Side::Controller;
    inject_volume(
        &state,
        &id,
        side,
        "Inaccessible",
        "ArrayOffline",
        "array a1 down",
    )
    .unwrap();
    inject_volume(&state, &id, side, "Degraded", "ReplicaLost", "").unwrap();
    let want = vec![
        (1, "ReplicaLost".to_string()),
        (2, "ArrayOffline".to_string()),
    ];
    wait_for(WAIT, "both injected conditions", || {
        let mut c = ctrl.clone();
        let (id, want) = (id.clone(), want.clone());
        async move { (get_pairs(&mut c, &id).await? == want).then_some(()) }
    })
    .await;

    // The driver stops and starts again on the same socket and state dir.
    let state_dir = driver.state.clone();
    let dir = driver.stop().await;
    let driver = start(dir, state_dir, |_| {}).await;
    let mut ctrl = driver.controller().await;
    wait_for(WAIT, "volume and injections after restart", || {
        let mut c = ctrl.clone();
        let (id, want) = (id.clone(), want.clone());
        async move { (get_pairs(&mut c, &id).await? == want).then_some(()) }
    })
    .await;
    // `volhealth inject clear volume ID --side controller`.
    injection::update(&state, |i| i.clear_volume(&id, Some(side))).unwrap();
    wait_for(WAIT, "cleared", || {
        let mut c = ctrl.clone();
        let id = id.clone();
        async move { get_pairs(&mut c, &id).await?.is_empty().then_some(()) }
    })
    .await;
    // A re-create after the restart is idempotent too.
    assert_eq!(create(&mut ctrl, "pvc-restart", 1 << 20, None).await, id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inject_cli_storage_raw_status_rpc_faults_and_list_chaos() {
    let driver = start_fresh(|c| {
        c.health = HealthCapabilities::parse("list,get,node-volume,node-storage").unwrap();
    })
    .await;
    let state = StateDir::new(&driver.state);
    let mut ctrl = driver.controller().await;
    let node = driver.node().await;
    let ids = [
        create(&mut ctrl, "pvc-1", 1 << 20, None).await,
        create(&mut ctrl, "pvc-2", 1 << 20, None).await,
        create(&mut ctrl, "pvc-3", 1 << 20, None).await,
    ];

    let bad = inject_volume(&state, &ids[0], Side::Node, "Broken", "X", "");
    assert!(bad.is_err(), "an unknown status name is refused");
    inject_volume(&state, &ids[0], Side::Node, "42", "FutureCondition", "").unwrap();
    wait_for(WAIT, "raw status 42 on the node side", || {
        let mut n = node.clone();
        let id = ids[0].clone();
        async move {
            let pairs = node_health(&mut n, &id, "").await.ok()?;
            pairs
                .contains(&(42, "FutureCondition".to_string()))
                .then_some(())
        }
    })
    .await;

    // `volhealth inject storage --status StorageDegraded --reason PathDegraded --access-mode
    // ReadWriteOnce --volume-mode Filesystem`.
    let storage = StorageCondition {
        status: injection::parse_storage_status("StorageDegraded").unwrap(),
        reason: "PathDegraded".into(),
        message: String::new(),
        access_mode: Some(injection::parse_access_mode("ReadWriteOnce").unwrap()),
        volume_mode: Some(injection::parse_volume_mode("Filesystem").unwrap()),
    };
    injection::update(&state, |i| i.add_storage(storage)).unwrap();
    wait_for(WAIT, "storage condition", || {
        let mut n = node.clone();
        async move {
            storage_health(&mut n)
                .await
                .ok()?
                .iter()
                .any(|b| {
                    b.status == 1 && b.reason == "PathDegraded" && b.volume_capability.is_some()
                })
                .then_some(())
        }
    })
    .await;

    inject_rpc(&state, "ControllerListVolumeHealth", "UNAVAILABLE");
    wait_for(WAIT, "list fails with UNAVAILABLE", || {
        let mut c = ctrl.clone();
        async move {
            let code = list_volume_health(&mut c, 0).await.err()?.code();
            (code == Code::Unavailable).then_some(())
        }
    })
    .await;
    inject_rpc(&state, "ControllerListVolumeHealth", "OK");
    inject_list_chaos(
        &state,
        ListChaos {
            duplicates: true,
            omissions: false,
        },
    );
    wait_for(WAIT, "duplicated entries across pages", || {
        let mut c = ctrl.clone();
        async move { (list_volume_health(&mut c, 1).await.ok()?.len() > 3).then_some(()) }
    })
    .await;
    inject_list_chaos(&state, ListChaos::default());
    // `volhealth inject clear all`.
    injection::update(&state, |i| *i = Default::default()).unwrap();
    let text =
        std::fs::read_to_string(driver.state.join("injections.json")).expect("injections file");
    assert!(
        !text.contains("FutureCondition") && !text.contains("PathDegraded"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_capabilities_flag_limits_what_is_advertised() {
    let driver = start_fresh(|c| {
        c.health = HealthCapabilities::parse("list").unwrap();
        c.mode = Mode::Controller;
    })
    .await;
    let (types, _) = rpc_capabilities(driver.channel().await).await;
    let types = types.expect("caps");
    assert!(types.contains(&17) && !types.contains(&16), "{types:?}");
    let mut node = driver.node().await;
    let e = node
        .node_get_info(v1::NodeGetInfoRequest {})
        .await
        .unwrap_err();
    assert_eq!(
        e.code(),
        Code::Unimplemented,
        "node service not served in controller mode"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_mounts_the_fallback_is_announced_once() {
    let dir = tempfile::tempdir().unwrap();
    // What `volhealth driver` logs by default.
    let log = CapturedLog::new("info");
    let driver = Driver::start_configured_logged(
        dir.path(),
        volhealth_driver::config::DEFAULT_DRIVER_NAME,
        "node-a",
        &log,
        |c| c.allow_mounts = false,
    )
    .await;
    let channel =
        volhealth_csi::client::connect(&driver.endpoint, std::time::Duration::from_secs(30))
            .await
            .expect("connect to the driver");
    let mut node = v1::node_client::NodeClient::new(channel);
    node.node_get_info(v1::NodeGetInfoRequest {})
        .await
        .expect("NodeGetInfo");
    let text = wait_for(WAIT, "the fallback announcement", || {
        let text = log.text();
        async move { text.contains("mounts are not available").then_some(text) }
    })
    .await;
    assert_eq!(
        text.matches("mounts are not available").count(),
        1,
        "{text}"
    );
    driver.stop().expect("the driver stops cleanly");
}
