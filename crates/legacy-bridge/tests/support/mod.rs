//! A legacy CSI driver that volhealth did not write. What it sends beyond CSI v1.13.0 (the legacy
//! `volume_condition`, field 2 of `VolumeStatus` and of `NodeGetVolumeStatsResponse`) is generated
//! from a schema of its own, `tests/proto/legacy_csi.proto`; everything else is the released CSI
//! message, and the capabilities it advertises are the numbers v1.13.0 reserves
//! (controller VOLUME_CONDITION = 11, node = 4). Nothing comes from the bridge's `src/wire.rs`.
//! It serves over a real unix socket; each volume's answer is set by the test.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // test support fails by panicking

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tonic::Status;
use tonic::body::Body;
use tonic::codegen::{BoxFuture, Service, http};
use volhealth_csi::capabilities::{controller_rpc, node_rpc};
use volhealth_csi::v1;

/// The legacy messages, generated from `tests/proto/legacy_csi.proto` by the build script.
#[allow(clippy::all, missing_docs)]
mod legacy {
    include!(concat!(env!("OUT_DIR"), "/legacy/volhealth.legacy.rs"));
}
pub use legacy::list_volumes_response::Entry;
pub use legacy::*;

/// What the fake answers about one volume.
#[derive(Debug, Clone)]
pub enum Answer {
    /// A condition, or none on the wire.
    Condition(Option<(bool, String)>),
    /// An error with this code.
    Error(tonic::Code),
}

/// The fake's settings and what it saw.
#[derive(Debug, Default)]
pub struct State {
    pub name: String,
    pub controller_caps: Vec<i32>,
    pub node_caps: Vec<i32>,
    /// Answers of ControllerGetVolume and NodeGetVolumeStats, by volume id.
    pub answers: BTreeMap<String, Answer>,
    /// ListVolumes entries: (volume id, condition on the wire).
    pub list: Vec<(String, Option<(bool, String)>)>,
    /// ControllerGetVolume answers about this id instead of the one asked about.
    pub answer_as: Option<String>,
    /// Requests seen: (method, volume id, volume_path, staging_target_path).
    pub seen: Vec<(String, String, String, String)>,
}

pub type Shared = Arc<Mutex<State>>;

fn condition(c: &Option<(bool, String)>) -> Option<VolumeCondition> {
    c.as_ref().map(|(abnormal, message)| VolumeCondition {
        abnormal: *abnormal,
        message: message.clone(),
    })
}

/// A volume of one byte, `id`.
fn volume(id: &str) -> v1::Volume {
    v1::Volume {
        capacity_bytes: 1,
        volume_id: id.to_string(),
        ..Default::default()
    }
}

struct Unary<F, Req>(F, PhantomData<fn(Req)>);

impl<F, Req, Resp> tonic::server::UnaryService<Req> for Unary<F, Req>
where
    F: Fn(Req) -> Result<Resp, Status> + Clone + Send + 'static,
    Req: Send + 'static,
    Resp: Send + 'static,
{
    type Response = Resp;
    type Future = BoxFuture<tonic::Response<Resp>, Status>;
    fn call(&mut self, req: tonic::Request<Req>) -> Self::Future {
        let f = self.0.clone();
        Box::pin(async move { f(req.into_inner()).map(tonic::Response::new) })
    }
}

async fn unary<Req, Resp, F>(req: http::Request<Body>, f: F) -> http::Response<Body>
where
    F: Fn(Req) -> Result<Resp, Status> + Clone + Send + 'static,
    Req: prost::Message + Default + Send + 'static,
    Resp: prost::Message + Send + 'static,
{
    let codec = tonic_prost::ProstCodec::<Resp, Req>::default();
    tonic::server::Grpc::new(codec)
        .unary(Unary(f, PhantomData), req)
        .await
}

fn answer_of(state: &Shared, id: &str) -> Answer {
    state
        .lock()
        .unwrap()
        .answers
        .get(id)
        .cloned()
        .unwrap_or(Answer::Error(tonic::Code::NotFound))
}

async fn route(state: Shared, req: http::Request<Body>) -> http::Response<Body> {
    let path = req.uri().path().to_string();
    let s = state.clone();
    match path.as_str() {
        "/csi.v1.Identity/GetPluginInfo" => {
            let name = s.lock().unwrap().name.clone();
            unary(req, move |_: v1::GetPluginInfoRequest| {
                Ok(v1::GetPluginInfoResponse {
                    name: name.clone(),
                    vendor_version: "1.12-legacy".into(),
                    ..Default::default()
                })
            })
            .await
        }
        "/csi.v1.Controller/ControllerGetCapabilities" => {
            let capabilities = s.lock().unwrap().controller_caps.clone();
            let c = v1::ControllerGetCapabilitiesResponse {
                capabilities: capabilities.into_iter().map(controller_rpc).collect(),
            };
            unary(req, move |_: v1::ControllerGetCapabilitiesRequest| {
                Ok(c.clone())
            })
            .await
        }
        "/csi.v1.Node/NodeGetCapabilities" => {
            let capabilities = s.lock().unwrap().node_caps.clone();
            let c = v1::NodeGetCapabilitiesResponse {
                capabilities: capabilities.into_iter().map(node_rpc).collect(),
            };
            unary(req, move |_: v1::NodeGetCapabilitiesRequest| Ok(c.clone())).await
        }
        "/csi.v1.Controller/ListVolumes" => {
            unary(req, move |_: v1::ListVolumesRequest| {
                let st = s.lock().unwrap();
                Ok(ListVolumesResponse {
                    entries: st
                        .list
                        .iter()
                        .map(|(id, c)| Entry {
                            volume: (!id.is_empty()).then(|| volume(id)),
                            status: Some(VolumeStatus {
                                published_node_ids: vec!["node-1".into()],
                                volume_condition: condition(c),
                            }),
                        })
                        .collect(),
                    next_token: String::new(),
                })
            })
            .await
        }
        "/csi.v1.Controller/ControllerGetVolume" => {
            unary(req, move |r: v1::ControllerGetVolumeRequest| {
                let answer = answer_of(&s, &r.volume_id);
                let mut st = s.lock().unwrap();
                st.seen.push((
                    "ControllerGetVolume".into(),
                    r.volume_id.clone(),
                    String::new(),
                    String::new(),
                ));
                let id = st.answer_as.clone().unwrap_or(r.volume_id);
                match answer {
                    Answer::Condition(c) => Ok(ControllerGetVolumeResponse {
                        volume: (!id.is_empty()).then(|| volume(&id)),
                        status: Some(VolumeStatus {
                            published_node_ids: Vec::new(),
                            volume_condition: condition(&c),
                        }),
                    }),
                    Answer::Error(code) => Err(Status::new(code, "the array says so")),
                }
            })
            .await
        }
        "/csi.v1.Node/NodeGetVolumeStats" => {
            unary(req, move |r: v1::NodeGetVolumeStatsRequest| {
                let answer = answer_of(&s, &r.volume_id);
                s.lock().unwrap().seen.push((
                    "NodeGetVolumeStats".into(),
                    r.volume_id.clone(),
                    r.volume_path.clone(),
                    r.staging_target_path.clone(),
                ));
                match answer {
                    Answer::Condition(c) => Ok(NodeGetVolumeStatsResponse {
                        usage: Vec::new(),
                        volume_condition: condition(&c),
                    }),
                    Answer::Error(code) => Err(Status::new(code, "no volume at that path")),
                }
            })
            .await
        }
        _ => Status::unimplemented(path).into_http(),
    }
}

/// One of the three services; all share the state and the router above.
pub struct Svc<N>(Shared, PhantomData<N>);
impl<N> Clone for Svc<N> {
    fn clone(&self) -> Self {
        Svc(self.0.clone(), PhantomData)
    }
}
impl<N> Service<http::Request<Body>> for Svc<N> {
    type Response = http::Response<Body>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let state = self.0.clone();
        Box::pin(async move { Ok(route(state, req).await) })
    }
}
pub struct IdentityName;
pub struct ControllerName;
pub struct NodeName;
impl tonic::server::NamedService for Svc<IdentityName> {
    const NAME: &'static str = "csi.v1.Identity";
}
impl tonic::server::NamedService for Svc<ControllerName> {
    const NAME: &'static str = "csi.v1.Controller";
}
impl tonic::server::NamedService for Svc<NodeName> {
    const NAME: &'static str = "csi.v1.Node";
}

/// The fake, serving on a unix socket in a temporary directory.
pub struct LegacyDriver {
    pub state: Shared,
    pub socket: std::path::PathBuf,
    _dir: tempfile::TempDir,
    _server: tokio::task::JoinHandle<()>,
}

impl LegacyDriver {
    pub async fn start(state: State) -> LegacyDriver {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("legacy.sock");
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let state = Arc::new(Mutex::new(state));
        let router = tonic::transport::Server::builder()
            .add_service(Svc::<IdentityName>(state.clone(), PhantomData))
            .add_service(Svc::<ControllerName>(state.clone(), PhantomData))
            .add_service(Svc::<NodeName>(state.clone(), PhantomData));
        let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
        let server = tokio::spawn(async move {
            let _ = router.serve_with_incoming(incoming).await;
        });
        LegacyDriver {
            state,
            socket,
            _dir: dir,
            _server: server,
        }
    }

    pub async fn channel(&self) -> tonic::transport::Channel {
        volhealth_csi::client::connect(
            &format!("unix://{}", self.socket.display()),
            std::time::Duration::from_secs(5),
        )
        .await
        .unwrap()
    }
}
