//! `as=Table` answers: the columns the real server prints for each kind, plus a HEALTH column for
//! PVCs, pods and CSINodes so `kubectl get` shows the KEP fields at a glance.

mod cells;
mod columns;

pub use cells::cells;
pub use columns::columns;

use crate::registry::Printer;
use serde_json::{Value, json};

/// What each row carries in `object` (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// Nothing.
    None,
    /// A PartialObjectMetadata (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query value.
    pub fn parse(s: Option<&str>) -> IncludeObject {
        match s {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}
pub(crate) fn s(v: &Value, ptr: &str) -> String {
    match v.pointer(ptr) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

pub(crate) fn or_none(x: String) -> String {
    if x.is_empty() { "<none>".into() } else { x }
}

/// Human age like kubectl's (`45s`, `3m20s`, `5h`, `2d3h`, `120d`, `3y40d`).
pub fn human_duration(secs: i64) -> String {
    let secs = secs.max(0);
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86400);
    // `3m` or `3m20s`: whole units and, when there is any, what is left in the next smaller unit.
    let with_rest = |n: i64, unit: char, rest: i64, smaller: char| {
        if rest == 0 {
            format!("{n}{unit}")
        } else {
            format!("{n}{unit}{rest}{smaller}")
        }
    };
    if secs < 120 {
        format!("{secs}s")
    } else if m < 10 {
        with_rest(m, 'm', secs % 60, 's')
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        with_rest(h, 'h', m % 60, 'm')
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        with_rest(d, 'd', h % 24, 'h')
    } else if d < 365 * 2 {
        format!("{d}d")
    } else if d < 365 * 8 {
        format!("{}y{}d", d / 365, d % 365)
    } else {
        format!("{}y", d / 365)
    }
}

pub(crate) fn age(obj: &Value, ptr: &str, now: jiff::Timestamp) -> String {
    match s(obj, ptr).parse::<jiff::Timestamp>() {
        Ok(t) => human_duration(now.as_second() - t.as_second()),
        Err(_) => "<unknown>".into(),
    }
}

pub(crate) fn access_modes(v: &Value) -> String {
    let Some(a) = v.as_array() else {
        return String::new();
    };
    a.iter()
        .filter_map(Value::as_str)
        .map(|m| match m {
            "ReadWriteOnce" => "RWO",
            "ReadOnlyMany" => "ROX",
            "ReadWriteMany" => "RWX",
            "ReadWriteOncePod" => "RWOP",
            other => other,
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn conditions(list: Option<&Value>) -> Vec<String> {
    list.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|c| format!("{}/{}", s(c, "/status"), s(c, "/reason")))
                .collect()
        })
        .unwrap_or_default()
}

/// The HEALTH cell: `Status/Reason` joined with ",", `Healthy` when reported with no conditions,
/// `<none>` when nothing was reported.
pub fn health(obj: &Value, printer: Printer) -> String {
    let (entries, prefixed): (Vec<String>, bool) = match printer {
        Printer::Pvc => match obj.pointer("/status/healthStatus") {
            None | Some(Value::Null) => return "<none>".into(),
            Some(h) => (conditions(h.get("healthConditions")), false),
        },
        Printer::Pod | Printer::CsiNode => {
            let field = if printer == Printer::Pod {
                "/status/volumeHealth"
            } else {
                "/status/storageHealth"
            };
            let Some(list) = obj.pointer(field).and_then(Value::as_array) else {
                return "<none>".into();
            };
            let mut out = Vec::new();
            for e in list {
                for c in conditions(e.get("healthConditions")) {
                    out.push(format!("{}:{c}", s(e, "/name")));
                }
            }
            (out, true)
        }
        _ => return String::new(),
    };
    let _ = prefixed;
    if entries.is_empty() {
        "Healthy".into()
    } else {
        entries.join(",")
    }
}

/// One row with its `object` per `includeObject`.
pub fn row(p: Printer, o: &Value, include: IncludeObject, now: jiff::Timestamp) -> Value {
    let object = match include {
        IncludeObject::None => Value::Null,
        IncludeObject::Object => o.clone(),
        IncludeObject::Metadata => partial_metadata(o),
    };
    let mut r = json!({"cells": cells(p, o, now)});
    if !object.is_null() {
        r["object"] = object;
    }
    r
}

/// The PartialObjectMetadata of an object.
pub fn partial_metadata(o: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": o.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

/// A whole Table; `with_columns` false leaves out the column definitions (later watch events).
pub fn table(
    p: Printer,
    objs: &[&Value],
    rv: u64,
    include: IncludeObject,
    with_columns: bool,
) -> Value {
    let now = jiff::Timestamp::now();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": rv.to_string()},
        "columnDefinitions": if with_columns { Value::Array(columns(p)) } else { Value::Null },
        "rows": objs.iter().map(|o| row(p, o, include, now)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_and_health() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(200), "3m20s");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(3 * 86400), "3d");
        let pvc = json!({"status": {"healthStatus": {"healthConditions": [
            {"status": "Inaccessible", "reason": "VolumeNotFound"}, {"status": "Degraded", "reason": "Slow"}]}}});
        assert_eq!(
            health(&pvc, Printer::Pvc),
            "Inaccessible/VolumeNotFound,Degraded/Slow"
        );
        assert_eq!(
            health(&json!({"status": {"healthStatus": {}}}), Printer::Pvc),
            "Healthy"
        );
        assert_eq!(health(&json!({}), Printer::Pvc), "<none>");
        for p in [
            Printer::Pod,
            Printer::Pvc,
            Printer::Node,
            Printer::CsiNode,
            Printer::Event,
            Printer::Pv,
            Printer::Secret,
            Printer::ServiceAccount,
            Printer::Role,
            Printer::RoleBinding,
        ] {
            assert_eq!(
                columns(p).len(),
                cells(p, &json!({}), jiff::Timestamp::now()).len(),
                "{p:?}"
            );
        }
    }
}
