//! Encoding and decoding cost of large health list pages, the hot path of the
//! monitor in list mode.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use criterion::{Criterion, criterion_group, criterion_main};
use prost::Message;
use std::hint::black_box;
use volhealth_csi_proto::v1;

fn page(volumes: usize) -> v1::ControllerListVolumeHealthResponse {
    let entries = (0..volumes)
        .map(|i| v1::VolumeHealth {
            volume_id: format!("pvc-{i:08}"),
            health_statuses: if i % 10 == 0 {
                vec![v1::volume_health::VolumeHealthEntry {
                    status: v1::VolumeHealthErrorType::Degraded as i32,
                    reason: "ReplicaLost".into(),
                    message: "one of three replicas is unreachable".into(),
                }]
            } else {
                Vec::new()
            },
        })
        .collect();
    v1::ControllerListVolumeHealthResponse {
        entries,
        next_token: "next".into(),
    }
}

fn codec(c: &mut Criterion) {
    let response = page(5_000);
    let bytes = response.encode_to_vec();
    c.bench_function("encode list page of 5000 volumes", |b| {
        b.iter(|| black_box(&response).encode_to_vec())
    });
    c.bench_function("decode list page of 5000 volumes", |b| {
        b.iter(|| v1::ControllerListVolumeHealthResponse::decode(black_box(bytes.as_slice())))
    });
}

criterion_group!(benches, codec);
criterion_main!(benches);
