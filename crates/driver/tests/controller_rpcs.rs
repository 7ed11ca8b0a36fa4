//! Controller and identity RPCs over a real unix socket: idempotency, spec error codes, paging,
//! capabilities per `--mode` and `--health-capabilities`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod fixture;

use fixture::*;
use tonic::transport::Channel;
use tonic::{Code, Status};
use volhealth_csi::v1;
use volhealth_csi::v1::controller_client::ControllerClient;
use volhealth_driver::{HealthCapabilities, Mode};

/// The code a call was refused with.
fn refusal<T: std::fmt::Debug>(result: Result<T, Status>) -> Code {
    result.expect_err("the call is refused").code()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_and_delete_are_idempotent_and_incompatible_recreate_is_already_exists() {
    let d = TestDriver::start(|_| {}).await;
    let mut ctrl = d.controller().await;
    let a = create(&mut ctrl, "pvc-a", 1 << 20, None).await;
    assert_eq!(
        a,
        create(&mut ctrl, "pvc-a", 1 << 20, None).await,
        "same name gives the same volume"
    );
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
    let unnamed = ctrl.create_volume(create_req("", 1, None)).await;
    assert_eq!(refusal(unnamed), Code::InvalidArgument);

    for what in ["delete", "delete again"] {
        let req = v1::DeleteVolumeRequest {
            volume_id: a.clone(),
            ..Default::default()
        };
        ctrl.delete_volume(req).await.expect(what);
    }
    assert!(!d.state.join("volumes").join(&a).exists());
    let no_id = ctrl.delete_volume(v1::DeleteVolumeRequest::default()).await;
    assert_eq!(refusal(no_id), Code::InvalidArgument);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_missing_ids_and_bad_tokens_get_spec_codes() {
    let d = TestDriver::start(|_| {}).await;
    let mut ctrl = d.controller().await;
    let get = |id: &str| v1::ControllerGetVolumeHealthRequest {
        volume_id: id.into(),
        ..Default::default()
    };
    let unknown = ctrl.controller_get_volume_health(get("vh-nope")).await;
    assert_eq!(refusal(unknown), Code::NotFound);
    let no_id = ctrl.controller_get_volume_health(get("")).await;
    assert_eq!(refusal(no_id), Code::InvalidArgument);
    let validate = v1::ValidateVolumeCapabilitiesRequest {
        volume_id: "vh-nope".into(),
        volume_capabilities: vec![mount_capability()],
        ..Default::default()
    };
    let unknown = ctrl.validate_volume_capabilities(validate).await;
    assert_eq!(refusal(unknown), Code::NotFound);
    let bad = v1::ListVolumesRequest {
        max_entries: 1,
        starting_token: "x/../../etc".into(),
    };
    assert_eq!(refusal(ctrl.list_volumes(bad).await), Code::Aborted);
    let bad = v1::ControllerListVolumeHealthRequest {
        max_entries: 1,
        starting_token: "bogus".into(),
        ..Default::default()
    };
    let bad_token = ctrl.controller_list_volume_health(bad).await;
    assert_eq!(refusal(bad_token), Code::Aborted);
    let mut node = d.node().await;
    let req = v1::NodeGetVolumeHealthRequest {
        volume_id: "vh-nope".into(),
        ..Default::default()
    };
    let unknown = node.node_get_volume_health(req).await;
    assert_eq!(refusal(unknown), Code::NotFound);
    let req = v1::NodeGetVolumeHealthRequest::default();
    assert_eq!(
        refusal(node.node_get_volume_health(req).await),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_capabilities_are_advertised_by_default() {
    let d = TestDriver::start(|_| {}).await;
    let (controller_caps, node_caps) = d.rpc_capabilities().await;
    for want in [1, 3, 4, 16, 17] {
        assert!(
            controller_caps.contains(&want),
            "controller capability {want} missing from {controller_caps:?}"
        );
    }
    for want in [1, 2, 7, 8] {
        assert!(
            node_caps.contains(&want),
            "node capability {want} missing from {node_caps:?}"
        );
    }
    let mut identity = d.identity().await;
    let info = identity.get_plugin_info(v1::GetPluginInfoRequest {}).await;
    assert_eq!(info.unwrap().into_inner().name, "hostpath.volhealth.io");
    let node_info = node_info(&d).await;
    assert_eq!(node_info.unwrap().into_inner().node_id, "node-1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_without_get_is_advertised_as_asked_and_get_is_unimplemented() {
    let d = TestDriver::start(|c| c.health = HealthCapabilities::parse("list").unwrap()).await;
    let mut ctrl = d.controller().await;
    let (caps, node_caps) = d.rpc_capabilities().await;
    assert!(caps.contains(&17) && !caps.contains(&16), "{caps:?}");
    let id = create(&mut ctrl, "pvc-x", 1 << 20, None).await;
    assert_eq!(list_all(&mut ctrl, 0).await.len(), 1);
    let err = controller_health(&mut ctrl, &id).await.unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
    assert!(
        !node_caps.contains(&7) && !node_caps.contains(&8),
        "{node_caps:?}"
    );
    let err = storage_health(&mut d.node().await).await.unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_and_node_storage_only() {
    let d =
        TestDriver::start(|c| c.health = HealthCapabilities::parse("get,node-storage").unwrap())
            .await;
    let mut ctrl = d.controller().await;
    let (caps, node_caps) = d.rpc_capabilities().await;
    assert!(caps.contains(&16) && !caps.contains(&17), "{caps:?}");
    let err = list_volume_health(&mut ctrl, 0).await.unwrap_err();
    assert_eq!(err.code(), Code::Unimplemented);
    assert!(
        !node_caps.contains(&7) && node_caps.contains(&8),
        "{node_caps:?}"
    );
}

/// The service numbers the driver's GetPluginCapabilities answers with.
async fn plugin_caps(d: &TestDriver) -> Vec<i32> {
    let resp = d
        .identity()
        .await
        .get_plugin_capabilities(v1::GetPluginCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    resp.capabilities
        .iter()
        .filter_map(|c| match &c.r#type {
            Some(v1::plugin_capability::Type::Service(s)) => Some(s.r#type),
            _ => None,
        })
        .collect()
}

/// The driver's NodeGetInfo answer.
async fn node_info(d: &TestDriver) -> Result<tonic::Response<v1::NodeGetInfoResponse>, Status> {
    d.node()
        .await
        .node_get_info(v1::NodeGetInfoRequest {})
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modes_serve_only_their_services() {
    let d = TestDriver::start(|c| c.mode = Mode::Controller).await;
    let caps = plugin_caps(&d).await;
    assert_eq!(caps, vec![1], "CONTROLLER_SERVICE advertised");
    assert_eq!(refusal(node_info(&d).await), Code::Unimplemented);
    drop(d);

    let d = TestDriver::start(|c| c.mode = Mode::Node).await;
    let caps = plugin_caps(&d).await;
    assert!(caps.is_empty(), "{caps:?}");
    let (ctrl_caps, _) = volhealth_testkit::rpc_capabilities(d.channel().await).await;
    assert_eq!(refusal(ctrl_caps), Code::Unimplemented);
    assert!(node_info(&d).await.is_ok());
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

/// A ValidateVolumeCapabilities answer for volume `id` and `capability`.
async fn validate(
    ctrl: &mut ControllerClient<Channel>,
    id: &str,
    capability: v1::VolumeCapability,
) -> v1::ValidateVolumeCapabilitiesResponse {
    ctrl.validate_volume_capabilities(v1::ValidateVolumeCapabilitiesRequest {
        volume_id: id.into(),
        volume_capabilities: vec![capability],
        ..Default::default()
    })
    .await
    .unwrap()
    .into_inner()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_confirms_mounts_and_refuses_block_and_bad_page_sizes() {
    let d = TestDriver::start(|_| {}).await;
    let mut ctrl = d.controller().await;
    let id = create(&mut ctrl, "pvc-v", 1 << 20, None).await;
    let ok = validate(&mut ctrl, &id, mount_capability()).await;
    assert!(ok.confirmed.is_some(), "{ok:?}");
    let block = v1::VolumeCapability {
        access_type: Some(v1::volume_capability::AccessType::Block(Default::default())),
        access_mode: Some(v1::volume_capability::AccessMode { mode: 1 }),
    };
    let refused = validate(&mut ctrl, &id, block).await;
    assert!(
        refused.confirmed.is_none() && !refused.message.is_empty(),
        "{refused:?}"
    );
    let err = list_volume_health(&mut ctrl, -1).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
}
