//! The API server refuses what kube-apiserver refuses, with a Status body: each test here sends
//! one kind of request that an earlier version accepted.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod apiserver_http;
mod support;

use apiserver_http::*;
use serde_json::json;

fn start(flags: &[&str]) -> (tempfile::TempDir, support::ApiServer, Api) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = support::start_apiserver(dir.path(), flags);
    let api = Api::new(&server.url);
    (dir, server, api)
}

fn assert_status(a: &Answer, code: u16, what: &str) {
    assert_eq!(a.code, code, "{what}: {}", a.text);
    assert_eq!(a.json["kind"], "Status", "{what}: {}", a.text);
    assert_eq!(a.json["code"], code, "{what}: {}", a.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_without_a_name_does_not_replace_the_object() {
    let (_d, _s, api) = start(&[]);
    assert_eq!(api.post(PVCS, &pvc("d")).await.code, 201);
    let mut nameless = pvc("d");
    nameless["metadata"] = json!({"labels": {"a": "b"}});
    let r = api.put(&format!("{PVCS}/d"), &nameless).await;
    assert_status(&r, 400, "PUT without metadata.name");
    let got = api.get(&format!("{PVCS}/d")).await;
    assert_eq!(got.json["metadata"]["name"], "d");
    assert!(got.json["metadata"].get("labels").is_none(), "{}", got.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn option_values_are_checked() {
    let (_d, _s, api) = start(&[]);
    assert_eq!(api.post(PVCS, &pvc("d")).await.code, 201);
    for (method, path) in [
        ("POST", format!("{PVCS}?dryRun=Sometimes")),
        (
            "GET",
            format!("{PVCS}?resourceVersionMatch=Newest&resourceVersion=1"),
        ),
        ("GET", format!("{PVCS}?resourceVersionMatch=NotOlderThan")),
        (
            "GET",
            format!("{PVCS}?resourceVersionMatch=Exact&resourceVersion=0"),
        ),
        (
            "GET",
            format!("{PVCS}?watch=true&resourceVersionMatch=NotOlderThan"),
        ),
        ("GET", format!("{PVCS}?watch=true&timeoutSeconds=soon")),
        ("GET", format!("{PVCS}?watch=true&timeoutSeconds=-5")),
    ] {
        let body = if method == "POST" {
            pvc("e").to_string().into_bytes()
        } else {
            Vec::new()
        };
        let r = api
            .raw(method, &path, Some("application/json"), None, body)
            .await;
        assert_status(&r, 400, &format!("{method} {path}"));
    }
    assert!(
        api.get(&format!("{PVCS}/e")).await.code == 404,
        "a refused dry run stored nothing"
    );
    // What clients do send still works.
    for path in [
        format!("{PVCS}?resourceVersionMatch=NotOlderThan&resourceVersion=0"),
        format!(
            "{PVCS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"
        ),
        format!("{PVCS}?watch=true&timeoutSeconds=1"),
    ] {
        assert_eq!(api.get(&path).await.code, 200, "{path}");
    }
    let dry = api.post(&format!("{PVCS}?dryRun=All"), &pvc("f")).await;
    assert_eq!(dry.code, 201, "{}", dry.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_csinode_starts_without_status() {
    let (_d, _s, api) = start(&[]);
    let mut n = csinode("node-a", "d.example.com");
    n["status"] = json!({"storageHealth": [{"name": "d.example.com",
        "healthConditions": conditions("StorageDegraded", "Slow")}]});
    let r = api.post(CSINODES, &n).await;
    assert_eq!(r.code, 201, "{}", r.text);
    assert!(r.json.get("status").is_none(), "{}", r.text);
    let got = api.get(&format!("{CSINODES}/node-a")).await;
    assert!(got.json.get("status").is_none(), "{}", got.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_is_refused_on_non_resource_paths_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, "admin-token,admin,1,\"system:masters\"\n").expect("tokens");
    let server =
        support::start_apiserver(dir.path(), &["--token-auth-file", tokens.to_str().unwrap()]);
    let anon = Api::new(&server.url);
    let wrong = anon.with_token("wrong");
    let admin = anon.with_token("admin-token");
    for path in [
        "/version",
        "/api",
        "/apis",
        "/healthz",
        "/metrics",
        "/openapi/v2",
    ] {
        assert_status(&wrong.get(path).await, 401, path);
        assert_eq!(admin.get(path).await.code, 200, "{path}");
        assert_eq!(anon.get(path).await.code, 200, "{path} without credentials");
    }
}

fn fields(a: &Answer) -> Vec<String> {
    a.json["details"]["causes"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| c["field"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_labels_annotations_and_quantities_are_validated() {
    let (_d, _s, api) = start(&[]);
    let ns = "/api/v1/namespaces";
    for (path, body, field) in [
        (PVCS.to_string(), pvc("a..b"), "metadata.name"),
        (
            ns.to_string(),
            json!({"metadata": {"name": "n".repeat(64)}}),
            "metadata.name",
        ),
        (
            ns.to_string(),
            json!({"metadata": {"name": "team.b"}}),
            "metadata.name",
        ),
        (
            "/api/v1/namespaces/default/events".to_string(),
            json!({"metadata": {"name": "a/b"}, "involvedObject": {"kind": "Pod", "name": "p"}}),
            "metadata.name",
        ),
    ] {
        let r = api.post(&path, &body).await;
        assert_status(&r, 422, &format!("{path} {body}"));
        assert_eq!(fields(&r), [field], "{}", r.text);
    }
    let mut labelled = pvc("l");
    labelled["metadata"]["labels"] = json!({"bad key": "x", "ok": "not ok!"});
    let r = api.post(PVCS, &labelled).await;
    assert_status(&r, 422, "labels");
    assert_eq!(
        fields(&r),
        ["metadata.labels", "metadata.labels[ok]"],
        "{}",
        r.text
    );
    let mut annotated = pvc("an");
    annotated["metadata"]["annotations"] = json!({"big": "x".repeat(300 * 1024)});
    let r = api.post(PVCS, &annotated).await;
    assert_status(&r, 422, "annotations");
    assert_eq!(fields(&r), ["metadata.annotations"], "{}", r.text);
    let mut bad_size = pvc("q");
    bad_size["spec"]["resources"]["requests"]["storage"] = json!("lots");
    let r = api.post(PVCS, &bad_size).await;
    assert_status(&r, 422, "quantity");
    assert_eq!(
        fields(&r),
        ["spec.resources.requests[storage]"],
        "{}",
        r.text
    );
    // And an update cannot bring them in either.
    assert_eq!(api.post(PVCS, &pvc("fine")).await.code, 201);
    let r = api
        .patch(
            &format!("{PVCS}/fine"),
            MERGE,
            &json!({"spec": {"resources": {"requests": {"storage": "1GB"}}}}),
        )
        .await;
    assert_status(&r, 422, "patched quantity");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_options_of_the_wrong_type_delete_nothing() {
    let (_d, _s, api) = start(&[]);
    assert_eq!(api.post(PVCS, &pvc("d")).await.code, 201);
    let path = format!("{PVCS}/d");
    for opts in [
        json!({"preconditions": {"resourceVersion": 1}}),
        json!({"preconditions": {"uid": ["x"]}}),
        json!({"gracePeriodSeconds": "soon"}),
        json!({"propagationPolicy": "Sideways"}),
        json!("delete"),
    ] {
        let r = api
            .raw(
                "DELETE",
                &path,
                Some("application/json"),
                None,
                opts.to_string().into_bytes(),
            )
            .await;
        assert_status(&r, 400, &opts.to_string());
        assert_eq!(api.get(&path).await.code, 200, "{opts} deleted nothing");
    }
    let ok = api
        .raw(
            "DELETE",
            &path,
            Some("application/json"),
            None,
            json!({"propagationPolicy": "Background"})
                .to_string()
                .into_bytes(),
        )
        .await;
    assert_eq!(ok.code, 200, "{}", ok.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_strategic_merge_directives_change_nothing() {
    let (_d, _s, api) = start(&[]);
    assert_eq!(api.post(PVCS, &pvc("d")).await.code, 201);
    assert_eq!(api.post(PODS, &pod("p", "node-a", "d")).await.code, 201);
    let path = format!("{PODS}/p");
    for (patch, code) in [
        (json!({"$patch": "delete"}), 422),
        (json!({"spec": {"$patch": "delete"}}), 422),
        (json!({"spec": {"$retainKeys": [1, 2]}}), 422),
        (json!({"metadata": {"$retainKeys": "name"}}), 422),
        (json!({"spec": {"containers": [{"image": "nginx"}]}}), 422),
        (json!({"spec": {"containers": ["c"]}}), 422),
    ] {
        let r = api.patch(&path, STRATEGIC, &patch).await;
        assert_status(&r, code, &patch.to_string());
    }
    let got = api.get(&path).await;
    assert_eq!(
        got.json["spec"]["containers"],
        json!([{"name": "c", "image": "busybox"}]),
        "{}",
        got.text
    );
    // Every client can still list the pods.
    let listed = api.get(PODS).await;
    assert_eq!(listed.code, 200);
    assert_eq!(listed.json["items"].as_array().map(Vec::len), Some(1));
    // Directives used as intended still work.
    let ok = api
        .patch(
            &path,
            STRATEGIC,
            &json!({"spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
        )
        .await;
    assert_eq!(ok.code, 200, "{}", ok.text);
    assert_eq!(ok.json["spec"]["containers"][0]["image"], "nginx");
}
