//! Integration tests of the `karpenter` binary (one test binary, several modules).
//!
//! Expected plans live in `tests/expected/<scenario>.json`; run with `UPDATE_EXPECT=1` to
//! regenerate them after an intended change, and review the diff.

#[cfg(feature = "aws")]
mod aws_e2e;
mod chart;
mod crds;
mod dumps;
mod e2e;
mod edges;
mod errors;
mod examples;
mod fidelity;
mod fuzz;
mod logs;
mod migrate;
mod monitoring;
mod options;
mod packing;
mod parity;
mod perf;
mod robustness;
mod simulate;
mod volumes;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// What a run of the binary produced.
#[derive(Debug)]
pub struct Run {
    /// The exit status.
    pub code: i32,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// The package directory (`examples/`).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `examples/manifests/<name>`.
pub fn manifests(name: &str) -> String {
    root().join("manifests").join(name).display().to_string()
}

/// Runs `karpenter` with `args` and `stdin`, from the package directory.
pub fn karpenter(args: &[&str], stdin: &str) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_karpenter"))
        .args(args)
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("karpenter starts");
    if let Some(mut input) = child.stdin.take() {
        // The binary may exit before reading (usage errors): ignore a broken pipe.
        let _ = input.write_all(stdin.as_bytes());
    }
    let out = child.wait_with_output().expect("karpenter finishes");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

/// `karpenter plan <args>`, expecting exit status 0; returns stdout.
pub fn plan_ok(args: &[&str]) -> String {
    let mut all = vec!["plan"];
    all.extend_from_slice(args);
    let run = karpenter(&all, "");
    assert_eq!(run.code, 0, "{args:?}\nstderr: {}", run.stderr);
    run.stdout
}

/// `karpenter plan <args> -o json`, parsed.
pub fn plan_json(args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend_from_slice(&["-o", "json"]);
    let out = plan_ok(&all);
    serde_json::from_str(&out).expect("valid JSON")
}

/// Compares `actual` with `tests/expected/<name>`, or rewrites it with `UPDATE_EXPECT=1`.
pub fn expect_file(name: &str, actual: &str) {
    let path = root().join("tests").join("expected").join(name);
    if std::env::var_os("UPDATE_EXPECT").is_some() {
        std::fs::create_dir_all(path.parent().unwrap_or(Path::new("."))).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with UPDATE_EXPECT=1)", path.display()));
    if expected != actual {
        let first = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from the plan at line {} (run with UPDATE_EXPECT=1 to accept):\nexpected: {:?}\nactual:   {:?}",
            path.display(),
            first + 1,
            expected.lines().nth(first),
            actual.lines().nth(first)
        );
    }
}

/// A temporary directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A fresh directory for `tag`, unique even when tests with the same tag run in parallel.
    pub fn new(tag: &str) -> TempDir {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("karpenter-cli-it-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// Writes `text` to `name` (creating directories) and returns the path.
    pub fn write(&self, name: &str, text: &str) -> String {
        let p = self.0.join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
