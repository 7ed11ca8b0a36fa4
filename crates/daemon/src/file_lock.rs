//! An exclusive `flock` on a file, held for the life of a value: one writer of a state
//! directory at a time, across processes.

use std::fs::File;
use std::path::Path;

use nix::fcntl::{Flock, FlockArg};

/// An exclusive lock on a file, released when dropped (or when the process ends, however it
/// ends: the kernel drops an `flock` with its last descriptor).
#[derive(Debug)]
pub struct FileLock {
    _lock: Flock<File>,
}

/// Whether taking a held lock waits for its holder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// Wait until the holder lets go.
    Wait,
    /// Fail at once, with [`std::io::ErrorKind::WouldBlock`].
    Fail,
}

/// Takes the exclusive lock on `path`, creating the file when absent (its content is left as it
/// is). A lock another holder has is waited for or refused, as `held` says.
pub fn lock_exclusive(path: &Path, held: Held) -> std::io::Result<FileLock> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    let arg = match held {
        Held::Wait => FlockArg::LockExclusive,
        Held::Fail => FlockArg::LockExclusiveNonblock,
    };
    let lock = Flock::lock(file, arg).map_err(|(_, errno)| std::io::Error::from(errno))?;
    Ok(FileLock { _lock: lock })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lock_is_refused_until_dropped_and_the_file_is_kept() {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "kept").unwrap();
        let first = lock_exclusive(file.path(), Held::Fail).unwrap();
        let second = lock_exclusive(file.path(), Held::Fail).unwrap_err();
        assert_eq!(second.kind(), std::io::ErrorKind::WouldBlock);
        drop(first);
        let _again = lock_exclusive(file.path(), Held::Wait).unwrap();
        assert_eq!(std::fs::read_to_string(file.path()).unwrap(), "kept");
    }

    #[test]
    fn a_lock_in_a_missing_directory_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let err = lock_exclusive(&dir.path().join("gone/x.lock"), Held::Wait).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }
}
