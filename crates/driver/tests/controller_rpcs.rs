//! Controller and identity RPCs over a real unix socket: idempotency, spec error codes, paging,
//! capabilities per `--mode` and `--health-capabilities`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod fixture;

use fixture::*;
use tonic::Code;
use volhealth_csi::v1;
use volhealth_driver::{HealthCapabilities, Mode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_and_delete_are_idempotent_and_incompatible_recreate_is_already_exists() {
    let d = TestDriver::start(|_| {}).await;
    let mut ctrl = d.controller().await;
    let a = create(&mut ctrl, "pvc-a", 1 << 20, None).await;
    let again = create(&mut ctrl, "pvc-a", 1 << 20, None).await;
    assert_eq!(a, again, "same name gives the same volume");
    assert!(
        d.state.join("volumes").join(&a).is_dir(),
        "data lives at volumes/<id>"
    );
    assert!(
        d.state.join("records").join(format!("{a}.json")).is_file(),
        "record kept apart"
    );
    let err = ctrl
        .create_volume(create_req("pvc-a", 2 << 20, None))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::AlreadyExists, "{err:?}");
    let err = ctrl
        .create_volume(create_req("", 1, None))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);

    ctrl.delete_volume(v1::DeleteVolumeRequest {
        volume_id: a.clone(),
        ..Default::default()
    })
    .await
    .expect("delete");
    ctrl.delete_volume(v1::DeleteVolumeRequest {
        volume_id: a.clone(),
        ..Default::default()
    })
    .await
    .expect("delete again");
    assert!(!d.state.join("volumes").join(&a).exists());
    let err = ctrl
        .delete_volume(v1::DeleteVolumeRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_missing_ids_and_bad_tokens_get_spec_codes() {
    let d = TestDriver::start(|_| {}).await;
    let mut ctrl = d.controller().await;
    let get = |id: &str| v1::ControllerGetVolumeHealthRequest {
        volume_id: id.into(),
        ..Default::default()
    };
    assert_eq!(
        ctrl.controller_get_volume_health(get("vh-nope"))
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    assert_eq!(
        ctrl.controller_get_volume_health(get(""))
            .await
            .unwrap_err()
            .code(),
        Code::InvalidArgument
    );
    let validate = v1::ValidateVolumeCapabilitiesRequest {
        volume_id: "vh-nope".into(),
        volume_capabilities: vec![mount_cap()],
        ..Default::default()
    };
    assert_eq!(
        ctrl.validate_volume_capabilities(validate)
            .await
            .unwrap_err()
            .code(),
        Code::NotFound
    );
    let bad = v1::ControllerListVolumeHealthRequest {
        max_entries: 1,
        starting_token: "bogus".into(),
        ..Default::default()
    };
    assert_eq!(
        ctrl.controller_list_volume_health(bad)
            .await
            .unwrap_err()
            .code(),
        Code::Aborted
    );
    let bad = v1::ListVolumesRequest {
        max_entries: 1,
        starting_token: "x/../../etc".into(),
    };
    assert_eq!(
        ctrl.list_volumes(bad).await.unwrap_err().code(),
        Code::Aborted
    );
    let mut node = d.node().await;
    let req = v1::NodeGetVolumeHealthRequest {
        volume_id: "vh-nope".into(),
        ..Default::default()
    };
    assert_eq!(
        node.node_get_volume_health(req).await.unwrap_err().code(),
        Code::NotFound
    );
    let req = v1::NodeGetVolumeHealthRequest::default();
    assert_eq!(
        node.node_get_volume_health(req).await.unwrap_err().code(),
        Code::InvalidArgument
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_with_max_entries_one_visits_every_volume_once() {
    let d = TestDriver::start(|_| {}).await;
    let mut ctrl = d.controller().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(create(&mut ctrl, &format!("pvc-{i}"), 1 << 20, None).await);
    }
    ids.sort();
    let mut listed: Vec<String> = list_all(&mut ctrl, 1)
        .await
        .into_iter()
        .map(|v| v.volume_id)
        .collect();
    listed.sort();
    assert_eq!(listed, ids);

    let mut token = String::new();
    let mut seen = Vec::new();
    loop {
        let resp = ctrl
            .list_volumes(v1::ListVolumesRequest {
                max_entries: 2,
                starting_token: token,
            })
            .await
            .unwrap()
            .into_inner();
        assert!(resp.entries.len() <= 2);
        seen.extend(
            resp.entries
                .into_iter()
                .filter_map(|e| e.volume)
                .map(|v| v.volume_id),
        );
        if resp.next_token.is_empty() {
            break;
        }
        token = resp.next_token;
    }
    seen.sort();
    assert_eq!(seen, ids);
    let cap = ctrl
        .get_capacity(v1::GetCapacityRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(cap.available_capacity > 0);
}

fn controller_caps(resp: &v1::ControllerGetCapabilitiesResponse) -> Vec<i32> {
    resp.capabilities
        .iter()
        .filter_map(|c| {
            c.r#type
                .as_ref()
                .map(|v1::controller_service_capability::Type::Rpc(r)| r.r#type)
        })
        .collect()
}

fn node_caps(resp: &v1::NodeGetCapabilitiesResponse) -> Vec<i32> {
    resp.capabilities
        .iter()
        .filter_map(|c| {
            c.r#type
                .as_ref()
                .map(|v1::node_service_capability::Type::Rpc(r)| r.r#type)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_capabilities_are_advertised_by_default() {
    let d = TestDriver::start(|_| {}).await;
    let caps = controller_caps(
        &d.controller()
            .await
            .controller_get_capabilities(v1::ControllerGetCapabilitiesRequest {})
            .await
            .unwrap()
            .into_inner(),
    );
    for want in [1, 3, 4, 16, 17] {
        assert!(
            caps.contains(&want),
            "controller capability {want} missing from {caps:?}"
        );
    }
    let caps = node_caps(
        &d.node()
            .await
            .node_get_capabilities(v1::NodeGetCapabilitiesRequest {})
            .await
            .unwrap()
            .into_inner(),
    );
    for want in [1, 2, 7, 8] {
        assert!(
            caps.contains(&want),
            "node capability {want} missing from {caps:?}"
        );
    }
    let info = d
        .identity()
        .await
        .get_plugin_info(v1::GetPluginInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, "hostpath.volhealth.io");
    let node_info = d
        .node()
        .await
        .node_get_info(v1::NodeGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(node_info.node_id, "node-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_without_get_is_advertised_as_asked_and_get_is_unimplemented() {
    let d = TestDriver::start(|c| c.health = HealthCapabilities::parse("list").unwrap()).await;
    let mut ctrl = d.controller().await;
    let caps = controller_caps(
        &ctrl
            .controller_get_capabilities(v1::ControllerGetCapabilitiesRequest {})
            .await
            .unwrap()
            .into_inner(),
    );
    assert!(caps.contains(&17) && !caps.contains(&16), "{caps:?}");
    let id = create(&mut ctrl, "pvc-x", 1 << 20, None).await;
    assert_eq!(list_all(&mut ctrl, 0).await.len(), 1);
    let err = ctrl
        .controller_get_volume_health(v1::ControllerGetVolumeHealthRequest {
            volume_id: id,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
    let mut node = d.node().await;
    let caps = node_caps(
        &node
            .node_get_capabilities(v1::NodeGetCapabilitiesRequest {})
            .await
            .unwrap()
            .into_inner(),
    );
    assert!(!caps.contains(&7) && !caps.contains(&8), "{caps:?}");
    let err = node
        .node_get_storage_health(v1::NodeGetStorageHealthRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_and_node_storage_only() {
    let d =
        TestDriver::start(|c| c.health = HealthCapabilities::parse("get,node-storage").unwrap())
            .await;
    let mut ctrl = d.controller().await;
    let caps = controller_caps(
        &ctrl
            .controller_get_capabilities(v1::ControllerGetCapabilitiesRequest {})
            .await
            .unwrap()
            .into_inner(),
    );
    assert!(caps.contains(&16) && !caps.contains(&17), "{caps:?}");
    let err = ctrl
        .controller_list_volume_health(v1::ControllerListVolumeHealthRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
    let caps = node_caps(
        &d.node()
            .await
            .node_get_capabilities(v1::NodeGetCapabilitiesRequest {})
            .await
            .unwrap()
            .into_inner(),
    );
    assert!(!caps.contains(&7) && caps.contains(&8), "{caps:?}");
}

fn plugin_caps(resp: &v1::GetPluginCapabilitiesResponse) -> Vec<i32> {
    resp.capabilities
        .iter()
        .filter_map(|c| match &c.r#type {
            Some(v1::plugin_capability::Type::Service(s)) => Some(s.r#type),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modes_serve_only_their_services() {
    let d = TestDriver::start(|c| c.mode = Mode::Controller).await;
    let caps = plugin_caps(
        &d.identity()
            .await
            .get_plugin_capabilities(v1::GetPluginCapabilitiesRequest {})
            .await
            .unwrap()
            .into_inner(),
    );
    assert_eq!(caps, vec![1], "CONTROLLER_SERVICE advertised");
    let err = d
        .node()
        .await
        .node_get_info(v1::NodeGetInfoRequest {})
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
    drop(d);

    let d = TestDriver::start(|c| c.mode = Mode::Node).await;
    let caps = plugin_caps(
        &d.identity()
            .await
            .get_plugin_capabilities(v1::GetPluginCapabilitiesRequest {})
            .await
            .unwrap()
            .into_inner(),
    );
    assert!(caps.is_empty(), "{caps:?}");
    let err = d
        .controller()
        .await
        .controller_get_capabilities(v1::ControllerGetCapabilitiesRequest {})
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
    assert!(
        d.node()
            .await
            .node_get_info(v1::NodeGetInfoRequest {})
            .await
            .is_ok()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_socket_describes_the_driver() {
    let reg_dir = tempfile::tempdir().unwrap();
    let reg_path = reg_dir.path().to_path_buf();
    let d = TestDriver::start(move |c| {
        c.registration_dir = Some(reg_path);
        c.driver_name = "test.volhealth.io".into();
    })
    .await;
    let sock = reg_dir.path().join("test.volhealth.io-reg.sock");
    let channel = volhealth_csi::client::connect(
        &sock.display().to_string(),
        std::time::Duration::from_secs(10),
    )
    .await
    .unwrap();
    let mut client =
        volhealth_csi::registration::registration_client::RegistrationClient::new(channel);
    let info = client
        .get_info(volhealth_csi::registration::InfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.r#type, "CSIPlugin");
    assert_eq!(info.name, "test.volhealth.io");
    assert_eq!(
        info.endpoint,
        d.dir.path().join("csi.sock").display().to_string()
    );
    assert_eq!(info.supported_versions, vec!["1.0.0".to_string()]);
    client
        .notify_registration_status(volhealth_csi::registration::RegistrationStatus {
            plugin_registered: true,
            error: String::new(),
        })
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_confirms_mounts_and_refuses_block_and_bad_page_sizes() {
    let d = TestDriver::start(|_| {}).await;
    let mut ctrl = d.controller().await;
    let id = create(&mut ctrl, "pvc-v", 1 << 20, None).await;
    let ok = ctrl
        .validate_volume_capabilities(v1::ValidateVolumeCapabilitiesRequest {
            volume_id: id.clone(),
            volume_capabilities: vec![mount_cap()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(ok.confirmed.is_some(), "{ok:?}");
    let block = v1::VolumeCapability {
        access_type: Some(v1::volume_capability::AccessType::Block(Default::default())),
        access_mode: Some(v1::volume_capability::AccessMode { mode: 1 }),
    };
    let refused = ctrl
        .validate_volume_capabilities(v1::ValidateVolumeCapabilitiesRequest {
            volume_id: id.clone(),
            volume_capabilities: vec![block],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(
        refused.confirmed.is_none() && !refused.message.is_empty(),
        "{refused:?}"
    );
    let err = ctrl
        .controller_list_volume_health(v1::ControllerListVolumeHealthRequest {
            max_entries: -1,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
}
