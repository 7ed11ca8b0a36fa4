//! List-mode cycles against the fakes: detection, the recovery rule, failed and inconsistent pages.

use crate::tests::cycle_fakes::*;

#[test]
fn mode_follows_the_advertised_capabilities() {
    assert_eq!(
        Mode::from_capabilities(&ControllerHealthMode::List { get: true }),
        Mode::List { get: true }
    );
    assert_eq!(
        Mode::from_capabilities(&ControllerHealthMode::List { get: false }),
        Mode::List { get: false }
    );
    assert_eq!(
        Mode::from_capabilities(&ControllerHealthMode::Get),
        Mode::Get
    );
    assert_eq!(
        Mode::from_capabilities(&ControllerHealthMode::None),
        Mode::Off
    );
}

#[tokio::test(start_paused = true)]
async fn list_mode_lists_with_the_page_size_and_never_gets_for_detection() {
    let mut r = rig_with(
        Mode::List { get: true },
        &["vol-a", "vol-b", "vol-c"],
        2,
        10,
        Arc::new(FakeApi::default()),
    );
    for v in ["vol-a", "vol-b", "vol-c"] {
        r.driver.set(v, degraded("Slow"));
    }
    r.cycle().await;
    assert_eq!(r.driver.with(|s| s.list_max_entries.clone()), vec![2, 2]);
    assert!(r.driver.gets().is_empty());
    assert_eq!(r.api.patches().len(), 3);
    assert_eq!(
        reasons(&r.api.stored("vol-b")),
        vec![("Degraded".into(), "Slow".into())]
    );
}

#[tokio::test(start_paused = true)]
async fn off_mode_probes_nothing() {
    let mut r = rig(Mode::Off, &["vol-a"]);
    r.driver.set("vol-a", degraded("Slow"));
    r.cycle().await;
    assert_eq!(r.driver.with(|s| s.list_pages), 0);
    assert!(r.driver.gets().is_empty());
    assert!(r.api.patches().is_empty());
}

#[tokio::test(start_paused = true)]
async fn detection_writes_once_then_steady_state_writes_nothing() {
    let mut r = rig(Mode::List { get: true }, &["vol-a", "vol-b"]);
    r.driver
        .set("vol-a", vec![entry(INACCESSIBLE, "NoPath", "gone")]);
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 1);
    assert_eq!(r.api.event_reasons(), vec![REASON_DEGRADED]);
    let stored = r.api.stored("vol-a");
    for _ in 0..3 {
        tokio::time::advance(INTERVAL).await;
        r.cycle().await;
    }
    assert_eq!(r.api.patches().len(), 1, "no write while nothing changes");
    assert_eq!(r.api.stored("vol-a"), stored, "lastTransitionTime kept");
    assert!(r.metrics().contains(r#"csi_controller_volume_health_status{namespace="ns",persistentvolumeclaim="pvc-a",status="Inaccessible",reason="NoPath"} 1"#));
}

#[tokio::test(start_paused = true)]
async fn list_without_get_clears_only_after_two_complete_cycles() {
    let mut r = written_then_gone(Mode::List { get: false }).await;
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 1, "one absence is not a recovery");
    assert!(r.api.stored("vol-a").is_some());
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 2);
    assert_eq!(r.api.stored("vol-a"), None);
    assert_eq!(
        r.api.event_reasons(),
        vec![REASON_DEGRADED, REASON_RECOVERED]
    );
    assert!(
        !r.metrics().contains("persistentvolumeclaim=\"pvc-a\""),
        "series removed on recovery"
    );
}

#[tokio::test(start_paused = true)]
async fn list_with_get_confirms_a_recovery_at_once() {
    let mut r = rig(Mode::List { get: true }, &["vol-a", "vol-b"]);
    r.driver.set("vol-a", degraded("Slow"));
    r.driver.set("vol-b", degraded("Slow"));
    r.cycle().await;
    r.driver.set("vol-a", vec![]);
    r.cycle().await;
    assert_eq!(
        r.driver.gets(),
        vec!["vol-a".to_string()],
        "only the absent one is confirmed"
    );
    assert_eq!(r.api.stored("vol-a"), None);
    assert!(r.api.stored("vol-b").is_some());
}

#[tokio::test(start_paused = true)]
async fn a_failed_confirming_get_keeps_the_conditions() {
    let mut r = written_then_gone(Mode::List { get: true }).await;
    r.driver.with(|s| s.fail_get = Some(tonic::Code::Internal));
    r.cycle().await;
    assert!(r.api.stored("vol-a").is_some());
    assert_eq!(r.api.patches().len(), 1);
    assert!(r.metrics().contains(r#"csi_volume_health_probe_total{driver_name="fake.csi.example.com",method="ControllerGetVolumeHealth",result="error"} 1"#));
}

#[tokio::test(start_paused = true)]
async fn a_confirming_get_that_still_reports_keeps_the_conditions() {
    let mut r = rig(Mode::List { get: true }, &["vol-a"]);
    r.driver.set("vol-a", degraded("Slow"));
    r.cycle().await;
    r.driver.with(|s| s.omit.insert("vol-a".into()));
    r.cycle().await;
    r.cycle().await;
    assert_eq!(r.driver.gets().len(), 2);
    assert_eq!(
        r.api.patches().len(),
        1,
        "Get says it is still degraded: nothing changes"
    );
}

#[tokio::test(start_paused = true)]
async fn a_failed_page_keeps_everything_and_the_cycle_counts_for_nothing() {
    let vols = ["vol-a", "vol-b", "vol-c"];
    let mut r = written_then_recovered(&vols).await;
    // Everything recovered, but the page fails: nothing may be cleared or counted.
    let next_page = r.driver.with(|s| s.list_pages);
    r.driver.with(|s| s.fail_list_page = Some(next_page));
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 3);
    r.cycle().await; // first complete absence
    assert_eq!(
        r.api.patches().len(),
        3,
        "the failed cycle did not count as an absence"
    );
    r.cycle().await; // second complete absence
    assert_eq!(r.api.patches().len(), 6);
    assert!(
        r.metrics()
            .contains(r#"method="ControllerListVolumeHealth",result="error"} 1"#)
    );
}

#[tokio::test(start_paused = true)]
async fn a_driver_that_never_stops_paging_is_cut_short_and_clears_nothing() {
    let vols = ["vol-a", "vol-b", "vol-c"];
    let mut r = written_then_recovered(&vols).await;
    // Everything recovered, but each page now carries a token never seen before.
    r.driver.with(|s| s.endless_tokens = true);
    for _ in 0..3 {
        let before = r.driver.with(|s| s.list_pages);
        r.cycle().await;
        let pages = r.driver.with(|s| s.list_pages) - before;
        assert!(
            pages <= crate::list_mode::page_limit(vols.len(), 1),
            "a cycle takes at most the page limit ({pages} pages)"
        );
    }
    assert_eq!(
        r.api.patches().len(),
        3,
        "cycles cut short clear nothing, however many there are"
    );
    assert!(
        r.metrics()
            .contains(r#"csi_volume_health_incomplete_cycles_total{reason="too_many_pages"} 3"#),
        "{}",
        r.metrics()
    );
    // The driver behaves again: the next complete cycles clear, as always in list mode.
    r.driver.with(|s| s.endless_tokens = false);
    r.cycle().await;
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 6);
}

#[tokio::test(start_paused = true)]
async fn the_deadline_is_per_page_not_per_pass() {
    let vols = ["vol-a", "vol-b", "vol-c"];
    let mut r = degraded_one_per_page(&vols);
    // Three pages of 10s each: 30s in all, more than the 15s timeout, and still complete.
    r.driver.with(|s| s.list_delay = Duration::from_secs(10));
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 3);
    // A page that never answers ends the cycle after one timeout.
    let next_page = r.driver.with(|s| s.list_pages) + 1;
    r.driver.with(|s| {
        s.hang_list_page = Some(next_page);
        s.list_delay = Duration::ZERO;
    });
    let start = Instant::now();
    r.engine.cycle(Instant::now()).await;
    assert_eq!(start.elapsed(), TIMEOUT);
    assert!(
        r.metrics()
            .contains(r#"method="ControllerListVolumeHealth",result="error"} 1"#)
    );
}

#[tokio::test(start_paused = true)]
async fn duplicates_and_omissions_cause_no_false_clear() {
    let vols = ["vol-a", "vol-b", "vol-c", "vol-d"];
    let mut r = degraded_one_per_page(&vols);
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 4);
    // Stale duplicates with empty statuses on every page: nothing clears.
    r.driver.with(|s| s.stale_empty_duplicates = true);
    for _ in 0..3 {
        r.cycle().await;
    }
    assert_eq!(r.api.patches().len(), 4);
    // One volume omitted in one cycle, then back: nothing clears.
    r.driver.with(|s| s.omit.insert("vol-b".into()));
    r.cycle().await;
    r.driver.with(|s| s.omit.clear());
    r.cycle().await;
    r.driver.with(|s| s.omit.insert("vol-b".into()));
    r.cycle().await;
    r.driver.with(|s| s.omit.clear());
    r.cycle().await;
    assert_eq!(r.api.patches().len(), 4);
    for v in vols {
        assert!(r.api.stored(v).is_some(), "{v} kept");
    }
}

#[tokio::test(start_paused = true)]
async fn volumes_without_a_bound_pv_are_counted_not_errors() {
    let mut r = rig(Mode::List { get: true }, &["vol-a"]);
    r.driver.set("vol-orphan", degraded("Slow"));
    r.cycle().await;
    assert!(r.api.patches().is_empty());
    assert!(r.metrics().contains("csi_volume_health_unmapped_volumes 1"));
}

/// A list-mode rig paging one volume at a time (no Get), with every volume in `vols` degraded.
fn degraded_one_per_page(vols: &[&str]) -> Rig {
    let r = rig_with(
        Mode::List { get: false },
        vols,
        1,
        10,
        Arc::new(FakeApi::default()),
    );
    for v in vols {
        r.driver.set(v, degraded("Slow"));
    }
    r
}

/// [`degraded_one_per_page`] after a cycle that wrote each volume's condition, with every
/// volume recovered since at the driver.
async fn written_then_recovered(vols: &[&str]) -> Rig {
    let mut r = degraded_one_per_page(vols);
    r.cycle().await;
    assert_eq!(r.api.patches().len(), vols.len());
    for v in vols {
        r.driver.set(v, vec![]);
    }
    r
}

/// A rig in `mode` whose `vol-a`, reported degraded, was written by one cycle, and which the
/// driver no longer reports since.
async fn written_then_gone(mode: Mode) -> Rig {
    let mut r = rig(mode, &["vol-a"]);
    r.driver.set("vol-a", degraded("Slow"));
    r.cycle().await;
    r.driver.set("vol-a", vec![]);
    r
}
