//! Checks that a crate's source files import one another in one direction only.
//!
//! Every crate calls [`assert_acyclic`] from a unit test with its manifest directory. The
//! checker reads `src/**/*.rs` as text and finds the paths each file names: `crate::…`,
//! `super::…` (from inline modules too), `self::…` and `child::…` for the modules the file
//! declares with `mod child;`, in `use` trees with nested groups as well as in expressions.
//! Each path is resolved to the deepest module file it reaches. Two graphs are checked:
//!
//! - **files**: file A → file B when A names something of B. A file naming one of its own
//!   ancestors (a child using its parent's items, anything using the crate root's re-exports)
//!   is the ordinary facade pattern and is not an edge; every other circle is refused.
//! - **top-level modules**: the same edges collapsed onto `src/<module>`, so that layers
//!   (`http` → `verbs` → `storage`) stay one-way even where no two files form a circle.
//!
//! It is a reader of text, not a compiler: macros that build paths, `#[path]` attributes and
//! glob imports of re-exports are not followed. Comments, string and character literals are
//! skipped.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

/// A module's path inside its crate: `[]` is the crate root, `["table", "cells"]` is
/// `src/table/cells.rs` (or `src/table/cells/mod.rs`).
pub type ModPath = Vec<String>;

/// What went wrong reading a crate or what the graph holds.
#[derive(Debug)]
pub enum Error {
    /// A source file or directory could not be read.
    Read {
        /// What was read.
        path: PathBuf,
        /// Why it failed.
        source: std::io::Error,
    },
    /// Files name one another around a circle.
    FileCircle(Vec<String>),
    /// Top-level modules name one another around a circle.
    ModuleCircle(Vec<String>),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Read { path, source } => write!(f, "reading {}: {source}", path.display()),
            Error::FileCircle(c) => write!(f, "files import each other: {}", c.join(" → ")),
            Error::ModuleCircle(c) => {
                write!(f, "top-level modules import each other: {}", c.join(" → "))
            }
        }
    }
}

impl std::error::Error for Error {}

/// The import graph of one crate's files.
#[derive(Debug, Default)]
pub struct Graph {
    /// Every module file, by module path.
    pub files: BTreeMap<ModPath, PathBuf>,
    /// File → the files it names (ancestors left out).
    pub edges: BTreeMap<ModPath, BTreeSet<ModPath>>,
}

impl Graph {
    /// Reads `<manifest_dir>/src`.
    pub fn of_crate(manifest_dir: &Path) -> Result<Graph, Error> {
        let src = manifest_dir.join("src");
        let mut paths = Vec::new();
        rust_files(&src, &mut paths)?;
        let mut sources = BTreeMap::new();
        for path in paths {
            let Some(module) = module_path(&src, &path) else {
                continue;
            };
            let text = std::fs::read_to_string(&path).map_err(|source| Error::Read {
                path: path.clone(),
                source,
            })?;
            sources.insert(module, (path, text));
        }
        Ok(Graph::from_sources(
            sources.into_iter().map(|(m, (p, t))| (m, p, t)),
        ))
    }

    /// Builds the graph from (module path, file path, source text) triples.
    pub fn from_sources(sources: impl IntoIterator<Item = (ModPath, PathBuf, String)>) -> Graph {
        let mut graph = Graph::default();
        let mut texts = Vec::new();
        for (module, path, text) in sources {
            graph.files.insert(module.clone(), path);
            texts.push((module, text));
        }
        for (module, text) in texts {
            let named = named_modules(&module, &text, &graph.files);
            let to = graph.edges.entry(module.clone()).or_default();
            for target in named {
                let ancestor_or_self = module.starts_with(&target);
                if !ancestor_or_self {
                    to.insert(target);
                }
            }
        }
        graph
    }

    /// A circle between files, as the module paths around it.
    pub fn file_circle(&self) -> Option<Vec<String>> {
        find_cycle(&self.edges).map(|c| c.iter().map(display).collect())
    }

    /// A circle between top-level modules.
    pub fn module_circle(&self) -> Option<Vec<String>> {
        let mut top: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, tos) in &self.edges {
            let Some(a) = from.first() else { continue };
            let entry = top.entry(a.clone()).or_default();
            for to in tos {
                if let Some(b) = to.first()
                    && b != a
                {
                    entry.insert(b.clone());
                }
            }
        }
        find_cycle(&top).map(|c| c.into_iter().collect())
    }
}

/// Defines, in the crate it is written in, the test
/// `source_files_import_one_another_in_one_direction`: no two source files of the crate, and no
/// two of its top-level modules, import each other. Write it once in the crate root, under
/// `#[cfg(test)]` (this crate is a dev-dependency).
#[macro_export]
macro_rules! imports_run_one_way {
    () => {
        /// No two source files of this crate, and no two of its top-level modules, import each other.
        #[test]
        fn source_files_import_one_another_in_one_direction() {
            assert!($crate::assert_acyclic(env!("CARGO_MANIFEST_DIR")) > 0);
        }
    };
}

/// Panics with the circle when the crate at `manifest_dir` has one, between files or between
/// top-level modules; returns the number of files read.
pub fn assert_acyclic(manifest_dir: &str) -> usize {
    match check(Path::new(manifest_dir)) {
        Ok(n) => n,
        Err(e) => panic!("{manifest_dir}: {e}"),
    }
}

/// Checks the crate at `manifest_dir`; the number of files read, or the first circle found.
pub fn check(manifest_dir: &Path) -> Result<usize, Error> {
    let graph = Graph::of_crate(manifest_dir)?;
    if let Some(c) = graph.file_circle() {
        return Err(Error::FileCircle(c));
    }
    if let Some(c) = graph.module_circle() {
        return Err(Error::ModuleCircle(c));
    }
    Ok(graph.files.len())
}

fn display(m: &ModPath) -> String {
    if m.is_empty() {
        "crate".to_string()
    } else {
        m.join("::")
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Error> {
    let entries = std::fs::read_dir(dir).map_err(|source| Error::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    for entry in entries {
        let path = entry
            .map_err(|source| Error::Read {
                path: dir.to_path_buf(),
                source,
            })?
            .path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The module path of a file under `src` (`None` for a binary target under `src/bin`).
fn module_path(src: &Path, file: &Path) -> Option<ModPath> {
    let rel = file.strip_prefix(src).ok()?;
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?;
    match (parts.is_empty(), stem) {
        (true, "lib" | "main") => {}
        (_, "mod") => {}
        _ => parts.push(stem.to_string()),
    }
    Some(parts)
}

/// The source with comments, string literals and character literals blanked (so their text
/// names nothing), lengths kept.
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(if b[i] == '\n' { '\n' } else { ' ' });
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !b
                .get(i.wrapping_sub(1))
                .is_some_and(|p| p.is_alphanumeric() || *p == '_')
        {
            // A raw string: r"…" or r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                match b.get(j) {
                    None => break,
                    Some('"') if (1..=hashes).all(|k| b.get(j + k) == Some(&'#')) => {
                        j += 1 + hashes;
                        break;
                    }
                    _ => j += 1,
                }
            }
            for ch in &b[i..j.min(b.len())] {
                out.push(if *ch == '\n' { '\n' } else { ' ' });
            }
            i = j;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(if b[i] == '\n' { '\n' } else { ' ' });
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\''), not a lifetime ('a).
            let close = if next == Some('\\') {
                (i + 2..b.len().min(i + 12)).find(|&k| b[k] == '\'' && k > i + 2)
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(end) => {
                    for _ in i..=end {
                        out.push(' ');
                    }
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// What follows the keyword `mod` in `rest`: the module's name and the first character after
/// it (`{` opens an inline module, `;` names a file), when a name is there.
fn declared_module(rest: &str) -> Option<(String, Option<char>)> {
    let name: String = rest
        .trim_start()
        .chars()
        .take_while(|c| is_ident(*c))
        .collect();
    let after = rest.trim_start()[name.len()..].trim_start();
    (!name.is_empty()).then(|| (name, after.chars().next()))
}

/// The module files `text` (the file of `module`) names.
fn named_modules(
    module: &ModPath,
    text: &str,
    files: &BTreeMap<ModPath, PathBuf>,
) -> BTreeSet<ModPath> {
    let code: Vec<char> = code_only(text).chars().collect();
    let children = declared_children(&code);
    let mut found = BTreeSet::new();
    // Inline `mod name {` blocks: (brace depth at which it closes, name).
    let mut inline: Vec<(usize, String)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < code.len() {
        let c = code[i];
        if c == '{' {
            depth += 1;
            i += 1;
            continue;
        }
        if c == '}' {
            if inline.last().is_some_and(|(d, _)| *d == depth) {
                inline.pop();
            }
            depth = depth.saturating_sub(1);
            i += 1;
            continue;
        }
        if !is_ident(c) || (i > 0 && (is_ident(code[i - 1]) || preceded_by_path_sep(&code, i))) {
            i += 1;
            continue;
        }
        let word_end = (i..code.len())
            .find(|&k| !is_ident(code[k]))
            .unwrap_or(code.len());
        let word: String = code[i..word_end].iter().collect();
        if word == "mod" {
            // `mod name {` opens an inline module.
            let rest: String = code[word_end..code.len().min(word_end + 80)]
                .iter()
                .collect();
            if let Some((name, Some('{'))) = declared_module(&rest) {
                inline.push((depth + 1, name));
            }
            i = word_end;
            continue;
        }
        let here: ModPath = module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(_, n)| n.clone()))
            .collect();
        let base: Option<ModPath> = match word.as_str() {
            "crate" => Some(Vec::new()),
            "self" => Some(here.clone()),
            "super" => {
                let mut p = here.clone();
                p.pop();
                Some(p)
            }
            w if inline.is_empty() && children.contains(w) => {
                let mut p = here.clone();
                p.push(w.to_string());
                Some(p)
            }
            _ => None,
        };
        let Some(mut base) = base else {
            i = word_end;
            continue;
        };
        let mut j = word_end;
        if word != "crate" && word != "self" && word != "super" {
            // `child::…`: the child itself is the first segment, already in `base`.
            if !starts_path_sep(&code, j) {
                i = j;
                continue;
            }
        }
        // Further `super::` segments.
        while starts_path_sep(&code, j) && word_at(&code, j + 2) == "super" {
            base.pop();
            j += 2 + "super".len();
        }
        j = resolve_tree(&code, j, base, files, &mut found);
        i = j.max(word_end);
    }
    found.remove(module);
    found
}

fn preceded_by_path_sep(code: &[char], i: usize) -> bool {
    i >= 2 && code[i - 1] == ':' && code[i - 2] == ':'
}

fn starts_path_sep(code: &[char], j: usize) -> bool {
    code.get(j) == Some(&':') && code.get(j + 1) == Some(&':')
}

fn word_at(code: &[char], j: usize) -> String {
    code[j.min(code.len())..]
        .iter()
        .take_while(|c| is_ident(**c))
        .collect()
}

/// Follows `::seg::seg…` or `::{a::b, c}` after `prefix`, recording the deepest module file
/// each branch reaches; returns where the path ends.
fn resolve_tree(
    code: &[char],
    mut j: usize,
    mut prefix: ModPath,
    files: &BTreeMap<ModPath, PathBuf>,
    found: &mut BTreeSet<ModPath>,
) -> usize {
    let mut deepest = deepest_file(&prefix, files);
    loop {
        if !starts_path_sep(code, j) {
            break;
        }
        j += 2;
        while code.get(j).is_some_and(|c| c.is_whitespace()) {
            j += 1;
        }
        if code.get(j) == Some(&'{') {
            j += 1;
            loop {
                while code.get(j).is_some_and(|c| c.is_whitespace() || *c == ',') {
                    j += 1;
                }
                match code.get(j) {
                    None => return j,
                    Some('}') => return j + 1,
                    _ => {}
                }
                let seg = word_at(code, j);
                if seg.is_empty() {
                    // `*` or something else this reader does not follow.
                    j += 1;
                    continue;
                }
                let mut branch = prefix.clone();
                let end = j + seg.len();
                if seg != "self" {
                    branch.push(seg);
                }
                j = resolve_tree(code, end, branch, files, found);
            }
        }
        let seg = word_at(code, j);
        if seg.is_empty() {
            break;
        }
        j += seg.len();
        prefix.push(seg);
        if let Some(d) = deepest_file(&prefix, files)
            && d.len() == prefix.len()
        {
            deepest = Some(d);
        }
    }
    if let Some(d) = deepest {
        found.insert(d);
    }
    j
}

/// The deepest module file along `path`.
fn deepest_file(path: &ModPath, files: &BTreeMap<ModPath, PathBuf>) -> Option<ModPath> {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| files.contains_key(p))
}

/// The modules a file declares with `mod name;` (files of their own).
fn declared_children(code: &[char]) -> BTreeSet<String> {
    let text: String = code.iter().collect();
    let mut out = BTreeSet::new();
    for (at, _) in text.match_indices("mod ") {
        if at > 0 && text[..at].chars().next_back().is_some_and(is_ident) {
            continue;
        }
        let rest = &text[at + 4..];
        if let Some((name, Some(';'))) = declared_module(rest) {
            out.insert(name);
        }
    }
    out
}

/// A cycle in `edges`, as the nodes around it, if there is one.
fn find_cycle<N: Ord + Clone>(edges: &BTreeMap<N, BTreeSet<N>>) -> Option<Vec<N>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit<N: Ord + Clone>(
        node: &N,
        edges: &BTreeMap<N, BTreeSet<N>>,
        marks: &mut BTreeMap<N, Mark>,
        path: &mut Vec<N>,
    ) -> Option<Vec<N>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let start = path.iter().position(|n| n == node).unwrap_or(0);
                let mut cycle = path[start..].to_vec();
                cycle.push(node.clone());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node.clone(), Mark::Open);
        path.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, edges, marks, path) {
                return Some(c);
            }
        }
        path.pop();
        marks.insert(node.clone(), Mark::Done);
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

#[cfg(test)]
mod tests;
