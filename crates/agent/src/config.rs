//! The agent's configuration and the parsers for its flag values.

use crate::error::{Error, Result};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// The kubelet's default root directory.
pub const DEFAULT_KUBELET_ROOT_DIR: &str = "/var/lib/kubelet";

/// A driver named on the command line (`--csi-driver NAME=unix:///PATH`), used instead of registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaticDriver {
    /// CSI driver name.
    pub name: String,
    /// The driver's node-plugin endpoint.
    pub endpoint: String,
}

/// Everything `run` needs; `volhealth up` builds this directly to run agents in-process.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The node this agent acts for (`--node-name`).
    pub node_name: String,
    /// Kubeconfig file; `None` means `KUBECONFIG`, else in-cluster, else `~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    /// The kubelet's root directory, read to learn which volumes were staged or published.
    pub kubelet_root_dir: PathBuf,
    /// Drivers given on the command line; when empty the registration directory is watched.
    pub drivers: Vec<StaticDriver>,
    /// Probe interval.
    pub interval: Duration,
    /// Timeout of each CSI call.
    pub timeout: Duration,
    /// Where to serve /metrics, /healthz and /readyz; `None` serves nothing.
    pub http_endpoint: Option<SocketAddr>,
    /// Feature gate `CSIVolumeHealth`: off means no CSI health calls and no writes.
    pub volume_health_enabled: bool,
    /// At most this many CSI health calls run at once.
    pub max_concurrent_probes: usize,
    /// How often the registration directory is rescanned.
    pub registration_poll: Duration,
    /// How drivers that speak only the legacy VOLUME_CONDITION shape are probed.
    pub legacy: Legacy,
    /// Where the node fault detector answers for a driver's volumes (`--detect-node-faults`).
    pub node_faults: NodeFaultMode,
    /// How long a `statfs` of a mounted volume may take before it counts as unresponsive.
    pub probe_timeout: Duration,
    /// How long a volume stays degraded after the kernel's last I/O error line for it.
    pub io_error_window: Duration,
    /// The mount tables the detector reads, the first readable one wins (`--mountinfo`).
    pub mountinfo: Vec<PathBuf>,
}

/// `--legacy-volume-condition`, `--legacy-rules` and `--legacy-debounce`.
pub use volhealth_legacy_bridge::Settings as Legacy;

/// `--detect-node-faults`: which drivers' volumes the node fault detector answers for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodeFaultMode {
    /// Only where the driver lacks the node health RPC (per RPC: volume, storage).
    #[default]
    Auto,
    /// Every driver; its findings are added beside the driver's own.
    Always,
    /// Never.
    Off,
}

impl std::str::FromStr for NodeFaultMode {
    type Err = Error;

    fn from_str(input: &str) -> Result<NodeFaultMode> {
        match input.trim() {
            "auto" => Ok(NodeFaultMode::Auto),
            "always" => Ok(NodeFaultMode::Always),
            "off" => Ok(NodeFaultMode::Off),
            other => Err(Error::NodeFaultFlag(other.to_string())),
        }
    }
}

impl AgentConfig {
    /// A configuration with the upstream defaults for `node_name`.
    pub fn new(node_name: impl Into<String>) -> AgentConfig {
        AgentConfig {
            node_name: node_name.into(),
            kubeconfig: None,
            kubelet_root_dir: PathBuf::from(DEFAULT_KUBELET_ROOT_DIR),
            drivers: Vec::new(),
            interval: Duration::from_secs(60),
            timeout: Duration::from_secs(15),
            http_endpoint: Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 8081)),
            volume_health_enabled: true,
            max_concurrent_probes: 10,
            registration_poll: Duration::from_secs(2),
            legacy: Legacy::default(),
            node_faults: NodeFaultMode::Auto,
            probe_timeout: Duration::from_secs(5),
            io_error_window: Duration::from_secs(600),
            mountinfo: volhealth_node_faults::DetectorConfig::default().mountinfo,
        }
    }

    /// The kubelet's plugin registration directory.
    pub fn registration_dir(&self) -> PathBuf {
        self.kubelet_root_dir.join("plugins_registry")
    }
}

/// Parses one `--csi-driver NAME=ENDPOINT`.
pub fn parse_driver(input: &str) -> Result<StaticDriver> {
    let fail = |reason: &str| Error::DriverFlag {
        input: input.to_string(),
        reason: reason.to_string(),
    };
    let (name, endpoint) = input
        .split_once('=')
        .ok_or_else(|| fail("expected NAME=unix:///PATH"))?;
    let name = name.trim();
    let endpoint = endpoint.trim();
    if name.is_empty() {
        return Err(fail("the driver name is empty"));
    }
    if endpoint.is_empty() {
        return Err(fail("the endpoint is empty"));
    }
    volhealth_csi::endpoint::parse(endpoint).map_err(|e| fail(&e.to_string()))?;
    Ok(StaticDriver {
        name: name.to_string(),
        endpoint: endpoint.to_string(),
    })
}

/// Parses `--feature-gates` (`Name=bool,...`) and returns whether `CSIVolumeHealth` is on (default on).
pub fn parse_feature_gates(input: &str) -> Result<bool> {
    volhealth_daemon::feature_gates::csi_volume_health(input).map_err(|reason| {
        Error::FeatureGates {
            input: input.to_string(),
            reason,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_flags() {
        let d = parse_driver("hostpath.csi.k8s.io=unix:///run/csi/csi.sock").unwrap();
        assert_eq!(d.name, "hostpath.csi.k8s.io");
        assert_eq!(d.endpoint, "unix:///run/csi/csi.sock");
        assert!(parse_driver("nodriver").is_err());
        assert!(parse_driver("=unix:///x").is_err());
        assert!(parse_driver("name=").is_err());
    }

    #[test]
    fn node_fault_modes() {
        assert_eq!(
            "auto".parse::<NodeFaultMode>().unwrap(),
            NodeFaultMode::Auto
        );
        assert_eq!(
            "always".parse::<NodeFaultMode>().unwrap(),
            NodeFaultMode::Always
        );
        assert_eq!("off".parse::<NodeFaultMode>().unwrap(), NodeFaultMode::Off);
        assert!("sometimes".parse::<NodeFaultMode>().is_err());
    }

    #[test]
    fn feature_gates() {
        assert!(parse_feature_gates("").unwrap());
        assert!(parse_feature_gates("CSIVolumeHealth=true").unwrap());
        assert!(!parse_feature_gates("CSIVolumeHealth=false").unwrap());
        assert!(!parse_feature_gates(" CSIVolumeHealth=False ").unwrap());
        assert!(parse_feature_gates("CSIVolumeHealth=maybe").is_err());
        assert!(parse_feature_gates("Other=true").is_err());
        assert!(parse_feature_gates("CSIVolumeHealth").is_err());
    }
}
