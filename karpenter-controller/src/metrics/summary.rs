//! [`Summary`]: a Prometheus summary without labels.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Instant;

use super::{SUMMARY_MAX_AGE, SUMMARY_MAX_SAMPLES, SUMMARY_QUANTILES};

/// A Prometheus summary without labels (prometheus-client has none): `_sum` and `_count` over
/// every observation, and the [`SUMMARY_QUANTILES`] over those of the last
/// [`SUMMARY_MAX_AGE`] (exact ranks, where Prometheus's Go client estimates within 1%); `NaN`
/// when there are none, as Go's client reports.
#[derive(Debug, Default)]
pub struct Summary {
    state: Mutex<SummaryState>,
}

#[derive(Debug, Default)]
struct SummaryState {
    recent: VecDeque<(Instant, f64)>,
    sum: f64,
    count: u64,
}

impl Summary {
    /// Records `value` at `now`.
    pub fn observe_at(&self, value: f64, now: Instant) {
        if let Ok(mut s) = self.state.lock() {
            s.sum += value;
            s.count += 1;
            s.recent.push_back((now, value));
            while s.recent.len() > SUMMARY_MAX_SAMPLES {
                s.recent.pop_front();
            }
        }
    }

    /// The text exposition of this summary named `name` (full name) at `now`.
    pub fn encode_at(&self, name: &str, help: &str, now: Instant) -> String {
        use std::fmt::Write;
        let Ok(mut s) = self.state.lock() else {
            return String::new();
        };
        while s
            .recent
            .front()
            .is_some_and(|(t, _)| now.saturating_duration_since(*t) > SUMMARY_MAX_AGE)
        {
            s.recent.pop_front();
        }
        let mut values: Vec<f64> = s.recent.iter().map(|(_, v)| *v).collect();
        values.sort_by(f64::total_cmp);
        let mut out = String::new();
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} summary");
        for q in SUMMARY_QUANTILES {
            let value = if values.is_empty() {
                f64::NAN
            } else {
                // Nearest rank: the smallest value with at least q of the values at or below it.
                let rank = (q * values.len() as f64).ceil() as usize;
                values[rank.clamp(1, values.len()) - 1]
            };
            let _ = writeln!(out, "{name}{{quantile=\"{q}\"}} {}", float(value));
        }
        let _ = writeln!(out, "{name}_sum {}", float(s.sum));
        let _ = writeln!(out, "{name}_count {}", s.count);
        out
    }
}

/// A float as the exposition writes it (`1.0`, `NaN`).
fn float(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}
