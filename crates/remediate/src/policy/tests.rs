use super::*;

const STORY_5: &str = "\
# Story 5: a local disk that stays inaccessible for 5 minutes.
rules:
- name: backend-unreachable
  match: {object: CSINode, status: StorageUnreachable, reason: \"*\", driver: \"*\"}
  for: 1m
  actions: [{taint: {key: volhealth.io/storage-unreachable, effect: NoSchedule}}]
- name: failed-local-disk
  match:
    object: PersistentVolumeClaim
    status: Inaccessible
    reason: DiskFailure
    driver: local.csi.example.com
  for: 5m
  actions:
  - evict
  - annotate: {key: db.example.com/replace-volume, value: \"true\"}
  - event: {}
evictionBudget: {maxPercent: 10, window: 1h}
";

#[test]
fn the_issues_example_and_story_5_parse() {
    let p = Policy::parse(STORY_5).unwrap();
    assert_eq!(p.rules.len(), 2);
    assert_eq!(p.rules[0].matcher.object, ObjectKind::CSINode);
    assert_eq!(p.rules[0].hold(), Duration::from_secs(60));
    assert_eq!(
        p.rules[0].actions,
        vec![Action::Taint {
            key: "volhealth.io/storage-unreachable".into(),
            value: None,
            effect: "NoSchedule".into()
        }]
    );
    assert_eq!(p.rules[1].hold(), Duration::from_secs(300));
    assert_eq!(p.rules[1].actions[0], Action::Evict);
    assert_eq!(
        p.eviction_budget.as_ref().map(|b| b.max_percent),
        Some(10.0)
    );
}

#[test]
fn syntax_errors_name_their_line() {
    let err = Policy::parse(
        "rules:\n- name: a\n  match: {object: Node, status: X}\n  actions: [cordon]\n",
    )
    .unwrap_err();
    assert!(err.to_string().starts_with("line 3:"), "{err}");
    let err = Policy::parse(
        "rules:\n- name: a\n  match: {object: Pod, status: Degraded}\n  actions: [reboot]\n",
    )
    .unwrap_err();
    assert!(err.to_string().starts_with("line 4:"), "{err}");
}

#[test]
fn every_invalid_value_is_reported_with_its_rules_line() {
    let text = "\
rules:
- name: ok
  match: {object: Pod, status: Degraded}
  actions: [evict]

- name: bad
  match: {object: CSINode, status: Degraded}
  for: 5
  actions: [evict, {taint: {key: k, effect: Never}}, {webhook: {url: ftp://x}}]
- name: ok
  match: {object: PersistentVolumeClaim, status: DataLoss}
  actions: [cordon]
evictionBudget: {maxPercent: 0, window: soon}
";
    let err = Policy::parse(text).unwrap_err();
    let all = err.to_string();
    let has = |s: &str| assert!(all.contains(s), "missing {s:?} in:\n{all}");
    has(
        "line 6: rules[1] (\"bad\"): match.status \"Degraded\" is not one of StorageUnreachable, StorageDegraded",
    );
    has("line 6: rules[1] (\"bad\"): for \"5\"");
    has("line 6: rules[1] (\"bad\"): evict needs a pod");
    has("line 6: rules[1] (\"bad\"): taint.effect \"Never\"");
    has("line 6: rules[1] (\"bad\"): webhook.url \"ftp://x\"");
    has("line 10: rules[2] (\"ok\"): name is used by an earlier rule");
    has("line 10: rules[2] (\"ok\"): cordon needs a node");
    has("evictionBudget.maxPercent 0");
    has("evictionBudget.window \"soon\"");
    assert_eq!(err.problems.len(), 9, "{all}");
}

#[test]
fn node_actions_need_a_node() {
    let err = Policy::parse(
        "rules:\n- name: t\n  match: {object: PersistentVolumeClaim, status: Degraded}\n  actions: [{taint: {key: k, effect: NoSchedule}}]\n",
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("line 2: rules[0] (\"t\"): taint needs a node"),
        "{err}"
    );
}
