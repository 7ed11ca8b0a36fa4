//! Every component `up` starts serves its metrics on the port `up` printed and wrote to
//! `<dir>/endpoints.json`, in Prometheus text that `promtool check metrics` accepts (and in
//! OpenMetrics when asked), with build info and process metrics; the metrics `deploy/` uses are
//! all there. A taken metrics port stops `up` before it starts anything.
//!
//! promtool (Debian package `prometheus`): without it the promtool checks print `SKIPPED`,
//! unless `VOLHEALTH_REQUIRE_TOOLS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod e2e_cluster;
mod support;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use support::{have_tool, http_get, promtool_check_metrics};

/// Families the dashboard and the alerts in `deploy/` read, by who exports them. The status
/// gauges exist only while a condition does, so the test injects one of each kind.
const MONITOR_FAMILIES: &[&str] = &[
    "csi_controller_volume_health_status",
    "csi_volume_health_probe_total",
    "csi_volume_health_probe_duration_seconds",
    "csi_volume_health_status_writes_total",
];
const AGENT_FAMILIES: &[&str] = &[
    "csi_node_volume_health_status",
    "csi_node_storage_health_status",
    "csi_volume_health_probe_total",
    "csi_volume_health_probe_duration_seconds",
    "csi_volume_health_status_writes_total",
];

/// GET `url`: plain HTTP, or over TLS as the admin of `kubeconfig` for the API server.
fn get(kubeconfig: &Path, url: &str, accept: Option<&str>) -> Option<(u16, String, String)> {
    match url.strip_prefix("https://") {
        Some(rest) => {
            let path = rest.find('/').map_or("/", |i| &rest[i..]);
            support::kube_request(kubeconfig, "GET", path, accept, "")
        }
        None => http_get(url, accept),
    }
}

fn scrape_text(kubeconfig: &Path, component: &str, url: &str) -> String {
    let (status, content_type, page) = support::wait_for(
        Duration::from_secs(30),
        &format!("{component}'s metrics at {url}"),
        || get(kubeconfig, url, None).filter(|(s, _, _)| *s == 200),
    );
    assert_eq!(status, 200);
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{component}: {content_type}"
    );
    page
}

fn has_family(page: &str, family: &str) -> bool {
    page.contains(&format!("# TYPE {family} "))
}

#[test]
fn up_publishes_every_metrics_endpoint_and_each_passes_promtool() {
    let promtool = have_tool("promtool", &["--version"]);
    let mut cluster = e2e_cluster::Cluster::start(2);
    let kc = cluster.kubeconfig.clone();
    let file = cluster.dir.join("endpoints.json");
    let text = std::fs::read_to_string(&file).expect("up writes endpoints.json");
    let urls: BTreeMap<String, String> = serde_json::from_str(&text).expect("endpoints.json");
    assert_eq!(
        urls.keys().map(String::as_str).collect::<Vec<_>>(),
        ["agent-node-1", "agent-node-2", "apiserver", "monitor"],
        "{text}"
    );
    let up_out = std::fs::read_to_string(cluster.up_log()).unwrap_or_default();
    for url in urls.values() {
        assert!(
            up_out.contains(url.as_str()),
            "up did not print {url}:\n{up_out}"
        );
    }

    // One condition of each kind, so that every status family has a series.
    cluster.inject_pvc(
        "default/data-1",
        "controller",
        "Inaccessible",
        "VolumeNotFound",
        &[],
    );
    cluster.inject_pvc("default/data-2", "node", "Degraded", "SlowIo", &[]);
    cluster.inject_storage("node-1", "StorageUnreachable", "NetworkPartition", &[]);
    cluster.eventually("every family deploy/ uses on the pages", || {
        let monitor = scrape_text(&kc, "monitor", &urls["monitor"]);
        let agents: Vec<String> = ["agent-node-1", "agent-node-2"]
            .iter()
            .map(|a| scrape_text(&kc, a, &urls[*a]))
            .collect();
        MONITOR_FAMILIES.iter().all(|f| has_family(&monitor, f))
            && AGENT_FAMILIES
                .iter()
                .all(|f| agents.iter().any(|page| has_family(page, f)))
    });

    for (component, url) in &urls {
        let page = scrape_text(&kc, component, url);
        let kind = component.split('-').next().unwrap_or_default();
        let build = format!(
            "volhealth_build_info{{component=\"{kind}\",version=\"{}\",revision=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION"),
            volhealth_daemon::build_info::REVISION
        );
        assert!(page.contains(&build), "{component}:\n{page}");
        for family in [
            "process_resident_memory_bytes",
            "process_cpu_seconds_total",
            "process_start_time_seconds",
            "process_open_fds",
            "process_max_fds",
        ] {
            assert!(has_family(&page, family), "{component} lacks {family}");
        }
        if promtool && let Err(problems) = promtool_check_metrics(&page) {
            panic!("promtool check metrics on {component} ({url}):\n{problems}\n--- page:\n{page}");
        }
        let (_, content_type, page) = get(
            &kc,
            url,
            Some("application/openmetrics-text; version=1.0.0"),
        )
        .expect("scrape");
        assert!(
            content_type.starts_with("application/openmetrics-text"),
            "{component}: {content_type}"
        );
        assert!(page.ends_with("# EOF\n"), "{component}:\n{page}");
    }
    cluster.interrupt();
}

/// A port something listens on (the listener holds it) whose port below was free when looked
/// at, so that a base one below it plans a free port for the monitor and the taken one for the
/// first node's agent.
fn taken_port_above_a_free_one() -> (std::net::TcpListener, u16) {
    for _ in 0..100 {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = taken.local_addr().expect("addr").port();
        if port > 1 && std::net::TcpListener::bind(("127.0.0.1", port - 1)).is_ok() {
            return (taken, port);
        }
    }
    panic!("no free port found below a free port in 100 tries");
}

#[test]
fn a_taken_metrics_port_stops_up_before_it_starts() {
    // The port below the taken one is free when chosen, but anything on the machine may take it
    // before up looks (another test's server, a connection's local port). Such a try says
    // nothing about up, so it is made again with other ports; a few tries at most.
    for attempt in 1..=5 {
        let (taken, port) = taken_port_above_a_free_one();
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("state");
        let out = std::process::Command::new(support::bin())
            .args([
                "up",
                "--dir",
                &dir.to_string_lossy(),
                "--nodes",
                "1",
                "--listen",
                "127.0.0.1:0",
            ])
            .args(["--metrics-port", &(port - 1).to_string()])
            .output()
            .expect("run up");
        drop(taken);
        let err = String::from_utf8_lossy(&out.stderr);
        if attempt < 5 && err.contains(&format!("port {} (", port - 1)) {
            eprintln!(
                "port {} was taken meanwhile by something else; trying again",
                port - 1
            );
            continue;
        }
        assert!(!out.status.success());
        assert!(
            err.contains(&format!("port {port}"))
                && err.contains("agent-node-1")
                && err.contains("--metrics-port"),
            "{err}"
        );
        assert!(
            !dir.join("logs/apiserver.log").exists(),
            "something was started"
        );
        return;
    }
}
