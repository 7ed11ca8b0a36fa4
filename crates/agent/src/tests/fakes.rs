//! Fakes of the agent's boundaries, for unit tests only.

use crate::cluster::{ApiFailure, Cluster, PodSource};
use crate::drivers::{Driver, NodeHealthClient};
use crate::kubelet_dirs::{KubeletDirs, MountAttempt};
use crate::pod_volumes::CsiVolume;
use crate::watched::{WatchedNode, WatchedPod, WatchedPv, WatchedPvc};
use async_trait::async_trait;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{
    CSIPersistentVolumeSource, Node, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeClaimSpec, PersistentVolumeClaimVolumeSource, PersistentVolumeSpec, Pod,
    PodSpec, PodStatus, PodVolumeHealth, Volume,
};
use k8s_openapi::api::storage::v1::{CSINode, CSINodeDriver, CSINodeStatus, StorageHealth};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use volhealth_csi::v1;
use volhealth_csi::v1::node_get_storage_health_response::StorageBackendHealth;
use volhealth_csi::v1::volume_health::VolumeHealthEntry;
use volhealth_writer::{Clock, HealthEvent};

/// What the agent decodes of an object the fake keeps whole: the object as the API server would
/// send it, through the agent's partial type.
fn partial<T: serde::de::DeserializeOwned>(whole: &impl serde::Serialize) -> T {
    serde_json::from_value(serde_json::to_value(whole).unwrap()).unwrap()
}

/// In-memory API server with request accounting.
#[derive(Default)]
pub struct FakeCluster {
    pub pods: Mutex<BTreeMap<(String, String), Pod>>,
    pub pvcs: Mutex<BTreeMap<(String, String), PersistentVolumeClaim>>,
    pub pvs: Mutex<BTreeMap<String, PersistentVolume>>,
    pub csinode: Mutex<Option<CSINode>>,
    pub node_exists: Mutex<bool>,
    /// Every write: "pods/status ns/name", "csinodes/status", "csinodes", "csinodes create".
    pub writes: Mutex<Vec<String>>,
    /// Every patch of the CSINode's annotations (the coverage the agent publishes), kept apart
    /// from `writes` so tests of the health writes count only those.
    pub annotation_writes: Mutex<Vec<serde_json::Value>>,
    /// Answer to every write instead of applying it.
    pub fail_writes: Mutex<Option<ApiFailure>>,
    /// Accept writes but drop the health fields (the API server's gate is off).
    pub drop_health_fields: Mutex<bool>,
    /// Every Event created, with its count.
    pub events: Mutex<Vec<(HealthEvent, i32)>>,
    pub rv: AtomicUsize,
    /// How long the API server takes to answer each pod status write.
    pub write_delay: Mutex<Duration>,
    /// Pod status writes being answered now, by "ns/name".
    pub writing: Mutex<BTreeMap<String, usize>>,
    /// Most pod status writes answered at once.
    pub max_writing: AtomicUsize,
    /// Most pod status writes for one pod answered at once.
    pub max_writing_one_pod: AtomicUsize,
}

impl FakeCluster {
    pub fn new() -> Arc<FakeCluster> {
        let c = FakeCluster::default();
        *c.node_exists.lock().unwrap() = true;
        Arc::new(c)
    }

    fn next_rv(&self) -> String {
        (self.rv.fetch_add(1, Ordering::SeqCst) + 1).to_string()
    }

    pub fn writes(&self) -> Vec<String> {
        self.writes.lock().unwrap().clone()
    }

    pub fn pod_health(&self, ns: &str, name: &str) -> Vec<PodVolumeHealth> {
        let pods = self.pods.lock().unwrap();
        pods.get(&(ns.to_string(), name.to_string()))
            .and_then(|p| p.status.as_ref()?.volume_health.clone())
            .unwrap_or_default()
    }

    pub fn storage_health(&self) -> Vec<StorageHealth> {
        self.csinode
            .lock()
            .unwrap()
            .as_ref()
            .and_then(|c| c.status.as_ref()?.storage_health.clone())
            .unwrap_or_default()
    }

    /// A pod bound to the node using a PVC whose PV is a CSI volume of `driver` with `handle`.
    pub fn add_pod_with_pv(
        &self,
        ns: &str,
        pod: &str,
        uid: &str,
        volume: &str,
        driver: &str,
        handle: &str,
    ) {
        let claim = format!("{pod}-claim");
        let pv_name = format!("pv-{handle}");
        let mut p = Pod::default();
        p.metadata.namespace = Some(ns.into());
        p.metadata.name = Some(pod.into());
        p.metadata.uid = Some(uid.into());
        p.metadata.resource_version = Some(self.next_rv());
        p.spec = Some(PodSpec {
            node_name: Some("node-a".into()),
            volumes: Some(vec![Volume {
                name: volume.into(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        });
        p.status = Some(PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        });
        self.pods.lock().unwrap().insert((ns.into(), pod.into()), p);
        let mut pvc = PersistentVolumeClaim::default();
        pvc.metadata.name = Some(claim.clone());
        pvc.spec = Some(PersistentVolumeClaimSpec {
            volume_name: Some(pv_name.clone()),
            ..Default::default()
        });
        self.pvcs.lock().unwrap().insert((ns.into(), claim), pvc);
        let mut pv = PersistentVolume::default();
        pv.metadata.name = Some(pv_name.clone());
        pv.spec = Some(PersistentVolumeSpec {
            csi: Some(CSIPersistentVolumeSource {
                driver: driver.into(),
                volume_handle: handle.into(),
                ..Default::default()
            }),
            ..Default::default()
        });
        self.pvs.lock().unwrap().insert(pv_name, pv);
    }

    pub fn set_pod_health(&self, ns: &str, name: &str, value: Vec<PodVolumeHealth>) {
        let rv = self.next_rv();
        let mut pods = self.pods.lock().unwrap();
        let p = pods.get_mut(&(ns.to_string(), name.to_string())).unwrap();
        p.status.get_or_insert_with(Default::default).volume_health = Some(value);
        p.metadata.resource_version = Some(rv);
    }

    pub fn set_csinode(&self, drivers: &[&str], storage: Vec<StorageHealth>) {
        let mut c = CSINode::default();
        c.metadata.name = Some("node-a".into());
        c.metadata.resource_version = Some(self.next_rv());
        c.spec.drivers = drivers
            .iter()
            .map(|d| CSINodeDriver {
                name: d.to_string(),
                node_id: "node-a".into(),
                ..Default::default()
            })
            .collect();
        c.status = Some(CSINodeStatus {
            storage_health: Some(storage),
        });
        *self.csinode.lock().unwrap() = Some(c);
    }

    fn check_write(&self, what: String) -> Result<(), ApiFailure> {
        self.writes.lock().unwrap().push(what);
        match self.fail_writes.lock().unwrap().clone() {
            Some(f) => Err(f),
            None => Ok(()),
        }
    }

    /// Applies `edit` to the stored CSINode and answers the result; 404 when there is none.
    fn edit_csinode(
        &self,
        edit: impl FnOnce(&mut CSINode) -> Result<(), ApiFailure>,
    ) -> Result<CSINode, ApiFailure> {
        let mut guard = self.csinode.lock().unwrap();
        let c = guard.as_mut().ok_or(ApiFailure {
            code: Some(404),
            message: "no csinode".into(),
        })?;
        edit(c)?;
        Ok(c.clone())
    }
}

#[async_trait]
impl Cluster for FakeCluster {
    async fn get_node(&self, name: &str) -> Result<Option<WatchedNode>, ApiFailure> {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.metadata.uid = Some("node-uid".into());
        Ok((*self.node_exists.lock().unwrap()).then(|| partial(&n)))
    }

    async fn get_pvc(&self, ns: &str, name: &str) -> Result<Option<WatchedPvc>, ApiFailure> {
        Ok(self
            .pvcs
            .lock()
            .unwrap()
            .get(&(ns.to_string(), name.to_string()))
            .map(partial))
    }

    async fn get_pv(&self, name: &str) -> Result<Option<WatchedPv>, ApiFailure> {
        Ok(self.pvs.lock().unwrap().get(name).map(partial))
    }

    async fn patch_pod_volume_health(
        &self,
        ns: &str,
        name: &str,
        value: &[PodVolumeHealth],
    ) -> Result<WatchedPod, ApiFailure> {
        self.check_write(format!("pods/status {ns}/{name}"))?;
        let delay = *self.write_delay.lock().unwrap();
        if !delay.is_zero() {
            let pod = format!("{ns}/{name}");
            {
                let mut writing = self.writing.lock().unwrap();
                let one = writing.entry(pod.clone()).or_default();
                *one += 1;
                let one = *one;
                let all: usize = writing.values().sum();
                self.max_writing.fetch_max(all, Ordering::SeqCst);
                self.max_writing_one_pod.fetch_max(one, Ordering::SeqCst);
            }
            tokio::time::sleep(delay).await;
            *self.writing.lock().unwrap().get_mut(&pod).unwrap() -= 1;
        }
        let rv = self.next_rv();
        let drop = *self.drop_health_fields.lock().unwrap();
        let mut pods = self.pods.lock().unwrap();
        let p = pods
            .get_mut(&(ns.to_string(), name.to_string()))
            .ok_or(ApiFailure {
                code: Some(404),
                message: "no pod".into(),
            })?;
        if !drop {
            p.status.get_or_insert_with(Default::default).volume_health =
                (!value.is_empty()).then(|| value.to_vec());
        }
        p.metadata.resource_version = Some(rv);
        Ok(partial(p))
    }

    async fn get_csinode(&self, _name: &str) -> Result<Option<CSINode>, ApiFailure> {
        Ok(self.csinode.lock().unwrap().clone())
    }

    async fn create_csinode(&self, csinode: &CSINode) -> Result<CSINode, ApiFailure> {
        self.check_write("csinodes create".into())?;
        let mut c = csinode.clone();
        c.metadata.resource_version = Some(self.next_rv());
        *self.csinode.lock().unwrap() = Some(c.clone());
        Ok(c)
    }

    async fn patch_csinode_drivers(
        &self,
        _name: &str,
        _rv: Option<&str>,
        drivers: &[CSINodeDriver],
    ) -> Result<CSINode, ApiFailure> {
        self.check_write("csinodes".into())?;
        let rv = self.next_rv();
        self.edit_csinode(|c| {
            c.spec.drivers = drivers.to_vec();
            c.metadata.resource_version = Some(rv);
            Ok(())
        })
    }

    async fn patch_csinode_metadata(
        &self,
        _name: &str,
        patch: &serde_json::Value,
    ) -> Result<CSINode, ApiFailure> {
        if let Some(e) = self.fail_writes.lock().unwrap().clone() {
            return Err(e);
        }
        let rv = self.next_rv();
        self.edit_csinode(|c| {
            let held = c.metadata.annotations.get_or_insert_with(BTreeMap::new);
            for (k, v) in patch["metadata"]["annotations"].as_object().unwrap() {
                held.insert(k.clone(), v.as_str().unwrap().to_string());
            }
            c.metadata.resource_version = Some(rv);
            self.annotation_writes.lock().unwrap().push(patch.clone());
            Ok(())
        })
    }

    async fn patch_csinode_storage_health(
        &self,
        _name: &str,
        value: &[StorageHealth],
    ) -> Result<CSINode, ApiFailure> {
        self.check_write("csinodes/status".into())?;
        let drop = *self.drop_health_fields.lock().unwrap();
        self.edit_csinode(|c| {
            let registered: BTreeSet<&str> =
                c.spec.drivers.iter().map(|d| d.name.as_str()).collect();
            if value.iter().any(|e| !registered.contains(e.name.as_str())) {
                return Err(ApiFailure {
                    code: Some(422),
                    message: "driver not in spec.drivers".into(),
                });
            }
            if !drop {
                c.status.get_or_insert_with(Default::default).storage_health =
                    (!value.is_empty()).then(|| value.to_vec());
            }
            Ok(())
        })
    }

    async fn create_event(&self, event: &HealthEvent, count: i32) -> Result<(), ApiFailure> {
        self.events.lock().unwrap().push((event.clone(), count));
        Ok(())
    }
}

impl PodSource for FakeCluster {
    fn pods(&self) -> Vec<Arc<WatchedPod>> {
        self.pods
            .lock()
            .unwrap()
            .values()
            .map(|p| Arc::new(partial(p)))
            .collect()
    }

    fn pod(&self, ns: &str, name: &str) -> Option<Arc<WatchedPod>> {
        self.pods
            .lock()
            .unwrap()
            .get(&(ns.to_string(), name.to_string()))
            .map(|p| Arc::new(partial(p)))
    }
}

/// Kubelet directories given as a set of (pod UID, volume name) that were attempted.
#[derive(Default)]
pub struct FakeDirs {
    pub attempted: Mutex<BTreeSet<(String, String)>>,
}

impl FakeDirs {
    pub fn attempt(&self, uid: &str, volume: &str) {
        self.attempted
            .lock()
            .unwrap()
            .insert((uid.into(), volume.into()));
    }
}

impl KubeletDirs for FakeDirs {
    fn mount_attempt(&self, uid: &str, volume: &CsiVolume) -> MountAttempt {
        if self
            .attempted
            .lock()
            .unwrap()
            .contains(&(uid.to_string(), volume.name.clone()))
        {
            MountAttempt {
                publish_path: Some(PathBuf::from(format!(
                    "/kubelet/pods/{uid}/{}/mount",
                    volume.dir_name
                ))),
                staging_path: None,
            }
        } else {
            MountAttempt::default()
        }
    }
}

/// A node plugin whose answers the test sets.
pub struct FakeNode {
    pub volumes: Mutex<HashMap<String, Result<Vec<VolumeHealthEntry>, tonic::Status>>>,
    pub storage: Mutex<Result<Vec<StorageBackendHealth>, tonic::Status>>,
    pub volume_calls: Mutex<Vec<(tokio::time::Instant, v1::NodeGetVolumeHealthRequest)>>,
    pub storage_calls: AtomicUsize,
    pub delay: Duration,
    pub in_flight: AtomicUsize,
    pub max_in_flight: AtomicUsize,
}

impl FakeNode {
    pub fn new(delay: Duration) -> Arc<FakeNode> {
        Arc::new(FakeNode {
            volumes: Mutex::new(HashMap::new()),
            storage: Mutex::new(Ok(Vec::new())),
            volume_calls: Mutex::new(Vec::new()),
            storage_calls: AtomicUsize::new(0),
            delay,
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
        })
    }

    pub fn set_volume(&self, handle: &str, answer: Result<Vec<VolumeHealthEntry>, tonic::Status>) {
        self.volumes.lock().unwrap().insert(handle.into(), answer);
    }

    pub fn volume_call_count(&self) -> usize {
        self.volume_calls.lock().unwrap().len()
    }
}

#[async_trait]
impl NodeHealthClient for Arc<FakeNode> {
    async fn volume_health(
        &self,
        request: v1::NodeGetVolumeHealthRequest,
    ) -> Result<Vec<VolumeHealthEntry>, tonic::Status> {
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        self.volume_calls
            .lock()
            .unwrap()
            .push((tokio::time::Instant::now(), request.clone()));
        tokio::time::sleep(self.delay).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.volumes
            .lock()
            .unwrap()
            .get(&request.volume_id)
            .cloned()
            .unwrap_or(Ok(Vec::new()))
    }

    async fn storage_health(&self) -> Result<Vec<StorageBackendHealth>, tonic::Status> {
        self.storage_calls.fetch_add(1, Ordering::SeqCst);
        self.storage.lock().unwrap().clone()
    }
}

/// A driver over a fake node plugin.
pub fn driver(name: &str, node: &Arc<FakeNode>, volume: bool, storage: bool) -> Driver {
    Driver {
        name: name.into(),
        endpoint: format!("unix:///fake/{name}.sock"),
        node_id: "node-a".into(),
        max_volumes_per_node: 0,
        topology_keys: Vec::new(),
        volume_health: volume,
        storage_health: storage,
        legacy: false,
        coverage: volhealth_writer::coverage::NodeSources {
            own: volume.then_some(volhealth_writer::coverage::Source::HealthRpcs),
            node_faults: false,
        },
        client: Arc::new(node.clone()),
    }
}

/// A clock that follows tokio's (paused) time from a fixed start.
pub struct FakeClock {
    start: Timestamp,
    at: tokio::time::Instant,
}

impl FakeClock {
    pub fn new() -> Arc<FakeClock> {
        Arc::new(FakeClock {
            start: Timestamp::from_second(1_800_000_000).unwrap(),
            at: tokio::time::Instant::now(),
        })
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Timestamp {
        let secs = self.at.elapsed().as_secs() as i64;
        Timestamp::from_second(self.start.as_second() + secs).unwrap()
    }
}

/// A volume health entry.
pub fn entry(status: v1::VolumeHealthErrorType, reason: &str, message: &str) -> VolumeHealthEntry {
    VolumeHealthEntry {
        status: status as i32,
        reason: reason.into(),
        message: message.into(),
    }
}
