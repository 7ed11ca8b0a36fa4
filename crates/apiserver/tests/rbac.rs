//! RBAC over real HTTP with `--authorization-mode Node,RBAC` and token identities: the four RBAC
//! kinds and ServiceAccounts served (CRUD, validation with field paths, tables, discovery), the
//! bootstrap policy, bindings deciding what token users and service accounts may do, the
//! kube-apiserver Forbidden wording, and non-resource paths.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

mod apiserver_http;
mod support;

use apiserver_http::*;
use serde_json::{Value, json};

/// Token file of the RBAC tests: an administrator, two users, a node and a service account.
pub const TOKENS: &str = "admintok,admin,1,\"system:masters\"\n\
alicetok,alice,2\n\
bobtok,bob,3\n\
nodetok,system:node:node-a,4,\"system:nodes\"\n\
satok,system:serviceaccount:default:monitor,5,\"system:serviceaccounts,system:serviceaccounts:default\"\n";

const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

/// A server with the identities of [`TOKENS`] under `--authorization-mode Node,RBAC`, and a client
/// for it as the administrator.
fn start() -> (tempfile::TempDir, support::ApiServer, Api) {
    let (dir, server, anonymous) =
        start_server_with_tokens(TOKENS, &["--authorization-mode", "Node,RBAC"]);
    (dir, server, anonymous.with_token("admintok"))
}

fn role(name: &str, rules: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name}, "rules": rules})
}

fn binding(kind: &str, name: &str, role_kind: &str, role: &str, subjects: Value) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": subjects})
}

fn user(name: &str) -> Value {
    json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name})
}

fn causes(a: &Answer) -> Vec<String> {
    a.json["details"]["causes"]
        .as_array()
        .unwrap_or_else(|| panic!("no causes: {}", a.text))
        .iter()
        .map(|c| c["field"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bindings_decide_what_token_users_may_do() {
    let (_dir, _server, admin) = start();
    let alice = admin.with_token("alicetok");
    let bob = admin.with_token("bobtok");

    // The bootstrap policy exists.
    let crs = admin.get(&format!("{RBAC}/clusterroles")).await;
    assert_eq!(crs.code, 200, "{}", crs.text);
    let names = item_names(&crs.json);
    for want in [
        "cluster-admin",
        "system:basic-user",
        "system:discovery",
        "system:public-info-viewer",
    ] {
        assert!(names.contains(&want), "{want} in {names:?}");
    }

    // Nobody but system:masters may do anything before a binding exists.
    let denied = alice.get(PODS).await;
    assert_eq!(denied.code, 403, "{}", denied.text);
    assert_eq!(
        denied.json["message"],
        "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
    );
    assert_eq!(denied.json["details"]["kind"], "pods");

    admin
        .create(
            &format!("{RBAC}/namespaces/default/roles"),
            &role(
                "pod-reader",
                json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                       {"apiGroups": [""], "resources": ["persistentvolumeclaims/status"], "verbs": ["patch"]}]),
            ),
        )
        .await;
    let rb = binding(
        "RoleBinding",
        "alice-reads",
        "Role",
        "pod-reader",
        json!([user("alice")]),
    );
    admin
        .create(&format!("{RBAC}/namespaces/default/rolebindings"), &rb)
        .await;

    assert_eq!(alice.get(PODS).await.code, 200);
    assert_eq!(
        alice
            .get(&format!("{PODS}?watch=true&timeoutSeconds=1"))
            .await
            .code,
        200
    );
    let other_ns = alice.get("/api/v1/namespaces/kube-system/pods").await;
    assert_eq!(
        other_ns.code, 403,
        "a RoleBinding grants in its namespace only"
    );
    let all_ns = alice.get("/api/v1/pods").await;
    assert_eq!(all_ns.code, 403, "and not across namespaces");
    assert_eq!(
        all_ns.json["message"],
        "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" at the cluster scope"
    );
    let del = alice.delete(&format!("{PODS}/web")).await;
    assert_eq!(
        del.json["message"],
        "pods \"web\" is forbidden: User \"alice\" cannot delete resource \"pods\" in API group \"\" in the namespace \"default\""
    );
    // Only the status subresource of claims: the claims themselves stay refused.
    admin.post(PVCS, &pvc("data-1")).await;
    let st = alice
        .patch(
            &format!("{PVCS}/data-1/status"),
            MERGE,
            &json!({"status": {"phase": "Bound"}}),
        )
        .await;
    assert_eq!(st.code, 200, "{}", st.text);
    let main = alice
        .patch(
            &format!("{PVCS}/data-1"),
            MERGE,
            &json!({"metadata": {"labels": {"a": "b"}}}),
        )
        .await;
    assert_eq!(main.code, 403, "{}", main.text);
    assert!(
        main.message()
            .contains("cannot patch resource \"persistentvolumeclaims\""),
        "{}",
        main.text
    );
    assert_eq!(bob.get(PODS).await.code, 403, "bob has no binding");

    // A ClusterRole granted by a RoleBinding, and a ServiceAccount subject without a namespace.
    admin
        .create(
            "/api/v1/namespaces/default/serviceaccounts",
            &json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "monitor"}}),
        )
        .await;
    admin
        .create(
            &format!("{RBAC}/clusterroles"),
            &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "pvc-reader"},
                "rules": [{"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["list"]}]}),
        )
        .await;
    let sa_binding = binding(
        "RoleBinding",
        "monitor-reads",
        "ClusterRole",
        "pvc-reader",
        json!([{"kind": "ServiceAccount", "name": "monitor"}]),
    );
    admin
        .create(
            &format!("{RBAC}/namespaces/default/rolebindings"),
            &sa_binding,
        )
        .await;
    let sa = admin.with_token("satok");
    assert_eq!(sa.get(PVCS).await.code, 200);
    assert_eq!(
        sa.get("/api/v1/namespaces/kube-system/persistentvolumeclaims")
            .await
            .code,
        403
    );
    // A ClusterRoleBinding grants everywhere.
    let crb = binding(
        "ClusterRoleBinding",
        "bob-reads-claims",
        "ClusterRole",
        "pvc-reader",
        json!([user("bob")]),
    );
    admin
        .create(&format!("{RBAC}/clusterrolebindings"), &crb)
        .await;
    assert_eq!(bob.get("/api/v1/persistentvolumeclaims").await.code, 200);
    // Deleting the binding takes the grant away again.
    assert_eq!(
        admin
            .delete(&format!("{RBAC}/clusterrolebindings/bob-reads-claims"))
            .await
            .code,
        200
    );
    assert_eq!(bob.get("/api/v1/persistentvolumeclaims").await.code, 403);

    // Tables: the binding's role and subjects.
    let table = admin
        .get_as(
            &format!("{RBAC}/namespaces/default/rolebindings"),
            "application/json;as=Table;v=v1;g=meta.k8s.io",
        )
        .await;
    assert_eq!(table.json["kind"], "Table", "{}", table.text);
    let rows = table.json["rows"].as_array().unwrap();
    let row = rows
        .iter()
        .find(|r| r["cells"][0] == "alice-reads")
        .unwrap();
    assert_eq!(row["cells"][1], "Role/pod-reader");
    assert_eq!(row["cells"][3], "alice");
    let row = rows
        .iter()
        .find(|r| r["cells"][0] == "monitor-reads")
        .unwrap();
    assert_eq!(row["cells"][5], "/monitor");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_objects_are_validated_as_kube_apiserver_does() {
    let (_dir, _server, admin) = start();
    let rbs = format!("{RBAC}/namespaces/default/rolebindings");

    let bad = binding(
        "RoleBinding",
        "bad",
        "Robot",
        "",
        json!([{"kind": "Robot", "name": "r2"}, {"kind": "User", "name": "u"}]),
    );
    let a = admin.post(&rbs, &bad).await;
    assert_eq!(a.code, 422, "{}", a.text);
    assert_eq!(
        causes(&a),
        [
            "roleRef.kind",
            "roleRef.name",
            "subjects[0].kind",
            "subjects[1].apiGroup"
        ]
    );
    assert!(
        a.message()
            .starts_with("RoleBinding \"bad\" is invalid: [roleRef.kind: Unsupported value: \"Robot\": supported values: \"Role\", \"ClusterRole\""),
        "{}",
        a.text
    );
    // A ClusterRoleBinding may only name a ClusterRole, and needs service accounts' namespaces.
    let crb = binding(
        "ClusterRoleBinding",
        "bad",
        "Role",
        "x",
        json!([{"kind": "ServiceAccount", "name": "monitor"}]),
    );
    let a = admin
        .post(&format!("{RBAC}/clusterrolebindings"), &crb)
        .await;
    assert_eq!(
        causes(&a),
        ["roleRef.kind", "subjects[0].namespace"],
        "{}",
        a.text
    );

    // roleRef is immutable; subjects are not.
    let good = binding(
        "RoleBinding",
        "good",
        "ClusterRole",
        "view",
        json!([user("alice")]),
    );
    admin.create(&rbs, &good).await;
    let a = admin
        .patch(
            &format!("{rbs}/good"),
            MERGE,
            &json!({"subjects": [user("bob")]}),
        )
        .await;
    assert_eq!(a.code, 200, "{}", a.text);
    let a = admin
        .patch(
            &format!("{rbs}/good"),
            MERGE,
            &json!({"roleRef": {"name": "edit"}}),
        )
        .await;
    assert_eq!(a.code, 422, "{}", a.text);
    assert_eq!(causes(&a), ["roleRef"]);
    assert!(a.message().ends_with("cannot change roleRef"), "{}", a.text);

    // Rules: verbs required; resource rules need groups and resources; non-resource URLs only on
    // ClusterRoles and never mixed with resources.
    let a = admin
        .post(
            &format!("{RBAC}/namespaces/default/roles"),
            &role(
                "bad",
                json!([{"apiGroups": [""], "resources": ["pods"], "verbs": []},
                                {"verbs": ["get"]},
                                {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]),
            ),
        )
        .await;
    assert_eq!(a.code, 422, "{}", a.text);
    assert_eq!(
        causes(&a),
        [
            "rules[0].verbs",
            "rules[1].apiGroups",
            "rules[1].resources",
            "rules[2].nonResourceURLs"
        ]
    );
    let a = admin
        .post(
            &format!("{RBAC}/clusterroles"),
            &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "mixed"},
                "rules": [{"nonResourceURLs": ["/metrics"], "resources": ["pods"], "apiGroups": [""], "verbs": ["get"]}]}),
        )
        .await;
    assert_eq!(causes(&a), ["rules[0].nonResourceURLs"], "{}", a.text);
    // Names with colons are fine for RBAC objects (system:...), as in kube-apiserver.
    admin
        .create(
            &format!("{RBAC}/clusterroles"),
            &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "volhealth:monitor"},
                "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
        )
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_paths_nodes_and_anonymous_requests() {
    let (_dir, server, admin) = start();
    let anonymous = Api::new(&server.url);
    let alice = anonymous.with_token("alicetok");
    let node = anonymous.with_token("nodetok");

    // Health and version for everyone; discovery for authenticated users; resources need
    // credentials; /metrics needs a grant.
    assert_eq!(anonymous.get("/readyz").await.code, 200);
    assert_eq!(anonymous.get("/version").await.code, 200);
    let a = anonymous.get("/apis").await;
    assert_eq!(a.code, 403, "{}", a.text);
    assert_eq!(
        a.json["message"],
        "forbidden: User \"system:anonymous\" cannot get path \"/apis\""
    );
    assert_eq!(anonymous.get(PODS).await.code, 401);
    assert_eq!(alice.get("/apis").await.code, 200);
    assert_eq!(alice.get("/api/v1").await.code, 200);
    let m = alice.get("/metrics").await;
    assert_eq!(m.code, 403);
    assert_eq!(
        m.json["message"],
        "forbidden: User \"alice\" cannot get path \"/metrics\""
    );
    assert_eq!(admin.get("/metrics").await.code, 200);

    // Discovery lists the RBAC kinds and the reviews, which only take create.
    let d = alice.get(RBAC).await;
    let names = names(&d.json["resources"]);
    assert_eq!(
        names,
        [
            "clusterroles",
            "clusterrolebindings",
            "roles",
            "rolebindings"
        ]
    );
    let d = alice.get("/apis/authorization.k8s.io/v1").await;
    let ssar =
        resource(&d.json, "selfsubjectaccessreviews").unwrap_or_else(|| panic!("{}", d.text));
    assert_eq!(ssar["verbs"], json!(["create"]));
    let d = alice.get("/apis/authentication.k8s.io/v1").await;
    assert_eq!(
        d.json["resources"][0]["name"], "selfsubjectreviews",
        "{}",
        d.text
    );
    let core = alice.get("/api/v1").await;
    assert!(core.text.contains("\"serviceaccounts\""), "{}", core.text);

    // The node authorizer still decides for nodes, and has no opinion on the reviews, which
    // system:basic-user grants every authenticated user.
    let s = node.get("/api/v1/namespaces/default/secrets").await;
    assert_eq!(s.code, 403);
    assert!(
        s.message().ends_with(
            "node \"node-a\" may only get secrets referenced by pods bound to it, one by name"
        ),
        "{}",
        s.text
    );
    let r = node
        .create(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            &json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}),
        )
        .await;
    assert_eq!(
        r.json["status"]["userInfo"]["groups"],
        json!(["system:nodes", "system:authenticated"])
    );
    // Nodes get nothing from RBAC that the node authorizer refuses.
    admin.create(CSINODES, &csinode("node-b", "d")).await;
    let c = node
        .patch(
            &format!("{CSINODES}/node-b/status"),
            MERGE,
            &json!({"status": {}}),
        )
        .await;
    assert_eq!(c.code, 403, "{}", c.text);
}
