//! Bind and loop mounts, and what to do where the machine does not allow them.
//!
//! With privilege (root, or CAP_SYS_ADMIN) a directory volume is bind-mounted and an image volume
//! is loop-mounted, as a real driver would. Without it (a developer laptop) the driver falls back to
//! a symlink from the target path to the source and records that in the attempt record, so the node
//! checks still compare the target with what it should show. The fallback is announced once in the log.

use crate::{Error, Result};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How a staged or published path was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MountMethod {
    /// `mount --bind`.
    Bind,
    /// `mount -o loop` of an ext4 image.
    Loop,
    /// A symlink to the source (no mount privilege).
    Symlink,
}

/// Whether this process may mount: tries a bind mount of a scratch directory onto another.
pub fn probe_privilege(scratch: &Path) -> bool {
    let src = scratch.join("mount-probe-src");
    let dst = scratch.join("mount-probe-dst");
    if std::fs::create_dir_all(&src).is_err() || std::fs::create_dir_all(&dst).is_err() {
        return false;
    }
    let ok = bind(&src, &dst, false).is_ok();
    if ok {
        let _ = unmount(&dst);
    }
    let _ = std::fs::remove_dir(&src);
    let _ = std::fs::remove_dir(&dst);
    ok
}

/// Bind-mounts `src` onto `dst` (read-only when asked).
pub fn bind(src: &Path, dst: &Path, readonly: bool) -> Result<()> {
    use nix::mount::{MsFlags, mount};
    mount(Some(src), dst, None::<&str>, MsFlags::MS_BIND, None::<&str>)
        .map_err(|e| Error::io("bind-mounting onto", dst, std::io::Error::from(e)))?;
    if readonly {
        let flags = MsFlags::MS_BIND | MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY;
        if let Err(e) = mount(None::<&str>, dst, None::<&str>, flags, None::<&str>) {
            let _ = unmount(dst);
            return Err(Error::io(
                "remounting read-only",
                dst,
                std::io::Error::from(e),
            ));
        }
    }
    Ok(())
}

/// Loop-mounts an ext4 image onto `dst` with mount(8), which sets up the loop device.
pub async fn loop_mount(image: &Path, dst: &Path) -> Result<()> {
    let mut cmd = tokio::process::Command::new("mount");
    cmd.args(["-t", "ext4", "-o", "loop"])
        .arg(image)
        .arg(dst)
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .map_err(|_| Error::Tool {
            tool: "mount",
            detail: "no answer within 60s".into(),
        })?
        .map_err(|e| Error::Tool {
            tool: "mount",
            detail: e.to_string(),
        })?;
    if !out.status.success() {
        return Err(Error::Tool {
            tool: "mount",
            detail: format!(
                "loop-mounting {}: {}",
                image.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(())
}

/// Unmounts `path` (loop devices mounted by mount(8) are released with it); not mounted is fine.
pub fn unmount(path: &Path) -> Result<()> {
    use nix::mount::{MntFlags, umount2};
    match umount2(path, MntFlags::empty()) {
        Ok(()) => Ok(()),
        Err(nix::errno::Errno::EINVAL) | Err(nix::errno::Errno::ENOENT) => Ok(()),
        Err(e) => Err(Error::io("unmounting", path, std::io::Error::from(e))),
    }
}

/// Mount points of this process's mount namespace.
pub fn mount_points() -> HashSet<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    parse_mountinfo(&text)
}

/// Whether `path` is a mount point.
pub fn is_mount_point(path: &Path) -> bool {
    let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    mount_points().contains(&canonical)
}

/// The mount points listed in a `/proc/<pid>/mountinfo` text (octal escapes decoded).
pub fn parse_mountinfo(text: &str) -> HashSet<PathBuf> {
    text.lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|p| PathBuf::from(volhealth_node_faults::mount_table::unescape(p)))
        .collect()
}

/// Image files currently attached to a loop device (their filesystem may be live).
pub fn loop_backing_files() -> HashSet<PathBuf> {
    let mut out = HashSet::new();
    let Ok(entries) = std::fs::read_dir("/sys/block") else {
        return out;
    };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with("loop") {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(entry.path().join("loop").join("backing_file")) {
            out.insert(PathBuf::from(text.trim()));
        }
    }
    out
}

/// Points `target` at `source` with a symlink, replacing an empty directory the CO made.
pub fn symlink(source: &Path, target: &Path) -> Result<()> {
    if let Ok(meta) = std::fs::symlink_metadata(target) {
        if meta.file_type().is_symlink() {
            std::fs::remove_file(target).map_err(|e| Error::io("replacing symlink", target, e))?;
        } else if meta.is_dir() {
            std::fs::remove_dir(target)
                .map_err(|e| Error::io("replacing empty directory with a symlink", target, e))?;
        } else {
            return Err(Error::Invalid(format!(
                "{} exists and is not a directory",
                target.display()
            )));
        }
    }
    if let Some(parent) = target.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io("creating parent of", target, e))?;
    }
    std::os::unix::fs::symlink(source, target).map_err(|e| Error::io("creating symlink", target, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_paths_are_decoded() {
        let text = "36 35 98:0 /mnt1 /mnt\\040two rw,noatime master:1 - ext3 /dev/root rw\n\
                    37 35 0:5 / /proc rw - proc proc rw\n";
        let points = parse_mountinfo(text);
        assert!(points.contains(Path::new("/mnt two")));
        assert!(points.contains(Path::new("/proc")));
    }
}
