//! `capabilities::probe` against real plugins on real unix sockets.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod test_plugin;

use std::time::Duration;

use test_plugin::Config;
use volhealth_csi::capabilities::{self, ControllerHealthMode, NodeHealthModes};
use volhealth_csi::v1::controller_service_capability::rpc::Type as ControllerRpc;
use volhealth_csi::v1::node_service_capability::rpc::Type as NodeRpc;

const TIMEOUT: Duration = Duration::from_secs(10);

async fn probe(config: Config) -> capabilities::Capabilities {
    let dir = tempfile::tempdir().expect("tempdir");
    let plugin = test_plugin::start(&dir.path().join("csi.sock"), &config);
    let channel = volhealth_csi::client::connect(&plugin.endpoint, TIMEOUT)
        .await
        .expect("connect");
    let caps = capabilities::probe(channel, TIMEOUT).await.expect("probe");
    plugin.stop().await.expect("server stops cleanly");
    caps
}

fn controller(caps: &[ControllerRpc]) -> Config {
    Config {
        name: "test.csi.volhealth.io".into(),
        controller: Some(caps.to_vec()),
        node: Some(vec![NodeRpc::StageUnstageVolume]),
    }
}

#[tokio::test]
async fn list_and_get_gives_list_with_get() {
    let caps = probe(controller(&[
        ControllerRpc::CreateDeleteVolume,
        ControllerRpc::ListVolumeHealth,
        ControllerRpc::GetVolumeHealth,
    ]))
    .await;
    assert_eq!(caps.driver_name, "test.csi.volhealth.io");
    assert_eq!(caps.vendor_version, "0.0.1-test");
    assert_eq!(caps.controller, ControllerHealthMode::List { get: true });
    assert!(caps.violations.is_empty(), "{:?}", caps.violations);
}

#[tokio::test]
async fn get_only_gives_get() {
    let caps = probe(controller(&[ControllerRpc::GetVolumeHealth])).await;
    assert_eq!(caps.controller, ControllerHealthMode::Get);
    assert!(caps.violations.is_empty());
}

#[tokio::test]
async fn neither_gives_none() {
    let caps = probe(controller(&[
        ControllerRpc::CreateDeleteVolume,
        ControllerRpc::GetVolume,
    ]))
    .await;
    assert_eq!(caps.controller, ControllerHealthMode::None);
    assert!(caps.violations.is_empty());
}

#[tokio::test]
async fn list_without_get_is_a_named_violation() {
    let caps = probe(controller(&[ControllerRpc::ListVolumeHealth])).await;
    assert_eq!(caps.controller, ControllerHealthMode::List { get: false });
    assert_eq!(caps.violations.len(), 1, "{:?}", caps.violations);
    let v = &caps.violations[0];
    assert!(
        v.contains("LIST_VOLUME_HEALTH") && v.contains("GET_VOLUME_HEALTH") && v.contains("MUST"),
        "violation should name the rule: {v}"
    );
}

#[tokio::test]
async fn node_flags_follow_node_capabilities() {
    for (node_caps, want) in [
        (
            vec![],
            NodeHealthModes {
                volume: false,
                storage: false,
            },
        ),
        (
            vec![NodeRpc::GetVolumeHealth],
            NodeHealthModes {
                volume: true,
                storage: false,
            },
        ),
        (
            vec![NodeRpc::GetStorageHealth],
            NodeHealthModes {
                volume: false,
                storage: true,
            },
        ),
        (
            vec![
                NodeRpc::StageUnstageVolume,
                NodeRpc::GetVolumeHealth,
                NodeRpc::GetStorageHealth,
            ],
            NodeHealthModes {
                volume: true,
                storage: true,
            },
        ),
    ] {
        let caps = probe(Config {
            name: "node.test".into(),
            controller: None,
            node: Some(node_caps.clone()),
        })
        .await;
        assert_eq!(caps.node, want, "node caps {node_caps:?}");
        assert_eq!(caps.controller, ControllerHealthMode::None);
    }
}

#[tokio::test]
async fn plugin_without_node_service_has_no_node_modes() {
    let caps = probe(Config {
        name: "controller.only".into(),
        controller: Some(vec![
            ControllerRpc::GetVolumeHealth,
            ControllerRpc::ListVolumeHealth,
        ]),
        node: None,
    })
    .await;
    assert_eq!(caps.node, NodeHealthModes::default());
    assert_eq!(caps.controller, ControllerHealthMode::List { get: true });
}

#[tokio::test]
async fn plugin_without_controller_service_has_no_controller_mode() {
    let caps = probe(Config {
        name: "node.only".into(),
        controller: None,
        node: Some(vec![NodeRpc::GetVolumeHealth]),
    })
    .await;
    assert_eq!(caps.controller, ControllerHealthMode::None);
    assert!(caps.node.volume);
}
