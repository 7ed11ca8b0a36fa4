//! The accept loop: at most `max_connections` connections at a time (when all are taken, the
//! oldest one that has not sent a complete first request is shed for a new one, see
//! [`crate::http::slots`]), a new connection's TLS handshake and first request head done within
//! [`FIRST_REQUEST_TIMEOUT`], later request heads within `header_read_timeout` (which also closes
//! idle keep-alive connections), half-closed clients still answered, and a graceful stop that
//! waits for open connections. A verified client certificate's user goes into every request of
//! its connection as an [`crate::security::authz::User`] extension.

use crate::http::slots::{Slot, Slots};
use crate::security::authz::User;
use crate::security::tls;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};

/// Largest request head hyper buffers; heads above the server's own limits but below this are
/// answered with a Status body by the handler, larger ones by hyper, whose bodyless 431 gets
/// its Status body from `bare_refusal`.
const MAX_HEAD_BUFFER: usize = 512 * 1024;

/// How long a new connection has to finish its TLS handshake (when serving TLS) and send its
/// first complete request head. Shorter than `header_read_timeout` (32 s, as kube-apiserver's
/// for every request), because a connection that has sent nothing yet costs a slot and a
/// descriptor and gives nothing back; a real client sends its request at once. A shorter
/// `header_read_timeout` wins.
pub const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The highest `max_connections` honoured.
const MAX_CONNECTIONS_CAP: usize = 1 << 20;

/// Descriptors of the open-files limit kept back from connections: the store's database, its
/// WAL and shared-memory files, the listener, logs, and what blocking tasks open.
const FD_RESERVE: u64 = 256;

/// The fewest connections the default allows, whatever the open-files limit.
const MIN_DEFAULT_CONNECTIONS: u64 = 64;

/// The default when open files are unlimited.
const UNLIMITED_DEFAULT_CONNECTIONS: usize = 65_536;

/// The default `max_connections`: the soft open-files limit less [`FD_RESERVE`]. kube-apiserver
/// has no connection cap; this one only keeps a flood of idle connections from taking the
/// descriptors the store needs. Clients that speak only HTTP/1.1, as kube-rs does, hold a
/// connection per request in flight and keep them open idle, so a fixed small cap lets a
/// hundred node agents fill it and everyone else wait in the listen backlog until an idle one
/// times out.
pub fn default_max_connections() -> usize {
    connections_for(volhealth_daemon::fd_limit::soft())
}

fn connections_for(soft_limit: Option<u64>) -> usize {
    match soft_limit {
        None => UNLIMITED_DEFAULT_CONNECTIONS,
        Some(n) => {
            let n = n.saturating_sub(FD_RESERVE).max(MIN_DEFAULT_CONNECTIONS);
            usize::try_from(n)
                .unwrap_or(MAX_CONNECTIONS_CAP)
                .min(MAX_CONNECTIONS_CAP)
        }
    }
}

/// How connections are bounded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Most connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Time a client has to send a request head, and the longest a kept-alive connection idles.
    pub header_read_timeout: Duration,
}

/// The first byte of a TLS handshake record.
const TLS_HANDSHAKE: u8 = 0x16;

/// What a TLS port answers a plain HTTP request with, as Go's servers (kube-apiserver) do.
const PLAIN_HTTP_ANSWER: &[u8] =
    b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";

/// Serves `app` on `listener` within `limits`, over TLS when `tls` is given, until `shutdown`
/// completes, then waits for the open connections to finish.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    tls: Option<tls::Serving>,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Slots::new(limits.max_connections.clamp(1, MAX_CONNECTIONS_CAP));
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::pin!(shutdown);
    'accepting: loop {
        tokio::select! {
            _ = slots.room() => {}
            _ = &mut shutdown => break,
        }
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, say: wait a little rather than spin.
                    tracing::warn!("accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        // The room seen before accepting may be gone (the connection that could have been shed
        // sent its request meanwhile): then this one waits for a slot, unserved.
        let (slot, shed) = loop {
            if let Some(taken) = slots.try_take() {
                break taken;
            }
            tokio::select! {
                _ = slots.room() => {}
                _ = &mut shutdown => break 'accepting,
            }
        };
        let slot = Arc::new(slot);
        let conn = connection(
            stream,
            app.clone(),
            limits,
            tls.clone(),
            stop_rx.clone(),
            slot.clone(),
        );
        tokio::spawn(async move {
            tokio::select! {
                () = conn => {}
                () = shed_signal(shed) => tracing::debug!("shed a connection that sent no request, for a new one"),
                () = first_request_deadline(&slot, limits) => {
                    tracing::debug!("no request within {:?}", first_request_timeout(limits));
                }
            }
            drop(slot);
        });
    }
    let _ = stop_tx.send(true);
    drop(listener);
    slots.all_free().await;
}

/// How long a new connection has for its handshake and first request head.
fn first_request_timeout(limits: Limits) -> Duration {
    FIRST_REQUEST_TIMEOUT.min(limits.header_read_timeout)
}

/// Completes when the connection is shed; never when its slot stopped listening for that.
async fn shed_signal(shed: oneshot::Receiver<()>) {
    if shed.await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Completes when the first request has not arrived within its deadline.
async fn first_request_deadline(slot: &Slot, limits: Limits) {
    tokio::time::sleep(first_request_timeout(limits)).await;
    if slot.has_started() {
        std::future::pending::<()>().await;
    }
}

/// Serves one accepted connection: detects TLS, shakes hands, then serves HTTP; every request
/// marks the slot as started (no longer to be shed).
async fn connection(
    stream: TcpStream,
    app: Router,
    limits: Limits,
    tls: Option<tls::Serving>,
    stop: watch::Receiver<bool>,
    slot: Arc<Slot>,
) {
    // The protocol is detected from the first bytes; the first-request deadline bounds the wait.
    let mut first = [0u8; 1];
    match stream.peek(&mut first).await {
        Ok(n) if n > 0 => {}
        _ => return,
    }
    let mark = slot.clone();
    let app = tower::ServiceExt::map_request(app, move |req: http::Request<Incoming>| {
        mark.started();
        req
    });
    let Some(tls) = tls else {
        return serve_connection(stream, app, limits, stop).await;
    };
    if first[0] != TLS_HANDSHAKE {
        return refuse_plain(stream, limits).await;
    }
    let stream = match tls.acceptor.accept(stream).await {
        Ok(s) => s,
        Err(e) => {
            tracing::debug!("TLS handshake failed: {e}");
            return;
        }
    };
    let user = tls::client_user(stream.get_ref().1.peer_certificates());
    let app = tower::ServiceExt::map_request(app, move |mut req: http::Request<Incoming>| {
        if let Some(user) = &user {
            req.extensions_mut().insert::<User>(user.clone());
        }
        req
    });
    serve_connection(stream, app, limits, stop).await;
}

/// Answers a plain HTTP client on a TLS port with a 400 that says so, then closes.
async fn refuse_plain(mut stream: TcpStream, limits: Limits) {
    let answer = async {
        stream.write_all(PLAIN_HTTP_ANSWER).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(limits.header_read_timeout, answer).await;
}

/// Serves HTTP/1 or HTTP/2 (detected from the first bytes) on one connection until it ends, or
/// stops it gracefully when `stop` changes.
async fn serve_connection<I, S>(io: I, app: S, limits: Limits, mut stop: watch::Receiver<bool>)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: tower::Service<http::Request<Incoming>, Response = axum::response::Response>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .half_close(true)
        .max_buf_size(MAX_HEAD_BUFFER);
    let conn = builder.serve_connection_with_upgrades(
        TokioIo::new(crate::http::bare_refusal::StatusRefusals::new(io)),
        TowerToHyperService::new(app),
    );
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!("connection ended: {e}");
            }
        }
        _ = stop.changed() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_cap_follows_the_open_files_limit() {
        assert_eq!(connections_for(Some(20_000)), 19_744);
        assert_eq!(connections_for(Some(1_024)), 768);
        assert_eq!(connections_for(Some(100)), 64, "never below the floor");
        assert_eq!(connections_for(None), 65_536, "unlimited");
        assert_eq!(connections_for(Some(u64::MAX - 1)), MAX_CONNECTIONS_CAP);
    }
}
