//! A damaged store is reported as such, naming its file: a file that is not a database, a
//! truncated (empty) file, a change-log row that does not decode, and a write-ahead log SQLite
//! will ignore.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod apiserver_http;
mod support;

use apiserver_http::*;
use serde_json::json;
use std::path::Path;
use std::time::Duration;
use volhealth_apiserver::ServerConfig;

/// Runs the server on `data` and returns why it refused to start.
async fn start_error(data: &Path) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    match volhealth_apiserver::serve(listener, ServerConfig::new(data), async {}).await {
        Ok(()) => panic!("the server started on a damaged store"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn a_file_that_is_not_a_database_is_named_as_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("apiserver.sqlite");
    std::fs::write(&file, vec![0x5a; 8192]).unwrap();
    let e = start_error(dir.path()).await;
    assert!(
        e.contains(&file.display().to_string()) && e.contains("is corrupt"),
        "{e}"
    );
}

#[tokio::test]
async fn an_empty_database_file_is_refused_but_a_missing_one_is_new() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("apiserver.sqlite");
    std::fs::write(&file, b"").unwrap();
    let e = start_error(dir.path()).await;
    assert!(
        e.contains(&file.display().to_string()) && e.contains("empty (0 bytes)"),
        "{e}"
    );
    assert_eq!(std::fs::metadata(&file).unwrap().len(), 0, "left as it was");
    let fresh = tempfile::tempdir().unwrap();
    let server = support::start_apiserver(fresh.path(), &[]);
    assert_eq!(Api::new(&server.url).get(PVCS).await.code, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_change_log_row_ends_watches_with_a_clear_error() {
    let (dir, server, api) = start_server(&[]);
    let start = rv(&api.post(PVCS, &pvc("d")).await.json);
    let mut last = 0;
    for r in ["A", "B"] {
        let p = api
            .patch(
                &format!("{PVCS}/d/status"),
                MERGE,
                &json!({"status": {"healthStatus": {"healthConditions": conditions("Degraded", r)}}}),
            )
            .await;
        last = rv(&p.json);
    }
    drop(server); // stops it, and waits until it has let go of its data
    let file = dir.path().join("data").join("apiserver.sqlite");
    {
        let db = rusqlite::Connection::open(&file).unwrap();
        let n = db
            .execute(
                "UPDATE changes SET json = '{not json' WHERE rv = ?1",
                [last as i64],
            )
            .unwrap();
        assert_eq!(n, 1);
    }
    let server = support::start_apiserver(dir.path(), &[]);
    let api = Api::new(&server.url);
    let events = api
        .watch(
            &format!("{PVCS}?watch=true&resourceVersion={start}"),
            Duration::from_secs(20),
            |e| e.iter().any(|e| e["type"] == "ERROR"),
        )
        .await;
    let error = events
        .iter()
        .find(|e| e["type"] == "ERROR")
        .unwrap_or_else(|| panic!("no ERROR event: {events:?}"));
    let message = error["object"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains(&file.display().to_string())
            && message.contains("is corrupt")
            && message.contains(&format!("change-log row {last}")),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_ahead_log_that_sqlite_ignores_is_reported_and_kept() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_apiserver(dir.path(), &[]);
    assert_eq!(
        Api::new(&server.url).post(PVCS, &pvc("kept")).await.code,
        201
    );
    drop(server); // stops it, and waits until it has let go of its data
    let wal = dir.path().join("data").join("apiserver.sqlite-wal");
    let garbage = vec![0x5a; 8192];
    std::fs::write(&wal, &garbage).unwrap();

    let log = volhealth_testkit::CapturedLog::new("info");
    let server = volhealth_testkit::start_apiserver_logged(dir.path(), &[], &log);
    let api = Api::new(&server.url);
    assert_eq!(
        api.get(&format!("{PVCS}/kept")).await.code,
        200,
        "the database itself is intact"
    );
    let text = log.text();
    let warning = text
        .lines()
        .find(|l| l.contains("WARN") && l.contains(&wal.display().to_string()))
        .unwrap_or_else(|| panic!("no warning naming {}: {text}", wal.display()));
    assert!(
        warning.contains("is not valid") && warning.contains("NOT in the store"),
        "{warning}"
    );
    let kept: Vec<_> = std::fs::read_dir(dir.path().join("data"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("apiserver.sqlite-wal.ignored-")
        })
        .collect();
    assert_eq!(kept.len(), 1, "a copy of the ignored WAL is kept");
    assert_eq!(std::fs::read(kept[0].path()).unwrap(), garbage);
}
