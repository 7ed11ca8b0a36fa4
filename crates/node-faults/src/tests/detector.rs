//! The detector's rules over a written mount table and a fake sysfs.

use crate::detector::{Detector, DetectorConfig, VolumeQuery};
use crate::metrics::NodeFaultMetrics;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// A directory with a mount table `mountinfo` (lines given) and a sysfs under `sys`.
fn detector(dir: &Path, lines: &[String]) -> Detector {
    let info = dir.join("mountinfo");
    std::fs::write(&info, lines.join("\n") + "\n").unwrap();
    let config = DetectorConfig {
        mountinfo: vec![info],
        sys_root: dir.join("sys"),
        kmsg: None,
        probe_timeout: Duration::from_secs(30),
        mount_table_max_age: Duration::ZERO,
        ..DetectorConfig::default()
    };
    Detector::start(config, Arc::new(NodeFaultMetrics::unregistered()))
}

fn line(id: u32, dev: &str, point: &Path, mount_opts: &str, super_opts: &str) -> String {
    format!(
        "{id} 1 {dev} / {} {mount_opts} shared:1 - ext4 /dev/sdx {super_opts}",
        point.display()
    )
}

fn query(publish: Option<PathBuf>, staging: Option<PathBuf>) -> VolumeQuery {
    VolumeQuery {
        driver: "d.example.com".into(),
        volume_id: "vol-1".into(),
        publish_path: publish,
        staging_path: staging,
    }
}

fn reasons(entries: &[volhealth_csi_proto::v1::volume_health::VolumeHealthEntry]) -> Vec<&str> {
    entries.iter().map(|e| e.reason.as_str()).collect()
}

fn dirs(root: &Path) -> (PathBuf, PathBuf) {
    let (publish, staging) = (root.join("pod/mount"), root.join("globalmount"));
    std::fs::create_dir_all(&publish).unwrap();
    std::fs::create_dir_all(&staging).unwrap();
    (publish, staging)
}

#[tokio::test]
async fn read_only_is_a_fault_only_where_the_volume_was_mounted_read_write() {
    let tmp = tempfile::tempdir().unwrap();
    let (publish, staging) = dirs(tmp.path());
    let q = query(Some(publish.clone()), Some(staging.clone()));
    // errors=remount-ro hit: the superblock is ro, the bind mounts keep rw.
    let d = detector(
        tmp.path(),
        &[
            line(1, "8:1", &staging, "rw", "ro,errors=remount-ro"),
            line(2, "8:1", &publish, "rw", "ro,errors=remount-ro"),
        ],
    );
    let entries = d.volume_health(&q).await.unwrap();
    assert_eq!(reasons(&entries), ["FilesystemReadOnly"]);
    assert!(entries[0].message.contains("ro,errors=remount-ro"));
    // Published read-only on purpose (the pod's, claim's or PV's readOnly).
    let d = detector(
        tmp.path(),
        &[
            line(1, "8:1", &staging, "ro", "ro"),
            line(2, "8:1", &publish, "ro", "ro"),
        ],
    );
    assert!(d.volume_health(&q).await.unwrap().is_empty());
}

#[tokio::test]
async fn not_mounted_looks_at_the_path_the_workload_uses() {
    let tmp = tempfile::tempdir().unwrap();
    let (publish, staging) = dirs(tmp.path());
    // A driver without staging: the staging directory exists but is not mounted.
    let d = detector(tmp.path(), &[line(2, "8:1", &publish, "rw", "rw")]);
    let both = query(Some(publish.clone()), Some(staging.clone()));
    assert!(d.volume_health(&both).await.unwrap().is_empty());
    // Before a publish, the staging path is the one that must be mounted.
    let staged = query(None, Some(staging.clone()));
    assert_eq!(
        reasons(&d.volume_health(&staged).await.unwrap()),
        ["NotMounted"]
    );
    // No path at all: nothing to look at, no answer.
    assert!(d.volume_health(&query(None, None)).await.is_err());
}

#[tokio::test]
async fn no_mount_table_is_no_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let (publish, _) = dirs(tmp.path());
    let config = DetectorConfig {
        mountinfo: vec![tmp.path().join("missing")],
        kmsg: None,
        ..DetectorConfig::default()
    };
    let d = Detector::start(config, Arc::new(NodeFaultMetrics::unregistered()));
    assert!(d.volume_health(&query(Some(publish), None)).await.is_err());
    assert!(d.storage_health("d.example.com").await.is_err());
}

/// sysfs with multipath map dm-0 (254:0) over sdb and sdc, in the given SCSI states.
fn multipath(sys: &Path, sdb: &str, sdc: &str) {
    let devices = sys.join("devices/virtual/block");
    std::fs::create_dir_all(sys.join("class/block")).unwrap();
    std::fs::create_dir_all(sys.join("dev/block")).unwrap();
    for (name, state) in [("sdb", sdb), ("sdc", sdc)] {
        std::fs::create_dir_all(devices.join(name).join("device")).unwrap();
        std::fs::write(devices.join(name).join("device/state"), state).unwrap();
        symlink(devices.join(name), sys.join("class/block").join(name)).unwrap();
    }
    std::fs::create_dir_all(devices.join("dm-0/dm")).unwrap();
    std::fs::create_dir_all(devices.join("dm-0/slaves")).unwrap();
    for name in ["sdb", "sdc"] {
        symlink(devices.join(name), devices.join("dm-0/slaves").join(name)).unwrap();
    }
    symlink(devices.join("dm-0"), sys.join("class/block/dm-0")).unwrap();
    symlink(devices.join("dm-0"), sys.join("dev/block/254:0")).unwrap();
}

#[tokio::test]
async fn multipath_paths_down_are_the_drivers_storage_health() {
    for (sdb, sdc, want) in [
        ("running\n", "running\n", None),
        ("running\n", "offline\n", Some("StorageDegraded")),
        (
            "transport-offline\n",
            "offline\n",
            Some("StorageUnreachable"),
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let (publish, _) = dirs(tmp.path());
        multipath(&tmp.path().join("sys"), sdb, sdc);
        let d = detector(tmp.path(), &[line(1, "254:0", &publish, "rw", "rw")]);
        assert!(
            d.volume_health(&query(Some(publish), None))
                .await
                .unwrap()
                .is_empty()
        );
        let health = d.storage_health("d.example.com").await.unwrap();
        let got = health.first().map(|h| {
            let status = volhealth_csi_proto::v1::StorageHealthErrorType::try_from(h.status)
                .unwrap()
                .as_str_name();
            assert_eq!(h.reason, "PathDown");
            assert!(h.message.contains("multipath dm-0"), "{}", h.message);
            match status {
                "STORAGE_DEGRADED" => "StorageDegraded",
                _ => "StorageUnreachable",
            }
        });
        assert_eq!(got, want, "{sdb:?} {sdc:?}");
        // A driver with no volume mounted here has nothing to show.
        assert_eq!(d.storage_health("other.example.com").await, Ok(Vec::new()));
    }
}
