//! Log lines as upstream Karpenter's controller writes them: one JSON object per line, zap's
//! production encoding with upstream's keys.
//!
//! ```json
//! {"level":"INFO","time":"2026-12-07T21:35:00.123Z","logger":"controller","message":"created nodeclaim","commit":"6a75107","controller":"provisioner","NodePool":{"name":"default"},"NodeClaim":{"name":"default-x7k2p"}}
//! ```
//!
//! - `level`: `DEBUG`, `INFO`, `WARN` or `ERROR` (zap's capital level encoder; `TRACE` is
//!   written as `DEBUG`);
//! - `time`: ISO 8601 in UTC with milliseconds;
//! - `logger`: `controller`, as every line of upstream's controller since v0.37.0 (the
//!   controller's name moved to the `controller` key then);
//! - `message`; `commit`: the git revision the binary was built from (`KARPENTER_COMMIT` at
//!   build time), left out when unknown, as upstream leaves it out;
//! - `controller`: the upstream controller the line belongs to (`provisioner`, `disruption`,
//!   `nodeclaim.lifecycle`, `node.termination`, `nodeclass`, ...), on lines that belong to one;
//! - the objects as upstream attaches them: `NodeClaim`, `NodePool`, `Node`, `EC2NodeClass`,
//!   `NodeOverlay` as `{"name": ...}`, `Pod` as `{"name": ..., "namespace": ...}`;
//! - `error` and every other field of the event under its own name.
//!
//! Events name their objects with the fields `nodeclaim`, `nodepool`, `node`, `nodeclass`,
//! `nodeoverlay` and `pod` (`namespace/name`), which this layer turns into upstream's keys.

use std::io::Write;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

/// The value of every line's `logger` key.
pub const LOGGER: &str = "controller";

/// The git revision the binary was built from, when the build said (`KARPENTER_COMMIT`).
pub const COMMIT: Option<&str> = option_env!("KARPENTER_COMMIT");

/// Writes every event as upstream's JSON line to a writer made by `W`.
pub struct ZapJsonLayer<W> {
    make_writer: W,
}

impl<W> ZapJsonLayer<W>
where
    W: Fn() -> Box<dyn Write> + Send + Sync + 'static,
{
    /// A layer writing each line to a fresh `make_writer()`.
    pub fn new(make_writer: W) -> Self {
        ZapJsonLayer { make_writer }
    }
}

/// Upstream's (zap's) name of a level.
pub fn level_name(level: &Level) -> &'static str {
    match *level {
        Level::ERROR => "ERROR",
        Level::WARN => "WARN",
        Level::INFO => "INFO",
        _ => "DEBUG",
    }
}

/// The key and value upstream writes for an event field `name` holding `value`.
fn upstream_field(name: &str, value: String) -> (String, Value) {
    let named = |kind: &str| {
        let mut m = Map::new();
        m.insert("name".to_string(), Value::String(value.clone()));
        (kind.to_string(), Value::Object(m))
    };
    match name {
        "nodeclaim" => named("NodeClaim"),
        "nodepool" => named("NodePool"),
        "node" => named("Node"),
        "nodeclass" => named("EC2NodeClass"),
        "nodeoverlay" => named("NodeOverlay"),
        "pod" => {
            let (namespace, pod) = value.split_once('/').unwrap_or(("", value.as_str()));
            let mut m = Map::new();
            m.insert("name".to_string(), Value::String(pod.to_string()));
            m.insert(
                "namespace".to_string(),
                Value::String(namespace.to_string()),
            );
            ("Pod".to_string(), Value::Object(m))
        }
        _ => (name.to_string(), Value::String(value)),
    }
}

/// Collects an event's fields as upstream's keys.
#[derive(Default)]
struct Fields {
    message: String,
    controller: Option<String>,
    rest: Vec<(String, Value)>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        match (field.name(), value) {
            ("message", Value::String(s)) => self.message = s,
            ("controller", Value::String(s)) => self.controller = Some(s),
            (name, Value::String(s)) => self.rest.push(upstream_field(name, s)),
            (name, v) => self.rest.push((name.to_string(), v)),
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_string()));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::from(value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::String(value.to_string()));
    }
}

/// One line for `event` at `time` (without the newline).
pub fn line(event: &Event<'_>, time: jiff::Timestamp) -> String {
    let mut fields = Fields::default();
    event.record(&mut fields);
    let mut out = Map::new();
    out.insert("level".into(), level_name(event.metadata().level()).into());
    out.insert(
        "time".into(),
        time.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string().into(),
    );
    out.insert("logger".into(), LOGGER.into());
    out.insert("message".into(), fields.message.into());
    if let Some(commit) = COMMIT {
        out.insert("commit".into(), commit.into());
    }
    if let Some(controller) = fields.controller {
        out.insert("controller".into(), controller.into());
    }
    for (k, v) in fields.rest {
        out.insert(k, v);
    }
    Value::Object(out).to_string()
}

impl<S, W> Layer<S> for ZapJsonLayer<W>
where
    S: Subscriber,
    W: Fn() -> Box<dyn Write> + Send + Sync + 'static,
{
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut text = line(event, jiff::Timestamp::now());
        text.push('\n');
        // A line that cannot be written is lost, as zap loses it.
        let _ = (self.make_writer)().write_all(text.as_bytes());
    }
}

#[cfg(test)]
mod tests;
