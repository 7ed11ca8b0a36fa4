//! core/v1 Secrets in the API server, through kube-rs and raw HTTP: stringData folded
//! into base64 data and never stored, selectors, patches, the kubectl table, validation that
//! never echoes values, node identities limited to Secrets their pods reference, and no Secret
//! value in the server's log even at debug level.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod apiserver_http;
mod support;

use apiserver_http::{Api, MERGE, PODS, STRATEGIC, names};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api as KubeApi, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use volhealth_testkit::{CapturedLog, b64, start_apiserver_logged, write_token_file};

const SECRETS: &str = "/api/v1/namespaces/default/secrets";
const PASSWORD: &str = "pw-Zq8vN3kTx1";
const USER: &str = "user-Lm4Rb7Yc2";
const TOKEN: &str = "tok-Hs6Wd9Pf5";
const BAD_BASE64: &str = "raw!Jx3Kq0Vn";

/// Starts the server like `support::start_apiserver`, with every debug-level log line a
/// request can cause captured: what `RUST_LOG=debug` would make the server write.
fn start_debug_apiserver(dir: &Path, extra: &[&str]) -> (support::ApiServer, CapturedLog) {
    let log = CapturedLog::new("debug");
    (start_apiserver_logged(dir, extra, &log), log)
}

fn data_of(s: &Secret) -> BTreeMap<String, String> {
    s.data
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, String::from_utf8(v.0).expect("utf-8 value")))
        .collect()
}

fn pod_using_secret(name: &str, node: &str, secret: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"nodeName": node,
        "containers": [{"name": "c", "image": "busybox"}],
        "volumes": [{"name": "creds", "secret": {"secretName": secret}}]}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_round_trip_and_stay_out_of_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = write_token_file(
        dir.path(),
        "admin-token,admin,1,\"system:masters\"\nnode-a-token,system:node:node-a,2,\"system:nodes\"\nnode-b-token,system:node:node-b,3,\"system:nodes\"\n",
    );
    let (server, server_log) =
        start_debug_apiserver(dir.path(), &["--token-auth-file", tokens.to_str().unwrap()]);
    let client = support::client_for(&server.kubeconfig).await;
    let secrets: KubeApi<Secret> = KubeApi::namespaced(client, "default");

    // Create with data and stringData: stringData lands in data and is not kept.
    let new: Secret = serde_json::from_value(json!({
        "metadata": {"name": "creds"},
        "data": {"password": b64(PASSWORD)},
        "stringData": {"user": USER},
    }))
    .unwrap();
    let created = secrets.create(&PostParams::default(), &new).await.unwrap();
    assert_eq!(
        data_of(&created),
        BTreeMap::from([
            ("password".into(), PASSWORD.into()),
            ("user".into(), USER.into())
        ])
    );
    assert!(created.string_data.is_none(), "stringData is write-only");
    assert_eq!(
        created.type_.as_deref(),
        Some("Opaque"),
        "type defaults to Opaque"
    );

    let got = secrets.get("creds").await.unwrap();
    assert_eq!(data_of(&got), data_of(&created));
    assert!(got.string_data.is_none());
    let admin = Api::new(&server.url).with_token("admin-token");
    let raw = admin.get(&format!("{SECRETS}/creds")).await;
    assert_eq!(
        raw.json["data"]["user"],
        b64(USER),
        "data values are base64 on the wire"
    );
    assert!(raw.json.get("stringData").is_none(), "{}", raw.text);

    // List, with the `type` field selector.
    let tls: Secret = serde_json::from_value(
        json!({"metadata": {"name": "cert"}, "type": "kubernetes.io/tls",
        "stringData": {"tls.crt": "c", "tls.key": "k"}}),
    )
    .unwrap();
    secrets.create(&PostParams::default(), &tls).await.unwrap();
    assert_eq!(
        secrets
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2
    );
    let opaque = secrets
        .list(&ListParams::default().fields("type=Opaque"))
        .await
        .unwrap();
    assert_eq!(
        opaque
            .items
            .iter()
            .map(|s| s.metadata.name.clone().unwrap())
            .collect::<Vec<_>>(),
        ["creds"]
    );

    // Patches: stringData through a merge patch, a key removed through a strategic patch.
    let patch_creds = async |patch: Patch<Value>| {
        secrets
            .patch("creds", &PatchParams::default(), &patch)
            .await
            .unwrap()
    };
    let p = patch_creds(Patch::Merge(json!({"stringData": {"token": TOKEN}}))).await;
    assert_eq!(data_of(&p).get("token").map(String::as_str), Some(TOKEN));
    assert!(p.string_data.is_none());
    let p = patch_creds(Patch::Strategic(json!({"data": {"user": null}}))).await;
    assert_eq!(
        data_of(&p).keys().collect::<Vec<_>>(),
        ["password", "token"]
    );

    // type is immutable; bad base64 is refused without echoing the value.
    let r = admin
        .patch(
            &format!("{SECRETS}/creds"),
            MERGE,
            &json!({"type": "example.com/other"}),
        )
        .await;
    assert_eq!(r.code, 422, "{}", r.text);
    let r = admin
        .post(
            SECRETS,
            &json!({"metadata": {"name": "bad"}, "data": {"k": BAD_BASE64}}),
        )
        .await;
    assert_eq!(r.code, 400, "{}", r.text);
    assert!(r.text.contains("data[\\\"k\\\"]"), "{}", r.text);
    assert!(
        !r.text.contains(BAD_BASE64),
        "the error must not echo the value: {}",
        r.text
    );
    let r = admin.post(SECRETS, &json!({"metadata": {"name": "notls"}, "type": "kubernetes.io/tls", "stringData": {"tls.crt": "c"}})).await;
    assert_eq!(r.code, 422, "{}", r.text);
    assert!(r.text.contains("data[tls.key]"), "{}", r.text);

    // The kubectl table: NAME, TYPE, DATA, AGE.
    let table = admin
        .get_as(
            SECRETS,
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .await;
    assert_eq!(table.code, 200, "{}", table.text);
    let names = names(&table.json["columnDefinitions"]);
    assert_eq!(names, ["Name", "Type", "Data", "Age"]);
    let rows = table.json["rows"].as_array().unwrap();
    let creds = rows
        .iter()
        .find(|r| r["cells"][0] == "creds")
        .expect("creds row");
    assert_eq!(creds["cells"][1], "Opaque");
    assert_eq!(creds["cells"][2], 2);
    assert!(
        !table.text.contains(&b64(PASSWORD)),
        "metadata rows carry no data: {}",
        table.text
    );

    // Discovery: namespaced, no short names, no status subresource.
    let disc = admin.get("/api/v1").await;
    let res = disc.json["resources"].as_array().unwrap();
    let entry = res
        .iter()
        .find(|r| r["name"] == "secrets")
        .expect("secrets in discovery");
    assert_eq!(entry["kind"], "Secret");
    assert_eq!(entry["namespaced"], true);
    assert!(
        entry
            .get("shortNames")
            .is_none_or(|s| s.as_array().is_none_or(|a| a.is_empty())),
        "{entry}"
    );
    assert!(!res.iter().any(|r| r["name"] == "secrets/status"));

    // Node identities: only a Secret a pod bound to that node references, by name.
    let node_a = admin.with_token("node-a-token");
    let node_b = admin.with_token("node-b-token");
    let denied = node_a.get(&format!("{SECRETS}/creds")).await;
    assert_eq!(denied.code, 403, "{}", denied.text);
    assert!(
        denied
            .text
            .contains("no relationship found between node 'node-a'"),
        "{}",
        denied.text
    );
    admin
        .create(PODS, &pod_using_secret("uses-creds", "node-a", "creds"))
        .await;
    let allowed = node_a.get(&format!("{SECRETS}/creds")).await;
    assert_eq!(allowed.code, 200, "{}", allowed.text);
    assert_eq!(
        node_a.get(&format!("{SECRETS}/cert")).await.code,
        403,
        "unreferenced secret"
    );
    assert_eq!(
        node_b.get(&format!("{SECRETS}/creds")).await.code,
        403,
        "pod is bound to another node"
    );
    assert_eq!(node_a.get(SECRETS).await.code, 403, "list");
    assert_eq!(
        node_a.get(&format!("{SECRETS}?watch=true")).await.code,
        403,
        "watch"
    );
    assert_eq!(
        node_a.get("/api/v1/secrets").await.code,
        403,
        "list across namespaces"
    );
    assert_eq!(
        node_a
            .patch(&format!("{SECRETS}/creds"), STRATEGIC, &json!({"data": {}}))
            .await
            .code,
        403,
        "patch"
    );

    // Delete.
    secrets
        .delete("creds", &DeleteParams::default())
        .await
        .unwrap();
    match secrets.get("creds").await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 404),
        other => panic!("expected 404, got {other:?}"),
    }

    // Nothing secret reached the log, in plain or base64 form.
    let log = server_log.text();
    assert!(
        log.contains("listening on"),
        "the log is the server's: {log}"
    );
    for v in [PASSWORD, USER, TOKEN, BAD_BASE64] {
        assert!(!log.contains(v), "{v} appears in apiserver.log");
        assert!(
            !log.contains(&b64(v)),
            "base64 of {v} appears in apiserver.log"
        );
    }
}
