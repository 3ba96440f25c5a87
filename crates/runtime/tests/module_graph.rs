//! The runtime crate's modules form no import circle (issue: one pipeline over a subject):
//! every `crate::MODULE` path outside comments and outside a module's own unit tests is an
//! edge from the file's top-level module to `MODULE`, and the graph of those edges has no
//! cycle. A step that needs something of a later one is handed it (as the policy resolver
//! is handed a runner), never reaches back through an import.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, recursively, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

/// The top-level module a file of `src` belongs to (`step/gate.rs` → `step`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("file under src");
    let first = rel.components().next().expect("a component");
    let name = first.as_os_str().to_string_lossy();
    name.strip_suffix(".rs").unwrap_or(&name).to_string()
}

/// The source without line comments and without a trailing `#[cfg(test)] mod tests`.
fn without_comments_and_tests(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The modules `code` names through `crate::NAME`.
fn imports(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().next_back();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `hcp_gate::crate::` never occurs; `mycrate::` is not ours
        }
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.insert(name);
        }
    }
    out
}

/// A cycle of `graph`, if it has one (depth-first search, colours).
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Colour {
        White,
        Grey,
        Black,
    }
    fn visit(
        v: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        colour: &mut BTreeMap<String, Colour>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        colour.insert(v.to_string(), Colour::Grey);
        path.push(v.to_string());
        for w in graph.get(v).into_iter().flatten() {
            match colour.get(w).copied().unwrap_or(Colour::White) {
                Colour::Grey => {
                    let start = path.iter().position(|p| p == w).expect("on the path");
                    let mut cycle = path[start..].to_vec();
                    cycle.push(w.clone());
                    return Some(cycle);
                }
                Colour::White => {
                    if let Some(c) = visit(w, graph, colour, path) {
                        return Some(c);
                    }
                }
                Colour::Black => {}
            }
        }
        path.pop();
        colour.insert(v.to_string(), Colour::Black);
        None
    }
    let mut colour = BTreeMap::new();
    for v in graph.keys() {
        if colour.get(v).copied().unwrap_or(Colour::White) == Colour::White
            && let Some(c) = visit(v, graph, &mut colour, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

#[test]
fn the_runtime_crate_has_no_import_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in rust_files(&src) {
        let module = module_of(&src, &file);
        if module == "lib" || module == "tests" {
            continue; // the crate root re-exports; `src/tests` are unit tests
        }
        let text = std::fs::read_to_string(&file).expect("readable source");
        let edges = graph.entry(module.clone()).or_default();
        for target in imports(&without_comments_and_tests(&text)) {
            if target != module {
                edges.insert(target);
            }
        }
    }
    assert!(
        graph.len() > 20,
        "the scan found {} modules: is src/ where it was?",
        graph.len()
    );
    if let Some(cycle) = find_cycle(&graph) {
        panic!("import circle in crates/runtime: {}", cycle.join(" → "));
    }
}

#[test]
fn the_scan_sees_a_circle_when_there_is_one() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, b) in [("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")] {
        graph.entry(a.into()).or_default().insert(b.into());
    }
    assert_eq!(
        find_cycle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    assert_eq!(
        imports(&without_comments_and_tests(
            "use crate::x::Y; // crate::z\nfn f() { crate::w(); }\n#[cfg(test)]\nmod tests { use crate::v; }"
        )),
        ["w", "x"].into_iter().map(String::from).collect()
    );
}
