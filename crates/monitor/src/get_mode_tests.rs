//! Get-mode cycles against the fakes: spreading, no duplicate probes, the worker limit, clears and errors.

use crate::cycle_fakes::*;

#[tokio::test(start_paused = true)]
async fn get_mode_spreads_the_calls_over_the_interval() {
    let mut r = rig(Mode::Get, &["vol-a", "vol-b", "vol-c", "vol-d"]);
    r.cycle().await;
    let calls = r.driver.with(|s| s.get_calls.clone());
    let at: Vec<u64> = calls.iter().map(|(_, t)| t.as_secs()).collect();
    assert_eq!(at, vec![0, 15, 30, 45]);
    let mut vols: Vec<String> = calls.into_iter().map(|(v, _)| v).collect();
    vols.sort();
    assert_eq!(vols, vec!["vol-a", "vol-b", "vol-c", "vol-d"]);
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
    let vols: Vec<String> = (0..20).map(|i| format!("vol-{i:02}")).collect();
    let refs: Vec<&str> = vols.iter().map(String::as_str).collect();
    let mut r = rig_with(Mode::Get, &refs, 500, 3, Arc::new(FakeApi::default()));
    // Each call takes 10s while one starts every 3s: without a limit 4 would overlap.
    r.driver.with(|s| s.get_delay = Duration::from_secs(10));
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
