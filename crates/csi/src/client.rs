//! Connecting to a CSI driver over its unix socket.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tokio::time::Instant;
use tonic::transport::{Channel, Endpoint, Uri};
use volhealth_backoff::Backoff;

use crate::endpoint;
use crate::error::{ConnectFailure, Error, Result};
use crate::socket_address::SocketAddress;

/// First pause between attempts; doubled after each failure, each pause jittered (the shared
/// [`Backoff`]: from half to all of its nominal value).
const FIRST_BACKOFF: Duration = Duration::from_millis(20);
/// Longest pause between attempts, so a driver that comes up is noticed soon.
const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// Connects to the CSI driver at `endpoint` (see [`endpoint::parse`]), retrying
/// with backoff while the socket is missing or refuses connections, for up to
/// `timeout`. The channel reconnects through the same socket path later on.
pub async fn connect(endpoint: &str, timeout: Duration) -> Result<Channel> {
    let path = endpoint::parse(endpoint)?;
    let started = Instant::now();
    let deadline = started + timeout;
    let mut backoff = Backoff::new(FIRST_BACKOFF, MAX_BACKOFF);
    let mut last_failure: Option<ConnectFailure> = None;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if path.exists() {
            match tokio::time::timeout(remaining, attempt(&path)).await {
                Ok(Ok(channel)) => return Ok(channel),
                Ok(Err(reason)) => last_failure = Some(reason),
                Err(_) => last_failure = Some(ConnectFailure::TimedOut),
            }
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            let waited = started.elapsed();
            return Err(match last_failure {
                Some(reason) if path.exists() => Error::Connect {
                    path,
                    waited,
                    reason,
                },
                _ => Error::SocketMissing { path, waited },
            });
        }
        let pause = backoff.next_delay();
        tracing::debug!(path = %path.display(), ?pause, "CSI socket not ready, retrying");
        tokio::time::sleep(pause.min(remaining)).await;
    }
}

/// One connection attempt; the error is the reason the final message gives.
async fn attempt(path: &Path) -> std::result::Result<Channel, ConnectFailure> {
    // The URI is required by tonic but unused: the connector ignores it.
    let endpoint = Endpoint::from_static("http://csi.invalid");
    let socket: PathBuf = path.to_path_buf();
    endpoint
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move {
                let address = SocketAddress::new(&socket).map_err(std::io::Error::other)?;
                UnixStream::connect(address.as_path())
                    .await
                    .map(TokioIo::new)
            }
        }))
        .await
        .map_err(ConnectFailure::Transport)
}
