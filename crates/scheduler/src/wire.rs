//! kube-scheduler's extender messages in its own encoding. Its `ExtenderArgs` and
//! `ExtenderFilterResult` carry no JSON tags, so it sends Go field names (`Pod`, `Nodes`,
//! `NodeNames`) and matches keys without regard to case; this side does the same. The pod and
//! the nodes inside are ordinary API objects.

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A decoded `ExtenderArgs`.
#[derive(Debug, Clone)]
pub struct ExtenderArgs {
    /// The pod being scheduled.
    pub pod: Pod,
    /// The candidate nodes as full objects (when the extender is not `nodeCacheCapable`).
    pub nodes: Option<Vec<Value>>,
    /// The candidate node names (when it is `nodeCacheCapable`).
    pub node_names: Option<Vec<String>>,
}

/// Why a request could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("decoding ExtenderArgs: {0}")]
pub struct DecodeError(pub String);

fn field<'a>(map: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    map.get(name)
        .or_else(|| {
            map.iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        })
        .filter(|v| !v.is_null())
}

impl ExtenderArgs {
    /// Decodes the request body.
    pub fn decode(body: &[u8]) -> Result<ExtenderArgs, DecodeError> {
        let value: Value =
            serde_json::from_slice(body).map_err(|e| DecodeError(format!("not JSON: {e}")))?;
        let Value::Object(map) = value else {
            return Err(DecodeError("not a JSON object".into()));
        };
        let pod = field(&map, "Pod").ok_or_else(|| DecodeError("no Pod".into()))?;
        let pod: Pod =
            serde_json::from_value(pod.clone()).map_err(|e| DecodeError(format!("Pod: {e}")))?;
        let nodes = match field(&map, "Nodes") {
            None => None,
            Some(Value::Object(list)) => Some(match field(list, "items") {
                None => Vec::new(),
                Some(Value::Array(items)) => items.clone(),
                Some(_) => return Err(DecodeError("Nodes.items is not a list".into())),
            }),
            Some(_) => return Err(DecodeError("Nodes is not a NodeList".into())),
        };
        let node_names = match field(&map, "NodeNames") {
            None => None,
            Some(v) => Some(
                serde_json::from_value::<Vec<String>>(v.clone())
                    .map_err(|e| DecodeError(format!("NodeNames: {e}")))?,
            ),
        };
        if nodes.is_none() && node_names.is_none() {
            return Err(DecodeError("neither Nodes nor NodeNames".into()));
        }
        Ok(ExtenderArgs {
            pod,
            nodes,
            node_names,
        })
    }

    /// The candidate names: `NodeNames` when sent, else the names of `Nodes`.
    pub fn candidate_names(&self) -> Vec<String> {
        if let Some(names) = &self.node_names {
            return names.clone();
        }
        self.nodes
            .iter()
            .flatten()
            .map(node_name)
            .map(str::to_string)
            .collect()
    }
}

/// The `metadata.name` of a node object ("" when missing).
pub fn node_name(node: &Value) -> &str {
    node.get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// An `ExtenderFilterResult`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExtenderFilterResult {
    /// The passing nodes as objects (answering a request that sent `Nodes`).
    pub nodes: Option<Vec<Value>>,
    /// The passing node names (answering a request that sent `NodeNames`).
    pub node_names: Option<Vec<String>>,
    /// Nodes that fail, where preempting pods could help.
    pub failed_nodes: BTreeMap<String, String>,
    /// Nodes that fail whatever is preempted.
    pub failed_and_unresolvable_nodes: BTreeMap<String, String>,
    /// A filter error ("" when none).
    pub error: String,
}

impl ExtenderFilterResult {
    /// A result carrying only an error.
    pub fn error(message: impl Into<String>) -> ExtenderFilterResult {
        ExtenderFilterResult {
            error: message.into(),
            ..Default::default()
        }
    }

    /// The JSON kube-scheduler reads (Go field names).
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert(
            "Nodes".into(),
            match &self.nodes {
                Some(items) => serde_json::json!({"metadata": {}, "items": items}),
                None => Value::Null,
            },
        );
        map.insert(
            "NodeNames".into(),
            match &self.node_names {
                Some(names) => Value::from(names.clone()),
                None => Value::Null,
            },
        );
        map.insert("FailedNodes".into(), to_object(&self.failed_nodes));
        map.insert(
            "FailedAndUnresolvableNodes".into(),
            to_object(&self.failed_and_unresolvable_nodes),
        );
        map.insert("Error".into(), Value::from(self.error.clone()));
        Value::Object(map)
    }
}

fn to_object(m: &BTreeMap<String, String>) -> Value {
    Value::Object(
        m.iter()
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capitalised_and_lowercase_keys_both_read() {
        for body in [
            r#"{"Pod": {"metadata": {"name": "p", "namespace": "ns"}}, "Nodes": null, "NodeNames": ["a", "b"]}"#,
            r#"{"pod": {"metadata": {"name": "p", "namespace": "ns"}}, "nodenames": ["a", "b"]}"#,
        ] {
            let a = ExtenderArgs::decode(body.as_bytes()).unwrap();
            assert_eq!(a.pod.metadata.name.as_deref(), Some("p"));
            assert!(a.nodes.is_none());
            assert_eq!(a.candidate_names(), vec!["a", "b"]);
        }
    }

    #[test]
    fn full_node_objects_give_their_names() {
        let body = r#"{"Pod": {"metadata": {"name": "p"}}, "Nodes": {"metadata": {}, "items": [{"metadata": {"name": "n1"}}, {"metadata": {"name": "n2"}}]}, "NodeNames": null}"#;
        let a = ExtenderArgs::decode(body.as_bytes()).unwrap();
        assert!(a.node_names.is_none());
        assert_eq!(a.candidate_names(), vec!["n1", "n2"]);
    }

    #[test]
    fn malformed_requests_say_what_is_wrong() {
        for (body, want) in [
            ("nope", "not JSON"),
            ("[]", "not a JSON object"),
            (r#"{"NodeNames": []}"#, "no Pod"),
            (r#"{"Pod": {}}"#, "neither Nodes nor NodeNames"),
            (r#"{"Pod": {}, "Nodes": []}"#, "Nodes is not a NodeList"),
            (r#"{"Pod": {}, "NodeNames": [1]}"#, "NodeNames"),
        ] {
            let err = ExtenderArgs::decode(body.as_bytes()).unwrap_err();
            assert!(err.to_string().contains(want), "{body}: {err}");
        }
    }

    #[test]
    fn the_result_uses_go_field_names() {
        let mut r = ExtenderFilterResult {
            node_names: Some(vec!["a".into()]),
            ..Default::default()
        };
        r.failed_and_unresolvable_nodes
            .insert("b".into(), "why".into());
        let v = r.to_json();
        assert_eq!(v["NodeNames"], serde_json::json!(["a"]));
        assert_eq!(v["Nodes"], Value::Null);
        assert_eq!(v["FailedNodes"], serde_json::json!({}));
        assert_eq!(v["FailedAndUnresolvableNodes"]["b"], "why");
        assert_eq!(v["Error"], "");
    }
}
