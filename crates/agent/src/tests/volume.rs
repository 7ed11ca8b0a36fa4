//! Pod volume health against fakes: what is probed, what is written and when, and how refused
//! and forbidden writes are handled.

use crate::error::Error;
use crate::tests::agent_world::{
    DRIVER, World, pod_writes, reporting, statuses, world, world_with,
};
use crate::tests::fakes::entry;
use std::sync::atomic::Ordering;
use std::time::Duration;
use volhealth_csi::v1::VolumeHealthErrorType as V;

#[tokio::test(start_paused = true)]
async fn each_volume_status_appears_and_clears() {
    let w = world();
    w.one_pod();
    for (status, name) in [
        (V::Inaccessible, "Inaccessible"),
        (V::DataLoss, "DataLoss"),
        (V::Degraded, "Degraded"),
    ] {
        w.report(status, "Injected");
        w.cycle().await.unwrap();
        assert_eq!(
            statuses(&w),
            vec![(name.to_string(), "Injected".to_string())]
        );
        let health = w.cluster.pod_health("ns", "web");
        assert_eq!(health[0].name, "data", "keyed by the pod.spec.volumes name");
        assert!(
            w.metrics
                .families
                .encode()
                .contains(&format!(r#"status="{name}",reason="Injected"}} 1"#))
        );
        w.node.set_volume("vol-1", Ok(vec![]));
        w.cycle().await.unwrap();
        assert!(
            w.cluster.pod_health("ns", "web").is_empty(),
            "an empty answer clears at once"
        );
        assert!(!w.metrics.families.encode().contains("reason=\"Injected\""));
    }
    assert_eq!(
        pod_writes(&w),
        6,
        "one write per change: {:?}",
        w.cluster.writes()
    );
}

#[tokio::test(start_paused = true)]
async fn steady_state_and_restart_write_nothing() {
    let w = reporting(V::Degraded, "Slow");
    w.cycle().await.unwrap();
    w.cycles(5).await;
    assert_eq!(pod_writes(&w), 1);
    assert_eq!(w.node.volume_call_count(), 6);

    // A new agent over the same stored state writes nothing either.
    let stored = w.cluster.pod_health("ns", "web");
    let w2 = world();
    w2.one_pod();
    w2.cluster.set_pod_health("ns", "web", stored.clone());
    w2.report(V::Degraded, "Slow");
    w2.cycle().await.unwrap();
    assert_eq!(pod_writes(&w2), 0, "{:?}", w2.cluster.writes());
    assert_eq!(w2.cluster.pod_health("ns", "web"), stored);
}

#[tokio::test(start_paused = true)]
async fn failed_rpc_keeps_what_is_stored() {
    let w = reporting(V::DataLoss, "Corrupt");
    w.cycle().await.unwrap();
    w.node
        .set_volume("vol-1", Err(tonic::Status::unavailable("driver down")));
    w.cycles(3).await;
    assert_eq!(statuses(&w), vec![("DataLoss".into(), "Corrupt".into())]);
    assert_eq!(pod_writes(&w), 1);
    assert!(
        w.metrics
            .families
            .encode()
            .contains(r#"method="NodeGetVolumeHealth",result="error"} 3"#)
    );
}

#[tokio::test(start_paused = true)]
async fn never_attempted_volumes_are_not_probed() {
    let w = world();
    w.cluster
        .add_pod_with_pv("ns", "web", "uid-1", "data", DRIVER, "vol-1");
    w.report(V::Degraded, "Slow");
    w.cycle().await.unwrap();
    assert_eq!(w.node.volume_call_count(), 0);
    assert!(w.cluster.pod_health("ns", "web").is_empty());
    w.dirs.attempt("uid-1", "data");
    w.cycle().await.unwrap();
    assert_eq!(w.node.volume_call_count(), 1);
    let (_, req) = w.node.volume_calls.lock().unwrap()[0].clone();
    assert_eq!(req.volume_id, "vol-1");
    assert_eq!(
        req.volume_publish_path,
        "/kubelet/pods/uid-1/pv-vol-1/mount"
    );
}

#[tokio::test(start_paused = true)]
async fn drivers_without_the_capabilities_are_never_called() {
    let w = world_with(false, false, 4, Duration::ZERO);
    w.one_pod();
    w.cluster.set_csinode(&[DRIVER], vec![]);
    w.cycles(3).await;
    assert_eq!(w.node.volume_call_count(), 0);
    assert_eq!(w.node.storage_calls.load(Ordering::SeqCst), 0);
    assert!(w.cluster.writes().is_empty());
}

#[tokio::test(start_paused = true)]
async fn unknown_drivers_are_not_probed_and_keep_the_stored_value() {
    let w = world();
    w.cluster
        .add_pod_with_pv("ns", "web", "uid-1", "data", "other.example.com", "vol-9");
    w.dirs.attempt("uid-1", "data");
    w.cycle().await.unwrap();
    assert_eq!(w.node.volume_call_count(), 0);
    assert!(w.cluster.writes().iter().all(|w| !w.starts_with("pods/")));
}

#[tokio::test(start_paused = true)]
async fn forbidden_write_stops_the_agent_with_the_identity_error() {
    let w = reporting(V::Degraded, "Slow");
    w.fail_writes(403, "forbidden");
    let err = w.cycle().await.unwrap_err();
    assert!(matches!(err, Error::NodeIdentity { .. }), "{err}");
    assert!(err.to_string().contains("does not match"), "{err}");
}

/// Twenty cycles over a write that does not take (`what`: how it fails) try it only a few times.
async fn twenty_cycles_back_off(w: &World, what: &str) {
    w.cycles(20).await;
    let n = pod_writes(w);
    assert!(
        (2..=5).contains(&n),
        "20 cycles, {what} writes backed off to {n} attempts"
    );
}

#[tokio::test(start_paused = true)]
async fn refused_writes_are_retried_slowly() {
    let w = world_with(true, false, 4, Duration::ZERO);
    w.one_pod();
    w.report(V::Degraded, "Slow");
    w.fail_writes(422, "invalid");
    twenty_cycles_back_off(&w, "refused").await;
    assert!(w.metrics.families.encode().contains(
        r#"csi_volume_health_status_writes_total{resource="pods/status",result="rejected"}"#
    ));
    // Accepted again: written at the next allowed attempt, then quiet.
    *w.cluster.fail_writes.lock().unwrap() = None;
    w.cycles(40).await;
    assert_eq!(statuses(&w), vec![("Degraded".into(), "Slow".into())]);
}

#[tokio::test(start_paused = true)]
async fn writes_dropped_by_a_gated_api_server_back_off() {
    let w = world_with(true, false, 4, Duration::ZERO);
    w.one_pod();
    w.report(V::Degraded, "Slow");
    *w.cluster.drop_health_fields.lock().unwrap() = true;
    twenty_cycles_back_off(&w, "dropped").await;
    assert!(w.metrics.families.encode().contains(r#"result="dropped"}"#));
}

#[tokio::test(start_paused = true)]
async fn gone_pods_lose_their_metric_series() {
    let w = reporting(V::Degraded, "Slow");
    w.cycle().await.unwrap();
    assert!(
        w.metrics
            .families
            .encode()
            .contains(r#"pod="web",volume="data",status="Degraded""#)
    );
    w.cluster.pods.lock().unwrap().clear();
    w.cycle().await.unwrap();
    assert!(!w.metrics.families.encode().contains(r#"pod="web""#));
    let _ = &w.drivers;
}

#[tokio::test(start_paused = true)]
async fn inline_csi_volumes_are_probed_with_the_kubelet_handle() {
    use k8s_openapi::api::core::v1::{CSIVolumeSource, Volume};
    let w = world();
    w.one_pod();
    {
        let mut pods = w.cluster.pods.lock().unwrap();
        let pod = pods
            .get_mut(&("ns".to_string(), "web".to_string()))
            .unwrap();
        let volumes = pod.spec.as_mut().unwrap().volumes.as_mut().unwrap();
        volumes.push(Volume {
            name: "scratch".into(),
            csi: Some(CSIVolumeSource {
                driver: DRIVER.into(),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    w.dirs.attempt("uid-1", "scratch");
    let handle = crate::pod_volumes::inline_volume_handle("uid-1", "scratch");
    w.node.set_volume(
        &handle,
        Ok(vec![entry(V::Inaccessible, "EphemeralGone", "m")]),
    );
    w.cycle().await.unwrap();
    let health = w.cluster.pod_health("ns", "web");
    assert_eq!(health.len(), 1);
    assert_eq!(health[0].name, "scratch");
    let asked: Vec<String> = w
        .node
        .volume_calls
        .lock()
        .unwrap()
        .iter()
        .map(|c| c.1.volume_id.clone())
        .collect();
    assert!(
        asked.contains(&handle) && asked.contains(&"vol-1".to_string()),
        "{asked:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_lagging_watch_does_not_cause_a_second_write() {
    let w = reporting(V::Degraded, "Slow");
    // The pod source keeps serving the copy from before the write, as a watch that has not caught up would.
    let before = w.cluster.pods.lock().unwrap().clone();
    w.cycle().await.unwrap();
    assert_eq!(pod_writes(&w), 1);
    let after = std::mem::replace(&mut *w.cluster.pods.lock().unwrap(), before);
    w.cycle().await.unwrap();
    assert_eq!(
        pod_writes(&w),
        1,
        "the write's own result stands in for the lagging copy"
    );
    *w.cluster.pods.lock().unwrap() = after;
    w.cycle().await.unwrap();
    assert_eq!(pod_writes(&w), 1);
}
