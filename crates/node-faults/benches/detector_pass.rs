//! Cost of the node fault detector on a node without faults: one pass over 200 mounted volumes
//! (mount table lookup, a `statfs` per path on the probe threads, the kernel log check), and
//! the kernel log's cost per line that says nothing about storage.
//!
//! The mount table is a written mountinfo whose 200 volume mount points are real directories,
//! so the probes are real `statfs` calls and no root is needed.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use std::fmt::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};
use volhealth_node_faults::block_devices::Sysfs;
use volhealth_node_faults::kernel_log::KernelLog;
use volhealth_node_faults::{Detector, DetectorConfig, NodeFaultMetrics, VolumeQuery};

const VOLUMES: usize = 200;

fn detector_pass(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut mountinfo = String::new();
    // Other mounts of a busy node (container layers, secrets, tmpfs).
    for i in 0..300 {
        writeln!(
            mountinfo,
            "{} 1 0:{} / /run/containerd/x/{i}/rootfs rw,relatime - overlay overlay rw,lowerdir=/a",
            1000 + i,
            100 + i
        )
        .unwrap();
    }
    let mut queries = Vec::new();
    for i in 0..VOLUMES {
        let publish = dir.path().join(format!("pod{i}/mount"));
        let staging = dir.path().join(format!("staging{i}/globalmount"));
        std::fs::create_dir_all(&publish).unwrap();
        std::fs::create_dir_all(&staging).unwrap();
        for (n, p) in [(0, &staging), (1, &publish)] {
            writeln!(
                mountinfo,
                "{} 1 7:{i} / {} rw,relatime shared:{n} - ext4 /dev/loop{i} rw",
                2000 + 2 * i + n,
                p.display()
            )
            .unwrap();
        }
        queries.push(VolumeQuery {
            driver: "ebs.csi.aws.com".into(),
            volume_id: format!("vol-{i}"),
            publish_path: Some(publish),
            staging_path: Some(staging),
        });
    }
    let info = dir.path().join("mountinfo");
    std::fs::write(&info, mountinfo).unwrap();
    let config = DetectorConfig {
        mountinfo: vec![info],
        kmsg: None,
        max_probe_threads: 16,
        ..DetectorConfig::default()
    };
    let detector = Detector::start(config, Arc::new(NodeFaultMetrics::unregistered()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    c.bench_function("detector pass over 200 volumes, no faults", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let answers =
                    futures::future::join_all(queries.iter().map(|q| detector.volume_health(q)))
                        .await;
                assert!(answers.iter().all(|a| a.as_ref().is_ok_and(Vec::is_empty)));
            })
        })
    });

    // Criterion measures wall time; the budget is CPU time over every thread of the process
    // (the probe threads included), so it is printed beside.
    let passes = 200;
    let before = cpu_time();
    for _ in 0..passes {
        runtime.block_on(futures::future::join_all(
            queries.iter().map(|q| detector.volume_health(q)),
        ));
    }
    println!(
        "detector pass over {VOLUMES} volumes: {:.3} ms of CPU (mean of {passes})",
        (cpu_time() - before).as_secs_f64() * 1000.0 / f64::from(passes)
    );

    let log = KernelLog::new(Sysfs::new("/sys"));
    let now = Instant::now();
    c.bench_function("kernel log line that says nothing about storage", |b| {
        b.iter(|| {
            log.ingest(
                "6,2041,9220726707,-;eth0: Link is Up - 10Gbps/Full - flow control off",
                now,
                Duration::from_secs(600),
            )
        })
    });
}

/// User and system CPU time of the whole process so far.
fn cpu_time() -> Duration {
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF).unwrap();
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec() as u64) + Duration::from_micros(t.tv_usec() as u64)
    };
    tv(usage.user_time()) + tv(usage.system_time())
}

criterion_group!(benches, detector_pass);
criterion_main!(benches);
