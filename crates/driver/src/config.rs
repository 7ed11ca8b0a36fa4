//! What a driver process serves and how it detects trouble.

use std::path::PathBuf;
use std::time::Duration;

/// Default CSI driver name.
pub const DEFAULT_DRIVER_NAME: &str = "hostpath.volhealth.io";

/// Default [`DriverConfig::io_probe_interval`]: a volume's data path is written and synced at
/// most twice a minute, however often its health is asked for.
pub const DEFAULT_IO_PROBE_INTERVAL: Duration = Duration::from_secs(30);

/// Which CSI services this process serves (Identity is always served).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Identity, Controller and Node.
    All,
    /// Identity and Controller.
    Controller,
    /// Identity and Node.
    Node,
}

impl Mode {
    /// Whether the Controller service is served.
    pub fn serves_controller(self) -> bool {
        matches!(self, Mode::All | Mode::Controller)
    }
    /// Whether the Node service is served.
    pub fn serves_node(self) -> bool {
        matches!(self, Mode::All | Mode::Node)
    }
}

/// How new volumes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// A plain directory `<state-dir>/volumes/<id>`.
    Dir,
    /// A sparse file `<state-dir>/volumes/<id>.img` holding an ext4 filesystem.
    Image,
}

/// The health capabilities the driver advertises (any subset, to exercise consumers' paths).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthCapabilities {
    /// LIST_VOLUME_HEALTH (controller).
    pub list: bool,
    /// GET_VOLUME_HEALTH (controller).
    pub get: bool,
    /// GET_VOLUME_HEALTH (node).
    pub node_volume: bool,
    /// GET_STORAGE_HEALTH (node).
    pub node_storage: bool,
}

impl HealthCapabilities {
    /// All four capabilities.
    pub const ALL: HealthCapabilities = HealthCapabilities {
        list: true,
        get: true,
        node_volume: true,
        node_storage: true,
    };
    /// None of them.
    pub const NONE: HealthCapabilities = HealthCapabilities {
        list: false,
        get: false,
        node_volume: false,
        node_storage: false,
    };

    /// Parses a comma-separated list of `list`, `get`, `node-volume`, `node-storage`; `none` or an
    /// empty string advertises nothing.
    pub fn parse(s: &str) -> crate::Result<Self> {
        let mut caps = Self::NONE;
        for word in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            match word {
                "list" => caps.list = true,
                "get" => caps.get = true,
                "node-volume" => caps.node_volume = true,
                "node-storage" => caps.node_storage = true,
                "all" => caps = Self::ALL,
                "none" => {}
                other => {
                    return Err(crate::Error::Invalid(format!(
                        "unknown health capability {other:?}; expected list, get, node-volume, node-storage"
                    )));
                }
            }
        }
        Ok(caps)
    }
}

impl Default for HealthCapabilities {
    fn default() -> Self {
        Self::ALL
    }
}

/// Everything a driver process needs; `volhealth driver` fills it from flags and `volhealth up`
/// builds it in-process.
#[derive(Debug, Clone)]
pub struct DriverConfig {
    /// CSI endpoint, e.g. `unix:///run/csi/csi.sock`.
    pub endpoint: String,
    /// Where volumes, records and injections live.
    pub state_dir: PathBuf,
    /// This node's id (NodeGetInfo; also keys the node's stage and publish records).
    pub node_id: String,
    /// CSI driver name.
    pub driver_name: String,
    /// Which services are served.
    pub mode: Mode,
    /// How new volumes are stored.
    pub backend: BackendKind,
    /// Which health capabilities are advertised.
    pub health: HealthCapabilities,
    /// Also speak the legacy VOLUME_CONDITION shape of CSI v1.3 – v1.12: capabilities 11 and 4,
    /// conditions in ListVolumes, ControllerGetVolume and NodeGetVolumeStats.
    pub legacy_condition: bool,
    /// When set, also serve the kubelet plugin-registration API in this directory.
    pub registration_dir: Option<PathBuf>,
    /// How often the controller's health view is recomputed.
    pub refresh_interval: Duration,
    /// How often image filesystems are checked with `e2fsck -n` (changed images only).
    pub fsck_interval: Duration,
    /// Deadline of a node I/O probe; past it the volume is Inaccessible.
    pub io_probe_timeout: Duration,
    /// A node I/O probe slower than this makes the volume Degraded.
    pub io_probe_slow: Duration,
    /// How long a fast, successful node I/O probe of a volume stands for later health calls
    /// (zero: probe on every call). Each probe writes and syncs 4 KiB; without this, a node
    /// with 50 volumes asked every second would sync 50 times a second.
    pub io_probe_interval: Duration,
    /// Free space below this fraction of the backing filesystem counts as low.
    pub low_space_fraction: f64,
    /// Free space below this many bytes counts as full.
    pub full_space_bytes: u64,
    /// Try real bind and loop mounts; when false (or when the machine refuses), use symlinks.
    pub allow_mounts: bool,
    /// When set, the controller health RPCs refuse callers whose `secrets` lack this pair.
    pub require_secret: Option<crate::required_secret::RequiredSecret>,
}

impl DriverConfig {
    /// A configuration with the defaults of `volhealth driver`.
    pub fn new(
        endpoint: impl Into<String>,
        state_dir: impl Into<PathBuf>,
        node_id: impl Into<String>,
    ) -> Self {
        DriverConfig {
            endpoint: endpoint.into(),
            state_dir: state_dir.into(),
            node_id: node_id.into(),
            driver_name: DEFAULT_DRIVER_NAME.to_string(),
            mode: Mode::All,
            backend: BackendKind::Dir,
            health: HealthCapabilities::ALL,
            legacy_condition: false,
            registration_dir: None,
            refresh_interval: Duration::from_secs(1),
            fsck_interval: Duration::from_secs(2),
            io_probe_timeout: Duration::from_secs(2),
            io_probe_slow: Duration::from_millis(500),
            io_probe_interval: DEFAULT_IO_PROBE_INTERVAL,
            low_space_fraction: 0.10,
            full_space_bytes: 256 * 1024,
            allow_mounts: true,
            require_secret: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_capabilities_parse_any_subset() {
        assert_eq!(
            HealthCapabilities::parse("list,get,node-volume,node-storage").unwrap(),
            HealthCapabilities::ALL
        );
        let list_only = HealthCapabilities::parse("list").unwrap();
        assert!(
            list_only.list && !list_only.get && !list_only.node_volume && !list_only.node_storage
        );
        assert_eq!(
            HealthCapabilities::parse("none").unwrap(),
            HealthCapabilities::NONE
        );
        assert_eq!(
            HealthCapabilities::parse("").unwrap(),
            HealthCapabilities::NONE
        );
        assert!(HealthCapabilities::parse("list,watch").is_err());
    }
}
