use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tracing_subscriber::layer::SubscriberExt;

use super::*;

/// A writer appending to a shared buffer.
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The lines `f`'s events produce, parsed.
fn lines(f: impl FnOnce()) -> Vec<Value> {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let shared = buf.clone();
    let subscriber = tracing_subscriber::registry().with(ZapJsonLayer::new(move || {
        Box::new(Buffer(shared.clone())) as Box<dyn Write>
    }));
    tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[test]
fn lines_carry_upstreams_keys_and_objects() {
    let out = lines(|| {
        let (pool, name) = ("default", "default-x7k2p");
        tracing::info!(controller = "provisioner", nodepool = %pool, nodeclaim = %name, "created nodeclaim");
        tracing::warn!(pod = %"team-a/web-1", attempts = 3u64, ready = false, "bound pod not understood");
        tracing::error!(error = %"connection refused", "leader election ended");
        tracing::debug!(node = %"ip-10-0-0-1", "node changed since read");
        tracing::trace!("very detailed");
    });
    assert_eq!(out.len(), 5);
    let levels: Vec<&str> = out.iter().map(|l| l["level"].as_str().unwrap()).collect();
    assert_eq!(levels, ["INFO", "WARN", "ERROR", "DEBUG", "DEBUG"]);
    for l in &out {
        assert_eq!(l["logger"], "controller");
        let time = l["time"].as_str().unwrap();
        // ISO 8601, UTC, milliseconds: 2026-12-07T21:35:00.123Z.
        assert_eq!(time.len(), 24, "{time}");
        assert!(time.ends_with('Z') && time.as_bytes()[19] == b'.', "{time}");
        assert!(time.parse::<jiff::Timestamp>().is_ok(), "{time}");
        assert_eq!(l.get("commit").and_then(Value::as_str), COMMIT);
        assert!(
            l.get("target").is_none() && l.get("timestamp").is_none(),
            "{l}"
        );
    }
    let created = &out[0];
    assert_eq!(created["message"], "created nodeclaim");
    assert_eq!(created["controller"], "provisioner");
    assert_eq!(created["NodePool"], serde_json::json!({"name": "default"}));
    assert_eq!(
        created["NodeClaim"],
        serde_json::json!({"name": "default-x7k2p"})
    );
    assert_eq!(
        out[1]["Pod"],
        serde_json::json!({"name": "web-1", "namespace": "team-a"})
    );
    assert_eq!(out[1]["attempts"], 3);
    assert_eq!(out[1]["ready"], false);
    assert!(out[1].get("controller").is_none());
    assert_eq!(out[2]["error"], "connection refused");
    assert_eq!(out[3]["Node"], serde_json::json!({"name": "ip-10-0-0-1"}));

    // The guide's filters (section 17.3), as jq selects: errors only, and provisioning lines by
    // upstream's current key (its `.logger == "controller.provisioner"` is pre-v0.37 and
    // selects nothing, here as on upstream's v1 controller).
    let select = |key: &str, value: &str| -> Vec<&Value> {
        out.iter().filter(|l| l[key] == value).collect()
    };
    assert_eq!(select("level", "ERROR").len(), 1);
    assert_eq!(select("controller", "provisioner").len(), 1);
    assert!(select("logger", "controller.provisioner").is_empty());
}
