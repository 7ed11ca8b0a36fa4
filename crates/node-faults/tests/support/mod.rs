//! The detector's side of the real-fault tests; the faults themselves (loop devices, FUSE
//! filesystems that fail or hang, `/dev/kmsg` lines) come from the testkit.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};
use volhealth_node_faults::{Detector, DetectorConfig, NodeFaultMetrics, VolumeQuery};

pub use volhealth_testkit::kernel_faults::{
    LoopVolume, bind, can_run, fault_fs, inject_kmsg as inject, run, unmount,
};

/// The query NodeGetVolumeHealth would make for a loop volume.
pub trait Query {
    fn query(&self) -> VolumeQuery;
}

impl Query for LoopVolume {
    fn query(&self) -> VolumeQuery {
        VolumeQuery {
            driver: "ebs.csi.aws.com".into(),
            volume_id: self.name(),
            publish_path: Some(self.publish.clone()),
            staging_path: Some(self.staging.clone()),
        }
    }
}

/// A detector on this machine's mount table, sysfs and kernel log, with a short probe timeout.
pub fn detector(probe_timeout: Duration) -> Detector {
    let config = DetectorConfig {
        mountinfo: vec!["/proc/self/mountinfo".into()],
        probe_timeout,
        max_probe_threads: 8,
        mount_table_max_age: Duration::ZERO,
        ..DetectorConfig::default()
    };
    let detector = Detector::start(config, Arc::new(NodeFaultMetrics::unregistered()));
    assert!(
        detector.reads_kernel_log(),
        "/dev/kmsg must be readable here"
    );
    detector
}

/// (status, reason) of each entry.
pub fn reasons(
    entries: &[volhealth_csi_proto::v1::volume_health::VolumeHealthEntry],
) -> Vec<(i32, String)> {
    entries
        .iter()
        .map(|e| (e.status, e.reason.clone()))
        .collect()
}

/// Asks until `done` holds for the answer (the kernel log is read on its own thread), up to a
/// minute; returns the last answer.
pub async fn until<T: std::fmt::Debug>(
    mut ask: impl AsyncFnMut() -> T,
    done: impl Fn(&T) -> bool,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let answer = ask().await;
        if done(&answer) || Instant::now() > deadline {
            return answer;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
