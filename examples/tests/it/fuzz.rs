//! The fuzz targets' corpora and regression inputs on stable: every file under
//! `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` goes through the very function the
//! cargo-fuzz target `<target>` calls (`fuzz/src/checks.rs`, included here as a module), so a
//! fixed crash stays fixed without nightly. Each crash found by fuzzing also has a named test
//! below.

#[path = "../../../fuzz/src/checks.rs"]
#[allow(dead_code)]
mod checks;

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// The files of `fuzz/<kind>/<target>/`, sorted (none if the directory does not exist: git
/// keeps no empty directory).
fn inputs(kind: &str, target: &str) -> Vec<PathBuf> {
    let dir = fuzz_dir().join(kind).join(target);
    if !dir.exists() {
        return Vec::new();
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs `target`'s check on one input file, naming the file when it panics.
fn run(target: &str, check: fn(&[u8]), file: &Path) {
    let data = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let outcome = std::panic::catch_unwind(|| check(&data));
    if outcome.is_err() {
        panic!("fuzz target {target} fails on {}", file.display());
    }
}

#[test]
fn every_target_has_a_seed_corpus_and_runs_it() {
    for (target, check) in checks::TARGETS {
        let files = inputs("corpus", target);
        assert!(!files.is_empty(), "fuzz/corpus/{target} is empty");
        for file in files {
            run(target, check, &file);
        }
    }
}

#[test]
fn every_regression_input_passes() {
    for (target, check) in checks::TARGETS {
        for file in inputs("regressions", target) {
            run(target, check, &file);
        }
    }
}

#[test]
fn every_target_is_a_cargo_fuzz_binary() {
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).expect("fuzz/Cargo.toml");
    for (target, _) in checks::TARGETS {
        assert!(
            manifest.contains(&format!("name = \"{target}\"")),
            "fuzz/Cargo.toml has no [[bin]] {target}"
        );
        let source = fuzz_dir().join("fuzz_targets").join(format!("{target}.rs"));
        let text = std::fs::read_to_string(&source).expect("the target's source");
        assert!(
            text.contains(&format!("checks::{target}(data)")),
            "{} does not call checks::{target}",
            source.display()
        );
    }
}
