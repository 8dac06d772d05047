//! The controller's log lines are upstream's (zap JSON: `level`, `time`, `logger`, `message`,
//! ...), so the seed guide's `jq` filters (section 17.3) work on them: the real `karpenter
//! controller` runs for a few seconds against an API server that is not there (every watch
//! fails, which kube logs as errors) and its standard output goes through `jq`.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The controller's standard output after `secs` seconds against a closed port.
fn controller_output(secs: u64) -> String {
    let dir = std::env::temp_dir().join(format!("karpenter-rs-logs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    // Port 9 (discard) on loopback: nothing listens, every connection is refused.
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"http://127.0.0.1:9\"}\n\
         users:\n- name: u\n  user: {token: t}\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\n\
         current-context: c\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_karpenter"))
        .args(["controller", "--cloud-provider", "fake", "--kubeconfig"])
        .arg(&kubeconfig)
        .args(["--metrics-port", &free_port().to_string()])
        .args(["--health-probe-port", &free_port().to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("karpenter starts");
    std::thread::sleep(Duration::from_secs(secs));
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    String::from_utf8(out.stdout).expect("UTF-8 logs")
}

/// `jq -c FILTER` over `input`, one JSON value per output line.
pub fn jq(filter: &str, input: &str) -> Vec<Value> {
    let mut child = Command::new("jq")
        .args(["-c", filter])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("jq is installed (the guide's filters are jq programs)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "jq {filter}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_guides_jq_filters_select_from_the_controllers_output() {
    let out = controller_output(3);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(lines.len() >= 3, "{out}");
    for l in &lines {
        for key in ["level", "time", "logger", "message"] {
            assert!(l[key].is_string(), "{key} missing: {l}");
        }
        assert!(
            ["DEBUG", "INFO", "WARN", "ERROR"].contains(&l["level"].as_str().unwrap()),
            "{l}"
        );
        assert_eq!(l["logger"], "controller", "{l}");
    }
    // `jq 'select(.level == "ERROR")'`: the failed connections.
    let errors = jq(r#"select(.level == "ERROR")"#, &out);
    assert!(!errors.is_empty(), "{out}");
    assert_eq!(
        errors.len(),
        lines.iter().filter(|l| l["level"] == "ERROR").count()
    );
    // The guide's provisioning filter names the pre-v0.37 logger; upstream's v1 controller
    // (and this one) write `"logger": "controller"` and the controller's name under
    // `controller`, so it selects nothing; docs/controller.md gives the current filter.
    assert!(jq(r#"select(.logger == "controller.provisioner")"#, &out).is_empty());
    assert_eq!(
        jq(r#"select(.logger == "controller")"#, &out).len(),
        lines.len()
    );
}
