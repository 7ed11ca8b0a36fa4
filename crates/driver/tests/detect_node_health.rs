//! Node-side detection over a real socket: stage and publish checks with real mounts (where the
//! machine permits) and with the symlink fallback, failed stages, I/O probes.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod fixture;

use fixture::*;
use volhealth_csi::v1;

const INACCESSIBLE: i32 = 2;
const DEGRADED: i32 = 1;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bind_mounted_volume_is_healthy_until_unmounted_out_of_band() {
    let d = TestDriver::start(|_| {}).await;
    if !can_mount(d.dir.path()) {
        return;
    }
    let mut v = d.node_volume("pvc-mnt", 1 << 20).await;
    v.target = d.dir.path().join("pods").join("target");
    let _cleanup = v.prepare_mounts();
    v.stage("stage").await;
    v.stage("stage is idempotent").await;
    v.publish().await;
    assert!(volhealth_driver::mounts::is_mount_point(&v.target));
    std::fs::write(v.target.join("hello"), b"hi").unwrap();
    assert!(
        d.state.join("volumes").join(&v.id).join("hello").is_file(),
        "writes reach the volume data"
    );
    assert!(v.health_at_target().await.is_empty());
    assert!(v.health().await.is_empty());

    nix::mount::umount2(&v.target, nix::mount::MntFlags::MNT_DETACH).unwrap();
    let got = v.health_at_target().await;
    assert_eq!(
        got,
        vec![(INACCESSIBLE, "PublishPathNotMounted".to_string())]
    );
    std::fs::remove_dir(&v.target).unwrap();
    let got = v.health_at_target().await;
    assert_eq!(got, vec![(INACCESSIBLE, "PublishPathMissing".to_string())]);

    // Unpublishing what is no longer there succeeds: unpublish is idempotent.
    v.unpublish_and_unstage().await;
    assert!(!volhealth_driver::mounts::is_mount_point(&v.staging));
    assert!(
        v.health().await.is_empty(),
        "nothing staged, data present: healthy"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_stage_is_reported_by_node_get_volume_health() {
    let d = TestDriver::start(|_| {}).await;
    let mut node = d.node().await;
    let staging = d.dir.path().join("staging");
    let err = node
        .node_stage_volume(node_requests::stage("vh-missing", &staging))
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
    let mut v = d.node_volume("pvc-slow", 1 << 20).await;
    v.stage("stage").await;
    let got = v
        .node
        .node_get_volume_health(v1::NodeGetVolumeHealthRequest {
            volume_id: v.id.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let entries = got.volume_health.unwrap().health_statuses;
    assert_eq!(
        health_pairs(&entries),
        vec![(DEGRADED, "SlowIo".to_string())]
    );
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
    let mut v = d.node_volume("pvc-ro", 1 << 20).await;
    let _cleanup = v.prepare_mounts();
    v.stage("stage").await;
    v.publish().await;
    assert!(v.health_at_target().await.is_empty());
    // Out of band, the published mount turns read-only: writes through it fail.
    use nix::mount::{MsFlags, mount};
    let flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
    mount(None::<&str>, &v.target, None::<&str>, flags, None::<&str>)
        .unwrap_or_else(|e| panic!("remounting {} read-only: {e}", v.target.display()));
    let got = v.health_at_target().await;
    assert_eq!(got, vec![(INACCESSIBLE, "IoProbeFailed".to_string())]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn symlink_fallback_keeps_node_checks_meaningful() {
    let d = TestDriver::start(|c| c.allow_mounts = false).await;
    let mut v = d.node_volume("pvc-link", 1 << 20).await;
    std::fs::create_dir_all(&v.staging).unwrap();
    v.stage("stage").await;
    v.publish().await;
    std::fs::write(v.target.join("hello"), b"hi").unwrap();
    assert!(
        d.state.join("volumes").join(&v.id).join("hello").is_file(),
        "writes reach the volume data"
    );
    assert!(v.health_at_target().await.is_empty());
    // Someone points the target elsewhere.
    std::fs::remove_file(&v.target).unwrap();
    std::os::unix::fs::symlink(d.dir.path(), &v.target).unwrap();
    assert_eq!(
        v.health_at_target().await,
        vec![(INACCESSIBLE, "PublishPathNotMounted".to_string())]
    );
    std::fs::remove_file(&v.target).unwrap();
    assert_eq!(
        v.health_at_target().await,
        vec![(INACCESSIBLE, "PublishPathMissing".to_string())]
    );
    v.unpublish_and_unstage().await;
    assert!(
        v.staging.is_dir() && !v.staging.is_symlink(),
        "the CO's staging directory is given back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backing_data_deleted_is_inaccessible_on_the_node() {
    let d = TestDriver::start(|c| c.allow_mounts = false).await;
    let mut v = d.node_volume("pvc-del", 1 << 20).await;
    v.stage("stage").await;
    std::fs::remove_dir_all(d.state.join("volumes").join(&v.id)).unwrap();
    let got = v.health().await;
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
    let mut v = d.node_volume("pvc-loop", 32 << 20).await;
    let _cleanup = v.prepare_mounts();
    v.stage("stage (loop mount)").await;
    assert!(
        v.staging.join("lost+found").is_dir(),
        "the ext4 filesystem is mounted"
    );
    v.publish().await;
    assert!(v.health_at_target().await.is_empty());
    let stats = v
        .node
        .node_get_volume_stats(v1::NodeGetVolumeStatsRequest {
            volume_id: v.id.clone(),
            volume_path: v.target.display().to_string(),
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
    v.unpublish_and_unstage().await;
    assert!(!volhealth_driver::mounts::is_mount_point(&v.staging));
}
