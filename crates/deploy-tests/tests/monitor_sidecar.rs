//! The monitor Component (`deploy/kubernetes/components/monitor-sidecar`) as kustomize renders
//! it onto drivers: on the example driver (`monitor-example`, a hostPath socket volume and the
//! driver's own service account) it adds its container and changes none of the driver's
//! containers, its service account or its volumes, mounts the socket volume and looks for the
//! socket the driver serves, and binds the monitor's ClusterRole and a leader-election Role (the
//! same rules as the monitor's own) to the driver's account; onto two other drivers (other
//! accounts and namespaces, an emptyDir socket) it binds each one's account under a name of its
//! own; an unlabelled Deployment gets no container.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use serde_json::Value;
use std::path::{Path, PathBuf};
use volhealth_deploy_tests::manifests;

/// Whether kubectl is there (else the tests print SKIPPED and pass, unless tools are required).
fn kubectl() -> bool {
    manifests::kustomize(&manifests::dir().join("monitor"))
        .unwrap()
        .is_some()
}

fn render(dir: &Path) -> Vec<Value> {
    manifests::kustomize(dir).unwrap().expect("kubectl")
}

fn documents(text: &str) -> Vec<Value> {
    manifests::parse_documents(text).unwrap()
}

/// A directory under the build's temporary directory, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The one object of `kind` named `name` in `objects`.
fn named<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let mut found = objects
        .iter()
        .filter(|o| o["kind"] == kind && o["metadata"]["name"] == name);
    let one = found
        .next()
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"));
    assert!(found.next().is_none(), "two {kind} {name} rendered");
    one
}

#[test]
fn the_monitor_component_adds_a_container_and_changes_nothing_the_driver_declares() {
    if !kubectl() {
        return;
    }
    // The driver as its manifests declare it, and as the example renders it with the component.
    let declared_text =
        std::fs::read_to_string(manifests::dir().join("monitor-example/driver-controller.yaml"))
            .unwrap();
    let declared = documents(&declared_text);
    let before = declared
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("the driver's Deployment");
    let name = before["metadata"]["name"].as_str().unwrap();
    let objects = render(&manifests::dir().join("monitor-example"));
    let after = named(&objects, "Deployment", name);
    let (old_pod, pod) = (
        &before["spec"]["template"]["spec"],
        &after["spec"]["template"]["spec"],
    );

    // The driver's identity and volumes are untouched: the socket volume is still its hostPath,
    // with exactly one source.
    assert_eq!(pod["serviceAccountName"], old_pod["serviceAccountName"]);
    assert_eq!(pod["volumes"], old_pod["volumes"]);
    let volumes = pod["volumes"].as_array().unwrap();
    assert_eq!(volumes.len(), 1, "{volumes:?}");
    let socket_volume = &volumes[0];
    let socket_dir = socket_volume["name"].as_str().unwrap();
    let sources: Vec<&String> = socket_volume
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| *k != "name")
        .collect();
    assert_eq!(sources, ["hostPath"], "{socket_volume}");
    // Every container the driver declares is rendered exactly as declared; one is added.
    let containers = pod["containers"].as_array().unwrap();
    let old_containers = old_pod["containers"].as_array().unwrap();
    assert_eq!(containers.len(), old_containers.len() + 1);
    for c in old_containers {
        assert!(containers.contains(c), "{} changed", c["name"]);
    }
    let monitor = containers
        .iter()
        .find(|c| c["name"] == "csi-external-health-monitor-controller")
        .expect("the monitor container");
    assert!(
        monitor["image"].as_str().unwrap().starts_with("volhealth:"),
        "{}",
        monitor["image"]
    );

    // The monitor mounts the driver's socket volume and looks for the socket the driver serves.
    let mount_of = |c: &Value| {
        c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == socket_dir)
            .map(|m| {
                m["mountPath"]
                    .as_str()
                    .unwrap()
                    .trim_end_matches('/')
                    .to_string()
            })
            .unwrap_or_else(|| panic!("{} does not mount {socket_dir}", c["name"]))
    };
    let driver = containers
        .iter()
        .find(|c| c["name"] == "csi-driver")
        .expect("the driver container");
    let address = monitor["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "ADDRESS")
        .and_then(|e| e["value"].as_str())
        .expect("ADDRESS");
    let served = driver["args"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|a| a.as_str().unwrap().strip_prefix("--endpoint=unix://"))
        .expect("the driver's endpoint");
    let in_volume = |path: &str, mount: &str| {
        path.strip_prefix(&format!("{mount}/"))
            .unwrap_or_else(|| panic!("{path} is not in {mount}"))
            .to_string()
    };
    assert_eq!(
        in_volume(address, &mount_of(monitor)),
        in_volume(served, &mount_of(driver)),
        "the monitor looks for another socket than the driver serves"
    );

    // The driver's own service account, in its namespace, gets the monitor's ClusterRole and the
    // leader-election Role (in the pod's namespace, where the Lease is).
    let account = serde_json::json!([{
        "kind": "ServiceAccount",
        "name": old_pod["serviceAccountName"],
        "namespace": after["metadata"]["namespace"],
    }]);
    let sidecar_rbac: Vec<&Value> = objects
        .iter()
        .filter(|o| o["metadata"]["labels"]["app.kubernetes.io/component"] == "monitor-sidecar")
        .collect();
    let crb = sidecar_rbac
        .iter()
        .find(|o| o["kind"] == "ClusterRoleBinding")
        .expect("the component's ClusterRoleBinding");
    assert_eq!(crb["subjects"], account);
    assert_eq!(crb["roleRef"]["kind"], "ClusterRole");
    let cluster_role = named(
        &objects,
        "ClusterRole",
        crb["roleRef"]["name"].as_str().unwrap(),
    );
    assert!(
        cluster_role["rules"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["resources"][0] == "persistentvolumeclaims/status"),
        "{cluster_role}"
    );
    let rb = sidecar_rbac
        .iter()
        .find(|o| o["kind"] == "RoleBinding")
        .expect("the component's RoleBinding");
    assert_eq!(rb["subjects"], account);
    assert_eq!(rb["metadata"]["namespace"], after["metadata"]["namespace"]);
    let role = named(&objects, "Role", rb["roleRef"]["name"].as_str().unwrap());
    assert_eq!(
        role["metadata"]["namespace"],
        after["metadata"]["namespace"]
    );
    // The same grant as the monitor's own leader-election Role.
    let base =
        documents(&std::fs::read_to_string(manifests::dir().join("monitor/rbac.yaml")).unwrap());
    let base_role = base.iter().find(|o| o["kind"] == "Role").unwrap();
    assert_eq!(role["rules"], base_role["rules"]);
}

#[test]
fn the_component_binds_the_account_and_namespace_each_driver_has() {
    if !kubectl() {
        return;
    }
    let dir = TempDir::new("monitor-component");
    let component = manifests::relative(
        dir.path(),
        &manifests::dir().join("components/monitor-sidecar"),
    )
    .unwrap();
    // Two drivers, each in its own overlay: another account, another namespace, an emptyDir socket.
    for (driver, namespace, account) in [
        ("alpha", "storage-alpha", "alpha-controller-sa"),
        ("beta", "storage-beta", "beta-controller-sa"),
    ] {
        let overlay = dir.path().join(driver);
        std::fs::create_dir(&overlay).unwrap();
        std::fs::write(
            overlay.join("kustomization.yaml"),
            format!(
                "resources: [driver.yaml]\ncomponents: [../{}]\n",
                component.display()
            ),
        )
        .unwrap();
        std::fs::write(
            overlay.join("driver.yaml"),
            format!(
                "apiVersion: apps/v1
kind: Deployment
metadata:
  name: {driver}-controller
  namespace: {namespace}
  labels: {{volhealth.io/monitor-sidecar: \"true\"}}
spec:
  selector: {{matchLabels: {{app: {driver}}}}}
  template:
    metadata: {{labels: {{app: {driver}}}}}
    spec:
      serviceAccountName: {account}
      containers: [{{name: driver, image: {driver}:1, volumeMounts: [{{name: socket-dir, mountPath: /csi}}]}}]
      volumes: [{{name: socket-dir, emptyDir: {{}}}}]
"
            ),
        )
        .unwrap();
    }
    let alpha = render(&dir.path().join("alpha"));
    let beta = render(&dir.path().join("beta"));
    let mut cluster_bindings = Vec::new();
    for (objects, namespace, account) in [
        (&alpha, "storage-alpha", "alpha-controller-sa"),
        (&beta, "storage-beta", "beta-controller-sa"),
    ] {
        let subject = serde_json::json!([
            {"kind": "ServiceAccount", "name": account, "namespace": namespace}
        ]);
        let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], account);
        assert_eq!(
            pod["volumes"],
            serde_json::json!([{"name": "socket-dir", "emptyDir": {}}])
        );
        assert_eq!(pod["containers"].as_array().unwrap().len(), 2);
        for kind in ["ClusterRoleBinding", "RoleBinding"] {
            let b = objects.iter().find(|o| o["kind"] == kind).unwrap();
            assert_eq!(b["subjects"], subject, "{kind}");
        }
        for kind in ["Role", "RoleBinding"] {
            let o = objects.iter().find(|o| o["kind"] == kind).unwrap();
            assert_eq!(o["metadata"]["namespace"], namespace, "{kind}");
        }
        let crb = objects
            .iter()
            .find(|o| o["kind"] == "ClusterRoleBinding")
            .unwrap();
        cluster_bindings.push(crb["metadata"]["name"].as_str().unwrap().to_string());
    }
    // Two drivers in one cluster do not overwrite each other's cluster-wide grant.
    assert_ne!(cluster_bindings[0], cluster_bindings[1]);
    // A driver Deployment without the label gets no container (the patch targets the label).
    let overlay = dir.path().join("alpha");
    let unlabelled = std::fs::read_to_string(overlay.join("driver.yaml"))
        .unwrap()
        .replace("volhealth.io/monitor-sidecar: \"true\"", "app: alpha");
    std::fs::write(overlay.join("driver.yaml"), unlabelled).unwrap();
    let objects = render(&overlay);
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}
