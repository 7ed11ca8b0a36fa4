//! The monitoring files in `deploy/`: the alert rules pass `promtool check rules` and their unit
//! tests (`promtool test rules`), every alert has a unit test in which it fires and a runbook
//! section in docs/troubleshooting.md, the PrometheusRule carries the same groups, the rules'
//! `up` jobs are the PodMonitors' jobs, and every query of the Grafana dashboard parses, names
//! only metrics the components export and filters by its cluster variable; the dashboard's
//! ConfigMap carries the dashboard for Grafana's sidecar.
//!
//! Needs `promtool` (Debian: package `prometheus`) for the promtool parts; without it they print
//! `SKIPPED` and pass, unless `VOLHEALTH_REQUIRE_TOOLS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use std::path::{Path, PathBuf};
use std::process::Command;
use volhealth_deploy_tests::manifests;
use volhealth_testkit::have_tool;

/// Every metric family the monitor and the agent export (the Metrics tables of docs/monitor.md
/// and docs/agent.md).
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
    // volhealth remediate and volhealth scheduler-extender (crates/remediate, crates/scheduler).
    "volhealth_remediation_actions_total",
    "volhealth_scheduler_filter_requests_total",
];

/// Where every alert's runbook_url points: a section of docs/troubleshooting.md.
const RUNBOOKS: &str = "https://github.com/volhealth/volhealth/blob/main/docs/troubleshooting.md#";

fn deploy() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// Runs `promtool ARGS` in `dir`: whether it succeeded, and its standard output followed by its
/// standard error.
fn promtool(args: &[&str], dir: &Path) -> (bool, String) {
    let out = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("run promtool {args:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn yaml(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `csi_*` and `volhealth_*` metric names an expression uses (a histogram's `_bucket` read as
/// its family).
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(i) = ["csi_", "volhealth_"]
        .iter()
        .filter_map(|p| rest.find(p))
        .min()
    {
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
    let path = deploy().join("kubernetes/grafana-dashboard/grafana-dashboard.json");
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

fn rules() -> Vec<serde_json::Value> {
    let rules = yaml(&deploy().join("volhealth-rules.yaml"));
    rules["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .collect()
}

fn rule_exprs() -> Vec<String> {
    rules()
        .iter()
        .filter_map(|r| r["expr"].as_str().map(String::from))
        .collect()
}

/// The jobs `up{job="A"}` or `up{job=~"A|B"}` in an expression names.
fn up_jobs(expr: &str) -> Vec<String> {
    let mut jobs = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("up{job=") {
        let tail = &rest[i + "up{job=".len()..];
        let tail = tail.strip_prefix('~').unwrap_or(tail);
        let value = tail.strip_prefix('"').expect("a quoted job");
        let end = value.find('"').expect("a closing quote");
        jobs.extend(value[..end].split('|').map(String::from));
        rest = &value[end..];
    }
    jobs
}

/// The job names the PodMonitors of deploy/kubernetes/podmonitors give their targets.
fn podmonitor_jobs() -> Vec<String> {
    let text = std::fs::read_to_string(deploy().join("kubernetes/podmonitors/podmonitors.yaml"))
        .expect("read the PodMonitors");
    let mut jobs = Vec::new();
    for pm in serde_saphyr::from_multiple::<serde_json::Value>(&text).expect("YAML") {
        for endpoint in pm["spec"]["podMetricsEndpoints"]
            .as_array()
            .expect("endpoints")
        {
            for r in endpoint["relabelings"].as_array().into_iter().flatten() {
                if r["targetLabel"] == "job" {
                    jobs.push(r["replacement"].as_str().expect("a job").to_string());
                }
            }
        }
    }
    jobs
}

/// GitHub's anchor for a Markdown heading: lower case, spaces to `-`, other punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn the_alert_rules_pass_promtool_and_their_unit_tests() {
    if !have_tool("promtool", &["--version"]) {
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
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| r["alert"].as_str().map(String::from))
        .collect();
    for alert in [
        "CSIVolumeInaccessibleOrDataLoss",
        "CSIStorageBackendUnreachable",
        "CSIVolumeHealthProbeErrorsRising",
        "CSIVolumeHealthWritesDropped",
        "CSIVolumeHealthWritesNotAtRest",
        "VolhealthTargetDown",
        "VolhealthMonitorAbsent",
        "VolhealthSchedulerExtenderNotCalled",
        "VolhealthRemediationFailing",
    ] {
        assert!(
            names.iter().any(|n| n == alert),
            "{alert} missing from {names:?}"
        );
    }
}

#[test]
fn dashboard_and_rules_use_only_exported_metrics() {
    let jobs = podmonitor_jobs();
    assert_eq!(
        jobs,
        [
            "volhealth-monitor",
            "volhealth-agent",
            "volhealth-remediate",
            "volhealth-scheduler-extender"
        ]
    );
    for expr in dashboard_exprs().iter().chain(rule_exprs().iter()) {
        let names = metric_names(expr);
        // An expression on target health reads `up` of jobs the PodMonitors set.
        let up = up_jobs(expr);
        for job in &up {
            assert!(
                jobs.contains(job),
                "{job} (in {expr}) is no PodMonitor's job"
            );
        }
        assert!(
            !names.is_empty() || !up.is_empty(),
            "no volhealth metric in {expr}"
        );
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
    if !have_tool("promtool", &["--version"]) {
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

#[test]
fn every_alert_has_a_runbook_in_the_troubleshooting_guide() {
    let guide = std::fs::read_to_string(deploy().join("../docs/troubleshooting.md")).unwrap();
    let anchors: Vec<String> = guide
        .lines()
        .filter_map(|l| l.strip_prefix("## ").or_else(|| l.strip_prefix("### ")))
        .map(anchor)
        .collect();
    let mut n = 0;
    for rule in rules().iter().filter(|r| r["alert"].is_string()) {
        let alert = rule["alert"].as_str().unwrap();
        let url = rule["annotations"]["runbook_url"]
            .as_str()
            .unwrap_or_else(|| panic!("{alert} has no runbook_url"));
        let section = url
            .strip_prefix(RUNBOOKS)
            .unwrap_or_else(|| panic!("{alert}: {url} is not in docs/troubleshooting.md"));
        assert!(
            anchors.iter().any(|a| a == section),
            "{alert}: docs/troubleshooting.md has no section #{section}"
        );
        n += 1;
    }
    assert!(n >= 16, "{n} alerts");
}

#[test]
fn every_alert_has_a_unit_test_in_which_it_fires() {
    let tests = yaml(&deploy().join("volhealth-rules.test.yaml"));
    let firing: Vec<String> = tests["tests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().cloned().unwrap_or_default())
        .filter(|a| a["exp_alerts"].as_array().is_some_and(|e| !e.is_empty()))
        .filter_map(|a| a["alertname"].as_str().map(String::from))
        .collect();
    for rule in rules().iter().filter(|r| r["alert"].is_string()) {
        let alert = rule["alert"].as_str().unwrap();
        assert!(
            firing.iter().any(|f| f == alert),
            "no unit test in which {alert} fires"
        );
    }
}

#[test]
fn the_dashboard_filters_by_cluster_namespace_and_driver() {
    let path = deploy().join("kubernetes/grafana-dashboard/grafana-dashboard.json");
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let variables: Vec<&str> = dash["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    for v in ["cluster", "namespace", "driver"] {
        assert!(variables.contains(&v), "no ${v} variable: {variables:?}");
    }
    let exprs = dashboard_exprs();
    for expr in &exprs {
        assert!(
            expr.contains("cluster=~\"$cluster\""),
            "{expr} ignores $cluster"
        );
    }
    for v in ["namespace", "driver"] {
        assert!(
            exprs.iter().any(|e| e.contains(&format!("=~\"${v}\""))),
            "no query uses ${v}"
        );
    }
}

#[test]
fn the_dashboard_configmap_carries_the_dashboard_for_grafanas_sidecar() {
    if !have_tool("kubectl", &["version", "--client"]) {
        return;
    }
    let dir = deploy().join("kubernetes/grafana-dashboard");
    let rendered = manifests::kustomize(&dir)
        .expect("kubectl kustomize")
        .expect("kubectl is there");
    let [cm] = rendered.as_slice() else {
        panic!("one ConfigMap, not {rendered:?}");
    };
    assert_eq!(cm["kind"], "ConfigMap");
    assert_eq!(cm["metadata"]["labels"]["grafana_dashboard"], "1");
    let data = cm["data"].as_object().unwrap();
    assert_eq!(data.len(), 1);
    let (key, json) = data.iter().next().unwrap();
    assert!(key.ends_with(".json"), "{key}");
    let shipped: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("grafana-dashboard.json")).unwrap())
            .unwrap();
    let carried: serde_json::Value = serde_json::from_str(json.as_str().unwrap()).unwrap();
    assert_eq!(carried, shipped);
}
