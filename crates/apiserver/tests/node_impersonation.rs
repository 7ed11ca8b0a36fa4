//! Node identities may not impersonate, under the default `--authorization-mode` (`Node,RBAC`)
//! and under `Node,AlwaysAllow` alike: every `Impersonate-*` header from a node's token is
//! refused with a 403 Status, while the same requests without the header keep their usual
//! outcome (node scoping).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod apiserver_http;
mod support;

use apiserver_http::*;
use serde_json::{Value, json};
use std::path::Path;
use volhealth_apiserver::authz::{Authorizer, Tokens};

/// The admin, node-1 (name and group), a token with only the `system:nodes` group, and one with
/// only a `system:node:` name.
const TOKENS: &str = "admintok,admin,1,\"system:masters\"\n\
node1tok,system:node:node-1,2,\"system:nodes\"\n\
grouponlytok,kubelet-x,3,\"system:nodes\"\n\
nameonlytok,system:node:node-3,4\n";

const SECRETS: &str = "/api/v1/namespaces/default/secrets";

/// Starts the server with `mode` (None: the server's default chain).
fn start(dir: &Path, mode: Option<&str>) -> support::ApiServer {
    let tokens = support::write_token_file(dir, TOKENS);
    let mut config =
        support::config_from_flags(dir, &["--token-auth-file", tokens.to_str().unwrap()]);
    config.authorization = match mode {
        Some(m) => Authorizer::parse(m).unwrap(),
        None => Authorizer::default(),
    };
    config.tokens = Some(Tokens::load(&tokens).unwrap());
    support::start_with_config(config)
}

/// One request with `headers` (a merge patch body); answers the status code and JSON body.
async fn request(
    server: &support::ApiServer,
    token: &str,
    headers: &[(&str, &str)],
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let body = body.map(|b| (MERGE, b));
    support::request_with_headers(server, token, headers, method, path, body).await
}

/// Creates the objects the requests touch: a Secret and a claim nobody's pod uses, a claim, and
/// a pod using it on each of node-1 and node-2.
async fn seed(server: &support::ApiServer) {
    let admin = Api::new(&server.url).with_token("admintok");
    admin
        .create(
            SECRETS,
            &json!({"metadata": {"name": "s"}, "stringData": {"k": "v"}}),
        )
        .await;
    admin.create(PVCS, &pvc("d")).await;
    admin.create(PVCS, &pvc("unused")).await;
    admin.create(PODS, &pod("on-1", "node-1", "d")).await;
    admin.create(PODS, &pod("on-2", "node-2", "d")).await;
}

/// Every form of impersonation a client can ask for.
const HEADER_FORMS: &[&[(&str, &str)]] = &[
    &[("Impersonate-User", "admin")],
    &[
        ("Impersonate-User", "system:node:node-2"),
        ("Impersonate-Group", "system:nodes"),
    ],
    &[(
        "Impersonate-User",
        "system:serviceaccount:kube-system:monitor",
    )],
    &[("Impersonate-Group", "system:masters")],
    &[("Impersonate-Uid", "1")],
    &[("Impersonate-Extra-Scopes", "all")],
];

/// The requests: (method, path, body, outcome without impersonation for node-1).
fn requests() -> Vec<(&'static str, String, Option<Value>, u16)> {
    let health = json!({"status": {"volumeHealth": [{"name": "data", "healthConditions": conditions("Inaccessible", "NoPath")}]}});
    vec![
        ("GET", format!("{SECRETS}/s"), None, 403),
        (
            "PATCH",
            format!("{PVCS}/unused/status"),
            Some(json!({"status": {"phase": "Lost"}})),
            403,
        ),
        (
            "PATCH",
            format!("{PODS}/on-2/status"),
            Some(health.clone()),
            403,
        ),
        ("PATCH", format!("{PODS}/on-1/status"), Some(health), 200),
    ]
}

/// Checks that `(code, body)` is the 403 Status refusing a node's impersonation.
fn assert_impersonation_refused(code: u16, body: &Value, context: &str) {
    assert_eq!(code, 403, "{context}: {body}");
    assert_eq!(
        (body["kind"].as_str(), body["code"].as_u64()),
        (Some("Status"), Some(403)),
        "{context}: {body}"
    );
    assert_eq!(body["reason"], "Forbidden", "{context}: {body}");
    let msg = body["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("cannot impersonate resource") && msg.contains("nodes may not impersonate"),
        "{context}: {msg}"
    );
}

async fn nodes_cannot_impersonate(mode: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path(), mode);
    seed(&server).await;
    for (method, path, body, usual) in requests() {
        for headers in HEADER_FORMS {
            let context = format!("{mode:?}: node-1 {method} {path} with {headers:?}");
            let (code, refusal) =
                request(&server, "node1tok", headers, method, &path, body.as_ref()).await;
            assert_impersonation_refused(code, &refusal, &context);
        }
        let (code, answer) = request(&server, "node1tok", &[], method, &path, body.as_ref()).await;
        assert_eq!(
            code, usual,
            "{mode:?}: node-1 {method} {path} without impersonation: {answer}"
        );
    }
    // Either half of a node identity is enough to be refused.
    for token in ["grouponlytok", "nameonlytok"] {
        let (code, refusal) = request(
            &server,
            token,
            &[("Impersonate-User", "admin")],
            "GET",
            &format!("{SECRETS}/s"),
            None,
        )
        .await;
        assert_impersonation_refused(code, &refusal, &format!("{mode:?}: {token}"));
    }
    // Others still impersonate as their authorizers allow.
    let (code, body) = request(
        &server,
        "admintok",
        &[("Impersonate-User", "alice")],
        "GET",
        PODS,
        None,
    )
    .await;
    let expected = if mode == Some("Node,AlwaysAllow") {
        200
    } else {
        // alice has no role under RBAC: impersonation worked, and alice is refused.
        403
    };
    assert_eq!(code, expected, "{mode:?}: the admin as alice: {body}");
    if expected == 403 {
        assert!(
            body["message"]
                .as_str()
                .unwrap_or_default()
                .contains("User \"alice\" cannot list"),
            "{body}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_cannot_impersonate_under_the_default_mode() {
    assert_eq!(Authorizer::default().to_string(), "Node,RBAC");
    nodes_cannot_impersonate(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_cannot_impersonate_under_always_allow() {
    nodes_cannot_impersonate(Some("Node,AlwaysAllow")).await;
}
