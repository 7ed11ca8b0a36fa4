//! The proxy's own HTTP/2 connection to the driver for what it forwards: requests go straight
//! to the connection, without the buffer task a tonic `Channel` puts in front of it (one
//! hand-over less per forwarded call). A connection that closes is replaced on the next call.

use http::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::path::PathBuf;
use tonic::Status;
use tonic::body::Body;
use volhealth_csi::socket_address::SocketAddress;

/// Why a forwarded call did not reach the driver.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ForwardError {
    /// The socket path cannot be used.
    #[error("{0}")]
    Address(#[from] volhealth_csi::socket_address::AddressError),
    /// Connecting to the socket failed.
    #[error("connecting: {0}")]
    Connect(#[from] std::io::Error),
    /// The HTTP/2 connection failed or refused the call.
    #[error("{0}")]
    Http(#[from] hyper::Error),
    /// The request's path makes no URI.
    #[error("the request path makes no URI: {0}")]
    Uri(#[from] http::uri::InvalidUri),
}

/// The driver's socket and the current connection to it.
pub(crate) struct Forwarder {
    socket: PathBuf,
    sender: tokio::sync::Mutex<Option<hyper::client::conn::http2::SendRequest<Body>>>,
}

impl Forwarder {
    /// Forwards to the driver at `csi_address` (`unix:///…` or a path).
    pub(crate) fn new(csi_address: &str) -> Result<Forwarder, volhealth_csi::Error> {
        Ok(Forwarder {
            socket: volhealth_csi::endpoint::parse(csi_address)?,
            sender: tokio::sync::Mutex::new(None),
        })
    }

    async fn connect(&self) -> Result<hyper::client::conn::http2::SendRequest<Body>, ForwardError> {
        let address = SocketAddress::new(&self.socket)?;
        let stream = tokio::net::UnixStream::connect(address.as_path()).await?;
        let (sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                .await?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!("the connection to the driver ended: {e}");
            }
        });
        Ok(sender)
    }

    /// A sender on a live connection, connecting when there is none.
    async fn sender(&self) -> Result<hyper::client::conn::http2::SendRequest<Body>, ForwardError> {
        let mut held = self.sender.lock().await;
        if let Some(s) = held.as_ref().filter(|s| !s.is_closed()) {
            return Ok(s.clone());
        }
        let fresh = self.connect().await?;
        *held = Some(fresh.clone());
        Ok(fresh)
    }

    /// Passes `req` to the driver and its answer back, unchanged (its URI gets the scheme and
    /// authority HTTP/2 needs; the `:authority` the driver sees is `localhost`).
    pub(crate) async fn forward(&self, req: Request<Body>) -> Result<Response<Body>, ForwardError> {
        let (mut parts, body) = req.into_parts();
        let path = parts
            .uri
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        parts.uri = format!("http://localhost{path}").parse()?;
        let mut sender = self.sender().await?;
        sender.ready().await?;
        let resp = sender
            .send_request(Request::from_parts(parts, body))
            .await?;
        Ok(resp.map(Body::new))
    }
}

/// The gRPC answer for a driver that could not be reached.
pub(crate) fn unreachable(csi_address: &str, why: &ForwardError) -> Response<Body> {
    Status::unavailable(format!(
        "the driver at {csi_address} does not answer: {why}"
    ))
    .into_http()
}
