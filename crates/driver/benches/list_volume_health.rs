//! Cost of one ControllerListVolumeHealth page over 5,000 volumes held in memory (the handler
//! itself, without the socket): it must not scan the disk.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use criterion::{Criterion, criterion_group, criterion_main};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;
use volhealth_csi::v1;
use volhealth_csi::v1::controller_server::Controller;
use volhealth_driver::condition::Condition;
use volhealth_driver::controller::ControllerService;
use volhealth_driver::detect_controller::SpaceThresholds;
use volhealth_driver::detect_node::NodeChecker;
use volhealth_driver::injection_watch::InjectionWatch;
use volhealth_driver::plugin::Plugin;
use volhealth_driver::records::{VolumeRecord, volume_id_for};
use volhealth_driver::state::StateDir;
use volhealth_driver::volume_view::{Entry, VolumeView};
use volhealth_driver::{BackendKind, DriverConfig};

const VOLUMES: usize = 5_000;

fn service(dir: &std::path::Path) -> (ControllerService, Vec<String>) {
    let state = StateDir::new(dir);
    let mut entries = BTreeMap::new();
    for i in 0..VOLUMES {
        let name = format!("pvc-{i}");
        let id = volume_id_for(&name);
        let detected = if i % 10 == 0 {
            vec![Condition::new(
                2,
                "VolumeNotFound",
                format!("backing directory {i} no longer exists"),
            )]
        } else {
            Vec::new()
        };
        let record = VolumeRecord {
            id: id.clone(),
            name,
            backend: BackendKind::Dir,
            capacity_bytes: 1 << 30,
            created_at: "2026-01-01T00:00:00Z".into(),
        };
        entries.insert(id, Entry { record, detected });
    }
    let ids: Vec<String> = entries.keys().cloned().collect();
    let limits = SpaceThresholds {
        low_fraction: 0.1,
        full_bytes: 1 << 20,
    };
    let view = Arc::new(VolumeView::from_entries(state.clone(), limits, entries));
    let config = DriverConfig::new("unix:///unused.sock", dir, "bench");
    let plugin = Arc::new(Plugin {
        config,
        injections: InjectionWatch::new(state.clone()),
        state,
        view: Some(view),
        node_checker: NodeChecker::new(Duration::from_secs(1), Duration::from_millis(500)),
        can_mount: false,
        ops: tokio::sync::Mutex::new(()),
        list_cycles: AtomicU64::new(0),
    });
    (ControllerService::new(plugin), ids)
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (svc, ids) = service(dir.path());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let middle = format!("a/{}", ids[VOLUMES / 2]);
    for (label, max, token) in [
        ("first page of 100", 100, String::new()),
        ("middle page of 100", 100, middle.clone()),
        ("page of 1", 1, middle),
        ("all 5000", 0, String::new()),
    ] {
        c.bench_function(
            &format!("ControllerListVolumeHealth over {VOLUMES} volumes: {label}"),
            |b| {
                b.iter(|| {
                    let req = tonic::Request::new(v1::ControllerListVolumeHealthRequest {
                        max_entries: max,
                        starting_token: token.clone(),
                        secrets: Default::default(),
                    });
                    let resp = rt
                        .block_on(svc.controller_list_volume_health(req))
                        .expect("list");
                    std::hint::black_box(resp);
                })
            },
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
