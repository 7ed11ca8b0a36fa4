//! Storage-side detection for NodeGetStorageHealth: can this node reach the state dir, and is
//! there room left in it.

use crate::condition::{StorageCondition, storage_status};
use crate::detect_controller::{approximate_bytes, fs_stats};
use std::io::Write;
use std::path::Path;

fn unreachable(reason: &str, message: String) -> StorageCondition {
    StorageCondition {
        status: storage_status::STORAGE_UNREACHABLE,
        reason: reason.into(),
        message,
        access_mode: None,
        volume_mode: None,
    }
}

/// Checks the state dir (blocking: call it from a blocking thread under a deadline).
pub fn storage_conditions(
    root: &Path,
    low_fraction: f64,
    probe_name: &str,
) -> Vec<StorageCondition> {
    match std::fs::metadata(root) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return vec![unreachable(
                "StateDirMissing",
                format!("{} is not a directory", root.display()),
            )];
        }
        Err(e) => {
            return vec![unreachable(
                "StateDirMissing",
                format!("{}: {e}", root.display()),
            )];
        }
    }
    if let Err(e) = std::fs::read_dir(root) {
        return vec![unreachable(
            "StateDirUnreadable",
            format!("listing {}: {e}", root.display()),
        )];
    }
    let readonly = nix::sys::statvfs::statvfs(root)
        .map(|st| st.flags().contains(nix::sys::statvfs::FsFlags::ST_RDONLY))
        .unwrap_or(false);
    if readonly {
        return vec![unreachable(
            "StateDirReadOnly",
            format!("{} is on a read-only filesystem", root.display()),
        )];
    }
    let probe = root.join(probe_name);
    let written =
        std::fs::File::create(&probe).and_then(|mut f| f.write_all(b"volhealth storage probe"));
    let _ = std::fs::remove_file(&probe);
    if let Err(e) = written {
        let reason = if e.raw_os_error() == Some(nix::libc::EROFS) {
            "StateDirReadOnly"
        } else {
            "StateDirNotWritable"
        };
        return vec![unreachable(
            reason,
            format!("writing a probe file in {}: {e}", root.display()),
        )];
    }
    let mut out = Vec::new();
    if let Some(fs) = fs_stats(root)
        && (fs.available_bytes as f64) < low_fraction * fs.total_bytes as f64
    {
        let pct = if fs.total_bytes > 0 {
            fs.available_bytes as f64 * 100.0 / fs.total_bytes as f64
        } else {
            0.0
        };
        out.push(StorageCondition {
            status: storage_status::STORAGE_DEGRADED,
            reason: "LowFreeSpace".into(),
            message: format!(
                "{} free of {} ({pct:.0}%) on the filesystem of {}, below {:.0}%",
                approximate_bytes(fs.available_bytes),
                approximate_bytes(fs.total_bytes),
                root.display(),
                low_fraction * 100.0
            ),
            access_mode: None,
            volume_mode: None,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_state_dir_is_unreachable() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        let c = storage_conditions(&gone, 0.0, ".probe");
        assert_eq!(c[0].status, storage_status::STORAGE_UNREACHABLE);
        assert_eq!(c[0].reason, "StateDirMissing");
        assert!(storage_conditions(dir.path(), 0.0, ".probe").is_empty());
        // Any filesystem is below a 100% free threshold.
        let low = storage_conditions(dir.path(), 1.01, ".probe");
        assert_eq!(low[0].reason, "LowFreeSpace");
    }
}
