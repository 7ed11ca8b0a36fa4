//! The proxy in front of a driver that speaks only the legacy VOLUME_CONDITION shape (the
//! reference driver with `--health-api legacy`): the capability answers gain the health
//! capabilities, the four health RPCs are answered from the legacy shape, NodeGetVolumeHealth
//! works with only a volume id (paths learned from the stage and publish calls it forwarded, kept
//! across a restart), and the driver's own capabilities stay in the answers.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use std::time::Duration;
use support::RunningProxy;
use volhealth_csi::v1;
use volhealth_driver::HealthCapabilities;
use volhealth_testkit::{Driver, stage_and_publish_via, wait_for};

const WAIT: Duration = Duration::from_secs(20);

const NAME: &str = "legacy.volhealth.io";

fn reasons(h: Option<v1::VolumeHealth>) -> Vec<(i32, String)> {
    h.unwrap()
        .health_statuses
        .into_iter()
        .map(|e| (e.status, e.reason))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_from_a_legacy_driver_through_the_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let driver_dir = dir.path().join("driver");
    std::fs::create_dir_all(&driver_dir).unwrap();
    let driver = Driver::start_configured(&driver_dir, NAME, "node-a", |c| {
        c.health = HealthCapabilities::NONE;
        c.legacy_condition = true;
    })
    .await;
    let driver_socket = driver_dir.join("csi.sock");
    let state = dir.path().join("proxy-state");
    let socket = dir.path().join("health.sock");
    let proxy = RunningProxy::start(&driver_socket, socket.clone(), Some(state.clone())).await;
    let endpoint = format!("unix://{}", socket.display());

    let channel = proxy.channel().await;
    let (types, node_types) = support::capability_types(channel.clone()).await;
    for want in [1, 3, 11, 12, 16, 17] {
        assert!(
            types.contains(&want),
            "controller capability {want} missing: {types:?}"
        );
    }
    let types = node_types;
    for want in [1, 2, 4, 7] {
        assert!(
            types.contains(&want),
            "node capability {want} missing: {types:?}"
        );
    }
    assert!(!types.contains(&8), "no storage health to offer: {types:?}");

    // Create, stage and publish through the proxy, as the CO would.
    let volume = driver.create_volume("pv-one").await;
    let kubelet = dir.path().join("kubelet");
    stage_and_publish_via(
        &endpoint,
        &driver,
        &volume,
        "pv-one",
        &kubelet.join("plugins/stage"),
        &kubelet.join("pods/p/volumes/pv-one"),
    )
    .await;

    driver.inject_both_sides(&volume);
    let controller = v1::controller_client::ControllerClient::new(channel.clone());
    let expected = vec![(
        v1::VolumeHealthErrorType::Degraded as i32,
        "VolumeConditionAbnormal".to_string(),
    )];
    let get = |want: Vec<(i32, String)>| {
        let (mut c, volume) = (controller.clone(), volume.clone());
        async move {
            let got = c
                .controller_get_volume_health(v1::ControllerGetVolumeHealthRequest {
                    volume_id: volume,
                    secrets: Default::default(),
                })
                .await
                .unwrap()
                .into_inner();
            (reasons(got.volume_health) == want).then_some(())
        }
    };
    // The driver sees an injection within its refresh interval.
    wait_for(WAIT, "the controller's condition", || get(expected.clone())).await;
    let list = controller
        .clone()
        .controller_list_volume_health(v1::ControllerListVolumeHealthRequest::default())
        .await
        .unwrap()
        .into_inner();
    let mine: Vec<_> = list
        .entries
        .into_iter()
        .filter(|e| e.volume_id == volume)
        .collect();
    assert_eq!(reasons(mine.into_iter().next()), expected);

    // NodeGetVolumeHealth with only the volume id, as csi-sanity calls it, before and after a
    // restart of the proxy.
    for round in 0..2 {
        let channel = if round == 0 {
            channel.clone()
        } else {
            proxy_restarted(&driver_socket, &socket, &state).await
        };
        let got = v1::node_client::NodeClient::new(channel)
            .node_get_volume_health(v1::NodeGetVolumeHealthRequest {
                volume_id: volume.clone(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(reasons(got.volume_health), expected, "round {round}");
    }

    // An unknown volume is NOT_FOUND, not healthy.
    let err = v1::node_client::NodeClient::new(proxy.channel().await)
        .node_get_volume_health(v1::NodeGetVolumeHealthRequest {
            volume_id: "never-staged".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);

    driver.clear_volume(&volume);
    wait_for(WAIT, "the recovery", || get(Vec::new())).await;
    proxy.stop().await;
    driver.stop().unwrap();
}

/// A second proxy on another socket over the same state dir: what the first learned, it knows.
async fn proxy_restarted(
    driver_socket: &std::path::Path,
    socket: &std::path::Path,
    state: &std::path::Path,
) -> tonic::transport::Channel {
    let second = socket.with_file_name("health-2.sock");
    let p = RunningProxy::start(driver_socket, second, Some(state.to_path_buf())).await;
    let ch = p.channel().await;
    std::mem::forget(p);
    ch
}
