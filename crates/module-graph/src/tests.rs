use super::*;

fn graph(files: &[(&str, &str)]) -> Graph {
    Graph::from_sources(files.iter().map(|(m, text)| {
        let module: ModPath = if m.is_empty() {
            Vec::new()
        } else {
            m.split("::").map(str::to_string).collect()
        };
        (module, PathBuf::from(format!("{m}.rs")), text.to_string())
    }))
}

fn edges(g: &Graph, from: &str) -> Vec<String> {
    let module: ModPath = from.split("::").map(str::to_string).collect();
    g.edges
        .get(&module)
        .map(|s| s.iter().map(|m| m.join("::")).collect())
        .unwrap_or_default()
}

#[test]
fn siblings_naming_each_other_through_super_are_a_file_circle() {
    let g = graph(&[
        ("", "mod schema;"),
        ("schema", "mod pod; mod volume;"),
        ("schema::pod", "static A: X = m(&super::volume::VOLUME);"),
        ("schema::volume", "static B: X = m(&super::pod::POD);"),
    ]);
    assert_eq!(edges(&g, "schema::pod"), vec!["schema::volume"]);
    let circle = g.file_circle().expect("a circle");
    assert_eq!(circle, vec!["schema::pod", "schema::volume", "schema::pod"]);
    // Within one top-level module: no module circle.
    assert_eq!(g.module_circle(), None);
}

#[test]
fn parents_and_the_crate_root_are_not_edges() {
    let g = graph(&[
        ("", "pub use a::Thing; mod a; mod b;"),
        ("a", "use crate::Error; use super::b::Helper; mod inner;"),
        ("a::inner", "use super::Thing; use super::super::b::Other;"),
        ("b", "pub struct Helper;"),
    ]);
    assert_eq!(edges(&g, "a"), vec!["b"]);
    assert_eq!(edges(&g, "a::inner"), vec!["b"]);
    assert_eq!(g.file_circle(), None);
}

#[test]
fn nested_groups_self_and_declared_children_are_followed() {
    let g = graph(&[
        ("", "mod http; mod store; mod wire;"),
        (
            "http",
            "use crate::{store::{Store, rows::Row}, wire::{self, Codec}}; mod verbs;\nfn f() { verbs::get(); }",
        ),
        ("http::verbs", ""),
        ("store", "mod rows;"),
        ("store::rows", ""),
        ("wire", ""),
    ]);
    assert_eq!(
        edges(&g, "http"),
        vec!["http::verbs", "store", "store::rows", "wire"]
    );
}

#[test]
fn comments_strings_and_characters_name_nothing() {
    let g = graph(&[
        ("", "mod a; mod b;"),
        (
            "a",
            "// crate::b::X\n/* crate::b::Y */ const S: &str = \"crate::b::Z\"; const R: &str = r#\"crate::b::W\"#; const C: char = '\"'; fn f<'x>() {}",
        ),
        ("b", ""),
    ]);
    assert_eq!(edges(&g, "a"), Vec::<String>::new());
}

#[test]
fn super_in_an_inline_module_is_the_file_itself() {
    let g = graph(&[
        ("", "mod a; mod b;"),
        (
            "a",
            "fn x() {}\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::b::Y;\n}",
        ),
        ("b", ""),
    ]);
    assert_eq!(edges(&g, "a"), vec!["b"]);
}

#[test]
fn layers_that_turn_back_are_a_module_circle_without_a_file_circle() {
    let g = graph(&[
        ("", "mod http; mod store;"),
        ("http", "mod a; mod b;"),
        ("http::a", "use crate::store::x::X;"),
        ("http::b", ""),
        ("store", "mod x; mod y;"),
        ("store::x", ""),
        ("store::y", "use crate::http::b::B;"),
    ]);
    assert_eq!(g.file_circle(), None);
    let circle = g.module_circle().expect("a module circle");
    assert_eq!(circle.first(), circle.last());
    assert_eq!(circle.len(), 3);
}

#[test]
fn this_crate_has_no_circle() {
    assert!(assert_acyclic(env!("CARGO_MANIFEST_DIR")) >= 2);
}
