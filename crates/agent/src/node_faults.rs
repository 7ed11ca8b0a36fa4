//! The node fault detector as a driver's node health: for drivers that lack NodeGetVolumeHealth
//! or NodeGetStorageHealth (`--detect-node-faults=auto`), or beside every driver's own answer
//! (`always`). The detector answers through [`NodeHealthClient`], so its reports take the same
//! path as a driver's: no-op suppression, condition clearing and metrics are unchanged.

use crate::config::{AgentConfig, NodeFaultMode};
use crate::drivers::{Driver, DriverSet, NodeHealthClient};
use crate::metrics::Metrics;
use async_trait::async_trait;
use std::path::PathBuf;
use std::sync::Arc;
use volhealth_csi::v1;
use volhealth_csi::v1::node_get_storage_health_response::StorageBackendHealth;
use volhealth_csi::v1::volume_health::VolumeHealthEntry;
use volhealth_node_faults::{Detector, DetectorConfig, VolumeQuery};
use volhealth_writer::coverage::NodeSources;

/// Who answers one of the two node health RPCs for a driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Driver,
    Detector,
    Both,
}

fn source(mode: NodeFaultMode, driver_has_it: bool) -> Option<Source> {
    match (mode, driver_has_it) {
        (NodeFaultMode::Off, true) | (NodeFaultMode::Auto, true) => Some(Source::Driver),
        (NodeFaultMode::Off, false) => None,
        (NodeFaultMode::Auto, false) | (NodeFaultMode::Always, false) => Some(Source::Detector),
        (NodeFaultMode::Always, true) => Some(Source::Both),
    }
}

/// A driver's node health with the detector in it, as `mode` says.
struct WithDetector {
    driver: String,
    inner: Arc<dyn NodeHealthClient>,
    detector: Arc<Detector>,
    volume: Source,
    storage: Source,
}

/// The driver as the agent uses it under `mode`: unchanged when the detector has no part in it.
pub fn with_node_faults(driver: Driver, detector: &Arc<Detector>, mode: NodeFaultMode) -> Driver {
    let (Some(volume), Some(storage)) = (
        source(mode, driver.volume_health),
        source(mode, driver.storage_health),
    ) else {
        return driver;
    };
    if volume == Source::Driver && storage == Source::Driver {
        return driver;
    }
    let client = Arc::new(WithDetector {
        driver: driver.name.clone(),
        inner: driver.client.clone(),
        detector: detector.clone(),
        volume,
        storage,
    });
    let coverage = NodeSources {
        node_faults: volume != Source::Driver,
        ..driver.coverage
    };
    Driver {
        volume_health: true,
        storage_health: true,
        coverage,
        client,
        ..driver
    }
}

/// The agent's driver set: with the detector in the drivers' health unless `--detect-node-faults=off`.
pub fn driver_set(config: &AgentConfig, metrics: &Metrics) -> DriverSet {
    let mode = config.node_faults;
    if mode == NodeFaultMode::Off {
        return DriverSet::new();
    }
    let detector = Arc::new(Detector::start(
        DetectorConfig {
            probe_timeout: config.probe_timeout,
            io_error_window: config.io_error_window,
            mountinfo: config.mountinfo.clone(),
            ..DetectorConfig::default()
        },
        metrics.node_faults.clone(),
    ));
    if config.probe_timeout >= config.timeout {
        tracing::warn!(
            "--probe-timeout ({:?}) is not below --timeout ({:?}): a hung mount's call times out before the detector can report it MountUnresponsive",
            config.probe_timeout,
            config.timeout
        );
    }
    tracing::info!(
        mode = ?mode, probe_timeout = ?config.probe_timeout, io_error_window = ?config.io_error_window,
        mountinfo = ?config.mountinfo,
        "node fault detection on"
    );
    DriverSet::adapted(Arc::new(move |driver| {
        with_node_faults(driver, &detector, mode)
    }))
}

fn no_report(e: volhealth_node_faults::Error) -> tonic::Status {
    // A detector that could not look says nothing: the agent keeps what is stored.
    tonic::Status::unavailable(e.to_string())
}

/// The driver's entries, then the detector's whose (status, reason) the driver did not report.
fn merged<T>(mut own: Vec<T>, found: Vec<T>, key: impl Fn(&T) -> (i32, &str)) -> Vec<T> {
    for entry in found {
        if !own.iter().any(|e| key(e) == key(&entry)) {
            own.push(entry);
        }
    }
    own
}

#[async_trait]
impl NodeHealthClient for WithDetector {
    async fn volume_health(
        &self,
        request: v1::NodeGetVolumeHealthRequest,
    ) -> Result<Vec<VolumeHealthEntry>, tonic::Status> {
        let path = |p: &str| (!p.is_empty()).then(|| PathBuf::from(p));
        let query = VolumeQuery {
            driver: self.driver.clone(),
            volume_id: request.volume_id.clone(),
            publish_path: path(&request.volume_publish_path),
            staging_path: path(&request.staging_target_path),
        };
        match self.volume {
            Source::Driver => self.inner.volume_health(request).await,
            Source::Detector => self.detector.volume_health(&query).await.map_err(no_report),
            Source::Both => {
                let (own, found) = futures::join!(
                    self.inner.volume_health(request),
                    self.detector.volume_health(&query)
                );
                Ok(merged(own?, found.map_err(no_report)?, |e| {
                    (e.status, e.reason.as_str())
                }))
            }
        }
    }

    async fn storage_health(&self) -> Result<Vec<StorageBackendHealth>, tonic::Status> {
        match self.storage {
            Source::Driver => self.inner.storage_health().await,
            Source::Detector => self
                .detector
                .storage_health(&self.driver)
                .await
                .map_err(no_report),
            Source::Both => {
                let (own, found) = futures::join!(
                    self.inner.storage_health(),
                    self.detector.storage_health(&self.driver)
                );
                Ok(merged(own?, found.map_err(no_report)?, |e| {
                    (e.status, e.reason.as_str())
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use volhealth_node_faults::NodeFaultMetrics;

    struct Says(Vec<VolumeHealthEntry>);

    #[async_trait]
    impl NodeHealthClient for Says {
        async fn volume_health(
            &self,
            _: v1::NodeGetVolumeHealthRequest,
        ) -> Result<Vec<VolumeHealthEntry>, tonic::Status> {
            Ok(self.0.clone())
        }
        async fn storage_health(&self) -> Result<Vec<StorageBackendHealth>, tonic::Status> {
            Ok(Vec::new())
        }
    }

    fn driver(volume_health: bool, says: Vec<VolumeHealthEntry>) -> Driver {
        Driver {
            name: "d.example.com".into(),
            endpoint: "unix:///d.sock".into(),
            node_id: "n".into(),
            max_volumes_per_node: 0,
            topology_keys: Vec::new(),
            volume_health,
            storage_health: false,
            legacy: false,
            coverage: NodeSources {
                own: volume_health.then_some(volhealth_writer::coverage::Source::HealthRpcs),
                node_faults: false,
            },
            client: Arc::new(Says(says)),
        }
    }

    /// A temporary directory holding the directory `mounted` (returned too).
    fn mounted_dir() -> (tempfile::TempDir, std::path::PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let mounted = tmp.path().join("mounted");
        std::fs::create_dir_all(&mounted).unwrap();
        (tmp, mounted)
    }

    /// A detector over a written mount table in which `mounted` is mounted.
    fn detector_at(dir: &std::path::Path, mounted: &std::path::Path) -> Arc<Detector> {
        let info = dir.join("mountinfo");
        std::fs::write(
            &info,
            format!(
                "40 1 0:77 / {} rw,relatime - tmpfs tmpfs rw\n",
                mounted.display()
            ),
        )
        .unwrap();
        let config = DetectorConfig {
            mountinfo: vec![info],
            kmsg: None,
            probe_timeout: Duration::from_secs(30),
            ..DetectorConfig::default()
        };
        Arc::new(Detector::start(
            config,
            Arc::new(NodeFaultMetrics::unregistered()),
        ))
    }

    fn entry(status: i32, reason: &str) -> VolumeHealthEntry {
        VolumeHealthEntry {
            status,
            reason: reason.into(),
            message: String::new(),
        }
    }

    fn reasons(entries: &[VolumeHealthEntry]) -> Vec<&str> {
        entries.iter().map(|e| e.reason.as_str()).collect()
    }

    #[tokio::test]
    async fn auto_answers_only_for_drivers_without_node_health() {
        let (tmp, mounted) = mounted_dir();
        let detector = detector_at(tmp.path(), &mounted);
        let gone = tmp.path().join("gone/mount");
        let request = v1::NodeGetVolumeHealthRequest {
            volume_id: "vol-1".into(),
            volume_publish_path: gone.display().to_string(),
            staging_target_path: String::new(),
        };

        // A driver with the volume RPC answers for its volumes alone; the detector answers
        // only for the storage RPC it lacks.
        let own = with_node_faults(driver(true, vec![]), &detector, NodeFaultMode::Auto);
        assert!(own.volume_health && own.storage_health);
        assert_eq!(
            own.coverage.short(),
            "rpc",
            "the detector has no part in its volumes"
        );
        let answer = own.client.volume_health(request.clone()).await.unwrap();
        assert!(answer.is_empty());

        // A driver without it: the detector answers, and sees the unmounted path.
        let silent = with_node_faults(driver(false, vec![]), &detector, NodeFaultMode::Auto);
        assert!(silent.volume_health && silent.storage_health);
        assert_eq!(silent.coverage.short(), "node-faults");
        let answer = silent.client.volume_health(request.clone()).await.unwrap();
        assert_eq!(reasons(&answer), ["NotMounted"]);

        // off: the driver stays silent.
        let off = with_node_faults(driver(false, vec![]), &detector, NodeFaultMode::Off);
        assert!(!off.volume_health);
        assert!(!off.coverage.any(), "nothing watches its volumes");
    }

    #[tokio::test]
    async fn the_detectors_series_are_on_the_agents_metrics_page() {
        let metrics = Metrics::default();
        let mut config = AgentConfig::new("node-a");
        config.node_faults = NodeFaultMode::Auto;
        let set = driver_set(&config, &metrics);
        set.insert(driver(false, vec![]));
        let wrapped = set.snapshot().remove("d.example.com").unwrap();
        assert!(wrapped.volume_health, "the set adapts drivers as they join");
        metrics.node_faults.count("statfs", "ok");
        let page = metrics.families.encode();
        for series in [
            r#"csi_volume_health_node_fault_probes_total{signal="statfs",result="ok"} 1"#,
            "csi_volume_health_node_fault_probes_in_flight",
            "csi_volume_health_node_fault_probe_timeouts_total",
        ] {
            assert!(page.contains(series), "{series} missing from\n{page}");
        }
        // off: drivers join as they are.
        config.node_faults = NodeFaultMode::Off;
        let plain = driver_set(&config, &metrics);
        plain.insert(driver(false, vec![]));
        assert!(!plain.snapshot()["d.example.com"].volume_health);
    }

    #[tokio::test]
    async fn always_adds_findings_beside_the_drivers() {
        let (tmp, mounted) = mounted_dir();
        let detector = detector_at(tmp.path(), &mounted);
        let says = vec![entry(1, "ThinPoolLow"), entry(2, "NotMounted")];
        let both = with_node_faults(driver(true, says), &detector, NodeFaultMode::Always);
        let request = v1::NodeGetVolumeHealthRequest {
            volume_id: "vol-1".into(),
            volume_publish_path: tmp.path().join("gone").display().to_string(),
            staging_target_path: String::new(),
        };
        assert_eq!(both.coverage.short(), "rpc+node-faults");
        let answer = both.client.volume_health(request).await.unwrap();
        // The detector's NotMounted is the driver's too: reported once.
        assert_eq!(reasons(&answer), ["ThinPoolLow", "NotMounted"]);

        // Storage (the detector's alone: this driver lacks the RPC): once volumes were looked
        // at, a driver none of whose volumes is mounted has nothing to show.
        assert_eq!(both.client.storage_health().await.unwrap(), Vec::new());

        // A fresh detector knows nothing yet: no report, not healthy.
        let fresh = with_node_faults(
            driver(true, vec![]),
            &detector_at(tmp.path(), &mounted),
            NodeFaultMode::Always,
        );
        let err = fresh.client.storage_health().await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::Unavailable);
    }
}
