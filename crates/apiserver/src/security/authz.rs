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
use crate::storage::store::Store;

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
    /// `Node,RBAC`, as real clusters run: node identities scoped, everyone else only as far as
    /// roles and bindings allow.
    fn default() -> Authorizer {
        Authorizer {
            modes: vec![Mode::Node, Mode::Rbac],
        }
    }
}

impl std::fmt::Display for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.modes.iter().map(|m| m.as_str()).collect();
        f.write_str(&names.join(","))
    }
}

/// Why an `--authorization-mode` value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModeError {
    /// An empty item (`Node,,RBAC` or an empty flag).
    #[error("empty authorization mode")]
    Empty,
    /// A mode this server does not implement.
    #[error(
        "authorization mode {0:?} is not supported (supported: Node, RBAC, AlwaysAllow, AlwaysDeny)"
    )]
    Unsupported(String),
    /// A mode listed twice.
    #[error("authorization mode {0:?} is given twice")]
    Twice(String),
}

impl Authorizer {
    /// Parses `--authorization-mode`: a comma list of `Node`, `RBAC`, `AlwaysAllow` and
    /// `AlwaysDeny`, each at most once.
    pub fn parse(flag: &str) -> std::result::Result<Authorizer, ModeError> {
        let mut modes = Vec::new();
        for part in flag.split(',').map(str::trim) {
            let mode = match part {
                "Node" => Mode::Node,
                "RBAC" => Mode::Rbac,
                "AlwaysAllow" => Mode::AlwaysAllow,
                "AlwaysDeny" => Mode::AlwaysDeny,
                "" => return Err(ModeError::Empty),
                other => return Err(ModeError::Unsupported(other.to_string())),
            };
            if modes.contains(&mode) {
                return Err(ModeError::Twice(part.to_string()));
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

/// The chain `Node,AlwaysAllow` for one resource request, without a store: the node authorizer
/// with `bound_node` as the object's node, then everything else allowed.
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
mod tests;
