//! Real faults for the detector's tests: ext4 on loop devices, bind mounts, FUSE filesystems
//! that fail or hang on demand, and lines written to `/dev/kmsg`.
//!
//! Everything here needs root (mount, loop devices, `/dev/fuse`, writing `/dev/kmsg`); a test
//! whose needs are missing prints why and passes, unless `VOLHEALTH_REQUIRE_TOOLS=1`.
#![allow(dead_code)]

pub mod fault_fs;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use volhealth_node_faults::{Detector, DetectorConfig, NodeFaultMetrics, VolumeQuery};

/// Whether the test can run: root, the tools and the devices it needs. Missing → prints
/// SKIPPED (or panics under `VOLHEALTH_REQUIRE_TOOLS=1`).
pub fn can_run(test: &str, tools: &[&str], devices: &[&str]) -> bool {
    let mut missing = Vec::new();
    if !nix::unistd::geteuid().is_root() {
        missing.push("root".to_string());
    }
    for tool in tools {
        let found = Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success() || !o.stdout.is_empty() || !o.stderr.is_empty());
        if !found {
            missing.push(tool.to_string());
        }
    }
    for device in devices {
        if !Path::new(device).exists() {
            missing.push(device.to_string());
        }
    }
    if missing.is_empty() {
        return true;
    }
    let what = missing.join(", ");
    if std::env::var("VOLHEALTH_REQUIRE_TOOLS").as_deref() == Ok("1") {
        panic!("{test} needs {what} (VOLHEALTH_REQUIRE_TOOLS=1)");
    }
    println!("SKIPPED {test}: needs {what}");
    false
}

/// Runs a command; panics with its output when it fails.
pub fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A bind mount of `from` on `to`, made with mount(2).
pub fn bind(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    nix::mount::mount(
        Some(from),
        to,
        None::<&str>,
        nix::mount::MsFlags::MS_BIND,
        None::<&str>,
    )
    .unwrap_or_else(|e| panic!("bind {} on {}: {e}", from.display(), to.display()));
}

/// Unmounts `path` lazily, ignoring "not mounted".
pub fn unmount(path: &Path) {
    let _ = nix::mount::umount2(path, nix::mount::MntFlags::MNT_DETACH);
}

/// An ext4 filesystem on a loop device, mounted at a staging path and bound to a publish path
/// like a CSI volume; undone on drop.
pub struct LoopVolume {
    pub dir: tempfile::TempDir,
    pub device: String,
    pub staging: PathBuf,
    pub publish: PathBuf,
}

impl LoopVolume {
    /// A new image file of 32 MiB under a fresh directory.
    pub fn new() -> LoopVolume {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("disk.img");
        std::fs::File::create(&image)
            .unwrap()
            .set_len(32 << 20)
            .unwrap();
        run("mkfs.ext4", &["-q", "-F", image.to_str().unwrap()]);
        LoopVolume::on_image(dir, &image)
    }

    /// An existing ext4 image (possibly on a FUSE filesystem) attached and mounted.
    pub fn on_image(dir: tempfile::TempDir, image: &Path) -> LoopVolume {
        let device = run("losetup", &["-f", "--show", image.to_str().unwrap()]);
        let staging = dir.path().join("globalmount");
        let publish = dir.path().join("pod/mount");
        std::fs::create_dir_all(&staging).unwrap();
        run("mount", &["-t", "ext4", &device, staging.to_str().unwrap()]);
        bind(&staging, &publish);
        LoopVolume {
            dir,
            device,
            staging,
            publish,
        }
    }

    /// The kernel name of the loop device (`loop3`).
    pub fn name(&self) -> String {
        self.device.trim_start_matches("/dev/").to_string()
    }

    /// The query NodeGetVolumeHealth would make for it.
    pub fn query(&self) -> VolumeQuery {
        VolumeQuery {
            driver: "ebs.csi.aws.com".into(),
            volume_id: self.name(),
            publish_path: Some(self.publish.clone()),
            staging_path: Some(self.staging.clone()),
        }
    }
}

impl Drop for LoopVolume {
    fn drop(&mut self) {
        unmount(&self.publish);
        unmount(&self.staging);
        let _ = Command::new("losetup").args(["-d", &self.device]).output();
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

/// Writes one line to the kernel log, at err level, as an operator or a test can.
pub fn inject(line: &str) {
    use std::io::Write;
    let mut kmsg = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .expect("opening /dev/kmsg for writing");
    kmsg.write_all(format!("<3>{line}\n").as_bytes())
        .expect("writing /dev/kmsg");
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
