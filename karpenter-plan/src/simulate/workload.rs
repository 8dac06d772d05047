//! The workload file of `karpenter simulate --workload FILE` (format: `docs/simulate.md`).
//!
//! ```yaml
//! deployments:
//!   - name: app                 # a Deployment of -f gives the pod template...
//!     replicas:
//!       - {at: 0h, replicas: 4}
//!       - {at: 8h, replicas: 30}
//!     repeat: 24h
//!   - name: api                 # ...or cpu and memory (and nodeSelector) give it here
//!     cpu: 500m
//!     memory: 1Gi
//!     pdb: {maxUnavailable: 1}
//!     replicas: [{at: 0h, replicas: 6}]
//! jobs:
//!   - name: report
//!     every: 2h
//!     pods: 4
//!     cpu: "1"
//!     memory: 2Gi
//!     runFor: 20m
//! spot:
//!   interruptionsPerNodeHour: 0.02
//! ```
//!
//! Read from YAML into a typed [`WorkloadFile`]; every error names the file and the field
//! (`deployments[1].replicas[0].at`).

use std::collections::BTreeMap;

use jiff::SignedDuration;
use karpenter_core::model::{IntOrPercent, Pod};
use karpenter_core::resources::Quantity;
use serde::Deserialize;
use serde_json::Value;

/// Why a workload file could not be read: the file, the field and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {field}: {message}")]
pub struct WorkloadError {
    /// The file.
    pub file: String,
    /// The field (`deployments[0].replicas[1].at`), or `(document)` for the whole file.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// The workload file as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadFile {
    /// Deployments and their replica schedules.
    #[serde(default)]
    pub deployments: Vec<DeploymentSpec>,
    /// Jobs arriving at a fixed interval.
    #[serde(default)]
    pub jobs: Vec<JobSpec>,
    /// Spot interruptions.
    #[serde(default)]
    pub spot: Option<SpotSpec>,
}

/// One Deployment of the workload file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct DeploymentSpec {
    /// The name; without `cpu` and `memory`, the Deployment of this name in the `-f` input
    /// gives the pod template.
    pub name: String,
    /// The namespace of the Deployment in `-f` (default: any) or of the pods (default:
    /// `default`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// CPU request per pod (`500m`, `2`).
    #[serde(default)]
    pub cpu: Option<Value>,
    /// Memory request per pod (`512Mi`).
    #[serde(default)]
    pub memory: Option<Value>,
    /// Node selector of the pods.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// Pods annotated `karpenter.sh/do-not-disrupt: "true"`.
    #[serde(default)]
    pub do_not_disrupt: bool,
    /// A PodDisruptionBudget over the pods.
    #[serde(default)]
    pub pdb: Option<PdbSpec>,
    /// The replica schedule: from `at` on, `replicas` replicas.
    pub replicas: Vec<ReplicaPoint>,
    /// The schedule repeats with this period (`24h`: a daily curve).
    #[serde(default)]
    pub repeat: Option<Value>,
}

/// A point of a replica schedule.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaPoint {
    /// Since the start (`0h`, `8h30m`).
    pub at: Value,
    /// The replica count from then on.
    pub replicas: u32,
}

/// A PodDisruptionBudget of the workload file.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PdbSpec {
    /// `minAvailable`: a count or a percentage (`50%`).
    #[serde(default)]
    pub min_available: Option<Value>,
    /// `maxUnavailable`: a count or a percentage.
    #[serde(default)]
    pub max_unavailable: Option<Value>,
}

/// Jobs arriving at a fixed interval.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JobSpec {
    /// The name (arrival `k` is `<name>-<k>`).
    pub name: String,
    /// The namespace of the pods (default `default`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Time between arrivals.
    pub every: Value,
    /// The first arrival (default `0s`).
    #[serde(default)]
    pub start: Option<Value>,
    /// No arrival at or after this time (default: the end of the run).
    #[serde(default)]
    pub until: Option<Value>,
    /// Pods per arrival (default 1).
    #[serde(default = "one")]
    pub pods: u32,
    /// CPU request per pod.
    pub cpu: Value,
    /// Memory request per pod.
    pub memory: Value,
    /// How long each pod runs once bound.
    pub run_for: Value,
    /// Node selector of the pods.
    #[serde(default)]
    pub node_selector: BTreeMap<String, String>,
    /// Pods annotated `karpenter.sh/do-not-disrupt: "true"`.
    #[serde(default)]
    pub do_not_disrupt: bool,
}

fn one() -> u32 {
    1
}

/// Spot interruptions.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SpotSpec {
    /// Interruptions per spot node per hour (`0.02`: a spot node lives 50 hours on average).
    pub interruptions_per_node_hour: f64,
}

/// Reads a workload file from its text (`file` names it in errors).
pub fn parse(file: &str, text: &str) -> Result<WorkloadFile, WorkloadError> {
    let err = |field: &str, message: String| WorkloadError {
        file: file.to_string(),
        field: field.to_string(),
        message,
    };
    let value: Value = serde_saphyr::from_str(text)
        .map_err(|e| err("(document)", format!("invalid YAML: {e}")))?;
    if value.is_null() {
        return Err(err(
            "(document)",
            "empty: give deployments and/or jobs".to_string(),
        ));
    }
    let parsed: WorkloadFile = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "(document)" } else { &path };
        err(field, e.into_inner().to_string())
    })?;
    // Check what serde could not.
    let mut seen = BTreeMap::new();
    for (i, d) in parsed.deployments.iter().enumerate() {
        let at = |f: &str| format!("deployments[{i}].{f}");
        if d.name.is_empty() {
            return Err(err(&at("name"), "must not be empty".into()));
        }
        if let Some(j) = seen.insert(("deployment", d.name.clone()), i) {
            return Err(err(
                &at("name"),
                format!("{:?} is also deployments[{j}]", d.name),
            ));
        }
        if d.replicas.is_empty() {
            return Err(err(
                &at("replicas"),
                "give at least one {at, replicas}".into(),
            ));
        }
        for (k, p) in d.replicas.iter().enumerate() {
            duration(&p.at, false).map_err(|m| err(&at(&format!("replicas[{k}].at")), m))?;
        }
        if let Some(r) = &d.repeat {
            let period = duration(r, true).map_err(|m| err(&at("repeat"), m))?;
            for (k, p) in d.replicas.iter().enumerate() {
                let t = duration(&p.at, false).map_err(|m| err(&at("repeat"), m))?;
                if t >= period {
                    return Err(err(
                        &at(&format!("replicas[{k}].at")),
                        format!("at or after the repeat period {}", text_of(r)),
                    ));
                }
            }
        }
        match (&d.cpu, &d.memory) {
            (None, None) => {}
            (Some(c), Some(m)) => {
                quantity(c).map_err(|e| err(&at("cpu"), e))?;
                quantity(m).map_err(|e| err(&at("memory"), e))?;
            }
            (Some(_), None) => {
                return Err(err(&at("memory"), "required with cpu".into()));
            }
            (None, Some(_)) => return Err(err(&at("cpu"), "required with memory".into())),
        }
        if let Some(pdb) = &d.pdb {
            pdb_value(pdb).map_err(|(f, m)| err(&at(&format!("pdb.{f}")), m))?;
        }
    }
    for (i, j) in parsed.jobs.iter().enumerate() {
        let at = |f: &str| format!("jobs[{i}].{f}");
        if j.name.is_empty() {
            return Err(err(&at("name"), "must not be empty".into()));
        }
        if let Some(k) = seen.insert(("job", j.name.clone()), i) {
            return Err(err(&at("name"), format!("{:?} is also jobs[{k}]", j.name)));
        }
        duration(&j.every, true).map_err(|m| err(&at("every"), m))?;
        if let Some(s) = &j.start {
            duration(s, false).map_err(|m| err(&at("start"), m))?;
        }
        if let Some(u) = &j.until {
            duration(u, false).map_err(|m| err(&at("until"), m))?;
        }
        duration(&j.run_for, true).map_err(|m| err(&at("runFor"), m))?;
        quantity(&j.cpu).map_err(|e| err(&at("cpu"), e))?;
        quantity(&j.memory).map_err(|e| err(&at("memory"), e))?;
        if j.pods == 0 {
            return Err(err(&at("pods"), "must be at least 1".into()));
        }
    }
    if let Some(s) = &parsed.spot {
        let r = s.interruptions_per_node_hour;
        if !r.is_finite() || r < 0.0 {
            return Err(err(
                "spot.interruptionsPerNodeHour",
                format!("{r}: must be a non-negative number"),
            ));
        }
    }
    if parsed.deployments.is_empty() && parsed.jobs.is_empty() {
        return Err(err(
            "(document)",
            "no workload: give deployments and/or jobs".into(),
        ));
    }
    Ok(parsed)
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A duration of the file: a Go duration string (`90m`, `1h30m`), or the number 0.
pub fn duration(v: &Value, positive: bool) -> Result<SignedDuration, String> {
    let d = match v {
        Value::String(s) => karpenter_core::api::Duration::parse(s)
            .map(|d| d.as_signed_duration())
            .map_err(|e| format!("{s:?}: {e} (write durations as 30s, 15m, 8h, 1h30m)"))?,
        Value::Number(n) if n.as_f64() == Some(0.0) => SignedDuration::ZERO,
        other => {
            return Err(format!(
                "{other}: not a duration (write durations as strings: 30s, 15m, 8h, 1h30m)"
            ));
        }
    };
    if d.is_negative() {
        return Err(format!("{}: must not be negative", text_of(v)));
    }
    if positive && !d.is_positive() {
        return Err(format!("{}: must be longer than zero", text_of(v)));
    }
    Ok(d)
}

/// A resource quantity: a string (`500m`, `2Gi`) or a number.
pub fn quantity(v: &Value) -> Result<Quantity, String> {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => return Err(format!("{other}: not a quantity (e.g. 500m, 2, 1Gi)")),
    };
    let q = Quantity::parse(&text).map_err(|e| format!("{text:?}: {e}"))?;
    if q.milli_value() <= 0 {
        return Err(format!("{text:?}: must be positive"));
    }
    Ok(q)
}

fn int_or_percent(v: &Value) -> Result<IntOrPercent, String> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .and_then(|n| i32::try_from(n).ok())
            .map(IntOrPercent::Int)
            .ok_or_else(|| format!("{n}: not a non-negative count")),
        Value::String(s) => match s.strip_suffix('%') {
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= 100)
                .map(|p| IntOrPercent::Percent(p.into()))
                .ok_or_else(|| format!("{s:?}: not a percentage from 0% to 100%")),
            None => s
                .parse::<u32>()
                .ok()
                .and_then(|n| i32::try_from(n).ok())
                .map(IntOrPercent::Int)
                .ok_or_else(|| format!("{s:?}: not a count or a percentage")),
        },
        other => Err(format!("{other}: not a count or a percentage")),
    }
}

/// A budget's `(minAvailable, maxUnavailable)`, one of them set.
pub type PdbBounds = (Option<IntOrPercent>, Option<IntOrPercent>);

/// The budget: `(minAvailable, maxUnavailable)`; errors name the field.
pub fn pdb_value(pdb: &PdbSpec) -> Result<PdbBounds, (&'static str, String)> {
    match (&pdb.min_available, &pdb.max_unavailable) {
        (Some(_), Some(_)) => Err((
            "maxUnavailable",
            "give minAvailable or maxUnavailable, not both".into(),
        )),
        (None, None) => Err(("minAvailable", "give minAvailable or maxUnavailable".into())),
        (Some(m), None) => Ok((
            Some(int_or_percent(m).map_err(|e| ("minAvailable", e))?),
            None,
        )),
        (None, Some(m)) => Ok((
            None,
            Some(int_or_percent(m).map_err(|e| ("maxUnavailable", e))?),
        )),
    }
}

/// A pod template of `cpu`, `memory` and a node selector, in `namespace`.
pub fn inline_pod(
    namespace: &str,
    name: &str,
    cpu: Quantity,
    memory: Quantity,
    node_selector: &BTreeMap<String, String>,
) -> Pod {
    let mut pod = Pod::new(namespace, name);
    pod.requests.insert("cpu", cpu);
    pod.requests.insert("memory", memory);
    pod.node_selector = node_selector.clone();
    pod
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_field() {
        let e = parse(
            "w.yaml",
            "deployments:\n  - name: a\n    cpu: 1\n    memory: 1Gi\n    replicas:\n      - {at: soon, replicas: 2}\n",
        )
        .unwrap_err();
        assert_eq!(e.field, "deployments[0].replicas[0].at");
        assert!(
            e.to_string()
                .starts_with("w.yaml: deployments[0].replicas[0].at: ")
        );
        let e = parse("w.yaml", "jobs:\n  - name: j\n    every: 1h\n    cpu: 1\n    memory: 1Gi\n    runFor: 5m\n    color: red\n").unwrap_err();
        assert!(e.to_string().contains("color"), "{e}");
        let e = parse(
            "w.yaml",
            "deployments:\n  - name: a\n    cpu: 1\n    replicas: [{at: 0h, replicas: 1}]\n",
        )
        .unwrap_err();
        assert_eq!(e.field, "deployments[0].memory");
    }

    #[test]
    fn a_daily_curve_reads() {
        let w = parse(
            "w.yaml",
            "deployments:\n  - name: a\n    repeat: 24h\n    replicas:\n      - {at: 0, replicas: 2}\n      - {at: 8h, replicas: 20}\nspot: {interruptionsPerNodeHour: 0.01}\n",
        )
        .unwrap();
        assert_eq!(w.deployments[0].replicas.len(), 2);
        assert_eq!(w.spot.unwrap().interruptions_per_node_hour, 0.01);
    }
}
