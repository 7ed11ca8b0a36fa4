//! Node-side detection over a real socket: stage and publish checks with real mounts (where the
//! machine permits) and with the symlink fallback, failed stages, I/O probes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod fixture;

use fixture::*;
use std::path::Path;
use volhealth_csi::v1;

const INACCESSIBLE: i32 = 2;
const DEGRADED: i32 = 1;

async fn node_get_paths(
    node: &mut v1::node_client::NodeClient<tonic::transport::Channel>,
    id: &str,
    publish: &Path,
) -> Vec<(i32, String)> {
    let resp = node
        .node_get_volume_health(v1::NodeGetVolumeHealthRequest {
            volume_id: id.into(),
            volume_publish_path: publish.display().to_string(),
            staging_target_path: String::new(),
        })
        .await
        .expect("NodeGetVolumeHealth")
        .into_inner();
    pairs(&resp.volume_health.expect("volume_health").health_statuses)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_mounted_volume_is_healthy_until_unmounted_out_of_band() {
    let d = TestDriver::start(|_| {}).await;
    if !can_mount(d.dir.path()) {
        return;
    }
    let mut ctrl = d.controller().await;
    let mut node = d.node().await;
    let id = create(&mut ctrl, "pvc-mnt", 1 << 20, None).await;
    let staging = d.dir.path().join("staging");
    let target = d.dir.path().join("pods").join("target");
    std::fs::create_dir_all(&staging).unwrap();
    let _cleanup = Unmount(vec![target.clone(), staging.clone()]);
    node.node_stage_volume(stage_req(&id, &staging))
        .await
        .expect("stage");
    node.node_stage_volume(stage_req(&id, &staging))
        .await
        .expect("stage is idempotent");
    node.node_publish_volume(publish_req(&id, &staging, &target))
        .await
        .expect("publish");
    assert!(volhealth_driver::mounts::is_mount_point(&target));
    std::fs::write(target.join("hello"), b"hi").unwrap();
    assert!(
        d.state.join("volumes").join(&id).join("hello").is_file(),
        "writes reach the volume data"
    );
    assert!(node_get_paths(&mut node, &id, &target).await.is_empty());
    assert!(node_get(&mut node, &id).await.is_empty());

    nix::mount::umount2(&target, nix::mount::MntFlags::MNT_DETACH).unwrap();
    let got = node_get_paths(&mut node, &id, &target).await;
    assert_eq!(
        got,
        vec![(INACCESSIBLE, "PublishPathNotMounted".to_string())]
    );
    std::fs::remove_dir(&target).unwrap();
    let got = node_get_paths(&mut node, &id, &target).await;
    assert_eq!(got, vec![(INACCESSIBLE, "PublishPathMissing".to_string())]);

    node.node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
        volume_id: id.clone(),
        target_path: target.display().to_string(),
    })
    .await
    .expect("unpublish is idempotent");
    node.node_unstage_volume(v1::NodeUnstageVolumeRequest {
        volume_id: id.clone(),
        staging_target_path: staging.display().to_string(),
    })
    .await
    .expect("unstage");
    assert!(!volhealth_driver::mounts::is_mount_point(&staging));
    assert!(
        node_get(&mut node, &id).await.is_empty(),
        "nothing staged, data present: healthy"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_stage_is_reported_by_node_get_volume_health() {
    let d = TestDriver::start(|_| {}).await;
    let mut node = d.node().await;
    let staging = d.dir.path().join("staging");
    let err = node
        .node_stage_volume(stage_req("vh-missing", &staging))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::NotFound);
    let got = node_get(&mut node, "vh-missing").await;
    assert_eq!(got, vec![(INACCESSIBLE, "StageFailed".to_string())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_io_probe_is_degraded() {
    // Every probe counts as slow with a zero threshold: the probe runs for real and is timed.
    let d = TestDriver::start(|c| {
        c.io_probe_slow = std::time::Duration::ZERO;
        c.allow_mounts = false;
    })
    .await;
    let mut ctrl = d.controller().await;
    let mut node = d.node().await;
    let id = create(&mut ctrl, "pvc-slow", 1 << 20, None).await;
    let staging = d.dir.path().join("staging");
    node.node_stage_volume(stage_req(&id, &staging))
        .await
        .expect("stage");
    let got = node
        .node_get_volume_health(v1::NodeGetVolumeHealthRequest {
            volume_id: id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let entries = got.volume_health.unwrap().health_statuses;
    assert_eq!(pairs(&entries), vec![(DEGRADED, "SlowIo".to_string())]);
    assert!(
        entries[0].message.contains(" ms"),
        "message has the time: {}",
        entries[0].message
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_io_probe_is_inaccessible() {
    // Probe on every call: the first call's passed probe would otherwise stand for the next.
    let d = TestDriver::start(|c| c.io_probe_interval = std::time::Duration::ZERO).await;
    if !can_mount(d.dir.path()) {
        return;
    }
    let mut ctrl = d.controller().await;
    let mut node = d.node().await;
    let id = create(&mut ctrl, "pvc-ro", 1 << 20, None).await;
    let staging = d.dir.path().join("staging");
    let target = d.dir.path().join("target");
    std::fs::create_dir_all(&staging).unwrap();
    let _cleanup = Unmount(vec![target.clone(), staging.clone()]);
    node.node_stage_volume(stage_req(&id, &staging))
        .await
        .expect("stage");
    node.node_publish_volume(publish_req(&id, &staging, &target))
        .await
        .expect("publish");
    assert!(node_get_paths(&mut node, &id, &target).await.is_empty());
    // Out of band, the published mount turns read-only: writes through it fail.
    use nix::mount::{MsFlags, mount};
    let flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
    mount(None::<&str>, &target, None::<&str>, flags, None::<&str>)
        .unwrap_or_else(|e| panic!("remounting {} read-only: {e}", target.display()));
    let got = node_get_paths(&mut node, &id, &target).await;
    assert_eq!(got, vec![(INACCESSIBLE, "IoProbeFailed".to_string())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlink_fallback_keeps_node_checks_meaningful() {
    let d = TestDriver::start(|c| c.allow_mounts = false).await;
    let mut ctrl = d.controller().await;
    let mut node = d.node().await;
    let id = create(&mut ctrl, "pvc-link", 1 << 20, None).await;
    let staging = d.dir.path().join("staging");
    let target = d.dir.path().join("target");
    std::fs::create_dir_all(&staging).unwrap();
    node.node_stage_volume(stage_req(&id, &staging))
        .await
        .expect("stage");
    node.node_publish_volume(publish_req(&id, &staging, &target))
        .await
        .expect("publish");
    std::fs::write(target.join("hello"), b"hi").unwrap();
    assert!(
        d.state.join("volumes").join(&id).join("hello").is_file(),
        "writes reach the volume data"
    );
    assert!(node_get_paths(&mut node, &id, &target).await.is_empty());
    // Someone points the target elsewhere.
    std::fs::remove_file(&target).unwrap();
    std::os::unix::fs::symlink(d.dir.path(), &target).unwrap();
    assert_eq!(
        node_get_paths(&mut node, &id, &target).await,
        vec![(INACCESSIBLE, "PublishPathNotMounted".to_string())]
    );
    std::fs::remove_file(&target).unwrap();
    assert_eq!(
        node_get_paths(&mut node, &id, &target).await,
        vec![(INACCESSIBLE, "PublishPathMissing".to_string())]
    );
    node.node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
        volume_id: id.clone(),
        target_path: target.display().to_string(),
    })
    .await
    .unwrap();
    node.node_unstage_volume(v1::NodeUnstageVolumeRequest {
        volume_id: id.clone(),
        staging_target_path: staging.display().to_string(),
    })
    .await
    .unwrap();
    assert!(
        staging.is_dir() && !staging.is_symlink(),
        "the CO's staging directory is given back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backing_data_deleted_is_inaccessible_on_the_node() {
    let d = TestDriver::start(|c| c.allow_mounts = false).await;
    let mut ctrl = d.controller().await;
    let mut node = d.node().await;
    let id = create(&mut ctrl, "pvc-del", 1 << 20, None).await;
    let staging = d.dir.path().join("staging");
    node.node_stage_volume(stage_req(&id, &staging))
        .await
        .expect("stage");
    std::fs::remove_dir_all(d.state.join("volumes").join(&id)).unwrap();
    let got = node_get(&mut node, &id).await;
    assert!(
        got.contains(&(INACCESSIBLE, "BackingDataMissing".to_string())),
        "{got:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_volume_is_loop_mounted_and_probed() {
    if !have_tool("mkfs.ext4", &["-V"]) {
        return;
    }
    let d = TestDriver::start(|c| c.backend = volhealth_driver::BackendKind::Image).await;
    if !can_mount(d.dir.path()) {
        return;
    }
    let mut ctrl = d.controller().await;
    let mut node = d.node().await;
    let id = create(&mut ctrl, "pvc-loop", 32 << 20, None).await;
    let staging = d.dir.path().join("staging");
    let target = d.dir.path().join("target");
    std::fs::create_dir_all(&staging).unwrap();
    let _cleanup = Unmount(vec![target.clone(), staging.clone()]);
    node.node_stage_volume(stage_req(&id, &staging))
        .await
        .expect("stage (loop mount)");
    assert!(
        staging.join("lost+found").is_dir(),
        "the ext4 filesystem is mounted"
    );
    node.node_publish_volume(publish_req(&id, &staging, &target))
        .await
        .expect("publish");
    assert!(node_get_paths(&mut node, &id, &target).await.is_empty());
    let stats = node
        .node_get_volume_stats(v1::NodeGetVolumeStatsRequest {
            volume_id: id.clone(),
            volume_path: target.display().to_string(),
            staging_target_path: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let bytes = stats
        .usage
        .iter()
        .find(|u| u.unit == 1)
        .expect("bytes usage");
    assert!(bytes.total > 0 && bytes.total <= 32 << 20, "{bytes:?}");
    node.node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
        volume_id: id.clone(),
        target_path: target.display().to_string(),
    })
    .await
    .unwrap();
    node.node_unstage_volume(v1::NodeUnstageVolumeRequest {
        volume_id: id.clone(),
        staging_target_path: staging.display().to_string(),
    })
    .await
    .unwrap();
    assert!(!volhealth_driver::mounts::is_mount_point(&staging));
}
