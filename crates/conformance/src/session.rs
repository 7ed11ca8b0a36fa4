//! The connection to the driver under test: clients, timed calls, what was observed, and the
//! capabilities found at the start.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tonic::transport::Channel;
use tonic::{Response, Status};
use volhealth_csi::capabilities::{controller_offers, node_offers};
use volhealth_csi::v1;
use volhealth_csi::v1::controller_client::ControllerClient;
use volhealth_csi::v1::controller_service_capability::rpc::Type as CtrlRpc;
use volhealth_csi::v1::identity_client::IdentityClient;
use volhealth_csi::v1::node_client::NodeClient;
use volhealth_csi::v1::node_service_capability::rpc::Type as NodeRpc;

use crate::fixture::Fixture;

/// What the driver advertises, from ControllerGetCapabilities and NodeGetCapabilities.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caps {
    /// Whether the Controller service answers at all.
    pub controller_service: bool,
    /// LIST_VOLUME_HEALTH.
    pub list: bool,
    /// Controller GET_VOLUME_HEALTH.
    pub get: bool,
    /// CREATE_DELETE_VOLUME.
    pub create_delete: bool,
    /// PUBLISH_UNPUBLISH_VOLUME.
    pub controller_publish: bool,
    /// Whether a Node service answers.
    pub node_service: bool,
    /// Node STAGE_UNSTAGE_VOLUME.
    pub stage_unstage: bool,
    /// Node GET_VOLUME_HEALTH.
    pub node_volume: bool,
    /// Node GET_STORAGE_HEALTH.
    pub node_storage: bool,
}

/// Everything the checks share.
pub struct Session {
    controller: ControllerClient<Channel>,
    node: NodeClient<Channel>,
    identity: IdentityClient<Channel>,
    timeout: Duration,
    samples: Mutex<BTreeMap<String, Vec<Duration>>>,
    observed_volumes: Mutex<Vec<(&'static str, v1::VolumeHealth)>>,
    observed_storage: Mutex<Vec<Vec<v1::node_get_storage_health_response::StorageBackendHealth>>>,
    /// The driver's capabilities.
    pub caps: Caps,
    /// `NodeGetInfo.node_id`, when the node service answered.
    pub node_id: Option<String>,
    /// Secrets from `--secrets-file`, sent where the spec carries secrets.
    pub secrets: HashMap<String, String>,
    /// Volumes, paths and injections this run created, for cleanup.
    pub fixture: Fixture,
    /// How long an injected condition may take to appear or clear.
    pub inject_timeout: Duration,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("caps", &self.caps)
            .field("node_id", &self.node_id)
            .field(
                "secrets",
                &format_args!("{} key(s), values hidden", self.secrets.len()),
            )
            .finish_non_exhaustive()
    }
}

/// Builds a session on channels already connected.
pub struct SessionParts {
    /// Channel for Identity and Controller.
    pub controller: Channel,
    /// Channel for Node (may be the same socket).
    pub node: Channel,
    /// Per-RPC deadline.
    pub timeout: Duration,
    /// See [`Session::secrets`].
    pub secrets: HashMap<String, String>,
    /// See [`Session::fixture`].
    pub fixture: Fixture,
    /// See [`Session::inject_timeout`].
    pub inject_timeout: Duration,
}

impl Session {
    /// A session whose capabilities are still unknown (see [`Session::discover`]).
    pub fn new(p: SessionParts) -> Session {
        Session {
            controller: ControllerClient::new(p.controller.clone()),
            identity: IdentityClient::new(p.controller),
            node: NodeClient::new(p.node),
            timeout: p.timeout,
            samples: Mutex::default(),
            observed_volumes: Mutex::default(),
            observed_storage: Mutex::default(),
            caps: Caps::default(),
            node_id: None,
            secrets: p.secrets,
            fixture: p.fixture,
            inject_timeout: p.inject_timeout,
        }
    }

    /// Runs one call under the deadline and records its duration under `rpc`.
    async fn timed<T, F>(&self, rpc: &str, call: F) -> Result<T, Status>
    where
        F: Future<Output = Result<Response<T>, Status>>,
    {
        let started = Instant::now();
        let result = tokio::time::timeout(self.timeout, call).await;
        let took = started.elapsed();
        if let Ok(mut s) = self.samples.lock() {
            s.entry(rpc.to_string()).or_default().push(took);
        }
        match result {
            Ok(r) => r.map(Response::into_inner),
            Err(_) => Err(Status::deadline_exceeded(format!(
                "{rpc}: no answer within {} ms",
                self.timeout.as_millis()
            ))),
        }
    }

    /// Every call's duration so far, by RPC.
    pub fn samples(&self) -> BTreeMap<String, Vec<Duration>> {
        self.samples.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Every VolumeHealth seen, with the RPC that returned it.
    pub fn observed_volumes(&self) -> Vec<(&'static str, v1::VolumeHealth)> {
        self.observed_volumes
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    /// Every NodeGetStorageHealth answer seen.
    pub fn observed_storage(
        &self,
    ) -> Vec<Vec<v1::node_get_storage_health_response::StorageBackendHealth>> {
        self.observed_storage
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default()
    }

    fn observe(&self, rpc: &'static str, vh: &v1::VolumeHealth) {
        if let Ok(mut v) = self.observed_volumes.lock() {
            v.push((rpc, vh.clone()));
        }
    }

    /// Finds the capabilities and the node id; an RPC that is UNIMPLEMENTED means "not there".
    pub async fn discover(&mut self) -> Result<v1::GetPluginInfoResponse, Status> {
        let info = self.plugin_info().await?;
        let mut c = self.controller.clone();
        match self
            .timed(
                "ControllerGetCapabilities",
                c.controller_get_capabilities(v1::ControllerGetCapabilitiesRequest {}),
            )
            .await
        {
            Ok(resp) => {
                let has = |want: CtrlRpc| controller_offers(&resp.capabilities, want);
                self.caps.controller_service = true;
                self.caps.list = has(CtrlRpc::ListVolumeHealth);
                self.caps.get = has(CtrlRpc::GetVolumeHealth);
                self.caps.create_delete = has(CtrlRpc::CreateDeleteVolume);
                self.caps.controller_publish = has(CtrlRpc::PublishUnpublishVolume);
            }
            Err(s) if s.code() == tonic::Code::Unimplemented => {}
            Err(s) => return Err(s),
        }
        let mut n = self.node.clone();
        match self
            .timed(
                "NodeGetCapabilities",
                n.node_get_capabilities(v1::NodeGetCapabilitiesRequest {}),
            )
            .await
        {
            Ok(resp) => {
                let has = |want: NodeRpc| node_offers(&resp.capabilities, want);
                self.caps.node_service = true;
                self.caps.stage_unstage = has(NodeRpc::StageUnstageVolume);
                self.caps.node_volume = has(NodeRpc::GetVolumeHealth);
                self.caps.node_storage = has(NodeRpc::GetStorageHealth);
                let mut n = self.node.clone();
                let info = self
                    .timed("NodeGetInfo", n.node_get_info(v1::NodeGetInfoRequest {}))
                    .await?;
                self.node_id = Some(info.node_id);
            }
            Err(s) if s.code() == tonic::Code::Unimplemented => {}
            Err(s) => return Err(s),
        }
        Ok(info)
    }

    /// GetPluginInfo.
    pub async fn plugin_info(&self) -> Result<v1::GetPluginInfoResponse, Status> {
        let mut c = self.identity.clone();
        self.timed(
            "GetPluginInfo",
            c.get_plugin_info(v1::GetPluginInfoRequest {}),
        )
        .await
    }

    /// ControllerGetVolumeHealth with the given secrets.
    pub async fn get_with(
        &self,
        volume_id: &str,
        secrets: HashMap<String, String>,
    ) -> Result<v1::VolumeHealth, Status> {
        let mut c = self.controller.clone();
        let req = v1::ControllerGetVolumeHealthRequest {
            volume_id: volume_id.to_string(),
            secrets,
        };
        let resp = self
            .timed(
                "ControllerGetVolumeHealth",
                c.controller_get_volume_health(req),
            )
            .await?;
        let vh = resp.volume_health.unwrap_or_default();
        self.observe("ControllerGetVolumeHealth", &vh);
        Ok(vh)
    }

    /// ControllerGetVolumeHealth with the session's secrets.
    pub async fn get(&self, volume_id: &str) -> Result<v1::VolumeHealth, Status> {
        self.get_with(volume_id, self.secrets.clone()).await
    }

    /// One ControllerListVolumeHealth page with the given secrets.
    pub async fn list_page_with(
        &self,
        max_entries: i32,
        token: &str,
        secrets: HashMap<String, String>,
    ) -> Result<v1::ControllerListVolumeHealthResponse, Status> {
        let mut c = self.controller.clone();
        let req = v1::ControllerListVolumeHealthRequest {
            max_entries,
            starting_token: token.to_string(),
            secrets,
        };
        let resp = self
            .timed(
                "ControllerListVolumeHealth",
                c.controller_list_volume_health(req),
            )
            .await?;
        for vh in &resp.entries {
            self.observe("ControllerListVolumeHealth", vh);
        }
        Ok(resp)
    }

    /// One ControllerListVolumeHealth page with the session's secrets.
    pub async fn list_page(
        &self,
        max_entries: i32,
        token: &str,
    ) -> Result<v1::ControllerListVolumeHealthResponse, Status> {
        self.list_page_with(max_entries, token, self.secrets.clone())
            .await
    }

    /// NodeGetVolumeHealth.
    pub async fn node_get(
        &self,
        volume_id: &str,
        publish_path: &str,
        staging_path: &str,
    ) -> Result<v1::VolumeHealth, Status> {
        let mut n = self.node.clone();
        let req = v1::NodeGetVolumeHealthRequest {
            volume_id: volume_id.to_string(),
            volume_publish_path: publish_path.to_string(),
            staging_target_path: staging_path.to_string(),
        };
        let resp = self
            .timed("NodeGetVolumeHealth", n.node_get_volume_health(req))
            .await?;
        let vh = resp.volume_health.unwrap_or_default();
        self.observe("NodeGetVolumeHealth", &vh);
        Ok(vh)
    }

    /// NodeGetStorageHealth with the given secrets.
    pub async fn storage_with(
        &self,
        secrets: HashMap<String, String>,
    ) -> Result<Vec<v1::node_get_storage_health_response::StorageBackendHealth>, Status> {
        let mut n = self.node.clone();
        let req = v1::NodeGetStorageHealthRequest { secrets };
        let resp = self
            .timed("NodeGetStorageHealth", n.node_get_storage_health(req))
            .await?;
        if let Ok(mut v) = self.observed_storage.lock() {
            v.push(resp.backend_health.clone());
        }
        Ok(resp.backend_health)
    }

    /// NodeGetStorageHealth with the session's secrets.
    pub async fn storage(
        &self,
    ) -> Result<Vec<v1::node_get_storage_health_response::StorageBackendHealth>, Status> {
        self.storage_with(self.secrets.clone()).await
    }

    /// The Controller client, for the fixture's volume life cycle.
    pub fn controller_client(&self) -> ControllerClient<Channel> {
        self.controller.clone()
    }

    /// The Node client, for the fixture's stage and publish calls.
    pub fn node_client(&self) -> NodeClient<Channel> {
        self.node.clone()
    }

    /// Runs a life-cycle call (CreateVolume, NodeStageVolume...) timed like the health calls.
    pub async fn call<T, F>(&self, rpc: &str, call: F) -> Result<T, Status>
    where
        F: Future<Output = Result<Response<T>, Status>>,
    {
        self.timed(rpc, call).await
    }
}
