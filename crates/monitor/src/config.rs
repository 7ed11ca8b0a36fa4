//! The monitor's settings, with the upstream sidecar's defaults except the client-side rate
//! limit (see [`DEFAULT_KUBE_API_QPS`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
pub use volhealth_kube_access::leader::{
    DEFAULT_LEASE_DURATION, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD, LEADER_ELECTION_JITTER,
    LeaderElection,
};

/// Default `--csi-address`.
pub const DEFAULT_CSI_ADDRESS: &str = "/run/csi/socket";
/// Default `--monitor-interval`.
pub const DEFAULT_MONITOR_INTERVAL: Duration = Duration::from_secs(60);
/// Default `--timeout` (per RPC, per list page).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);
/// Default `--list-page-size`.
pub const DEFAULT_LIST_PAGE_SIZE: u32 = 500;
/// Default `--worker-threads`.
pub const DEFAULT_WORKER_THREADS: usize = 10;
/// Default `--kube-api-qps`: status writes per second, sustained. Upstream's 5 (client-go's
/// default from before API Priority and Fairness) puts 5,000 transitions over 16 minutes behind
/// each other. Writes here are already coalesced per PVC, free of no-ops and ordered most severe
/// first, and a modern API server protects itself with Priority and Fairness (excess requests
/// queue at the server or are answered 429, which the writer retries with backoff), so the client
/// limit only has to bound a runaway: 200/s drains 5,000 changes in under 30 s.
pub const DEFAULT_KUBE_API_QPS: f64 = 200.0;
/// Default `--kube-api-burst`: a correlated failure of 500 volumes goes out at once.
pub const DEFAULT_KUBE_API_BURST: u32 = 500;
/// How much slower than the interval writes the API server dropped or rejected are retried.
pub const DROPPED_WRITE_RETRY_FACTOR: u32 = 10;

/// A Secret named `NAMESPACE/NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRef {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

/// A `--health-secret` value that is not `NAMESPACE/NAME`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?}: expected NAMESPACE/NAME")]
pub struct BadSecretRef(pub String);

impl std::str::FromStr for SecretRef {
    type Err = BadSecretRef;
    fn from_str(s: &str) -> Result<Self, BadSecretRef> {
        match s.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
                Ok(SecretRef {
                    namespace: ns.to_string(),
                    name: name.to_string(),
                })
            }
            _ => Err(BadSecretRef(s.to_string())),
        }
    }
}

impl std::fmt::Display for SecretRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Everything `run` needs; `volhealth monitor` fills it from flags, `volhealth up` in code.
#[derive(Debug, Clone)]
pub struct MonitorConfig {
    /// The CSI controller endpoint (`unix:///path` or a path).
    pub csi_address: String,
    /// A kubeconfig file; `None` = `KUBECONFIG`, else in-cluster, else `~/.kube/config`.
    pub kubeconfig: Option<PathBuf>,
    /// One probe cycle per interval.
    pub monitor_interval: Duration,
    /// Deadline of each RPC (each list page separately).
    pub timeout: Duration,
    /// `max_entries` of each ControllerListVolumeHealth page.
    pub list_page_size: u32,
    /// Most ControllerGetVolumeHealth calls in flight at once.
    pub worker_threads: usize,
    /// Leader election on a Lease; `None` = off.
    pub leader_election: Option<LeaderElection>,
    /// Where `/metrics`, `/healthz` and `/readyz` are served; `None` = not served.
    pub http_endpoint: Option<SocketAddr>,
    /// Sustained rate of writes to the API server.
    pub kube_api_qps: f64,
    /// Burst of writes to the API server.
    pub kube_api_burst: u32,
    /// Secret whose data goes into the health RPCs' `secrets`.
    pub health_secret: Option<SecretRef>,
    /// How a driver that speaks only the legacy VOLUME_CONDITION shape is probed.
    pub legacy: Legacy,
    /// For a driver with no health RPC at all, read each bound claim's health annotation
    /// (`volumehealth.storage.kubernetes.io/health`, vSphere's) instead (`--health-annotation`).
    pub health_annotation: bool,
}

/// `--legacy-volume-condition`, `--legacy-rules` and `--legacy-debounce`.
pub use volhealth_legacy_bridge::Settings as Legacy;

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            csi_address: DEFAULT_CSI_ADDRESS.to_string(),
            kubeconfig: None,
            monitor_interval: DEFAULT_MONITOR_INTERVAL,
            timeout: DEFAULT_TIMEOUT,
            list_page_size: DEFAULT_LIST_PAGE_SIZE,
            worker_threads: DEFAULT_WORKER_THREADS,
            leader_election: None,
            http_endpoint: None,
            kube_api_qps: DEFAULT_KUBE_API_QPS,
            kube_api_burst: DEFAULT_KUBE_API_BURST,
            health_secret: None,
            legacy: Legacy::default(),
            health_annotation: false,
        }
    }
}

impl MonitorConfig {
    /// Refuses settings the loops cannot work with.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: &'static str| Err(ConfigError::Setting(m));
        if self.monitor_interval.is_zero() {
            return bad("--monitor-interval must be positive");
        }
        if self.timeout.is_zero() {
            return bad("--timeout must be positive");
        }
        if self.list_page_size == 0 || self.list_page_size > i32::MAX as u32 {
            return bad("--list-page-size must be between 1 and 2147483647");
        }
        if self.worker_threads == 0 {
            return bad("--worker-threads must be at least 1");
        }
        if !(self.kube_api_qps.is_finite() && self.kube_api_qps > 0.0) {
            return bad("--kube-api-qps must be positive");
        }
        if self.kube_api_burst == 0 {
            return bad("--kube-api-burst must be at least 1");
        }
        if let Some(le) = &self.leader_election {
            le.validate()?;
        }
        Ok(())
    }
}

/// Monitor settings that cannot work, each naming its flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// One setting out of range.
    #[error("{0}")]
    Setting(&'static str),
    /// Leader-election timings client-go refuses.
    #[error(transparent)]
    LeaderElection(#[from] volhealth_kube_access::leader::TimingError),
}

/// The Lease name upstream uses: `external-health-monitor-leader-<driver>`, driver reduced to `[a-zA-Z0-9-]`.
pub fn lease_name(driver_name: &str) -> String {
    let reduced: String = driver_name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    format!("external-health-monitor-leader-{reduced}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_name_keeps_only_safe_characters() {
        assert_eq!(
            lease_name("hostpath.csi.k8s.io"),
            "external-health-monitor-leader-hostpathcsik8sio"
        );
        assert_eq!(
            lease_name("my-driver_1"),
            "external-health-monitor-leader-my-driver1"
        );
    }

    #[test]
    fn secret_ref_needs_namespace_and_name() {
        assert_eq!(
            "ns/s".parse::<SecretRef>(),
            Ok(SecretRef {
                namespace: "ns".into(),
                name: "s".into()
            })
        );
        for bad in ["s", "/s", "ns/", "a/b/c"] {
            assert!(bad.parse::<SecretRef>().is_err(), "{bad}");
        }
    }

    #[test]
    fn defaults_are_valid_and_zero_values_are_not() {
        assert_eq!(MonitorConfig::default().validate(), Ok(()));
        let c = MonitorConfig {
            worker_threads: 0,
            ..Default::default()
        };
        assert!(c.validate().is_err());
        let c = MonitorConfig {
            list_page_size: 0,
            ..Default::default()
        };
        assert!(c.validate().is_err());
    }
}
