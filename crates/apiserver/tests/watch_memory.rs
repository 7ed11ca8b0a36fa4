//! Watchers that never read cannot grow the server without bound: each holds at most
//! `WATCH_QUEUE_EVENTS` events and `WATCH_QUEUE_BYTES` bytes, and is terminated (what it held is
//! dropped) once it has made no room for the patience, counted in
//! `apiserver_terminated_watchers_total`; what they held is reused once they are gone. The
//! server runs in a child process so that its resident size (`VmRSS`) is its own; a watcher
//! that reads still sees every event.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod apiserver_http;
mod support;

use apiserver_http::*;
use serde_json::{Value, json};
use std::io::Write;
use std::time::Duration;

/// Watchers that send their request and never read.
const SILENT_WATCHERS: usize = 20;
/// Status-sized changes written while they are open.
const PATCHES: usize = 2_000;
/// Bytes of padding each change carries (each event is a little larger).
const PADDING: usize = 8 * 1024;
/// How much the server may grow over its size before the watchers: the silent watchers' queues
/// (20 × 1 MiB), the changes the store's broadcast ring keeps for watchers that lag (up to 4,096
/// of them, here 2,000 × two 8 KiB objects), hyper's buffers, the store's page cache and the
/// allocator's slack. Unbounded, each silent watcher would hold every event: 20 × 2,000 × 8 KiB
/// ≈ 330 MiB.
const GROWTH_BOUND_KIB: u64 = 120 * 1024;

/// The server half, run by the test below in a child process.
#[test]
#[ignore = "the server of the watch memory test, run by it in a child process"]
fn watch_memory_child_server() {
    support::child::serve_if_child();
}

/// The sum of the samples of `/metrics` whose line starts with `prefix` and contains `label`.
async fn counter_sum(api: &Api, prefix: &str, label: &str) -> u64 {
    let page = api.get("/metrics").await.text;
    page.lines()
        .filter(|l| l.starts_with(prefix) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// `apiserver_terminated_watchers_total` for PVCs.
async fn terminated(api: &Api) -> u64 {
    counter_sum(
        api,
        "apiserver_terminated_watchers_total{",
        "resource=\"persistentvolumeclaims\"",
    )
    .await
}

/// One round: opens the silent watchers and a reading one, writes [`PATCHES`] changes, checks
/// that the reading watcher saw each in order, waits until the silent ones are terminated (the
/// counter reaches `terminated_after`), and answers the largest resident size seen, which must
/// stay within [`GROWTH_BOUND_KIB`] of `baseline`.
async fn round(
    server: &support::child::Child,
    api: &Api,
    baseline: u64,
    terminated_after: u64,
) -> u64 {
    let addr = server.url.strip_prefix("http://").unwrap().to_string();
    let watches_before = counter_sum(api, "apiserver_request_total{", "verb=\"WATCH\"").await;
    let silent: Vec<std::net::TcpStream> = (0..SILENT_WATCHERS)
        .map(|_| {
            let mut s = std::net::TcpStream::connect(&addr).unwrap();
            write!(
                s,
                "GET {PVCS}?watch=true&timeoutSeconds=600 HTTP/1.1\r\nHost: {addr}\r\n\r\n"
            )
            .unwrap();
            s
        })
        .collect();
    let reader = api.clone();
    let reading = tokio::spawn(async move {
        reader
            .watch(
                &format!("{PVCS}?watch=true&timeoutSeconds=600"),
                Duration::from_secs(300),
                |events| events.iter().filter(|e| e["type"] == "MODIFIED").count() >= PATCHES,
            )
            .await
    });
    // Every watch is served (its response begun) before the writes start.
    support::wait_for_async(Duration::from_secs(30), "the watches to start", || async {
        let served = counter_sum(api, "apiserver_request_total{", "verb=\"WATCH\"").await;
        (served >= watches_before + (SILENT_WATCHERS + 1) as u64).then_some(())
    })
    .await;

    let padding = "p".repeat(PADDING);
    let mut peak = 0;
    let mut sent = Vec::with_capacity(PATCHES);
    for i in 0..PATCHES {
        let n = format!("{terminated_after}-{i}");
        let r = api
            .patch(
                &format!("{PVCS}/big"),
                MERGE,
                &json!({"metadata": {"annotations": {"padding": padding, "n": n}}}),
            )
            .await;
        assert_eq!(r.code, 200, "{}", r.text);
        sent.push(n);
        if i % 50 == 0 {
            peak = peak.max(support::child::rss_kib(server.pid));
        }
    }
    peak = peak.max(support::child::rss_kib(server.pid));
    eprintln!("VmRSS: {baseline} KiB before, {peak} KiB at most in round {terminated_after}");
    assert!(
        peak.saturating_sub(baseline) < GROWTH_BOUND_KIB,
        "the server grew from {baseline} KiB to {peak} KiB with {SILENT_WATCHERS} silent watchers"
    );

    let events = reading.await.unwrap();
    let seen: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "MODIFIED")
        .map(|e| &e["object"]["metadata"]["annotations"]["n"])
        .collect();
    let expected: Vec<Value> = sent.into_iter().map(Value::String).collect();
    assert!(
        seen.iter().copied().eq(expected.iter()),
        "the reading watcher sees every change, in order ({} of {PATCHES} seen)",
        seen.len()
    );

    // The silent watchers are terminated once they have made no room for the patience.
    support::wait_for_async(
        Duration::from_secs(60),
        "the silent watchers to be terminated",
        || async { (terminated(api).await >= terminated_after).then_some(()) },
    )
    .await;
    assert_eq!(terminated(api).await, terminated_after);
    drop(silent);
    peak
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_watchers_stay_bounded_and_a_reading_watcher_sees_everything() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::child::start("watch_memory_child_server", dir.path(), false, None);
    let api = Api::new(&server.url);
    api.create(PVCS, &pvc("big")).await;
    let baseline = support::child::rss_kib(server.pid);
    let first = round(&server, &api, baseline, SILENT_WATCHERS as u64).await;
    // What the terminated watchers held went back to the allocator: a second round of the same
    // reuses it instead of adding to it.
    let second = round(&server, &api, baseline, 2 * SILENT_WATCHERS as u64).await;
    assert!(
        second < first + first.saturating_sub(baseline) / 2,
        "the second round added half the first round's growth or more ({first} KiB, then {second} KiB)"
    );
}
