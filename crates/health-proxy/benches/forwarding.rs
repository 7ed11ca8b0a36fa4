//! What the proxy costs a call it forwards: one unary call (GetPluginInfo and NodeGetCapabilities
//! of the reference driver) straight to the driver's socket, and the same call through
//! `health-proxy`, both over real unix sockets. The target is a proxied/direct ratio of at most
//! 1.2 at the median; the figures are in docs/benchmarks.md.
#![allow(clippy::unwrap_used, clippy::expect_used)] // benchmarks fail by panicking

use criterion::{Criterion, criterion_group, criterion_main};
use std::sync::Arc;
use std::time::Duration;
use volhealth_csi::v1;
use volhealth_health_proxy::ProxyConfig;

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let driver_socket = dir.path().join("csi.sock");
    let proxy_socket = dir.path().join("health.sock");
    let driver = format!("unix://{}", driver_socket.display());
    let proxy = format!("unix://{}", proxy_socket.display());
    let config =
        volhealth_driver::DriverConfig::new(driver.clone(), dir.path().join("state"), "node-a");
    rt.spawn(async move {
        let _ = volhealth_driver::run(config, std::future::pending()).await;
    });
    let proxy_config = ProxyConfig {
        csi_address: driver.clone(),
        listen: proxy.clone(),
        state_dir: None,
        timeout: Duration::from_secs(5),
        legacy: true,
        rules: Arc::new(volhealth_legacy_bridge::Rules::shipped().unwrap()),
        debounce: 2,
        node_faults: None,
    };
    rt.spawn(async move {
        let _ = volhealth_health_proxy::run(proxy_config, std::future::pending()).await;
    });
    let (direct, proxied) = rt.block_on(async {
        let connect = |e: String| async move {
            volhealth_csi::client::connect(&e, Duration::from_secs(10))
                .await
                .unwrap()
        };
        (connect(driver).await, connect(proxy).await)
    });

    let mut group = c.benchmark_group("forwarded unary call");
    for (name, channel) in [("direct", direct), ("through health-proxy", proxied)] {
        group.bench_function(format!("GetPluginInfo {name}"), |b| {
            let mut client = v1::identity_client::IdentityClient::new(channel.clone());
            b.iter(|| {
                rt.block_on(client.get_plugin_info(v1::GetPluginInfoRequest {}))
                    .unwrap()
            })
        });
        group.bench_function(format!("NodeGetVolumeStats {name}"), |b| {
            let mut client = v1::node_client::NodeClient::new(channel.clone());
            b.iter(|| {
                // NOT_FOUND (no such volume): a driver round trip with a real answer.
                let _ = rt.block_on(client.node_get_volume_stats(v1::NodeGetVolumeStatsRequest {
                    volume_id: "missing".into(),
                    volume_path: "/nonexistent".into(),
                    staging_target_path: String::new(),
                }));
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
