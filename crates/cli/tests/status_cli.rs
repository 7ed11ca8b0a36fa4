//! `volhealth status` against the real embedded API server: every unhealthy condition of the three
//! fields appears once with its source; the output formats; a clear failure when the API is not
//! there; `--watch`; and the `kubectl volhealth` plugin through the real kubectl.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod support;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;
use support::{ApiServer, bin, have_tool, start_apiserver};

const DRIVER: &str = "hostpath.volhealth.io";

async fn send(method: reqwest::Method, url: String, body: Value, content_type: &str) {
    let resp = reqwest::Client::new()
        .request(method.clone(), &url)
        .header("content-type", content_type)
        .body(body.to_string())
        .send()
        .await
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = resp.status();
    assert!(
        status.is_success(),
        "{method} {url}: {status} {}",
        resp.text().await.unwrap_or_default()
    );
}

async fn create(api: &ApiServer, collection: &str, body: Value) {
    send(
        reqwest::Method::POST,
        format!("{}{collection}", api.url),
        body,
        "application/json",
    )
    .await;
}

async fn patch_status(api: &ApiServer, object: &str, status: Value) {
    let url = format!("{}{object}/status", api.url);
    send(
        reqwest::Method::PATCH,
        url,
        json!({ "status": status }),
        "application/merge-patch+json",
    )
    .await;
}

/// A PVC, a pod and a CSINode, healthy.
async fn seed(api: &ApiServer) {
    create(
        api,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "other"}}),
    )
    .await;
    create(
        api,
        "/api/v1/persistentvolumes",
        json!({"metadata": {"name": "pv-1"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "csi": {"driver": DRIVER, "volumeHandle": "vh-1"}}}),
    )
    .await;
    create(api, "/api/v1/namespaces/default/persistentvolumeclaims", json!({"metadata": {"name": "data-1"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "volumeName": "pv-1"}}))
    .await;
    create(
        api,
        "/api/v1/namespaces/default/pods",
        json!({"metadata": {"name": "web-1"},
        "spec": {"nodeName": "node-1", "containers": [{"name": "web", "image": "nginx"}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-1"}}]}}),
    )
    .await;
    create(
        api,
        "/apis/storage.k8s.io/v1/csinodes",
        json!({"metadata": {"name": "node-1"},
        "spec": {"drivers": [{"name": DRIVER, "nodeID": "node-1"}]}}),
    )
    .await;
}

/// Makes all three objects unhealthy.
async fn break_all(api: &ApiServer) {
    patch_status(api, "/api/v1/namespaces/default/persistentvolumeclaims/data-1", json!({"healthStatus": {
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "healthConditions": [{"status": "Inaccessible", "reason": "VolumeNotFound", "message": "gone"}]}}))
    .await;
    patch_status(
        api,
        "/api/v1/namespaces/default/pods/web-1",
        json!({"volumeHealth": [{"name": "data",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "healthConditions": [{"status": "Degraded", "reason": "SlowIo", "message": "slow"}]}]}),
    )
    .await;
    patch_status(api, "/apis/storage.k8s.io/v1/csinodes/node-1", json!({"storageHealth": [{"name": DRIVER,
        "healthConditions": [{"status": "StorageUnreachable", "reason": "BackendDown", "accessMode": "ReadWriteOnce",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]}))
    .await;
}

fn status(kubeconfig: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin())
        .arg("status")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .output()
        .expect("run status");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn status_shows_every_unhealthy_condition_with_its_source() {
    let tmp = tempfile::tempdir().unwrap();
    let api = start_apiserver(tmp.path(), &[]);
    seed(&api).await;

    let (code, out, err) = status(&api.kubeconfig, &["-A", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let doc = json_of(&out);
    assert_eq!(doc["healthy"], true);
    assert_eq!(doc["items"], json!([]));
    let (_, out, _) = status(&api.kubeconfig, &[]);
    assert!(
        out.starts_with("No volume health conditions in namespace default"),
        "{out}"
    );

    break_all(&api).await;
    let (code, out, err) = status(&api.kubeconfig, &["-A", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let doc = json_of(&out);
    assert_eq!(doc["apiVersion"], "volhealth.io/v1alpha1");
    assert_eq!(doc["kind"], "HealthReport");
    assert_eq!(doc["healthy"], false);
    let items = doc["items"].as_array().unwrap();
    let summary: Vec<(String, String, String, String)> = items
        .iter()
        .map(|i| {
            let s = |k: &str| i[k].as_str().unwrap_or_default().to_string();
            (s("kind"), s("name"), s("source"), s("status"))
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                "PersistentVolumeClaim".into(),
                "data-1".into(),
                "controller".into(),
                "Inaccessible".into()
            ),
            (
                "Pod".into(),
                "web-1".into(),
                "node".into(),
                "Degraded".into()
            ),
            (
                "CSINode".into(),
                "node-1".into(),
                "backend".into(),
                "StorageUnreachable".into()
            ),
        ]
    );
    assert_eq!(
        items[0]["driver"], DRIVER,
        "the PVC's driver comes from its PV"
    );
    assert_eq!(items[1]["claim"], "data-1");
    assert_eq!(items[1]["node"], "node-1");
    assert_eq!(items[1]["podVolume"], "data");
    assert_eq!(items[2]["accessMode"], "ReadWriteOnce");
    assert_eq!(items[2]["namespace"], Value::Null);

    // A table for people; piped, so no colour.
    let (_, table, _) = status(&api.kubeconfig, &["-A"]);
    // The conditions, then (after a blank line) what watches each volume.
    let lines: Vec<&str> = table.lines().take_while(|l| !l.is_empty()).collect();
    assert_eq!(lines.len(), 4, "{table}");
    assert!(
        table.contains("pvc/data-1") && table.contains("1 volume; controller side: 1 unknown"),
        "no writer published what watches data-1, so it is unknown: {table}"
    );
    assert!(
        lines[0].starts_with("NAMESPACE")
            && lines[0].contains("SOURCE")
            && lines[0].ends_with("MESSAGE")
    );
    assert!(
        lines[1].contains("pvc/data-1")
            && lines[1].contains("controller")
            && lines[1].contains("VolumeNotFound")
    );
    assert!(!table.contains('\x1b'), "no colour when piped");
    let (_, coloured, _) = status(&api.kubeconfig, &["-A", "--color", "always"]);
    assert!(coloured.contains("\x1b[31mInaccessible"), "{coloured}");
    let (_, wide, _) = status(&api.kubeconfig, &["-A", "-o", "wide"]);
    assert!(wide.lines().next().unwrap().contains("NODE") && wide.contains("node-1"));
    let (_, yaml, _) = status(&api.kubeconfig, &["-A", "-o", "yaml"]);
    let yaml: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(yaml["items"][1]["status"], "Degraded");

    // -n limits PVCs and pods; CSINodes are cluster-scoped and always shown.
    let (_, out, _) = status(&api.kubeconfig, &["-n", "other", "-o", "json"]);
    let doc = json_of(&out);
    assert_eq!(doc["namespace"], "other");
    assert_eq!(doc["items"].as_array().unwrap().len(), 1);
    assert_eq!(doc["items"][0]["kind"], "CSINode");
}

#[test]
fn status_fails_clearly_when_the_api_cannot_be_reached() {
    let tmp = tempfile::tempdir().unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let kc = tmp.path().join("kubeconfig");
    std::fs::write(
        &kc,
        volhealth_apiserver::kubeconfig::render(&volhealth_apiserver::kubeconfig::Kubeconfig {
            server: format!("http://127.0.0.1:{port}"),
            ..Default::default()
        }),
    )
    .unwrap();
    let (code, out, err) = status(&kc, &["-A"]);
    assert_ne!(code, 0, "unreachable API must fail: {out}");
    assert!(
        err.contains(&format!(
            "cannot reach the API server at http://127.0.0.1:{port}"
        )),
        "{err}"
    );
    assert!(out.is_empty());
    let (code, _, err) = status(&tmp.path().join("missing"), &[]);
    assert_ne!(code, 0);
    assert!(err.contains("reading kubeconfig"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_prints_a_new_document_when_health_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let api = start_apiserver(tmp.path(), &[]);
    seed(&api).await;
    let (_child, rx) = watch(&api, Stdio::null());
    let first = json_of(
        &rx.recv_timeout(Duration::from_secs(30))
            .expect("first document"),
    );
    assert_eq!(first["healthy"], true);
    break_all(&api).await;
    // Each change may arrive as its own document; wait for the one with all three.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let doc = json_of(&rx.recv_timeout(left).expect("a document after the change"));
        if doc["items"].as_array().map(Vec::len) == Some(3) {
            break;
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kubectl_volhealth_runs_status() {
    if !have_tool("kubectl", &["version", "--client"]) {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let api = start_apiserver(tmp.path(), &[]);
    seed(&api).await;
    break_all(&api).await;
    let plugins = tmp.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::os::unix::fs::symlink(bin(), plugins.join("kubectl-volhealth")).unwrap();
    std::os::unix::fs::symlink(bin(), plugins.join("kubectl_complete-volhealth")).unwrap();
    let path = format!(
        "{}:{}",
        plugins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // `kubectl ARGS` with the plugin on PATH, which must succeed: its stdout.
    let kubectl = |args: &[&str]| {
        let out = support::output_ok(
            Command::new("kubectl")
                .args(args)
                .env("PATH", &path)
                .env("KUBECONFIG", &api.kubeconfig),
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let doc = json_of(&kubectl(&["volhealth", "-A", "-o", "json"]));
    assert_eq!(doc["items"].as_array().unwrap().len(), 3);
    let listed = Command::new("kubectl")
        .args(["plugin", "list"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&listed.stdout).contains("kubectl-volhealth"));

    // kubectl's own completion asks the plugin's completer (kubectl 1.26 and later).
    let completed = Command::new("kubectl")
        .args(["__complete", "volhealth", "-A", "--out"])
        .env("PATH", &path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&completed.stdout);
    assert_eq!(
        text.lines().take(2).collect::<Vec<_>>(),
        ["--output", ":4"],
        "{text}{}",
        String::from_utf8_lossy(&completed.stderr)
    );

    // The help shows the form kubectl users type, and the form it used to show works too.
    let help = kubectl(&["volhealth", "--help"]);
    assert!(
        help.contains("Usage: kubectl volhealth [OPTIONS]"),
        "{help}"
    );
    let doc = json_of(&kubectl(&["volhealth", "status", "-A", "-o", "json"]));
    assert_eq!(doc["items"].as_array().unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_tells_of_an_outage_once_and_of_its_end() {
    let tmp = tempfile::tempdir().unwrap();
    let mut api = start_apiserver(tmp.path(), &[]);
    seed(&api).await;
    let (mut child, rx) = watch(&api, Stdio::piped());
    let stderr = child.0.stderr.take().unwrap();

    let warnings = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = warnings.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            seen.lock().unwrap().push(line);
        }
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("first document");

    // The API server goes away: four watches fail on every retry, the user is told once.
    let port = api.url.rsplit(':').next().unwrap().to_string();
    api.proc.kill();
    let lines = || warnings.lock().unwrap().clone();
    support::wait_for(Duration::from_secs(30), "the outage warning", || {
        (!lines().is_empty()).then_some(())
    });
    let window = std::time::Instant::now() + Duration::from_secs(4);
    while std::time::Instant::now() < window {
        assert_eq!(lines().len(), 1, "one line per outage: {:#?}", lines());
        std::thread::park_timeout(Duration::from_millis(100));
    }
    let first = lines()[0].clone();
    assert!(
        first.contains("retrying") && !first.contains("ServiceError"),
        "{first}"
    );

    // Back on the same port with the same data: said once more, then nothing.
    let data = tmp.path().join("data").to_string_lossy().to_string();
    let listen = format!("127.0.0.1:{port}");
    let _again = support::volhealth(
        "apiserver-again",
        tmp.path(),
        &[
            "apiserver",
            "--insecure-http",
            "--listen",
            &listen,
            "--data-dir",
            &data,
            // As start_apiserver runs it: the test's client has no roles.
            "--authorization-mode",
            "Node,AlwaysAllow",
        ],
    );
    support::wait_for(Duration::from_secs(60), "the end of the outage", || {
        lines()
            .iter()
            .any(|l| l.contains("answers again"))
            .then_some(())
    });
    assert_eq!(lines().len(), 2, "{:#?}", lines());
}

/// A child killed and reaped when the test ends, also when it fails.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `volhealth status --watch -A -o json` against `api`, its standard error going to
/// `stderr`: the child, and the lines of its standard output as they come.
fn watch(api: &ApiServer, stderr: Stdio) -> (Reaped, Receiver<String>) {
    let mut child = Command::new(bin())
        .args(["status", "--watch", "-A", "-o", "json", "--kubeconfig"])
        .arg(&api.kubeconfig)
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (Reaped(child), rx)
}

/// `LIST` requests the API server has answered for `resource`, from its own metrics.
fn lists_of(api: &ApiServer, resource: &str) -> f64 {
    let (_, _, page) = support::http_get(&format!("{}/metrics", api.url), None).unwrap();
    page.lines()
        .filter(|l| {
            l.starts_with("apiserver_request_total{")
                && l.contains(r#"verb="LIST""#)
                && l.contains(&format!(r#"resource="{resource}""#))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread")]
async fn lists_come_in_pages_of_500_and_a_label_selector_narrows_them() {
    let tmp = tempfile::tempdir().unwrap();
    let api = start_apiserver(tmp.path(), &[]);
    seed(&api).await;
    break_all(&api).await;
    // 501 more claims in another namespace: two pages.
    for i in 0..501 {
        create(&api, "/api/v1/namespaces/other/persistentvolumeclaims", json!({
            "metadata": {"name": format!("bulk-{i}"), "labels": {"tier": "bulk"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))
        .await;
    }
    let before = lists_of(&api, "persistentvolumeclaims");
    let (code, out, err) = status(&api.kubeconfig, &["-A", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json_of(&out)["items"].as_array().unwrap().len(), 3);
    assert_eq!(
        lists_of(&api, "persistentvolumeclaims") - before,
        2.0,
        "502 claims are read in two requests of at most 500"
    );

    // -l: only PVCs and pods with the labels (web-1's claim data-1 has none).
    let (code, out, err) = status(&api.kubeconfig, &["-A", "-l", "tier=bulk", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let kinds: Vec<String> = json_of(&out)["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        kinds,
        ["CSINode"],
        "storage conditions are not label-selected: {out}"
    );

    // The real kubectl reads the chunks too (its table requests included).
    if have_tool("kubectl", &["version", "--client"]) {
        for output in ["name", "wide"] {
            let out = support::output_ok(
                Command::new("kubectl")
                    .args([
                        "get",
                        "pvc",
                        "-A",
                        "--chunk-size=100",
                        "--no-headers",
                        "-o",
                        output,
                    ])
                    .env("KUBECONFIG", &api.kubeconfig),
            );
            let lines = String::from_utf8_lossy(&out.stdout).lines().count();
            assert_eq!(lines, 502, "kubectl -o {output} saw every claim");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_drops_the_fields_is_never_shown_as_healthy() {
    // Gate on, nothing reported: "no conditions", and the dry run stores nothing.
    let tmp = tempfile::tempdir().unwrap();
    let api = start_apiserver(tmp.path(), &[]);
    seed(&api).await;
    let (code, out, err) = status(&api.kubeconfig, &["-A"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("No volume or storage health conditions"),
        "{out}"
    );
    let (_, _, body) = support::http_get(
        &format!(
            "{}/api/v1/namespaces/default/persistentvolumeclaims/data-1",
            api.url
        ),
        None,
    )
    .unwrap();
    assert!(
        !body.contains("healthStatus"),
        "the dry run stored nothing: {body}"
    );

    // Gate off: the same cluster says so instead.
    let tmp = tempfile::tempdir().unwrap();
    let api = start_apiserver(tmp.path(), &["--feature-gates", "CSIVolumeHealth=false"]);
    seed(&api).await;
    break_all(&api).await; // dropped on save
    let (code, out, err) = status(&api.kubeconfig, &["-A"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("The API server does not store volume health")
            && out.contains("CSIVolumeHealth feature gate is off")
            && !out.contains("No volume"),
        "{out}"
    );
    let (_, out, _) = status(&api.kubeconfig, &["-A", "-o", "json"]);
    let doc = json_of(&out);
    assert_eq!(doc["healthy"], false, "{doc}");
    assert!(
        doc["warnings"][0]
            .as_str()
            .unwrap()
            .contains("CSIVolumeHealth"),
        "{doc}"
    );
}
