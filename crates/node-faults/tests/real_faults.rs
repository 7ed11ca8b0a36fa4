//! The detector against real kernel faults on this machine: ext4 on loop devices, a read-only
//! remount, an unmounted publish path, I/O errors the kernel itself logs for a loop device over
//! a failing FUSE file, a FUSE mount that hangs beside healthy mounts, and injected kernel lines
//! for devices that cannot be made here (NFS, multipath, XFS), in the kernel's exact formats.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::io::Write;
use std::time::Duration;
use support::fault_fs::{Mode, Mounted};
use support::*;
use volhealth_csi_proto::v1::volume_health::VolumeHealthEntry;
use volhealth_csi_proto::v1::{StorageHealthErrorType, VolumeHealthErrorType};
use volhealth_node_faults::{Detector, DetectorConfig, NodeFaultMetrics, VolumeQuery};

const INACCESSIBLE: i32 = VolumeHealthErrorType::Inaccessible as i32;
const DEGRADED: i32 = VolumeHealthErrorType::Degraded as i32;
const TOOLS: &[&str] = &["mkfs.ext4", "losetup", "mount"];

fn has(entries: &[(i32, String)], status: i32, reason: &str) -> bool {
    entries.iter().any(|(s, r)| *s == status && r == reason)
}

/// A fresh ext4 loop volume and a detector probing within 5 s, when this machine has what
/// test `name` needs (the tools and /dev/kmsg).
fn loop_volume(name: &str) -> Option<(LoopVolume, Detector)> {
    can_run(name, TOOLS, &["/dev/kmsg"])
        .then(|| (LoopVolume::new(), detector(Duration::from_secs(5))))
}

#[tokio::test]
async fn healthy_then_unmounted_publish_path() {
    let Some((volume, detector)) = loop_volume("healthy_then_unmounted_publish_path") else {
        return;
    };
    let healthy = detector.volume_health(&volume.query()).await.unwrap();
    assert!(healthy.is_empty(), "{healthy:?}");

    unmount(&volume.publish);
    let entries = detector.volume_health(&volume.query()).await.unwrap();
    let found = reasons(&entries);
    assert!(has(&found, INACCESSIBLE, "NotMounted"), "{entries:?}");
    assert!(
        entries[0]
            .message
            .contains(volume.publish.to_str().unwrap())
    );

    // Mounted again: the condition is gone.
    bind(&volume.staging, &volume.publish);
    let entries = detector.volume_health(&volume.query()).await.unwrap();
    assert!(entries.is_empty(), "{entries:?}");
}

#[tokio::test]
async fn read_only_remount_is_seen_in_the_superblock_not_the_log() {
    let Some((volume, detector)) = loop_volume("read_only_remount") else {
        return;
    };
    run(
        "mount",
        &["-o", "remount,ro", volume.staging.to_str().unwrap()],
    );
    let entries = detector.volume_health(&volume.query()).await.unwrap();
    let found = reasons(&entries);
    assert!(
        has(&found, INACCESSIBLE, "FilesystemReadOnly"),
        "{entries:?}"
    );
    // ext4's "re-mounted <uuid> ro." line is no I/O error.
    assert!(!has(&found, DEGRADED, "IoErrors"), "{entries:?}");

    run(
        "mount",
        &["-o", "remount,rw", volume.staging.to_str().unwrap()],
    );
    let entries = detector.volume_health(&volume.query()).await.unwrap();
    assert!(entries.is_empty(), "{entries:?}");
}

#[tokio::test]
async fn kernel_io_errors_from_a_failing_device_under_ext4() {
    if !can_run("kernel_io_errors", TOOLS, &["/dev/kmsg", "/dev/fuse"]) {
        return;
    }
    // An ext4 image served by FUSE, on a loop device, mounted like a CSI volume.
    let dir = tempfile::tempdir().unwrap();
    let scratch = dir.path().join("scratch.img");
    volhealth_testkit::kernel_faults::make_ext4_image(&scratch);
    let fuse = Mounted::mount(&dir.path().join("fuse"), std::fs::read(&scratch).unwrap());
    let volume = LoopVolume::on_image(tempfile::tempdir().unwrap(), &fuse.file());
    let detector = detector(Duration::from_secs(5));
    assert!(
        detector
            .volume_health(&volume.query())
            .await
            .unwrap()
            .is_empty()
    );

    // The backing file fails: writes through ext4 make the kernel log real I/O errors.
    fuse.switch.set(Mode::FailIo);
    let file = volume.publish.join("data");
    let _ = std::fs::File::create(&file).and_then(|mut f| {
        f.write_all(&[7u8; 1 << 16])?;
        f.sync_all()
    });
    let _ = std::process::Command::new("sync").output();
    let name = volume.name();
    let entries = until(
        async || detector.volume_health(&volume.query()).await.unwrap(),
        |e| e.iter().any(|e| e.reason == "IoErrors"),
    )
    .await;
    let io = entries
        .iter()
        .find(|e| e.reason == "IoErrors")
        .unwrap_or_else(|| panic!("no IoErrors for {name}: {entries:?}"));
    assert!(io.message.contains(&name), "{io:?}");
    assert!(io.message.contains("last: "), "{io:?}");
    fuse.switch.set(Mode::Healthy);
    drop(volume);
}

#[tokio::test]
async fn a_hung_mount_delays_no_other_volume_and_holds_one_thread() {
    if !can_run("hung_mount", &[], &["/dev/fuse"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let hung = Mounted::mount(&dir.path().join("hung"), vec![0; 4096]);
    // Healthy mounts beside it: bind mounts of plain directories.
    let mut healthy = Vec::new();
    for i in 0..12 {
        let source = dir.path().join(format!("src{i}"));
        std::fs::create_dir_all(&source).unwrap();
        let point = dir.path().join(format!("pod{i}/mount"));
        bind(&source, &point);
        healthy.push(VolumeQuery {
            driver: "efs.csi.aws.com".into(),
            volume_id: format!("fs-{i}"),
            publish_path: Some(point),
            staging_path: None,
        });
    }
    let hung_query = VolumeQuery {
        driver: "efs.csi.aws.com".into(),
        volume_id: "fs-hung".into(),
        publish_path: Some(hung.point.clone()),
        staging_path: None,
    };
    hung.switch.set(Mode::Hang);
    let timeout = Duration::from_millis(500);
    let config = DetectorConfig {
        mountinfo: vec!["/proc/self/mountinfo".into()],
        kmsg: None,
        probe_timeout: timeout,
        max_probe_threads: 4,
        mount_table_max_age: Duration::ZERO,
        ..DetectorConfig::default()
    };
    let metrics = std::sync::Arc::new(NodeFaultMetrics::unregistered());
    let detector = Detector::start(config, metrics.clone());
    for cycle in 0..4 {
        let all = healthy.iter().chain(std::iter::once(&hung_query));
        // The cycle's bound: every answer, the hung one included, comes by the deadline.
        let answers = tokio::time::timeout(
            timeout * 20,
            futures::future::join_all(all.map(|q| detector.volume_health(q))),
        )
        .await
        .unwrap_or_else(|_| panic!("cycle {cycle} was held up by the hung mount"));
        let (hung_answer, healthy_answers) = answers.split_last().unwrap();
        for a in healthy_answers {
            assert_eq!(a.as_ref().unwrap(), &Vec::new(), "cycle {cycle}");
        }
        let hung_entries = hung_answer.as_ref().unwrap();
        assert_eq!(
            reasons(hung_entries),
            vec![(INACCESSIBLE, "MountUnresponsive".to_string())]
        );
        // One probe stays in flight for the hung mount; no thread is added for it per cycle.
        assert_eq!(detector.probe_pool().in_flight(), 1, "cycle {cycle}");
        assert!(detector.probe_pool().threads() <= 4, "cycle {cycle}");
    }
    assert!(detector.probe_pool().timed_out() >= 4);
    assert_eq!(metrics.get("statfs", "timeout"), 4);
    assert_eq!(metrics.get("statfs", "ok"), 4 * healthy.len() as u64);
    // Released, the mount answers again and the condition clears.
    hung.switch.set(Mode::Healthy);
    let answer = until(
        async || detector.volume_health(&hung_query).await,
        |a| a.as_ref().is_ok_and(Vec::is_empty),
    )
    .await;
    assert_eq!(answer, Ok(Vec::new()));
    for q in &healthy {
        unmount(q.publish_path.as_ref().unwrap());
    }
}

/// Waits until `detector` reports anything for `query`, and asserts that it is IoErrors at
/// `status` alone; answers the entries.
async fn io_errors_reported(
    detector: &Detector,
    query: &VolumeQuery,
    status: i32,
) -> Vec<VolumeHealthEntry> {
    let entries = until(
        async || detector.volume_health(query).await.unwrap(),
        |e| !e.is_empty(),
    )
    .await;
    assert_eq!(
        reasons(&entries),
        vec![(status, "IoErrors".to_string())],
        "{entries:?}"
    );
    entries
}

#[tokio::test]
async fn injected_lines_for_devices_not_made_here() {
    let Some((volume, detector)) = loop_volume("injected_lines") else {
        return;
    };
    let name = volume.name();
    // XFS shutting down on the volume's device: the filesystem is gone.
    inject(&format!(
        "XFS ({name}): Corruption of in-memory data (0x8) detected at xfs_trans_cancel+0x150/0x170 (fs/xfs/xfs_trans.c:1097).  Shutting down filesystem."
    ));
    let entries = io_errors_reported(&detector, &volume.query(), INACCESSIBLE).await;
    assert!(
        entries[0].message.contains("Shutting down filesystem"),
        "{entries:?}"
    );

    // A multipath path failing on a map named by number: matched through /sys/dev/block.
    let other = LoopVolume::new();
    let number = std::fs::read_to_string(format!("/sys/class/block/{}/dev", other.name())).unwrap();
    inject(&format!(
        "device-mapper: multipath: {}: Failing path 8:16.",
        number.trim()
    ));
    io_errors_reported(&detector, &other.query(), DEGRADED).await;
}

#[tokio::test]
async fn nfs_server_not_responding_is_the_drivers_storage_health() {
    if !can_run("nfs_server_lines", &[], &["/dev/kmsg"]) {
        return;
    }
    // An NFS mount cannot be made here: a mount table that lists one, on a real directory.
    let dir = tempfile::tempdir().unwrap();
    let point = dir.path().join("pod/mount");
    std::fs::create_dir_all(&point).unwrap();
    let server = "10.251.17.3";
    let info = dir.path().join("mountinfo");
    std::fs::write(
        &info,
        format!(
            "40 1 0:77 / {} rw,relatime shared:9 - nfs4 {server}:/exports/a rw,vers=4.1,addr={server}\n",
            point.display()
        ),
    )
    .unwrap();
    let config = DetectorConfig {
        mountinfo: vec![info],
        mount_table_max_age: Duration::ZERO,
        ..DetectorConfig::default()
    };
    let detector = Detector::start(
        config,
        std::sync::Arc::new(NodeFaultMetrics::unregistered()),
    );
    let driver = "nfs.csi.k8s.io";
    assert!(
        detector.storage_health(driver).await.is_err(),
        "nothing looked at: no report"
    );
    let query = VolumeQuery {
        driver: driver.into(),
        volume_id: "share-a".into(),
        publish_path: Some(point),
        staging_path: None,
    };
    assert!(detector.volume_health(&query).await.unwrap().is_empty());
    assert_eq!(detector.storage_health(driver).await, Ok(Vec::new()));

    inject(&format!(
        "nfs: server {server} not responding, still trying"
    ));
    let health = until(
        async || detector.storage_health(driver).await.unwrap(),
        |h| !h.is_empty(),
    )
    .await;
    assert_eq!(health.len(), 1, "{health:?}");
    assert_eq!(
        health[0].status,
        StorageHealthErrorType::StorageUnreachable as i32
    );
    assert_eq!(health[0].reason, "NfsServerNotResponding");
    assert!(health[0].message.contains(server));

    inject(&format!("nfs: server {server} OK"));
    let health = until(
        async || detector.storage_health(driver).await.unwrap(),
        Vec::is_empty,
    )
    .await;
    assert!(health.is_empty(), "{health:?}");
}
