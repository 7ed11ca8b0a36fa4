//! The monitoring files in `deploy/`: the alert rules pass `promtool check rules` and their unit
//! tests (`promtool test rules`), the PrometheusRule carries the same groups, and every query of
//! the Grafana dashboard parses and names only metrics the components export.
//!
//! Needs `promtool` (Debian: package `prometheus`) for the promtool parts; without it they print
//! `SKIPPED` and pass, unless `VOLHEALTH_REQUIRE_TOOLS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Every metric family the monitor and the agent export (the README's Metrics tables).
const EXPORTED: &[&str] = &[
    "csi_volume_health_probe_total",
    "csi_volume_health_probe_duration_seconds",
    "csi_controller_volume_health_status",
    "csi_node_volume_health_status",
    "csi_node_storage_health_status",
    "csi_volume_health_status_writes_total",
    "csi_volume_health_status_writes_dropped_total",
    "csi_volume_health_unknown_condition_total",
    "csi_volume_health_unmapped_volumes",
    "csi_volume_health_incomplete_cycles_total",
    "csi_volume_health_cycle_duration_seconds",
    "csi_volume_health_cycle_overruns_total",
];

fn deploy() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

fn promtool(args: &[&str], dir: &Path) -> (bool, String) {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run promtool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn yaml(path: &Path) -> serde_yaml::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `csi_*` metric names an expression uses (a histogram's `_bucket` read as its family).
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("csi_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        // A histogram's series are its name plus one of these.
        let base = ["_bucket", "_count", "_sum"]
            .iter()
            .find_map(|suffix| name.strip_suffix(suffix))
            .unwrap_or(name);
        names.push(base.to_string());
        rest = &tail[end..];
    }
    names
}

fn dashboard_exprs() -> Vec<String> {
    let path = deploy().join("grafana-dashboard.json");
    let text = std::fs::read_to_string(&path).expect("read the dashboard");
    let dash: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let panels = dash["panels"].as_array().expect("panels");
    let exprs: Vec<String> = panels
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(String::from))
        .collect();
    assert!(exprs.len() >= 8, "{exprs:?}");
    exprs
}

fn rule_exprs() -> Vec<String> {
    let rules = yaml(&deploy().join("volhealth-rules.yaml"));
    rules["groups"]
        .as_sequence()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_sequence().cloned().unwrap_or_default())
        .filter_map(|r| r["expr"].as_str().map(String::from))
        .collect()
}

#[test]
fn the_alert_rules_pass_promtool_and_their_unit_tests() {
    if !support::have_tool("promtool", &["--version"]) {
        return;
    }
    let dir = deploy();
    let (ok, out) = promtool(&["check", "rules", "volhealth-rules.yaml"], &dir);
    assert!(ok, "promtool check rules:\n{out}");
    let (ok, out) = promtool(&["test", "rules", "volhealth-rules.test.yaml"], &dir);
    assert!(ok, "promtool test rules:\n{out}");
}

#[test]
fn the_prometheus_rule_carries_the_same_groups() {
    let rules = yaml(&deploy().join("volhealth-rules.yaml"));
    let manifest = yaml(&deploy().join("prometheus-rule.yaml"));
    assert_eq!(manifest["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(manifest["kind"], "PrometheusRule");
    assert_eq!(manifest["spec"]["groups"], rules["groups"]);
    let names: Vec<String> = rules["groups"]
        .as_sequence()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_sequence().cloned().unwrap_or_default())
        .filter_map(|r| r["alert"].as_str().map(String::from))
        .collect();
    for alert in [
        "CSIVolumeInaccessibleOrDataLoss",
        "CSIStorageBackendUnreachable",
        "CSIVolumeHealthProbeErrorsRising",
        "CSIVolumeHealthWritesDropped",
        "CSIVolumeHealthWritesNotAtRest",
    ] {
        assert!(
            names.iter().any(|n| n == alert),
            "{alert} missing from {names:?}"
        );
    }
}

#[test]
fn dashboard_and_rules_use_only_exported_metrics() {
    for expr in dashboard_exprs().iter().chain(rule_exprs().iter()) {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "no volhealth metric in {expr}");
        for name in names {
            assert!(
                EXPORTED.contains(&name.as_str()),
                "{name} (in {expr}) is not exported"
            );
        }
    }
}

#[test]
fn every_dashboard_query_parses() {
    if !support::have_tool("promtool", &["--version"]) {
        return;
    }
    // promtool parses PromQL only inside rule files, so each query becomes a recording rule,
    // with Grafana's interval variables given concrete values.
    let mut file = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, expr) in dashboard_exprs().iter().enumerate() {
        let expr = expr
            .replace("$__rate_interval", "5m")
            .replace("$__range", "1h");
        file.push_str(&format!(
            "      - record: dashboard:query{i}\n        expr: {}\n",
            serde_json::to_string(&expr).expect("quote")
        ));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("dashboard-rules.yaml"), &file).expect("write");
    let (ok, out) = promtool(&["check", "rules", "dashboard-rules.yaml"], dir.path());
    assert!(
        ok,
        "promtool check rules on the dashboard's queries:\n{out}\n{file}"
    );
}

#[test]
fn the_name_scanner_finds_names() {
    assert_eq!(
        metric_names(
            "rate(csi_a_total[5m]) / sum(csi_b_bucket{x=\"csi_c\"}) / csi_d_sum / csi_e_count"
        ),
        ["csi_a_total", "csi_b", "csi_c", "csi_d", "csi_e"]
    );
}
