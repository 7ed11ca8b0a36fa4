//! `model` holds pure rules over CSI messages: it must build without a gRPC or
//! HTTP transport. This walks the workspace's `Cargo.lock` from
//! `volhealth-model` and refuses tonic, hyper and h2 anywhere below it (the lock
//! lists a superset of what a build of the crate uses, so this errs on the
//! strict side).
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// Crates that make up a network transport.
const TRANSPORT: &[&str] = &["tonic", "hyper", "h2"];

/// (name, version) of a locked package.
type Key = (String, String);

/// Every locked package with the (unresolved) dependency entries of its lock record.
fn lock() -> BTreeMap<Key, Vec<String>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.lock");
    let text = std::fs::read_to_string(&path).expect("read Cargo.lock");
    let mut packages = BTreeMap::new();
    for record in text.split("[[package]]").skip(1) {
        let mut name = None;
        let mut version = None;
        let mut deps = Vec::new();
        let mut in_deps = false;
        for line in record.lines().map(str::trim) {
            if in_deps {
                if line.starts_with(']') {
                    in_deps = false;
                } else {
                    deps.push(line.trim_end_matches(',').trim_matches('"').to_string());
                }
            } else if let Some(v) = line.strip_prefix("name = ") {
                name = Some(v.trim_matches('"').to_string());
            } else if let Some(v) = line.strip_prefix("version = ") {
                version = Some(v.trim_matches('"').to_string());
            } else if line == "dependencies = [" {
                in_deps = true;
            }
        }
        let key = (
            name.expect("package name"),
            version.expect("package version"),
        );
        packages.insert(key, deps);
    }
    packages
}

/// The lock keys of `name` and everything it depends on, directly or not.
fn closure(name: &str) -> BTreeSet<Key> {
    let packages = lock();
    let resolve = |entry: &str| -> Key {
        let mut parts = entry.split(' ');
        let dep = parts.next().unwrap_or_default();
        match parts.next() {
            Some(version) => (dep.to_string(), version.to_string()),
            None => packages
                .keys()
                .find(|(n, _)| n == dep)
                .cloned()
                .unwrap_or_else(|| panic!("{dep} is not in Cargo.lock")),
        }
    };
    let mut seen = BTreeSet::new();
    let mut stack = vec![resolve(name)];
    while let Some(key) = stack.pop() {
        if !seen.insert(key.clone()) {
            continue;
        }
        for entry in packages.get(&key).into_iter().flatten() {
            stack.push(resolve(entry));
        }
    }
    seen
}

fn transport_in(name: &str) -> Vec<String> {
    closure(name)
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| {
            TRANSPORT
                .iter()
                .any(|t| n == t || n.starts_with(&format!("{t}-")))
        })
        .collect()
}

#[test]
fn model_and_its_messages_depend_on_no_transport() {
    for krate in ["volhealth-model", "volhealth-csi-proto"] {
        let found = transport_in(krate);
        assert!(
            found.is_empty(),
            "{krate} depends on a transport ({found:?}); CSI messages come from \
             volhealth-csi-proto, the transport stays in volhealth-csi"
        );
    }
}

/// The walk must see a transport where there is one, or the test above proves nothing.
#[test]
fn the_walk_finds_the_transport_of_the_csi_crate() {
    let found = transport_in("volhealth-csi");
    assert!(found.iter().any(|n| n == "tonic"), "{found:?}");
    assert!(found.iter().any(|n| n == "hyper"), "{found:?}");
}
