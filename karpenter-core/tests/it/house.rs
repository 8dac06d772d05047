//! House rules of the crate's source tree: the top-level modules of `src/` depend on each other
//! without a cycle. A module depends on another when its non-test code names `crate::<other>`
//! (in a `use`, a path or a `crate::{..}` group); test code (`tests.rs`, `*_tests.rs` and
//! `#[cfg(test)]` items) is not counted, and neither are comments.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).expect("readable source directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Whether a file holds only tests.
fn is_test_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    name == "tests.rs" || name.ends_with("_tests.rs")
}

/// `text` without line comments (doc comments included).
fn strip_comments(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` without the items marked `#[cfg(test)]`: each ends at its first `;` when that comes
/// before any `{`, otherwise at the brace that closes its first block.
fn strip_test_items(text: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    while let Some(found) = text[pos..].find(MARK) {
        let start = pos + found;
        out.push_str(&text[pos..start]);
        let mut i = start + MARK.len();
        while i < bytes.len() && bytes[i] != b'{' && bytes[i] != b';' {
            i += 1;
        }
        if i < bytes.len() && bytes[i] == b'{' {
            let mut depth = 0usize;
            while i < bytes.len() {
                match bytes[i] {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        pos = (i + 1).min(text.len());
    }
    out.push_str(&text[pos..]);
    out
}

/// The leading identifier of `s`.
fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first path segments named after `crate::` in `code`, including every top-level entry of
/// a `crate::{..}` group.
fn crate_references(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0usize;
            let mut entry_start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        entry_start = true;
                        continue;
                    }
                    c if c.is_whitespace() => continue,
                    _ => {}
                }
                if entry_start && depth == 0 {
                    out.insert(ident(&group[j..]).to_string());
                }
                entry_start = false;
            }
        } else {
            out.insert(ident(rest).to_string());
        }
    }
    out
}

/// The dependency graph between the top-level modules of `src/`.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut modules = BTreeSet::new();
    for path in rust_files(src) {
        let rel = path.strip_prefix(src).expect("under src");
        let first = rel.components().next().expect("non-empty path");
        let name = first.as_os_str().to_string_lossy();
        let module = name.trim_end_matches(".rs").to_string();
        if module == "lib" {
            continue;
        }
        modules.insert(module.clone());
        if is_test_file(&path) {
            continue;
        }
        let text = fs::read_to_string(&path).expect("readable source file");
        let code = strip_test_items(&strip_comments(&text));
        graph
            .entry(module.clone())
            .or_default()
            .extend(crate_references(&code).into_iter().filter(|r| *r != module));
    }
    for deps in graph.values_mut() {
        deps.retain(|d| modules.contains(d));
    }
    graph
}

/// A cycle of `graph` (its modules in order, the first repeated at the end), if any.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == node) {
            let mut cycle = path[i..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, done, path) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut done, &mut Vec::new()))
}

#[test]
fn top_level_modules_have_no_dependency_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = module_graph(&src);
    assert!(graph.contains_key("scheduling") && graph.contains_key("model"));
    if let Some(cycle) = find_cycle(&graph) {
        panic!("module cycle: {}", cycle.join(" -> "));
    }
}

#[test]
fn the_scanner_sees_groups_paths_and_skips_test_code() {
    let code = strip_test_items(&strip_comments(
        "use crate::{api::{A, B}, model, requirements::Requirement};\n\
         // crate::volumes in a comment\n\
         fn f() { crate::taints::x(); }\n\
         #[cfg(test)]\nmod tests { use crate::state; }\n\
         #[cfg(test)]\nuse crate::lifecycle;\n",
    ));
    let refs: Vec<String> = crate_references(&code).into_iter().collect();
    assert_eq!(refs, ["api", "model", "requirements", "taints"]);

    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(
        find_cycle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
}
