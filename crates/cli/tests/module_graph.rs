//! Every crate's modules import one another in one direction only: this reads every
//! `crate::MODULE` path in each workspace crate's `src/**/*.rs` and fails on any cycle between
//! its top-level modules.
#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail by panicking

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level module a source file belongs to (`src/table/cells.rs` is `table`).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (name != "lib").then(|| name.to_string())
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every module named after `crate::`, including those in `use crate::{a, b::c}` groups.
fn imported(code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        let group = if let Some(inner) = rest.strip_prefix('{') {
            &inner[..inner.find('}').unwrap_or(inner.len())]
        } else {
            rest
        };
        // In a group, every comma-separated item's first segment; otherwise the first segment.
        let items: Vec<&str> = if rest.starts_with('{') {
            group.split(',').collect()
        } else {
            vec![group]
        };
        for item in items {
            let word: String = item
                .trim_start()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if modules.contains(&word) {
                found.insert(word);
            }
        }
    }
    found
}

/// The import graph of `src`: module → modules it names.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(src, f)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let Some(from) = module_of(src, f) else {
            continue;
        };
        let source = std::fs::read_to_string(f).expect("read source");
        // Doc links (`[`crate::x`]`) name modules without importing them.
        let code: String = source
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        let to = edges.entry(from.clone()).or_default();
        to.extend(imported(&code, &modules).into_iter().filter(|m| *m != from));
    }
    edges
}

/// A cycle in `edges`, as the path of modules around it, if there is one.
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let start = path.iter().position(|n| n == node).unwrap_or(0);
                let mut cycle = path[start..].to_vec();
                cycle.push(node.to_string());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node.to_string(), Mark::Open);
        path.push(node.to_string());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, edges, marks, path) {
                return Some(c);
            }
        }
        path.pop();
        marks.insert(node.to_string(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in edges.keys() {
        if let Some(c) = visit(node, edges, &mut marks, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

#[test]
fn modules_import_each_other_in_one_direction() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the crates directory")
        .to_path_buf();
    let apiserver = graph(&crates.join("apiserver").join("src"));
    assert!(
        apiserver.contains_key("server") && apiserver["server"].contains("rest"),
        "the parser found no server → rest import: {apiserver:?}"
    );
    let mut checked = 0;
    for entry in std::fs::read_dir(&crates).expect("read the crates directory") {
        let src = entry.expect("dir entry").path().join("src");
        if !src.is_dir() {
            continue;
        }
        let edges = graph(&src);
        if let Some(cycle) = find_cycle(&edges) {
            panic!(
                "import cycle between modules of {}: {}",
                src.display(),
                cycle.join(" → ")
            );
        }
        checked += 1;
    }
    assert!(
        checked >= 8,
        "only {checked} crates found under {}",
        crates.display()
    );
}

#[test]
fn the_checker_sees_cycles_and_grouped_imports() {
    let modules: BTreeSet<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    let found = imported(
        "use crate::{a::X, b};\nfn f() { crate::c::g(); crate::Error::x; }",
        &modules,
    );
    assert_eq!(found, modules);
    let mut edges = BTreeMap::new();
    edges.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    edges.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    edges.insert("c".to_string(), BTreeSet::new());
    assert_eq!(find_cycle(&edges), None);
    edges.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(
        find_cycle(&edges),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}
