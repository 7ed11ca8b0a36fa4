//! kubectl's typed generators send protobuf bodies (`kubectl create namespace|secret|
//! serviceaccount|role|rolebinding|clusterrole|clusterrolebinding`): the server reads them and
//! stores the same JSON a JSON body would give; `kubectl explain` reads `/openapi/v3`. Skipped when kubectl is missing (fails under
//! VOLHEALTH_REQUIRE_TOOLS=1).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod apiserver_http;
mod support;

use apiserver_http::*;
use serde_json::json;
use std::path::Path;
use std::process::{Command, Stdio};

fn kubectl(server: &support::ApiServer, dir: &Path, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .arg("--cache-dir")
        .arg(dir.join("kubectl-cache"))
        .args(args)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_sends_protobuf_and_it_is_stored() {
    if !support::have_tool("kubectl", &["version", "--client"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_apiserver(dir.path(), &[]);
    let api = Api::new(&server.url);
    let k = |args: &[&str]| kubectl(&server, dir.path(), args);

    k(&["create", "namespace", "team-a"]);
    let ns = api.get("/api/v1/namespaces/team-a").await;
    assert_eq!(ns.code, 200, "{}", ns.json);
    assert_eq!(ns.json["metadata"]["name"], "team-a");

    k(&[
        "create",
        "secret",
        "generic",
        "s",
        "-n",
        "team-a",
        "--from-literal=a=b",
        "--from-literal=c=d",
    ]);
    let s = api.get("/api/v1/namespaces/team-a/secrets/s").await.json;
    assert_eq!(s["data"], json!({"a": "Yg==", "c": "ZA=="}), "{s}");
    assert_eq!(s["type"], "Opaque");
    let out = k(&[
        "get",
        "secret",
        "s",
        "-n",
        "team-a",
        "-o",
        "jsonpath={.data.a}",
    ]);
    assert_eq!(out, "Yg==");

    k(&["create", "serviceaccount", "robot", "-n", "team-a"]);
    let sa = api
        .get("/api/v1/namespaces/team-a/serviceaccounts/robot")
        .await;
    assert_eq!(sa.code, 200, "{}", sa.json);

    k(&[
        "create",
        "role",
        "reader",
        "-n",
        "team-a",
        "--verb=get,list",
        "--resource=persistentvolumeclaims",
    ]);
    let role = api
        .get("/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/roles/reader")
        .await
        .json;
    assert_eq!(role["rules"][0]["verbs"], json!(["get", "list"]), "{role}");
    assert_eq!(
        role["rules"][0]["resources"],
        json!(["persistentvolumeclaims"]),
        "{role}"
    );

    k(&[
        "create",
        "rolebinding",
        "reader",
        "-n",
        "team-a",
        "--role=reader",
        "--user=alice",
        "--serviceaccount=team-a:robot",
    ]);
    let rb = api
        .get("/apis/rbac.authorization.k8s.io/v1/namespaces/team-a/rolebindings/reader")
        .await
        .json;
    assert_eq!(rb["roleRef"]["name"], "reader", "{rb}");
    assert_eq!(rb["subjects"].as_array().unwrap().len(), 2, "{rb}");

    k(&[
        "create",
        "clusterrole",
        "pv-reader",
        "--verb=get",
        "--resource=persistentvolumes",
    ]);
    k(&[
        "create",
        "clusterrolebinding",
        "pv-reader",
        "--clusterrole=pv-reader",
        "--group=ops",
    ]);
    let crb = api
        .get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/pv-reader")
        .await
        .json;
    assert_eq!(crb["subjects"][0]["name"], "ops", "{crb}");

    // The normal path still runs: a second create is a conflict, and a bad name is refused.
    let again = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .args(["create", "namespace", "team-a"])
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("AlreadyExists"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let bad = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&server.kubeconfig)
        .args(["create", "namespace", "Bad_Name"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("Invalid"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

/// `kubectl explain` reads `/openapi/v3` and the group-version documents, down to the health
/// fields of KEP-1432.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_explain_reaches_the_health_fields() {
    if !support::have_tool("kubectl", &["version", "--client"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_apiserver(dir.path(), &[]);
    let k = |args: &[&str]| kubectl(&server, dir.path(), args);
    let out = k(&["explain", "pvc.status.healthStatus"]);
    assert!(
        out.contains("healthConditions") && out.contains("lastTransitionTime"),
        "{out}"
    );
    let out = k(&["explain", "pvc.status.healthStatus.healthConditions.status"]);
    assert!(out.contains("Inaccessible"), "{out}");
    let out = k(&["explain", "pod.status.volumeHealth"]);
    assert!(
        out.contains("pod.spec.volumes") && out.contains("healthConditions"),
        "{out}"
    );
    let out = k(&["explain", "csinode.status.storageHealth"]);
    assert!(
        out.contains("StorageHealth") || out.contains("CSI driver"),
        "{out}"
    );
    let out = k(&["explain", "csinode.status.storageHealth.healthConditions"]);
    assert!(out.contains("StorageUnreachable"), "{out}");
}

/// `fieldValidation`: Strict (kubectl's default) refuses unknown fields naming them, Warn keeps
/// the request with a Warning header, Ignore says nothing; no mode stores them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_fields_are_refused_warned_or_dropped_and_never_stored() {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start_apiserver(dir.path(), &[]);
    let api = Api::new(&server.url);
    let client = reqwest::Client::new();
    let mut body = pvc("strict");
    body["spec"]["foo"] = json!("bar");
    let url = format!("{}{PVCS}", server.url);
    let r = client
        .post(format!("{url}?fieldValidation=Strict"))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let v: serde_json::Value = r.json().await.unwrap();
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("unknown field \"spec.foo\""),
        "{v}"
    );
    assert_eq!(api.get(&format!("{PVCS}/strict")).await.code, 404);

    let r = client.post(&url).json(&body).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let warning = r
        .headers()
        .get("warning")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    assert_eq!(warning, "299 - \"unknown field \\\"spec.foo\\\"\"");
    let stored = api.get(&format!("{PVCS}/strict")).await.json;
    assert!(stored["spec"].get("foo").is_none(), "{stored}");

    let mut put = stored.clone();
    put["spec"]["bar"] = json!(1);
    let r = client
        .put(format!("{url}/strict?fieldValidation=Ignore"))
        .json(&put)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(r.headers().get("warning").is_none());
    assert!(
        api.get(&format!("{PVCS}/strict")).await.json["spec"]
            .get("bar")
            .is_none()
    );
    let r = client
        .put(format!("{url}/strict?fieldValidation=Loose"))
        .json(&put)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);

    if !support::have_tool("kubectl", &["version", "--client"]) {
        return;
    }
    let file = dir.path().join("pvc.yaml");
    std::fs::write(&file, "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: applied\n  namespace: default\nspec:\n  accessModes: [ReadWriteOnce]\n  foo: bar\n  resources:\n    requests:\n      storage: 1Gi\n").unwrap();
    let run = |args: &[&str]| {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&server.kubeconfig)
            .arg("--cache-dir")
            .arg(dir.path().join("kubectl-cache"))
            .args(args)
            .env_remove("KUBECONFIG")
            .output()
            .unwrap()
    };
    let f = file.to_str().unwrap();
    // kubectl's default `--validate=true` asks for Strict, as `--validate=strict` does.
    for validate in ["--validate=strict", "--validate=true"] {
        let strict = run(&["apply", validate, "-f", f]);
        assert!(!strict.status.success());
        let err = String::from_utf8_lossy(&strict.stderr);
        assert!(err.contains("unknown field \"spec.foo\""), "{err}");
    }
    let warn = run(&["apply", "--validate=warn", "-f", f]);
    assert!(
        warn.status.success(),
        "{}",
        String::from_utf8_lossy(&warn.stderr)
    );
    let err = String::from_utf8_lossy(&warn.stderr);
    assert!(err.contains("unknown field \"spec.foo\""), "{err}");
    assert!(
        api.get(&format!("{PVCS}/applied")).await.json["spec"]
            .get("foo")
            .is_none()
    );
}
