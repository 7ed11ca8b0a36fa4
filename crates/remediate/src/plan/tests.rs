use super::*;
use crate::findings::of_csinode;
use k8s_openapi::api::storage::v1::CSINode;

const POLICY: &str = "\
rules:
- name: backend-unreachable
  match: {object: CSINode, status: StorageUnreachable}
  for: 1m
  actions: [{taint: {key: volhealth.io/storage-unreachable, effect: NoSchedule}}, cordon]
";

fn t(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn node(name: &str, since: Option<&str>) -> Vec<Finding> {
    let conditions = match since {
        Some(s) => {
            serde_json::json!([{"status": "StorageUnreachable", "reason": "NetworkPartition", "lastTransitionTime": s}])
        }
        None => serde_json::json!([]),
    };
    let n: CSINode = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "status": {"storageHealth": [{"name": "d", "healthConditions": conditions}]}
    }))
    .unwrap();
    of_csinode(&n)
}

#[test]
fn acts_once_per_transition_then_untaints_when_it_clears() {
    let policy = Policy::parse(POLICY).unwrap();
    let mut p = Planner::default();
    let held = node("node-2", Some("2026-01-01T00:00:00Z"));
    assert!(
        p.plan(&policy, &held, t("2026-01-01T00:00:30Z")).is_empty(),
        "not held long enough"
    );
    let first = p.plan(&policy, &held, t("2026-01-01T00:01:00Z"));
    assert_eq!(first.len(), 2);
    assert_eq!(
        first[0].describe(),
        "taint node node-2 with volhealth.io/storage-unreachable:NoSchedule (rule backend-unreachable: CSINode node-2 is StorageUnreachable (NetworkPartition))"
    );
    assert_eq!(first[1].action, Action::Cordon);
    assert!(
        p.plan(&policy, &held, t("2026-01-01T00:05:00Z")).is_empty(),
        "never twice"
    );
    assert!(p.cleared(&policy, &held).is_empty(), "still holds");

    let untaint = p.cleared(&policy, &node("node-2", None));
    assert_eq!(
        untaint,
        vec![Untaint {
            rule: "backend-unreachable".into(),
            node: "node-2".into(),
            key: "volhealth.io/storage-unreachable".into(),
            effect: "NoSchedule".into(),
        }]
    );
    assert!(
        p.cleared(&policy, &node("node-2", None)).is_empty(),
        "removed once"
    );
    // A new transition is acted on again once held.
    let again = node("node-2", Some("2026-01-01T01:00:00Z"));
    assert_eq!(p.plan(&policy, &again, t("2026-01-01T01:01:00Z")).len(), 2);
}

#[test]
fn the_eviction_budget_is_per_namespace_and_window() {
    let mut b = EvictionBudget::new(10.0, Duration::from_secs(3600));
    let now = t("2026-01-01T00:00:00Z");
    // 10% of 20 pods: two per hour.
    assert!(b.take("db", 20, now));
    assert!(b.take("db", 20, now));
    assert!(!b.take("db", 20, now));
    assert!(
        b.take("web", 20, now),
        "another namespace has its own budget"
    );
    // 10% of 5 pods rounds down to none.
    assert!(!b.take("tiny", 5, now));
    assert!(!b.take("db", 20, t("2026-01-01T00:59:59Z")));
    assert!(
        b.take("db", 20, t("2026-01-01T01:00:00Z")),
        "the window has passed"
    );
}

#[test]
fn a_retried_action_comes_back_alone_and_the_transition_completes_when_all_are_done() {
    let policy = Policy::parse(POLICY).unwrap();
    let rule = &policy.rules[0];
    let mut p = Planner::default();
    let held = node("node-2", Some("2026-01-01T00:00:00Z"));
    let now = t("2026-01-01T00:01:00Z");
    let first = p.plan(&policy, &held, now);
    assert_eq!(first.len(), 2);
    p.done(&policy, &first[0]);
    p.retry(&policy, &first[1]);
    assert!(!p.complete(rule, &held[0]));
    let again = p.plan(&policy, &held, now);
    assert_eq!(again.len(), 1, "only the cordon, the taint is done");
    assert_eq!(again[0].action, Action::Cordon);
    assert!(p.plan(&policy, &held, now).is_empty(), "not offered twice");
    p.done(&policy, &again[0]);
    assert!(p.complete(rule, &held[0]));
}

#[test]
fn a_transition_recorded_before_a_restart_is_not_acted_on() {
    let policy = Policy::parse(POLICY).unwrap();
    let mut p = Planner::default();
    let held = node("node-2", Some("2026-01-01T00:00:00Z"));
    p.already_acted(&policy.rules[0], &held[0]);
    assert!(p.plan(&policy, &held, t("2026-01-01T01:00:00Z")).is_empty());
    // A taint found on the node at start comes off when the condition clears.
    p.adopt_taint(
        "backend-unreachable",
        "node-2",
        "volhealth.io/storage-unreachable",
        "NoSchedule",
    );
    assert_eq!(p.cleared(&policy, &node("node-2", None)).len(), 1);
}
