//! Serving gRPC services on a unix socket.

use std::future::Future;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;

use tokio::net::UnixListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::transport::server::Router;

use crate::endpoint;
use crate::error::{Error, Result};
use crate::socket_address::SocketAddress;

mod authority;
mod unary;

pub use unary::serve_unary;

/// Socket permissions: owner and group (the CO's sidecars) may connect.
const SOCKET_MODE: u32 = 0o660;

/// How [`serve_unix_with`] sets up its socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketOptions {
    /// Permission bits given to the socket file.
    pub mode: u32,
    /// What the socket serves, as the start-up log line names it (`CSI`, `plugin registration`).
    pub service: &'static str,
}

impl Default for SocketOptions {
    fn default() -> Self {
        SocketOptions {
            mode: SOCKET_MODE,
            service: "CSI",
        }
    }
}

/// Serves `router` on the unix socket at `endpoint` until `shutdown` resolves.
///
/// Clients may send any `:authority` (gRPC C-core and grpc-java send the socket path).
///
/// A stale socket left by a previous run is removed first, but only if it is a
/// socket and nothing answers on it; any other file is left alone and is an
/// error. Parent directories are created. The socket is removed on return.
pub async fn serve_unix(
    endpoint: &str,
    router: Router,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    serve_unix_with(endpoint, router, SocketOptions::default(), shutdown).await
}

/// Like [`serve_unix`], with the socket's permissions and log name given by `options`.
pub async fn serve_unix_with(
    endpoint: &str,
    router: Router,
    options: SocketOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<()> {
    let path = endpoint::parse(endpoint)?;
    prepare_path(&path)?;
    let address = SocketAddress::new(&path)?;
    let listener = UnixListener::bind(address.as_path()).map_err(|source| Error::Io {
        action: "binding CSI socket",
        path: path.clone(),
        source,
    })?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(options.mode)).map_err(
        |source| Error::Io {
            action: "setting permissions of",
            path: path.clone(),
            source,
        },
    )?;
    tracing::info!(path = %path.display(), "serving {}", options.service);
    // Every connection gets an `:authority` the HTTP/2 server accepts (see `authority`), so
    // gRPC C-core and grpc-java clients are served like grpc-go ones.
    let incoming =
        UnixListenerStream::new(listener).map(|conn| conn.map(authority::AuthorityFix::new));
    let served = router
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await;
    let removed = remove_socket(&path);
    served.map_err(|source| Error::Serve {
        path: path.clone(),
        source,
    })?;
    removed
}

/// A router served in the background by [`spawn_unix`].
///
/// Dropping it aborts the task: no connection is accepted from then on and the socket file is
/// left behind, as when a plugin dies. [`Serving::stop`] stops gracefully instead.
#[derive(Debug)]
pub struct Serving {
    endpoint: String,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<()>>>,
}

impl Serving {
    /// Asks the server to stop, waits for it and returns what [`serve_unix_with`] returned, or
    /// [`Error::ServerTask`] if its task panicked.
    pub async fn stop(mut self) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let Some(task) = self.task.take() else {
            return Ok(());
        };
        task.await.unwrap_or_else(|e| {
            Err(Error::ServerTask {
                endpoint: self.endpoint.clone(),
                reason: e.to_string(),
            })
        })
    }

    /// Whether serving has ended without being stopped (it failed, or the socket could not be
    /// set up).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(JoinHandle::is_finished)
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Serves `router` on the unix socket at `endpoint` in a tokio task, as [`serve_unix_with`]
/// with `options` does, until the returned [`Serving`] is stopped or dropped. Must be called
/// within a tokio runtime.
pub fn spawn_unix(endpoint: &str, router: Router, options: SocketOptions) -> Serving {
    let (stop, stopped) = oneshot::channel::<()>();
    let served = endpoint.to_string();
    let task = tokio::spawn(async move {
        serve_unix_with(&served, router, options, async {
            let _ = stopped.await;
        })
        .await
    });
    Serving {
        endpoint: endpoint.to_string(),
        stop: Some(stop),
        task: Some(task),
    }
}

/// Creates parent directories and clears a stale socket at `path`.
fn prepare_path(path: &Path) -> Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| Error::Io {
            action: "creating socket directory",
            path: parent.to_path_buf(),
            source,
        })?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            let address = SocketAddress::new(path)?;
            if std::os::unix::net::UnixStream::connect(address.as_path()).is_ok() {
                return Err(Error::SocketInUse {
                    path: path.to_path_buf(),
                });
            }
            remove_socket(path)
        }
        Ok(_) => Err(Error::NotASocket {
            path: path.to_path_buf(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(source) => Err(Error::Io {
            action: "inspecting",
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Removes the socket file at `path` if it is still a socket.
fn remove_socket(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            std::fs::remove_file(path).map_err(|source| Error::Io {
                action: "removing socket",
                path: path.to_path_buf(),
                source,
            })
        }
        _ => Ok(()),
    }
}
