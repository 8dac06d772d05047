//! House rules of the crate's source tree: no import circle between its modules, at any depth
//! (top-level modules, and every file against every other). The rules of the check (what
//! counts as a dependency, and why a child may use its parent) are those of the
//! [`module_cycles`](crate::module_cycles) checker, shared with the `house` tests of
//! `karpenter-fake` and `karpenter-aws`.

use std::path::Path;

use crate::module_cycles::ModuleGraph;

#[test]
fn modules_have_no_import_cycle_at_any_depth() {
    let graph = ModuleGraph::of_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    assert!(graph.has_module("scheduling") && graph.has_module("disruption::facts"));
    let cycles = graph.cycles();
    assert!(cycles.is_empty(), "import circles:\n{}", cycles.join("\n"));
}

/// The cycles of a synthetic crate given as `(path under src/, text)` pairs.
fn cycles_of(files: &[(&str, &str)]) -> Vec<String> {
    ModuleGraph::of_sources(files).cycles()
}

#[test]
fn the_checker_finds_a_cycle_between_siblings_and_prints_it() {
    let cycles = cycles_of(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::X;\npub struct Y;\n"),
        (
            "b.rs",
            "pub struct X;\n\nfn f() -> super::a::Y { super::a::Y }\n",
        ),
    ]);
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(
        cycles[0].starts_with("cycle at depth 1: a -> b -> a"),
        "{cycles:?}"
    );
    assert!(
        cycles[0].contains("b -> a: src/b.rs:3 `a::Y`"),
        "{cycles:?}"
    );
}

#[test]
fn the_checker_finds_a_cycle_deep_inside_a_module() {
    // p::x and p::y depend on each other; p itself depends on neither of them, nor the other
    // way round, so depth 1 sees nothing.
    let files = [
        ("lib.rs", "mod p;\nmod q;\nuse q::Q;\n"),
        ("p/mod.rs", "mod x;\nmod y;\n"),
        ("p/x.rs", "use super::y::{self, Y};\n"),
        ("p/y.rs", "pub fn f() { crate::p::x::g(); }\n"),
        ("q.rs", "pub struct Q;\n"),
    ];
    let cycles = cycles_of(&files);
    assert_eq!(
        cycles,
        ["cycle at depth 2: p::x -> p::y -> p::x\n    \
          p::x -> p::y: src/p/x.rs:1 `p::y`\n    \
          p::y -> p::x: src/p/y.rs:1 `p::x::g`"]
    );
}

#[test]
fn the_checker_collapses_modules_at_each_depth() {
    // No file depends on a file that depends on it, but p and q depend on each other.
    let cycles = cycles_of(&[
        ("lib.rs", "mod p;\nmod q;\n"),
        ("p/mod.rs", "mod x;\nmod y;\n"),
        ("p/x.rs", "use crate::q::Q;\n"),
        ("p/y.rs", "pub struct Y;\n"),
        ("q.rs", "pub struct Q(crate::p::y::Y);\n"),
    ]);
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(
        cycles[0].starts_with("cycle at depth 1: p -> q -> p"),
        "{cycles:?}"
    );
}

#[test]
fn a_child_may_use_its_parent_but_not_through_a_re_export() {
    // Children using what their parent defines or re-exports: no cycle.
    let fine = [
        ("lib.rs", "pub mod p;\npub use p::Shared;\n"),
        (
            "p/mod.rs",
            "mod x;\nmod y;\npub use self::x::X;\npub struct Shared;\n",
        ),
        (
            "p/x.rs",
            "use super::Shared;\npub struct X(crate::Shared);\n",
        ),
        ("p/y.rs", "use super::{Shared, X};\n"),
    ];
    assert_eq!(cycles_of(&fine), Vec::<String>::new());
    // x using y while y uses x through the parent's re-export: a cycle.
    let mut circle = fine;
    circle[3] = ("p/y.rs", "use super::{Shared, X};\npub struct Y;\n");
    circle[2] = ("p/x.rs", "use super::y::Y;\npub struct X;\n");
    let cycles = cycles_of(&circle);
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(
        cycles[0].contains("p::x -> p::y -> p::x") && cycles[0].contains("`p::X`"),
        "{cycles:?}"
    );
}

#[test]
fn the_checker_skips_comments_literals_and_test_code_and_sees_inline_modules() {
    let b = "use crate::a::A;\npub struct B;\n";
    let a_without = r##"
        //! Names crate::b in a comment.
        /* and crate::b::B /* nested */ crate::b */
        const S: &str = "crate::b::B \" crate::b";
        const R: &str = r#"crate::b::B"#;
        const C: char = '"';
        fn f<'a>(x: &'a str) -> &'a str { x }
        pub struct A;
        #[cfg(test)]
        mod tests { use crate::b::B; }
        #[cfg(test)]
        use crate::b;
    "##;
    let files = |a| {
        cycles_of(&[
            ("lib.rs", "mod a;\nmod b;\n"),
            ("a.rs", a),
            ("b.rs", b),
            ("a/tests.rs", "use crate::b::B;\n"),
            ("a_tests.rs", "use crate::b::B;\n"),
        ])
    };
    assert_eq!(files(a_without), Vec::<String>::new());
    // Inside an inline module, `super` is the file's module and `super::super` its parent.
    let a_with = format!("{a_without}\nmod inner {{ use super::super::b::B; }}\n");
    let cycles = files(&a_with);
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert!(
        cycles[0].contains("a -> b: src/a.rs:14 `b::B`"),
        "{cycles:?}"
    );
}
