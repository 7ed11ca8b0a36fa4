//! SelfSubjectReview, the access reviews and impersonation over real HTTP under
//! `--authorization-mode Node,RBAC`, from raw HTTP, kube-rs and the Python client (the
//! interpreter from VOLHEALTH_PYTHON, skipped without `kubernetes>=37`, failed instead under
//! VOLHEALTH_REQUIRE_TOOLS=1).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod apiserver_http;
mod support;

use apiserver_http::*;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const TOKENS: &str = "admintok,admin,1,\"system:masters\"\n\
alicetok,alice,2\n\
bobtok,bob,3\n";

const SSR: &str = "/apis/authentication.k8s.io/v1/selfsubjectreviews";
const SSAR: &str = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
const SSRR: &str = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews";
const SAR: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";
const JSON: &str = "application/json";

/// A server with the identities of [`TOKENS`] under `--authorization-mode Node,RBAC`, and a client
/// for it as the administrator.
fn start() -> (tempfile::TempDir, support::ApiServer, Api) {
    let (dir, server, anonymous) =
        start_server_with_tokens(TOKENS, &["--authorization-mode", "Node,RBAC"]);
    (dir, server, anonymous.with_token("admintok"))
}

/// Creates `role` with `rules` (a Role in `default`, or a ClusterRole when `cluster`) and binds
/// it to the User `user` as `binding`, both answered 201 Created.
async fn grant(admin: &Api, cluster: bool, role: &str, rules: Value, binding: &str, user: &str) {
    let (scope, kind) = if cluster {
        ("", "Cluster")
    } else {
        ("/namespaces/default", "")
    };
    let objects = [
        (
            "roles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": format!("{kind}Role"),
                "metadata": {"name": role}, "rules": rules}),
        ),
        (
            "rolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": format!("{kind}RoleBinding"),
                "metadata": {"name": binding},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": format!("{kind}Role"), "name": role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}),
        ),
    ];
    let prefix = if cluster { "cluster" } else { "" };
    for (plural, object) in objects {
        admin
            .create(&format!("{RBAC}{scope}/{prefix}{plural}"), &object)
            .await;
    }
}

/// Grants alice list/get on pods in `default`.
async fn grant_alice_pods(admin: &Api) {
    let rules = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]);
    grant(admin, false, "pod-reader", rules, "alice", "alice").await;
}

fn access(verb: &str, resource: &str, ns: &str) -> Value {
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "namespace": ns}}})
}

fn path_access(verb: &str, path: &str) -> Value {
    json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"nonResourceAttributes": {"verb": verb, "path": path}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_answer_from_the_authorizers() {
    let (_dir, _server, admin) = start();
    let alice = admin.with_token("alicetok");
    grant_alice_pods(&admin).await;

    let who = alice
        .create(
            SSR,
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
        )
        .await;
    assert_eq!(
        who.json["status"]["userInfo"],
        json!({"username": "alice", "uid": "2", "groups": ["system:authenticated"]})
    );

    let yes = alice.create(SSAR, &access("list", "pods", "default")).await;
    assert_eq!(yes.json["status"]["allowed"], true);
    assert_eq!(
        yes.json["status"]["reason"],
        "RBAC: allowed by RoleBinding \"alice\" of Role \"pod-reader\" to User \"alice\" in namespace \"default\""
    );
    assert_eq!(yes.json["spec"]["resourceAttributes"]["verb"], "list");
    for (verb, ns) in [("delete", "default"), ("list", "kube-system"), ("list", "")] {
        let no = alice.post(SSAR, &access(verb, "pods", ns)).await;
        assert_eq!(no.json["status"]["allowed"], false, "{verb} in {ns:?}");
    }
    let health = alice.post(SSAR, &path_access("get", "/healthz")).await;
    assert_eq!(health.json["status"]["allowed"], true, "{}", health.text);
    let metrics = alice.post(SSAR, &path_access("get", "/metrics")).await;
    assert_eq!(metrics.json["status"]["allowed"], false);
    let neither = alice
        .post(SSAR, &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": {}}))
        .await;
    assert_eq!(neither.code, 422, "{}", neither.text);
    assert_eq!(admin.get(SSAR).await.code, 405, "reviews are create-only");
    assert_eq!(
        alice.get(SSAR).await.code,
        403,
        "authorized before that, as list"
    );

    // What alice may do in default, as `kubectl auth can-i --list` asks.
    let rules = alice.create(SSRR, &json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": {"namespace": "default"}})).await;
    let rr = rules.json["status"]["resourceRules"].as_array().unwrap();
    assert!(
        rr.iter()
            .any(|r| r["resources"] == json!(["pods"]) && r["verbs"] == json!(["get", "list"])),
        "{}",
        rules.text
    );
    assert!(
        rr.iter()
            .any(|r| r["resources"]
                == json!(["selfsubjectaccessreviews", "selfsubjectrulesreviews"])),
        "system:basic-user's rules are listed too: {}",
        rules.text
    );
    assert_eq!(rules.json["status"]["incomplete"], false);

    // SubjectAccessReview: an administrator asks about someone else; alice may not ask.
    let sar = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "alice", "groups": ["system:authenticated"], "resourceAttributes": {"verb": "get", "resource": "pods", "namespace": "default"}}});
    let a = admin.post(SAR, &sar).await;
    assert_eq!(a.json["status"]["allowed"], true, "{}", a.text);
    assert_eq!(alice.post(SAR, &sar).await.code, 403);
}

fn whoami() -> Value {
    json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
}

/// bob GETs `path` with impersonation `headers`.
async fn bob_gets(
    server: &support::ApiServer,
    headers: &[(&str, &str)],
    path: &str,
) -> (u16, Value) {
    support::request_with_headers(server, "bobtok", headers, "GET", path, None).await
}

/// bob asks who he is (a SelfSubjectReview) with impersonation `headers`.
async fn bob_asks_who(server: &support::ApiServer, headers: &[(&str, &str)]) -> (u16, Value) {
    let body = whoami();
    support::request_with_headers(server, "bobtok", headers, "POST", SSR, Some((JSON, &body))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn impersonation_needs_the_impersonate_verb() {
    let (_dir, server, admin) = start();
    grant_alice_pods(&admin).await;

    // Refused without the verb, in kube-apiserver's words.
    let (code, body) = bob_gets(&server, &[("Impersonate-User", "alice")], PODS).await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        body["message"],
        "users \"alice\" is forbidden: User \"bob\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
    );
    let (code, _) = bob_gets(&server, &[("Impersonate-Group", "devs")], PODS).await;
    assert_eq!(code, 400, "groups without a user");

    // Grant bob impersonation of users and groups, and of service accounts in default only.
    let users =
        json!([{"apiGroups": [""], "resources": ["users", "groups"], "verbs": ["impersonate"]}]);
    grant(
        &admin,
        true,
        "impersonator",
        users,
        "bob-impersonates",
        "bob",
    )
    .await;
    let monitor = json!([{"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"], "resourceNames": ["monitor"]}]);
    grant(&admin, false, "sa-impersonator", monitor, "bob-sa", "bob").await;

    // As alice, bob gets alice's rights and only those.
    let (code, body) = bob_gets(&server, &[("Impersonate-User", "alice")], PODS).await;
    assert_eq!(code, 200, "{body}");
    let (code, body) = bob_asks_who(
        &server,
        &[
            ("Impersonate-User", "alice"),
            ("Impersonate-Group", "devs"),
            ("Impersonate-Group", "ops"),
        ],
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        body["status"]["userInfo"],
        json!({"username": "alice", "groups": ["devs", "ops", "system:authenticated"]})
    );
    // Service accounts: checked on serviceaccounts in their namespace, with their groups.
    let (code, body) = bob_asks_who(
        &server,
        &[("Impersonate-User", "system:serviceaccount:default:monitor")],
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        body["status"]["userInfo"]["groups"],
        json!([
            "system:serviceaccounts",
            "system:serviceaccounts:default",
            "system:authenticated"
        ])
    );

    // Refused, in kube-apiserver's words.
    for (headers, path, refusal) in [
        // Alice may not list pods in kube-system.
        (
            &[("Impersonate-User", "alice")][..],
            "/api/v1/namespaces/kube-system/pods",
            "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"kube-system\"",
        ),
        // UIDs need their own grant (authentication.k8s.io uids).
        (
            &[("Impersonate-User", "alice"), ("Impersonate-Uid", "2")],
            PODS,
            "uids.authentication.k8s.io \"2\" is forbidden: User \"bob\" cannot impersonate resource \"uids\" in API group \"authentication.k8s.io\" at the cluster scope",
        ),
        // A service account of another namespace.
        (
            &[(
                "Impersonate-User",
                "system:serviceaccount:kube-system:monitor",
            )],
            PODS,
            "serviceaccounts \"monitor\" is forbidden: User \"bob\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"kube-system\"",
        ),
    ] {
        let (code, body) = bob_gets(&server, headers, path).await;
        assert_eq!(code, 403, "{headers:?}: {body}");
        assert_eq!(body["message"], refusal, "{headers:?}");
    }
    // Extras need their own grants too (userextras/KEY).
    let (code, body) = bob_gets(
        &server,
        &[
            ("Impersonate-User", "alice"),
            ("Impersonate-Extra-Scopes", "view"),
        ],
        PODS,
    )
    .await;
    assert_eq!(code, 403);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("cannot impersonate resource \"userextras/scopes\" in API group \"authentication.k8s.io\""),
        "{body}"
    );
    // system:masters may impersonate anyone; the access review then answers for them.
    let (code, body) = support::request_with_headers(
        &server,
        "admintok",
        &[("Impersonate-User", "alice")],
        "POST",
        SSAR,
        Some((JSON, &access("delete", "pods", "default"))),
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"]["allowed"], false);
}

/// Writes a kubeconfig for `token` into `dir`; answers its path.
fn write_kubeconfig(server: &support::ApiServer, dir: &Path, token: &str) -> PathBuf {
    let path = dir.join(format!("kubeconfig-{token}"));
    volhealth_apiserver::kubeconfig::write(
        &path,
        &volhealth_apiserver::kubeconfig::Kubeconfig::with_token(&server.url, None, token),
    )
    .unwrap();
    path
}

/// kube-rs's configuration from a kubeconfig for `token`.
async fn kube_config(server: &support::ApiServer, dir: &Path, token: &str) -> kube::Config {
    let kc = Kubeconfig::read_from(write_kubeconfig(server, dir, token)).unwrap();
    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap()
}

async fn kube_client(server: &support::ApiServer, dir: &Path, token: &str) -> kube::Client {
    kube::Client::try_from(kube_config(server, dir, token).await).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_asks_who_it_is_and_what_it_may_do() {
    let (dir, server, admin) = start();
    grant_alice_pods(&admin).await;
    let client = kube_client(&server, dir.path(), "alicetok").await;

    let reviews: kube::Api<SelfSubjectAccessReview> = kube::Api::all(client.clone());
    let ask = |verb: &str, ns: &str| SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                resource: Some("pods".into()),
                namespace: Some(ns.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let yes = reviews
        .create(&PostParams::default(), &ask("get", "default"))
        .await
        .unwrap();
    assert!(yes.status.unwrap().allowed);
    let no = reviews
        .create(&PostParams::default(), &ask("get", "kube-system"))
        .await
        .unwrap();
    assert!(!no.status.unwrap().allowed);

    let who: kube::Api<SelfSubjectReview> = kube::Api::all(client);
    let me = who
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .unwrap();
    let info = me.status.unwrap().user_info.unwrap();
    assert_eq!(info.username.as_deref(), Some("alice"));
    assert_eq!(info.groups, Some(vec!["system:authenticated".to_string()]));
}

const PYTHON_SSAR: &str = r#"
import sys
from kubernetes import client, config
config.load_kube_config(config_file=sys.argv[1])
api = client.AuthorizationV1Api()
def can(verb, ns):
    body = client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(
        resource_attributes=client.V1ResourceAttributes(verb=verb, resource="pods", namespace=ns)))
    return api.create_self_subject_access_review(body).status.allowed
assert can("list", "default") is True
assert can("delete", "default") is False
who = client.AuthenticationV1Api().create_self_subject_review(client.V1SelfSubjectReview())
assert who.status.user_info.username == "alice", who
print("OK")
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_makes_access_reviews() {
    let Some(python) = support::python_with_kubernetes_client() else {
        return;
    };
    let (dir, server, admin) = start();
    grant_alice_pods(&admin).await;
    let kubeconfig = write_kubeconfig(&server, dir.path(), "alicetok");
    let args = ["-c".as_ref(), PYTHON_SSAR.as_ref(), kubeconfig.as_os_str()];
    support::run_python_ok(&python, &args, "python SSAR");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_rs_impersonates_when_allowed() {
    use k8s_openapi::api::core::v1::Pod;
    let (dir, server, admin) = start();
    grant_alice_pods(&admin).await;
    let impersonating = async |token: &str| {
        let mut config = kube_config(&server, dir.path(), token).await;
        config.auth_info.impersonate = Some("alice".into());
        kube::Client::try_from(config).unwrap()
    };
    // bob may not impersonate.
    let pods: kube::Api<Pod> = kube::Api::namespaced(impersonating("bobtok").await, "default");
    match pods.list(&Default::default()).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 403);
            assert_eq!(
                s.message,
                "users \"alice\" is forbidden: User \"bob\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
            );
        }
        other => panic!("bob impersonated alice: {other:?}"),
    }
    // system:masters may; the request then has alice's rights only.
    let client = impersonating("admintok").await;
    let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), "default");
    pods.list(&Default::default()).await.unwrap();
    let other: kube::Api<Pod> = kube::Api::namespaced(client, "kube-system");
    match other.list(&Default::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{s:?}"),
        other => panic!("alice listed kube-system pods: {other:?}"),
    }
}
