//! Controller-side detection: what is wrong with a volume as seen from the storage pool.
//!
//! - data deleted out of band → Inaccessible / VolumeNotFound
//! - image whose `e2fsck -n` fails → DataLoss / FilesystemCorrupt
//! - backing filesystem low on space while more is promised than is left → Degraded / ThinPoolLowSpace
//! - backing filesystem full → Inaccessible / ThinPoolOutOfDataSpace

use crate::backend_image::FsckOutcome;
use crate::condition::{Condition, volume_status};
use crate::config::BackendKind;
use crate::records::VolumeRecord;
use std::path::Path;

/// Size and free space of the filesystem holding the volumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsStats {
    /// Size in bytes.
    pub total_bytes: u64,
    /// Bytes an unprivileged writer can still use.
    pub available_bytes: u64,
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

/// Reads the size and free space of the filesystem holding `path`.
pub fn fs_stats(path: &Path) -> Option<FsStats> {
    let st = nix::sys::statvfs::statvfs(path).ok()?;
    let frag = st.fragment_size() as u64;
    Some(FsStats {
        total_bytes: st.blocks() as u64 * frag,
        available_bytes: st.blocks_available() as u64 * frag,
    })
}

/// The pool as a whole, gathered once per refresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pool {
    /// Backing filesystem, if it could be read.
    pub fs: Option<FsStats>,
    /// Bytes promised to volumes but not yet allocated (sparse images' holes; all of a directory volume's capacity).
    pub unbacked_bytes: u64,
}

/// When space counts as low or exhausted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpaceThresholds {
    /// Free space below this fraction of the filesystem is low.
    pub low_fraction: f64,
    /// Free space below this many bytes is exhausted.
    pub full_bytes: u64,
}

/// What was observed about one volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// Whether the backing data still exists.
    pub present: bool,
    /// Latest filesystem check of an image, if any ran.
    pub fsck: Option<FsckOutcome>,
}

/// The conditions of one volume.
pub fn volume_conditions(
    record: &VolumeRecord,
    data_path: &Path,
    obs: &Observation,
    pool: &Pool,
    limits: &SpaceThresholds,
) -> Vec<Condition> {
    let kind = match record.backend {
        BackendKind::Dir => "directory",
        BackendKind::Image => "image",
    };
    if !obs.present {
        return vec![Condition::new(
            volume_status::INACCESSIBLE,
            "VolumeNotFound",
            format!(
                "backing {kind} {} no longer exists (volume created {})",
                data_path.display(),
                record.created_at
            ),
        )];
    }
    let mut out = Vec::new();
    if let Some(FsckOutcome::Corrupt { code, summary }) = &obs.fsck {
        out.push(Condition::new(
            volume_status::DATA_LOSS,
            "FilesystemCorrupt",
            format!(
                "e2fsck -n on {} exited with {code}: {summary}",
                data_path.display()
            ),
        ));
    }
    if let Some(fs) = pool.fs {
        let promised = format!(
            "{} free of {} on the backing filesystem, {} promised to volumes but not allocated",
            approximate_bytes(fs.available_bytes),
            approximate_bytes(fs.total_bytes),
            approximate_bytes(pool.unbacked_bytes)
        );
        if fs.available_bytes < limits.full_bytes {
            out.push(Condition::new(
                volume_status::INACCESSIBLE,
                "ThinPoolOutOfDataSpace",
                promised,
            ));
        } else if (fs.available_bytes as f64) < limits.low_fraction * fs.total_bytes as f64
            && pool.unbacked_bytes > fs.available_bytes
        {
            out.push(Condition::new(
                volume_status::DEGRADED,
                "ThinPoolLowSpace",
                promised,
            ));
        }
    }
    out
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

    fn rec(backend: BackendKind) -> VolumeRecord {
        VolumeRecord {
            id: "v".into(),
            name: "n".into(),
            backend,
            capacity_bytes: 1 << 30,
            created_at: "t".into(),
        }
    }
    const LIMITS: SpaceThresholds = SpaceThresholds {
        low_fraction: 0.1,
        full_bytes: 1000,
    };
    fn pool(avail: u64, unbacked: u64) -> Pool {
        Pool {
            fs: Some(FsStats {
                total_bytes: 100_000,
                available_bytes: avail,
            }),
            unbacked_bytes: unbacked,
        }
    }
    fn present() -> Observation {
        Observation {
            present: true,
            fsck: None,
        }
    }

    /// The conditions of a `backend` volume observed as `obs` on a pool with room to spare.
    fn with_plenty_of_space(backend: BackendKind, obs: &Observation) -> Vec<Condition> {
        volume_conditions(
            &rec(backend),
            Path::new("/x"),
            obs,
            &pool(50_000, 0),
            &LIMITS,
        )
    }

    #[test]
    fn missing_data_is_inaccessible() {
        let obs = Observation {
            present: false,
            fsck: None,
        };
        let c = with_plenty_of_space(BackendKind::Dir, &obs);
        assert_eq!(c.len(), 1);
        assert_eq!(
            (c[0].status, c[0].reason.as_str()),
            (volume_status::INACCESSIBLE, "VolumeNotFound")
        );
    }

    #[test]
    fn corrupt_image_is_data_loss() {
        let obs = Observation {
            present: true,
            fsck: Some(FsckOutcome::Corrupt {
                code: 8,
                summary: "bad".into(),
            }),
        };
        let c = with_plenty_of_space(BackendKind::Image, &obs);
        assert_eq!(c[0].reason, "FilesystemCorrupt");
        assert!(c[0].message.contains("exited with 8"));
    }

    #[test]
    fn space_thresholds() {
        let r = rec(BackendKind::Image);
        let p = Path::new("/x");
        assert!(
            volume_conditions(&r, p, &present(), &pool(50_000, 10_000_000), &LIMITS).is_empty()
        );
        // Low but not over-committed: fine.
        assert!(volume_conditions(&r, p, &present(), &pool(5_000, 100), &LIMITS).is_empty());
        let low = volume_conditions(&r, p, &present(), &pool(5_000, 10_000_000), &LIMITS);
        assert_eq!(
            (low[0].status, low[0].reason.as_str()),
            (volume_status::DEGRADED, "ThinPoolLowSpace")
        );
        let full = volume_conditions(&r, p, &present(), &pool(10, 0), &LIMITS);
        assert_eq!(
            (full[0].status, full[0].reason.as_str()),
            (volume_status::INACCESSIBLE, "ThinPoolOutOfDataSpace")
        );
    }
}
