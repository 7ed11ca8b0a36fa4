//! End-to-end tests of `volhealth apiserver` persistence and watch: nothing acknowledged is lost
//! across `kill -9`, watches resume after a restart, expired versions get a 410 ERROR event,
//! bookmarks and initial events behave as client-go and kube-rs expect.

mod apiserver_http;
mod support;

use apiserver_http::*;
use serde_json::{Value, json};
use std::time::Duration;

fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .expect("resourceVersion")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = support::start_apiserver(dir.path(), &[]);
    let api = Api::new(&server.url);
    let mut writers = Vec::new();
    for w in 0..4 {
        let api = api.clone();
        writers.push(tokio::spawn(async move {
            let mut acked: Vec<(String, u64, Option<String>)> = Vec::new();
            for i in 0..10_000 {
                let name = format!("w{w}-{i}");
                let Some(a) = api.try_raw("POST", PVCS, "application/json", pvc(&name).to_string().into_bytes()).await else { break };
                if a.code != 201 {
                    break;
                }
                acked.push((name.clone(), rv(&a.json), None));
                let body = json!({"status": {"healthStatus": {"healthConditions": conditions("Degraded", &format!("R{i}"))}}});
                let Some(p) = api.try_raw("PATCH", &format!("{PVCS}/{name}/status"), MERGE, body.to_string().into_bytes()).await else { break };
                if p.code != 200 {
                    break;
                }
                acked.push((name, rv(&p.json), Some(format!("R{i}"))));
            }
            acked
        }));
    }
    // Let some writes land, then kill the server mid-stream.
    support::wait_for_async(Duration::from_secs(60), "some acknowledged writes", || {
        let api = api.clone();
        async move {
            api.try_raw("GET", PVCS, "application/json", Vec::new())
                .await
                .filter(|a| a.json["items"].as_array().is_some_and(|i| i.len() >= 40))
        }
    })
    .await;
    server.proc.kill();
    let mut acked = Vec::new();
    for w in writers {
        acked.extend(w.await.unwrap());
    }
    assert!(acked.len() >= 40);

    let server = support::start_apiserver(dir.path(), &[]);
    let api = Api::new(&server.url);
    for (name, at, reason) in &acked {
        let got = api.get(&format!("{PVCS}/{name}")).await;
        assert_eq!(got.code, 200, "acknowledged {name} lost");
        assert!(rv(&got.json) >= *at, "{name} went back in time");
        if let Some(r) = reason {
            assert_eq!(
                got.json["status"]["healthStatus"]["healthConditions"][0]["reason"].as_str(),
                Some(r.as_str()),
                "{name}"
            );
        }
    }
    // Resource versions keep growing after the restart.
    let max = acked.iter().map(|a| a.1).max().unwrap();
    let fresh = api.post(PVCS, &pvc("after-restart")).await;
    assert!(rv(&fresh.json) > max);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_resumes_after_a_restart_from_a_retained_version() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = support::start_apiserver(dir.path(), &[]);
    let api = Api::new(&server.url);
    let start = rv(&api.post(PVCS, &pvc("d")).await.json);
    let mut versions = Vec::new();
    for r in ["A", "B"] {
        let p = api.patch(&format!("{PVCS}/d/status"), MERGE, &json!({"status": {"healthStatus": {"healthConditions": conditions("Degraded", r)}}})).await;
        versions.push(rv(&p.json));
    }
    server.proc.kill();
    let server = support::start_apiserver(dir.path(), &[]);
    let api = Api::new(&server.url);
    let p = api
        .patch(
            &format!("{PVCS}/d/status"),
            MERGE,
            &json!({"status": {"healthStatus": {"healthConditions": conditions("Degraded", "C")}}}),
        )
        .await;
    versions.push(rv(&p.json));
    api.delete(&format!("{PVCS}/d")).await;

    let events = api
        .watch(
            &format!("{PVCS}?watch=true&resourceVersion={start}"),
            Duration::from_secs(20),
            |e| e.len() >= 4,
        )
        .await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["MODIFIED", "MODIFIED", "MODIFIED", "DELETED"]);
    let seen: Vec<u64> = events.iter().take(3).map(|e| rv(&e["object"])).collect();
    assert_eq!(seen, versions);
    assert!(
        rv(&events[3]["object"]) > versions[2],
        "DELETED carries a new resourceVersion"
    );
    // From the middle too.
    let mid = api
        .watch(
            &format!("{PVCS}?watch=1&resourceVersion={}", versions[1]),
            Duration::from_secs(20),
            |e| e.len() >= 2,
        )
        .await;
    assert_eq!(rv(&mid[0]["object"]), versions[2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_version_gets_one_error_event_with_410() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_apiserver(dir.path(), &["--retained-changes", "16"]);
    let api = Api::new(&server.url);
    api.post(PVCS, &pvc("d")).await;
    for i in 0..300 {
        api.patch(
            &format!("{PVCS}/d"),
            MERGE,
            &json!({"metadata": {"labels": {"i": i.to_string()}}}),
        )
        .await;
    }
    let events = api
        .watch(
            &format!("{PVCS}?watch=true&resourceVersion=2&timeoutSeconds=10"),
            Duration::from_secs(20),
            |_| false,
        )
        .await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "ERROR");
    let st = &events[0]["object"];
    assert_eq!(
        (
            st["kind"].as_str(),
            st["code"].as_i64(),
            st["reason"].as_str()
        ),
        (Some("Status"), Some(410), Some("Expired"))
    );
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .starts_with("too old resource version: 2 (")
    );
    // A version from the future (a replaced data directory) also makes clients list again.
    let future = api
        .watch(
            &format!("{PVCS}?watch=true&resourceVersion=999999"),
            Duration::from_secs(20),
            |_| false,
        )
        .await;
    assert_eq!(
        (future.len(), future[0]["object"]["code"].as_i64()),
        (1, Some(410))
    );
    // A current version still works.
    let now = rv(&api.get(&format!("{PVCS}/d")).await.json);
    let ok = api
        .watch(
            &format!("{PVCS}?watch=true&resourceVersion={now}&timeoutSeconds=1"),
            Duration::from_secs(10),
            |_| false,
        )
        .await;
    assert!(ok.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_initial_events_and_table_watches() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_apiserver(dir.path(), &["--bookmark-interval-seconds", "1"]);
    let api = Api::new(&server.url);
    api.post(PVCS, &pvc("a")).await;
    api.post(PVCS, &pvc("b")).await;

    // No resourceVersion: synthetic ADDED for what exists (Python's watch.stream relies on it).
    let added = api
        .watch(
            &format!("{PVCS}?watch=True&timeoutSeconds=2"),
            Duration::from_secs(10),
            |_| false,
        )
        .await;
    let types: Vec<&str> = added.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "ADDED"], "no bookmarks unless allowed");

    let now = rv(&api.get(&format!("{PVCS}/b")).await.json);
    let bm = api
        .watch(
            &format!(
                "{PVCS}?watch=true&resourceVersion={now}&allowWatchBookmarks=true&timeoutSeconds=5"
            ),
            Duration::from_secs(10),
            |e| !e.is_empty(),
        )
        .await;
    assert_eq!(bm[0]["type"], "BOOKMARK");
    let o = &bm[0]["object"];
    assert_eq!(
        (o["kind"].as_str(), o["apiVersion"].as_str()),
        (Some("PersistentVolumeClaim"), Some("v1"))
    );
    assert!(rv(o) >= now);

    let streaming = api
        .watch(
            &format!("{PVCS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=5"),
            Duration::from_secs(10),
            |e| e.len() >= 3,
        )
        .await;
    assert_eq!(streaming[0]["type"], "ADDED");
    assert_eq!(streaming[1]["type"], "ADDED");
    assert_eq!(streaming[2]["type"], "BOOKMARK");
    assert_eq!(
        streaming[2]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );

    // Label selector transitions: an object leaving the selection is DELETED for this watcher.
    let api2 = api.clone();
    let watcher = tokio::spawn(async move {
        api2.watch(
            &format!("{PVCS}?watch=true&resourceVersion={now}&labelSelector=app%3Ddb"),
            Duration::from_secs(20),
            |e| e.len() >= 2,
        )
        .await
    });
    // The watch starts at `now`, so the patches below reach it even if they land first.
    api.patch(
        &format!("{PVCS}/a"),
        MERGE,
        &json!({"metadata": {"labels": {"app": "db"}}}),
    )
    .await;
    api.patch(
        &format!("{PVCS}/a"),
        MERGE,
        &json!({"metadata": {"labels": {"app": "web"}}}),
    )
    .await;
    let sel = watcher.await.unwrap();
    let types: Vec<&str> = sel.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "DELETED"]);

    // Table watches: one-row Tables, column definitions only in the first event.
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let url = format!("{}{PVCS}?watch=true&timeoutSeconds=2", api.url);
    let text = reqwest::Client::new()
        .get(url)
        .header("accept", accept)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let tables: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(tables.len(), 2);
    assert_eq!(tables[0]["object"]["kind"], "Table");
    assert_eq!(tables[0]["object"]["rows"].as_array().unwrap().len(), 1);
    assert!(tables[0]["object"]["columnDefinitions"].is_array());
    assert!(tables[1]["object"]["columnDefinitions"].is_null());
}
