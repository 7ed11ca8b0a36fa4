//! `--health-annotation`: for a driver with no health RPC at all (as vSphere's), the monitor
//! reads each bound claim's `volumehealth.storage.kubernetes.io/health` annotation.
//! `inaccessible` reaches the claim's status, a claim that loses the annotation keeps what is
//! stored (no report is not healthy), and `accessible` clears it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, Patch, PatchParams};
mod support;

use std::time::Duration;
use support::{free_addr, more_cycles};
use volhealth_driver::HealthCapabilities;
use volhealth_monitor::MonitorConfig;
use volhealth_testkit::{NodeWorld, run_monitor, wait_for};

const DRIVER: &str = "csi.vsphere.example.com";
const NODE: &str = "node-a";
const WAIT: Duration = Duration::from_secs(40);
const KEY: &str = "volumehealth.storage.kubernetes.io/health";

async fn conditions(claims: &Api<PersistentVolumeClaim>) -> Option<Vec<(String, String)>> {
    let (seen, _) = support::claim(&claims.clone().into_client()).await?;
    Some(
        seen.into_iter()
            .map(|(status, reason, _)| (status, reason))
            .collect(),
    )
}

async fn annotate(claims: &Api<PersistentVolumeClaim>, value: Option<&str>) {
    let patch = serde_json::json!({"metadata": {"annotations": {KEY: value}}});
    claims
        .patch("claim-web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_storage_systems_annotation_is_the_claims_health() {
    let w = NodeWorld::with_driver(DRIVER, NODE, |c| c.health = HealthCapabilities::NONE).await;
    let monitor_http = free_addr();
    let config = MonitorConfig {
        health_annotation: true,
        ..w.monitor_config(Some(monitor_http))
    };
    let monitor = run_monitor("monitor", config);
    let claims = Api::<PersistentVolumeClaim>::namespaced(w.admin.clone(), "default");
    let down = vec![("Inaccessible".to_string(), "VolumeInaccessible".to_string())];

    annotate(&claims, Some("inaccessible")).await;
    wait_for(WAIT, "the annotation on the claim's status", || async {
        (conditions(&claims).await? == down).then_some(())
    })
    .await;

    // The annotation goes away: nothing is reported, so what is stored stays.
    annotate(&claims, None).await;
    more_cycles(&[monitor_http], 3.0).await;
    assert_eq!(conditions(&claims).await.unwrap(), down);

    annotate(&claims, Some("accessible")).await;
    wait_for(WAIT, "the claim cleared", || async {
        conditions(&claims).await?.is_empty().then_some(())
    })
    .await;
    assert!(!monitor.ended());
    monitor.stop().unwrap();
}
