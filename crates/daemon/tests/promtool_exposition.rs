//! The endpoint's `/metrics`, served over real HTTP, passes `promtool check metrics` in the
//! formats scrapers ask for, also before a component has any series.
//!
//! Needs `promtool` (Debian: package `prometheus`) on PATH; without it the test prints
//! `SKIPPED` and passes, unless `VOLHEALTH_REQUIRE_TOOLS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use std::sync::Arc;
use volhealth_daemon::{BoundEndpoint, Endpoints};
use volhealth_testkit::{have_tool, promtool_check_metrics};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProbeLabels {
    driver_name: String,
    method: String,
    result: String,
}

fn busy_registry() -> Registry {
    let mut registry = Registry::default();
    let probes = Family::<ProbeLabels, Counter>::default();
    registry.register(
        "csi_volume_health_probe",
        "CSI health calls",
        probes.clone(),
    );
    probes
        .get_or_create(&ProbeLabels {
            driver_name: "hostpath.volhealth.io".into(),
            method: "NodeGetVolumeHealth".into(),
            result: "success".into(),
        })
        .inc();
    let durations = Histogram::new([0.01, 0.1, 1.0]);
    durations.observe(0.05);
    registry.register_with_unit(
        "csi_volume_health_probe_duration",
        "Durations of CSI health calls",
        Unit::Seconds,
        durations,
    );
    let gauge = Gauge::<i64>::default();
    gauge.set(2);
    registry.register(
        "csi_volume_health_unmapped_volumes",
        "Unmapped volumes",
        gauge,
    );
    // A family that has no series yet, as a component has before its first cycle.
    registry.register(
        "csi_volume_health_unknown_condition",
        "Unknown conditions",
        Family::<ProbeLabels, Counter>::default(),
    );
    registry
}

async fn serve(registry: Registry) -> (String, tokio::sync::oneshot::Sender<()>) {
    let bound = BoundEndpoint::bind(
        "127.0.0.1:0".parse().expect("addr"),
        Endpoints::from_registry(Arc::new(registry)),
    )
    .await
    .expect("bind");
    let base = format!("http://{}", bound.local_addr());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(bound.serve(async {
        let _ = stopped.await;
    }));
    (base, stop)
}

async fn scrape(base: &str, accept: Option<&str>) -> (String, String) {
    let mut req = reqwest::Client::new().get(format!("{base}/metrics"));
    if let Some(accept) = accept {
        req = req.header("accept", accept);
    }
    let resp = req.send().await.expect("scrape");
    assert_eq!(resp.status().as_u16(), 200);
    let ct = resp.headers()["content-type"]
        .to_str()
        .expect("content type")
        .to_string();
    (ct, resp.text().await.expect("body"))
}

#[tokio::test]
async fn text_pages_pass_promtool_with_and_without_series() {
    if !have_tool("promtool", &["--version"]) {
        return;
    }
    for registry in [busy_registry(), Registry::default()] {
        let (base, _stop) = serve(registry).await;
        for accept in [None, Some("*/*"), Some("text/plain;version=0.0.4")] {
            let (ct, body) = scrape(&base, accept).await;
            assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
            if let Err(problems) = promtool_check_metrics(&body) {
                panic!("promtool check metrics ({accept:?}):\n{problems}\n--- page:\n{body}");
            }
            for family in [
                "# TYPE volhealth_build_info gauge",
                "# TYPE process_cpu_seconds_total counter",
                "# TYPE process_resident_memory_bytes gauge",
                "# TYPE process_start_time_seconds gauge",
                "# TYPE process_open_fds gauge",
                "# TYPE process_max_fds gauge",
            ] {
                assert!(body.contains(family), "{family} missing:\n{body}");
            }
        }
    }
}

#[tokio::test]
async fn counters_carry_help_and_type_under_their_sample_name() {
    let (base, _stop) = serve(busy_registry()).await;
    let (_, body) = scrape(&base, None).await;
    assert!(
        body.contains(
            "# HELP csi_volume_health_probe_total CSI health calls.\n# TYPE csi_volume_health_probe_total counter\n"
        ),
        "{body}"
    );
    let (ct, body) = scrape(
        &base,
        Some("application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.3"),
    )
    .await;
    assert!(ct.starts_with("application/openmetrics-text"), "{ct}");
    assert!(
        body.contains("# TYPE csi_volume_health_probe counter\n"),
        "{body}"
    );
    assert!(body.ends_with("\n# EOF\n"), "{body}");
}
