//! Authentication: who a request is. A kube-apiserver style static token file, the anonymous
//! identities, and the groups every authenticated user carries.

use crate::errors::{ApiError, Error, Result};
use std::collections::HashMap;
use std::path::Path;

/// The group every authenticated user is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of requests without credentials.
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The user name of requests without credentials.
pub const ANONYMOUS: &str = "system:anonymous";
/// The group whose members may do everything, with or without a binding.
pub const MASTERS: &str = "system:masters";
/// The prefix of service account user names (`system:serviceaccount:NS:NAME`).
pub const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";
/// The group of every service account.
pub const SERVICE_ACCOUNTS: &str = "system:serviceaccounts";

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

/// The identity of a request without credentials, as kube-apiserver's anonymous authenticator
/// gives it.
pub fn anonymous() -> User {
    User {
        name: ANONYMOUS.into(),
        uid: String::new(),
        groups: vec![UNAUTHENTICATED.into()],
    }
}

/// Adds `system:authenticated`, which kube-apiserver gives every authenticated user.
pub fn with_authenticated_group(mut user: User) -> User {
    if user.name != ANONYMOUS && !user.groups.iter().any(|g| g == AUTHENTICATED) {
        user.groups.push(AUTHENTICATED.into());
    }
    user
}

/// The (namespace, name) of a service account user name `system:serviceaccount:NS:NAME`.
pub fn service_account_of(user_name: &str) -> Option<(&str, &str)> {
    let rest = user_name.strip_prefix(SERVICE_ACCOUNT_PREFIX)?;
    let (ns, name) = rest.split_once(':')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains(':')).then_some((ns, name))
}

/// The groups of every service account in namespace `ns`.
pub fn service_account_groups(ns: &str) -> Vec<String> {
    vec![SERVICE_ACCOUNTS.into(), format!("{SERVICE_ACCOUNTS}:{ns}")]
}
