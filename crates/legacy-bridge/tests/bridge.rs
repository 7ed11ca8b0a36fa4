//! The bridge against a legacy driver it did not write (tests/support), over a real unix socket:
//! every mapping rule and every trap of the legacy drivers.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use std::sync::Arc;
use support::{Answer, LegacyDriver, State};
use tonic::Code;
use volhealth_csi::v1;
use volhealth_csi::v1::VolumeHealthErrorType as T;
use volhealth_legacy_bridge::{Bridge, LegacyController, LegacyModes, LegacyNode, Rules};

const DRIVER: &str = "legacy.example.com";

fn bridge(debounce: u32) -> Bridge {
    Bridge::new(DRIVER, Arc::new(Rules::shipped().unwrap()), debounce)
}

fn state() -> State {
    State {
        name: DRIVER.into(),
        controller_caps: vec![3, 11, 12],
        node_caps: vec![2, 4],
        ..State::default()
    }
}

/// Every legacy mode on.
const ALL_MODES: LegacyModes = LegacyModes {
    list_volumes: true,
    get_volume: true,
    node_volume_stats: true,
};

/// The fake serving `s`, and a bridge controller (debounce 2) asking it in `modes`.
async fn controller_of(s: State, modes: LegacyModes) -> (LegacyDriver, LegacyController) {
    let driver = LegacyDriver::start(s).await;
    let c = LegacyController::new(driver.channel().await, bridge(2), modes);
    (driver, c)
}

type Entry = (i32, String, String);

fn entries(h: &v1::VolumeHealth) -> Vec<Entry> {
    h.health_statuses
        .iter()
        .map(|e| (e.status, e.reason.clone(), e.message.clone()))
        .collect()
}

#[tokio::test]
async fn capabilities_are_read_from_the_reserved_numbers() {
    let driver = LegacyDriver::start(state()).await;
    let modes =
        volhealth_legacy_bridge::probe(driver.channel().await, std::time::Duration::from_secs(5))
            .await
            .unwrap();
    assert_eq!(modes, ALL_MODES);
    let quiet = LegacyDriver::start(State {
        controller_caps: vec![3, 12],
        node_caps: vec![2],
        ..state()
    })
    .await;
    let modes =
        volhealth_legacy_bridge::probe(quiet.channel().await, std::time::Duration::from_secs(5))
            .await
            .unwrap();
    assert_eq!(
        modes,
        LegacyModes::default(),
        "no VOLUME_CONDITION, nothing to bridge"
    );
}

#[tokio::test]
async fn controller_get_maps_presence_health_and_rules_and_keys_by_the_id_asked() {
    let mut s = state();
    s.answers.insert(
        "healthy".into(),
        Answer::Condition(Some((false, String::new()))),
    );
    s.answers.insert("silent".into(), Answer::Condition(None));
    s.answers.insert(
        "gone".into(),
        Answer::Condition(Some((
            true,
            "The source path of the volume doesn't exist".into(),
        ))),
    );
    s.answers.insert(
        "stamped".into(),
        Answer::Condition(Some((
            true,
            "Volume is not found by controller at 2024-03-01 10:15:42".into(),
        ))),
    );
    s.answers.insert(
        "odd".into(),
        Answer::Condition(Some((true, "array hiccup".into()))),
    );
    s.answers
        .insert("busy".into(), Answer::Error(Code::Unavailable));
    s.answer_as = Some("some-other-id".into());
    let (_driver, c) = controller_of(s, ALL_MODES).await;

    let healthy = c.get("healthy".into()).await.unwrap();
    assert_eq!(healthy.volume_id, "healthy", "keyed by the id asked about");
    assert!(
        healthy.health_statuses.is_empty(),
        "abnormal=false is healthy"
    );

    let silent = c.get("silent".into()).await.unwrap_err();
    assert_eq!(
        silent.code(),
        Code::Unavailable,
        "absent is no report: {silent:?}"
    );
    assert!(
        silent.message().contains("no volume_condition"),
        "{silent:?}"
    );

    assert_eq!(
        entries(&c.get("gone".into()).await.unwrap()),
        [(
            T::Inaccessible as i32,
            "VolumeSourceMissing".into(),
            "The source path of the volume doesn't exist".into()
        )]
    );
    assert_eq!(
        entries(&c.get("stamped".into()).await.unwrap()),
        [(
            T::Inaccessible as i32,
            "VolumeNotFound".into(),
            "Volume is not found by controller at".into()
        )]
    );
    assert_eq!(
        entries(&c.get("odd".into()).await.unwrap()),
        [(
            T::Degraded as i32,
            "VolumeConditionAbnormal".into(),
            "array hiccup".into()
        )]
    );
    assert_eq!(
        c.get("busy".into()).await.unwrap_err().code(),
        Code::Unavailable
    );
}

#[tokio::test]
async fn not_found_becomes_a_condition_only_after_the_debounce_and_an_answer_resets_it() {
    let modes = LegacyModes {
        get_volume: true,
        ..LegacyModes::default()
    };
    let (driver, c) = controller_of(state(), modes).await;
    let first = c.get("lost".into()).await.unwrap_err();
    assert_eq!(
        first.code(),
        Code::NotFound,
        "one NOT_FOUND is not yet a report"
    );
    let second = c.get("lost".into()).await.unwrap();
    assert_eq!(
        entries(&second),
        [(
            T::Inaccessible as i32,
            "VolumeNotFound".into(),
            "ControllerGetVolume answers NOT_FOUND: the array says so".into()
        )]
    );
    // The volume comes back: the count starts over.
    driver.state.lock().unwrap().answers.insert(
        "lost".into(),
        Answer::Condition(Some((false, String::new()))),
    );
    assert!(
        c.get("lost".into())
            .await
            .unwrap()
            .health_statuses
            .is_empty()
    );
    driver.state.lock().unwrap().answers.remove("lost");
    assert_eq!(
        c.get("lost".into()).await.unwrap_err().code(),
        Code::NotFound
    );
}

#[tokio::test]
async fn list_entries_without_a_condition_are_asked_one_by_one_and_entries_without_an_id_skipped() {
    let mut s = state();
    s.list = vec![
        ("a".into(), Some((true, "The volume isn't mounted".into()))),
        ("b".into(), Some((false, String::new()))),
        ("c".into(), None),
        ("d".into(), None),
        (String::new(), Some((true, "about nothing".into()))),
    ];
    s.answers.insert(
        "c".into(),
        Answer::Condition(Some((true, "Volume status is down".into()))),
    );
    s.answers.insert("d".into(), Answer::Condition(None));
    let modes = LegacyModes {
        node_volume_stats: false,
        ..ALL_MODES
    };
    let (driver, c) = controller_of(s, modes).await;
    let (page, next) = c.list_page(0, String::new()).await.unwrap();
    assert!(next.is_empty());
    let got: Vec<(String, Vec<Entry>)> = page
        .iter()
        .map(|h| (h.volume_id.clone(), entries(h)))
        .collect();
    assert_eq!(
        got,
        [
            (
                "a".to_string(),
                vec![(
                    T::Inaccessible as i32,
                    "NotMounted".into(),
                    "The volume isn't mounted".into()
                )]
            ),
            ("b".to_string(), vec![]),
            (
                "c".to_string(),
                vec![(
                    T::Inaccessible as i32,
                    "VolumeDown".into(),
                    "Volume status is down".into()
                )]
            ),
        ],
        "d said nothing either way, so it is left out (no report)"
    );
    let asked: Vec<String> = driver
        .state
        .lock()
        .unwrap()
        .seen
        .iter()
        .map(|s| s.1.clone())
        .collect();
    assert_eq!(
        asked,
        ["c", "d"],
        "only entries without a condition are asked about"
    );

    // Without GET_VOLUME the silent entries are simply left out.
    let list_only = LegacyController::new(
        driver.channel().await,
        bridge(2),
        LegacyModes {
            list_volumes: true,
            ..LegacyModes::default()
        },
    );
    let (page, _) = list_only.list_page(0, String::new()).await.unwrap();
    assert_eq!(
        page.iter()
            .map(|h| h.volume_id.as_str())
            .collect::<Vec<_>>(),
        ["a", "b"]
    );
}

#[tokio::test]
async fn node_stats_are_asked_with_the_real_paths_and_map_like_the_controller() {
    let mut s = state();
    s.answers.insert(
        "v1".into(),
        Answer::Condition(Some((
            true,
            "health-check has not responded for 42 seconds".into(),
        ))),
    );
    s.answers.insert("v2".into(), Answer::Condition(None));
    let driver = LegacyDriver::start(s).await;
    let n = LegacyNode::new(driver.channel().await, bridge(2));
    let req = |id: &str, publish: &str, staging: &str| v1::NodeGetVolumeHealthRequest {
        volume_id: id.into(),
        volume_publish_path: publish.into(),
        staging_target_path: staging.into(),
    };
    let h = n
        .volume_health(req("v1", "/pods/p/mount", "/staging/g"))
        .await
        .unwrap();
    assert_eq!(
        entries(&h),
        [(
            T::Inaccessible as i32,
            "HealthCheckUnresponsive".into(),
            "health-check has not responded for N seconds".into()
        )]
    );
    let unanswered = n.volume_health(req("v2", "", "/staging/g")).await;
    assert_eq!(unanswered.unwrap_err().code(), Code::Unavailable);
    let refused = n.volume_health(req("v2", "", "")).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
    let seen = driver.state.lock().unwrap().seen.clone();
    assert_eq!(
        seen,
        [
            (
                "NodeGetVolumeStats".into(),
                "v1".into(),
                "/pods/p/mount".into(),
                "/staging/g".into()
            ),
            (
                "NodeGetVolumeStats".into(),
                "v2".into(),
                "/staging/g".into(),
                "/staging/g".into()
            ),
        ],
        "a staged-only volume is asked at its staging path; no path, no call"
    );
    // NOT_FOUND for a published path: a condition after two answers in a row.
    let first = n.volume_health(req("v3", "/pods/p/mount", "")).await;
    assert_eq!(first.unwrap_err().code(), Code::NotFound);
    let h = n
        .volume_health(req("v3", "/pods/p/mount", ""))
        .await
        .unwrap();
    assert_eq!(h.health_statuses[0].reason, "VolumeNotFound");
}
