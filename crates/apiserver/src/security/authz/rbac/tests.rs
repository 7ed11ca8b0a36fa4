use super::*;
use crate::storage::store::Outcome;
use serde_json::json;

fn rule(v: Value) -> PolicyRule {
    serde_json::from_value(v).unwrap()
}

fn res<'a>(
    verb: &'a str,
    group: &'a str,
    resource: &'a str,
    sub: &'a str,
    name: &'a str,
) -> Request<'a> {
    Request::Resource(Attributes {
        verb,
        group,
        resource,
        subresource: sub,
        namespace: "default",
        name,
    })
}

#[test]
fn rule_matching_table() {
    let star = rule(json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}));
    let pods = rule(json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}));
    let any_status =
        rule(json!({"apiGroups": [""], "resources": ["*/status"], "verbs": ["patch"]}));
    let pods_slash_star =
        rule(json!({"apiGroups": [""], "resources": ["pods/*"], "verbs": ["get"]}));
    let named = rule(
        json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"], "verbs": ["*"]}),
    );
    let apps = rule(json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}));
    let health = rule(json!({"nonResourceURLs": ["/healthz", "/apis/*"], "verbs": ["get"]}));
    let any_path = rule(json!({"nonResourceURLs": ["*"], "verbs": ["*"]}));
    let path = |verb: &'static str, path: &'static str| Request::Path { verb, path };
    let cases: Vec<(&str, &PolicyRule, Request<'_>, bool)> = vec![
        (
            "* covers subresources",
            &star,
            res("patch", "", "pods", "status", "p"),
            true,
        ),
        (
            "* covers any group",
            &star,
            res("get", "apps", "deployments", "", "d"),
            true,
        ),
        (
            "* is no non-resource rule",
            &star,
            path("get", "/healthz"),
            false,
        ),
        (
            "exact resource",
            &pods,
            res("get", "", "pods", "", "p"),
            true,
        ),
        (
            "verb not listed",
            &pods,
            res("delete", "", "pods", "", "p"),
            false,
        ),
        (
            "resource does not cover its subresource",
            &pods,
            res("get", "", "pods", "status", "p"),
            false,
        ),
        (
            "other group",
            &pods,
            res("get", "apps", "pods", "", "p"),
            false,
        ),
        (
            "*/status covers pods/status",
            &any_status,
            res("patch", "", "pods", "status", "p"),
            true,
        ),
        (
            "*/status covers pvc status",
            &any_status,
            res("patch", "", "persistentvolumeclaims", "status", "d"),
            true,
        ),
        (
            "*/status is not the resource itself",
            &any_status,
            res("patch", "", "pods", "", "p"),
            false,
        ),
        (
            "pods/* is no wildcard",
            &pods_slash_star,
            res("get", "", "pods", "status", "p"),
            false,
        ),
        (
            "resourceNames: the named one",
            &named,
            res("get", "", "secrets", "", "a"),
            true,
        ),
        (
            "resourceNames: delete the named one",
            &named,
            res("delete", "", "secrets", "", "a"),
            true,
        ),
        (
            "resourceNames: another name",
            &named,
            res("get", "", "secrets", "", "b"),
            false,
        ),
        (
            "resourceNames never allow list",
            &named,
            res("list", "", "secrets", "", ""),
            false,
        ),
        (
            "resourceNames never allow watch",
            &named,
            res("watch", "", "secrets", "", "a"),
            false,
        ),
        (
            "resourceNames never allow create",
            &named,
            res("create", "", "secrets", "", "a"),
            false,
        ),
        (
            "resourceNames never allow deletecollection",
            &named,
            res("deletecollection", "", "secrets", "", ""),
            false,
        ),
        (
            "named group",
            &apps,
            res("get", "apps", "deployments", "", "d"),
            true,
        ),
        (
            "core is not apps",
            &apps,
            res("get", "", "deployments", "", "d"),
            false,
        ),
        ("exact path", &health, path("get", "/healthz"), true),
        (
            "exact path is no prefix",
            &health,
            path("get", "/healthz/ping"),
            false,
        ),
        (
            "prefix path",
            &health,
            path("get", "/apis/storage.k8s.io/v1"),
            true,
        ),
        ("path verb", &health, path("post", "/healthz"), false),
        (
            "path rule is no resource rule",
            &health,
            res("get", "", "pods", "", "p"),
            false,
        ),
        ("* path", &any_path, path("delete", "/metrics"), true),
    ];
    for (what, r, req, want) in cases {
        assert_eq!(rule_allows(r, &req), want, "{what}");
    }
}

fn user(name: &str, groups: &[&str]) -> User {
    User {
        name: name.into(),
        uid: String::new(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
    }
}

fn put(store: &Store, plural: &str, ns: &str, obj: Value) {
    let name = obj["metadata"]["name"].as_str().unwrap().to_string();
    store
        .mutate(&store_name(plural), ns, &name, |_| Ok(Outcome::Put(obj)))
        .unwrap();
}

fn store_with_policy() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 100).unwrap();
    for (plural, ns, object) in [
        (
            "clusterroles",
            "",
            json!({"metadata": {"name": "pod-reader"}, "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}),
        ),
        (
            "roles",
            "team-a",
            json!({"metadata": {"name": "pvc-status", "namespace": "team-a"}, "rules": [{"apiGroups": [""], "resources": ["persistentvolumeclaims/status"], "verbs": ["patch"]}]}),
        ),
        // A RoleBinding granting a ClusterRole, in team-a only.
        (
            "rolebindings",
            "team-a",
            json!({"metadata": {"name": "readers", "namespace": "team-a"},
                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "pod-reader"},
                "subjects": [{"apiGroup": GROUP, "kind": "User", "name": "alice"},
                             {"kind": "ServiceAccount", "name": "monitor"}]}),
        ),
        (
            "rolebindings",
            "team-a",
            json!({"metadata": {"name": "status", "namespace": "team-a"},
                "roleRef": {"apiGroup": GROUP, "kind": "Role", "name": "pvc-status"},
                "subjects": [{"apiGroup": GROUP, "kind": "Group", "name": "system:serviceaccounts:team-b"}]}),
        ),
        (
            "clusterrolebindings",
            "",
            json!({"metadata": {"name": "dangling"},
                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "gone"},
                "subjects": [{"apiGroup": GROUP, "kind": "User", "name": "carol"}]}),
        ),
    ] {
        put(&store, plural, ns, object);
    }
    (dir, store)
}

fn in_ns<'a>(verb: &'a str, resource: &'a str, sub: &'a str, ns: &'a str) -> Request<'a> {
    Request::Resource(Attributes {
        verb,
        group: "",
        resource,
        subresource: sub,
        namespace: ns,
        name: "x",
    })
}

fn allowed(store: &Store, u: &User, req: &Request<'_>) -> bool {
    matches!(decide(store, u, req), Decision::Allow(_))
}

#[test]
fn bindings_subjects_and_namespaces() {
    let (_dir, store) = store_with_policy();
    let alice = user("alice", &["system:authenticated"]);
    assert!(allowed(&store, &alice, &in_ns("get", "pods", "", "team-a")));
    assert!(
        !allowed(&store, &alice, &in_ns("get", "pods", "", "team-b")),
        "RoleBinding grants in its namespace only"
    );
    assert!(
        !allowed(&store, &alice, &in_ns("list", "pods", "", "")),
        "nor cluster-wide"
    );
    assert!(!allowed(
        &store,
        &alice,
        &in_ns("delete", "pods", "", "team-a")
    ));

    // A ServiceAccount subject without a namespace is the binding's namespace's.
    let sa = user(
        "system:serviceaccount:team-a:monitor",
        &["system:serviceaccounts", "system:serviceaccounts:team-a"],
    );
    assert!(allowed(&store, &sa, &in_ns("list", "pods", "", "team-a")));
    let other_sa = user(
        "system:serviceaccount:team-b:monitor",
        &["system:serviceaccounts", "system:serviceaccounts:team-b"],
    );
    assert!(!allowed(
        &store,
        &other_sa,
        &in_ns("list", "pods", "", "team-a")
    ));
    // The group of team-b's service accounts, bound in team-a.
    assert!(allowed(
        &store,
        &other_sa,
        &in_ns("patch", "persistentvolumeclaims", "status", "team-a")
    ));
    assert!(!allowed(
        &store,
        &sa,
        &in_ns("patch", "persistentvolumeclaims", "status", "team-a")
    ));
    assert!(!allowed(
        &store,
        &other_sa,
        &in_ns("patch", "persistentvolumeclaims", "", "team-a")
    ));

    // system:masters needs no binding; a user with a dangling binding gets the reason.
    let root = user("root", &["system:masters"]);
    assert!(allowed(&store, &root, &in_ns("delete", "nodes", "", "")));
    assert!(allowed(
        &store,
        &root,
        &Request::Path {
            verb: "get",
            path: "/metrics"
        }
    ));
    let carol = user("carol", &[]);
    assert_eq!(
        decide(&store, &carol, &in_ns("get", "pods", "", "team-a")),
        Decision::NoOpinion(format!("RBAC: clusterrole.{GROUP} \"gone\" not found"))
    );
    assert_eq!(
        decide(&store, &alice, &in_ns("get", "pods", "", "team-b")),
        Decision::NoOpinion(String::new())
    );
    let Decision::Allow(why) = decide(&store, &alice, &in_ns("get", "pods", "", "team-a")) else {
        panic!()
    };
    assert_eq!(
        why,
        "RBAC: allowed by RoleBinding \"readers\" of ClusterRole \"pod-reader\" to User \"alice\" in namespace \"team-a\""
    );
}

#[test]
fn service_account_names() {
    assert_eq!(
        service_account_of("system:serviceaccount:ns:name"),
        Some(("ns", "name"))
    );
    assert_eq!(service_account_of("system:serviceaccount:ns"), None);
    assert_eq!(service_account_of("system:serviceaccount::name"), None);
    assert_eq!(service_account_of("alice"), None);
}

#[test]
fn aggregated_cluster_roles_have_the_rules_of_the_roles_they_select() {
    let (_dir, store) = store_with_policy();
    for (plural, object) in [
        (
            "clusterroles",
            json!({"metadata": {"name": "monitoring"},
                "aggregationRule": {"clusterRoleSelectors": [
                    {"matchLabels": {"example.com/aggregate-to-monitoring": "true"}},
                    {"matchExpressions": [{"key": "example.com/tier", "operator": "In", "values": ["storage"]}]}]},
                "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
        ),
        (
            "clusterroles",
            json!({"metadata": {"name": "claims", "labels": {"example.com/aggregate-to-monitoring": "true"}},
                "rules": [{"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["list"]}]}),
        ),
        (
            "clusterroles",
            json!({"metadata": {"name": "csinodes", "labels": {"example.com/tier": "storage"}},
                "rules": [{"apiGroups": ["storage.k8s.io"], "resources": ["csinodes"], "verbs": ["get"]}]}),
        ),
        (
            "clusterroles",
            json!({"metadata": {"name": "unlabeled"},
                "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}),
        ),
        (
            "clusterrolebindings",
            json!({"metadata": {"name": "dave-monitors"},
                "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "monitoring"},
                "subjects": [{"apiGroup": GROUP, "kind": "User", "name": "dave"}]}),
        ),
    ] {
        put(&store, plural, "", object);
    }
    let dave = user("dave", &[]);
    assert!(allowed(
        &store,
        &dave,
        &in_ns("list", "persistentvolumeclaims", "", "")
    ));
    let csinode = Request::Resource(Attributes {
        verb: "get",
        group: "storage.k8s.io",
        resource: "csinodes",
        subresource: "",
        namespace: "",
        name: "n",
    });
    assert!(allowed(&store, &dave, &csinode));
    assert!(
        !allowed(&store, &dave, &in_ns("get", "secrets", "", "default")),
        "not selected"
    );
    assert!(
        !allowed(&store, &dave, &in_ns("delete", "pods", "", "default")),
        "an aggregated role's own rules are replaced"
    );
}

#[test]
fn label_selector_operators() {
    let sel = |v: Value| -> LabelSelector { serde_json::from_value(v).unwrap() };
    let labels = json!({"a": "1", "b": "2"});
    let on = Some(&labels);
    assert!(selector_matches(&sel(json!({})), on));
    assert!(selector_matches(
        &sel(json!({"matchLabels": {"a": "1"}})),
        on
    ));
    assert!(!selector_matches(
        &sel(json!({"matchLabels": {"a": "2"}})),
        on
    ));
    let expr = |op: &str, key: &str, values: &[&str]| {
        sel(json!({"matchExpressions": [{"key": key, "operator": op, "values": values}]}))
    };
    assert!(selector_matches(&expr("In", "a", &["0", "1"]), on));
    assert!(!selector_matches(&expr("In", "c", &["1"]), on));
    assert!(selector_matches(&expr("NotIn", "a", &["2"]), on));
    assert!(selector_matches(&expr("NotIn", "c", &["2"]), on));
    assert!(selector_matches(&expr("Exists", "b", &[]), on));
    assert!(!selector_matches(&expr("DoesNotExist", "b", &[]), on));
    assert!(selector_matches(&expr("DoesNotExist", "c", &[]), None));
    assert!(!selector_matches(&expr("Bogus", "a", &["1"]), on));
}
