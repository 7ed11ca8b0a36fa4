//! The workloads as a platform team applies them: every container has requests and a memory
//! limit and runs under the runtime's seccomp profile; volhealth's own pods run on Linux nodes;
//! remediate survives a drain (PodDisruptionBudget, spread, readiness); the scheduler extender has
//! a Deployment and the Service the scheduler configuration calls; and the image is named once
//! for the whole kit.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use serde_json::Value;
use std::path::PathBuf;
use volhealth_deploy_tests::manifests;

fn render(dir: &str) -> Option<Vec<Value>> {
    manifests::kustomize(&manifests::dir().join(dir)).unwrap()
}

fn named<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

fn workloads(objects: &[Value]) -> Vec<&Value> {
    objects
        .iter()
        .filter(|o| o["kind"] == "Deployment" || o["kind"] == "DaemonSet")
        .collect()
}

fn is_volhealth(container: &Value) -> bool {
    let image = container["image"].as_str().unwrap();
    image == "volhealth" || image.starts_with("volhealth:") || image.contains("/volhealth:")
}

/// The port number of `--FLAG=:PORT` in `args`.
fn port_flag(args: &Value, flag: &str) -> u64 {
    args.as_array()
        .unwrap()
        .iter()
        .find_map(|a| a.as_str().unwrap().strip_prefix(&format!("--{flag}=:")))
        .unwrap_or_else(|| panic!("no --{flag}=:PORT in {args}"))
        .parse()
        .unwrap()
}

fn container_port(container: &Value, name: &str) -> u64 {
    container["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no port {name}"))["containerPort"]
        .as_u64()
        .unwrap()
}

/// Every volhealth workload of the kit: all/ (monitor, remediate, extender), the agent, and the
/// monitor sidecar in the example driver.
fn every_volhealth_workload() -> Option<Vec<Value>> {
    let mut out = Vec::new();
    for dir in ["all", "agent", "monitor-example"] {
        out.extend(render(dir)?);
    }
    Some(out)
}

#[test]
fn every_container_has_requests_a_memory_limit_and_the_runtime_seccomp_profile() {
    let Some(objects) = every_volhealth_workload() else {
        return;
    };
    let mut seen = 0;
    for w in workloads(&objects) {
        let pod = &w["spec"]["template"]["spec"];
        for c in pod["containers"].as_array().unwrap() {
            if !is_volhealth(c) {
                continue; // the example driver's own containers are the driver's business
            }
            seen += 1;
            let name = c["name"].as_str().unwrap();
            let r = &c["resources"];
            assert!(r["requests"]["cpu"].is_string(), "{name}: no CPU request");
            let request = mebibytes(&r["requests"]["memory"]);
            let limit = mebibytes(&r["limits"]["memory"]);
            assert!(request > 0 && limit >= 2 * request, "{name}: {r}");
            let sc = &c["securityContext"];
            assert_eq!(
                sc["seccompProfile"]["type"], "RuntimeDefault",
                "{name}: {sc}"
            );
            assert_eq!(sc["allowPrivilegeEscalation"], false, "{name}");
            assert_eq!(sc["readOnlyRootFilesystem"], true, "{name}");
            assert_eq!(
                sc["capabilities"]["drop"],
                serde_json::json!(["ALL"]),
                "{name}"
            );
            assert!(
                c["livenessProbe"]["httpGet"]["path"] == "/healthz",
                "{name}"
            );
        }
    }
    // monitor, agent, remediate, scheduler-extender
    assert_eq!(seen, 4);
}

/// A memory quantity of the forms the kit uses (`NNMi`), in MiB.
fn mebibytes(q: &Value) -> u64 {
    let q = q.as_str().unwrap_or_else(|| panic!("not a quantity: {q}"));
    q.strip_suffix("Mi")
        .unwrap_or_else(|| panic!("{q} is not in Mi"))
        .parse()
        .unwrap()
}

#[test]
fn volhealths_own_pods_run_on_linux_nodes() {
    let Some(objects) = every_volhealth_workload() else {
        return;
    };
    for name in [
        "volhealth-agent",
        "volhealth-remediate",
        "volhealth-scheduler-extender",
    ] {
        let w = objects
            .iter()
            .find(|o| o["metadata"]["name"] == name && o["spec"]["template"].is_object())
            .unwrap_or_else(|| panic!("no workload {name}"));
        assert_eq!(
            w["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/os"], "linux",
            "{name}"
        );
    }
}

#[test]
fn remediate_survives_a_drain() {
    let Some(objects) = render("remediate") else {
        return;
    };
    let d = named(&objects, "Deployment", "volhealth-remediate");
    let replicas = d["spec"]["replicas"].as_u64().unwrap();
    let labels = &d["spec"]["template"]["metadata"]["labels"];
    let pdb = named(&objects, "PodDisruptionBudget", "volhealth-remediate");
    assert_eq!(pdb["metadata"]["namespace"], d["metadata"]["namespace"]);
    for (k, v) in pdb["spec"]["selector"]["matchLabels"].as_object().unwrap() {
        assert_eq!(&labels[k], v, "the budget selects other pods");
    }
    // A drain may take one replica, never the last.
    let min = pdb["spec"]["minAvailable"].as_u64().unwrap();
    assert!(
        min >= 1 && min < replicas,
        "minAvailable {min} of {replicas}"
    );
    let pod = &d["spec"]["template"]["spec"];
    let spread = pod["topologySpreadConstraints"].as_array().unwrap();
    let by_node = spread
        .iter()
        .find(|s| s["topologyKey"] == "kubernetes.io/hostname")
        .expect("spread over nodes");
    assert_eq!(by_node["whenUnsatisfiable"], "DoNotSchedule");
    assert_eq!(
        by_node["labelSelector"]["matchLabels"],
        d["spec"]["selector"]["matchLabels"]
    );
    let c = &pod["containers"][0];
    let probe = &c["readinessProbe"]["httpGet"];
    assert_eq!(probe["path"], "/readyz");
    assert_eq!(
        container_port(c, probe["port"].as_str().unwrap()),
        port_flag(&c["args"], "http-endpoint")
    );
}

#[test]
fn the_extender_is_served_where_the_scheduler_configuration_calls_it() {
    let Some(objects) = render("scheduler-extender") else {
        return;
    };
    let d = named(&objects, "Deployment", "volhealth-scheduler-extender");
    let svc = named(&objects, "Service", "volhealth-scheduler-extender");
    let pod = &d["spec"]["template"]["spec"];
    let labels = &d["spec"]["template"]["metadata"]["labels"];
    for (k, v) in svc["spec"]["selector"].as_object().unwrap() {
        assert_eq!(&labels[k], v, "the Service selects other pods");
    }
    let c = &pod["containers"][0];
    assert_eq!(c["args"][0], "scheduler-extender");
    let listen = port_flag(&c["args"], "listen");
    let port = &svc["spec"]["ports"][0];
    assert_eq!(
        container_port(c, port["targetPort"].as_str().unwrap()),
        listen
    );
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
    // The scheduler configuration shipped beside the kit calls this Service.
    let config =
        manifests::documents(&manifests::dir().join("../scheduler-extender.yaml")).unwrap();
    let url = config[0]["extenders"][0]["urlPrefix"].as_str().unwrap();
    assert_eq!(
        url,
        format!(
            "http://{}.{}.svc:{}",
            svc["metadata"]["name"].as_str().unwrap(),
            svc["metadata"]["namespace"].as_str().unwrap(),
            port["port"]
        )
    );
    assert_eq!(pod["serviceAccountName"], "volhealth-scheduler-extender");
}

#[test]
fn the_image_is_named_once_for_the_whole_kit() {
    let Some(all) = render("all") else {
        return;
    };
    // As shipped, no container pulls a bare `volhealth` (docker.io/library/volhealth:latest).
    for dir in ["all", "agent", "monitor-example", "namespace-example"] {
        for w in workloads(&render(dir).unwrap()) {
            for c in w["spec"]["template"]["spec"]["containers"]
                .as_array()
                .unwrap()
            {
                let image = c["image"].as_str().unwrap();
                assert!(
                    image.contains(':') && !image.ends_with(":latest"),
                    "{dir}: {} pulls {image}",
                    c["name"]
                );
            }
        }
    }
    assert!(workloads(&all).len() >= 2);
    // One `images:` entry over all/ renames every volhealth container of it.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("volhealth-image-overlay-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let base = manifests::relative(&dir, &manifests::dir().join("all")).unwrap();
    std::fs::write(
        dir.join("kustomization.yaml"),
        format!(
            "resources: [{}]\nimages:\n  - name: volhealth\n    newName: registry.example.com/storage/volhealth\n    newTag: \"9.9.9\"\n",
            base.display()
        ),
    )
    .unwrap();
    let renamed = manifests::kustomize(&dir).unwrap().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let mut n = 0;
    for w in workloads(&renamed) {
        for c in w["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
        {
            assert_eq!(c["image"], "registry.example.com/storage/volhealth:9.9.9");
            n += 1;
        }
    }
    assert_eq!(n, workloads(&all).len());
}

#[test]
fn every_base_names_the_image_alike() {
    let mut entries = Vec::new();
    for dir in [
        "all",
        "agent",
        "remediate",
        "scheduler-extender",
        "components/monitor-sidecar",
    ] {
        let k =
            manifests::documents(&manifests::dir().join(dir).join("kustomization.yaml")).unwrap();
        let images = k[0]["images"]
            .as_array()
            .unwrap_or_else(|| panic!("{dir}: no images"));
        assert_eq!(images.len(), 1, "{dir}");
        assert_eq!(images[0]["name"], "volhealth", "{dir}");
        entries.push(images[0].clone());
    }
    assert!(entries.windows(2).all(|w| w[0] == w[1]), "{entries:?}");
}
