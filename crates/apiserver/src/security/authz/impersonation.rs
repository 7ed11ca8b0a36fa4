//! Impersonation as kube-apiserver does it: `Impersonate-User` (or a service account),
//! `Impersonate-Group` (repeatable), `Impersonate-Uid` and `Impersonate-Extra-KEY`, each allowed
//! only by the `impersonate` verb on `users`, `serviceaccounts`, `groups` (API group ""),
//! `uids` or `userextras/KEY` (`authentication.k8s.io`). The request then runs as the
//! impersonated user. Node identities may never impersonate, whatever the authorizer chain:
//! kube-apiserver's Node authorizer denies them the `impersonate` verb, and without that a
//! kubelet's credentials would reach past the node scoping (any Secret, another node's pods).

use super::{
    ANONYMOUS, AUTHENTICATED, Attributes, Authorizer, Binding, Request, UNAUTHENTICATED, User,
    forbidden, service_account_groups, service_account_of,
};
use crate::errors::ApiError;
use crate::storage::store::Store;
use http::HeaderMap;

/// The user header.
pub const USER_HEADER: &str = "impersonate-user";
/// The group header (repeatable).
pub const GROUP_HEADER: &str = "impersonate-group";
/// The UID header.
pub const UID_HEADER: &str = "impersonate-uid";
/// The prefix of the extra headers (`Impersonate-Extra-KEY: VALUE`).
pub const EXTRA_PREFIX: &str = "impersonate-extra-";

fn values<'h>(headers: &'h HeaderMap, name: &str) -> Result<Vec<&'h str>, ApiError> {
    headers
        .get_all(name)
        .iter()
        .map(|v| {
            v.to_str()
                .map_err(|_| ApiError::bad_request(format!("the {name} header is not valid text")))
        })
        .collect()
}

/// Whether the request asks to impersonate anyone.
pub fn requested(headers: &HeaderMap) -> bool {
    headers.keys().any(|k| {
        let k = k.as_str();
        k == USER_HEADER || k == GROUP_HEADER || k == UID_HEADER || k.starts_with(EXTRA_PREFIX)
    })
}

fn check(
    authorizer: &Authorizer,
    store: &Store,
    requester: &User,
    attrs: Attributes<'_>,
) -> Result<(), ApiError> {
    authorizer.authorize(
        store,
        requester,
        &Request::Resource(attrs),
        Binding::Assume(None),
    )
}

fn impersonate_attrs<'a>(
    group: &'a str,
    resource: &'a str,
    subresource: &'a str,
    namespace: &'a str,
    name: &'a str,
) -> Attributes<'a> {
    Attributes {
        verb: "impersonate",
        group,
        resource,
        subresource,
        namespace,
        name,
    }
}

/// Whether `user` speaks for a node: a `system:node:` name or the `system:nodes` group (either
/// is enough, so that a token naming only one of them cannot slip through).
fn is_node(user: &User) -> bool {
    volhealth_model::identity::node_of_user(&user.name).is_some()
        || user
            .groups
            .iter()
            .any(|g| g == volhealth_model::identity::NODES_GROUP)
}

/// The 403 for a node asking to impersonate, naming the first thing it asked to impersonate the
/// way the authorizer would have.
fn node_refusal(requester: &User, headers: &HeaderMap) -> ApiError {
    let first = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    };
    let extra = headers
        .iter()
        .find_map(|(k, v)| Some((k.as_str().strip_prefix(EXTRA_PREFIX)?, v)));
    let extra_key;
    let attrs = if headers.contains_key(USER_HEADER) {
        let name = first(USER_HEADER);
        match service_account_of(name) {
            Some((ns, sa)) => impersonate_attrs("", "serviceaccounts", "", ns, sa),
            None => impersonate_attrs("", "users", "", "", name),
        }
    } else if headers.contains_key(GROUP_HEADER) {
        impersonate_attrs("", "groups", "", "", first(GROUP_HEADER))
    } else if let Some((key, value)) = extra {
        extra_key = crate::wire::request::percent_decode(key).to_ascii_lowercase();
        impersonate_attrs(
            "authentication.k8s.io",
            "userextras",
            &extra_key,
            "",
            value.to_str().unwrap_or_default(),
        )
    } else {
        impersonate_attrs("authentication.k8s.io", "uids", "", "", first(UID_HEADER))
    };
    forbidden(
        requester,
        &Request::Resource(attrs),
        "nodes may not impersonate",
    )
}

/// The user the request runs as: `requester` when it impersonates nobody; else the impersonated
/// user, once the requester is allowed each part of it (403 otherwise, 400 when groups, a UID or
/// extras are asked for without a user).
pub fn impersonate(
    authorizer: &Authorizer,
    store: &Store,
    requester: User,
    headers: &HeaderMap,
) -> Result<User, ApiError> {
    if !requested(headers) {
        return Ok(requester);
    }
    // Before any other check, so that no authorizer (AlwaysAllow included) can let it through.
    if is_node(&requester) {
        tracing::warn!(requester = %requester.name, "refused: a node asked to impersonate");
        return Err(node_refusal(&requester, headers));
    }
    let users = values(headers, USER_HEADER)?;
    let groups = values(headers, GROUP_HEADER)?;
    let uids = values(headers, UID_HEADER)?;
    let mut extras: Vec<(String, &str)> = Vec::new();
    for (k, v) in headers {
        if let Some(key) = k.as_str().strip_prefix(EXTRA_PREFIX) {
            let value = v.to_str().map_err(|_| {
                ApiError::bad_request(format!("the {} header is not valid text", k.as_str()))
            })?;
            extras.push((
                crate::wire::request::percent_decode(key).to_ascii_lowercase(),
                value,
            ));
        }
    }
    let Some(&name) = users.first() else {
        return Err(ApiError::bad_request(
            "requested impersonation of groups, a UID or extras without impersonating a user",
        ));
    };
    if users.len() > 1 || uids.len() > 1 {
        return Err(ApiError::bad_request(
            "only one Impersonate-User and one Impersonate-Uid may be given",
        ));
    }
    let mut impersonated_groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
    match service_account_of(name) {
        Some((ns, sa)) => {
            check(
                authorizer,
                store,
                &requester,
                impersonate_attrs("", "serviceaccounts", "", ns, sa),
            )?;
            if groups.is_empty() {
                impersonated_groups = service_account_groups(ns);
            }
        }
        None => check(
            authorizer,
            store,
            &requester,
            impersonate_attrs("", "users", "", "", name),
        )?,
    }
    for g in &groups {
        check(
            authorizer,
            store,
            &requester,
            impersonate_attrs("", "groups", "", "", g),
        )?;
    }
    for (key, value) in &extras {
        check(
            authorizer,
            store,
            &requester,
            impersonate_attrs("authentication.k8s.io", "userextras", key, "", value),
        )?;
    }
    let uid = uids.first().copied().unwrap_or("");
    if !uid.is_empty() {
        check(
            authorizer,
            store,
            &requester,
            impersonate_attrs("authentication.k8s.io", "uids", "", "", uid),
        )?;
    }
    let always = if name == ANONYMOUS {
        UNAUTHENTICATED
    } else {
        AUTHENTICATED
    };
    if !impersonated_groups.iter().any(|g| g == always) {
        impersonated_groups.push(always.to_string());
    }
    tracing::debug!(requester = %requester.name, user = %name, "impersonating");
    Ok(User {
        name: name.to_string(),
        uid: uid.to_string(),
        groups: impersonated_groups,
    })
}
