//! Bring your own workload under `volhealth up`: a PVC with up's StorageClass and a pod using it
//! are provisioned, bound, scheduled, staged and published; injected faults show on the user's
//! own objects; deleting them unpublishes, deletes the volume and removes the PV.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod e2e_cluster;
mod support;

use e2e_cluster::Cluster;
use serde_json::{Value, json};

fn send(c: &Cluster, method: &str, path: &str, body: &Value) {
    let (status, _, text) = support::kube_request_as(
        &c.kubeconfig,
        method,
        path,
        Some("application/json"),
        "application/json",
        &body.to_string(),
    )
    .unwrap_or_else(|| panic!("{method} {path} failed"));
    assert!(
        (200..300).contains(&status),
        "{method} {path}: {status} {text}"
    );
}

/// Files named `vol_data.json` under `dir`, recursively.
fn vol_data_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(vol_data_files(&p));
        } else if p.file_name().is_some_and(|n| n == "vol_data.json") {
            out.push(p);
        }
    }
    out
}

/// Whether a kubelet dir of `node` records volume `handle` (staging or publish).
fn recorded_on(c: &Cluster, node: &str, handle: &str) -> usize {
    let root = c.dir.join("nodes").join(node).join("kubelet");
    vol_data_files(&root)
        .iter()
        .filter(|f| {
            std::fs::read_to_string(f)
                .unwrap_or_default()
                .contains(handle)
        })
        .count()
}

#[test]
fn a_users_claim_and_pod_are_provisioned_mounted_monitored_and_cleaned_up() {
    let c = Cluster::start(2);
    let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "my-data", "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "volhealth-hostpath",
                 "resources": {"requests": {"storage": "1Gi"}}}});
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "my-app", "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "busybox",
                                 "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "my-data"}}]}});
    if c.kubectl {
        let file = c.tmp.path().join("workload.json");
        let list = json!({"apiVersion": "v1", "kind": "List", "items": [pvc, pod]});
        std::fs::write(&file, list.to_string()).unwrap();
        c.kubectl(&["apply", "-f", file.to_str().unwrap()]);
    } else {
        println!("kubectl not installed: creating the objects over HTTP instead");
        send(
            &c,
            "POST",
            "/api/v1/namespaces/default/persistentvolumeclaims",
            &pvc,
        );
        send(&c, "POST", "/api/v1/namespaces/default/pods", &pod);
    }
    let claim_path = "/api/v1/namespaces/default/persistentvolumeclaims/my-data";
    let pod_path = "/api/v1/namespaces/default/pods/my-app";
    c.eventually("the claim to be Bound", || {
        c.get_json(claim_path)
            .is_some_and(|v| v["status"]["phase"] == "Bound")
    });
    let claim = c.get_json(claim_path).unwrap();
    let pv_name = claim["spec"]["volumeName"].as_str().unwrap().to_string();
    let uid = claim["metadata"]["uid"].as_str().unwrap();
    assert_eq!(pv_name, format!("pvc-{uid}"));
    let pv = c
        .get_json(&format!("/api/v1/persistentvolumes/{pv_name}"))
        .unwrap();
    assert_eq!(pv["status"]["phase"], "Bound");
    assert_eq!(pv["spec"]["claimRef"]["uid"], uid);
    assert_eq!(
        pv["metadata"]["annotations"]["pv.kubernetes.io/provisioned-by"],
        "hostpath.volhealth.io"
    );
    let handle = pv["spec"]["csi"]["volumeHandle"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        c.dir.join("driver").join("volumes").join(&handle).exists(),
        "the driver has no volume {handle}"
    );

    c.eventually("the pod to be Running", || {
        c.get_json(pod_path)
            .is_some_and(|v| v["status"]["phase"] == "Running")
    });
    let pod = c.get_json(pod_path).unwrap();
    let node = pod["spec"]["nodeName"].as_str().unwrap().to_string();
    assert!(["node-1", "node-2"].contains(&node.as_str()), "{node}");
    assert_eq!(pod["status"]["conditions"][0]["type"], "Ready");
    // Staged and published: the kubelet dirs of that node record the volume twice.
    assert_eq!(recorded_on(&c, &node, &handle), 2);

    c.inject_pvc(
        "default/my-data",
        "controller",
        "Inaccessible",
        "VolumeNotFound",
        &["--message", "gone"],
    );
    c.inject_pvc(
        "default/my-data",
        "node",
        "Degraded",
        "SlowIo",
        &["--message", "slow"],
    );
    c.eventually("the claim's healthStatus", || {
        c.get_json(claim_path).is_some_and(|v| {
            v["status"]["healthStatus"]["healthConditions"][0]["status"] == "Inaccessible"
        })
    });
    c.eventually("the pod's volumeHealth", || {
        c.get_json(pod_path).is_some_and(|v| {
            v["status"]["volumeHealth"][0]["healthConditions"][0]["status"] == "Degraded"
                && v["status"]["volumeHealth"][0]["name"] == "data"
        })
    });

    send(&c, "DELETE", pod_path, &json!({}));
    send(&c, "DELETE", claim_path, &json!({}));
    c.eventually("the volume to be unpublished and unstaged", || {
        recorded_on(&c, &node, &handle) == 0
    });
    c.eventually("the PV to be gone", || {
        c.get_json(&format!("/api/v1/persistentvolumes/{pv_name}"))
            .is_none()
    });
    assert!(
        !c.dir.join("driver").join("volumes").join(&handle).exists(),
        "the volume {handle} was not deleted"
    );
}
