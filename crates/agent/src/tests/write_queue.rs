//! The agent's writes through the shared write queue, against fakes whose writes take time:
//! concurrent for different pods, never two at once for one pod, the most severe first, and a
//! report superseded while queued written once with the latest value.

use crate::error::Error;
use crate::tests::agent_world::{
    DRIVER, World, pod_writes, reporting, statuses, world, world_with,
};
use crate::tests::fakes::entry;
use std::sync::atomic::Ordering;
use std::time::Duration;
use volhealth_csi::v1::VolumeHealthErrorType as V;
use volhealth_csi::v1::volume_health::VolumeHealthEntry;
use volhealth_model::VolumeStatus;
use volhealth_writer::MAX_WRITES_IN_FLIGHT;

/// The model's severity rank of a CSI status (0 is most severe).
fn rank(status: V) -> usize {
    VolumeStatus::from_csi(status as i32).unwrap() as usize
}

const WRITE_DELAY: Duration = Duration::from_secs(2);

/// Pods `p0`..`p{n-1}`, each with one attempted volume `vol-{i}`, reporting `status(i)`.
fn pods(w: &World, n: usize, status: impl Fn(usize) -> V) {
    w.add_pods(0..n);
    for i in 0..n {
        w.node.set_volume(
            &format!("vol-{i}"),
            Ok(vec![entry(status(i), "Injected", "m")]),
        );
    }
}

/// The pods written, in the order their writes went out.
fn written_pods(w: &World) -> Vec<String> {
    w.cluster
        .writes()
        .iter()
        .filter_map(|w| w.strip_prefix("pods/status ns/").map(str::to_string))
        .collect()
}

fn status_of(w: &World, pod: &str) -> Vec<String> {
    w.cluster
        .pod_health("ns", pod)
        .iter()
        .flat_map(|e| e.health_conditions.clone().unwrap_or_default())
        .map(|c| c.status)
        .collect()
}

/// Pod `ns/web` reported Degraded ("Slow") by one cycle and `answer` by the next, with
/// both cycles' writes still queued.
async fn queued_then(answer: Result<Vec<VolumeHealthEntry>, tonic::Status>) -> World {
    let w = reporting(V::Degraded, "Slow");
    w.queue_cycle().await;
    w.node.set_volume("vol-1", answer);
    w.forget_probes();
    w.queue_cycle().await;
    w
}

#[tokio::test(start_paused = true)]
async fn a_correlated_failure_is_written_concurrently_and_most_severe_first() {
    let w = world_with(true, false, 4, Duration::ZERO);
    *w.cluster.write_delay.lock().unwrap() = WRITE_DELAY;
    let status = |i: usize| [V::Degraded, V::Inaccessible, V::DataLoss][i % 3];
    let n = 2 * MAX_WRITES_IN_FLIGHT;
    pods(&w, n, status);
    // The whole cycle's reports are queued before the loop starts, as when the API server falls
    // behind a node whose volumes all fail at once.
    w.queue_cycle().await;
    let start = tokio::time::Instant::now();
    w.settle().await.unwrap();
    assert_eq!(
        w.cluster.max_writing.load(Ordering::SeqCst),
        MAX_WRITES_IN_FLIGHT,
        "different pods are written concurrently, up to the shared bound"
    );
    assert!(
        start.elapsed() < WRITE_DELAY * u32::try_from(n).unwrap(),
        "not one after another: {:?}",
        start.elapsed()
    );
    let order: Vec<usize> = written_pods(&w)
        .iter()
        .map(|p| {
            let i: usize = p.trim_start_matches('p').parse().unwrap();
            rank(status(i))
        })
        .collect();
    assert_eq!(order.len(), n, "each pod written once: {order:?}");
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted, "Inaccessible, then DataLoss, then Degraded");
    for i in 0..n {
        let want = VolumeStatus::from_csi(status(i) as i32).unwrap().as_str();
        assert_eq!(status_of(&w, &format!("p{i}")), vec![want.to_string()]);
    }
}

#[tokio::test(start_paused = true)]
async fn never_two_writes_for_one_pod_at_once() {
    let w = world_with(true, false, 4, Duration::ZERO);
    *w.cluster.write_delay.lock().unwrap() = WRITE_DELAY;
    w.one_pod();
    w.report(V::Degraded, "Slow");
    let (pods, storage) = w.agent.write_loops();
    let stop = || tokio::time::sleep(WRITE_DELAY * 10);
    let cycles = async {
        w.queue_cycle().await;
        // The first write is in flight now; a newer report for the same pod arrives.
        tokio::time::sleep(WRITE_DELAY / 4).await;
        assert_eq!(pod_writes(&w), 1, "the first write went out at once");
        w.report(V::Inaccessible, "Gone");
        w.forget_probes();
        w.queue_cycle().await;
        tokio::time::sleep(WRITE_DELAY / 4).await;
        assert_eq!(
            pod_writes(&w),
            1,
            "the newer state waits for the write in flight"
        );
    };
    futures::join!(pods.run(stop()), storage.run(stop()), cycles);
    assert_eq!(w.cluster.max_writing_one_pod.load(Ordering::SeqCst), 1);
    assert_eq!(pod_writes(&w), 2, "{:?}", w.cluster.writes());
    assert_eq!(statuses(&w), vec![("Inaccessible".into(), "Gone".into())]);
}

#[tokio::test(start_paused = true)]
async fn a_report_superseded_while_queued_is_written_once_with_the_latest_value() {
    let w = queued_then(Ok(vec![entry(V::DataLoss, "Corrupt", "m")])).await;
    assert_eq!(pod_writes(&w), 0, "both still queued");
    w.settle().await.unwrap();
    assert_eq!(pod_writes(&w), 1, "{:?}", w.cluster.writes());
    assert_eq!(statuses(&w), vec![("DataLoss".into(), "Corrupt".into())]);
}

#[tokio::test(start_paused = true)]
async fn a_recovery_cancels_a_write_still_queued_and_costs_no_write() {
    let w = queued_then(Ok(vec![])).await;
    w.settle().await.unwrap();
    assert_eq!(pod_writes(&w), 0, "{:?}", w.cluster.writes());
    assert!(w.cluster.pod_health("ns", "web").is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_queued_report_stands_while_a_later_probe_fails() {
    let w = queued_then(Err(tonic::Status::unavailable("driver down"))).await;
    w.settle().await.unwrap();
    assert_eq!(statuses(&w), vec![("Degraded".into(), "Slow".into())]);
}

#[tokio::test(start_paused = true)]
async fn a_forbidden_write_stops_the_running_agent() {
    let w = world();
    w.one_pod();
    w.cluster.set_csinode(&[DRIVER], vec![]);
    w.report(V::Degraded, "Slow");
    w.fail_writes(403, "forbidden");
    let err = tokio::select! {
        r = w.agent.run() => r.unwrap_err(),
        () = tokio::time::sleep(Duration::from_secs(60)) => panic!("the agent kept running"),
    };
    assert!(matches!(err, Error::NodeIdentity { .. }), "{err}");
    assert!(
        err.to_string().contains("patching pods/web/status"),
        "{err}"
    );
}
