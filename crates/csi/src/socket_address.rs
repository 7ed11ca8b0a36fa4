//! Unix socket addresses for socket paths of any length.
//!
//! A unix socket address holds at most 107 bytes of path (`sun_path` is 108 bytes with its
//! terminator), so a socket under a deep directory (a checkout, `--dir`, a kubelet root of a
//! test) cannot be bound or reached by its path. The kernel resolves the address like any other
//! path, though, so a long one is reached through its directory instead: the directory is
//! opened and the socket is addressed as `/proc/self/fd/<fd>/<file name>`, which is short
//! whatever the depth. Only the file name itself must fit.

use std::fs::File;
use std::os::fd::AsRawFd as _;
use std::path::{Path, PathBuf};

/// Longest path a unix socket address holds (108 bytes of `sun_path` less the terminator).
pub const MAX_ADDRESS_LEN: usize = 107;

/// Why a socket path cannot be addressed.
#[derive(Debug, thiserror::Error)]
pub enum AddressError {
    /// The socket's own file name is too long to fit even through its directory.
    #[error(
        "socket file name {name:?} is {len} bytes; a unix socket address holds at most {MAX_ADDRESS_LEN} bytes, so pick a shorter name"
    )]
    NameTooLong {
        /// The file name.
        name: String,
        /// Its length in bytes.
        len: usize,
    },
    /// The path is long and its directory could not be opened to reach it through.
    #[error(
        "socket path {} is {len} bytes, beyond the {MAX_ADDRESS_LEN}-byte limit of a unix socket address, and its directory could not be opened to reach it another way: {source}",
        path.display()
    )]
    Directory {
        /// The socket path.
        path: PathBuf,
        /// Its length in bytes.
        len: usize,
        /// Why the directory could not be opened.
        #[source]
        source: std::io::Error,
    },
}

/// The address to bind or connect to for one socket path; holds the directory open (when the
/// path is long) for as long as the address is used.
#[derive(Debug)]
pub struct SocketAddress {
    address: PathBuf,
    _dir: Option<File>,
}

impl SocketAddress {
    /// The address of the socket at `path`: the path itself when it fits, else the path
    /// through an open handle of its directory.
    pub fn new(path: &Path) -> Result<SocketAddress, AddressError> {
        let len = path.as_os_str().len();
        if len <= MAX_ADDRESS_LEN {
            return Ok(SocketAddress {
                address: path.to_path_buf(),
                _dir: None,
            });
        }
        let name = path.file_name().unwrap_or_default();
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let handle = File::open(dir).map_err(|source| AddressError::Directory {
            path: path.to_path_buf(),
            len,
            source,
        })?;
        let address = PathBuf::from(format!("/proc/self/fd/{}", handle.as_raw_fd())).join(name);
        if address.as_os_str().len() > MAX_ADDRESS_LEN {
            return Err(AddressError::NameTooLong {
                name: name.to_string_lossy().into_owned(),
                len: name.len(),
            });
        }
        Ok(SocketAddress {
            address,
            _dir: Some(handle),
        })
    }

    /// The path to hand to `bind` or `connect`.
    pub fn as_path(&self) -> &Path {
        &self.address
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_paths_are_used_as_they_are() {
        let a = SocketAddress::new(Path::new("/run/csi/socket")).unwrap();
        assert_eq!(a.as_path(), Path::new("/run/csi/socket"));
    }

    #[test]
    fn a_socket_under_a_200_byte_directory_binds_and_answers() {
        let tmp = tempfile::tempdir().unwrap();
        let deep = tmp.path().join("d".repeat(100)).join("e".repeat(100));
        std::fs::create_dir_all(&deep).unwrap();
        let path = deep.join("plugin-reg.sock");
        assert!(path.as_os_str().len() > 200);
        // What the standard library does with the path itself:
        assert!(std::os::unix::net::UnixListener::bind(&path).is_err());

        let bind = SocketAddress::new(&path).unwrap();
        let listener = std::os::unix::net::UnixListener::bind(bind.as_path()).unwrap();
        assert!(path.exists(), "the socket is made at its real path");
        let connect = SocketAddress::new(&path).unwrap();
        let _client = std::os::unix::net::UnixStream::connect(connect.as_path()).unwrap();
        assert!(listener.accept().is_ok());
    }

    #[test]
    fn a_name_that_cannot_fit_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s".repeat(120));
        let err = SocketAddress::new(&path).unwrap_err().to_string();
        assert!(err.contains("pick a shorter name"), "{err}");
    }

    #[test]
    fn a_missing_directory_is_named() {
        let path = Path::new("/nonexistent")
            .join("d".repeat(120))
            .join("x.sock");
        let err = SocketAddress::new(&path).unwrap_err().to_string();
        assert!(err.contains("107-byte limit"), "{err}");
    }
}
