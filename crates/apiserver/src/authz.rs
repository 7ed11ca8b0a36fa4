//! Authentication with a kube-apiserver style static token file, and a node authorizer that
//! scopes `system:node:NAME` identities the way the Node authorizer and NodeRestriction do.

use crate::errors::{ApiError, Error, Result, qualified};
use std::collections::HashMap;
use std::path::Path;

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// User name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
}

impl User {
    /// The node name when this is a node identity (`system:node:NAME` in `system:nodes`).
    pub fn node_name(&self) -> Option<&str> {
        let n = volhealth_model::identity::node_of_user(&self.name)?;
        self.groups
            .iter()
            .any(|g| g == volhealth_model::identity::NODES_GROUP)
            .then_some(n)
    }
}

/// Tokens read from `--token-auth-file`, in file order.
#[derive(Clone, Default)]
pub struct Tokens {
    by_token: HashMap<String, User>,
    first: Option<String>,
    /// Who a request without credentials is (None: such requests are refused).
    anonymous: Option<User>,
}

fn split_csv(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// Lists the users only: tokens are credentials and never appear in logs.
impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut users: Vec<&str> = self.by_token.values().map(|u| u.name.as_str()).collect();
        users.sort_unstable();
        f.debug_struct("Tokens")
            .field("users", &users)
            .field("anonymous", &self.anonymous)
            .finish_non_exhaustive()
    }
}

impl Tokens {
    /// Reads a token file: `token,user,uid[,"group1,group2"]` per line.
    pub fn load(path: &Path) -> Result<Tokens> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            what: format!("reading token file {}", path.display()),
            source,
        })?;
        Tokens::parse(&text).map_err(|(line, reason)| Error::TokenFile {
            path: path.display().to_string(),
            line,
            reason,
        })
    }

    /// Parses token file text; errors carry the 1-based line number.
    pub fn parse(text: &str) -> std::result::Result<Tokens, (usize, String)> {
        let mut t = Tokens::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let f = split_csv(line);
            if f.len() < 3 {
                return Err((i + 1, "expected at least token,user,uid".into()));
            }
            let token = f[0].trim().to_string();
            if token.is_empty() {
                return Err((i + 1, "empty token".into()));
            }
            let groups = f
                .get(3)
                .map(|g| {
                    g.split(',')
                        .map(|s| s.trim().to_string())
                        .filter(|s| !s.is_empty())
                        .collect()
                })
                .unwrap_or_default();
            let user = User {
                name: f[1].trim().to_string(),
                uid: f[2].trim().to_string(),
                groups,
            };
            if t.first.is_none() {
                t.first = Some(token.clone());
            }
            t.by_token.insert(token, user);
        }
        Ok(t)
    }

    /// Lets requests without an `Authorization` header act as an administrator, as the insecure
    /// port of old kube-apiservers did: kubectl sends no bearer token over plain HTTP, while
    /// node and controller identities still present their tokens and stay scoped.
    pub fn with_anonymous_admin(mut self) -> Tokens {
        self.anonymous = Some(User {
            name: "system:unsecured".into(),
            uid: String::new(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
        });
        self
    }

    /// The first token in the file (written into the kubeconfig).
    pub fn first(&self) -> Option<&str> {
        self.first.as_deref()
    }

    /// Looks up an `Authorization` header value.
    pub fn authenticate(&self, header: Option<&str>) -> std::result::Result<User, ApiError> {
        if let (None, Some(anonymous)) = (header, &self.anonymous) {
            return Ok(anonymous.clone());
        }
        let token = header
            .and_then(|h| {
                h.strip_prefix("Bearer ")
                    .or_else(|| h.strip_prefix("bearer "))
            })
            .map(str::trim)
            .ok_or_else(ApiError::unauthorized)?;
        self.by_token
            .get(token)
            .cloned()
            .ok_or_else(ApiError::unauthorized)
    }
}

/// One resource request, as the authorizer sees it.
#[derive(Debug, Clone)]
pub struct Attributes<'a> {
    /// Verb: get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: &'a str,
    /// API group.
    pub group: &'a str,
    /// Plural resource.
    pub resource: &'a str,
    /// Subresource ("" or "status").
    pub subresource: &'a str,
    /// Namespace ("" when cluster-scoped or across namespaces).
    pub namespace: &'a str,
    /// Object name ("" for collections).
    pub name: &'a str,
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
    ApiError::forbidden(
        a.group,
        a.resource,
        a.name,
        format!(
            "{subject}: User \"{}\" cannot {} resource \"{res}\" in API group \"{}\" {scope}: {why}",
            user.name, a.verb, a.group
        ),
    )
}

const READ: &[&str] = &["get", "list", "watch"];

/// Decides whether `user` may do `a`. `bound_node` is the spec.nodeName of the stored pod, for
/// writes to an existing pod; for a Secret get it is the requesting node when a pod bound to that
/// node references the Secret. Non-node identities may do everything.
pub fn authorize(
    user: &User,
    a: &Attributes<'_>,
    bound_node: Option<&str>,
) -> std::result::Result<(), ApiError> {
    let Some(node) = user.node_name() else {
        return Ok(());
    };
    let read = READ.contains(&a.verb);
    let own = a.name == node;
    let allowed = match (a.group, a.resource, a.subresource) {
        ("", "pods", "") if read => true,
        ("", "pods", "status") if a.verb == "get" => true,
        ("", "pods", "status") if matches!(a.verb, "patch" | "update") => {
            if bound_node == Some(node) {
                true
            } else {
                return Err(deny(
                    user,
                    a,
                    &format!(
                        "node \"{node}\" can only update pod status for pods with spec.nodeName set to \"{node}\""
                    ),
                ));
            }
        }
        ("", "pods", "") if a.verb == "delete" => {
            if bound_node == Some(node) {
                true
            } else {
                return Err(deny(
                    user,
                    a,
                    &format!(
                        "node \"{node}\" can only delete pods with spec.nodeName set to \"{node}\""
                    ),
                ));
            }
        }
        ("", "nodes", "") | ("", "nodes", "status") if read => true,
        ("", "nodes", "") | ("", "nodes", "status")
            if matches!(a.verb, "create" | "update" | "patch") =>
        {
            if own {
                true
            } else {
                return Err(deny(
                    user,
                    a,
                    &format!("node \"{node}\" can only modify its own Node object"),
                ));
            }
        }
        ("storage.k8s.io", "csinodes", "") | ("storage.k8s.io", "csinodes", "status") if read => {
            true
        }
        ("storage.k8s.io", "csinodes", "") | ("storage.k8s.io", "csinodes", "status")
            if matches!(a.verb, "create" | "update" | "patch" | "delete") =>
        {
            if own {
                true
            } else {
                return Err(deny(
                    user,
                    a,
                    &format!("node \"{node}\" can only modify the CSINode object named \"{node}\""),
                ));
            }
        }
        ("", "persistentvolumeclaims", "") | ("", "persistentvolumeclaims", "status") if read => {
            true
        }
        ("", "persistentvolumeclaims", "status") => {
            return Err(deny(
                user,
                a,
                "nodes may not write PersistentVolumeClaim status; only the health monitor does",
            ));
        }
        ("", "secrets", "") if a.verb == "get" => {
            if bound_node == Some(node) {
                true
            } else {
                return Err(deny(
                    user,
                    a,
                    &format!("no relationship found between node '{node}' and this object"),
                ));
            }
        }
        ("", "secrets", "") => {
            return Err(deny(
                user,
                a,
                &format!(
                    "node \"{node}\" may only get secrets referenced by pods bound to it, one by name"
                ),
            ));
        }
        ("", "persistentvolumes", "") | ("", "namespaces", "") if read => true,
        ("storage.k8s.io", "csidrivers" | "storageclasses" | "volumeattachments", "") if read => {
            true
        }
        ("", "events", "") | ("events.k8s.io", "events", "") => {
            read || matches!(a.verb, "create" | "update" | "patch")
        }
        ("coordination.k8s.io", "leases", "") => {
            if a.namespace == "kube-node-lease" && (own || (read && a.name.is_empty())) {
                true
            } else {
                return Err(deny(
                    user,
                    a,
                    &format!("node \"{node}\" can only access its own Lease in kube-node-lease"),
                ));
            }
        }
        _ => false,
    };
    if allowed {
        Ok(())
    } else {
        Err(deny(
            user,
            a,
            &format!("node \"{node}\" is not allowed to do this"),
        ))
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
}
