//! The metadata rules kube-apiserver applies on save: object names (DNS-1123 subdomains,
//! namespaces DNS-1123 labels, RBAC names path segments), label keys and values, annotation keys
//! and their total size.

use crate::errors::Cause;
use serde_json::Value;

/// An object's `metadata.name`; empty when it has none.
pub fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Most bytes all annotations of one object may hold, keys and values together.
pub const MAX_ANNOTATIONS: usize = 256 * 1024;
/// Longest DNS-1123 label, and longest label value and qualified-name name part.
const MAX_LABEL: usize = 63;
/// Longest DNS-1123 subdomain.
const MAX_SUBDOMAIN: usize = 253;

/// How an object's name is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// A DNS-1123 subdomain (most objects).
    Subdomain,
    /// A DNS-1123 label (namespaces).
    Label,
    /// Anything usable as one URL path segment (Roles and RoleBindings).
    PathSegment,
}

fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_LABEL
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_subdomain(s: &str) -> bool {
    s.len() <= MAX_SUBDOMAIN && s.split('.').all(is_label)
}

/// A label value or the name part of a qualified name: alphanumerics, `-`, `_`, `.`, starting
/// and ending alphanumeric.
fn is_name_part(s: &str, allow_empty: bool) -> bool {
    if s.is_empty() {
        return allow_empty;
    }
    s.len() <= MAX_LABEL
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

fn is_qualified_name(key: &str) -> bool {
    match key.split_once('/') {
        Some((prefix, name)) => is_subdomain(prefix) && is_name_part(name, false),
        None => is_name_part(key, false),
    }
}

/// Checks `metadata.name` by `rule`, adding a cause when it is invalid (not when empty).
pub fn check_name(name: &str, rule: NameRule, causes: &mut Vec<Cause>) {
    if name.is_empty() {
        return;
    }
    let why = match rule {
        NameRule::Subdomain if !is_subdomain(name) => Some(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character".to_string(),
        ),
        NameRule::Label if !is_label(name) => Some(format!(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character, at most {MAX_LABEL} characters"
        )),
        NameRule::PathSegment if name == "." || name == ".." => {
            Some(format!("may not be '{name}'"))
        }
        NameRule::PathSegment if name.contains('/') => Some("may not contain '/'".into()),
        NameRule::PathSegment if name.contains('%') => Some("may not contain '%'".into()),
        _ => None,
    };
    if let Some(why) = why {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "metadata.name",
            format!("Invalid value: \"{name}\": {why}"),
        ));
    }
}

/// Checks `metadata.labels` and `metadata.annotations`.
pub fn check_labels_and_annotations(meta: &Value, causes: &mut Vec<Cause>) {
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        for (k, v) in labels {
            if !is_qualified_name(k) {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    "metadata.labels",
                    format!("Invalid value: \"{k}\": a label key must be a qualified name: an optional DNS subdomain prefix and '/', then at most {MAX_LABEL} alphanumerics, '-', '_' or '.', starting and ending alphanumeric"),
                ));
            }
            let value = v.as_str().unwrap_or("");
            if !is_name_part(value, true) {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!("metadata.labels[{k}]"),
                    format!("Invalid value: \"{value}\": a label value must be empty or at most {MAX_LABEL} alphanumerics, '-', '_' or '.', starting and ending alphanumeric"),
                ));
            }
        }
    }
    if let Some(annotations) = meta.get("annotations").and_then(Value::as_object) {
        let mut total = 0;
        for (k, v) in annotations {
            total += k.len() + v.as_str().map_or(0, str::len);
            if !is_qualified_name(k) {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    "metadata.annotations",
                    format!("Invalid value: \"{k}\": an annotation key must be a qualified name"),
                ));
            }
        }
        if total > MAX_ANNOTATIONS {
            causes.push(Cause::new(
                "FieldValueTooLong",
                "metadata.annotations",
                format!("Too long: may not be more than {MAX_ANNOTATIONS} bytes"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(name: &str, rule: NameRule) -> bool {
        let mut c = Vec::new();
        check_name(name, rule, &mut c);
        !c.is_empty()
    }

    #[test]
    fn names() {
        assert!(!invalid("data-1.example.com", NameRule::Subdomain));
        assert!(invalid("a..b", NameRule::Subdomain));
        assert!(invalid("a.-b", NameRule::Subdomain));
        assert!(invalid("Upper", NameRule::Subdomain));
        assert!(!invalid(&"a".repeat(63), NameRule::Label));
        assert!(invalid(&"a".repeat(64), NameRule::Label));
        assert!(invalid("team.b", NameRule::Label));
        assert!(!invalid("pod-1.17a8c", NameRule::PathSegment));
        assert!(invalid("a/b", NameRule::PathSegment));
        assert!(invalid("..", NameRule::PathSegment));
    }

    #[test]
    fn labels_and_annotations() {
        let check = |meta: Value| {
            let mut c = Vec::new();
            check_labels_and_annotations(&meta, &mut c);
            c.into_iter().map(|c| c.field).collect::<Vec<_>>()
        };
        assert!(
            check(serde_json::json!({"labels": {"app.kubernetes.io/name": "db", "tier": ""}}))
                .is_empty()
        );
        assert_eq!(
            check(serde_json::json!({"labels": {"bad key": "x", "k": "-v"}})),
            ["metadata.labels", "metadata.labels[k]"]
        );
        assert_eq!(
            check(serde_json::json!({"annotations": {"a": "x".repeat(MAX_ANNOTATIONS)}})),
            ["metadata.annotations"]
        );
    }
}
