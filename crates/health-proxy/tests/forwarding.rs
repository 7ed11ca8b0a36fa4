//! What the proxy does not answer reaches the driver unchanged and comes back unchanged: the
//! message bytes (unknown fields included), the metadata and the trailers, for CSI methods and
//! for methods it has never heard of, and a failure as the driver gave it.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use bytes::Bytes;
use support::{RawBackend, RunningProxy, raw_call};

/// A message with fields no CSI version defines (field 99 varint, field 100 bytes).
fn odd_message(tag: u8) -> Bytes {
    Bytes::from(vec![
        0x98, 0x06, tag, 0xa2, 0x06, 0x03, b'x', b'y', b'z', 0x0a, 0x01, tag,
    ])
}

#[tokio::test]
async fn unanswered_calls_pass_byte_for_byte_with_metadata_and_trailers() {
    let dir = tempfile::tempdir().unwrap();
    let answer = odd_message(0x42);
    let backend = RawBackend::start(dir.path(), answer.clone()).await;
    let proxy = RunningProxy::start(&backend.socket, dir.path().join("proxy.sock"), None).await;
    let channel = proxy.channel().await;

    for path in [
        "/csi.v1.Controller/CreateVolume",
        "/csi.v1.Identity/Probe",
        "/vendor.example.v9.Thing/DoSomethingNew",
    ] {
        let sent = odd_message(0x17);
        let resp = raw_call(channel.clone(), path, sent.clone(), &[("x-custom", "one")])
            .await
            .unwrap();
        assert_eq!(resp.get_ref(), &answer, "{path}: the answer's bytes");
        assert_eq!(resp.metadata().get("x-answer").unwrap(), "yes", "{path}");
        assert_eq!(resp.metadata().get("x-trailer").unwrap(), "kept", "{path}");
        let seen = backend.seen.lock().unwrap().pop().unwrap();
        assert_eq!(seen.path, path);
        let mut framed = vec![0u8];
        framed.extend((sent.len() as u32).to_be_bytes());
        framed.extend(&sent);
        assert_eq!(
            seen.body.as_ref(),
            framed.as_slice(),
            "{path}: the request's bytes"
        );
        assert_eq!(seen.headers.get("x-custom").unwrap(), "one", "{path}");
        let agent = seen.headers.get("user-agent").unwrap().to_str().unwrap();
        assert_eq!(
            agent.matches("tonic/").count(),
            1,
            "{path}: user-agent {agent:?}"
        );
        assert_eq!(
            seen.headers.get("content-type").unwrap(),
            "application/grpc"
        );
    }

    let err = raw_call(
        channel.clone(),
        "/vendor.example.v9.Thing/Fail",
        odd_message(1),
        &[],
    )
    .await
    .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    assert_eq!(err.message(), "no such thing");
    proxy.stop().await;
}

#[tokio::test]
async fn a_stage_call_is_forwarded_unchanged_and_its_paths_learned_without_its_secrets() {
    use prost::Message as _;
    let dir = tempfile::tempdir().unwrap();
    let backend = RawBackend::start(dir.path(), Bytes::new()).await;
    let state = dir.path().join("state");
    let proxy = RunningProxy::start(
        &backend.socket,
        dir.path().join("proxy.sock"),
        Some(state.clone()),
    )
    .await;
    let stage = volhealth_csi::v1::NodeStageVolumeRequest {
        volume_id: "vol-1".into(),
        staging_target_path: "/var/lib/kubelet/plugins/x/globalmount".into(),
        secrets: [("password".to_string(), "hunter2".to_string())].into(),
        ..Default::default()
    };
    let mut sent = stage.encode_to_vec();
    sent.extend([0x98, 0x06, 0x01]); // and a field v1.13 does not define
    let sent = Bytes::from(sent);
    raw_call(
        proxy.channel().await,
        "/csi.v1.Node/NodeStageVolume",
        sent.clone(),
        &[],
    )
    .await
    .unwrap();
    let seen = backend.seen.lock().unwrap().pop().unwrap();
    assert_eq!(&seen.body[5..], sent.as_ref(), "forwarded as sent");
    let kept = std::fs::read_to_string(state.join("paths.json")).unwrap();
    assert!(
        kept.contains("vol-1") && kept.contains("globalmount"),
        "{kept}"
    );
    assert!(
        !kept.contains("hunter2"),
        "a secret reached the state dir: {kept}"
    );
    proxy.stop().await;
}
