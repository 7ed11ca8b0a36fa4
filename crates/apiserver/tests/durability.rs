//! The API server's persistence across `kill -9`, which needs the server as a process of its
//! own: it serves in a child process (this test binary again, running one ignored test), which
//! the test kills with SIGKILL. Nothing acknowledged is lost, and watches resume after one.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod apiserver_http;
mod support;

use apiserver_http::*;
use serde_json::json;
use std::time::Duration;

#[test]
#[ignore = "the server of the durability tests, run by them in a child process"]
fn durability_child_server() {
    support::child::serve_if_child();
}

/// The server in a child process over `dir`, plain HTTP, as the tests' servers run.
fn start_child(dir: &std::path::Path) -> support::child::Child {
    support::child::start("durability_child_server", dir, false, None)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start_child(dir.path());
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
    server.kill();
    let mut acked = Vec::new();
    for w in writers {
        acked.extend(w.await.unwrap());
    }
    assert!(acked.len() >= 40);

    let server = start_child(dir.path());
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
    let mut server = start_child(dir.path());
    let api = Api::new(&server.url);
    let start = rv(&api.post(PVCS, &pvc("d")).await.json);
    let mut versions = Vec::new();
    for r in ["A", "B"] {
        let p = api.patch(&format!("{PVCS}/d/status"), MERGE, &json!({"status": {"healthStatus": {"healthConditions": conditions("Degraded", r)}}})).await;
        versions.push(rv(&p.json));
    }
    server.kill();
    let server = start_child(dir.path());
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
        .watch_n(
            &format!("{PVCS}?watch=true&resourceVersion={start}"),
            Duration::from_secs(20),
            4,
        )
        .await;
    let types = event_types(&events);
    assert_eq!(types, ["MODIFIED", "MODIFIED", "MODIFIED", "DELETED"]);
    let seen: Vec<u64> = events.iter().take(3).map(|e| rv(&e["object"])).collect();
    assert_eq!(seen, versions);
    assert!(
        rv(&events[3]["object"]) > versions[2],
        "DELETED carries a new resourceVersion"
    );
    // From the middle too.
    let mid = api
        .watch_n(
            &format!("{PVCS}?watch=1&resourceVersion={}", versions[1]),
            Duration::from_secs(20),
            2,
        )
        .await;
    assert_eq!(rv(&mid[0]["object"]), versions[2]);
}
