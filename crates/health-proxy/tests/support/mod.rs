//! Raw gRPC on both sides of the proxy: a codec that passes message bytes as they are, a backend
//! that records exactly what reached it, and the proxy started in-process.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // test support fails by panicking

use bytes::{Buf as _, BufMut as _, Bytes};
use http_body_util::BodyExt as _;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use volhealth_health_proxy::ProxyConfig;

/// Message bytes in, message bytes out.
#[derive(Debug, Clone, Default)]
pub struct RawCodec;

impl Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }
    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Bytes;
    type Error = Status;
    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Bytes;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// What the backend saw of one request.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub headers: http::HeaderMap,
    /// The whole request body: gRPC frames as they arrived.
    pub body: Bytes,
}

/// A gRPC server that records every request and answers each with `answer` (message bytes),
/// the header `x-answer: yes` and the trailer `x-trailer: kept`; a path ending in `/Fail`
/// is answered with NOT_FOUND and a message.
pub struct RawBackend {
    pub seen: Arc<Mutex<Vec<Seen>>>,
    pub socket: PathBuf,
    _server: tokio::task::JoinHandle<()>,
}

impl RawBackend {
    pub async fn start(dir: &Path, answer: Bytes) -> RawBackend {
        let socket = dir.join("backend.sock");
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let svc = tower::service_fn(move |req: http::Request<axum::body::Body>| {
            let record = record.clone();
            let answer = answer.clone();
            async move {
                let path = req.uri().path().to_string();
                let headers = req.headers().clone();
                let body = req.into_body().collect().await.unwrap().to_bytes();
                record.lock().unwrap().push(Seen {
                    path: path.clone(),
                    headers,
                    body,
                });
                let mut trailers = http::HeaderMap::new();
                if path.ends_with("/Fail") {
                    trailers.insert("grpc-status", "5".parse().unwrap());
                    trailers.insert("grpc-message", "no%20such%20thing".parse().unwrap());
                } else {
                    trailers.insert("grpc-status", "0".parse().unwrap());
                }
                trailers.insert("x-trailer", "kept".parse().unwrap());
                let mut framed = vec![0u8];
                framed.extend((answer.len() as u32).to_be_bytes());
                framed.extend(&answer);
                let frames = vec![
                    Ok::<_, Infallible>(http_body::Frame::data(Bytes::from(framed))),
                    Ok(http_body::Frame::trailers(trailers)),
                ];
                let resp = http::Response::builder()
                    .header("content-type", "application/grpc")
                    .header("x-answer", "yes")
                    .body(tonic::body::Body::new(http_body_util::StreamBody::new(
                        futures::stream::iter(frames),
                    )))
                    .unwrap();
                Ok::<_, Infallible>(resp)
            }
        });
        let routes = tonic::service::Routes::from(axum::Router::new().fallback_service(svc));
        let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
        let server = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_routes(routes)
                .serve_with_incoming(incoming)
                .await;
        });
        RawBackend {
            seen,
            socket,
            _server: server,
        }
    }
}

/// The proxy, serving until dropped.
pub struct RunningProxy {
    pub socket: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl RunningProxy {
    pub async fn start(
        driver_socket: &Path,
        socket: PathBuf,
        state_dir: Option<PathBuf>,
    ) -> RunningProxy {
        RunningProxy::start_with(driver_socket, socket, state_dir, None).await
    }

    /// [`RunningProxy::start`] with the node fault detector.
    pub async fn start_with(
        driver_socket: &Path,
        socket: PathBuf,
        state_dir: Option<PathBuf>,
        node_faults: Option<Arc<volhealth_node_faults::Detector>>,
    ) -> RunningProxy {
        let config = ProxyConfig {
            csi_address: format!("unix://{}", driver_socket.display()),
            listen: format!("unix://{}", socket.display()),
            state_dir,
            timeout: Duration::from_secs(5),
            legacy: true,
            rules: Arc::new(volhealth_legacy_bridge::Rules::shipped().unwrap()),
            debounce: 2,
            node_faults,
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            volhealth_health_proxy::run(config, async {
                let _ = stopped.await;
            })
            .await
            .unwrap();
        });
        for _ in 0..200 {
            if tokio::net::UnixStream::connect(&socket).await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        RunningProxy {
            socket,
            stop: Some(stop),
            task: Some(task),
        }
    }

    pub async fn channel(&self) -> tonic::transport::Channel {
        volhealth_csi::client::connect(
            &format!("unix://{}", self.socket.display()),
            Duration::from_secs(5),
        )
        .await
        .unwrap()
    }

    pub async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            t.await.unwrap();
        }
    }
}

/// One raw unary call.
pub async fn raw_call(
    channel: tonic::transport::Channel,
    path: &'static str,
    message: Bytes,
    metadata: &[(&'static str, &'static str)],
) -> Result<tonic::Response<Bytes>, Status> {
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let mut req = tonic::Request::new(message);
    for (k, v) in metadata {
        req.metadata_mut().insert(*k, v.parse().unwrap());
    }
    grpc.unary(req, http::uri::PathAndQuery::from_static(path), RawCodec)
        .await
}

/// The RPC capability numbers of the Controller's and the Node's capability answers.
pub async fn capability_types(channel: tonic::transport::Channel) -> (Vec<i32>, Vec<i32>) {
    let (ctrl, node) = volhealth_testkit::rpc_capabilities(channel).await;
    (ctrl.unwrap(), node.unwrap())
}
