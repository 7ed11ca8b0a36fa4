//! CSINode storage health against fakes: spec.drivers kept current, status written and cleared,
//! and the Events of both object kinds.

use crate::tests::agent_world::{DRIVER, World, backend, event_reasons, world};
use crate::tests::fakes::entry;
use volhealth_csi::v1;
use volhealth_csi::v1::VolumeHealthErrorType as V;

#[tokio::test(start_paused = true)]
async fn storage_health_appears_with_its_scope_and_clears() {
    use v1::StorageHealthErrorType as S;
    let w = world();
    // No CSINode yet: the agent creates it with the driver before writing status.
    *w.node.storage.lock().unwrap() = Ok(vec![backend(S::StorageDegraded, "SlowDisks", true)]);
    w.cycle().await.unwrap();
    let csinode = w.cluster.csinode.lock().unwrap().clone().unwrap();
    assert_eq!(csinode.spec.drivers[0].name, DRIVER);
    assert_eq!(
        csinode.metadata.owner_references.unwrap()[0].uid,
        "node-uid"
    );
    let health = w.cluster.storage_health();
    assert_eq!(health.len(), 1);
    let cond = &health[0].health_conditions.as_ref().unwrap()[0];
    assert_eq!(health[0].name, DRIVER);
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("StorageDegraded", "SlowDisks")
    );
    assert_eq!(cond.access_mode.as_deref(), Some("ReadWriteOnce"));
    assert_eq!(cond.volume_mode.as_deref(), Some("Filesystem"));
    assert!(w.metrics.families.encode().contains(
        r#"csi_node_storage_health_status{driver_name="d.example.com",status="StorageDegraded",reason="SlowDisks"} 1"#
    ));

    *w.node.storage.lock().unwrap() = Ok(vec![backend(S::StorageUnreachable, "Partition", false)]);
    w.cycle().await.unwrap();
    let text = w.metrics.families.encode();
    assert!(
        !text.contains("SlowDisks") && text.contains("reason=\"Partition\"} 1"),
        "{text}"
    );

    *w.node.storage.lock().unwrap() = Err(tonic::Status::unavailable("down"));
    w.cycle().await.unwrap();
    assert_eq!(
        w.cluster.storage_health()[0]
            .health_conditions
            .as_ref()
            .unwrap()[0]
            .reason,
        "Partition"
    );

    *w.node.storage.lock().unwrap() = Ok(vec![]);
    w.cycle().await.unwrap();
    assert!(w.cluster.storage_health().is_empty());
    assert!(!w.metrics.families.encode().contains("reason=\"Partition\""));
    let writes = w.cluster.writes();
    assert_eq!(
        writes,
        vec![
            "csinodes create",
            "csinodes/status",
            "csinodes/status",
            "csinodes/status"
        ]
    );
    w.cycle().await.unwrap();
    assert_eq!(w.cluster.writes().len(), 4, "steady state writes nothing");
}

#[tokio::test(start_paused = true)]
async fn missing_driver_is_added_to_spec_drivers_before_status() {
    use v1::StorageHealthErrorType as S;
    let w = world();
    w.cluster.set_csinode(&["someone.else"], vec![]);
    *w.node.storage.lock().unwrap() = Ok(vec![backend(S::StorageUnreachable, "Partition", false)]);
    w.cycle().await.unwrap();
    assert_eq!(w.cluster.writes(), vec!["csinodes", "csinodes/status"]);
    let names: Vec<String> = w
        .cluster
        .csinode
        .lock()
        .unwrap()
        .as_ref()
        .unwrap()
        .spec
        .drivers
        .iter()
        .map(|d| d.name.clone())
        .collect();
    assert_eq!(names, vec!["someone.else".to_string(), DRIVER.to_string()]);
}

/// Takes the waiting Events and asserts they are one of reason `csinode` on node-a's CSINode
/// and one of reason `pod` on pod `web`.
fn assert_csinode_and_pod_events(w: &World, csinode: &'static str, pod: &'static str) {
    let mut got = event_reasons(w);
    got.sort();
    assert_eq!(
        got,
        vec![
            ("CSINode".into(), csinode, "node-a".into()),
            ("Pod".into(), pod, "web".into()),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn transitions_raise_events_on_the_pod_and_the_csinode() {
    use v1::StorageHealthErrorType as S;
    use volhealth_writer::events::{
        REASON_STORAGE_DEGRADED, REASON_STORAGE_RECOVERED, REASON_UNKNOWN, REASON_VOLUME_DEGRADED,
        REASON_VOLUME_RECOVERED,
    };
    let w = world();
    w.one_pod();
    w.cluster.set_csinode(&[DRIVER], vec![]);
    w.report(V::Inaccessible, "Gone");
    *w.node.storage.lock().unwrap() = Ok(vec![backend(S::StorageUnreachable, "Partition", false)]);
    w.cycle().await.unwrap();
    assert_csinode_and_pod_events(&w, REASON_STORAGE_DEGRADED, REASON_VOLUME_DEGRADED);
    // Unchanged: no Event. Unknown value: a Warning, once.
    w.node.set_volume(
        "vol-1",
        Ok(vec![
            entry(V::Inaccessible, "Gone", "m"),
            volhealth_csi::v1::volume_health::VolumeHealthEntry {
                status: 42,
                reason: "Future".into(),
                message: String::new(),
            },
        ]),
    );
    w.cycle().await.unwrap();
    w.cycle().await.unwrap();
    assert_eq!(
        event_reasons(&w),
        vec![("Pod".into(), REASON_UNKNOWN, "web".into())]
    );
    w.node.set_volume("vol-1", Ok(vec![]));
    *w.node.storage.lock().unwrap() = Ok(vec![]);
    w.cycle().await.unwrap();
    assert_csinode_and_pod_events(&w, REASON_STORAGE_RECOVERED, REASON_VOLUME_RECOVERED);
    assert!(
        w.metrics
            .families
            .encode()
            .contains(r#"csi_volume_health_unknown_condition_total{status="42"} 1"#),
        "counted once per transition, not once per cycle"
    );
}

/// The coverage annotation on the fake's CSINode.
fn published(w: &World) -> Option<String> {
    let csinode = w.cluster.csinode.lock().unwrap().clone()?;
    csinode
        .metadata
        .annotations?
        .get(volhealth_writer::coverage::NODE_SOURCES)
        .cloned()
}

#[tokio::test(start_paused = true)]
async fn the_node_sources_are_published_once_and_again_only_when_they_change() {
    let w = world();
    // A CSINode the kubelet made: the agent adds what answers for each driver, once.
    w.cluster.set_csinode(&[DRIVER], vec![]);
    w.cycle().await.unwrap();
    assert_eq!(
        published(&w).as_deref(),
        Some(r#"{"d.example.com":"health-rpcs"}"#)
    );
    w.cycle().await.unwrap();
    w.cycle().await.unwrap();
    assert_eq!(
        w.cluster.annotation_writes.lock().unwrap().len(),
        1,
        "steady state writes nothing"
    );

    // The driver re-registers without its volume health RPC: one more write.
    w.drivers
        .insert(crate::tests::fakes::driver(DRIVER, &w.node, false, true));
    w.cycle().await.unwrap();
    assert_eq!(
        published(&w).as_deref(),
        Some(r#"{"d.example.com":"none"}"#)
    );
    let writes = w.cluster.annotation_writes.lock().unwrap().clone();
    assert_eq!(writes.len(), 2);
    let keys: Vec<&String> = writes[1]["metadata"].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ["annotations"],
        "the patch touches the annotations alone"
    );
}

#[tokio::test(start_paused = true)]
async fn a_csinode_the_agent_creates_carries_the_node_sources_from_the_start() {
    let w = world();
    w.cycle().await.unwrap();
    assert_eq!(
        published(&w).as_deref(),
        Some(r#"{"d.example.com":"health-rpcs"}"#)
    );
    assert!(w.cluster.annotation_writes.lock().unwrap().is_empty());
    assert_eq!(w.cluster.writes()[0], "csinodes create");
}
