//! The recorder's queue: coalescing, summaries, its bound.

use super::*;

const DEGRADED: &str = "VolumeHealthDegraded";
const RECOVERED: &str = "VolumeHealthRecovered";

fn pvc(name: &str) -> ObjectRef {
    ObjectRef::claim("ns", name, Some(&format!("uid-{name}")))
}

struct NoCounter;

impl EventCounter for NoCounter {
    fn event(&self, _reason: &str, _result: &str) {}
}

fn recorder() -> EventRecorder {
    EventRecorder::new(Arc::new(NoCounter))
}

fn ev(name: &str, reason: &'static str) -> HealthEvent {
    HealthEvent {
        object: pvc(name),
        event_type: EventType::Warning,
        reason,
        message: format!("about {name}"),
    }
}

#[test]
fn repeats_coalesce_and_many_similar_are_summarised() {
    let r = recorder();
    r.record(ev("a", DEGRADED));
    r.record(HealthEvent {
        message: "newer".into(),
        ..ev("a", DEGRADED)
    });
    assert_eq!(r.len(), 1);
    match r.pop() {
        Some(Outgoing::One(e, 2)) => assert_eq!(e.message, "newer"),
        other => panic!("{other:?}"),
    }
    for i in 0..25 {
        r.record(ev(&format!("v{i:02}"), DEGRADED));
    }
    r.record(ev("other", RECOVERED));
    match r.pop() {
        Some(Outgoing::Summary(e, 25)) => {
            assert_eq!(e.object.name, "v00");
            assert!(e.message.contains("25 similar"), "{}", e.message);
            assert!(e.message.contains("and 15 more"), "{}", e.message);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(r.pop(), Some(Outgoing::One(e, 1)) if e.object.name == "other"));
    assert_eq!(r.pop(), None);
}

#[test]
fn the_queue_is_bounded() {
    let r = recorder();
    for i in 0..(MAX_PENDING_EVENTS + 5) {
        r.record(HealthEvent {
            object: ObjectRef {
                namespace: Some(format!("ns{i}")),
                ..pvc("a")
            },
            ..ev("a", DEGRADED)
        });
    }
    assert_eq!(r.len(), MAX_PENDING_EVENTS);
}
