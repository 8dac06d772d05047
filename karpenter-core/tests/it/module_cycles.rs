//! The module-cycle checker of the house rules: no import circle between the modules of a
//! crate, at any depth. Used by the `house` tests of `karpenter-core`, `karpenter-fake` and
//! `karpenter-aws` (the latter two include this file with `#[path]`); std only.
//!
//! # The graph
//!
//! Every non-test `.rs` file under a crate's `src/` is one module (`lib.rs` is the crate root,
//! `a/mod.rs` and `a.rs` are `a`, `a/b.rs` is `a::b`); test files (`tests.rs`, `*_tests.rs`)
//! and `#[cfg(test)]` items are left out, and so are comments and string and char literals.
//! A module depends on the module each of these paths names:
//!
//! - `crate::a::b::..` (in a `use`, in code, or as an entry of a `crate::{..}` group);
//! - `super::..` and `self::..`, resolved against the module the path is written in (a file's
//!   module and the inline `mod x { .. }` blocks around the path);
//! - `x::..` where `x` is a child module of that module (`use methods::Command;` in
//!   `disruption/mod.rs`).
//!
//! A path names the longest of its prefixes that is a module; when the segment after it is a
//! name that module imports with a `use`, the path names the module the import comes from
//! instead (`crate::FakeCloudProvider` names `provider` when `lib.rs` has
//! `pub use provider::FakeCloudProvider;`), so a re-export is not mistaken for a dependency on
//! the re-exporting module.
//!
//! **The rule for parents and children:** a dependency of a module on one of its ancestors
//! (itself included) is not counted. An ancestor's file is where its children's shared types
//! and helpers live and where they are re-exported; children reaching them with `super::` is
//! the ordinary Rust layout, not a circle. A parent's dependencies on its children do count,
//! and so does everything else, siblings and cousins included.
//!
//! # Any depth
//!
//! The graph is checked at every depth `d`: each module is collapsed into its ancestor at
//! depth `d` (`disruption::methods::drift` is `disruption` at depth 1 and
//! `disruption::methods` at depth 2), dependencies inside one collapsed module are dropped,
//! and what is left must have no cycle. Depth 1 is the top-level rule (no circle between
//! `scheduling`, `model`, `state`, ..); the deepest depth is file against file.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};

/// A module path from the crate root (the root is the empty path).
type Module = Vec<String>;

/// The module dependency graph of one crate (see the [module documentation](self)).
pub struct ModuleGraph {
    /// Every module.
    modules: BTreeSet<Module>,
    /// For each module, the modules it depends on and, for each, where (the first place found).
    edges: BTreeMap<Module, BTreeMap<Module, String>>,
}

impl ModuleGraph {
    /// The graph of the crate whose source directory is `src`.
    pub fn of_dir(src: &Path) -> ModuleGraph {
        let files: Vec<(String, String)> = rust_files(src)
            .into_iter()
            .map(|path| {
                let rel = path.strip_prefix(src).expect("under src");
                let rel = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/");
                let text = fs::read_to_string(&path).expect("readable source file");
                (rel, text)
            })
            .collect();
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        ModuleGraph::of_sources(&refs)
    }

    /// The graph of a crate given as `(path under src/, text)` pairs.
    pub fn of_sources(files: &[(&str, &str)]) -> ModuleGraph {
        let files: Vec<(&str, Module, &str)> = files
            .iter()
            .filter(|(path, _)| !is_test_file(path) && !path.starts_with("bin/"))
            .map(|&(path, text)| (path, module_of(path), text))
            .collect();
        let modules: BTreeSet<Module> = files.iter().map(|(_, m, _)| m.clone()).collect();
        let scans: Vec<(&str, Module, FileScan)> = files
            .iter()
            .map(|(path, module, text)| (*path, module.clone(), scan(module, text, &modules)))
            .collect();
        let mut imports: BTreeMap<Module, BTreeMap<String, Vec<String>>> = BTreeMap::new();
        for (_, _, file) in &scans {
            for (module, name, target) in &file.imports {
                imports
                    .entry(module.clone())
                    .or_default()
                    .entry(name.clone())
                    .or_insert_with(|| target.clone());
            }
        }
        let mut edges: BTreeMap<Module, BTreeMap<Module, String>> = BTreeMap::new();
        for (path, module, file) in &scans {
            let out = edges.entry(module.clone()).or_default();
            for (target, line) in &file.references {
                let Some(to) = resolve(target, &modules, &imports) else {
                    continue;
                };
                if module.starts_with(&to) {
                    continue;
                }
                out.entry(to)
                    .or_insert_with(|| format!("src/{path}:{line} `{}`", target.join("::")));
            }
        }
        ModuleGraph { modules, edges }
    }

    /// Whether the crate has the module `name` (`a::b`; `crate` for the root).
    pub fn has_module(&self, name: &str) -> bool {
        self.modules.iter().any(|m| display(m) == name)
    }

    /// Every import circle, at every depth, one description each (empty when there is none):
    /// for each set of modules that depend on each other (a strongly connected component),
    /// its shortest cycle through its first module and where each step of it is written.
    pub fn cycles(&self) -> Vec<String> {
        let max_depth = self.modules.iter().map(Vec::len).max().unwrap_or(0);
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for depth in (1..=max_depth).rev() {
            let graph = self.collapsed(depth);
            for component in components(&graph) {
                let cycle = shortest_cycle(&graph, &component);
                if !seen.insert(cycle.clone()) {
                    continue;
                }
                let mut text = format!(
                    "cycle at depth {depth}: {}",
                    cycle.iter().map(display).collect::<Vec<_>>().join(" -> ")
                );
                for pair in cycle.windows(2) {
                    let site = &graph[&pair[0]][&pair[1]];
                    text.push_str(&format!(
                        "\n    {} -> {}: {site}",
                        display(&pair[0]),
                        display(&pair[1])
                    ));
                }
                if component.len() + 1 > cycle.len() {
                    text.push_str(&format!(
                        "\n    (all {} modules of the circle: {})",
                        component.len(),
                        component.iter().map(display).collect::<Vec<_>>().join(", ")
                    ));
                }
                out.push(text);
            }
        }
        out
    }

    /// The graph with every module collapsed into its ancestor at `depth`.
    fn collapsed(&self, depth: usize) -> BTreeMap<Module, BTreeMap<Module, String>> {
        let cut = |m: &Module| m[..m.len().min(depth)].to_vec();
        let mut graph: BTreeMap<Module, BTreeMap<Module, String>> = BTreeMap::new();
        for (from, tos) in &self.edges {
            let from = cut(from);
            for (to, site) in tos {
                let to = cut(to);
                if to != from {
                    graph
                        .entry(from.clone())
                        .or_default()
                        .entry(to)
                        .or_insert_with(|| site.clone());
                }
            }
        }
        graph
    }
}

/// The strongly connected components of `graph` with more than one module, each sorted.
fn components(graph: &BTreeMap<Module, BTreeMap<Module, String>>) -> Vec<Vec<Module>> {
    // Tarjan's algorithm, iterative: (node, index of its next successor to visit).
    let nodes: Vec<&Module> = graph.keys().collect();
    let mut index: BTreeMap<&Module, usize> = BTreeMap::new();
    let mut low: BTreeMap<&Module, usize> = BTreeMap::new();
    let mut on_stack: BTreeSet<&Module> = BTreeSet::new();
    let mut stack: Vec<&Module> = Vec::new();
    let mut out = Vec::new();
    let successors = |m: &Module| -> Vec<&Module> {
        graph.get(m).map(|s| s.keys().collect()).unwrap_or_default()
    };
    for &root in &nodes {
        if index.contains_key(root) {
            continue;
        }
        let mut work: Vec<(&Module, usize)> = vec![(root, 0)];
        while let Some(&(node, next)) = work.last() {
            if next == 0 && !index.contains_key(node) {
                let n = index.len();
                index.insert(node, n);
                low.insert(node, n);
                stack.push(node);
                on_stack.insert(node);
            }
            let succ = successors(node);
            if let Some(&to) = succ.get(next) {
                if let Some(top) = work.last_mut() {
                    top.1 += 1;
                }
                if !index.contains_key(to) {
                    work.push((to, 0));
                } else if on_stack.contains(to) {
                    let l = low[node].min(index[to]);
                    low.insert(node, l);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                let l = low[parent].min(low[node]);
                low.insert(parent, l);
            }
            if low[node] == index[node] {
                let mut component = Vec::new();
                while let Some(m) = stack.pop() {
                    on_stack.remove(m);
                    component.push(m.clone());
                    if m == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    out.push(component);
                }
            }
        }
    }
    out.sort();
    out
}

/// A shortest cycle through the first module of `component` inside it, that module first and
/// last.
fn shortest_cycle(
    graph: &BTreeMap<Module, BTreeMap<Module, String>>,
    component: &[Module],
) -> Vec<Module> {
    let start = &component[0];
    let inside: BTreeSet<&Module> = component.iter().collect();
    let mut came_from: BTreeMap<&Module, &Module> = BTreeMap::new();
    let mut queue: VecDeque<&Module> = VecDeque::from([start]);
    while let Some(node) = queue.pop_front() {
        for to in graph.get(node).into_iter().flat_map(|s| s.keys()) {
            if to == start {
                let mut cycle = vec![start.clone()];
                let mut at = node;
                while at != start {
                    cycle.push(at.clone());
                    at = came_from[at];
                }
                cycle.push(start.clone());
                cycle.reverse();
                return cycle;
            }
            if inside.contains(to) && !came_from.contains_key(to) {
                came_from.insert(to, node);
                queue.push_back(to);
            }
        }
    }
    unreachable!("a strongly connected component has a cycle through each of its modules")
}

/// `a::b`, or `crate` for the root.
fn display(module: &Module) -> String {
    if module.is_empty() {
        "crate".to_string()
    } else {
        module.join("::")
    }
}

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

/// Whether a file (its path under `src/`) holds only tests.
fn is_test_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name == "tests.rs" || name.ends_with("_tests.rs")
}

/// The module of a file (its path under `src/`).
fn module_of(path: &str) -> Module {
    let mut parts: Vec<String> = path.split('/').map(String::from).collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    let at_root = parts.is_empty() && (stem == "lib" || stem == "main");
    if stem != "mod" && !at_root {
        parts.push(stem.to_string());
    }
    parts
}

/// The module `path` names (see the [module documentation](self)), if any.
fn resolve(
    path: &[String],
    modules: &BTreeSet<Module>,
    imports: &BTreeMap<Module, BTreeMap<String, Vec<String>>>,
) -> Option<Module> {
    let mut path = path.to_vec();
    // A bound on re-export chains, against an import that names itself.
    for _ in 0..16 {
        let k = (0..=path.len())
            .rev()
            .find(|&k| modules.contains(&path[..k]))?;
        let imported = path
            .get(k)
            .and_then(|name| imports.get(&path[..k])?.get(name));
        match imported {
            Some(target) if *target != path[..=k] => {
                let mut next = target.clone();
                next.extend_from_slice(&path[k + 1..]);
                path = next;
            }
            _ => return Some(path[..k].to_vec()),
        }
    }
    None
}

/// What one file names.
struct FileScan {
    /// Every path naming something of the crate (absolute, from the root), with its line.
    references: Vec<(Vec<String>, usize)>,
    /// Every name a `use` brings in: the module it is brought into, the name, its absolute path.
    imports: Vec<(Module, String, Vec<String>)>,
}

/// The paths and imports of `text`, the file of `module`, among the crate's `modules`.
fn scan(module: &Module, text: &str, modules: &BTreeSet<Module>) -> FileScan {
    let code = strip_test_items(&blank_comments_and_literals(text));
    let toks = tokens(&code);
    let mut out = FileScan {
        references: Vec::new(),
        imports: Vec::new(),
    };
    // The inline modules around the current token: name and the brace depth inside them.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        let prev = i.checked_sub(1).map(|p| &toks[p].tok);
        match &toks[i].tok {
            Tok::Open => depth += 1,
            Tok::Close => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Ident(kw) if kw == "mod" => {
                if let (Some(Tok::Ident(name)), Some(Tok::Open)) = (
                    toks.get(i + 1).map(|t| &t.tok),
                    toks.get(i + 2).map(|t| &t.tok),
                ) {
                    inline.push((name.clone(), depth + 1));
                    i += 2;
                    continue;
                }
            }
            Tok::Ident(start)
                if prev != Some(&Tok::Sep)
                    && toks.get(i + 1).map(|t| &t.tok) == Some(&Tok::Sep) =>
            {
                let mut here = module.clone();
                here.extend(inline.iter().map(|(n, _)| n.clone()));
                let (base, next) = match start.as_str() {
                    "crate" => (Vec::new(), i + 2),
                    "self" => (here.clone(), i + 2),
                    "super" => {
                        let mut up = here.clone();
                        up.pop();
                        (up, i + 2)
                    }
                    child => {
                        let mut sub = here.clone();
                        sub.push(child.to_string());
                        if !modules.contains(&sub) {
                            i += 1;
                            continue;
                        }
                        (here.clone(), i)
                    }
                };
                let mut paths = Vec::new();
                let end = use_tree(&toks, next, base, &mut paths);
                let is_use = prev == Some(&Tok::Ident("use".to_string()));
                for (path, name) in paths {
                    if is_use && let Some(name) = name {
                        out.imports.push((here.clone(), name, path.clone()));
                    }
                    out.references.push((path, toks[i].line));
                }
                i = end.max(i + 1);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Parses the use tree (or plain path) at `toks[i..]` below `prefix`: pushes each full path
/// with the name it imports (`None` for a glob), and returns the index after the tree.
fn use_tree(
    toks: &[Token],
    mut i: usize,
    mut prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) -> usize {
    loop {
        match toks.get(i).map(|t| &t.tok) {
            Some(Tok::Ident(seg)) => {
                match seg.as_str() {
                    "super" => {
                        prefix.pop();
                    }
                    "self" => {}
                    _ => prefix.push(seg.clone()),
                }
                i += 1;
                if toks.get(i).map(|t| &t.tok) == Some(&Tok::Sep) {
                    i += 1;
                    continue;
                }
                let mut name = prefix.last().cloned();
                if let (Some(Tok::Ident(kw)), Some(Tok::Ident(alias))) =
                    (toks.get(i).map(|t| &t.tok), toks.get(i + 1).map(|t| &t.tok))
                    && kw == "as"
                {
                    name = Some(alias.clone());
                    i += 2;
                }
                out.push((prefix, name));
                return i;
            }
            Some(Tok::Open) => {
                i += 1;
                loop {
                    match toks.get(i).map(|t| &t.tok) {
                        Some(Tok::Close) => return i + 1,
                        Some(Tok::Comma) => i += 1,
                        None => return i,
                        _ => {
                            let next = use_tree(toks, i, prefix.clone(), out);
                            if next == i {
                                // Not a use tree after all: leave the group here.
                                return i;
                            }
                            i = next;
                        }
                    }
                }
            }
            Some(Tok::Star) => {
                out.push((prefix, None));
                return i + 1;
            }
            _ => {
                out.push((prefix, None));
                return i;
            }
        }
    }
}

/// A token of stripped code.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// An identifier or keyword (`r#` taken off a raw identifier).
    Ident(String),
    /// `::`.
    Sep,
    /// `{`.
    Open,
    /// `}`.
    Close,
    /// `,`.
    Comma,
    /// `*`.
    Star,
    /// Anything else (one character, or a number).
    Other,
}

/// A token and its line (from 1).
struct Token {
    tok: Tok,
    line: usize,
}

/// The tokens of `code` (comments and literals already blanked).
fn tokens(code: &str) -> Vec<Token> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < chars.len() {
        let c = chars[i];
        let tok = if c == '\n' {
            line += 1;
            i += 1;
            continue;
        } else if c.is_whitespace() {
            i += 1;
            continue;
        } else if c.is_ascii_digit() {
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            Tok::Other
        } else if is_ident(c) {
            if c == 'r' && chars.get(i + 1) == Some(&'#') {
                i += 2;
            }
            let start = i;
            while i < chars.len() && is_ident(chars[i]) {
                i += 1;
            }
            Tok::Ident(chars[start..i].iter().collect())
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            i += 2;
            Tok::Sep
        } else {
            i += 1;
            match c {
                '{' => Tok::Open,
                '}' => Tok::Close,
                ',' => Tok::Comma,
                '*' => Tok::Star,
                _ => Tok::Other,
            }
        };
        out.push(Token { tok, line });
    }
    out
}

/// `text` with its comments (doc comments included) and string, byte-string and char literals
/// replaced by spaces, line breaks kept.
fn blank_comments_and_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let prev = i.checked_sub(1).map(|p| chars[p]);
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0usize;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
        } else if c == 'r'
            && matches!(next, Some('"' | '#'))
            && !prev.is_some_and(|p| is_ident(p) && p != 'b' && p != 'c')
            && raw_string_hashes(&chars, i + 1).is_some()
        {
            let hashes = raw_string_hashes(&chars, i + 1).unwrap_or(0);
            // `r`, the hashes and the opening quote.
            for _ in 0..hashes + 2 {
                out.push(' ');
            }
            i += hashes + 2;
            while i < chars.len() {
                if chars[i] == '"' && (1..=hashes).all(|h| chars.get(i + h) == Some(&'#')) {
                    for _ in 0..hashes + 1 {
                        out.push(' ');
                    }
                    i += hashes + 1;
                    break;
                }
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() {
                match chars[i] {
                    '\\' => {
                        blank(&mut out, chars[i]);
                        if let Some(&e) = chars.get(i + 1) {
                            blank(&mut out, e);
                        }
                        i += 2;
                    }
                    '"' => {
                        out.push(' ');
                        i += 1;
                        break;
                    }
                    other => {
                        blank(&mut out, other);
                        i += 1;
                    }
                }
            }
        } else if c == '\'' && next == Some('\\') {
            // An escaped char literal: up to the closing quote.
            out.push_str("  ");
            i += 2;
            while i < chars.len() && chars[i] != '\'' {
                out.push(' ');
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && next.is_some() && chars.get(i + 2) == Some(&'\'') {
            out.push_str("   ");
            i += 3;
        } else {
            // Code, or the quote of a lifetime or label.
            out.push(c);
            i += 1;
        }
    }
    out
}

/// When `chars[at..]` is `#..#"` (zero or more hashes, then a quote), how many hashes.
fn raw_string_hashes(chars: &[char], at: usize) -> Option<usize> {
    let hashes = chars[at..].iter().take_while(|&&c| c == '#').count();
    (chars.get(at + hashes) == Some(&'"')).then_some(hashes)
}

/// `code` with the items marked `#[cfg(test)]` replaced by spaces (line breaks kept): each
/// ends at its first `;` when that comes before any `{`, otherwise at the brace that closes its
/// first block. Comments and literals must already be blanked.
fn strip_test_items(code: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let bytes = code.as_bytes();
    let mut out = String::with_capacity(code.len());
    let mut pos = 0;
    while let Some(found) = code[pos..].find(MARK) {
        let start = pos + found;
        out.push_str(&code[pos..start]);
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
        let end = (i + 1).min(code.len());
        out.extend(
            code[start..end]
                .chars()
                .map(|c| if c == '\n' { '\n' } else { ' ' }),
        );
        pos = end;
    }
    out.push_str(&code[pos..]);
    out
}
