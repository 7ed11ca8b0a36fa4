//! The PodMonitors of `deploy/kubernetes/podmonitors` (a CRD of the Prometheus Operator, which
//! kubernetes-validate has no schema for) checked against the workloads they scrape: each
//! selects the pods of its component and only those, scrapes a port those pods' container
//! serves, and sets the job the alerts name; the agent's targets carry their node.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use serde_json::Value;
use volhealth_deploy_tests::manifests;

fn render(dir: &str) -> Option<Vec<Value>> {
    manifests::kustomize(&manifests::dir().join(dir)).unwrap()
}

/// The pod templates of every workload the kit renders (the monitor inside the example driver).
fn workloads() -> Option<Vec<Value>> {
    let mut out = Vec::new();
    for dir in ["all", "agent", "monitor-example"] {
        out.extend(
            render(dir)?
                .into_iter()
                .filter(|o| o["kind"] == "Deployment" || o["kind"] == "DaemonSet"),
        );
    }
    Some(out)
}

fn selects(selector: &Value, labels: &Value) -> bool {
    selector["matchLabels"]
        .as_object()
        .unwrap()
        .iter()
        .all(|(k, v)| &labels[k] == v)
}

/// The value a relabeling with `target` label sets: (its source labels, its replacement).
fn relabeling<'a>(endpoint: &'a Value, target: &str) -> Option<&'a Value> {
    endpoint["relabelings"]
        .as_array()?
        .iter()
        .find(|r| r["targetLabel"] == target)
}

#[test]
fn each_podmonitor_scrapes_its_components_metrics_port_under_the_alerts_job() {
    let (Some(monitors), Some(workloads)) = (render("podmonitors"), workloads()) else {
        return;
    };
    let expected = [
        ("volhealth-monitor", "csi-example-controller"),
        ("volhealth-agent", "volhealth-agent"),
        ("volhealth-remediate", "volhealth-remediate"),
        (
            "volhealth-scheduler-extender",
            "volhealth-scheduler-extender",
        ),
    ];
    assert_eq!(monitors.len(), expected.len());
    for (job, workload) in expected {
        let pm = monitors
            .iter()
            .find(|m| m["metadata"]["name"] == job)
            .unwrap_or_else(|| panic!("no PodMonitor {job}"));
        assert_eq!(pm["apiVersion"], "monitoring.coreos.com/v1");
        assert_eq!(pm["kind"], "PodMonitor");
        let spec = &pm["spec"];
        // It selects this component's pods, and no other workload's.
        let selected: Vec<&Value> = workloads
            .iter()
            .filter(|w| {
                selects(
                    &spec["selector"],
                    &w["spec"]["template"]["metadata"]["labels"],
                )
            })
            .collect();
        assert_eq!(selected.len(), 1, "{job} selects {}", selected.len());
        let w = selected[0];
        assert_eq!(w["metadata"]["name"], workload, "{job}");
        // Without a namespaceSelector a PodMonitor looks in its own namespace only.
        if spec["namespaceSelector"]["any"] != true {
            assert_eq!(
                pm["metadata"]["namespace"], w["metadata"]["namespace"],
                "{job}"
            );
        }
        let endpoints = spec["podMetricsEndpoints"].as_array().unwrap();
        assert_eq!(endpoints.len(), 1, "{job}");
        let e = &endpoints[0];
        assert_eq!(e["path"], "/metrics", "{job}");
        // The container scraped: the one a `keep` relabeling names, else the only one.
        let containers = w["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap();
        let kept = e["relabelings"].as_array().unwrap().iter().find(|r| {
            r["action"] == "keep"
                && r["sourceLabels"] == serde_json::json!(["__meta_kubernetes_pod_container_name"])
        });
        let container = match kept {
            Some(r) => containers
                .iter()
                .find(|c| c["name"] == r["regex"])
                .unwrap_or_else(|| panic!("{job} keeps {}, no container of that name", r["regex"])),
            None => {
                assert_eq!(containers.len(), 1, "{job}");
                &containers[0]
            }
        };
        let port = container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == e["port"])
            .unwrap_or_else(|| panic!("{job}: {} has no port {}", container["name"], e["port"]));
        assert_eq!(port["protocol"], "TCP");
        // The job the alerts name (volhealth-rules.yaml), not the operator's NAMESPACE/NAME.
        let j = relabeling(e, "job").unwrap_or_else(|| panic!("{job} sets no job"));
        assert_eq!(j["replacement"], job);
        assert!(j.get("sourceLabels").is_none(), "{j}");
    }
}

#[test]
fn the_agents_targets_carry_their_node_and_the_writers_keep_their_own_labels() {
    let Some(monitors) = render("podmonitors") else {
        return;
    };
    let endpoint = |name: &str| {
        monitors
            .iter()
            .find(|m| m["metadata"]["name"] == name)
            .unwrap()["spec"]["podMetricsEndpoints"][0]
            .clone()
    };
    let agent = endpoint("volhealth-agent");
    let node = relabeling(&agent, "node").expect("a node label");
    assert_eq!(
        node["sourceLabels"],
        serde_json::json!(["__meta_kubernetes_pod_node_name"])
    );
    // The writers' status metrics have `namespace` and `pod` labels of their own (the claim's,
    // the workload's), which the target's must not rename to exported_*.
    for writer in ["volhealth-monitor", "volhealth-agent"] {
        assert_eq!(endpoint(writer)["honorLabels"], true, "{writer}");
    }
    // The monitor is in the drivers' namespaces, wherever those are.
    let monitor = monitors
        .iter()
        .find(|m| m["metadata"]["name"] == "volhealth-monitor")
        .unwrap();
    assert_eq!(monitor["spec"]["namespaceSelector"]["any"], true);
}
