//! The index of objects by the node they are bound to (`spec.nodeName`), kept with the cache.

use super::{Cache, Store};
use serde_json::Value;
use std::sync::Arc;

/// The node an object is bound to (`spec.nodeName`: pods, VolumeAttachments), if any.
fn node_of(v: &Value) -> Option<&str> {
    v.pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
}

impl Cache {
    /// Keeps `by_node` in step with one object of `res` going from `before` to `after`.
    pub(super) fn index(
        &mut self,
        res: &str,
        key: &(String, String),
        before: Option<&Value>,
        after: Option<&Value>,
    ) {
        let (old, new) = (before.and_then(node_of), after.and_then(node_of));
        if old == new {
            return;
        }
        if let Some(old) = old {
            let slot = (res.to_string(), old.to_string());
            if let Some(set) = self.by_node.get_mut(&slot) {
                set.remove(key);
                if set.is_empty() {
                    self.by_node.remove(&slot);
                }
            }
        }
        if let Some(new) = new {
            self.by_node
                .entry((res.to_string(), new.to_string()))
                .or_default()
                .insert(key.clone());
        }
    }
}

impl Store {
    /// The objects of `res` bound to `node` (`spec.nodeName`), from an index: no scan.
    pub fn on_node(&self, res: &str, node: &str) -> Vec<Arc<Value>> {
        let Ok(c) = self.cache.read() else {
            return Vec::new();
        };
        let (Some(keys), Some(objects)) = (
            c.by_node.get(&(res.to_string(), node.to_string())),
            c.objects.get(res),
        ) else {
            return Vec::new();
        };
        keys.iter()
            .filter_map(|k| objects.get(k).cloned())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use crate::storage::store::{Outcome, Store};
    use serde_json::{Value, json};

    fn pod(name: &str, node: Option<&str>) -> Value {
        let mut p = json!({"metadata": {"namespace": "ns", "name": name}, "spec": {}});
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
        }
        p
    }

    fn names(store: &Store, node: &str) -> Vec<String> {
        let mut v: Vec<String> = store
            .on_node("pods", node)
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn the_index_follows_binding_moves_deletes_and_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path(), 100).unwrap();
        let put = |name: &str, node: Option<&str>| {
            store
                .mutate("pods", "ns", name, |_| Ok(Outcome::Put(pod(name, node))))
                .unwrap();
        };
        put("a", None);
        put("b", Some("n1"));
        assert!(names(&store, "n1") == ["b"], "an unbound pod is on no node");
        put("a", Some("n1"));
        put("c", Some("n2"));
        assert_eq!(names(&store, "n1"), ["a", "b"]);
        put("b", Some("n2"));
        assert_eq!(names(&store, "n1"), ["a"]);
        assert_eq!(names(&store, "n2"), ["b", "c"]);
        store
            .mutate("pods", "ns", "c", |_| Ok(Outcome::Delete))
            .unwrap();
        assert_eq!(names(&store, "n2"), ["b"]);
        assert!(store.on_node("volumeattachments", "n2").is_empty());
        drop(store);
        let reopened = Store::open(dir.path(), 100).unwrap();
        assert_eq!(names(&reopened, "n1"), ["a"]);
        assert_eq!(names(&reopened, "n2"), ["b"]);
    }
}
