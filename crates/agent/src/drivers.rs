//! The CSI drivers known on this node and the boundary to their node plugins' health RPCs.

use async_trait::async_trait;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use volhealth_csi::v1;
use volhealth_csi::v1::node_get_storage_health_response::StorageBackendHealth;
use volhealth_csi::v1::volume_health::VolumeHealthEntry;
use volhealth_writer::coverage::{NodeSources, Source};

/// Boundary to one driver's node-plugin health RPCs.
#[async_trait]
pub trait NodeHealthClient: Send + Sync {
    /// NodeGetVolumeHealth; the entries of the answer (empty = healthy).
    async fn volume_health(
        &self,
        request: v1::NodeGetVolumeHealthRequest,
    ) -> Result<Vec<VolumeHealthEntry>, tonic::Status>;
    /// NodeGetStorageHealth; the backend entries of the answer (empty = healthy).
    async fn storage_health(&self) -> Result<Vec<StorageBackendHealth>, tonic::Status>;
}

/// A driver registered on this node, with what it can answer.
pub struct Driver {
    /// CSI driver name.
    pub name: String,
    /// Its node-plugin endpoint.
    pub endpoint: String,
    /// NodeGetInfo node_id, written into CSINode spec.drivers.
    pub node_id: String,
    /// NodeGetInfo max_volumes_per_node (0 = no limit).
    pub max_volumes_per_node: i64,
    /// NodeGetInfo topology keys.
    pub topology_keys: Vec<String>,
    /// Node capability GET_VOLUME_HEALTH.
    pub volume_health: bool,
    /// Node capability GET_STORAGE_HEALTH.
    pub storage_health: bool,
    /// Whether volume health comes through the legacy VOLUME_CONDITION bridge
    /// (NodeGetVolumeStats) because the driver has no GET_VOLUME_HEALTH.
    pub legacy: bool,
    /// What answers for its volumes' health on this node (published on the CSINode).
    pub coverage: NodeSources,
    /// The health RPCs.
    pub client: Arc<dyn NodeHealthClient>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("name", &self.name)
            .field("endpoint", &self.endpoint)
            .field("node_id", &self.node_id)
            .field("volume_health", &self.volume_health)
            .field("storage_health", &self.storage_health)
            .field("legacy", &self.legacy)
            .field("coverage", &self.coverage)
            .finish_non_exhaustive()
    }
}

/// How a driver is set up as it joins the set (the node fault detector's part in its health).
pub type Adapt = Arc<dyn Fn(Driver) -> Driver + Send + Sync>;

/// The drivers currently registered, shared between discovery and the probe loop.
#[derive(Clone, Default)]
pub struct DriverSet {
    inner: Arc<RwLock<BTreeMap<String, Arc<Driver>>>>,
    adapt: Option<Adapt>,
}

impl std::fmt::Debug for DriverSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverSet")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl DriverSet {
    /// An empty set.
    pub fn new() -> DriverSet {
        DriverSet::default()
    }

    /// An empty set that passes each driver through `adapt` as it is inserted.
    pub fn adapted(adapt: Adapt) -> DriverSet {
        DriverSet {
            adapt: Some(adapt),
            ..DriverSet::default()
        }
    }

    /// Adds or replaces a driver (a re-registration replaces the old connection).
    pub fn insert(&self, driver: Driver) {
        let driver = match &self.adapt {
            Some(adapt) => adapt(driver),
            None => driver,
        };
        if let Ok(mut map) = self.inner.write() {
            map.insert(driver.name.clone(), Arc::new(driver));
        }
    }

    /// Removes a driver by name.
    pub fn remove(&self, name: &str) {
        if let Ok(mut map) = self.inner.write() {
            map.remove(name);
        }
    }

    /// The drivers now.
    pub fn snapshot(&self) -> BTreeMap<String, Arc<Driver>> {
        self.inner.read().map(|m| m.clone()).unwrap_or_default()
    }
}

/// [`NodeHealthClient`] over a gRPC channel.
#[derive(Debug, Clone)]
pub struct GrpcNodeHealth {
    channel: tonic::transport::Channel,
}

impl GrpcNodeHealth {
    /// Wraps a connected channel.
    pub fn new(channel: tonic::transport::Channel) -> GrpcNodeHealth {
        GrpcNodeHealth { channel }
    }
}

#[async_trait]
impl NodeHealthClient for GrpcNodeHealth {
    async fn volume_health(
        &self,
        request: v1::NodeGetVolumeHealthRequest,
    ) -> Result<Vec<VolumeHealthEntry>, tonic::Status> {
        let mut client = v1::node_client::NodeClient::new(self.channel.clone());
        let id = request.volume_id.clone();
        let answer = client.node_get_volume_health(request).await?.into_inner();
        // An answer without volume_health (REQUIRED) or about another volume is no report.
        volhealth_writer::volume_answer(&id, answer.volume_health)
            .map_err(|e| tonic::Status::internal(e.message))
    }

    async fn storage_health(&self) -> Result<Vec<StorageBackendHealth>, tonic::Status> {
        let mut client = v1::node_client::NodeClient::new(self.channel.clone());
        let request = v1::NodeGetStorageHealthRequest::default();
        Ok(client
            .node_get_storage_health(request)
            .await?
            .into_inner()
            .backend_health)
    }
}

/// [`NodeHealthClient`] for a driver that speaks only the legacy VOLUME_CONDITION shape: volume
/// health from NodeGetVolumeStats through the bridge (called only for attempted mounts, with
/// their paths, as the legacy spec requires).
#[derive(Debug, Clone)]
pub struct LegacyNodeHealth {
    bridge: volhealth_legacy_bridge::LegacyNode,
    grpc: GrpcNodeHealth,
}

#[async_trait]
impl NodeHealthClient for LegacyNodeHealth {
    async fn volume_health(
        &self,
        request: v1::NodeGetVolumeHealthRequest,
    ) -> Result<Vec<VolumeHealthEntry>, tonic::Status> {
        Ok(self.bridge.volume_health(request).await?.health_statuses)
    }

    async fn storage_health(&self) -> Result<Vec<StorageBackendHealth>, tonic::Status> {
        self.grpc.storage_health().await
    }
}

/// Why [`connect`] could not take a driver on.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The socket could not be reached.
    #[error("connecting to the CSI endpoint {endpoint}: {source}")]
    Connect {
        /// The driver's endpoint.
        endpoint: String,
        /// What the transport said.
        source: volhealth_csi::Error,
    },
    /// GetPluginInfo or a capability call failed.
    #[error("asking the driver at {endpoint} for its capabilities: {source}")]
    Capabilities {
        /// The driver's endpoint.
        endpoint: String,
        /// What the probe said.
        source: volhealth_csi::Error,
    },
    /// The plugin's name is not the one it registered under.
    #[error(
        "the driver at {endpoint} calls itself {calls_itself:?}, but it was registered as {registered_as:?}"
    )]
    OtherName {
        /// The driver's endpoint.
        endpoint: String,
        /// GetPluginInfo's name.
        calls_itself: String,
        /// The registration's name.
        registered_as: String,
    },
    /// NodeGetInfo did not answer in time.
    #[error("NodeGetInfo on {endpoint} timed out after {timeout:?}")]
    NodeInfoTimeout {
        /// The driver's endpoint.
        endpoint: String,
        /// The deadline.
        timeout: Duration,
    },
    /// NodeGetInfo failed.
    #[error("NodeGetInfo on {endpoint}: {code}: {message}")]
    NodeInfo {
        /// The driver's endpoint.
        endpoint: String,
        /// The gRPC status code.
        code: tonic::Code,
        /// The status message.
        message: String,
    },
    /// The legacy capability calls failed.
    #[error("asking the driver at {endpoint} for its legacy capabilities: {message}")]
    LegacyCapabilities {
        /// The driver's endpoint.
        endpoint: String,
        /// The status message.
        message: String,
    },
}

/// Connects to a driver's node plugin, learns its name, health capabilities and node info.
///
/// `expected_name`, when given, is the name the driver was registered under; a different plugin name is refused
/// so that health is never attributed to the wrong driver. A driver without GET_VOLUME_HEALTH
/// that advertises the legacy VOLUME_CONDITION is asked through the bridge when `legacy` allows.
pub async fn connect(
    endpoint: &str,
    expected_name: Option<&str>,
    timeout: Duration,
    legacy: &crate::config::Legacy,
) -> Result<Driver, ConnectError> {
    let at = || endpoint.to_string();
    let channel = volhealth_csi::client::connect(endpoint, timeout)
        .await
        .map_err(|source| ConnectError::Connect {
            endpoint: at(),
            source,
        })?;
    let caps = volhealth_csi::capabilities::probe(channel.clone(), timeout)
        .await
        .map_err(|source| ConnectError::Capabilities {
            endpoint: at(),
            source,
        })?;
    if let Some(expected) = expected_name
        && caps.driver_name != expected
    {
        return Err(ConnectError::OtherName {
            endpoint: at(),
            calls_itself: caps.driver_name,
            registered_as: expected.to_string(),
        });
    }
    let mut node = v1::node_client::NodeClient::new(channel.clone());
    let info = tokio::time::timeout(
        timeout,
        node.node_get_info(v1::NodeGetInfoRequest::default()),
    )
    .await
    .map_err(|_| ConnectError::NodeInfoTimeout {
        endpoint: at(),
        timeout,
    })?
    .map_err(|status| ConnectError::NodeInfo {
        endpoint: at(),
        code: status.code(),
        message: status.message().to_string(),
    })?
    .into_inner();
    let mut topology_keys: Vec<String> = info
        .accessible_topology
        .map(|t| t.segments.into_keys().collect())
        .unwrap_or_default();
    topology_keys.sort();
    let grpc = GrpcNodeHealth::new(channel.clone());
    let mut driver = Driver {
        name: caps.driver_name,
        endpoint: endpoint.to_string(),
        node_id: info.node_id,
        max_volumes_per_node: info.max_volumes_per_node,
        topology_keys,
        volume_health: caps.node.volume,
        storage_health: caps.node.storage,
        legacy: false,
        coverage: NodeSources {
            own: caps.node.volume.then_some(Source::HealthRpcs),
            node_faults: false,
        },
        client: Arc::new(grpc.clone()),
    };
    if !driver.volume_health && legacy.enabled {
        let modes = volhealth_legacy_bridge::probe(channel.clone(), timeout)
            .await
            .map_err(|status| ConnectError::LegacyCapabilities {
                endpoint: at(),
                message: status.message().to_string(),
            })?;
        if modes.node_volume_stats {
            let bridge = legacy.bridge(driver.name.clone());
            driver.volume_health = true;
            driver.legacy = true;
            driver.coverage.own = Some(Source::LegacyVolumeCondition);
            driver.client = Arc::new(LegacyNodeHealth {
                bridge: volhealth_legacy_bridge::LegacyNode::new(channel, bridge),
                grpc,
            });
        }
    }
    Ok(driver)
}
