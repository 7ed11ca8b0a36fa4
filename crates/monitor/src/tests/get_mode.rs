//! Get-mode cycles against the fakes: spreading, no duplicate probes, the worker limit, clears and errors.

use crate::tests::cycle_fakes::*;

#[tokio::test(start_paused = true)]
async fn get_mode_spreads_the_calls_over_the_interval() {
    let mut r = rig(Mode::Get, &["vol-a", "vol-b", "vol-c", "vol-d"]);
    r.cycle().await;
    let calls = r.driver.with(|s| s.get_calls.clone());
    let at: Vec<u64> = calls.iter().map(|(_, t)| t.as_secs()).collect();
    // Over the first nine tenths of the 60 s interval: 13.5 s apart.
    assert_eq!(at, vec![0, 13, 27, 40]);
    let mut vols: Vec<String> = calls.into_iter().map(|(v, _)| v).collect();
    vols.sort();
    assert_eq!(vols, vec!["vol-a", "vol-b", "vol-c", "vol-d"]);
}

#[tokio::test(start_paused = true)]
async fn a_sweep_ends_within_its_interval_when_the_calls_are_closer_than_one_answer() {
    // 1,200 volumes in a 60 s interval with 10 workers, each answer taking 0.2 s: the calls are
    // 45 ms apart, closer than one answer, and the workers keep up (10 per 0.2 s = 50/s). Spread
    // over the whole interval, the last call would start at 59.95 s and end after it.
    let (mut r, _) = get_rig(1200, 10, Duration::from_millis(200));
    let start = Instant::now();
    r.cycle().await;
    assert_eq!(r.driver.gets().len(), 1200, "every volume once");
    assert!(
        start.elapsed() <= INTERVAL,
        "the sweep took {:?}, longer than its {INTERVAL:?} interval",
        start.elapsed()
    );
}

#[tokio::test(start_paused = true)]
async fn get_mode_probes_each_volume_once_per_cycle_with_few_volumes() {
    let mut r = rig(Mode::Get, &["vol-a", "vol-b"]);
    for _ in 0..3 {
        let start = Instant::now();
        r.cycle().await;
        tokio::time::sleep_until(start + INTERVAL).await;
    }
    let gets = r.driver.gets();
    assert_eq!(gets.len(), 6);
    assert_eq!(gets.iter().filter(|v| *v == "vol-a").count(), 3);
}

#[tokio::test(start_paused = true)]
async fn get_mode_keeps_at_most_the_worker_limit_in_flight() {
    // Each call takes 10s while one starts every 3s: without a limit 4 would overlap.
    let (mut r, vols) = get_rig(20, 3, Duration::from_secs(10));
    r.cycle().await;
    assert_eq!(r.driver.with(|s| s.max_inflight), 3);
    let mut gets = r.driver.gets();
    gets.sort();
    assert_eq!(gets, vols, "every volume exactly once");
}

#[tokio::test(start_paused = true)]
async fn get_mode_clears_on_an_empty_answer_and_keeps_on_error() {
    let mut r = rig(Mode::Get, &["vol-a"]);
    r.driver.set("vol-a", vec![entry(3, "Lost", "blocks gone")]);
    r.cycle().await;
    assert_eq!(
        reasons(&r.api.stored("vol-a")),
        vec![("DataLoss".into(), "Lost".into())]
    );
    r.driver.set("vol-a", vec![]);
    r.driver
        .with(|s| s.fail_get = Some(tonic::Code::Unavailable));
    r.cycle().await;
    assert!(
        r.api.stored("vol-a").is_some(),
        "a failed RPC is not a recovery"
    );
    r.driver.with(|s| s.fail_get = None);
    r.cycle().await;
    assert_eq!(
        r.api.stored("vol-a"),
        None,
        "an empty answer clears at once"
    );
}

#[tokio::test(start_paused = true)]
async fn a_csidriver_annotation_changes_the_interval_without_a_restart() {
    use volhealth_writer::intervals::{DriverIntervals, MONITOR_ANNOTATION};
    let r = rig(Mode::Get, &["vol-a"]);
    let intervals = Arc::new(DriverIntervals::new(MONITOR_ANNOTATION, INTERVAL));
    let driver = r.driver.clone();
    let running = Running::start(r.engine.with_intervals(intervals.clone()));
    let at =
        || -> Vec<u64> { driver.with(|s| s.get_calls.iter().map(|(_, t)| t.as_secs()).collect()) };
    let annotation = |v: &str| BTreeMap::from([(MONITOR_ANNOTATION.to_string(), v.to_string())]);

    tokio::time::sleep(Duration::from_secs(130)).await;
    assert_eq!(at(), [0, 60, 120], "the flag's interval");

    // Ten seconds from the last cycle's start, which is now: at once, then every ten.
    intervals.apply(DRIVER, Some(&annotation("10s")));
    tokio::time::sleep(Duration::from_secs(25)).await;
    assert_eq!(at(), [0, 60, 120, 130, 140, 150]);

    // An invalid value is ignored: the flag's interval again, from the last start.
    intervals.apply(DRIVER, Some(&annotation("often")));
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(at(), [0, 60, 120, 130, 140, 150, 210]);

    // Another driver's annotation is not this one's.
    intervals.apply("other.example.com", Some(&annotation("1s")));
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(at().len(), 7);

    running.stop().await;
}

#[tokio::test(start_paused = true)]
async fn each_cycle_is_timed_and_an_overrun_is_counted() {
    // One worker, eight volumes, a 60 s interval: the calls are due 6.75 s apart. Answers taking
    // 1 s end a sweep 48.25 s after its start; answers taking 10 s keep the one worker busy for
    // 80 s, so that sweep ends after the next was due.
    let vols = ["v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8"];
    let r = rig_with(Mode::Get, &vols, 500, 1, Arc::new(FakeApi::default()));
    r.driver.with(|s| s.get_delay = Duration::from_secs(1));
    let driver = r.driver.clone();
    let shared = r.shared.clone();
    let running = Running::start(r.engine);
    let metric = |name: &str| -> String {
        let text = shared.metrics.families.encode();
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map_or("absent".to_string(), |v| v.trim().to_string())
    };
    let series = |name: &str| format!(r#"{name}{{driver_name="{DRIVER}",mode="get"}}"#);
    let count = &series("csi_volume_health_cycle_duration_seconds_count");
    let sum = &series("csi_volume_health_cycle_duration_seconds_sum");
    let overruns = &series("csi_volume_health_cycle_overruns_total");

    // The cycles at 0 and 60 s, 48.25 s each.
    tokio::time::sleep(Duration::from_secs(110)).await;
    assert_eq!(metric(count), "2");
    assert_eq!(metric(sum), "96.5");
    assert_eq!(metric(overruns), "absent", "no cycle overran");

    // The cycle at 120 s ends at 200 s, after the next was due at 180 s.
    driver.with(|s| s.get_delay = Duration::from_secs(10));
    tokio::time::sleep(Duration::from_secs(95)).await;
    assert_eq!(metric(count), "3");
    assert_eq!(metric(sum), "176.5");
    assert_eq!(metric(overruns), "1");
    assert_eq!(
        driver.gets().len(),
        8 * 3 + 1,
        "the next sweep started at once, at 200 s"
    );

    running.stop().await;
}

/// A Get-mode rig of `count` volumes (`vol-0000`, `vol-0001`, …) with `workers` workers, each
/// Get answering after `get_delay`; and the volumes' names, in order.
fn get_rig(count: usize, workers: usize, get_delay: Duration) -> (Rig, Vec<String>) {
    let vols: Vec<String> = (0..count).map(|i| format!("vol-{i:04}")).collect();
    let refs: Vec<&str> = vols.iter().map(String::as_str).collect();
    let r = rig_with(Mode::Get, &refs, 500, workers, Arc::new(FakeApi::default()));
    r.driver.with(|s| s.get_delay = get_delay);
    (r, vols)
}
