//! The agent over fakes, as its unit tests share it: one driver on node `node-a`, cycles run
//! by hand in paused tokio time, and the write loops run until what a cycle queued is written.

use crate::agent::{Agent, AgentDeps};
use crate::cluster::ApiFailure;
use crate::drivers::DriverSet;
use crate::error::Error;
use crate::metrics::Metrics;
use crate::tests::fakes::{FakeClock, FakeCluster, FakeDirs, FakeNode, driver, entry};
use std::sync::Arc;
use std::time::Duration;
use volhealth_csi::v1;
use volhealth_csi::v1::VolumeHealthErrorType;
use volhealth_csi::v1::node_get_storage_health_response::StorageBackendHealth;
use volhealth_writer::intervals::{DriverIntervals, NODE_ANNOTATION};

/// The one driver's name.
pub(crate) const DRIVER: &str = "d.example.com";
/// Its probe interval.
pub(crate) const INTERVAL: Duration = Duration::from_secs(10);

/// The fakes and the agent over them.
pub(crate) struct World {
    pub(crate) cluster: Arc<FakeCluster>,
    pub(crate) dirs: Arc<FakeDirs>,
    pub(crate) node: Arc<FakeNode>,
    pub(crate) drivers: DriverSet,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) intervals: Arc<DriverIntervals>,
    pub(crate) agent: Agent,
}

/// A world whose driver has the volume and storage capabilities asked for, probing at most
/// `concurrency` at once, its calls taking `delay`.
pub(crate) fn world_with(
    volume: bool,
    storage: bool,
    concurrency: usize,
    delay: Duration,
) -> World {
    let cluster = FakeCluster::new();
    let dirs = Arc::new(FakeDirs::default());
    let node = FakeNode::new(delay);
    let drivers = DriverSet::new();
    drivers.insert(driver(DRIVER, &node, volume, storage));
    let metrics = Arc::new(Metrics::default());
    let intervals = Arc::new(DriverIntervals::new(NODE_ANNOTATION, INTERVAL));
    let agent = Agent::new(AgentDeps {
        node_name: "node-a".into(),
        node_uid: Some("node-uid".into()),
        cluster: cluster.clone(),
        pods: cluster.clone(),
        dirs: dirs.clone(),
        drivers: drivers.clone(),
        clock: FakeClock::new(),
        metrics: metrics.clone(),
        intervals: intervals.clone(),
        timeout: Duration::from_secs(2),
        max_concurrent_probes: concurrency,
    });
    World {
        cluster,
        dirs,
        node,
        drivers,
        metrics,
        intervals,
        agent,
    }
}

/// A world with both capabilities and instant calls.
pub(crate) fn world() -> World {
    world_with(true, true, 4, Duration::ZERO)
}

/// A world of [`world`] whose pod `ns/web` (see [`World::one_pod`]) the driver reports
/// `status` for, with `reason`.
pub(crate) fn reporting(status: VolumeHealthErrorType, reason: &str) -> World {
    let w = world();
    w.one_pod();
    w.report(status, reason);
    w
}

impl World {
    /// One cycle, then the writes it queued, then the interval passes.
    pub(crate) async fn cycle(&self) -> Result<(), Error> {
        let r = self.agent.run_cycle(tokio::time::Instant::now()).await;
        let written = self.settle().await;
        tokio::time::advance(INTERVAL).await;
        r.and(written)
    }

    /// Runs the agent's write loops until nothing is queued or in flight, then answers the
    /// identity error if a write was forbidden (as `Agent::run` would stop with it). Idleness is
    /// looked at only after a pause, never at once: a loop marks an item it takes from the queue
    /// in flight within the same poll (a fresh loop's rate-limit burst covers every test's
    /// writes), so a look after a pause never falls between the two.
    pub(crate) async fn settle(&self) -> Result<(), Error> {
        let (pods, storage) = self.agent.write_loops();
        let idle = || async {
            loop {
                tokio::time::sleep(Duration::from_millis(1)).await;
                if self.agent.pod_offers.is_idle() && self.agent.storage_offers.is_idle() {
                    break;
                }
            }
        };
        futures::join!(pods.run(idle()), storage.run(idle()));
        match self.agent.forbidden_error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// `n` cycles, each as [`World::cycle`], none failing.
    pub(crate) async fn cycles(&self, n: usize) {
        for _ in 0..n {
            self.cycle().await.unwrap();
        }
    }

    /// One cycle whose writes stay queued (the write loops are not run).
    pub(crate) async fn queue_cycle(&self) {
        self.agent
            .run_cycle(tokio::time::Instant::now())
            .await
            .unwrap();
    }

    /// The driver's answer for `vol-1` from now on: one entry of `status` and `reason`.
    pub(crate) fn report(&self, status: VolumeHealthErrorType, reason: &str) {
        self.node
            .set_volume("vol-1", Ok(vec![entry(status, reason, "m")]));
    }

    /// Every write from now on fails with HTTP `code`.
    pub(crate) fn fail_writes(&self, code: u16, message: &str) {
        *self.cluster.fail_writes.lock().unwrap() = Some(ApiFailure {
            code: Some(code),
            message: message.into(),
        });
    }

    /// Pods `p<i>`, each with volume `data` of PV volume `vol-<i>`, attempted.
    pub(crate) fn add_pods(&self, range: std::ops::Range<usize>) {
        for i in range {
            let uid = format!("uid-{i}");
            self.cluster.add_pod_with_pv(
                "ns",
                &format!("p{i}"),
                &uid,
                "data",
                DRIVER,
                &format!("vol-{i}"),
            );
            self.dirs.attempt(&uid, "data");
        }
    }

    /// Makes every driver due again at once (a cycle run before its interval has passed).
    pub(crate) fn forget_probes(&self) {
        self.agent.state().last_probed.clear();
    }

    /// Pod `ns/web` with volume `data` of PV volume `vol-1`, attempted.
    pub(crate) fn one_pod(&self) {
        self.cluster
            .add_pod_with_pv("ns", "web", "uid-1", "data", DRIVER, "vol-1");
        self.dirs.attempt("uid-1", "data");
    }
}

/// How many pod status writes went out.
pub(crate) fn pod_writes(w: &World) -> usize {
    w.cluster
        .writes()
        .iter()
        .filter(|w| w.starts_with("pods/status"))
        .count()
}

/// The (status, reason) pairs stored on `ns/web`.
pub(crate) fn statuses(w: &World) -> Vec<(String, String)> {
    w.cluster
        .pod_health("ns", "web")
        .iter()
        .flat_map(|e| e.health_conditions.clone().unwrap_or_default())
        .map(|c| (c.status, c.reason))
        .collect()
}

/// A storage backend answer, scoped to RWO filesystems when `rwo_fs`.
pub(crate) fn backend(
    status: v1::StorageHealthErrorType,
    reason: &str,
    rwo_fs: bool,
) -> StorageBackendHealth {
    let volume_capability = rwo_fs.then(|| v1::VolumeCapability {
        access_mode: Some(v1::volume_capability::AccessMode {
            mode: v1::volume_capability::access_mode::Mode::SingleNodeWriter as i32,
        }),
        access_type: Some(v1::volume_capability::AccessType::Mount(Default::default())),
    });
    StorageBackendHealth {
        status: status as i32,
        reason: reason.into(),
        message: "m".into(),
        volume_capability,
    }
}

/// The Events waiting to be sent: (kind, reason, object name); takes them.
pub(crate) fn event_reasons(w: &World) -> Vec<(String, &'static str, String)> {
    let mut out = Vec::new();
    while let Some(o) = w.agent.events.pop() {
        let (e, _) = match o {
            volhealth_writer::events::Outgoing::One(e, n)
            | volhealth_writer::events::Outgoing::Summary(e, n) => (e, n),
        };
        out.push((e.object.kind.to_string(), e.reason, e.object.name.clone()));
    }
    out
}
