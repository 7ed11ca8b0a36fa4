//! Storage-side detection for NodeGetStorageHealth: can this node reach the state dir, and is
//! there room left in it.

use crate::condition::{StorageCondition, storage_status};
use crate::detect_controller::fs_stats;
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

/// A size to three significant digits in binary units: `512 B`, `9.31 GiB`, `250 GiB`.
/// Messages carry sizes this way, so that a few bytes written between two probes do not change
/// a stored condition every cycle.
pub(crate) fn approximate_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    let digits = if unit == 0 || value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.digits$} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_rounded_so_small_changes_keep_the_message() {
        assert_eq!(approximate_bytes(512), "512 B");
        assert_eq!(approximate_bytes(10 * 1024 * 1024 * 1024), "10.0 GiB");
        assert_eq!(approximate_bytes(250 * 1024 * 1024 * 1024), "250 GiB");
        assert_eq!(approximate_bytes(9_999_999_999), "9.31 GiB");
        assert_eq!(
            approximate_bytes(9_999_999_999),
            approximate_bytes(9_999_999_999 - 4096 * 100),
            "a few hundred pages written between probes"
        );
    }

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
