//! One filter request over 5,000 nodes, a tenth of them reporting storage conditions for the
//! pod's driver, answered from memory as the extender answers it from its caches.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use prometheus_client::registry::Registry;
use std::hint::black_box;
use volhealth_scheduler::HealthSchedulingPolicy;
use volhealth_scheduler::memory::{MemoryView, condition};
use volhealth_scheduler::metrics::SchedulerMetrics;
use volhealth_scheduler::server::answer;

const NODES: usize = 5_000;
const DRIVER: &str = "topolvm.io";

fn bench(c: &mut Criterion) {
    let policy = HealthSchedulingPolicy::parse(
        "rules:\n  - status: StorageUnreachable\n  - status: StorageDegraded\n    accessModes: [ReadWriteOnce]\n",
    )
    .unwrap();
    let mut view = MemoryView::default()
        .with_policy(DRIVER, policy)
        .with_claim("default", "data", DRIVER, &["ReadWriteOnce"], "Filesystem");
    for i in 0..NODES {
        let status = if i % 20 == 0 {
            "StorageUnreachable"
        } else {
            "StorageDegraded"
        };
        let conditions = if i % 10 == 0 {
            vec![condition(status, "NetworkPartition", None, None)]
        } else {
            Vec::new()
        };
        view = view.with_conditions(&format!("node-{i}"), DRIVER, conditions);
    }
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "db-0", "namespace": "default"},
        "spec": {"containers": [], "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}
    }))
    .unwrap();
    let names: Vec<String> = (0..NODES).map(|i| format!("node-{i}")).collect();
    let body =
        serde_json::to_vec(&serde_json::json!({"Pod": pod, "Nodes": null, "NodeNames": names}))
            .unwrap();
    let metrics = SchedulerMetrics::new(&mut Registry::default());
    c.bench_function("filter 5000 nodes (NodeNames)", |b| {
        b.iter(|| black_box(answer(&view, &metrics, black_box(&body))))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
