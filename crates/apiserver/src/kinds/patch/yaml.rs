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

/// Why a body could not be read.
#[derive(Debug)]
pub(crate) enum ParseError {
    /// The body nests deeper than the depth it was read with.
    TooDeep,
    /// Not YAML, or over another of the reader's budgets.
    Yaml(serde_saphyr::Error),
    /// The thread that reads the body could not be started.
    Thread(std::io::Error),
}

/// The stack the reader runs on. It descends one frame chain per level of nesting, up to
/// about 24 KiB a level in an unoptimised build, so a body at the depth budget would overflow
/// the 2 MiB of a runtime worker; only the pages touched are ever committed.
const READER_STACK: usize = 16 * 1024 * 1024;

/// The reader's options: untyped values read as the YAML 1.2 core schema reads them (`yes` and
/// `0755` stay strings, a `<<` key is an ordinary key, `.nan` is a float), every repeated key
/// handed to the walk, and nesting bounded while the events stream, so a deep body stops at
/// `max_depth` instead of being scanned to its end.
fn options(max_depth: usize) -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = max_depth;
    budget.flow_nesting_limit = budget.flow_nesting_limit.max(max_depth + 1);
    let mut o = serde_saphyr::Options::default();
    o.budget = Some(budget);
    o.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::PassThrough;
    o.merge_keys = serde_saphyr::MergeKeyPolicy::AsOrdinary;
    o.non_finite_float_policy = serde_saphyr::NonFiniteFloatPolicy::PassThrough;
    o.strict_booleans = true;
    o.leading_zero_numbers_as_strings = true;
    o.underscored_numbers_as_strings = true;
    o
}

/// Parses `body`, refusing one nested deeper than `max_depth`; the value (the last of repeated
/// keys wins) and the dotted paths of the repeated keys, in document order.
pub(crate) fn parse(body: &[u8], max_depth: usize) -> Result<(Value, Vec<String>), ParseError> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("yaml-reader".into())
            .stack_size(READER_STACK)
            .spawn_scoped(scope, || read(body, max_depth))
            .map_err(ParseError::Thread)?
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// [`parse`] on the calling thread.
fn read(body: &[u8], max_depth: usize) -> Result<(Value, Vec<String>), ParseError> {
    let mut walk = Walk::default();
    let read =
        serde_saphyr::with_deserializer_from_slice_with_options(body, options(max_depth), |d| {
            Node(&mut walk).deserialize(d)
        });
    match read {
        Ok(value) => Ok((value, walk.duplicates)),
        Err(e) if nests_too_deep(&e) => Err(ParseError::TooDeep),
        Err(e) => Err(ParseError::Yaml(e)),
    }
}

/// Whether `e` is the reader giving up on nesting: the depth budget, checked on the events, or
/// the parser's own nesting limits, which [`options`] sets above the budget, so either means
/// the body nests deeper than the budget.
fn nests_too_deep(e: &serde_saphyr::Error) -> bool {
    use serde_saphyr::{Error, ExternalMessageSource, budget::BudgetBreach, granit_parser};
    match e.without_snippet() {
        Error::Budget {
            breach: BudgetBreach::Depth { .. },
            ..
        } => true,
        Error::ExternalMessage { source, .. } => matches!(
            &**source,
            ExternalMessageSource::Parser(scan)
                if matches!(scan.kind(), granit_parser::ErrorKind::RecursionLimitExceeded)
        ),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_what_serde_json_reads_and_names_repeated_keys() {
        let body = b"a: 1\nb:\n  c: [x, {d: 2, d: 3}]\n  c2: null\n  f: 1.5\na: 4\n";
        let (v, dups) = parse(body, 128).unwrap();
        assert_eq!(
            v,
            json!({"a": 4, "b": {"c": ["x", {"d": 3}], "c2": null, "f": 1.5}})
        );
        assert_eq!(dups, vec!["b.c[1].d".to_string(), "a".to_string()]);
        let (v, dups) = parse(br#"{"k": true, "n": -3, "k": false}"#, 128).unwrap();
        assert_eq!(v, json!({"k": false, "n": -3}));
        assert_eq!(dups, vec!["k".to_string()]);
        assert_eq!(parse(b"", 128).unwrap().0, Value::Null);
        assert!(parse(b"a: [1\n", 128).is_err());
    }

    fn too_deep(body: &[u8], max: usize) -> bool {
        matches!(parse(body, max), Err(ParseError::TooDeep))
    }

    #[test]
    fn counts_flow_block_and_sequence_nesting() {
        let flow = format!("{}{}", "[".repeat(10), "]".repeat(10));
        assert!(!too_deep(flow.as_bytes(), 11));
        assert!(!too_deep(flow.as_bytes(), 10));
        assert!(too_deep(flow.as_bytes(), 9));
        let block: String = (0..10)
            .map(|d| format!("{}k{d}:\n", "  ".repeat(d)))
            .collect();
        assert!(!too_deep(block.as_bytes(), 10));
        assert!(too_deep(block.as_bytes(), 9));
        assert!(too_deep(b"- - - - x\n", 3));
        assert!(!too_deep(b"- - - - x\n", 4));
        assert!(!too_deep(b"- - - - x\n", 5));
    }

    #[test]
    fn brackets_in_quotes_and_comments_do_not_count() {
        let doc = "a: \"[[[[[[\"\nb: '{{{{{{'\nc: x # [[[[[[\nd: it's [fine]\n";
        assert!(!too_deep(doc.as_bytes(), 3));
        assert!(!too_deep(doc.as_bytes(), 1));
    }

    #[test]
    fn an_ordinary_manifest_is_shallow() {
        let doc = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {a: b}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    args: [\"--x\", \"y\"]\n";
        assert!(!too_deep(doc.as_bytes(), 8));
        assert!(!too_deep(doc.as_bytes(), 5));
        assert!(too_deep(doc.as_bytes(), 4));
    }

    /// The depth budget stops the reader at the first level too many: a body a million levels
    /// deep is refused without being scanned to its end (the test would take minutes if the
    /// cost grew with the square of the nesting).
    #[test]
    fn a_very_deep_body_is_refused_at_the_budget() {
        for open in ["[", "{a: ", "- "] {
            let body = open.repeat(1_000_000);
            let read = parse(body.as_bytes(), 128);
            assert!(matches!(read, Err(ParseError::TooDeep)), "{open}: {read:?}");
        }
    }

    #[test]
    fn a_body_at_the_budget_is_read_and_one_level_more_is_not() {
        for (open, close) in [("[", "]"), ("{a: ", "}")] {
            let body = format!("{}{}", open.repeat(128), close.repeat(128));
            let read = parse(body.as_bytes(), 128);
            assert!(read.is_ok(), "{open}: {read:?}");
            let body = format!("{}{}", open.repeat(129), close.repeat(129));
            let read = parse(body.as_bytes(), 128);
            assert!(matches!(read, Err(ParseError::TooDeep)), "{open}: {read:?}");
        }
    }
}
