//! Injections over a real socket: volume and storage conditions (merged with detected ones, raw
//! unknown numbers sent as they are), RPC faults, list chaos. Injections are written with the
//! library's store functions, exactly as `volhealth inject` writes them, while the driver runs.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod fixture;

use fixture::*;
use std::collections::{BTreeMap, BTreeSet};
use tonic::Code;
use tonic::transport::Channel;
use volhealth_csi::v1;
use volhealth_csi::v1::controller_client::ControllerClient;
use volhealth_csi::v1::node_client::NodeClient;
use volhealth_driver::condition::{Condition, StorageCondition, VolumeMode};
use volhealth_driver::injection::{self, ListChaos, Side, VolumeInjection};
use volhealth_driver::state::StateDir;

fn inject_volume(state: &StateDir, id: &str, side: Side, status: i32, reason: &str) {
    let condition = Condition::new(status, reason, format!("injected {reason}"));
    injection::update(state, |i| {
        i.add_volume(VolumeInjection {
            volume_id: id.into(),
            side,
            condition,
        })
    })
    .unwrap();
}

/// A driver with volume `name`: the driver, its state, a controller and a node client and the
/// volume's id.
async fn one_volume(
    name: &str,
) -> (
    TestDriver,
    StateDir,
    ControllerClient<Channel>,
    NodeClient<Channel>,
    String,
) {
    let d = TestDriver::start(|_| {}).await;
    let state = StateDir::new(&d.state);
    let mut ctrl = d.controller().await;
    let node = d.node().await;
    let id = create(&mut ctrl, name, 1 << 20, None).await;
    (d, state, ctrl, node, id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn volume_injections_add_entries_merge_and_clear_without_restart() {
    let (d, state, mut ctrl, mut node, id) = one_volume("pvc-inj").await;
    inject_volume(&state, &id, Side::Controller, 2, "StorageArrayOffline");
    inject_volume(&state, &id, Side::Controller, 1, "ReplicaRebuilding");
    inject_volume(&state, &id, Side::Node, 3, "BlocksLost");
    let want = vec![
        (1, "ReplicaRebuilding".to_string()),
        (2, "StorageArrayOffline".to_string()),
    ];
    controller_get_until(&ctrl, &id, "both controller injections in Get", |p| {
        p == want
    })
    .await;
    let listed = list_all(&mut ctrl, 1).await;
    assert_eq!(
        health_pairs(&listed[0].health_statuses),
        want,
        "List carries them too"
    );
    assert_eq!(
        node_get(&mut node, &id).await,
        vec![(3, "BlocksLost".to_string())],
        "node side separate"
    );

    // An injection with the same (status, reason) as a detected condition wins.
    std::fs::remove_dir_all(d.state.join("volumes").join(&id)).unwrap();
    controller_get_until(&ctrl, &id, "detected VolumeNotFound", |p| {
        p.iter().any(|(_, r)| r == "VolumeNotFound")
    })
    .await;
    inject_volume(&state, &id, Side::Controller, 2, "VolumeNotFound");
    let entries = eventually("merged detection and injection", || {
        let mut c = ctrl.clone();
        let id = id.clone();
        async move {
            let r = c
                .controller_get_volume_health(v1::ControllerGetVolumeHealthRequest {
                    volume_id: id,
                    ..Default::default()
                })
                .await
                .ok()?
                .into_inner();
            let e = r.volume_health?.health_statuses;
            e.iter()
                .any(|e| e.message == "injected VolumeNotFound")
                .then_some(e)
        }
    })
    .await;
    let vnf: Vec<_> = entries
        .iter()
        .filter(|e| e.reason == "VolumeNotFound")
        .collect();
    assert_eq!(vnf.len(), 1);
    assert_eq!(vnf[0].message, "injected VolumeNotFound");

    injection::update(&state, |i| i.clear_volume(&id, Some(Side::Controller))).unwrap();
    controller_get_until(&ctrl, &id, "only the detected condition after clear", |p| {
        p == [(2, "VolumeNotFound".to_string())]
    })
    .await;
    assert_eq!(
        node_get(&mut node, &id)
            .await
            .iter()
            .filter(|(_, r)| r == "BlocksLost")
            .count(),
        1,
        "node side kept"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_numeric_status_is_sent_raw() {
    let (_d, state, ctrl, mut node, id) = one_volume("pvc-raw").await;
    inject_volume(&state, &id, Side::Controller, 42, "FutureCondition");
    inject_volume(&state, &id, Side::Node, 0, "UnknownType");
    let storage = StorageCondition {
        status: 9,
        reason: "FutureStorage".into(),
        message: "m".into(),
        access_mode: None,
        volume_mode: None,
    };
    injection::update(&state, |i| i.add_storage(storage)).unwrap();
    controller_get_until(&ctrl, &id, "raw 42", |p| {
        p == [(42, "FutureCondition".to_string())]
    })
    .await;
    assert_eq!(
        node_get(&mut node, &id).await,
        vec![(0, "UnknownType".to_string())]
    );
    let s = storage_get(&mut node).await;
    assert!(
        s.iter()
            .any(|e| e.status == 9 && e.reason == "FutureStorage"),
        "{s:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_injection_carries_access_and_volume_mode() {
    // No real low-space detection here, whatever the disk this runs on.
    let d = TestDriver::start(|c| c.low_space_fraction = 0.0).await;
    let state = StateDir::new(&d.state);
    let mut node = d.node().await;
    let healthy = storage_get(&mut node).await;
    assert!(healthy.is_empty(), "{healthy:?}");
    let cond = StorageCondition {
        status: 2,
        reason: "ArrayUnreachable".into(),
        message: "no path to array".into(),
        access_mode: Some(injection::parse_access_mode("ReadWriteOnce").unwrap()),
        volume_mode: Some(VolumeMode::Block),
    };
    injection::update(&state, |i| i.add_storage(cond)).unwrap();
    let got = eventually("storage injection", || {
        let mut n = node.clone();
        async move { Some(storage_health(&mut n).await.ok()?).filter(|s| !s.is_empty()) }
    })
    .await;
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].status, got[0].reason.as_str()),
        (2, "ArrayUnreachable")
    );
    let cap = got[0].volume_capability.clone().expect("capability");
    assert_eq!(cap.access_mode.map(|m| m.mode), Some(1));
    assert!(matches!(
        cap.access_type,
        Some(v1::volume_capability::AccessType::Block(_))
    ));
    injection::update(&state, |i| i.storage.clear()).unwrap();
    eventually("storage cleared", || {
        let mut n = node.clone();
        async move { storage_health(&mut n).await.ok()?.is_empty().then_some(()) }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rpc_faults_fail_with_the_code_and_delay() {
    let d = TestDriver::start(|_| {}).await;
    let state = StateDir::new(&d.state);
    let mut ctrl = d.controller().await;
    let mut node = d.node().await;
    let mut ident = d.identity().await;
    for (method, code) in [
        ("ControllerListVolumeHealth", 14),
        ("NodeGetStorageHealth", 4),
        ("Probe", 13),
    ] {
        let message = (method == "Probe").then(|| "the backend is on fire".to_string());
        set_fault(&state, method, code, 1.0, 0, message);
    }
    eventually("list fails with UNAVAILABLE", || {
        let mut c = ctrl.clone();
        async move {
            let e = list_volume_health(&mut c, 0).await.err()?;
            (e.code() == Code::Unavailable).then_some(())
        }
    })
    .await;
    let e = node
        .node_get_storage_health(v1::NodeGetStorageHealthRequest::default())
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded);
    let e = ident.probe(v1::ProbeRequest {}).await.unwrap_err();
    assert_eq!(e.code(), Code::Internal);
    assert_eq!(
        e.message(),
        "the backend is on fire",
        "the injected message"
    );
    assert_eq!(
        node.node_get_storage_health(v1::NodeGetStorageHealthRequest::default())
            .await
            .unwrap_err()
            .message(),
        "injected fault for NodeGetStorageHealth",
        "the default message names the method"
    );
    // Rate 0 never fails.
    set_fault(&state, "Probe", 13, 0.0, 0, None);
    eventually("probe answers at rate 0", || {
        let mut c = ident.clone();
        async move { c.probe(v1::ProbeRequest {}).await.ok().map(|_| ()) }
    })
    .await;
    // A delay longer than the caller's deadline makes the call time out on the caller's side.
    set_fault(&state, "NodeGetVolumeHealth", 0, 1.0, 60_000, None);
    let id = create(&mut ctrl, "pvc-slow", 1 << 20, None).await;
    eventually("delayed NodeGetVolumeHealth", || {
        let mut n = node.clone();
        let id = id.clone();
        async move {
            let mut req = tonic::Request::new(v1::NodeGetVolumeHealthRequest {
                volume_id: id,
                ..Default::default()
            });
            req.set_timeout(std::time::Duration::from_millis(300));
            let e = n.node_get_volume_health(req).await.err()?;
            (e.code() == Code::Cancelled || e.code() == Code::DeadlineExceeded).then_some(())
        }
    })
    .await;
    // Other RPCs are unaffected.
    assert!(
        ctrl.controller_get_capabilities(v1::ControllerGetCapabilitiesRequest {})
            .await
            .is_ok()
    );
}

async fn cycle(ctrl: &mut ControllerClient<Channel>, max: i32) -> (Vec<String>, usize) {
    let pages = list_all(ctrl, max).await;
    (
        pages.iter().map(|v| v.volume_id.clone()).collect(),
        pages.len(),
    )
}

/// A driver with volumes `pvc-0`.. `pvc-<n-1>` and `chaos` injected: the driver, its state, a
/// controller client and the volumes' ids.
async fn chaos_world(
    n: usize,
    chaos: ListChaos,
) -> (
    TestDriver,
    StateDir,
    ControllerClient<Channel>,
    BTreeSet<String>,
) {
    let d = TestDriver::start(|_| {}).await;
    let state = StateDir::new(&d.state);
    let mut ctrl = d.controller().await;
    let mut ids = BTreeSet::new();
    for i in 0..n {
        ids.insert(create(&mut ctrl, &format!("pvc-{i}"), 1 << 20, None).await);
    }
    injection::update(&state, |i| i.list_chaos = chaos).unwrap();
    (d, state, ctrl, ids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_chaos_duplicates_repeat_entries_but_paging_ends() {
    let chaos = ListChaos {
        duplicates: true,
        omissions: false,
    };
    let (_d, _state, ctrl, ids) = chaos_world(4, chaos).await;
    for max in [1, 2] {
        let (listed, n) = eventually("duplicates", || {
            let mut c = ctrl.clone();
            async move {
                let (l, n) = cycle(&mut c, max).await;
                (n > 4).then_some((l, n))
            }
        })
        .await;
        let unique: BTreeSet<String> = listed.into_iter().collect();
        assert_eq!(unique, ids, "every volume still listed (max_entries={max})");
        assert!(n > ids.len(), "some entries repeated");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_chaos_omissions_rotate_so_every_volume_comes_back() {
    let chaos = ListChaos {
        duplicates: false,
        omissions: true,
    };
    let (_d, state, mut ctrl, ids) = chaos_world(10, chaos).await;
    // Wait until the driver sees the chaos (some cycle misses a volume).
    eventually("omissions", || {
        let mut c = ctrl.clone();
        async move { (cycle(&mut c, 3).await.1 < 10).then_some(()) }
    })
    .await;
    let mut missed: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for n in 0..10 {
        let (listed, _) = cycle(&mut ctrl, 3).await;
        for id in &ids {
            if !listed.contains(id) {
                missed.entry(id.clone()).or_default().push(n);
            }
        }
    }
    assert!(!missed.is_empty(), "some volumes were omitted");
    for (id, cycles) in &missed {
        assert!(cycles.len() < 10, "{id} must come back");
        assert!(
            cycles.windows(2).all(|w| w[1] > w[0] + 1),
            "{id} omitted in consecutive cycles: {cycles:?}"
        );
    }
    injection::update(&state, |i| i.list_chaos = ListChaos::default()).unwrap();
    eventually("chaos off", || {
        let mut c = ctrl.clone();
        async move { (cycle(&mut c, 3).await.1 == 10).then_some(()) }
    })
    .await;
}
