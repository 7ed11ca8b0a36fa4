//! `events.k8s.io/v1` is a second view of the core/v1 events: both share one store, as in the
//! real server, so an event written through either API shows in `kubectl describe`. Objects are
//! stored in core/v1 form and converted at the edges.

use crate::registry::{self, Printer, ResourceDef};
use serde_json::{Map, Value};
use std::borrow::Cow;

/// (events.k8s.io/v1 field, core/v1 field) pairs that differ only in name.
const RENAMES: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

fn is_view(def: &ResourceDef) -> bool {
    def.printer == Printer::EventV1
}

/// The resource whose rules (validation, storage form) apply to objects of `def`.
pub fn storage_def(def: &'static ResourceDef) -> &'static ResourceDef {
    if is_view(def) {
        registry::find("", "v1", "events").unwrap_or(def)
    } else {
        def
    }
}

fn rename(obj: &Map<String, Value>, from_v1: bool, api_version: &str) -> Value {
    let mut out = Map::new();
    for (k, v) in obj {
        let key = RENAMES
            .iter()
            .find_map(|(v1, core)| {
                if from_v1 {
                    (k == v1).then_some(*core)
                } else {
                    (k == core).then_some(*v1)
                }
            })
            .unwrap_or(k.as_str());
        out.insert(key.to_string(), v.clone());
    }
    out.insert("apiVersion".into(), Value::String(api_version.into()));
    out.insert("kind".into(), Value::String("Event".into()));
    Value::Object(out)
}

/// An object as the client sent it, in storage form.
pub fn to_storage(def: &ResourceDef, obj: Value) -> Value {
    match (&obj, is_view(def)) {
        (Value::Object(m), true) => rename(m, true, "v1"),
        _ => obj,
    }
}

/// A stored object as the client's API shows it.
pub fn from_storage<'a>(def: &ResourceDef, obj: &'a Value) -> Cow<'a, Value> {
    match (obj, is_view(def)) {
        (Value::Object(m), true) => Cow::Owned(rename(m, false, "events.k8s.io/v1")),
        _ => Cow::Borrowed(obj),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_round_trip_between_views() {
        let v1 = registry::find("events.k8s.io", "v1", "events").unwrap();
        let sent = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "PersistentVolumeClaim", "name": "d"}, "note": "n", "reportingController": "c", "reason": "R"});
        let stored = to_storage(v1, sent.clone());
        assert_eq!(stored["apiVersion"], "v1");
        assert_eq!(stored["involvedObject"]["name"], "d");
        assert_eq!(stored["message"], "n");
        assert_eq!(stored["reportingComponent"], "c");
        assert_eq!(from_storage(v1, &stored).into_owned(), sent);
        assert_eq!(storage_def(v1).group, "");
    }
}
