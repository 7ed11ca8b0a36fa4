//! A YAML (or JSON) body read into a JSON value in one pass, noting every key a mapping repeats:
//! strict decoding refuses them, the other modes keep the last one and may warn.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::fmt;

/// One step of the path from the document's root to the node being read.
enum Step {
    Key(String),
    Index(usize),
}

/// What the walk carries: the path to the current node and the duplicates found so far.
#[derive(Default)]
struct Walk {
    path: Vec<Step>,
    duplicates: Vec<String>,
}

impl Walk {
    /// The dotted path of `key` under the current node, as field validation names fields.
    fn name(&self, key: &str) -> String {
        let mut out = String::new();
        for step in &self.path {
            match step {
                Step::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
                Step::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(key);
        out
    }
}

/// Reads one node; the seed and the visitor at once.
struct Node<'a>(&'a mut Walk);

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // As serde_json reads it: a float JSON cannot hold (NaN, infinities) is null.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        loop {
            self.0.path.push(Step::Index(out.len()));
            let item = seq.next_element_seed(Node(&mut *self.0));
            self.0.path.pop();
            match item? {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                let name = self.0.name(&key);
                self.0.duplicates.push(name);
            }
            self.0.path.push(Step::Key(key));
            let value = map.next_value_seed(Node(&mut *self.0));
            let Some(Step::Key(key)) = self.0.path.pop() else {
                return Err(serde::de::Error::custom("lost the key being read"));
            };
            out.insert(key, value?);
        }
        Ok(Value::Object(out))
    }
}

/// Parses `body`; the value (the last of repeated keys wins) and the dotted paths of the
/// repeated keys, in document order.
pub(crate) fn parse(body: &[u8]) -> Result<(Value, Vec<String>), serde_yaml::Error> {
    let mut walk = Walk::default();
    let value = Node(&mut walk).deserialize(serde_yaml::Deserializer::from_slice(body))?;
    Ok((value, walk.duplicates))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_what_serde_json_reads_and_names_repeated_keys() {
        let body = b"a: 1\nb:\n  c: [x, {d: 2, d: 3}]\n  c2: null\n  f: 1.5\na: 4\n";
        let (v, dups) = parse(body).unwrap();
        assert_eq!(
            v,
            json!({"a": 4, "b": {"c": ["x", {"d": 3}], "c2": null, "f": 1.5}})
        );
        assert_eq!(dups, vec!["b.c[1].d".to_string(), "a".to_string()]);
        let (v, dups) = parse(br#"{"k": true, "n": -3, "k": false}"#).unwrap();
        assert_eq!(v, json!({"k": false, "n": -3}));
        assert_eq!(dups, vec!["k".to_string()]);
        assert_eq!(parse(b"").unwrap().0, Value::Null);
        assert!(parse(b"a: [1\n").is_err());
    }
}
