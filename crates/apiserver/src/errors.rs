//! Crate errors and the Kubernetes `Status` answers sent to clients.

use serde_json::{Value, json};

/// Failures of the server itself (start-up, storage, I/O), as opposed to API answers.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The SQLite store failed.
    #[error("{what}: {source}")]
    Store {
        /// What was being done.
        what: String,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// A file or socket operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A stored object could not be decoded or encoded.
    #[error("{what}: {source}")]
    Json {
        /// What was being done.
        what: String,
        /// The serde error.
        source: serde_json::Error,
    },
    /// The database file is damaged, truncated, or not a database.
    #[error(
        "the store {path} is corrupt: {reason}; restore it from a backup, or move it away to start with an empty store"
    )]
    Corrupt {
        /// The database file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The token file is malformed.
    #[error("token file {path}, line {line}: {reason}")]
    TokenFile {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// Making, reading or using a certificate or key failed.
    #[error("{what}: {reason}")]
    Tls {
        /// What was being done.
        what: String,
        /// Why it failed (never key material).
        reason: String,
    },
    /// A lock was poisoned by a panic in another thread.
    #[error("internal lock poisoned while {0}")]
    Poisoned(&'static str),
    /// A blocking task failed to complete.
    #[error("background task failed while {what}: {reason}")]
    Task {
        /// What was being done.
        what: &'static str,
        /// Why it failed.
        reason: String,
    },
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// One entry of `details.causes` in an `Invalid` Status.
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// Machine reason, e.g. `FieldValueRequired`.
    pub reason: &'static str,
    /// Human message, e.g. `Required value`.
    pub message: String,
    /// Field path, e.g. `status.healthStatus.healthConditions[0].reason`.
    pub field: String,
}

impl Cause {
    /// A cause with the given reason, field path and message.
    pub fn new(
        reason: &'static str,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Cause {
        Cause {
            reason,
            message: message.into(),
            field: field.into(),
        }
    }
}

/// An API failure, answered as a `metav1.Status` with the same HTTP code.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `Status.reason`, e.g. `NotFound`.
    pub reason: &'static str,
    /// `Status.message`.
    pub message: String,
    /// `Status.details`, when there is one.
    pub details: Option<Value>,
}

fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut d = json!({"name": name, "kind": kind});
    if !group.is_empty() {
        d["group"] = json!(group);
    }
    d
}

impl ApiError {
    /// A failure with no details.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// A failure about the object `name` of `plural` in `group`, with the details naming it.
    fn about(
        code: u16,
        reason: &'static str,
        message: String,
        group: &str,
        plural: &str,
        name: &str,
    ) -> ApiError {
        ApiError {
            code,
            reason,
            message,
            details: Some(details(name, group, plural)),
        }
    }

    /// 404 for a missing object of `plural` in `group`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> ApiError {
        let res = qualified(group, plural);
        let message = format!("{res} \"{name}\" not found");
        ApiError::about(404, "NotFound", message, group, plural, name)
    }

    /// 404 for a path that names no resource.
    pub fn no_route() -> ApiError {
        ApiError {
            code: 404,
            reason: "NotFound",
            message: "the server could not find the requested resource".into(),
            details: Some(json!({})),
        }
    }

    /// 409 AlreadyExists.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> ApiError {
        let res = qualified(group, plural);
        let message = format!("{res} \"{name}\" already exists");
        ApiError::about(409, "AlreadyExists", message, group, plural, name)
    }

    /// 409 Conflict for a stale resourceVersion.
    pub fn conflict(group: &str, plural: &str, name: &str) -> ApiError {
        let res = qualified(group, plural);
        let message = format!(
            "Operation cannot be fulfilled on {res} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
        );
        ApiError::about(409, "Conflict", message, group, plural, name)
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    /// 422 Invalid with field causes, worded like the real server.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> ApiError {
        let list: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        let joined = if list.len() == 1 {
            list[0].clone()
        } else {
            format!("[{}]", list.join(", "))
        };
        let mut d = details(name, group, kind);
        d["causes"] = Value::Array(
            causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect(),
        );
        ApiError {
            code: 422,
            reason: "Invalid",
            message: format!("{kind} \"{name}\" is invalid: {joined}"),
            details: Some(d),
        }
    }

    /// 403 Forbidden, worded like the real authorizer.
    pub fn forbidden(group: &str, plural: &str, name: &str, message: String) -> ApiError {
        ApiError::about(403, "Forbidden", message, group, plural, name)
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> ApiError {
        ApiError::new(401, "Unauthorized", "Unauthorized")
    }

    /// 415 for a body type the endpoint does not take.
    pub fn unsupported_media(content_type: &str) -> ApiError {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml (got {content_type:?})"
            ),
        )
    }

    /// 413 for a body over the limit.
    pub fn too_large() -> ApiError {
        ApiError::new(
            413,
            "RequestEntityTooLarge",
            "Request entity too large: limit is 3145728",
        )
    }

    /// 405 for a verb the resource does not support.
    pub fn method_not_allowed(message: impl Into<String>) -> ApiError {
        ApiError::new(405, "MethodNotAllowed", message)
    }

    /// 410 Expired for a compacted resourceVersion.
    pub fn expired(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }

    /// 500 for a server-side failure.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    /// The `metav1.Status` object.
    pub fn status_json(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        ApiError::internal(e.to_string())
    }
}

/// `plural` or `plural.group`, as the real server names resources in messages.
pub fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}
