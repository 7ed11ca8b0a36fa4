use crate::matching::*;
use crate::memory::{MemoryView, condition};
use crate::policy::HealthSchedulingPolicy;
use k8s_openapi::api::core::v1::Pod;

const D: &str = "topolvm.io";

fn pod(claims: &[&str]) -> Pod {
    let volumes: Vec<_> = claims
        .iter()
        .map(|c| serde_json::json!({"name": format!("v-{c}"), "persistentVolumeClaim": {"claimName": c}}))
        .collect();
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [], "volumes": volumes}
    }))
    .unwrap()
}

fn policy(text: &str) -> HealthSchedulingPolicy {
    HealthSchedulingPolicy::parse(text).unwrap()
}

/// On node `n` of `view`, a pod of claim `passes` passes and one of claim `fails` fails.
fn assert_passes_and_fails(view: &MemoryView, passes: &str, fails: &str) {
    let v = filter(&pod(&[passes]), ["n"], view);
    assert!(v.failed.is_empty(), "{passes}: {v:?}");
    assert_eq!(
        failed(&filter(&pod(&[fails]), ["n"], view)),
        ["n"],
        "{fails}"
    );
}

fn example2() -> HealthSchedulingPolicy {
    HealthSchedulingPolicy::parse(
        "rules:\n  - status: StorageUnreachable\n  - status: StorageDegraded\n    accessModes: [ReadWriteOnce]\n",
    )
    .unwrap()
}

/// [`example2`] for `D`, with claims `ns/rwo` (ReadWriteOnce) and `ns/rwx` (ReadWriteMany),
/// both filesystems.
fn example2_rwo_and_rwx() -> MemoryView {
    MemoryView::default()
        .with_policy(D, example2())
        .with_claim("ns", "rwo", D, &["ReadWriteOnce"], "Filesystem")
        .with_claim("ns", "rwx", D, &["ReadWriteMany"], "Filesystem")
}

fn failed(v: &Verdict) -> Vec<&str> {
    v.failed.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn example_two_blocks_rwo_on_degraded_and_everything_on_unreachable() {
    let view = example2_rwo_and_rwx()
        .with_condition("degraded", D, "StorageDegraded", "PvMissing")
        .with_condition("down", D, "StorageUnreachable", "NetworkPartition")
        .with_conditions("fine", D, vec![]);
    let nodes = ["degraded", "down", "fine", "no-csinode"];
    let v = filter(&pod(&["rwo"]), nodes, &view);
    assert_eq!(failed(&v), ["degraded", "down"]);
    assert_eq!(v.passed, ["fine", "no-csinode"]);
    let v = filter(&pod(&["rwx"]), nodes, &view);
    assert_eq!(failed(&v), ["down"]);
    let why = &v.failed[0].1;
    assert_eq!(
        (
            why.driver.as_str(),
            why.status.as_str(),
            why.reason.as_str()
        ),
        (D, "StorageUnreachable", "NetworkPartition")
    );
    let text = why.to_string();
    for part in [D, "StorageUnreachable", "NetworkPartition", "ns/rwx"] {
        assert!(text.contains(part), "{text}");
    }
}

#[test]
fn example_one_blocks_all_pods_of_the_driver_only_when_unreachable() {
    let view = MemoryView::default()
        .with_policy(
            "rbd.csi.ceph.com",
            policy("rules:\n  - status: StorageUnreachable\n"),
        )
        .with_claim("ns", "c", "rbd.csi.ceph.com", &["ReadWriteMany"], "Block")
        .with_condition("a", "rbd.csi.ceph.com", "StorageUnreachable", "X")
        .with_condition("b", "rbd.csi.ceph.com", "StorageDegraded", "Y");
    let v = filter(&pod(&["c"]), ["a", "b"], &view);
    assert_eq!(failed(&v), ["a"]);
}

#[test]
fn pods_without_policed_claims_pass_untouched() {
    let view = MemoryView::default()
        .with_claim(
            "ns",
            "other",
            "other.driver",
            &["ReadWriteOnce"],
            "Filesystem",
        )
        .with_claim("ns", "c", D, &["ReadWriteOnce"], "Filesystem")
        .with_condition("a", D, "StorageUnreachable", "X")
        .with_condition("b", "other.driver", "StorageUnreachable", "X");
    // No policy for either driver: nothing is filtered.
    assert!(
        filter(&pod(&["other", "c", "unbound"]), ["a", "b"], &view)
            .failed
            .is_empty()
    );
    // A policy for D does not reach claims of other drivers, nor conditions of other drivers.
    let view = view.with_policy(D, example2());
    assert_eq!(
        failed(&filter(&pod(&["other"]), ["a", "b"], &view)),
        Vec::<&str>::new()
    );
    assert_eq!(failed(&filter(&pod(&["c"]), ["a", "b"], &view)), ["a"]);
    let no_volumes: Pod =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "x"}})).unwrap();
    assert!(filter(&no_volumes, ["a"], &view).failed.is_empty());
}

#[test]
fn the_conditions_own_access_mode_scoping_must_cover_the_claim() {
    let view = MemoryView::default()
        .with_policy(D, policy("rules: [{status: StorageUnreachable}]"))
        .with_claim("ns", "rwo", D, &["ReadWriteOnce"], "Filesystem")
        .with_claim(
            "ns",
            "rwx",
            D,
            &["ReadWriteMany", "ReadOnlyMany"],
            "Filesystem",
        )
        .with_conditions(
            "n",
            D,
            vec![condition(
                "StorageUnreachable",
                "NfsDown",
                Some("ReadWriteMany"),
                None,
            )],
        );
    assert_passes_and_fails(&view, "rwo", "rwx");
}

#[test]
fn the_conditions_own_volume_mode_scoping_must_cover_the_claim() {
    let view = MemoryView::default()
        .with_policy(D, policy("rules: [{status: StorageDegraded}]"))
        .with_claim("ns", "fs", D, &["ReadWriteOnce"], "Filesystem")
        .with_claim("ns", "blk", D, &["ReadWriteOnce"], "Block")
        .with_conditions(
            "n",
            D,
            vec![condition(
                "StorageDegraded",
                "BlockPathBroken",
                None,
                Some("Block"),
            )],
        );
    assert_passes_and_fails(&view, "fs", "blk");
}

#[test]
fn a_rules_volume_mode_must_equal_the_claims() {
    let view = MemoryView::default()
        .with_policy(
            D,
            policy("rules: [{status: StorageDegraded, volumeMode: Block}]"),
        )
        .with_claim("ns", "fs", D, &["ReadWriteOnce"], "Filesystem")
        .with_claim("ns", "blk", D, &["ReadWriteOnce"], "Block")
        .with_condition("n", D, "StorageDegraded", "Slow");
    assert_passes_and_fails(&view, "fs", "blk");
}

#[test]
fn any_one_claim_failing_fails_the_node() {
    let view = example2_rwo_and_rwx().with_condition("n", D, "StorageDegraded", "Slow");
    let v = filter(&pod(&["rwx", "rwo"]), ["n"], &view);
    assert_eq!(v.failed[0].1.claim, "ns/rwo");
}

#[test]
fn an_ephemeral_volume_is_its_generated_claim() {
    let view = MemoryView::default()
        .with_policy(D, example2())
        .with_claim("ns", "p-scratch", D, &["ReadWriteOnce"], "Filesystem")
        .with_condition("n", D, "StorageUnreachable", "X");
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [], "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]}
    }))
    .unwrap();
    assert_eq!(failed(&filter(&pod, ["n"], &view)), ["n"]);
}
