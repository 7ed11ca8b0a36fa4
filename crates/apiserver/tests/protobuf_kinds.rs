//! Protobuf bodies for every stored kind, encoded by a third-party encoder (the prost types of
//! the `k8s-pb` crate, generated from the Kubernetes `generated.proto` files): each is created
//! over HTTP as protobuf and as the same object in JSON, and the two stored objects must be
//! equal. Also PUT, the status subresource, pods/binding and pods/eviction as protobuf, and
//! hostile protobuf bodies: 400, nothing stored.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod apiserver_http;
mod protobuf_fixtures;
mod support;

use apiserver_http::*;
use k8s_pb::api::coordination::v1 as coordination;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::events::v1 as events;
use k8s_pb::api::policy::v1 as policy;
use k8s_pb::api::storage::v1 as storage;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message;
use protobuf_fixtures::*;
use serde_json::json;
use std::collections::BTreeMap;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rich_pod_in_protobuf_is_stored_as_its_json() {
    let (_dir, _server, api) = start_server(&[]);
    let stored = same_as_json(
        &api,
        PODS,
        body("v1", "Pod", &rich_pod("rich")),
        rich_pod_json(),
    )
    .await;
    assert_eq!(
        stored["spec"]["containers"][0]["readinessProbe"]["httpGet"]["port"],
        8080
    );
    assert_eq!(
        stored["spec"]["volumes"][2]["configMap"]["name"],
        "settings"
    );
}

/// Every other stored kind, each with the wire types it carries (Quantity maps, MicroTime,
/// IntOrString, inlined volume sources, int32 and bool fields), against its JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_stored_kind_in_protobuf_is_stored_as_its_json() {
    let (_dir, _server, api) = start_server(&[]);
    let storage = BTreeMap::from([("storage".to_string(), q("1Gi"))]);

    let claim = core::PersistentVolumeClaim {
        metadata: meta("claim"),
        spec: Some(core::PersistentVolumeClaimSpec {
            access_modes: vec!["ReadWriteOnce".into()],
            resources: Some(core::VolumeResourceRequirements {
                requests: storage.clone(),
                limits: BTreeMap::new(),
            }),
            storage_class_name: s(""),
            volume_mode: s("Filesystem"),
            selector: selector("disk"),
            ..Default::default()
        }),
        status: None,
    };
    let pvc = same_as_json(&api, PVCS, body("v1", "PersistentVolumeClaim", &claim), json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"labels": {"app": "web"}, "annotations": {"note": ""}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "", "volumeMode": "Filesystem", "selector": {"matchLabels": {"app": "disk"}}}})).await;
    assert_eq!(pvc["spec"]["storageClassName"], "");

    let pv = core::PersistentVolume {
        metadata: meta("pv"),
        spec: Some(core::PersistentVolumeSpec {
            capacity: storage.clone(),
            persistent_volume_source: Some(core::PersistentVolumeSource {
                csi: Some(core::CSIPersistentVolumeSource {
                    driver: s("hostpath.volhealth.dev"),
                    volume_handle: s("vol-1"),
                    fs_type: s("ext4"),
                    volume_attributes: BTreeMap::from([("pool".into(), "a".into())]),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            access_modes: vec!["ReadWriteOnce".into()],
            claim_ref: obj_ref("PersistentVolumeClaim", "default", "claim"),
            persistent_volume_reclaim_policy: s("Delete"),
            storage_class_name: s("fast"),
            ..Default::default()
        }),
        status: None,
    };
    same_as_json(&api, "/api/v1/persistentvolumes", body("v1", "PersistentVolume", &pv), json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"labels": {"app": "web"}, "annotations": {"note": ""}},
        "spec": {"capacity": {"storage": "1Gi"},
            "csi": {"driver": "hostpath.volhealth.dev", "volumeHandle": "vol-1", "fsType": "ext4", "volumeAttributes": {"pool": "a"}},
            "accessModes": ["ReadWriteOnce"],
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "claim", "apiVersion": "v1"},
            "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "fast"}})).await;

    let node = core::Node {
        metadata: meta("node"),
        spec: Some(core::NodeSpec {
            unschedulable: Some(true),
            taints: vec![core::Taint {
                key: s("dedicated"),
                value: s("storage"),
                effect: s("NoSchedule"),
                time_added: None,
            }],
            ..Default::default()
        }),
        status: Some(core::NodeStatus {
            capacity: BTreeMap::from([("cpu".into(), q("2")), ("pods".into(), q("110"))]),
            conditions: vec![core::NodeCondition {
                r#type: s("Ready"),
                status: s("True"),
                last_heartbeat_time: time(1_700_000_000),
                reason: s("KubeletReady"),
                ..Default::default()
            }],
            addresses: vec![core::NodeAddress {
                r#type: s("InternalIP"),
                address: s("10.0.0.5"),
            }],
            ..Default::default()
        }),
    };
    same_as_json(&api, "/api/v1/nodes", body("v1", "Node", &node), json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"labels": {"app": "web"}, "annotations": {"note": ""}},
        "spec": {"unschedulable": true, "taints": [{"key": "dedicated", "value": "storage", "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": "2", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2023-11-14T22:13:20Z", "reason": "KubeletReady"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}]}})).await;

    let event = core::Event {
        metadata: meta("ev"),
        involved_object: obj_ref("PersistentVolumeClaim", "default", "claim"),
        reason: s("VolumeUnhealthy"),
        message: s("Abnormal: slow"),
        source: Some(core::EventSource {
            component: s("volhealth"),
            host: None,
        }),
        first_timestamp: time(1_700_000_000),
        last_timestamp: time(1_700_000_060),
        count: Some(2),
        r#type: s("Warning"),
        reporting_component: s("volhealth"),
        ..Default::default()
    };
    same_as_json(&api, "/api/v1/namespaces/default/events", body("v1", "Event", &event), json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"labels": {"app": "web"}, "annotations": {"note": ""}},
        "involvedObject": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "claim", "apiVersion": "v1"},
        "reason": "VolumeUnhealthy", "message": "Abnormal: slow", "source": {"component": "volhealth"},
        "firstTimestamp": "2023-11-14T22:13:20Z", "lastTimestamp": "2023-11-14T22:14:20Z",
        "count": 2, "type": "Warning", "reportingComponent": "volhealth"})).await;

    let event = events::Event {
        metadata: meta("ev1"),
        event_time: micro(1_700_000_000, 250_000),
        reporting_controller: s("volhealth.dev/monitor"),
        reporting_instance: s("monitor-1"),
        action: s("Check"),
        reason: s("VolumeUnhealthy"),
        regarding: obj_ref("PersistentVolumeClaim", "default", "claim"),
        note: s("slow"),
        r#type: s("Warning"),
        ..Default::default()
    };
    let ev = same_as_json(&api, "/apis/events.k8s.io/v1/namespaces/default/events", body("events.k8s.io/v1", "Event", &event), json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"labels": {"app": "web"}, "annotations": {"note": ""}},
        "eventTime": "2023-11-14T22:13:20.250000Z", "reportingController": "volhealth.dev/monitor",
        "reportingInstance": "monitor-1", "action": "Check", "reason": "VolumeUnhealthy",
        "regarding": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "claim", "apiVersion": "v1"},
        "note": "slow", "type": "Warning"})).await;
    assert_eq!(ev["eventTime"], "2023-11-14T22:13:20.250000Z");

    let csinode = storage::CSINode {
        metadata: meta("node"),
        spec: Some(storage::CSINodeSpec {
            drivers: vec![storage::CSINodeDriver {
                name: s("hostpath.volhealth.dev"),
                node_id: s("node"),
                topology_keys: vec!["topology.volhealth.dev/node".into()],
                allocatable: Some(storage::VolumeNodeResources { count: Some(10) }),
            }],
        }),
    };
    same_as_json(
        &api,
        CSINODES,
        body("storage.k8s.io/v1", "CSINode", &csinode),
        json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
        "metadata": {"labels": {"app": "web"}, "annotations": {"note": ""}},
        "spec": {"drivers": [{"name": "hostpath.volhealth.dev", "nodeID": "node",
            "topologyKeys": ["topology.volhealth.dev/node"], "allocatable": {"count": 10}}]}}),
    )
    .await;

    let driver = storage::CSIDriver {
        metadata: meta("hostpath.volhealth.dev"),
        spec: Some(storage::CSIDriverSpec {
            attach_required: Some(false),
            pod_info_on_mount: Some(true),
            volume_lifecycle_modes: vec!["Persistent".into(), "Ephemeral".into()],
            storage_capacity: Some(false),
            fs_group_policy: s("File"),
            token_requests: vec![storage::TokenRequest {
                audience: s("vault"),
                expiration_seconds: Some(3600),
            }],
            ..Default::default()
        }),
    };
    same_as_json(&api, "/apis/storage.k8s.io/v1/csidrivers", body("storage.k8s.io/v1", "CSIDriver", &driver), json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
        "metadata": {"labels": {"app": "web"}, "annotations": {"note": ""}},
        "spec": {"attachRequired": false, "podInfoOnMount": true, "volumeLifecycleModes": ["Persistent", "Ephemeral"],
            "storageCapacity": false, "fsGroupPolicy": "File", "tokenRequests": [{"audience": "vault", "expirationSeconds": 3600}]}})).await;

    let class = storage::StorageClass {
        metadata: meta("fast"),
        provisioner: s("hostpath.volhealth.dev"),
        parameters: BTreeMap::from([("pool".into(), "a".into())]),
        reclaim_policy: s("Retain"),
        mount_options: vec!["noatime".into()],
        allow_volume_expansion: Some(true),
        volume_binding_mode: s("WaitForFirstConsumer"),
        allowed_topologies: vec![],
    };
    same_as_json(&api, "/apis/storage.k8s.io/v1/storageclasses", body("storage.k8s.io/v1", "StorageClass", &class), json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"labels": {"app": "web"}, "annotations": {"note": ""}},
        "provisioner": "hostpath.volhealth.dev", "parameters": {"pool": "a"}, "reclaimPolicy": "Retain",
        "mountOptions": ["noatime"], "allowVolumeExpansion": true, "volumeBindingMode": "WaitForFirstConsumer"})).await;

    let va = storage::VolumeAttachment {
        metadata: meta("va"),
        spec: Some(storage::VolumeAttachmentSpec {
            attacher: s("hostpath.volhealth.dev"),
            source: Some(storage::VolumeAttachmentSource {
                persistent_volume_name: s("pv"),
                inline_volume_spec: None,
            }),
            node_name: s("node"),
        }),
        status: None,
    };
    same_as_json(&api, "/apis/storage.k8s.io/v1/volumeattachments", body("storage.k8s.io/v1", "VolumeAttachment", &va), json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment",
        "metadata": {"labels": {"app": "web"}, "annotations": {"note": ""}},
        "spec": {"attacher": "hostpath.volhealth.dev", "source": {"persistentVolumeName": "pv"}, "nodeName": "node"}})).await;

    let lease = coordination::Lease {
        metadata: meta("leader"),
        spec: Some(coordination::LeaseSpec {
            holder_identity: s("monitor-1"),
            lease_duration_seconds: Some(15),
            acquire_time: micro(1_700_000_000, 1),
            renew_time: micro(1_700_000_010, 999_999),
            lease_transitions: Some(0),
            ..Default::default()
        }),
    };
    same_as_json(&api, "/apis/coordination.k8s.io/v1/namespaces/default/leases", body("coordination.k8s.io/v1", "Lease", &lease), json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"labels": {"app": "web"}, "annotations": {"note": ""}},
        "spec": {"holderIdentity": "monitor-1", "leaseDurationSeconds": 15,
            "acquireTime": "2023-11-14T22:13:20.000001Z", "renewTime": "2023-11-14T22:13:30.999999Z",
            "leaseTransitions": 0}})).await;

    let pdb = policy::PodDisruptionBudget {
        metadata: meta("pdb"),
        spec: Some(policy::PodDisruptionBudgetSpec {
            min_available: Some(IntOrString {
                r#type: Some(1),
                int_val: None,
                str_val: s("50%"),
            }),
            selector: selector("web"),
            max_unavailable: None,
            unhealthy_pod_eviction_policy: s("AlwaysAllow"),
        }),
        status: None,
    };
    same_as_json(&api, "/apis/policy/v1/namespaces/default/poddisruptionbudgets", body("policy/v1", "PodDisruptionBudget", &pdb), json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"labels": {"app": "web"}, "annotations": {"note": ""}},
        "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}, "unhealthyPodEvictionPolicy": "AlwaysAllow"}})).await;
}

/// A typed client's other pod writes in protobuf: PUT, PUT of the status (what a kubelet
/// writes), pods/binding (the scheduler) and pods/eviction (`kubectl drain`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_status_binding_and_eviction_in_protobuf() {
    let (_dir, _server, api) = start_server(&[]);
    let web = format!("{PODS}/web");
    let a = send(&api, "POST", PODS, body("v1", "Pod", &simple_pod("web"))).await;
    assert_eq!(a.code, 201, "{}", a.text);

    // PUT with the stored resourceVersion and a new label.
    let mut pod = simple_pod("web");
    let m = pod.metadata.as_mut().unwrap();
    m.resource_version = a.json["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_string);
    m.labels.insert("tier".into(), "front".into());
    let u = send(&api, "PUT", &web, body("v1", "Pod", &pod)).await;
    assert_eq!(u.code, 200, "{}", u.text);
    assert_eq!(
        api.get(&web).await.json["metadata"]["labels"]["tier"],
        "front"
    );

    // pods/binding with a Binding message.
    let binding = body(
        "v1",
        "Binding",
        &core::Binding {
            metadata: Some(meta::ObjectMeta {
                name: s("web"),
                ..Default::default()
            }),
            target: Some(core::ObjectReference {
                kind: s("Node"),
                name: s("node-a"),
                api_version: s("v1"),
                ..Default::default()
            }),
        },
    );
    let b = send(&api, "POST", &format!("{web}/binding"), binding).await;
    assert_eq!(b.code, 201, "{}", b.text);
    let stored = api.get(&web).await.json;
    assert_eq!(stored["spec"]["nodeName"], "node-a", "{stored}");

    // The status a kubelet writes, through the status subresource.
    let mut pod = simple_pod("web");
    pod.metadata.as_mut().unwrap().resource_version = stored["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_string);
    pod.status = Some(core::PodStatus {
        phase: s("Running"),
        conditions: vec![core::PodCondition {
            r#type: s("Ready"),
            status: s("True"),
            last_transition_time: time(1_700_000_000),
            ..Default::default()
        }],
        host_ip: s("10.0.0.5"),
        pod_ip: s("10.1.0.7"),
        pod_ips: vec![core::PodIp { ip: s("10.1.0.7") }],
        start_time: time(1_700_000_000),
        container_statuses: vec![core::ContainerStatus {
            name: s("c"),
            ready: Some(true),
            restart_count: Some(0),
            image: s("busybox"),
            image_id: s("docker.io/library/busybox@sha256:1"),
            started: Some(true),
            state: Some(core::ContainerState {
                running: Some(core::ContainerStateRunning {
                    started_at: time(1_700_000_001),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }],
        qos_class: s("BestEffort"),
        ..Default::default()
    });
    let st = send(
        &api,
        "PUT",
        &format!("{web}/status"),
        body("v1", "Pod", &pod),
    )
    .await;
    assert_eq!(st.code, 200, "{}", st.text);
    let status = &api.get(&web).await.json["status"];
    assert_eq!(status["phase"], "Running", "{status}");
    assert_eq!(status["podIPs"], json!([{"ip": "10.1.0.7"}]), "{status}");
    assert_eq!(
        status["containerStatuses"][0]["state"]["running"]["startedAt"],
        "2023-11-14T22:13:21Z"
    );
    assert_eq!(status["containerStatuses"][0]["restartCount"], 0);

    // pods/eviction with an Eviction message (policy/v1) on the core pod.
    let eviction = body(
        "policy/v1",
        "Eviction",
        &policy::Eviction {
            metadata: Some(meta::ObjectMeta {
                name: s("web"),
                namespace: s("default"),
                ..Default::default()
            }),
            delete_options: Some(meta::DeleteOptions {
                grace_period_seconds: Some(0),
                ..Default::default()
            }),
        },
    );
    let e = send(&api, "POST", &format!("{web}/eviction"), eviction).await;
    assert_eq!(e.code, 201, "{}", e.text);
    let gone = api.get(&web).await;
    assert!(
        gone.code == 404 || gone.json["metadata"]["deletionTimestamp"].is_string(),
        "{}",
        gone.text
    );
}

/// Cases: 64 in every run (each is an HTTP request); the fuzz run sets `VOLHEALTH_FUZZ_CASES`.
fn cases() -> u32 {
    volhealth_testkit::fuzz_cases(64)
}

/// Arbitrary bytes after the envelope, for every kind the tables read: 400, and nothing is
/// stored.
#[test]
fn hostile_protobuf_bodies_are_400_and_store_nothing() {
    use proptest::prelude::*;
    let (_dir, _server, api) = start_server(&[]);
    let rt = volhealth_testkit::runtime();
    let paths = [
        ("v1", "Pod", PODS),
        ("v1", "PersistentVolumeClaim", PVCS),
        ("v1", "Node", "/api/v1/nodes"),
        ("storage.k8s.io/v1", "CSINode", CSINODES),
        (
            "coordination.k8s.io/v1",
            "Lease",
            "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        ),
        (
            "policy/v1",
            "PodDisruptionBudget",
            "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        ),
    ];
    let count = |path: &str| {
        rt.block_on(api.get(path)).json["items"]
            .as_array()
            .map_or(0, Vec::len)
    };
    let config = ProptestConfig {
        cases: cases(),
        ..ProptestConfig::default()
    };
    proptest!(config, |(tail in proptest::collection::vec(any::<u8>(), 1..256), which in 0..paths.len())| {
        let (av, kind, path) = paths[which];
        // A TypeMeta then arbitrary bytes as the object: field 2 of the envelope.
        let mut raw = vec![0x12];
        let mut len = tail.len();
        while len >= 0x80 {
            raw.push((len as u8) | 0x80);
            len >>= 7;
        }
        raw.push(len as u8);
        raw.extend(&tail);
        let unknown = Unknown {
            type_meta: Some(TypeMeta { api_version: Some(av.into()), kind: Some(kind.into()) }),
            raw: None,
            content_encoding: None,
            content_type: None,
        };
        let mut sent = [b"k8s\0".to_vec(), unknown.encode_to_vec()].concat();
        sent.extend(raw);
        let answer = rt.block_on(send(&api, "POST", path, sent));
        if answer.code == 201 {
            // Bytes that happen to be a valid, named object (rare, for long fuzz runs) are an
            // object like any other: removed, so the count stays meaningful.
            let name = answer.json["metadata"]["name"].as_str().unwrap_or_default().to_string();
            rt.block_on(api.delete(&format!("{path}/{name}?gracePeriodSeconds=0")));
        } else {
            // A nameless object is refused for its name (422), anything else as malformed.
            prop_assert!(answer.code == 400 || answer.code == 422, "{path}: {} {}", answer.code, answer.text);
        }
        prop_assert_eq!(count(path), 0);
    });
}
