//! The monitor in this process, against the embedded API server and the reference driver over
//! real HTTP and a real unix socket: a claim whose PV is deleted loses the health that volume
//! gave it, also when the PV only gets a deletionTimestamp (a finalizer holds it); such a PV is
//! not probed for its claim any more; a claim deleted and created again under the same name
//! keeps what it has.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{NS, World};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_pv_clears_its_claim_and_a_recreated_claim_keeps_its_own() {
    let world = World::start("list,get").await;
    let mut volumes = Vec::new();
    for name in ["gone", "held", "again"] {
        volumes.push(world.bound_claim(name).await);
    }
    let monitor = world.start_monitor("monitor").await;
    for v in &volumes {
        world.inject_condition(v, "Degraded", "SlowDisk");
    }
    for name in ["gone", "held", "again"] {
        world
            .wait_conditions(name, &[("Degraded", "SlowDisk")])
            .await;
    }

    let pvs = Api::<PersistentVolume>::all(world.admin.clone());
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(world.admin.clone(), NS);
    // "gone": the PV is deleted outright. "held": a finalizer holds it, so it is only marked
    // for deletion. The driver keeps reporting both volumes as Degraded all along.
    pvs.delete("pv-gone", &DeleteParams::default())
        .await
        .unwrap();
    pvs.patch(
        "pv-held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold"]}})),
    )
    .await
    .unwrap();
    pvs.delete("pv-held", &DeleteParams::default())
        .await
        .unwrap();
    assert!(
        pvs.get("pv-held")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    // "again": PV and claim deleted, the claim created again under the same name (another
    // uid), still naming the old volume, with health of its own.
    pvs.delete("pv-again", &DeleteParams::default())
        .await
        .unwrap();
    pvcs.delete("again", &DeleteParams::default())
        .await
        .unwrap();
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "again"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                 "volumeName": "pv-again"}}))
    .unwrap();
    pvcs.create(&PostParams::default(), &claim).await.unwrap();
    pvcs.patch_status(
        "again",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "Bound", "healthStatus": {
            "healthConditions": [{"status": "Inaccessible", "reason": "SetElsewhere"}]}}})),
    )
    .await
    .unwrap();

    world.wait_conditions("gone", &[]).await;
    world.wait_conditions("held", &[]).await;
    // A few more cycles: the deleted and the held PV are not probed for their claims (the
    // driver still says Degraded), and the recreated claim keeps its own condition.
    monitor.wait_probes(3.0).await;
    assert!(world.conditions("gone").await.is_empty());
    assert!(world.conditions("held").await.is_empty());
    assert_eq!(
        world.conditions("again").await,
        [("Inaccessible".to_string(), "SetElsewhere".to_string())]
    );
    drop(monitor);
}
