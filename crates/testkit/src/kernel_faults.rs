//! Real kernel faults for node-side tests: ext4 on loop devices, bind mounts, FUSE filesystems
//! that fail or hang on demand ([`fault_fs`]), and lines written to `/dev/kmsg`.
//!
//! Everything here needs root (mount, loop devices, `/dev/fuse`, writing `/dev/kmsg`); a test
//! whose needs are missing prints why and passes, unless `VOLHEALTH_REQUIRE_TOOLS=1`.

pub mod fault_fs;

use std::path::{Path, PathBuf};
use std::process::Command;

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

/// A bind mount of `from` on `to` (created if missing), made with mount(2).
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

/// Whether `path` is a mount point in this process's mount table.
pub fn is_mounted(path: &Path) -> bool {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let want = path.to_str().unwrap();
    info.lines().any(|l| l.split(' ').nth(4) == Some(want))
}

/// Writes one line to the kernel log at err level (`<3>`), as an operator or a test can: the
/// kernel stores it with the user facility, in the kernel's own line format.
pub fn inject_kmsg(line: &str) {
    use std::io::Write;
    let mut kmsg = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .expect("opening /dev/kmsg for writing");
    kmsg.write_all(format!("<3>{line}\n").as_bytes())
        .expect("writing /dev/kmsg");
}

/// An ext4 filesystem on a loop device, mounted at a staging path and bound to a publish path
/// like a CSI volume; undone on drop.
pub struct LoopVolume {
    /// The directory holding the image (unless given) and both mount points.
    pub dir: tempfile::TempDir,
    /// The loop device (`/dev/loop3`).
    pub device: String,
    /// Where the filesystem is mounted, as NodeStageVolume would.
    pub staging: PathBuf,
    /// Where it is bound for the pod, as NodePublishVolume would.
    pub publish: PathBuf,
}

impl LoopVolume {
    /// A new 32 MiB ext4 image under a fresh directory, attached and mounted.
    pub fn new() -> LoopVolume {
        let dir = tempfile::tempdir().unwrap();
        let image = dir.path().join("disk.img");
        make_ext4_image(&image);
        LoopVolume::on_image(dir, &image)
    }

    /// An existing ext4 image (possibly on a FUSE filesystem) attached and mounted under `dir`.
    pub fn on_image(dir: tempfile::TempDir, image: &Path) -> LoopVolume {
        let staging = dir.path().join("globalmount");
        let publish = dir.path().join("pod/mount");
        let (device, staging, publish) = attach_and_mount(image, staging, publish);
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
}

impl Default for LoopVolume {
    fn default() -> Self {
        LoopVolume::new()
    }
}

impl Drop for LoopVolume {
    fn drop(&mut self) {
        unmount(&self.publish);
        unmount(&self.staging);
        let _ = Command::new("losetup").args(["-d", &self.device]).output();
    }
}

/// Writes a 32 MiB ext4 image to `image`.
pub fn make_ext4_image(image: &Path) {
    std::fs::File::create(image)
        .unwrap()
        .set_len(32 << 20)
        .unwrap();
    run("mkfs.ext4", &["-q", "-F", image.to_str().unwrap()]);
}

/// Attaches `image` to a loop device, mounts it at `staging` and binds that to `publish`
/// (replacing whatever file or link is at either path); returns the device and both paths.
pub fn attach_and_mount(
    image: &Path,
    staging: PathBuf,
    publish: PathBuf,
) -> (String, PathBuf, PathBuf) {
    let device = run("losetup", &["-f", "--show", image.to_str().unwrap()]);
    for to in [&staging, &publish] {
        if std::fs::symlink_metadata(to).is_ok_and(|m| !m.is_dir()) {
            std::fs::remove_file(to).unwrap();
        }
        std::fs::create_dir_all(to).unwrap();
    }
    run("mount", &["-t", "ext4", &device, staging.to_str().unwrap()]);
    bind(&staging, &publish);
    (device, staging, publish)
}
