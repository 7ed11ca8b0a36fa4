//! End-to-end tests of `volhealth apiserver` persistence, which need the server as a process of
//! its own: nothing acknowledged is lost across `kill -9`, and watches resume after one. The
//! rest of the API server's tests run it in-process, in `crates/apiserver/tests`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

// The same raw HTTP helpers as the API server's own in-process tests.
#[path = "../../apiserver/tests/apiserver_http/mod.rs"]
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
