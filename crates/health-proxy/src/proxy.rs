//! The proxy's one service: every request on the listening socket arrives here and is answered,
//! learned from, or passed on.

use crate::ProxyConfig;
use crate::answer;
use crate::inner::Inner;
use crate::paths::{Change, Paths};
use axum::body::Body as AxumBody;
use http::{Request, Response};
use http_body_util::BodyExt as _;
use prost::Message as _;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::sync::Mutex as AsyncMutex;
use tonic::Status;
use tonic::body::Body;
use volhealth_csi::v1;

/// Largest request body read to learn a volume's paths (tonic's default message limit).
const MAX_LEARNED_BODY: usize = 4 << 20;

const STAGE: &str = "/csi.v1.Node/NodeStageVolume";
const UNSTAGE: &str = "/csi.v1.Node/NodeUnstageVolume";
const PUBLISH: &str = "/csi.v1.Node/NodePublishVolume";
const UNPUBLISH: &str = "/csi.v1.Node/NodeUnpublishVolume";

/// The proxy (cheap to clone: one shared state).
#[derive(Clone)]
pub struct Proxy {
    inner: Arc<Inner>,
}

impl Proxy {
    /// A proxy in front of the driver on `channel`, knowing `paths` already.
    pub fn new(
        channel: tonic::transport::Channel,
        config: ProxyConfig,
        paths: Paths,
    ) -> Result<Proxy, volhealth_csi::Error> {
        Ok(Proxy {
            inner: Arc::new(Inner {
                forwarder: crate::forward::Forwarder::new(&config.csi_address)?,
                channel,
                config,
                known: AsyncMutex::new(None),
                paths: Mutex::new(paths),
            }),
        })
    }

    async fn handle(self, req: Request<Body>) -> Response<Body> {
        let path = req.uri().path().to_string();
        match path.as_str() {
            answer::CONTROLLER_CAPS | answer::NODE_CAPS => {
                answer::capabilities(&self.inner, &path, req).await
            }
            answer::CONTROLLER_GET_HEALTH
            | answer::CONTROLLER_LIST_HEALTH
            | answer::NODE_GET_HEALTH
            | answer::NODE_STORAGE_HEALTH => match answer::health(&self.inner, &path, req).await {
                Ok(resp) => resp,
                Err(req) => self.inner.forward(req).await,
            },
            STAGE | UNSTAGE | PUBLISH | UNPUBLISH => self.learn(&path, req).await,
            _ => self.inner.forward(req).await,
        }
    }

    /// Forwards a stage or publish call unchanged and, when the driver accepts it, remembers
    /// the paths it names.
    async fn learn(&self, path: &str, req: Request<Body>) -> Response<Body> {
        let (parts, body) = req.into_parts();
        let bytes = match http_body_util::Limited::new(body, MAX_LEARNED_BODY)
            .collect()
            .await
        {
            Ok(c) => c.to_bytes(),
            Err(e) => {
                return Status::resource_exhausted(format!("reading the request: {e}")).into_http();
            }
        };
        let change = change_of(path, &bytes);
        let resp = self
            .inner
            .forward(Request::from_parts(
                parts,
                Body::new(http_body_util::Full::new(bytes)),
            ))
            .await;
        let Some(change) = change else {
            return resp;
        };
        let (parts, body) = resp.into_parts();
        let collected = match body.collect().await {
            Ok(c) => c,
            Err(e) => {
                return Status::unavailable(format!("reading the driver's answer: {e}"))
                    .into_http();
            }
        };
        let trailers = collected.trailers().cloned();
        if grpc_ok(&parts.headers, trailers.as_ref()) {
            self.inner.remember(change);
        }
        let mut frames = vec![Ok::<_, Infallible>(http_body::Frame::data(
            collected.to_bytes(),
        ))];
        if let Some(t) = trailers {
            frames.push(Ok(http_body::Frame::trailers(t)));
        }
        Response::from_parts(
            parts,
            Body::new(http_body_util::StreamBody::new(futures::stream::iter(
                frames,
            ))),
        )
    }
}

/// The message of a unary gRPC request body: one uncompressed frame.
pub(crate) fn message(bytes: &[u8]) -> Option<&[u8]> {
    let (&flag, rest) = bytes.split_first()?;
    if flag != 0 || rest.len() < 4 {
        return None;
    }
    let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
    rest.get(4..4 + len)
}

/// What a stage or publish request would change, read without its secrets ever being kept.
fn change_of(path: &str, bytes: &[u8]) -> Option<Change> {
    let msg = message(bytes)?;
    let nonempty = |s: &str| !s.is_empty();
    match path {
        STAGE => {
            let r = v1::NodeStageVolumeRequest::decode(msg).ok()?;
            (nonempty(&r.volume_id) && nonempty(&r.staging_target_path))
                .then_some(Change::Stage(r.volume_id, r.staging_target_path))
        }
        UNSTAGE => {
            let r = v1::NodeUnstageVolumeRequest::decode(msg).ok()?;
            nonempty(&r.volume_id).then_some(Change::Unstage(r.volume_id))
        }
        PUBLISH => {
            let r = v1::NodePublishVolumeRequest::decode(msg).ok()?;
            (nonempty(&r.volume_id) && nonempty(&r.target_path))
                .then_some(Change::Publish(r.volume_id, r.target_path))
        }
        UNPUBLISH => {
            let r = v1::NodeUnpublishVolumeRequest::decode(msg).ok()?;
            (nonempty(&r.volume_id) && nonempty(&r.target_path))
                .then_some(Change::Unpublish(r.volume_id, r.target_path))
        }
        _ => None,
    }
}

/// Whether the answer's `grpc-status` (in the trailers, or the headers of a trailers-only
/// answer) is OK.
fn grpc_ok(headers: &http::HeaderMap, trailers: Option<&http::HeaderMap>) -> bool {
    trailers
        .and_then(|t| t.get("grpc-status"))
        .or_else(|| headers.get("grpc-status"))
        .is_some_and(|v| v.as_bytes() == b"0")
}

impl tower::Service<Request<AxumBody>> for Proxy {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<AxumBody>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { Ok(this.handle(req.map(Body::new)).await) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(msg: &[u8]) -> Vec<u8> {
        let mut out = vec![0];
        out.extend((msg.len() as u32).to_be_bytes());
        out.extend(msg);
        out
    }

    #[test]
    fn stage_and_publish_requests_are_read_without_keeping_secrets() {
        let stage = v1::NodeStageVolumeRequest {
            volume_id: "v".into(),
            staging_target_path: "/s".into(),
            secrets: [("password".to_string(), "hunter2".to_string())].into(),
            ..Default::default()
        };
        let change = change_of(STAGE, &frame(&stage.encode_to_vec())).unwrap();
        assert_eq!(change, Change::Stage("v".into(), "/s".into()));
        assert!(!format!("{change:?}").contains("hunter2"));
        let publish = v1::NodePublishVolumeRequest {
            volume_id: "v".into(),
            target_path: "/t".into(),
            ..Default::default()
        };
        assert_eq!(
            change_of(PUBLISH, &frame(&publish.encode_to_vec())),
            Some(Change::Publish("v".into(), "/t".into()))
        );
        assert_eq!(
            change_of(PUBLISH, b"\x01\x00\x00\x00\x00"),
            None,
            "compressed"
        );
        assert_eq!(change_of(PUBLISH, b"\x00\x00\x00\x00\x09ab"), None, "short");
        assert_eq!(change_of(STAGE, &frame(b"\xff\xff")), None, "garbage");
        let empty = v1::NodeStageVolumeRequest::default().encode_to_vec();
        assert_eq!(
            change_of(STAGE, &frame(&empty)),
            None,
            "no id, nothing learned"
        );
    }

    #[test]
    fn grpc_status_is_read_from_trailers_or_a_trailers_only_answer() {
        let mut ok = http::HeaderMap::new();
        ok.insert("grpc-status", http::HeaderValue::from_static("0"));
        let mut failed = http::HeaderMap::new();
        failed.insert("grpc-status", http::HeaderValue::from_static("5"));
        let none = http::HeaderMap::new();
        assert!(grpc_ok(&none, Some(&ok)));
        assert!(grpc_ok(&ok, None));
        assert!(!grpc_ok(&none, Some(&failed)));
        assert!(!grpc_ok(&failed, None));
        assert!(!grpc_ok(&none, None));
    }
}
