//! Image volumes: a sparse file `<state-dir>/volumes/<id>.img` holding ext4 (thin provisioning
//! over the state dir's filesystem).

use crate::{Error, Result};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

/// Smallest image we make: mkfs.ext4 needs room for its metadata and journal.
pub const MIN_IMAGE_BYTES: i64 = 16 * 1024 * 1024;

/// How long mkfs.ext4 may take.
const MKFS_TIMEOUT: Duration = Duration::from_secs(120);

/// Creates a sparse file of `capacity` bytes and makes an ext4 filesystem on it.
pub async fn create(path: &Path, capacity: i64) -> Result<()> {
    let len = u64::try_from(capacity)
        .map_err(|_| Error::Invalid(format!("negative capacity {capacity}")))?;
    let file =
        std::fs::File::create(path).map_err(|e| Error::io("creating image file", path, e))?;
    file.set_len(len)
        .map_err(|e| Error::io("sizing image file", path, e))?;
    drop(file);
    let mut cmd = tokio::process::Command::new("mkfs.ext4");
    cmd.args(["-q", "-F", "-E", "nodiscard,lazy_itable_init=1", "-m", "0"])
        .arg(path)
        .kill_on_drop(true);
    let out = match tokio::time::timeout(MKFS_TIMEOUT, cmd.output()).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => {
            let _ = std::fs::remove_file(path);
            return Err(Error::Tool {
                tool: "mkfs.ext4",
                detail: e.to_string(),
            });
        }
        Err(_) => {
            let _ = std::fs::remove_file(path);
            return Err(Error::Tool {
                tool: "mkfs.ext4",
                detail: format!("no answer within {MKFS_TIMEOUT:?}"),
            });
        }
    };
    if !out.status.success() {
        let _ = std::fs::remove_file(path);
        return Err(Error::Tool {
            tool: "mkfs.ext4",
            detail: format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(())
}

/// Deletes the image (absent is fine).
pub fn delete(path: &Path) -> Result<()> {
    Error::unless_absent(std::fs::remove_file(path), "deleting image file", path)
}

/// Whether the image is still there and is a regular file.
pub fn present(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file())
}

/// Bytes the image really occupies on the backing filesystem.
pub fn allocated_bytes(path: &Path) -> u64 {
    std::fs::metadata(path)
        .map(|m| m.blocks() * 512)
        .unwrap_or(0)
}

/// What a read-only filesystem check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsckOutcome {
    /// e2fsck found nothing wrong.
    Clean,
    /// e2fsck found errors (or could not read the filesystem at all).
    Corrupt {
        /// e2fsck's exit code.
        code: i32,
        /// The first meaningful line of its output.
        summary: String,
    },
    /// The check itself could not run (tool missing, timeout): no verdict.
    NotChecked(String),
}

/// Runs `e2fsck -n -f` (never modifies the image) within `timeout`.
pub async fn fsck(path: &Path, timeout: Duration) -> FsckOutcome {
    let mut cmd = tokio::process::Command::new("e2fsck");
    cmd.args(["-n", "-f"]).arg(path).kill_on_drop(true);
    let out = match tokio::time::timeout(timeout, cmd.output()).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => return FsckOutcome::NotChecked(format!("e2fsck did not run: {e}")),
        Err(_) => return FsckOutcome::NotChecked(format!("e2fsck took longer than {timeout:?}")),
    };
    let code = out.status.code().unwrap_or(-1);
    // 0: clean; 4: errors left uncorrected (-n corrects nothing); 8: the filesystem could not be
    // read as ext4 at all. 1 and 2 cannot happen with -n; 16/32 are usage/cancel: no verdict.
    match code {
        0 => FsckOutcome::Clean,
        4 | 8 | 12 => {
            let text = format!(
                "{}\n{}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            );
            let summary = text
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with("e2fsck ") && !l.starts_with("Warning"))
                .unwrap_or("errors found")
                .chars()
                .take(300)
                .collect();
            FsckOutcome::Corrupt { code, summary }
        }
        other => FsckOutcome::NotChecked(format!("e2fsck exited with {other}")),
    }
}
