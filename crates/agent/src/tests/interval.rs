//! When the agent probes: bounded concurrency, pods spread over the interval, and each driver at
//! its own interval.

use crate::tests::agent_world::{DRIVER, INTERVAL, world_with};
use crate::tests::fakes::{FakeNode, driver};
use std::sync::atomic::Ordering;
use std::time::Duration;
use volhealth_writer::intervals::NODE_ANNOTATION;

#[tokio::test(start_paused = true)]
async fn probes_are_bounded_and_spread_over_the_interval() {
    let w = world_with(true, false, 3, Duration::from_millis(1500));
    w.add_pods(0..20);
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

#[tokio::test(start_paused = true)]
async fn a_late_wake_up_keeps_the_cadence_and_a_late_start_gets_a_whole_interval() {
    let w = world_with(false, true, 4, Duration::ZERO);
    let first = tokio::time::Instant::now();
    let probed = || w.agent.state().last_probed.get(DRIVER).copied();
    w.agent.run_cycle(first).await.unwrap();
    assert_eq!(probed(), Some(first));
    // Nine cycles, each woken 2 ms after the driver was due: still due on the first's cadence,
    // not 18 ms behind it.
    for i in 1..10u32 {
        let due = first + INTERVAL * i;
        tokio::time::advance(due + Duration::from_millis(2) - tokio::time::Instant::now()).await;
        w.queue_cycle().await;
        assert_eq!(probed(), Some(due), "cycle {i}");
    }
    assert_eq!(w.node.storage_calls.load(Ordering::SeqCst), 10);
    // Started a second late (more than a hundredth of the interval): the next interval counts
    // from when the probes started, so they are not due again sooner than a whole interval.
    let late = first + INTERVAL * 10 + Duration::from_secs(1);
    tokio::time::advance(late - tokio::time::Instant::now()).await;
    w.agent.run_cycle(late).await.unwrap();
    assert_eq!(probed(), Some(late));
    tokio::time::advance(INTERVAL - Duration::from_millis(1)).await;
    w.queue_cycle().await;
    assert_eq!(
        w.node.storage_calls.load(Ordering::SeqCst),
        11,
        "not due before a whole interval"
    );
}

#[tokio::test(start_paused = true)]
async fn each_cycle_is_timed_per_driver_and_an_overrun_is_counted() {
    // One probe at a time, each taking 1.5 s, spread over nine tenths of the 10 s interval.
    let w = world_with(true, false, 1, Duration::from_millis(1500));
    let metric = |name: &str| -> String {
        let series = format!(r#"{name}{{driver_name="{DRIVER}",mode="node"}}"#);
        w.metrics
            .families
            .encode()
            .lines()
            .find_map(|l| {
                l.strip_prefix(series.as_str())
                    .map(|v| v.trim().to_string())
            })
            .unwrap_or_else(|| "absent".to_string())
    };
    let count = "csi_volume_health_cycle_duration_seconds_count";
    let sum = "csi_volume_health_cycle_duration_seconds_sum";
    let overruns = "csi_volume_health_cycle_overruns_total";

    // Three pods: probes due at 0, 3 and 6 s, the last answered at 7.5 s, within the interval.
    w.add_pods(0..3);
    let first = tokio::time::Instant::now();
    w.agent.run_cycle(first).await.unwrap();
    assert_eq!(metric(count), "1");
    assert_eq!(metric(sum), "7.5");
    assert_eq!(metric(overruns), "absent", "no cycle overran");
    // A cycle with no driver due probes nothing and times nothing.
    w.queue_cycle().await;
    assert_eq!(metric(count), "1");

    // Eight pods: one probe at a time keeps the permit busy for 12 s, past the next due time.
    w.add_pods(3..8);
    tokio::time::advance(first + INTERVAL - tokio::time::Instant::now()).await;
    w.queue_cycle().await;
    assert_eq!(w.node.volume_call_count(), 3 + 8);
    assert_eq!(metric(count), "2");
    assert_eq!(metric(sum), "19.5");
    assert_eq!(
        metric(overruns),
        "1",
        "the second cycle ended at 22 s, after 20 s"
    );
}
