//! The Kubernetes manifests in `deploy/kubernetes/`: every kustomization renders with
//! `kubectl kustomize` (and every Component is rendered by one), and every object it renders
//! validates against the Kubernetes 1.37 schemas in strict mode (`kubernetes-validate` from PyPI,
//! run by the Python named by VOLHEALTH_PYTHON, default `python3`), which refuses a misspelt
//! field (the Prometheus Operator's PodMonitors, which it has no schema for, are checked in
//! crates/deploy-tests, as are the monitor Component's renderings onto drivers); the flags the
//! containers pass are ones the binaries take; and both directory tables list every directory.
//!
//! Without kubectl or kubernetes-validate the rendering tests print `SKIPPED` and pass, unless
//! `VOLHEALTH_REQUIRE_TOOLS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use std::path::PathBuf;
use std::process::Command;

/// The schemas every object is validated against.
const KUBERNETES_VERSION: &str = "1.37.0";

fn manifests() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes")
}

/// Every directory under deploy/kubernetes with a kustomization.yaml, sorted: the
/// Kustomizations, and the Components (which render only as part of a Kustomization).
fn kustomizations_and_components() -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (components, kustomizations) = all_kustomization_dirs().into_iter().partition(|d| {
        let text = std::fs::read_to_string(d.join("kustomization.yaml")).unwrap();
        documents(&text)[0]["kind"] == "Component"
    });
    (kustomizations, components)
}

fn kustomizations() -> Vec<PathBuf> {
    kustomizations_and_components().0
}

fn all_kustomization_dirs() -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![manifests()];
    while let Some(dir) = stack.pop() {
        if dir.join("kustomization.yaml").exists() {
            found.push(dir.clone());
        }
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            }
        }
    }
    found.sort();
    found
}

fn documents(text: &str) -> Vec<serde_json::Value> {
    serde_saphyr::from_multiple::<serde_json::Value>(text)
        .unwrap()
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

/// The Python interpreter with kubernetes-validate, if there is one (else the test should return).
fn validator() -> Option<String> {
    if !support::have_tool("kubectl", &["version", "--client"]) {
        return None;
    }
    let python = volhealth_testkit::python();
    support::have_tool(&python, &["-c", "import kubernetes_validate"]).then_some(python)
}

/// Runs kubernetes-validate in strict mode on `yaml`: (passed, its output).
fn validate(python: &str, yaml: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rendered.yaml");
    std::fs::write(&file, yaml).unwrap();
    support::merged_output(
        Command::new(python)
            .args([
                "-m",
                "kubernetes_validate",
                "--strict",
                "-k",
                KUBERNETES_VERSION,
            ])
            .arg(&file),
    )
}

#[test]
fn every_base_and_overlay_renders_and_validates_against_kubernetes_1_37() {
    let dirs = kustomizations();
    let names: Vec<String> = dirs
        .iter()
        .map(|d| d.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    assert_eq!(
        names,
        [
            "agent",
            "all",
            "grafana-dashboard",
            "monitor",
            "monitor-example",
            "namespace-example",
            "podmonitors",
            "remediate",
            "scheduler-extender"
        ]
    );
    let Some(python) = validator() else {
        return;
    };
    for dir in &dirs {
        let rendered = documents(&support::kustomize(dir));
        assert!(!rendered.is_empty(), "{} renders nothing", dir.display());
        // The Prometheus Operator's kinds are CRDs, which kubernetes-validate has no schema
        // for: their structure is checked by crates/deploy-tests/tests/podmonitors.rs.
        let (custom, objects): (Vec<_>, Vec<_>) = rendered
            .into_iter()
            .partition(|o| o["apiVersion"] == "monitoring.coreos.com/v1");
        for o in &custom {
            assert_eq!(o["kind"], "PodMonitor", "{}: {o}", dir.display());
        }
        if objects.is_empty() {
            continue;
        }
        let yaml: String = objects
            .iter()
            .map(|o| format!("---\n{}\n", serde_json::to_string(o).unwrap()))
            .collect();
        let (ok, out) = validate(&python, &yaml);
        assert!(ok, "{} does not validate:\n{out}", dir.display());
        // Each object was checked against a schema (none skipped as an unknown kind).
        let minor = KUBERNETES_VERSION.rsplit_once('.').unwrap().0;
        for o in &objects {
            let id = format!(
                "passed for resource {}/{} against version {minor}",
                o["kind"].as_str().unwrap().to_lowercase(),
                o["metadata"]["name"].as_str().unwrap()
            );
            assert!(out.contains(&id), "{}: no `{id}` in:\n{out}", dir.display());
        }
        assert!(!out.contains("WARN"), "{}:\n{out}", dir.display());
    }
}

#[test]
fn every_component_is_rendered_by_a_kustomization() {
    let (kustomizations, components) = kustomizations_and_components();
    let names: Vec<String> = components
        .iter()
        .map(|d| d.strip_prefix(manifests()).unwrap().display().to_string())
        .collect();
    assert_eq!(names, ["components/monitor-sidecar"]);
    // A Component does not render on its own: it is validated through a kustomization using it.
    for c in &components {
        let used = kustomizations.iter().any(|k| {
            let text = std::fs::read_to_string(k.join("kustomization.yaml")).unwrap();
            documents(&text)[0]["components"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|entry| {
                    k.join(entry.as_str().unwrap()).canonicalize().unwrap()
                        == c.canonicalize().unwrap()
                })
        });
        assert!(used, "no kustomization renders {}", c.display());
    }
}

#[test]
fn both_directory_tables_list_every_directory() {
    let (kustomizations, components) = kustomizations_and_components();
    for doc in ["README.md", "../../docs/deploy.md"] {
        let text = std::fs::read_to_string(manifests().join(doc)).unwrap();
        for dir in kustomizations.iter().chain(&components) {
            let row = format!(
                "| `{}/` |",
                dir.strip_prefix(manifests()).unwrap().display()
            );
            assert!(text.contains(&row), "{doc} has no row {row}");
        }
    }
}

#[test]
fn the_validation_refuses_a_misspelt_field() {
    let Some(python) = validator() else {
        return;
    };
    let yaml = support::kustomize(&manifests().join("agent"));
    let broken = yaml.replace("readOnlyRootFilesystem:", "readOnlyRootFileSystem:");
    assert_ne!(broken, yaml);
    let (ok, out) = validate(&python, &broken);
    assert!(!ok, "a misspelt field passed:\n{out}");
    assert!(out.contains("readOnlyRootFileSystem"), "{out}");
}

/// The containers of `file` (a Deployment, DaemonSet or patch of one) with their args.
fn containers(file: &str) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(manifests().join(file)).unwrap();
    documents(&text)
        .iter()
        .flat_map(|d| {
            d["spec"]["template"]["spec"]["containers"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect()
}

#[test]
fn the_containers_pass_only_flags_the_binary_takes() {
    let mut seen = Vec::new();
    for file in [
        "components/monitor-sidecar/monitor-sidecar.yaml",
        "agent/daemonset.yaml",
        "remediate/deployment.yaml",
        "scheduler-extender/deployment.yaml",
    ] {
        for c in containers(file) {
            if c["image"] != "volhealth" {
                continue;
            }
            let args: Vec<String> = c["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string())
                .collect();
            // Every $(VAR) the kubelet expands is set on the container.
            let env: Vec<&str> = c["env"]
                .as_array()
                .map(|e| e.iter().filter_map(|v| v["name"].as_str()).collect())
                .unwrap_or_default();
            for a in &args {
                if let Some(start) = a.find("$(") {
                    let var = &a[start + 2..a[start..].find(')').unwrap() + start];
                    assert!(
                        env.contains(&var),
                        "{file}: {a} uses {var}, which is not set"
                    );
                }
            }
            // A `command` names one of the image's single-component binaries, which takes the
            // flags of that subcommand; without one, the image's `volhealth` gets the subcommand.
            let (program, subcommand) = match c["command"].as_array() {
                Some(command) => {
                    assert_eq!(command.len(), 1, "{file}: {command:?}");
                    let path = command[0].as_str().unwrap();
                    let name = path.strip_prefix("/usr/local/bin/").unwrap_or_else(|| {
                        panic!("{file}: {path} is not where the Dockerfile puts binaries")
                    });
                    let sub = name.strip_prefix("volhealth-").unwrap();
                    (support::bin().with_file_name(name), sub.to_string())
                }
                None => (support::bin(), args[0].clone()),
            };
            // clap refuses an unknown flag before it reaches --help.
            let out = Command::new(&program)
                .args(&args)
                .arg("--help")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{file}: {} {}:\n{}",
                program.display(),
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
            seen.push(subcommand);
        }
    }
    seen.sort();
    assert_eq!(
        seen,
        ["agent", "monitor", "remediate", "scheduler-extender"]
    );
}

#[test]
fn the_shipped_remediation_policy_passes_the_real_parser() {
    let text = std::fs::read_to_string(manifests().join("remediate/policy.yaml")).unwrap();
    let policy = volhealth_remediate::Policy::parse(&text).unwrap_or_else(|e| panic!("{e}"));
    // Story 5: a failed local disk held 5 minutes evicts the pod and annotates the claim.
    let story = policy
        .rules
        .iter()
        .find(|r| r.name == "failed-local-disk")
        .expect("the Story 5 rule");
    assert_eq!(story.matcher.status, "Inaccessible");
    assert_eq!(story.matcher.reason, "DiskFailure");
    assert_eq!(story.hold(), std::time::Duration::from_secs(300));
    assert!(story.actions.contains(&volhealth_remediate::Action::Evict));
    assert!(
        story
            .actions
            .iter()
            .any(|a| matches!(a, volhealth_remediate::Action::Annotate { .. }))
    );
}

/// The container snippets of docs/deploy.md (YAML blocks with a `command:`), each as
/// (command, args).
fn guide_snippets() -> Vec<(serde_json::Value, serde_json::Value)> {
    let guide = std::fs::read_to_string(manifests().join("../../docs/deploy.md")).unwrap();
    let mut out = Vec::new();
    let mut block: Option<String> = None;
    for line in guide.lines() {
        match (&mut block, line.trim()) {
            (None, "```yaml") => block = Some(String::new()),
            (Some(text), "```") => {
                if text.contains("command:") {
                    let v = &documents(text)[0];
                    out.push((v["command"].clone(), v["args"].clone()));
                }
                block = None;
            }
            (Some(text), _) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, _) => {}
        }
    }
    out
}

#[test]
fn the_deploy_guide_shows_the_containers_as_shipped() {
    let snippets = guide_snippets();
    let shipped: Vec<serde_json::Value> = [
        "components/monitor-sidecar/monitor-sidecar.yaml",
        "agent/daemonset.yaml",
        "remediate/deployment.yaml",
    ]
    .iter()
    .flat_map(|f| containers(f))
    .collect();
    for binary in ["volhealth-monitor", "volhealth-agent"] {
        assert!(
            snippets.iter().any(|(c, _)| c.to_string().contains(binary)),
            "docs/deploy.md shows no container running {binary}"
        );
    }
    for (command, args) in &snippets {
        let container = shipped
            .iter()
            .find(|c| &c["command"] == command)
            .unwrap_or_else(|| {
                panic!("docs/deploy.md shows command {command}, which no shipped container runs")
            });
        assert_eq!(
            args, &container["args"],
            "docs/deploy.md shows other args for {command} than deploy/kubernetes ships"
        );
    }
}
