//! `status` run in-process against the real embedded API server, with the options as
//! `volhealth status` builds them from its flags and the output written into memory: every
//! unhealthy condition of the three fields appears once with its source; the output formats; a
//! clear failure when the API is not there; `--watch`; paging and label selectors; a server that
//! drops the fields. (The `kubectl volhealth` plugin through the real kubectl, and `--watch`
//! through an API server killed and started again, stay end-to-end tests of the binary.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests fail by panicking

use serde_json::{Value, json};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use volhealth_status::{Error, Format, StatusOptions};
use volhealth_testkit::kubectl::{self, Kubectl};
use volhealth_testkit::{
    ApiServer, DRIVER, Service, client_for, http_get, http_text, make_all_three_unhealthy,
    metric_sum, seed_claim_pod_and_csinode, start_apiserver, wait_for_blocking,
};

/// The options of `volhealth status --kubeconfig <kubeconfig>` with its output piped (no colour).
fn options(kubeconfig: &Path) -> StatusOptions {
    StatusOptions {
        kubeconfig: Some(kubeconfig.to_path_buf()),
        ..StatusOptions::default()
    }
}

/// `-A`, and `-o format`.
fn all_as(kubeconfig: &Path, format: Format) -> StatusOptions {
    StatusOptions {
        all_namespaces: true,
        format,
        ..options(kubeconfig)
    }
}

/// Runs `status` as `opts` say: how it ended, and what it printed.
async fn status(opts: &StatusOptions) -> (Result<(), Error>, String) {
    let mut out = Vec::new();
    let result = volhealth_status::run(opts, &mut out).await;
    (result, String::from_utf8(out).expect("UTF-8 output"))
}

/// What `status` printed as `opts` say, which must succeed.
async fn status_ok(opts: &StatusOptions) -> String {
    let (result, out) = status(opts).await;
    result.unwrap_or_else(|e| panic!("{e}"));
    out
}

fn json_of(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn status_shows_every_unhealthy_condition_with_its_source() {
    let tmp = tempfile::tempdir().unwrap();
    let api = start_apiserver(tmp.path(), &[]);
    seed_claim_pod_and_csinode(&api.kubeconfig).await;
    let kc = &api.kubeconfig;

    let doc = json_of(&status_ok(&all_as(kc, Format::Json)).await);
    assert_eq!(doc["healthy"], true);
    assert_eq!(doc["items"], json!([]));
    let (_, out) = status(&options(kc)).await;
    assert!(
        out.starts_with("No volume health conditions in namespace default"),
        "{out}"
    );

    make_all_three_unhealthy(&api.kubeconfig).await;
    let doc = json_of(&status_ok(&all_as(kc, Format::Json)).await);
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
    let (_, table) = status(&all_as(kc, Format::Table)).await;
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
    let coloured = StatusOptions {
        colour: true,
        ..all_as(kc, Format::Table)
    };
    let (_, coloured) = status(&coloured).await;
    assert!(coloured.contains("\x1b[31mInaccessible"), "{coloured}");
    let (_, wide) = status(&all_as(kc, Format::Wide)).await;
    assert!(wide.lines().next().unwrap().contains("NODE") && wide.contains("node-1"));
    let (_, yaml) = status(&all_as(kc, Format::Yaml)).await;
    let yaml: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(yaml["items"][1]["status"], "Degraded");

    // -n limits PVCs and pods; CSINodes are cluster-scoped and always shown.
    let other = StatusOptions {
        namespace: Some("other".into()),
        format: Format::Json,
        ..options(kc)
    };
    let (_, out) = status(&other).await;
    let doc = json_of(&out);
    assert_eq!(doc["namespace"], "other");
    assert_eq!(doc["items"].as_array().unwrap().len(), 1);
    assert_eq!(doc["items"][0]["kind"], "CSINode");
}

#[tokio::test(flavor = "multi_thread")]
async fn status_fails_clearly_when_the_api_cannot_be_reached() {
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
    // The binary prints the error and exits non-zero; the library returns it.
    let (result, out) = status(&all_as(&kc, Format::Table)).await;
    let err = result.expect_err(&format!("unreachable API must fail: {out}"));
    assert!(
        err.to_string().contains(&format!(
            "cannot reach the API server at http://127.0.0.1:{port}"
        )),
        "{err}"
    );
    assert!(out.is_empty());
    let (result, _) = status(&options(&tmp.path().join("missing"))).await;
    let err = result.unwrap_err();
    assert!(err.to_string().contains("reading kubeconfig"), "{err}");
}

/// What a writer was given, line by line, readable while it is still being written to.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<(Vec<String>, Vec<u8>)>>);

impl Lines {
    /// The complete lines written so far.
    fn all(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .0
            .clone()
    }
}

impl Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut guard = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let (lines, partial) = &mut *guard;
        partial.extend_from_slice(buf);
        while let Some(end) = partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = partial.drain(..=end).collect();
            lines.push(String::from_utf8_lossy(&line[..end]).into_owned());
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `status --watch -A -o json` against `api` on its own thread and runtime until the
/// returned service is stopped or dropped: the service, and the lines of its output as they come.
fn watch(api: &ApiServer) -> (Service, Lines) {
    let opts = StatusOptions {
        watch: true,
        ..all_as(&api.kubeconfig, Format::Json)
    };
    let out = Lines::default();
    let mut written = out.clone();
    let service = Service::start("status --watch", move |shutdown| async move {
        volhealth_status::run_until(&opts, &mut written, shutdown).await
    });
    (service, out)
}

#[tokio::test(flavor = "multi_thread")]
async fn watch_prints_a_new_document_when_health_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let api = start_apiserver(tmp.path(), &[]);
    seed_claim_pod_and_csinode(&api.kubeconfig).await;
    let (_watch, out) = watch(&api);
    let first = json_of(&wait_for_blocking(
        Duration::from_secs(30),
        "first document",
        || out.all().first().cloned(),
    ));
    assert_eq!(first["healthy"], true);
    make_all_three_unhealthy(&api.kubeconfig).await;
    // Each change may arrive as its own document; wait for the one with all three.
    wait_for_blocking(
        Duration::from_secs(30),
        "a document after the change",
        || {
            out.all()
                .iter()
                .skip(1)
                .any(|doc| json_of(doc)["items"].as_array().map(Vec::len) == Some(3))
                .then_some(())
        },
    );
}

/// `LIST` requests the API server has answered for `resource`, from its own metrics.
async fn lists_of(api: &ApiServer, resource: &str) -> f64 {
    let page = http_text(&format!("{}/metrics", api.url)).await.unwrap();
    metric_sum(
        &page,
        "apiserver_request_total",
        &[r#"verb="LIST""#, &format!(r#"resource="{resource}""#)],
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn lists_come_in_pages_of_500_and_a_label_selector_narrows_them() {
    let tmp = tempfile::tempdir().unwrap();
    let api = start_apiserver(tmp.path(), &[]);
    seed_claim_pod_and_csinode(&api.kubeconfig).await;
    make_all_three_unhealthy(&api.kubeconfig).await;
    // 501 more claims in another namespace: two pages.
    let claims: kube::Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> =
        kube::Api::namespaced(client_for(&api.kubeconfig).await, "other");
    for i in 0..501 {
        volhealth_testkit::create(&claims, json!({
            "metadata": {"name": format!("bulk-{i}"), "labels": {"tier": "bulk"}},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))
        .await;
    }
    let before = lists_of(&api, "persistentvolumeclaims").await;
    let out = status_ok(&all_as(&api.kubeconfig, Format::Json)).await;
    assert_eq!(json_of(&out)["items"].as_array().unwrap().len(), 3);
    assert_eq!(
        lists_of(&api, "persistentvolumeclaims").await - before,
        2.0,
        "502 claims are read in two requests of at most 500"
    );

    // -l: only PVCs and pods with the labels (web-1's claim data-1 has none).
    let bulk = StatusOptions {
        selector: Some("tier=bulk".into()),
        ..all_as(&api.kubeconfig, Format::Json)
    };
    let out = status_ok(&bulk).await;
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
    if kubectl::available() {
        let kubectl = Kubectl::new(&api, tmp.path());
        for output in ["name", "wide"] {
            let out = kubectl.ok(&[
                "get",
                "pvc",
                "-A",
                "--chunk-size=100",
                "--no-headers",
                "-o",
                output,
            ]);
            let lines = out.lines().count();
            assert_eq!(lines, 502, "kubectl -o {output} saw every claim");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_drops_the_fields_is_never_shown_as_healthy() {
    // Gate on, nothing reported: "no conditions", and the dry run stores nothing.
    let tmp = tempfile::tempdir().unwrap();
    let api = start_apiserver(tmp.path(), &[]);
    seed_claim_pod_and_csinode(&api.kubeconfig).await;
    let out = status_ok(&all_as(&api.kubeconfig, Format::Table)).await;
    assert!(
        out.starts_with("No volume or storage health conditions"),
        "{out}"
    );
    let (_, _, body) = http_get(
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
    seed_claim_pod_and_csinode(&api.kubeconfig).await;
    make_all_three_unhealthy(&api.kubeconfig).await; // dropped on save
    let out = status_ok(&all_as(&api.kubeconfig, Format::Table)).await;
    assert!(
        out.contains("The API server does not store volume health")
            && out.contains("CSIVolumeHealth feature gate is off")
            && !out.contains("No volume"),
        "{out}"
    );
    let (_, out) = status(&all_as(&api.kubeconfig, Format::Json)).await;
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

#[tokio::test(flavor = "multi_thread")]
async fn with_no_claim_in_scope_the_gate_is_asked_on_a_pod_or_else_a_csinode() {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::storage::v1::CSINode;
    use kube::api::{Api, ListParams};
    use volhealth_status::findings::Snapshot;
    use volhealth_status::gate::{Gate, check};
    for (gate, stores) in [
        ("CSIVolumeHealth=true", true),
        ("CSIVolumeHealth=false", false),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let api = start_apiserver(tmp.path(), &["--feature-gates", gate]);
        seed_claim_pod_and_csinode(&api.kubeconfig).await;
        let conn = volhealth_status::kubeconfig::connect(
            Some(&api.kubeconfig),
            None,
            Duration::from_secs(10),
            false,
        )
        .await
        .unwrap();
        let list = ListParams::default();
        let pods = Api::<Pod>::all(conn.client.clone())
            .list(&list)
            .await
            .unwrap();
        let csinodes = Api::<CSINode>::all(conn.client.clone())
            .list(&list)
            .await
            .unwrap();
        let pod = pods.items[0].metadata.clone();
        let node = csinodes.items[0].metadata.name.clone().unwrap();
        let cases = [
            (
                Snapshot {
                    pods: pods.items,
                    ..Snapshot::default()
                },
                format!(
                    "pod/{}/{}",
                    pod.namespace.unwrap(),
                    pod.name.clone().unwrap()
                ),
            ),
            (
                Snapshot {
                    csinodes: csinodes.items,
                    ..Snapshot::default()
                },
                format!("csinode/{node}"),
            ),
        ];
        for (snapshot, object) in cases {
            let want = if stores {
                Gate::Stored
            } else {
                Gate::Dropped { object }
            };
            assert_eq!(check(&conn, &snapshot).await, want, "{gate}");
        }
        // The dry runs stored nothing.
        let (_, _, body) = http_get(
            &format!(
                "{}/api/v1/namespaces/default/pods/{}",
                api.url,
                pod.name.unwrap()
            ),
            None,
        )
        .unwrap();
        assert!(!body.contains("VolhealthStorageCheck"), "{body}");
    }
}
