use super::*;

fn attrs<'a>(
    verb: &'a str,
    group: &'a str,
    resource: &'a str,
    sub: &'a str,
    ns: &'a str,
    name: &'a str,
) -> Attributes<'a> {
    Attributes {
        verb,
        group,
        resource,
        subresource: sub,
        namespace: ns,
        name,
    }
}

#[test]
fn token_file_and_node_scoping() {
    let t = Tokens::parse(
        "admintok,admin,1,\"system:masters\"\nnodetok,system:node:a,2,\"system:nodes,other\"\n",
    )
    .unwrap();
    assert_eq!(t.first(), Some("admintok"));
    assert!(
        !format!("{t:?}").contains("admintok"),
        "tokens stay out of Debug output"
    );
    let node = t.authenticate(Some("Bearer nodetok")).unwrap();
    assert_eq!(node.node_name(), Some("a"));
    assert_eq!(t.authenticate(Some("Bearer nope")).unwrap_err().code, 401);
    assert_eq!(t.authenticate(None).unwrap_err().code, 401);
    // (request, the node whose pods use the object, allowed)
    for (a, user, allowed) in [
        (
            attrs("patch", "", "pods", "status", "default", "p"),
            Some("a"),
            true,
        ),
        (
            attrs("patch", "storage.k8s.io", "csinodes", "status", "", "a"),
            None,
            true,
        ),
        (
            attrs("patch", "storage.k8s.io", "csinodes", "status", "", "b"),
            None,
            false,
        ),
        (
            attrs(
                "patch",
                "",
                "persistentvolumeclaims",
                "status",
                "default",
                "d",
            ),
            None,
            false,
        ),
        (attrs("create", "", "events", "", "default", ""), None, true),
    ] {
        assert_eq!(
            authorize(&node, &a, user).is_ok(),
            allowed,
            "{a:?} {user:?}"
        );
    }
    let e = authorize(
        &node,
        &attrs("patch", "", "pods", "status", "default", "p"),
        Some("b"),
    )
    .unwrap_err();
    assert_eq!(e.code, 403);
    assert!(
        e.message.starts_with(
            "pods \"p\" is forbidden: User \"system:node:a\" cannot patch resource \"pods/status\""
        ),
        "{}",
        e.message
    );
    // Claims and volumes: a node gets those its pods use, one by name, and lists none.
    for resource in ["persistentvolumeclaims", "persistentvolumes"] {
        for verb in ["list", "watch"] {
            assert_eq!(
                authorize(&node, &attrs(verb, "", resource, "", "", ""), Some("a"))
                    .unwrap_err()
                    .code,
                403,
                "{verb} {resource}"
            );
        }
        let get = attrs("get", "", resource, "", "default", "d");
        assert!(
            authorize(&node, &get, Some("a")).is_ok(),
            "get a used {resource}"
        );
        let e = authorize(&node, &get, None).unwrap_err();
        assert!(
            e.message.contains("no relationship found between node 'a'"),
            "{}",
            e.message
        );
    }
    let get = attrs("get", "", "secrets", "", "default", "s");
    assert!(authorize(&node, &get, Some("a")).is_ok());
    let e = authorize(&node, &get, None).unwrap_err();
    assert!(
        e.message.contains("no relationship found between node 'a'"),
        "{}",
        e.message
    );
    for verb in ["list", "watch", "create", "update", "patch", "delete"] {
        assert_eq!(
            authorize(
                &node,
                &attrs(verb, "", "secrets", "", "default", ""),
                Some("a")
            )
            .unwrap_err()
            .code,
            403,
            "{verb}"
        );
    }
}

#[test]
fn nodes_create_and_patch_events_in_any_namespace_and_nothing_more() {
    let node = User {
        name: "system:node:a".into(),
        uid: "2".into(),
        groups: vec!["system:nodes".into()],
    };
    for group in ["", "events.k8s.io"] {
        for ns in ["default", "kube-system", "team-b"] {
            for verb in ["create", "patch", "update"] {
                let name = if verb == "create" { "" } else { "x.1" };
                assert!(
                    authorize(&node, &attrs(verb, group, "events", "", ns, name), None).is_ok(),
                    "{verb} {group} events in {ns}"
                );
            }
            for verb in ["delete", "deletecollection"] {
                let e =
                    authorize(&node, &attrs(verb, group, "events", "", ns, ""), None).unwrap_err();
                assert_eq!(e.code, 403, "{verb} {group} events in {ns}");
            }
        }
    }
    // Still refused: another node's CSINode, PVC status.
    assert!(
        authorize(
            &node,
            &attrs("patch", "storage.k8s.io", "csinodes", "status", "", "b"),
            None
        )
        .is_err()
    );
}

#[test]
fn anonymous_admin_only_covers_requests_without_credentials() {
    let t = Tokens::parse("nodetok,system:node:a,2,\"system:nodes\"\n")
        .unwrap()
        .with_anonymous_admin();
    let anon = t.authenticate(None).unwrap();
    assert_eq!(anon.node_name(), None);
    let a = Attributes {
        verb: "patch",
        group: "",
        resource: "persistentvolumeclaims",
        subresource: "status",
        namespace: "default",
        name: "d",
    };
    assert!(authorize(&anon, &a, None).is_ok());
    assert_eq!(
        t.authenticate(Some("Bearer wrong")).unwrap_err().code,
        401,
        "a wrong token is still refused"
    );
    assert_eq!(
        t.authenticate(Some("Bearer nodetok")).unwrap().node_name(),
        Some("a")
    );
}

#[test]
fn modes_parse_and_the_first_opinion_decides() {
    assert_eq!(Authorizer::default().to_string(), "Node,RBAC");
    assert_eq!(
        Authorizer::parse("Node,RBAC").unwrap().to_string(),
        "Node,RBAC"
    );
    assert!(Authorizer::parse("Node,Node").is_err());
    assert!(
        Authorizer::parse("ABAC")
            .unwrap_err()
            .to_string()
            .contains("ABAC")
    );
    assert!(Authorizer::parse("").is_err());
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), 100).unwrap();
    bootstrap::ensure(&store).unwrap();
    let node = with_authenticated_group(User {
        name: "system:node:a".into(),
        uid: String::new(),
        groups: vec!["system:nodes".into()],
    });
    let alice = with_authenticated_group(User {
        name: "alice".into(),
        uid: String::new(),
        groups: vec![],
    });
    let own = attrs("patch", "storage.k8s.io", "csinodes", "status", "", "a");
    let other = attrs("patch", "storage.k8s.io", "csinodes", "status", "", "b");
    let ssar = attrs(
        "create",
        "authorization.k8s.io",
        "selfsubjectaccessreviews",
        "",
        "",
        "",
    );
    let pods = attrs("list", "", "pods", "", "default", "");
    let node_rbac = Authorizer::parse("Node,RBAC").unwrap();
    let decide = |a: &Authorizer, u: &User, at: &Attributes<'_>| {
        a.decide(
            &store,
            u,
            &Request::Resource(at.clone()),
            Binding::Assume(None),
        )
    };
    // The default chain is kube-apiserver's: nodes scoped, everyone else by RBAC.
    let default = Authorizer::default();
    // Node,AlwaysAllow: nodes still scoped, everyone else allowed.
    let node_always = Authorizer::parse("Node,AlwaysAllow").unwrap();
    // Deny stops the chain even when a later authorizer would allow.
    let node_allow = Authorizer::parse("Node,AlwaysAllow,RBAC").unwrap();
    // AlwaysDeny has no opinion, as in kube-apiserver.
    let deny = Authorizer::parse("AlwaysDeny,AlwaysAllow").unwrap();
    let verdict = |d: Decision| match d {
        Decision::Allow(_) => "allow",
        Decision::Deny(_) => "deny",
        Decision::NoOpinion(_) => "no opinion",
    };
    for (chain, user, request, want) in [
        (&node_rbac, &node, &own, "allow"),
        (&node_rbac, &node, &other, "deny"),
        // Not the node authorizer's business: RBAC's system:basic-user decides.
        (&node_rbac, &node, &ssar, "allow"),
        (&node_rbac, &alice, &ssar, "allow"),
        (&default, &node, &other, "deny"),
        (&default, &alice, &pods, "no opinion"),
        (&node_always, &node, &other, "deny"),
        (&node_always, &alice, &pods, "allow"),
        (&node_allow, &node, &other, "deny"),
        (&deny, &alice, &pods, "allow"),
    ] {
        let got = verdict(decide(chain, user, request));
        assert_eq!(got, want, "{chain} for {} on {request:?}", user.name);
    }
    assert_eq!(
        decide(&node_rbac, &alice, &pods),
        Decision::NoOpinion(String::new())
    );
    let e = node_rbac
        .authorize(
            &store,
            &alice,
            &Request::Resource(pods.clone()),
            Binding::Assume(None),
        )
        .unwrap_err();
    assert_eq!(
        e.message,
        "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"default\""
    );
    // Non-resource paths: discovery for authenticated users, health for everyone.
    let anon = anonymous();
    let path = |verb: &'static str, path: &'static str| Request::Path { verb, path };
    let allowed = |u: &User, p: &Request<'_>| {
        node_rbac
            .authorize(&store, u, p, Binding::Assume(None))
            .is_ok()
    };
    assert!(allowed(&alice, &path("get", "/apis")));
    assert!(allowed(&anon, &path("get", "/readyz")));
    assert!(!allowed(&alice, &path("get", "/metrics")));
    let e = node_rbac
        .authorize(&store, &anon, &path("get", "/apis"), Binding::Assume(None))
        .unwrap_err();
    assert_eq!(
        e.message,
        "forbidden: User \"system:anonymous\" cannot get path \"/apis\""
    );
}
