//! Watch against the API server: expired versions get a 410 ERROR event, bookmarks and
//! initial events behave as client-go and kube-rs expect.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod apiserver_http;
mod support;

use apiserver_http::*;
use serde_json::{Value, json};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_version_gets_one_error_event_with_410() {
    let (_dir, _server, api) = start_server(&["--retained-changes", "16"]);
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
        .watch_all(
            &format!("{PVCS}?watch=true&resourceVersion=2&timeoutSeconds=10"),
            Duration::from_secs(20),
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
        .watch_all(
            &format!("{PVCS}?watch=true&resourceVersion=999999"),
            Duration::from_secs(20),
        )
        .await;
    assert_eq!(
        (future.len(), future[0]["object"]["code"].as_i64()),
        (1, Some(410))
    );
    // A current version still works.
    let now = rv(&api.get(&format!("{PVCS}/d")).await.json);
    let ok = api
        .watch_all(
            &format!("{PVCS}?watch=true&resourceVersion={now}&timeoutSeconds=1"),
            Duration::from_secs(10),
        )
        .await;
    assert!(ok.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_initial_events_and_table_watches() {
    let (_dir, _server, api) = start_server(&["--bookmark-interval-seconds", "1"]);
    api.post(PVCS, &pvc("a")).await;
    api.post(PVCS, &pvc("b")).await;

    // No resourceVersion: synthetic ADDED for what exists (Python's watch.stream relies on it).
    let added = api
        .watch_all(
            &format!("{PVCS}?watch=True&timeoutSeconds=2"),
            Duration::from_secs(10),
        )
        .await;
    let types = event_types(&added);
    assert_eq!(types, ["ADDED", "ADDED"], "no bookmarks unless allowed");

    let now = rv(&api.get(&format!("{PVCS}/b")).await.json);
    let bm = api
        .watch_n(
            &format!(
                "{PVCS}?watch=true&resourceVersion={now}&allowWatchBookmarks=true&timeoutSeconds=5"
            ),
            Duration::from_secs(10),
            1,
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
        .watch_n(
            &format!("{PVCS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=5"),
            Duration::from_secs(10),
            3,
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
        api2.watch_n(
            &format!("{PVCS}?watch=true&resourceVersion={now}&labelSelector=app%3Ddb"),
            Duration::from_secs(20),
            2,
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
    let types = event_types(&sel);
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

/// A watcher whose client never reads is closed with one 410 ERROR event once its backlog has
/// stayed full for the patience, instead of holding every later event in memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_never_reads_is_closed_with_410() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let mut config = support::config_from_flags(dir.path(), &[]);
    config.watch_backlog_bytes = 256 * 1024;
    config.slow_watcher_patience = Duration::from_secs(1);
    let server = support::start_with_config(config);
    let api = Api::new(&server.url);
    api.create(PVCS, &pvc("big")).await;
    let addr = server.url.strip_prefix("http://").unwrap().to_string();
    let mut watcher = std::net::TcpStream::connect(&addr).unwrap();
    write!(
        watcher,
        "GET {PVCS}?watch=true&timeoutSeconds=120 HTTP/1.1\r\nHost: {addr}\r\n\r\n"
    )
    .unwrap();
    // Far more than the backlog and the sockets' buffers hold, while the watcher reads nothing.
    let padding = "p".repeat(200 * 1024);
    const PATCHES: usize = 200;
    for i in 0..PATCHES {
        let r = api
            .patch(
                &format!("{PVCS}/big"),
                MERGE,
                &json!({"metadata": {"annotations": {"padding": padding, "n": i.to_string()}}}),
            )
            .await;
        assert_eq!(r.code, 200, "{}", r.text);
    }
    // Now read what the server kept for us: it ends, with the ERROR last.
    let read = tokio::task::spawn_blocking(move || {
        watcher
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut got = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match watcher.read(&mut buf) {
                Ok(0) => return (got, true),
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    if got.ends_with(b"\r\n0\r\n\r\n") {
                        return (got, true);
                    }
                }
                Err(_) => return (got, false),
            }
        }
    });
    let (got, ended) = read.await.unwrap();
    let text = String::from_utf8_lossy(&got);
    assert!(ended, "the slow watch must end, not stay open");
    let events: Vec<Value> = text
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let last = events.last().expect("some events");
    assert_eq!(last["type"], "ERROR", "{last}");
    assert_eq!(last["object"]["code"], 410, "{last}");
    let modified = events.iter().filter(|e| e["type"] == "MODIFIED").count();
    assert!(
        modified < PATCHES,
        "the watcher was cut off, not sent all {PATCHES} changes"
    );
}
