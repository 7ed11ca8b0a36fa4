//! The accept loop: at most `max_connections` connections at a time, HTTP/1 request heads read
//! within `header_read_timeout` (which also closes idle keep-alive connections), half-closed
//! clients still answered, and a graceful stop that waits for open connections.

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

/// Largest request head hyper buffers; heads above the server's own limits but below this are
/// answered with a Status body by the handler, larger ones with hyper's bare 431.
const MAX_HEAD_BUFFER: usize = 512 * 1024;

/// The highest `max_connections` honoured.
const MAX_CONNECTIONS_CAP: usize = 1 << 20;

/// How connections are bounded.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Most connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Time a client has to send a request head, and the longest a kept-alive connection idles.
    pub header_read_timeout: Duration,
}

/// Serves `app` on `listener` within `limits` until `shutdown` completes, then waits for the
/// open connections to finish.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) {
    let max = limits.max_connections.clamp(1, MAX_CONNECTIONS_CAP);
    let permits = Arc::new(Semaphore::new(max));
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = &mut shutdown => break,
        };
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
        let app = app.clone();
        let mut stop = stop_rx.clone();
        tokio::spawn(async move {
            let _permit = permit;
            // The protocol is detected from the first bytes, which nothing else times out.
            let mut first = [0u8; 1];
            match tokio::time::timeout(limits.header_read_timeout, stream.peek(&mut first)).await {
                Ok(Ok(n)) if n > 0 => {}
                _ => return,
            }
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout)
                .half_close(true)
                .max_buf_size(MAX_HEAD_BUFFER);
            let conn = builder.serve_connection_with_upgrades(
                TokioIo::new(stream),
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
        });
    }
    let _ = stop_tx.send(true);
    drop(listener);
    let _ = permits.acquire_many(max as u32).await;
}
