//! One resource request as the handlers see it: its verb and what was read from the wire.

use crate::errors::ApiError;
use crate::kinds::patch::{self, PatchType};
use crate::security::authz::User;
use crate::wire::request::{self, Target};
use axum::body::Bytes;
use std::collections::HashMap;

/// A resource verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// Read one object.
    Get,
    /// Read a collection.
    List,
    /// Stream changes.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH of the given type.
    Patch(PatchType),
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
}

impl Verb {
    /// The `verb` label of `apiserver_request_total`.
    pub fn metric_name(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::List => "LIST",
            Verb::Watch => "WATCH",
            Verb::Create => "POST",
            Verb::Update => "PUT",
            Verb::Patch(PatchType::Apply) => "APPLY",
            Verb::Patch(_) => "PATCH",
            Verb::Delete => "DELETE",
            Verb::DeleteCollection => "DELETECOLLECTION",
        }
    }

    /// The authorization verb.
    pub fn authz_name(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch(_) => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }
}

/// Maps method, path and query to a verb.
pub fn verb(
    method: &http::Method,
    t: &Target,
    query: &HashMap<String, String>,
    content_type: &str,
) -> Result<Verb, ApiError> {
    let named = t.name.is_some();
    let v = match (method.as_str(), named) {
        ("GET" | "HEAD", _) if request::parse_bool(query.get("watch").map(String::as_str)) => {
            Verb::Watch
        }
        ("GET" | "HEAD", true) => Verb::Get,
        ("GET" | "HEAD", false) => Verb::List,
        ("POST", false) => Verb::Create,
        ("POST", true) if t.sub.as_deref() == Some("eviction") => Verb::Create,
        ("POST", true) if t.sub.as_deref() == Some("binding") => Verb::Create,
        ("PUT", true) => Verb::Update,
        ("PATCH", true) => Verb::Patch(patch::patch_type(content_type)?),
        ("DELETE", true) => Verb::Delete,
        ("DELETE", false) => Verb::DeleteCollection,
        _ => {
            return Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({})",
                method
            )));
        }
    };
    if t.sub.as_deref() == Some("binding") && v != Verb::Create {
        return Err(ApiError::method_not_allowed(
            "the binding subresource only allows create",
        ));
    }
    if t.sub.as_deref() == Some("status") && !matches!(v, Verb::Get | Verb::Update | Verb::Patch(_))
    {
        return Err(ApiError::method_not_allowed(
            "the status subresource only allows get, update and patch",
        ));
    }
    Ok(v)
}

/// One resource request, fully read.
pub struct Call {
    /// What it targets.
    pub target: Target,
    /// The verb.
    pub verb: Verb,
    /// Decoded query parameters.
    pub query: HashMap<String, String>,
    /// The Accept header.
    pub accept: String,
    /// The Content-Type header.
    pub content_type: String,
    /// The body.
    pub body: Bytes,
    /// The caller, when authentication is on.
    pub user: Option<User>,
}

impl Call {
    pub(crate) fn q(&self, k: &str) -> Option<&str> {
        self.query
            .get(k)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    pub(crate) fn res(&self) -> String {
        self.target.def.store_name()
    }

    pub(crate) fn name(&self) -> &str {
        self.target.name.as_deref().unwrap_or("")
    }

    pub(crate) fn status_only(&self) -> bool {
        self.target.sub.as_deref() == Some("status")
    }

    pub(crate) fn dry_run(&self) -> bool {
        self.q("dryRun").is_some()
    }
}
