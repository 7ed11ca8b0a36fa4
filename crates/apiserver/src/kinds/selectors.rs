//! Label and field selectors, parsed as the real server parses them.

use crate::errors::ApiError;
use crate::registry::ResourceDef;
use serde_json::Value;

/// One label requirement.
#[derive(Debug, Clone, PartialEq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<LabelReq>);

/// A parsed field selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

fn split_top(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    let mut escaped = false;
    for ch in s.chars() {
        if escaped {
            cur.push('\\');
            cur.push(ch);
            escaped = false;
            continue;
        }
        match ch {
            '\\' => escaped = true,
            '(' => {
                depth += 1;
                cur.push(ch)
            }
            ')' => {
                depth -= 1;
                cur.push(ch)
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(ch),
        }
    }
    if escaped {
        cur.push('\\');
    }
    out.push(cur);
    out.into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 316
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(v: &str) -> bool {
    v.len() <= 63
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn set_values(rest: &str, raw: &str) -> Result<Vec<String>, ApiError> {
    let inner = rest
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "unable to parse requirement: found '{raw}', expected: '('"
            ))
        })?;
    let vals: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
    if vals.iter().any(|v| !valid_value(v)) {
        return Err(ApiError::bad_request(format!(
            "unable to parse requirement: invalid label value in '{raw}'"
        )));
    }
    Ok(vals)
}

impl LabelSelector {
    /// Parses `labelSelector`.
    pub fn parse(s: &str) -> Result<LabelSelector, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let bad = |why: &str| {
                ApiError::bad_request(format!("unable to parse requirement: {why} in '{part}'"))
            };
            let req = if let Some(k) = part.strip_prefix('!') {
                LabelReq::NotExists(k.trim().to_string())
            } else if let Some((k, v)) = part.split_once("!=") {
                LabelReq::NotEq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = part.split_once("==") {
                LabelReq::Eq(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = part.split_once('=') {
                LabelReq::Eq(k.trim().to_string(), v.trim().to_string())
            } else if let Some(i) = part.find(" notin") {
                LabelReq::NotIn(
                    part[..i].trim().to_string(),
                    set_values(&part[i + 6..], &part)?,
                )
            } else if let Some(i) = part.find(" in") {
                LabelReq::In(
                    part[..i].trim().to_string(),
                    set_values(&part[i + 3..], &part)?,
                )
            } else if part.contains(['<', '>', '(', ')', ' ']) {
                return Err(bad("unsupported operator"));
            } else {
                LabelReq::Exists(part.trim().to_string())
            };
            let (key, val) = match &req {
                LabelReq::Eq(k, v) | LabelReq::NotEq(k, v) => (k, Some(v)),
                LabelReq::In(k, _)
                | LabelReq::NotIn(k, _)
                | LabelReq::Exists(k)
                | LabelReq::NotExists(k) => (k, None),
            };
            if !valid_key(key) {
                return Err(bad("invalid label key"));
            }
            if let Some(v) = val
                && !valid_value(v)
            {
                return Err(bad("invalid label value"));
            }
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether the object's labels satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| !vs.iter().any(|v| v == x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }

    /// Whether the selector is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            if let Some(n) = it.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl FieldSelector {
    /// Parses `fieldSelector`, rejecting labels the resource does not support.
    pub fn parse(s: &str, def: &ResourceDef) -> Result<FieldSelector, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let (label, eq, value) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let label = label.trim();
            if !def.selectable(label) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {label}"
                )));
            }
            reqs.push((label.to_string(), eq, unescape(value.trim())));
        }
        Ok(FieldSelector(reqs))
    }

    /// Whether the object satisfies every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0
            .iter()
            .all(|(label, eq, want)| (field_value(obj, label) == *want) == *eq)
    }

    /// Whether the selector is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value required for `metadata.name`, if the selector pins it.
    pub fn pinned_name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(l, eq, _)| l == "metadata.name" && *eq)
            .map(|(_, _, v)| v.as_str())
    }
}

/// The string value of a selectable field ("" when absent; booleans as "true"/"false").
pub fn field_value(obj: &Value, label: &str) -> String {
    let path = if label == "source" {
        "source.component"
    } else {
        label
    };
    let mut cur = obj;
    for seg in path.split('.') {
        match cur.get(seg) {
            Some(v) => cur = v,
            None => {
                return if matches!(label, "spec.unschedulable" | "spec.hostNetwork") {
                    "false".into()
                } else {
                    String::new()
                };
            }
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_operators() {
        let o = json!({"metadata": {"labels": {"app": "db", "tier": "x"}}});
        for (sel, want) in [
            ("app=db", true),
            ("app==db", true),
            ("app!=db", false),
            ("app in (db,web)", true),
            ("app notin (db,web)", false),
            ("app", true),
            ("!app", false),
            ("!missing", true),
            ("missing notin (a)", true),
            ("app=db,tier=y", false),
            ("app in (web, db),tier", true),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&o),
                want,
                "{sel}"
            );
        }
        assert!(LabelSelector::parse("app in db").is_err());
    }

    #[test]
    fn field_selectors_and_unsupported_labels() {
        let def = crate::registry::find("", "v1", "pods").unwrap();
        let o = json!({"metadata": {"name": "p", "namespace": "n"}, "spec": {"nodeName": "a"}, "status": {"phase": "Running"}});
        let s = FieldSelector::parse(
            "spec.nodeName=a,status.phase!=Succeeded,status.phase!=Failed",
            def,
        )
        .unwrap();
        assert!(s.matches(&o));
        assert!(
            !FieldSelector::parse("metadata.name=q", def)
                .unwrap()
                .matches(&o)
        );
        let e = FieldSelector::parse("spec.bogus=1", def).unwrap_err();
        assert_eq!(e.code, 400);
    }
}
