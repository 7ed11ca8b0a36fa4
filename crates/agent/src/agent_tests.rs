//! Behaviour of the probe loop against fakes, in paused tokio time.

use crate::agent::{Agent, AgentDeps};
use crate::cluster::ApiFailure;
use crate::drivers::DriverSet;
use crate::error::Error;
use crate::fakes::{FakeClock, FakeCluster, FakeDirs, FakeNode, driver, entry};
use crate::metrics::Metrics;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use volhealth_csi::v1;
use volhealth_csi::v1::VolumeHealthErrorType as V;
use volhealth_csi::v1::node_get_storage_health_response::StorageBackendHealth;
use volhealth_writer::intervals::{DriverIntervals, NODE_ANNOTATION};

const DRIVER: &str = "d.example.com";
const INTERVAL: Duration = Duration::from_secs(10);

struct World {
    cluster: Arc<FakeCluster>,
    dirs: Arc<FakeDirs>,
    node: Arc<FakeNode>,
    drivers: DriverSet,
    metrics: Arc<Metrics>,
    intervals: Arc<DriverIntervals>,
    agent: Agent,
}

fn world_with(volume: bool, storage: bool, concurrency: usize, delay: Duration) -> World {
    let cluster = FakeCluster::new();
    let dirs = Arc::new(FakeDirs::default());
    let node = FakeNode::new(delay);
    let drivers = DriverSet::new();
    drivers.insert(driver(DRIVER, &node, volume, storage));
    let metrics = Arc::new(Metrics::new());
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

fn world() -> World {
    world_with(true, true, 4, Duration::ZERO)
}

impl World {
    async fn cycle(&self) -> Result<(), Error> {
        let r = self.agent.run_cycle(tokio::time::Instant::now()).await;
        tokio::time::advance(INTERVAL).await;
        r
    }

    fn one_pod(&self) {
        self.cluster
            .add_pod_with_pv("ns", "web", "uid-1", "data", DRIVER, "vol-1");
        self.dirs.attempt("uid-1", "data");
    }
}

fn pod_writes(w: &World) -> usize {
    w.cluster
        .writes()
        .iter()
        .filter(|w| w.starts_with("pods/status"))
        .count()
}

fn statuses(w: &World) -> Vec<(String, String)> {
    w.cluster
        .pod_health("ns", "web")
        .iter()
        .flat_map(|e| e.health_conditions.clone().unwrap_or_default())
        .map(|c| (c.status, c.reason))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn each_volume_status_appears_and_clears() {
    let w = world();
    w.one_pod();
    for (status, name) in [
        (V::Inaccessible, "Inaccessible"),
        (V::DataLoss, "DataLoss"),
        (V::Degraded, "Degraded"),
    ] {
        w.node
            .set_volume("vol-1", Ok(vec![entry(status, "Injected", "m")]));
        w.cycle().await.unwrap();
        assert_eq!(
            statuses(&w),
            vec![(name.to_string(), "Injected".to_string())]
        );
        let health = w.cluster.pod_health("ns", "web");
        assert_eq!(health[0].name, "data", "keyed by the pod.spec.volumes name");
        assert!(
            w.metrics
                .encode()
                .contains(&format!(r#"status="{name}",reason="Injected"}} 1"#))
        );
        w.node.set_volume("vol-1", Ok(vec![]));
        w.cycle().await.unwrap();
        assert!(
            w.cluster.pod_health("ns", "web").is_empty(),
            "an empty answer clears at once"
        );
        assert!(!w.metrics.encode().contains("reason=\"Injected\""));
    }
    assert_eq!(
        pod_writes(&w),
        6,
        "one write per change: {:?}",
        w.cluster.writes()
    );
}

#[tokio::test(start_paused = true)]
async fn steady_state_and_restart_write_nothing() {
    let w = world();
    w.one_pod();
    w.node
        .set_volume("vol-1", Ok(vec![entry(V::Degraded, "Slow", "m")]));
    w.cycle().await.unwrap();
    for _ in 0..5 {
        w.cycle().await.unwrap();
    }
    assert_eq!(pod_writes(&w), 1);
    assert_eq!(w.node.volume_call_count(), 6);

    // A new agent over the same stored state writes nothing either.
    let stored = w.cluster.pod_health("ns", "web");
    let w2 = world();
    w2.one_pod();
    w2.cluster.set_pod_health("ns", "web", stored.clone());
    w2.node
        .set_volume("vol-1", Ok(vec![entry(V::Degraded, "Slow", "m")]));
    w2.cycle().await.unwrap();
    assert_eq!(pod_writes(&w2), 0, "{:?}", w2.cluster.writes());
    assert_eq!(w2.cluster.pod_health("ns", "web"), stored);
}

#[tokio::test(start_paused = true)]
async fn failed_rpc_keeps_what_is_stored() {
    let w = world();
    w.one_pod();
    w.node
        .set_volume("vol-1", Ok(vec![entry(V::DataLoss, "Corrupt", "m")]));
    w.cycle().await.unwrap();
    w.node
        .set_volume("vol-1", Err(tonic::Status::unavailable("driver down")));
    for _ in 0..3 {
        w.cycle().await.unwrap();
    }
    assert_eq!(statuses(&w), vec![("DataLoss".into(), "Corrupt".into())]);
    assert_eq!(pod_writes(&w), 1);
    assert!(
        w.metrics
            .encode()
            .contains(r#"method="NodeGetVolumeHealth",result="error"} 3"#)
    );
}

#[tokio::test(start_paused = true)]
async fn never_attempted_volumes_are_not_probed() {
    let w = world();
    w.cluster
        .add_pod_with_pv("ns", "web", "uid-1", "data", DRIVER, "vol-1");
    w.node
        .set_volume("vol-1", Ok(vec![entry(V::Degraded, "Slow", "m")]));
    w.cycle().await.unwrap();
    assert_eq!(w.node.volume_call_count(), 0);
    assert!(w.cluster.pod_health("ns", "web").is_empty());
    w.dirs.attempt("uid-1", "data");
    w.cycle().await.unwrap();
    assert_eq!(w.node.volume_call_count(), 1);
    let (_, req) = w.node.volume_calls.lock().unwrap()[0].clone();
    assert_eq!(req.volume_id, "vol-1");
    assert_eq!(
        req.volume_publish_path,
        "/kubelet/pods/uid-1/pv-vol-1/mount"
    );
}

#[tokio::test(start_paused = true)]
async fn drivers_without_the_capabilities_are_never_called() {
    let w = world_with(false, false, 4, Duration::ZERO);
    w.one_pod();
    w.cluster.set_csinode(&[DRIVER], vec![]);
    for _ in 0..3 {
        w.cycle().await.unwrap();
    }
    assert_eq!(w.node.volume_call_count(), 0);
    assert_eq!(w.node.storage_calls.load(Ordering::SeqCst), 0);
    assert!(w.cluster.writes().is_empty());
}

#[tokio::test(start_paused = true)]
async fn unknown_drivers_are_not_probed_and_keep_the_stored_value() {
    let w = world();
    w.cluster
        .add_pod_with_pv("ns", "web", "uid-1", "data", "other.example.com", "vol-9");
    w.dirs.attempt("uid-1", "data");
    w.cycle().await.unwrap();
    assert_eq!(w.node.volume_call_count(), 0);
    assert!(w.cluster.writes().iter().all(|w| !w.starts_with("pods/")));
}

fn backend(status: v1::StorageHealthErrorType, reason: &str, rwo_fs: bool) -> StorageBackendHealth {
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

#[tokio::test(start_paused = true)]
async fn storage_health_appears_with_its_scope_and_clears() {
    use v1::StorageHealthErrorType as S;
    let w = world();
    // No CSINode yet: the agent creates it with the driver before writing status.
    *w.node.storage.lock().unwrap() = Ok(vec![backend(S::StorageDegraded, "SlowDisks", true)]);
    w.cycle().await.unwrap();
    let csinode = w.cluster.csinode.lock().unwrap().clone().unwrap();
    assert_eq!(csinode.spec.drivers[0].name, DRIVER);
    assert_eq!(
        csinode.metadata.owner_references.unwrap()[0].uid,
        "node-uid"
    );
    let health = w.cluster.storage_health();
    assert_eq!(health.len(), 1);
    let cond = &health[0].health_conditions.as_ref().unwrap()[0];
    assert_eq!(health[0].name, DRIVER);
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("StorageDegraded", "SlowDisks")
    );
    assert_eq!(cond.access_mode.as_deref(), Some("ReadWriteOnce"));
    assert_eq!(cond.volume_mode.as_deref(), Some("Filesystem"));
    assert!(w.metrics.encode().contains(
        r#"csi_node_storage_health_status{driver_name="d.example.com",status="StorageDegraded",reason="SlowDisks"} 1"#
    ));

    *w.node.storage.lock().unwrap() = Ok(vec![backend(S::StorageUnreachable, "Partition", false)]);
    w.cycle().await.unwrap();
    let text = w.metrics.encode();
    assert!(
        !text.contains("SlowDisks") && text.contains("reason=\"Partition\"} 1"),
        "{text}"
    );

    *w.node.storage.lock().unwrap() = Err(tonic::Status::unavailable("down"));
    w.cycle().await.unwrap();
    assert_eq!(
        w.cluster.storage_health()[0]
            .health_conditions
            .as_ref()
            .unwrap()[0]
            .reason,
        "Partition"
    );

    *w.node.storage.lock().unwrap() = Ok(vec![]);
    w.cycle().await.unwrap();
    assert!(w.cluster.storage_health().is_empty());
    assert!(!w.metrics.encode().contains("reason=\"Partition\""));
    let writes = w.cluster.writes();
    assert_eq!(
        writes,
        vec![
            "csinodes create",
            "csinodes/status",
            "csinodes/status",
            "csinodes/status"
        ]
    );
    w.cycle().await.unwrap();
    assert_eq!(w.cluster.writes().len(), 4, "steady state writes nothing");
}

#[tokio::test(start_paused = true)]
async fn missing_driver_is_added_to_spec_drivers_before_status() {
    use v1::StorageHealthErrorType as S;
    let w = world();
    w.cluster.set_csinode(&["someone.else"], vec![]);
    *w.node.storage.lock().unwrap() = Ok(vec![backend(S::StorageUnreachable, "Partition", false)]);
    w.cycle().await.unwrap();
    assert_eq!(w.cluster.writes(), vec!["csinodes", "csinodes/status"]);
    let names: Vec<String> = w
        .cluster
        .csinode
        .lock()
        .unwrap()
        .as_ref()
        .unwrap()
        .spec
        .drivers
        .iter()
        .map(|d| d.name.clone())
        .collect();
    assert_eq!(names, vec!["someone.else".to_string(), DRIVER.to_string()]);
}

#[tokio::test(start_paused = true)]
async fn forbidden_write_stops_the_agent_with_the_identity_error() {
    let w = world();
    w.one_pod();
    w.node
        .set_volume("vol-1", Ok(vec![entry(V::Degraded, "Slow", "m")]));
    *w.cluster.fail_writes.lock().unwrap() = Some(ApiFailure {
        code: Some(403),
        message: "forbidden".into(),
    });
    let err = w.cycle().await.unwrap_err();
    assert!(matches!(err, Error::NodeIdentity { .. }), "{err}");
    assert!(err.to_string().contains("does not match"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn refused_writes_are_retried_slowly() {
    let w = world_with(true, false, 4, Duration::ZERO);
    w.one_pod();
    w.node
        .set_volume("vol-1", Ok(vec![entry(V::Degraded, "Slow", "m")]));
    *w.cluster.fail_writes.lock().unwrap() = Some(ApiFailure {
        code: Some(422),
        message: "invalid".into(),
    });
    for _ in 0..20 {
        w.cycle().await.unwrap();
    }
    let n = pod_writes(&w);
    assert!(
        (2..=5).contains(&n),
        "20 cycles, refused writes backed off to {n} attempts"
    );
    assert!(w.metrics.encode().contains(
        r#"csi_volume_health_status_writes_total{resource="pods/status",result="rejected"}"#
    ));
    // Accepted again: written at the next allowed attempt, then quiet.
    *w.cluster.fail_writes.lock().unwrap() = None;
    for _ in 0..40 {
        w.cycle().await.unwrap();
    }
    assert_eq!(statuses(&w), vec![("Degraded".into(), "Slow".into())]);
}

#[tokio::test(start_paused = true)]
async fn writes_dropped_by_a_gated_api_server_back_off() {
    let w = world_with(true, false, 4, Duration::ZERO);
    w.one_pod();
    w.node
        .set_volume("vol-1", Ok(vec![entry(V::Degraded, "Slow", "m")]));
    *w.cluster.drop_health_fields.lock().unwrap() = true;
    for _ in 0..20 {
        w.cycle().await.unwrap();
    }
    let n = pod_writes(&w);
    assert!(
        (2..=5).contains(&n),
        "20 cycles, dropped writes backed off to {n} attempts"
    );
    assert!(w.metrics.encode().contains(r#"result="dropped"}"#));
}

#[tokio::test(start_paused = true)]
async fn probes_are_bounded_and_spread_over_the_interval() {
    let w = world_with(true, false, 3, Duration::from_millis(1500));
    for i in 0..20 {
        let uid = format!("uid-{i}");
        w.cluster.add_pod_with_pv(
            "ns",
            &format!("p{i}"),
            &uid,
            "data",
            DRIVER,
            &format!("vol-{i}"),
        );
        w.dirs.attempt(&uid, "data");
    }
    let start = tokio::time::Instant::now();
    w.agent.run_cycle(start).await.unwrap();
    assert_eq!(w.node.volume_call_count(), 20);
    assert!(w.node.max_in_flight.load(Ordering::SeqCst) <= 3);
    let calls = w.node.volume_calls.lock().unwrap().clone();
    let first = calls.iter().map(|c| c.0).min().unwrap();
    let last = calls.iter().map(|c| c.0).max().unwrap();
    assert_eq!(first, start, "the first pod is probed at once");
    assert!(
        last - first >= INTERVAL / 2,
        "the probes are spread: {:?}",
        last - first
    );
}

#[tokio::test(start_paused = true)]
async fn gone_pods_lose_their_metric_series() {
    let w = world();
    w.one_pod();
    w.node
        .set_volume("vol-1", Ok(vec![entry(V::Degraded, "Slow", "m")]));
    w.cycle().await.unwrap();
    assert!(
        w.metrics
            .encode()
            .contains(r#"pod="web",volume="data",status="Degraded""#)
    );
    w.cluster.pods.lock().unwrap().clear();
    w.cycle().await.unwrap();
    assert!(!w.metrics.encode().contains(r#"pod="web""#));
    let _ = &w.drivers;
}

#[tokio::test(start_paused = true)]
async fn inline_csi_volumes_are_probed_with_the_kubelet_handle() {
    use k8s_openapi::api::core::v1::{CSIVolumeSource, Volume};
    let w = world();
    w.one_pod();
    {
        let mut pods = w.cluster.pods.lock().unwrap();
        let pod = pods
            .get_mut(&("ns".to_string(), "web".to_string()))
            .unwrap();
        let volumes = pod.spec.as_mut().unwrap().volumes.as_mut().unwrap();
        volumes.push(Volume {
            name: "scratch".into(),
            csi: Some(CSIVolumeSource {
                driver: DRIVER.into(),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    w.dirs.attempt("uid-1", "scratch");
    let handle = crate::pod_volumes::inline_volume_handle("uid-1", "scratch");
    w.node.set_volume(
        &handle,
        Ok(vec![entry(V::Inaccessible, "EphemeralGone", "m")]),
    );
    w.cycle().await.unwrap();
    let health = w.cluster.pod_health("ns", "web");
    assert_eq!(health.len(), 1);
    assert_eq!(health[0].name, "scratch");
    let asked: Vec<String> = w
        .node
        .volume_calls
        .lock()
        .unwrap()
        .iter()
        .map(|c| c.1.volume_id.clone())
        .collect();
    assert!(
        asked.contains(&handle) && asked.contains(&"vol-1".to_string()),
        "{asked:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lagging_watch_does_not_cause_a_second_write() {
    let w = world();
    w.one_pod();
    w.node
        .set_volume("vol-1", Ok(vec![entry(V::Degraded, "Slow", "m")]));
    // The pod source keeps serving the copy from before the write, as a watch that has not caught up would.
    let before = w.cluster.pods.lock().unwrap().clone();
    w.cycle().await.unwrap();
    assert_eq!(pod_writes(&w), 1);
    let after = std::mem::replace(&mut *w.cluster.pods.lock().unwrap(), before);
    w.cycle().await.unwrap();
    assert_eq!(
        pod_writes(&w),
        1,
        "the write's own result stands in for the lagging copy"
    );
    *w.cluster.pods.lock().unwrap() = after;
    w.cycle().await.unwrap();
    assert_eq!(pod_writes(&w), 1);
}

fn event_reasons(w: &World) -> Vec<(String, &'static str, String)> {
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

#[tokio::test(start_paused = true)]
async fn transitions_raise_events_on_the_pod_and_the_csinode() {
    use v1::StorageHealthErrorType as S;
    use volhealth_writer::events::{
        REASON_STORAGE_DEGRADED, REASON_STORAGE_RECOVERED, REASON_UNKNOWN, REASON_VOLUME_DEGRADED,
        REASON_VOLUME_RECOVERED,
    };
    let w = world();
    w.one_pod();
    w.cluster.set_csinode(&[DRIVER], vec![]);
    w.node
        .set_volume("vol-1", Ok(vec![entry(V::Inaccessible, "Gone", "m")]));
    *w.node.storage.lock().unwrap() = Ok(vec![backend(S::StorageUnreachable, "Partition", false)]);
    w.cycle().await.unwrap();
    let mut got = event_reasons(&w);
    got.sort();
    assert_eq!(
        got,
        vec![
            ("CSINode".into(), REASON_STORAGE_DEGRADED, "node-a".into()),
            ("Pod".into(), REASON_VOLUME_DEGRADED, "web".into()),
        ]
    );
    // Unchanged: no Event. Unknown value: a Warning, once.
    w.node.set_volume(
        "vol-1",
        Ok(vec![
            entry(V::Inaccessible, "Gone", "m"),
            volhealth_csi::v1::volume_health::VolumeHealthEntry {
                status: 42,
                reason: "Future".into(),
                message: String::new(),
            },
        ]),
    );
    w.cycle().await.unwrap();
    w.cycle().await.unwrap();
    assert_eq!(
        event_reasons(&w),
        vec![("Pod".into(), REASON_UNKNOWN, "web".into())]
    );
    w.node.set_volume("vol-1", Ok(vec![]));
    *w.node.storage.lock().unwrap() = Ok(vec![]);
    w.cycle().await.unwrap();
    let mut got = event_reasons(&w);
    got.sort();
    assert_eq!(
        got,
        vec![
            ("CSINode".into(), REASON_STORAGE_RECOVERED, "node-a".into()),
            ("Pod".into(), REASON_VOLUME_RECOVERED, "web".into()),
        ]
    );
    assert!(
        w.metrics
            .encode()
            .contains(r#"csi_volume_health_unknown_condition_total{status="42"} 1"#),
        "counted once per transition, not once per cycle"
    );
}

#[tokio::test(start_paused = true)]
async fn each_driver_is_probed_at_its_own_interval_which_changes_without_a_restart() {
    let w = world_with(false, true, 4, Duration::ZERO);
    let other = FakeNode::new(Duration::ZERO);
    w.drivers
        .insert(driver("b.example.com", &other, false, true));
    let annotation =
        |v: &str| std::collections::BTreeMap::from([(NODE_ANNOTATION.to_string(), v.to_string())]);
    w.intervals.apply("b.example.com", Some(&annotation("30s")));
    let calls = |n: &FakeNode| n.storage_calls.load(Ordering::SeqCst);
    // Windows end between probes, so no probe and window end fall on the same instant.
    let run_for = async |millis: u64| {
        tokio::select! {
            r = w.agent.run() => panic!("the loop ended: {r:?}"),
            () = tokio::time::sleep(Duration::from_millis(millis)) => {}
        }
    };

    // 0..65.5 s: the flag's 10 s for one driver, the annotation's 30 s for the other.
    run_for(65_500).await;
    assert_eq!(calls(&w.node), 7, "at 0, 10, ..., 60");
    assert_eq!(calls(&other), 3, "at 0, 30, 60");

    // Shorter now, without a restart: 5 s after its last probe has passed, so at once (65.5),
    // then every 5 s (70.5, 75.5, 80.5).
    w.intervals.apply("b.example.com", Some(&annotation("5s")));
    run_for(18_000).await;
    assert_eq!(calls(&w.node), 9, "still every 10 s: 70, 80");
    assert_eq!(calls(&other), 7, "65.5, 70.5, 75.5, 80.5");

    // Removed at 83.5: the flag's interval again, from its last probe (90.5, 100.5, 110.5).
    w.intervals.apply("b.example.com", None);
    run_for(30_000).await;
    assert_eq!(calls(&w.node), 12, "90, 100, 110");
    assert_eq!(calls(&other), 10, "90.5, 100.5, 110.5");
}
