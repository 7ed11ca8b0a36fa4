//! The reasons the detector reports, each with its CSI status (documented in
//! `docs/node-faults.md`).

use nix::errno::Errno;

/// Inaccessible: the staging or publish path is not a mount point.
pub const NOT_MOUNTED: &str = "NotMounted";
/// Inaccessible: the filesystem is read-only though the volume was mounted read-write.
pub const FILESYSTEM_READ_ONLY: &str = "FilesystemReadOnly";
/// Inaccessible: `statfs` gave no answer within the probe timeout.
pub const MOUNT_UNRESPONSIVE: &str = "MountUnresponsive";
/// Inaccessible: `statfs` failed with ENOTCONN.
pub const TRANSPORT_NOT_CONNECTED: &str = "TransportNotConnected";
/// Inaccessible: `statfs` failed with ESTALE.
pub const STALE_FILE_HANDLE: &str = "StaleFileHandle";
/// Inaccessible: `statfs` failed with EIO.
pub const IO_ERROR: &str = "IoError";
/// Inaccessible: `statfs` failed with EHOSTDOWN.
pub const HOST_DOWN: &str = "HostDown";
/// Inaccessible: `statfs` failed with EACCES.
pub const PERMISSION_DENIED: &str = "PermissionDenied";
/// Degraded (Inaccessible after a shutdown or read-only remount): the kernel logged I/O errors
/// for a device under the volume within the I/O error window.
pub const IO_ERRORS: &str = "IoErrors";
/// StorageUnreachable: the kernel says an NFS server of the driver's mounts is not responding.
pub const NFS_SERVER_NOT_RESPONDING: &str = "NfsServerNotResponding";
/// StorageDegraded (StorageUnreachable when no path is left): iSCSI sessions failed or
/// multipath paths down under the driver's volumes.
pub const PATH_DOWN: &str = "PathDown";

/// The reason for an errno of `statfs` that means the mount is broken (as the kubelet's
/// mount-utils reads a corrupted mount); `None` for the others.
pub fn of_errno(errno: Errno) -> Option<&'static str> {
    Some(match errno {
        Errno::ENOTCONN => TRANSPORT_NOT_CONNECTED,
        Errno::ESTALE => STALE_FILE_HANDLE,
        Errno::EIO => IO_ERROR,
        Errno::EHOSTDOWN => HOST_DOWN,
        Errno::EACCES => PERMISSION_DENIED,
        _ => return None,
    })
}

/// The longest message sent: the API allows 1024 bytes.
pub const MAX_MESSAGE: usize = 1000;

/// `message` cut to [`MAX_MESSAGE`] bytes at a character boundary.
pub fn bounded(mut message: String) -> String {
    if message.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos() {
        assert_eq!(of_errno(Errno::ENOTCONN), Some("TransportNotConnected"));
        assert_eq!(of_errno(Errno::ESTALE), Some("StaleFileHandle"));
        assert_eq!(of_errno(Errno::EIO), Some("IoError"));
        assert_eq!(of_errno(Errno::EHOSTDOWN), Some("HostDown"));
        assert_eq!(of_errno(Errno::ENOENT), None);
    }

    #[test]
    fn messages_are_bounded() {
        let long = "é".repeat(800);
        let cut = bounded(long);
        assert!(cut.len() <= MAX_MESSAGE);
        assert!(cut.chars().all(|c| c == 'é'));
    }
}
