//! Throughput of the embedded API server over real loopback HTTP with a durable (fsync per
//! commit) SQLite store: PATCH of PVC status (serial and 16 in flight), and watch fan-out
//! (one status PATCH delivered to N watchers).
//!
//! Criterion reports `thrpt` in elements per second: requests/s for the PATCH benches and
//! deliveries/s (events × watchers) for fan-out.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use volhealth_apiserver::{ServerConfig, serve};

struct Server {
    url: String,
    _dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

async fn start() -> Server {
    let dir = tempfile::tempdir().expect("tempdir");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let mut config = ServerConfig::new(dir.path().join("data"));
    // The benchmark's client is anonymous: allow it (the server's default is Node,RBAC).
    config.authorization =
        volhealth_apiserver::authz::Authorizer::parse("Node,AlwaysAllow").expect("a mode");
    tokio::spawn(async move {
        let _ = serve(listener, config, async move {
            let _ = rx.await;
        })
        .await;
    });
    let client = reqwest::Client::new();
    for _ in 0..100 {
        if client.get(format!("{url}/readyz")).send().await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Server {
        url,
        _dir: dir,
        stop: Some(tx),
    }
}

const PVCS: &str = "/api/v1/namespaces/default/persistentvolumeclaims";

async fn create_pvc(client: &reqwest::Client, url: &str, name: &str) {
    let body = json!({"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"]}});
    let r = client
        .post(format!("{url}{PVCS}"))
        .json(&body)
        .send()
        .await
        .expect("create");
    assert_eq!(r.status().as_u16(), 201);
}

async fn patch_status(client: &reqwest::Client, url: &str, name: &str, i: u64) {
    let body = json!({"status": {"healthStatus": {"healthConditions": [
        {"status": "Degraded", "reason": format!("Reason{i}")}]}}});
    let r = client
        .patch(format!("{url}{PVCS}/{name}/status"))
        .header("content-type", "application/merge-patch+json")
        .body(body.to_string())
        .send()
        .await
        .expect("patch");
    assert_eq!(r.status().as_u16(), 200);
}

fn bench_patch(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let server = rt.block_on(start());
    let client = reqwest::Client::new();
    let names: Vec<String> = (0..16).map(|i| format!("bench-{i}")).collect();
    rt.block_on(async {
        for n in &names {
            create_pvc(&client, &server.url, n).await;
        }
    });
    let counter = AtomicU64::new(0);
    let mut g = c.benchmark_group("patch_pvc_status");
    g.sample_size(20).measurement_time(Duration::from_secs(10));
    g.throughput(Throughput::Elements(1));
    g.bench_function("serial", |b| {
        b.iter(|| {
            let i = counter.fetch_add(1, Ordering::Relaxed);
            rt.block_on(patch_status(&client, &server.url, &names[0], i));
        })
    });
    g.throughput(Throughput::Elements(16));
    g.bench_function("16_in_flight", |b| {
        b.iter(|| {
            let i = counter.fetch_add(1, Ordering::Relaxed);
            rt.block_on(futures::future::join_all(
                names
                    .iter()
                    .map(|n| patch_status(&client, &server.url, n, i)),
            ));
        })
    });
    g.finish();
    drop(server);
}

fn bench_fanout(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let server = rt.block_on(start());
    let client = reqwest::Client::new();
    rt.block_on(create_pvc(&client, &server.url, "fan"));
    let mut g = c.benchmark_group("watch_fanout");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    let counter = AtomicU64::new(0);
    for watchers in [1u64, 10, 100] {
        let delivered = Arc::new(AtomicU64::new(0));
        let notify = Arc::new(tokio::sync::Notify::new());
        let rv = rt.block_on(async {
            let r = client
                .get(format!("{}{PVCS}/fan", server.url))
                .send()
                .await
                .expect("get");
            let v: serde_json::Value = r.json().await.expect("json");
            v["metadata"]["resourceVersion"]
                .as_str()
                .unwrap_or("0")
                .to_string()
        });
        let tasks: Vec<_> = (0..watchers)
            .map(|_| {
                let url = format!("{}{PVCS}?watch=true&resourceVersion={rv}", server.url);
                let (delivered, notify) = (delivered.clone(), notify.clone());
                rt.spawn(async move {
                    let mut resp = reqwest::get(url).await.expect("watch");
                    while let Ok(Some(chunk)) = resp.chunk().await {
                        let lines = chunk.iter().filter(|b| **b == b'\n').count() as u64;
                        delivered.fetch_add(lines, Ordering::Relaxed);
                        notify.notify_one();
                    }
                })
            })
            .collect();
        g.throughput(Throughput::Elements(watchers));
        g.bench_with_input(BenchmarkId::from_parameter(watchers), &watchers, |b, &n| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let target = delivered.load(Ordering::Relaxed) + n;
                        let i = counter.fetch_add(1, Ordering::Relaxed);
                        patch_status(&client, &server.url, "fan", i).await;
                        while delivered.load(Ordering::Relaxed) < target {
                            let _ =
                                tokio::time::timeout(Duration::from_millis(5), notify.notified())
                                    .await;
                        }
                    }
                    start.elapsed()
                })
            })
        });
        for t in tasks {
            t.abort();
        }
    }
    g.finish();
    drop(server);
}

criterion_group!(benches, bench_patch, bench_fanout);
criterion_main!(benches);
