//! When two condition lists are the same. One rule, used for no-op suppression, for Events and
//! for the writers' own-writes overlay: order does not matter; the key of a condition is the KEP's
//! `(status, reason)`; two lists are the same when they hold the same keys with the same messages
//! (and, for storage conditions, the same access and volume mode).

use crate::sanitize::Condition;
use std::collections::BTreeSet;

/// The identity of a condition within its list: `(status, reason)`.
pub fn condition_key<C: Condition>(c: &C) -> (&str, &str) {
    (c.status(), c.reason())
}

fn order_key<C: Condition>(c: &C) -> (usize, &str, &str) {
    (c.rank(), c.status(), c.reason())
}

fn sorted<C: Condition>(list: &[C]) -> Vec<&C> {
    let mut v: Vec<&C> = list.iter().collect();
    v.sort_by(|a, b| order_key(*a).cmp(&order_key(*b)));
    v
}

/// Whether both lists hold the same set of `(status, reason)` keys (what moves `lastTransitionTime`).
pub fn same_keys<C: Condition>(a: &[C], b: &[C]) -> bool {
    a.len() == b.len()
        && sorted(a)
            .iter()
            .zip(sorted(b))
            .all(|(x, y)| condition_key(*x) == condition_key(y))
}

/// Whether both lists say the same thing: same keys, and equal messages and scopes per key.
pub fn same_conditions<C: Condition>(a: &[C], b: &[C]) -> bool {
    same_keys(a, b)
        && sorted(a).iter().zip(sorted(b)).all(|(x, y)| {
            x.message().unwrap_or("") == y.message().unwrap_or("") && x.scope() == y.scope()
        })
}

/// The `(status, reason)` keys of a list, for metrics and logs.
pub fn condition_keys<C: Condition>(list: &[C]) -> BTreeSet<(String, String)> {
    list.iter()
        .map(|c| (c.status().to_string(), c.reason().to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::conditions::storage_condition;
    use crate::{StorageHealthCondition, VolumeHealthCondition};

    fn v(status: &str, reason: &str, message: Option<&str>) -> VolumeHealthCondition {
        VolumeHealthCondition {
            status: status.into(),
            reason: reason.into(),
            message: message.map(Into::into),
        }
    }

    #[test]
    fn order_is_ignored_messages_are_not() {
        let a = [v("Degraded", "A", None), v("Inaccessible", "B", Some("m"))];
        let b = [
            v("Inaccessible", "B", Some("m")),
            v("Degraded", "A", Some("")),
        ];
        assert!(same_conditions(&a, &b), "an empty message is no message");
        let c = [
            v("Inaccessible", "B", Some("other")),
            v("Degraded", "A", None),
        ];
        assert!(same_keys(&a, &c));
        assert!(!same_conditions(&a, &c));
        assert!(!same_keys(&a, &a[..1]));
    }

    #[test]
    fn storage_scope_is_part_of_the_content_not_of_the_key() {
        let a = storage_condition("StorageDegraded", "Slow", Some("ReadWriteMany"));
        let b = StorageHealthCondition {
            access_mode: None,
            ..a.clone()
        };
        assert!(same_keys(
            std::slice::from_ref(&a),
            std::slice::from_ref(&b)
        ));
        assert!(!same_conditions(&[a], &[b]));
    }
}
