//! End-to-end tests of the API server over raw HTTP: CRUD, conflicts, the status rule,
//! selectors, errors as Status objects, discovery and the non-resource endpoints.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod apiserver_http;
mod support;

use apiserver_http::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crud_conflicts_and_the_status_rule() {
    let (_dir, _server, api) = start_server(&[]);
    let created = api.create(PVCS, &pvc("data-1")).await;
    let meta = &created.json["metadata"];
    assert!(meta["uid"].as_str().is_some_and(|u| u.len() == 36));
    assert!(meta["creationTimestamp"].is_string());
    assert_eq!(meta["generation"], 1);
    let rv1 = meta["resourceVersion"].as_str().unwrap().to_string();

    let again = api.post(PVCS, &pvc("data-1")).await;
    assert_eq!(again.code_and_reason(), (409, Some("AlreadyExists")));
    assert_eq!(again.json["kind"], "Status");

    // The main resource cannot change status; /status can change only status.
    let p = api
        .patch(
            &format!("{PVCS}/data-1"),
            MERGE,
            &json!({"metadata": {"labels": {"a": "b"}}, "status": {"phase": "Lost"}}),
        )
        .await;
    assert_eq!(p.code, 200, "{}", p.text);
    assert_eq!(p.json["status"]["phase"], "Pending");
    assert_eq!(p.json["metadata"]["labels"]["a"], "b");
    let s = api
        .patch(
            &format!("{PVCS}/data-1/status"),
            MERGE,
            &json!({"spec": {"volumeName": "pv-x"}, "status": {"phase": "Bound"}}),
        )
        .await;
    assert_eq!(s.code, 200, "{}", s.text);
    assert_eq!(s.json["status"]["phase"], "Bound");
    assert!(s.json["spec"].get("volumeName").is_none());
    let got = api.get(&format!("{PVCS}/data-1/status")).await;
    assert_eq!(
        (got.code, got.json["status"]["phase"].as_str()),
        (200, Some("Bound"))
    );

    // Stale resourceVersion: 409 Conflict on PUT and on PATCH.
    let mut stale = got.json.clone();
    stale["metadata"]["resourceVersion"] = json!(rv1);
    let put = api.put(&format!("{PVCS}/data-1"), &stale).await;
    assert_eq!(
        put.code_and_reason(),
        (409, Some("Conflict")),
        "{}",
        put.text
    );
    assert!(put.message().contains("the object has been modified"));
    let sp = api
        .patch(
            &format!("{PVCS}/data-1/status"),
            MERGE,
            &json!({"metadata": {"resourceVersion": rv1}, "status": {"phase": "Lost"}}),
        )
        .await;
    assert_eq!(sp.code, 409);
    // A current resourceVersion works; an unchanged PUT does not bump it.
    let cur = api.get(&format!("{PVCS}/data-1")).await.json;
    let same = api.put(&format!("{PVCS}/data-1"), &cur).await;
    assert_eq!(same.code, 200);
    assert_eq!(
        same.json["metadata"]["resourceVersion"],
        cur["metadata"]["resourceVersion"]
    );

    // JSON patch and strategic merge on the main resource.
    let jp = api
        .patch(
            &format!("{PVCS}/data-1"),
            JSONPATCH,
            &json!([{"op": "add", "path": "/metadata/annotations", "value": {"k": "v"}}]),
        )
        .await;
    assert_eq!(
        (jp.code, jp.json["metadata"]["annotations"]["k"].as_str()),
        (200, Some("v"))
    );
    let sm = api
        .patch(
            &format!("{PVCS}/data-1"),
            STRATEGIC,
            &json!({"metadata": {"labels": {"a": null, "c": "d"}}}),
        )
        .await;
    assert_eq!(sm.json["metadata"]["labels"], json!({"c": "d"}));

    // Lists carry a resourceVersion; selectors filter.
    api.post(
        PVCS,
        &json!({"metadata": {"name": "data-2", "labels": {"tier": "db"}}, "spec": {}}),
    )
    .await;
    let all = api.get(PVCS).await;
    assert_eq!(all.json["kind"], "PersistentVolumeClaimList");
    assert!(
        !all.json["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .is_empty()
    );
    assert_eq!(all.json["items"].as_array().unwrap().len(), 2);
    for (q, n) in [
        ("labelSelector=tier%3Ddb", 1),
        ("labelSelector=tier%20in%20(db,web)", 1),
        ("labelSelector=!tier", 1),
        ("labelSelector=c", 1),
        ("labelSelector=tier!%3Ddb", 1),
        ("fieldSelector=metadata.name%3Ddata-2", 1),
        ("fieldSelector=status.phase!%3DBound", 1),
        ("fieldSelector=metadata.namespace%3Ddefault", 2),
    ] {
        let l = api
            .get(&format!("/api/v1/persistentvolumeclaims?{q}"))
            .await;
        assert_eq!(
            l.json["items"].as_array().map(Vec::len),
            Some(n),
            "{q}: {}",
            l.text
        );
    }
    let bad = api
        .get(&format!("{PVCS}?fieldSelector=spec.bogus%3Dx"))
        .await;
    assert_eq!(bad.code, 400);

    // Delete, then 404; deletecollection with a selector.
    let del = api.delete(&format!("{PVCS}/data-1")).await;
    assert_eq!(del.code, 200);
    let gone = api.get(&format!("{PVCS}/data-1")).await;
    assert_eq!(gone.code_and_reason(), (404, Some("NotFound")));
    let dc = api.delete(&format!("{PVCS}?labelSelector=tier%3Ddb")).await;
    assert_eq!(dc.code, 200);
    assert_eq!(
        api.get(PVCS).await.json["items"].as_array().unwrap().len(),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_are_status_objects() {
    let (_dir, _server, api) = start_server(&[]);
    let missing_ns = api
        .post("/api/v1/namespaces/nope/persistentvolumeclaims", &pvc("x"))
        .await;
    assert_eq!(missing_ns.code_and_reason(), (404, Some("NotFound")));
    let malformed = api
        .raw(
            "POST",
            PVCS,
            Some("application/json"),
            None,
            b"{not json".to_vec(),
        )
        .await;
    assert_eq!(malformed.code_and_reason(), (400, Some("BadRequest")));
    let ct = api
        .raw(
            "PATCH",
            &format!("{PVCS}/x"),
            Some("text/plain"),
            None,
            b"{}".to_vec(),
        )
        .await;
    assert_eq!(ct.code_and_reason(), (415, Some("UnsupportedMediaType")));
    let big = vec![b' '; 3 * 1024 * 1024 + 10];
    let large = api
        .raw("POST", PVCS, Some("application/json"), None, big)
        .await;
    assert_eq!(large.code, 413);
    let unknown = api.get("/api/v1/widgets").await;
    assert_eq!(
        (unknown.code, unknown.json["kind"].as_str()),
        (404, Some("Status"))
    );
    let apply_no_manager = api
        .patch(
            &format!("{PVCS}/x"),
            "application/apply-patch+yaml",
            &pvc("x"),
        )
        .await;
    assert_eq!(apply_no_manager.code, 422);
    let nsmismatch = api
        .post(
            PVCS,
            &json!({"metadata": {"name": "y", "namespace": "kube-system"}, "spec": {}}),
        )
        .await;
    assert_eq!(nsmismatch.code, 400);
    // Server-side apply creates on a missing object with 201, then updates with 200.
    let path = format!("{PVCS}/applied?fieldManager=test");
    let a1 = api.raw("PATCH", &path, Some("application/apply-patch+yaml"), None, b"apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: applied\nspec:\n  volumeName: a\n".to_vec()).await;
    assert_eq!(a1.code, 201, "{}", a1.text);
    let a2 = api.raw("PATCH", &path, Some("application/apply-patch+yaml"), None, b"{\"apiVersion\":\"v1\",\"kind\":\"PersistentVolumeClaim\",\"metadata\":{\"name\":\"applied\"},\"spec\":{\"volumeName\":\"b\"}}".to_vec()).await;
    assert_eq!(
        (a2.code, a2.json["spec"]["volumeName"].as_str()),
        (200, Some("b"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_version_openapi_tables_and_metrics() {
    let (_dir, _server, api) = start_server(&[]);
    let v = api.get("/version/").await;
    assert_eq!(
        (v.json["major"].as_str(), v.json["minor"].as_str()),
        (Some("1"), Some("37"))
    );
    assert_eq!(v.json["gitVersion"], "v1.37.0-volhealth");
    let legacy = api.get("/api").await;
    assert_eq!(legacy.json["kind"], "APIVersions");
    let aggregated = api
        .get_as(
            "/apis",
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        )
        .await;
    assert!(aggregated.content_type.contains("as=APIGroupDiscoveryList"));
    assert_eq!(aggregated.json["kind"], "APIGroupDiscoveryList");
    let v2beta1 = api
        .get_as("/apis", "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json")
        .await;
    assert_eq!(v2beta1.json["kind"], "APIGroupList");
    let core = api.get("/api/v1").await;
    let pods = resource(&core.json, "pods").unwrap().clone();
    assert_eq!(pods["shortNames"], json!(["po"]));
    assert_eq!(pods["categories"], json!(["all"]));
    assert!(resource(&core.json, "persistentvolumeclaims/status").is_some());
    let storage = api.get("/apis/storage.k8s.io/v1").await;
    assert!(resource(&storage.json, "csinodes/status").is_some());
    let o2 = api.get("/openapi/v2").await;
    assert_eq!(
        (o2.code, o2.content_type.as_str(), o2.text.as_str()),
        (
            200,
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
            ""
        )
    );
    let o3 = api.get("/openapi/v3").await;
    assert_eq!(o3.code, 200);
    assert!(
        o3.json["paths"]["api/v1"]["serverRelativeURL"].is_string(),
        "{}",
        o3.json
    );
    assert_eq!(api.get("/openapi/v3/apis/nothing/v1").await.code, 404);
    for p in ["/healthz", "/livez", "/readyz"] {
        assert_eq!(api.get(p).await.code, 200, "{p}");
    }

    // Tables: never 406, a HEALTH column for PVCs.
    api.post(PVCS, &pvc("t1")).await;
    api.patch(&format!("{PVCS}/t1/status"), MERGE, &json!({"status": {"healthStatus": {"healthConditions": [
        {"status": "Inaccessible", "reason": "VolumeNotFound"}, {"status": "Degraded", "reason": "Slow"}]}}})).await;
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    let t = api
        .get_as("/api/v1/persistentvolumeclaims?limit=500", accept)
        .await;
    assert_eq!((t.code, t.json["kind"].as_str()), (200, Some("Table")));
    let cols = names(&t.json["columnDefinitions"]);
    let hi = cols
        .iter()
        .position(|c| *c == "Health")
        .expect("Health column");
    let row = &t.json["rows"][0];
    assert_eq!(
        row["cells"][hi],
        "Inaccessible/VolumeNotFound,Degraded/Slow"
    );
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
    let proto = api
        .get_as(
            &format!("{PVCS}/t1"),
            "application/vnd.kubernetes.protobuf,application/json",
        )
        .await;
    assert_eq!(proto.json["kind"], "PersistentVolumeClaim");

    let m = api.get("/metrics").await;
    assert!(m.text.contains("apiserver_request_total{verb=\"PATCH\",resource=\"persistentvolumeclaims\",subresource=\"status\",code=\"200\"}"), "{}", m.text);
    assert!(m.text.contains("apiserver_request_duration_seconds_bucket"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_one_store_behind_both_apis() {
    let (_dir, _server, api) = start_server(&[]);
    let v1 = "/apis/events.k8s.io/v1/namespaces/default/events";
    let sent = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "d.17a"},
        "eventTime": "2026-11-30T04:33:11.123456Z", "action": "Probe", "reason": "VolumeUnhealthy", "type": "Warning",
        "note": "volume not found", "reportingController": "volhealth-monitor", "reportingInstance": "m-1",
        "regarding": {"kind": "PersistentVolumeClaim", "namespace": "default", "name": "d", "uid": "u-1"}});
    let created = api.create(v1, &sent).await;
    assert_eq!(created.json["apiVersion"], "events.k8s.io/v1");
    assert_eq!(created.json["regarding"]["name"], "d");
    let core = api.get("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dd,involvedObject.uid%3Du-1").await;
    let item = &core.json["items"][0];
    assert_eq!(
        (item["apiVersion"].as_str(), item["message"].as_str()),
        (Some("v1"), Some("volume not found"))
    );
    assert_eq!(item["reportingComponent"], "volhealth-monitor");
    let series = json!({"series": {"count": 2, "lastObservedTime": "2026-11-30T04:34:11.000000Z"}});
    let patched = api.patch(&format!("{v1}/d.17a"), MERGE, &series).await;
    assert_eq!(
        (patched.code, patched.json["series"]["count"].as_i64()),
        (200, Some(2)),
        "{}",
        patched.text
    );
    let listed = api
        .get(&format!("{v1}?fieldSelector=regarding.name%3Dd"))
        .await;
    assert_eq!(
        listed.json["items"].as_array().map(Vec::len),
        Some(1),
        "{}",
        listed.text
    );
    assert_eq!(listed.json["items"][0]["note"], "volume not found");
}
