//! The writer and the loop against the fakes: coalescing, backoff, dropped writes, restarts, unknown values, leadership.

use crate::tests::cycle_fakes::*;

#[tokio::test(start_paused = true)]
async fn pending_updates_for_one_claim_coalesce_and_an_unreachable_api_is_retried() {
    let mut r = rig(Mode::Get, &["vol-a"]);
    r.api.with(|s| s.unavailable = true);
    r.driver.set("vol-a", degraded("First"));
    r.cycle().await; // the write fails; the writer backs off
    r.driver.set("vol-a", degraded("Second"));
    r.engine.cycle(Instant::now()).await;
    r.driver.set("vol-a", degraded("Third"));
    r.engine.cycle(Instant::now()).await;
    r.api.with(|s| s.unavailable = false);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let patches = r.api.patches();
    assert_eq!(patches.len(), 1, "only the latest is written");
    assert_eq!(
        reasons(&patches[0].1),
        vec![("Degraded".into(), "Third".into())]
    );
    assert!(
        r.metrics()
            .contains(r#"csi_volume_health_status_writes_total{resource="persistentvolumeclaims/status",result="error"} 1"#)
    );
}

#[tokio::test(start_paused = true)]
async fn a_recovery_cancels_a_write_still_queued() {
    let mut r = rig(Mode::List { get: true }, &["vol-a"]);
    r.api.with(|s| s.unavailable = true);
    r.driver.set("vol-a", degraded("Slow"));
    r.cycle().await; // queued, not written
    r.driver.set("vol-a", vec![]);
    r.engine.cycle(Instant::now()).await; // absent → confirmed healthy by Get
    assert_eq!(r.driver.gets(), vec!["vol-a".to_string()]);
    r.api.with(|s| s.unavailable = false);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        r.api.patches().is_empty(),
        "the stale condition never lands"
    );
    assert_eq!(r.api.stored("vol-a"), None);
}

#[tokio::test(start_paused = true)]
async fn dropped_writes_are_counted_and_retried_slowly() {
    let mut r = rig(Mode::Get, &["vol-a"]);
    // The nominal schedule; the jitter on it is the backoff's own test.
    r.shared.writer().use_nominal_holds();
    r.api.with(|s| s.drop_health = true);
    r.driver.set("vol-a", degraded("Slow"));
    let mut attempts_at = Vec::new();
    for i in 0..16u32 {
        r.cycle().await;
        if r.api.patches().len() > attempts_at.len() {
            attempts_at.push(i);
        }
        tokio::time::advance(INTERVAL).await;
    }
    // Held back 2, 4, then 8 intervals: the one backoff policy of both writers.
    assert_eq!(attempts_at, vec![0, 2, 6, 14]);
    assert!(
        r.metrics()
            .contains(r#"csi_volume_health_status_writes_dropped_total{resource="persistentvolumeclaims/status"} 4"#),
        "{}",
        r.metrics()
    );
    // One transition Event, not one per attempt, and the one Event saying the gate is off.
    assert_eq!(
        r.api.event_reasons(),
        vec![REASON_FIELD_DROPPED, REASON_DEGRADED],
        "one Event, not one per attempt"
    );
}

#[tokio::test(start_paused = true)]
async fn a_server_that_drops_the_field_is_said_once_shown_while_it_lasts_and_forgotten_after() {
    let mut r = rig(Mode::Get, &["vol-a", "vol-b"]);
    r.api.with(|s| s.drop_health = true);
    r.driver.set("vol-a", degraded("Slow"));
    r.driver.set("vol-b", degraded("Slow"));
    r.cycle().await;
    assert!(r.shared.writer().drops_field());
    let gauge = |v: u8| {
        format!(
            r#"csi_volume_health_status_field_dropped{{resource="persistentvolumeclaims/status"}} {v}"#
        )
    };
    assert!(r.metrics().contains(&gauge(1)), "{}", r.metrics());
    let said = |r: &Rig| {
        r.api
            .event_reasons()
            .iter()
            .filter(|e| **e == REASON_FIELD_DROPPED)
            .count()
    };
    assert_eq!(said(&r), 1, "once for the run, not per claim");

    // The gate is turned on: the next write is stored and the warning goes.
    r.api.with(|s| s.drop_health = false);
    for _ in 0..4 {
        tokio::time::advance(INTERVAL).await;
        r.cycle().await;
    }
    assert_eq!(
        reasons(&r.api.stored("vol-a")),
        [("Degraded".into(), "Slow".into())]
    );
    assert!(!r.shared.writer().drops_field());
    assert!(r.metrics().contains(&gauge(0)), "{}", r.metrics());
    assert_eq!(said(&r), 1);
}

#[tokio::test(start_paused = true)]
async fn a_restart_with_unchanged_health_writes_nothing() {
    for mode in [
        Mode::List { get: true },
        Mode::List { get: false },
        Mode::Get,
    ] {
        let api = Arc::new(FakeApi::default());
        api.add_claim("vol-a", Some(stored_status("Slow", "slow")));
        api.add_claim("vol-b", None);
        let mut r = rig_with(mode, &["vol-a", "vol-b"], 500, 10, api);
        r.driver.set("vol-a", degraded("Slow"));
        for _ in 0..3 {
            r.cycle().await;
            tokio::time::advance(INTERVAL).await;
        }
        assert!(
            r.api.patches().is_empty(),
            "{mode:?}: the stored value is the starting state"
        );
        assert!(r.api.event_reasons().is_empty());
        assert!(
            r.metrics()
                .contains(r#"persistentvolumeclaim="pvc-a",status="Degraded",reason="Slow"} 1"#)
        );
    }
}

#[tokio::test(start_paused = true)]
async fn after_a_restart_a_stored_condition_absent_from_the_list_is_not_cleared_at_once() {
    let api = Arc::new(FakeApi::default());
    api.add_claim("vol-a", Some(stored_status("Slow", "slow")));
    let mut r = rig_with(Mode::List { get: false }, &["vol-a"], 500, 10, api);
    r.cycle().await;
    assert!(r.api.patches().is_empty());
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 1);
    assert_eq!(r.api.stored("vol-a"), None);
}

#[tokio::test(start_paused = true)]
async fn unknown_values_raise_one_warning_per_transition_and_never_clear() {
    let api = Arc::new(FakeApi::default());
    api.add_claim("vol-a", Some(stored_status("Slow", "slow")));
    let mut r = rig_with(Mode::Get, &["vol-a"], 500, 10, api);
    r.driver.set("vol-a", vec![entry(9, "Future", "new kind")]);
    for _ in 0..3 {
        r.cycle().await;
    }
    assert!(
        r.api.patches().is_empty(),
        "unknown values are not written and clear nothing"
    );
    assert_eq!(r.api.event_reasons(), vec![REASON_UNKNOWN]);
    assert!(
        r.metrics()
            .contains(r#"csi_volume_health_unknown_condition_total{status="9"} 1"#)
    );
    r.driver.set("vol-a", degraded("Slow"));
    r.cycle().await;
    r.driver.set("vol-a", vec![entry(9, "Future", "new kind")]);
    r.cycle().await;
    assert_eq!(
        r.api.event_reasons(),
        vec![REASON_UNKNOWN, REASON_UNKNOWN],
        "a new transition warns again"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lagging_cache_never_causes_a_second_write() {
    let api = Arc::new(FakeApi::default());
    api.with(|s| s.cache_lag = true);
    let mut r = rig_with(Mode::Get, &["vol-a"], 500, 10, api);
    r.driver.set("vol-a", degraded("Slow"));
    for _ in 0..4 {
        r.cycle().await;
    }
    assert_eq!(r.api.patches().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_follower_writes_nothing() {
    let mut r = rig(Mode::Get, &["vol-a"]);
    r.leader.send_replace(false);
    r.driver.set("vol-a", degraded("Slow"));
    r.cycle().await;
    assert!(r.api.patches().is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_loop_runs_only_while_leading_and_reprobes_after_connection_loss() {
    let r = rig(Mode::List { get: true }, &["vol-a"]);
    let caps = Arc::new(FakeCaps {
        answers: Mutex::new(vec![Ok(DriverInfo {
            driver_name: DRIVER.into(),
            mode: Mode::Get,
            violations: vec![],
            legacy: false,
        })]),
        calls: Mutex::new(0),
    });
    let (leader_tx, leader_rx) = watch::channel(false);
    let (stop_tx, mut stop_rx) = watch::channel(false);
    let driver = r.driver.clone();
    driver.with(|s| s.fail_list_page = Some(0));
    let c = caps.clone();
    let task = tokio::spawn(async move {
        r.engine
            .run(c.as_ref(), leader_rx, async move {
                let _ = stop_rx.wait_for(|v| *v).await;
            })
            .await;
    });
    tokio::time::sleep(INTERVAL * 3).await;
    assert_eq!(
        driver.with(|s| s.list_pages),
        0,
        "a follower does not probe"
    );
    leader_tx.send_replace(true);
    settle().await;
    assert_eq!(
        driver.with(|s| s.list_pages),
        1,
        "the leader probes at once"
    );
    tokio::time::sleep(INTERVAL).await;
    assert_eq!(
        *caps.calls.lock().unwrap(),
        1,
        "connection loss → capabilities probed again"
    );
    assert_eq!(driver.gets(), vec!["vol-a".to_string()], "now in Get mode");
    leader_tx.send_replace(false);
    settle().await;
    let gets = driver.gets().len();
    tokio::time::sleep(INTERVAL * 3).await;
    assert_eq!(
        driver.gets().len(),
        gets,
        "probing stops when the lease is lost"
    );
    stop_tx.send_replace(true);
    task.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn shutdown_does_not_wait_for_a_get_cycle_to_finish() {
    let r = rig(Mode::Get, &["vol-a", "vol-b", "vol-c"]);
    let driver = r.driver.clone();
    let running = Running::start(r.engine);
    settle().await;
    assert_eq!(
        driver.gets().len(),
        1,
        "the first of three calls spread over the interval"
    );
    let start = Instant::now();
    running.stop().await;
    assert!(
        start.elapsed() < INTERVAL / 3,
        "stopped without finishing the cycle"
    );
    assert_eq!(driver.gets().len(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_deleted_pv_takes_its_health_off_the_claim_unless_the_claim_was_recreated() {
    for mode in [Mode::List { get: true }, Mode::Get] {
        let mut r = rig(mode, &["vol-a", "vol-b", "vol-c"]);
        for v in ["vol-a", "vol-b"] {
            r.driver.set(v, degraded("Slow"));
        }
        r.cycle().await;
        assert_eq!(
            reasons(&r.api.stored("vol-a")),
            [("Degraded".into(), "Slow".into())]
        );
        let before = r.api.patches().len();
        let gets_before = r.driver.gets().len();

        // a's PV is deleted while the claim still names it; b's claim was deleted and created
        // again under the same name, and carries health of its own; c was never unhealthy.
        r.api.delete_pv("vol-a", false);
        r.api.delete_pv("vol-b", true);
        r.api.delete_pv("vol-c", false);
        r.cycle().await;
        r.cycle().await;
        let patches = r.api.patches()[before..].to_vec();
        assert_eq!(patches.len(), 1, "{mode:?}: {patches:?}");
        assert_eq!(patches[0].0.name, "pvc-a");
        assert_eq!(patches[0].1, None, "the field is removed");
        assert_eq!(r.api.stored("vol-a"), None);
        assert_eq!(
            reasons(&r.api.stored("vol-b")),
            [("Degraded".into(), "Slow".into())],
            "a recreated claim keeps what it has"
        );
        assert!(
            !r.driver.gets()[gets_before..].iter().any(|v| v == "vol-a"),
            "{mode:?}: a deleted PV is not probed"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_claim_that_leaves_bound_before_its_pv_is_seen_deleted_still_loses_its_health() {
    for mode in [Mode::List { get: true }, Mode::Get] {
        let mut r = rig(mode, &["vol-a"]);
        r.driver.set("vol-a", degraded("Slow"));
        r.cycle().await;
        let before = r.api.patches().len();

        // The claim leaves Bound first; its PV's deletion reaches the cache a cycle later.
        r.api.unbind("vol-a");
        r.cycle().await;
        assert_eq!(
            reasons(&r.api.stored("vol-a")),
            [("Degraded".into(), "Slow".into())],
            "{mode:?}: a claim whose PV still exists keeps its health"
        );
        r.api.delete_pv("vol-a", false);
        r.cycle().await;
        r.cycle().await;
        let patches = r.api.patches()[before..].to_vec();
        assert_eq!(patches.len(), 1, "{mode:?}: {patches:?}");
        assert_eq!(patches[0].1, None, "{mode:?}: the field is removed");
        assert_eq!(r.api.stored("vol-a"), None, "{mode:?}");
    }
}
