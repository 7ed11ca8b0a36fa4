//! Which transitions raise which Events (the recorder's own tests are in `volhealth-kube-access`).

use super::*;
use volhealth_model::VolumeHealthCondition;

fn pvc(name: &str) -> ObjectRef {
    ObjectRef::claim("ns", name, Some(&format!("uid-{name}")))
}

fn c(reason: &str, message: &str) -> VolumeHealthCondition {
    VolumeHealthCondition {
        status: "Degraded".into(),
        reason: reason.into(),
        message: Some(message.into()),
    }
}

fn event_of(
    object: &ObjectRef,
    subject: Subject,
    context: Option<&str>,
    before: &[VolumeHealthCondition],
    after: &[VolumeHealthCondition],
) -> Option<HealthEvent> {
    Transition {
        object,
        subject,
        context,
        before,
        after,
    }
    .event()
}

#[test]
fn only_transitions_raise_events() {
    let o = pvc("a");
    let deg = [c("Slow", "m")];
    let e = event_of(&o, Subject::Volume, None, &[], &deg).unwrap();
    assert_eq!(
        (e.event_type, e.reason),
        (EventType::Warning, REASON_VOLUME_DEGRADED)
    );
    let e = event_of(&o, Subject::Volume, None, &deg, &[]).unwrap();
    assert_eq!(
        (e.event_type, e.reason),
        (EventType::Normal, REASON_VOLUME_RECOVERED)
    );
    let e = event_of(
        &o,
        Subject::Volume,
        Some("volume data"),
        &deg,
        &[c("Slow", "other")],
    )
    .unwrap();
    assert_eq!(e.reason, REASON_VOLUME_CHANGED);
    assert!(e.message.starts_with("volume data: "), "{}", e.message);
    assert_eq!(event_of(&o, Subject::Volume, None, &deg, &deg), None);
    let empty: [VolumeHealthCondition; 0] = [];
    assert_eq!(event_of(&o, Subject::Volume, None, &empty, &empty), None);
    let e = event_of(&o, Subject::Storage, None, &[], &deg).unwrap();
    assert_eq!(e.reason, REASON_STORAGE_DEGRADED);
}

#[test]
fn the_docs_list_exactly_the_reasons_the_writers_emit() {
    let doc = include_str!("../../../../docs/kubectl.md");
    let section = doc
        .split("## Events the writers raise")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .unwrap_or_else(|| panic!("docs/kubectl.md has no section on the Events"));
    let mut documented: Vec<&str> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .collect();
    documented.sort_unstable();
    let mut emitted = ALL_REASONS.to_vec();
    emitted.sort_unstable();
    assert_eq!(documented, emitted);
}

#[test]
fn the_upstream_reason_comes_beside_ours_for_abnormal_volumes_only() {
    let o = pvc("data-1");
    let deg = vec![c("SlowDisk", "writes take 800 ms")];
    let reasons = |upstream: bool,
                   subject: Subject,
                   before: &[VolumeHealthCondition],
                   after: &[VolumeHealthCondition]| {
        Transition {
            object: &o,
            subject,
            context: None,
            before,
            after,
        }
        .events_with(upstream)
        .into_iter()
        .map(|e| (e.reason, e.message))
        .collect::<Vec<_>>()
    };
    let on = reasons(true, Subject::Volume, &[], &deg);
    assert_eq!(on.len(), 2);
    assert_eq!(on[0].0, REASON_VOLUME_DEGRADED);
    assert_eq!(
        on[1],
        (REASON_UPSTREAM_ABNORMAL, "writes take 800 ms".to_string())
    );
    assert_eq!(
        reasons(false, Subject::Volume, &[], &deg).len(),
        1,
        "off by default"
    );
    assert_eq!(
        reasons(true, Subject::Volume, &deg, &[]).len(),
        1,
        "a recovery is not abnormal"
    );
    assert_eq!(
        reasons(true, Subject::Storage, &[], &deg).len(),
        1,
        "volumes only"
    );
    assert!(
        reasons(true, Subject::Volume, &deg, &deg).is_empty(),
        "no transition"
    );
}
