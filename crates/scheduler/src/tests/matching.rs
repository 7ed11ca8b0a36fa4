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

fn example2() -> HealthSchedulingPolicy {
    HealthSchedulingPolicy::parse(
        "rules:\n  - status: StorageUnreachable\n  - status: StorageDegraded\n    accessModes: [ReadWriteOnce]\n",
    )
    .unwrap()
}

fn failed(v: &Verdict) -> Vec<&str> {
    v.failed.iter().map(|(n, _)| n.as_str()).collect()
}

#[test]
fn example_two_blocks_rwo_on_degraded_and_everything_on_unreachable() {
    let view = MemoryView::default()
        .with_policy(D, example2())
        .with_claim("ns", "rwo", D, &["ReadWriteOnce"], "Filesystem")
        .with_claim("ns", "rwx", D, &["ReadWriteMany"], "Filesystem")
        .with_conditions(
            "degraded",
            D,
            vec![condition("StorageDegraded", "PvMissing", None, None)],
        )
        .with_conditions(
            "down",
            D,
            vec![condition(
                "StorageUnreachable",
                "NetworkPartition",
                None,
                None,
            )],
        )
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
            HealthSchedulingPolicy::parse("rules:\n  - status: StorageUnreachable\n").unwrap(),
        )
        .with_claim("ns", "c", "rbd.csi.ceph.com", &["ReadWriteMany"], "Block")
        .with_conditions(
            "a",
            "rbd.csi.ceph.com",
            vec![condition("StorageUnreachable", "X", None, None)],
        )
        .with_conditions(
            "b",
            "rbd.csi.ceph.com",
            vec![condition("StorageDegraded", "Y", None, None)],
        );
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
        .with_conditions(
            "a",
            D,
            vec![condition("StorageUnreachable", "X", None, None)],
        )
        .with_conditions(
            "b",
            "other.driver",
            vec![condition("StorageUnreachable", "X", None, None)],
        );
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
        .with_policy(
            D,
            HealthSchedulingPolicy::parse("rules: [{status: StorageUnreachable}]").unwrap(),
        )
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
    assert!(filter(&pod(&["rwo"]), ["n"], &view).failed.is_empty());
    assert_eq!(failed(&filter(&pod(&["rwx"]), ["n"], &view)), ["n"]);
}

#[test]
fn the_conditions_own_volume_mode_scoping_must_cover_the_claim() {
    let view = MemoryView::default()
        .with_policy(
            D,
            HealthSchedulingPolicy::parse("rules: [{status: StorageDegraded}]").unwrap(),
        )
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
    assert!(filter(&pod(&["fs"]), ["n"], &view).failed.is_empty());
    assert_eq!(failed(&filter(&pod(&["blk"]), ["n"], &view)), ["n"]);
}

#[test]
fn a_rules_volume_mode_must_equal_the_claims() {
    let view = MemoryView::default()
        .with_policy(
            D,
            HealthSchedulingPolicy::parse("rules: [{status: StorageDegraded, volumeMode: Block}]")
                .unwrap(),
        )
        .with_claim("ns", "fs", D, &["ReadWriteOnce"], "Filesystem")
        .with_claim("ns", "blk", D, &["ReadWriteOnce"], "Block")
        .with_conditions(
            "n",
            D,
            vec![condition("StorageDegraded", "Slow", None, None)],
        );
    assert!(filter(&pod(&["fs"]), ["n"], &view).failed.is_empty());
    assert_eq!(failed(&filter(&pod(&["blk"]), ["n"], &view)), ["n"]);
}

#[test]
fn any_one_claim_failing_fails_the_node() {
    let view = MemoryView::default()
        .with_policy(D, example2())
        .with_claim("ns", "rwx", D, &["ReadWriteMany"], "Filesystem")
        .with_claim("ns", "rwo", D, &["ReadWriteOnce"], "Filesystem")
        .with_conditions(
            "n",
            D,
            vec![condition("StorageDegraded", "Slow", None, None)],
        );
    let v = filter(&pod(&["rwx", "rwo"]), ["n"], &view);
    assert_eq!(v.failed[0].1.claim, "ns/rwo");
}

#[test]
fn an_ephemeral_volume_is_its_generated_claim() {
    let view = MemoryView::default()
        .with_policy(D, example2())
        .with_claim("ns", "p-scratch", D, &["ReadWriteOnce"], "Filesystem")
        .with_conditions(
            "n",
            D,
            vec![condition("StorageUnreachable", "X", None, None)],
        );
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"containers": [], "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]}
    }))
    .unwrap();
    assert_eq!(failed(&filter(&pod, ["n"], &view)), ["n"]);
}
