//! Who a request is and what it may do. `authn` authenticates (static tokens, anonymous),
//! `impersonation` applies `Impersonate-*` headers, and [`Authorizer`] runs the chain of
//! `--authorization-mode` (`Node`, `RBAC`, `AlwaysAllow`, `AlwaysDeny`) as kube-apiserver does:
//! the first authorizer that allows or denies decides, and a request nobody allows is forbidden.
//! `reviews` answers SelfSubjectReview and the access reviews from the same chain.

mod authn;
pub mod bootstrap;
pub mod impersonation;
mod node;
pub mod rbac;
pub mod review_wire;
pub mod reviews;

pub use authn::{
    ANONYMOUS, AUTHENTICATED, MASTERS, SERVICE_ACCOUNT_PREFIX, SERVICE_ACCOUNTS, Tokens,
    UNAUTHENTICATED, User, anonymous, service_account_groups, service_account_of,
    with_authenticated_group,
};
pub use node::Binding;

use crate::errors::{ApiError, qualified};
use crate::store::Store;

/// One resource request, as the authorizer sees it.
#[derive(Debug, Clone)]
pub struct Attributes<'a> {
    /// Verb: get, list, watch, create, update, patch, delete, deletecollection, impersonate.
    pub verb: &'a str,
    /// API group.
    pub group: &'a str,
    /// Plural resource.
    pub resource: &'a str,
    /// Subresource ("" or "status").
    pub subresource: &'a str,
    /// Namespace ("" when cluster-scoped or across namespaces).
    pub namespace: &'a str,
    /// Object name ("" for collections; a create's name from its body).
    pub name: &'a str,
}

/// What is asked: a resource, or a path outside the resource API (`/healthz`, `/api`).
#[derive(Debug, Clone)]
pub enum Request<'a> {
    /// A resource request.
    Resource(Attributes<'a>),
    /// A non-resource request: lowercase HTTP method and path.
    Path {
        /// Verb (`get`, `post`, ...).
        verb: &'a str,
        /// Request path.
        path: &'a str,
    },
}

/// One authorizer's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed, with the reason.
    Allow(String),
    /// Denied, with the reason; no later authorizer is asked.
    Deny(String),
    /// Neither: the next authorizer decides. The reason is kept for the final message.
    NoOpinion(String),
}

/// One `--authorization-mode` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Scopes node identities (`system:node:NAME`).
    Node,
    /// Roles and bindings stored in the server.
    Rbac,
    /// Allows everything.
    AlwaysAllow,
    /// Allows nothing.
    AlwaysDeny,
}

impl Mode {
    /// The flag's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Node => "Node",
            Mode::Rbac => "RBAC",
            Mode::AlwaysAllow => "AlwaysAllow",
            Mode::AlwaysDeny => "AlwaysDeny",
        }
    }
}

/// The authorizer chain of `--authorization-mode`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorizer {
    modes: Vec<Mode>,
}

impl Default for Authorizer {
    /// `Node,AlwaysAllow`: node identities scoped, everyone else allowed.
    fn default() -> Authorizer {
        Authorizer {
            modes: vec![Mode::Node, Mode::AlwaysAllow],
        }
    }
}

impl std::fmt::Display for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.modes.iter().map(|m| m.as_str()).collect();
        f.write_str(&names.join(","))
    }
}

impl Authorizer {
    /// Parses `--authorization-mode`: a comma list of `Node`, `RBAC`, `AlwaysAllow` and
    /// `AlwaysDeny`, each at most once.
    pub fn parse(flag: &str) -> std::result::Result<Authorizer, String> {
        let mut modes = Vec::new();
        for part in flag.split(',').map(str::trim) {
            let mode = match part {
                "Node" => Mode::Node,
                "RBAC" => Mode::Rbac,
                "AlwaysAllow" => Mode::AlwaysAllow,
                "AlwaysDeny" => Mode::AlwaysDeny,
                "" => return Err("empty authorization mode".into()),
                other => {
                    return Err(format!(
                        "authorization mode {other:?} is not supported (supported: Node, RBAC, AlwaysAllow, AlwaysDeny)"
                    ));
                }
            };
            if modes.contains(&mode) {
                return Err(format!("authorization mode {part:?} is given twice"));
            }
            modes.push(mode);
        }
        Ok(Authorizer { modes })
    }

    /// Whether `mode` is in the chain.
    pub fn has(&self, mode: Mode) -> bool {
        self.modes.contains(&mode)
    }

    /// The modes in order.
    pub fn modes(&self) -> &[Mode] {
        &self.modes
    }

    /// The chain's decision; `NoOpinion` when no authorizer allowed or denied (which refuses).
    pub fn decide(
        &self,
        store: &Store,
        user: &User,
        req: &Request<'_>,
        binding: Binding<'_>,
    ) -> Decision {
        let mut reasons = Vec::new();
        for mode in &self.modes {
            let d = match (mode, req) {
                (Mode::Node, Request::Resource(a)) => {
                    let bound = node::bound_node(user, a, binding);
                    node::decide(user, a, bound.as_deref())
                }
                (Mode::Node, Request::Path { .. }) => Decision::NoOpinion(String::new()),
                (Mode::Rbac, _) => rbac::decide(store, user, req),
                (Mode::AlwaysAllow, _) => Decision::Allow(String::new()),
                (Mode::AlwaysDeny, _) => Decision::NoOpinion("Everything is forbidden.".into()),
            };
            match d {
                Decision::NoOpinion(r) => {
                    if !r.is_empty() {
                        reasons.push(r);
                    }
                }
                decided => return decided,
            }
        }
        Decision::NoOpinion(reasons.join("\n"))
    }

    /// Ok when the chain allows `req`, else 403 Forbidden worded as kube-apiserver words it.
    pub fn authorize(
        &self,
        store: &Store,
        user: &User,
        req: &Request<'_>,
        binding: Binding<'_>,
    ) -> std::result::Result<(), ApiError> {
        match self.decide(store, user, req, binding) {
            Decision::Allow(_) => Ok(()),
            Decision::Deny(why) | Decision::NoOpinion(why) => Err(forbidden(user, req, &why)),
        }
    }
}

/// The 403 for `req` by `user`, with the authorizers' reason (if any) after a colon.
pub fn forbidden(user: &User, req: &Request<'_>, why: &str) -> ApiError {
    match req {
        Request::Resource(a) => deny(user, a, why),
        Request::Path { verb, path } => {
            let mut msg = format!(
                "forbidden: User \"{}\" cannot {verb} path \"{path}\"",
                user.name
            );
            if !why.is_empty() {
                msg.push_str(": ");
                msg.push_str(why);
            }
            ApiError::forbidden("", "", "", msg)
        }
    }
}

fn deny(user: &User, a: &Attributes<'_>, why: &str) -> ApiError {
    let res = if a.subresource.is_empty() {
        a.resource.to_string()
    } else {
        format!("{}/{}", a.resource, a.subresource)
    };
    let scope = if a.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace \"{}\"", a.namespace)
    };
    let subject = if a.name.is_empty() {
        format!("{} is forbidden", qualified(a.group, a.resource))
    } else {
        format!(
            "{} \"{}\" is forbidden",
            qualified(a.group, a.resource),
            a.name
        )
    };
    let mut msg = format!(
        "{subject}: User \"{}\" cannot {} resource \"{res}\" in API group \"{}\" {scope}",
        user.name, a.verb, a.group
    );
    if !why.is_empty() {
        msg.push_str(": ");
        msg.push_str(why);
    }
    ApiError::forbidden(a.group, a.resource, a.name, msg)
}

/// The default chain (`Node,AlwaysAllow`) for one resource request, without a store: the node
/// authorizer with `bound_node` as the object's node, then everything else allowed.
pub fn authorize(
    user: &User,
    a: &Attributes<'_>,
    bound_node: Option<&str>,
) -> std::result::Result<(), ApiError> {
    match node::decide(user, a, bound_node) {
        Decision::Deny(why) => Err(deny(user, a, &why)),
        Decision::Allow(_) | Decision::NoOpinion(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
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
        assert!(
            authorize(
                &node,
                &attrs("patch", "", "pods", "status", "default", "p"),
                Some("a")
            )
            .is_ok()
        );
        let e = authorize(
            &node,
            &attrs("patch", "", "pods", "status", "default", "p"),
            Some("b"),
        )
        .unwrap_err();
        assert_eq!(e.code, 403);
        assert!(e.message.starts_with("pods \"p\" is forbidden: User \"system:node:a\" cannot patch resource \"pods/status\""), "{}", e.message);
        assert!(
            authorize(
                &node,
                &attrs("patch", "storage.k8s.io", "csinodes", "status", "", "a"),
                None
            )
            .is_ok()
        );
        assert!(
            authorize(
                &node,
                &attrs("patch", "storage.k8s.io", "csinodes", "status", "", "b"),
                None
            )
            .is_err()
        );
        assert!(
            authorize(
                &node,
                &attrs(
                    "patch",
                    "",
                    "persistentvolumeclaims",
                    "status",
                    "default",
                    "d"
                ),
                None
            )
            .is_err()
        );
        assert!(
            authorize(
                &node,
                &attrs("list", "", "persistentvolumeclaims", "", "", ""),
                None
            )
            .is_ok()
        );
        assert!(
            authorize(
                &node,
                &attrs("create", "", "events", "", "default", ""),
                None
            )
            .is_ok()
        );
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
                    let e = authorize(&node, &attrs(verb, group, "events", "", ns, ""), None)
                        .unwrap_err();
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
        assert_eq!(Authorizer::default().to_string(), "Node,AlwaysAllow");
        assert_eq!(
            Authorizer::parse("Node,RBAC").unwrap().to_string(),
            "Node,RBAC"
        );
        assert!(Authorizer::parse("Node,Node").is_err());
        assert!(Authorizer::parse("ABAC").unwrap_err().contains("ABAC"));
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
        assert!(matches!(
            decide(&node_rbac, &node, &own),
            Decision::Allow(_)
        ));
        assert!(matches!(
            decide(&node_rbac, &node, &other),
            Decision::Deny(_)
        ));
        // Not the node authorizer's business: RBAC's system:basic-user decides.
        assert!(matches!(
            decide(&node_rbac, &node, &ssar),
            Decision::Allow(_)
        ));
        assert!(matches!(
            decide(&node_rbac, &alice, &ssar),
            Decision::Allow(_)
        ));
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
        // The default chain: nodes still scoped, everyone else allowed.
        let default = Authorizer::default();
        assert!(matches!(decide(&default, &node, &other), Decision::Deny(_)));
        assert!(matches!(
            decide(&default, &alice, &pods),
            Decision::Allow(_)
        ));
        // Deny stops the chain even when a later authorizer would allow.
        let node_allow = Authorizer::parse("Node,AlwaysAllow,RBAC").unwrap();
        assert!(matches!(
            decide(&node_allow, &node, &other),
            Decision::Deny(_)
        ));
        let deny = Authorizer::parse("AlwaysDeny,AlwaysAllow").unwrap();
        assert!(
            matches!(decide(&deny, &alice, &pods), Decision::Allow(_)),
            "AlwaysDeny has no opinion, as in kube-apiserver"
        );
        // Non-resource paths: discovery for authenticated users, health for everyone.
        let anon = anonymous();
        let path = |verb: &'static str, path: &'static str| Request::Path { verb, path };
        assert!(
            node_rbac
                .authorize(&store, &alice, &path("get", "/apis"), Binding::Assume(None))
                .is_ok()
        );
        assert!(
            node_rbac
                .authorize(
                    &store,
                    &anon,
                    &path("get", "/readyz"),
                    Binding::Assume(None)
                )
                .is_ok()
        );
        let e = node_rbac
            .authorize(&store, &anon, &path("get", "/apis"), Binding::Assume(None))
            .unwrap_err();
        assert_eq!(
            e.message,
            "forbidden: User \"system:anonymous\" cannot get path \"/apis\""
        );
        assert!(
            node_rbac
                .authorize(
                    &store,
                    &alice,
                    &path("get", "/metrics"),
                    Binding::Assume(None)
                )
                .is_err()
        );
    }
}
