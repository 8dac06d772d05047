//! Taints and tolerations with Kubernetes semantics.

use serde::{Deserialize, Serialize};

use crate::labels;

/// A taint's effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum TaintEffect {
    /// Pods that do not tolerate the taint are not scheduled onto the node.
    NoSchedule,
    /// The scheduler tries to avoid the node (Karpenter treats it as hard until relaxation).
    PreferNoSchedule,
    /// Pods that do not tolerate the taint are evicted.
    NoExecute,
}

impl TaintEffect {
    /// The effect's name as written in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// A node taint: `{key, value, effect}` as in Kubernetes' `core/v1` Taint.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    /// The taint key.
    pub key: String,
    /// The taint value (may be empty).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// The effect.
    pub effect: TaintEffect,
    /// When the taint was added (RFC 3339), kept for round-tripping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<String>,
}

/// A toleration's operator. An absent operator means `Equal`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub enum TolerationOperator {
    /// The toleration matches any value of the key.
    Exists,
    /// The toleration matches only `value` (the default).
    #[default]
    Equal,
    /// Numeric: the taint's value (an integer) is greater than the toleration's value.
    Gt,
    /// Numeric: the taint's value (an integer) is less than the toleration's value.
    Lt,
}

/// A pod toleration as in Kubernetes' `core/v1` Toleration.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Toleration {
    /// The key to match; empty with `Exists` matches every key.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key: String,
    /// The operator (absent = `Equal`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<TolerationOperator>,
    /// The value to match.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// The effect to match; absent matches every effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<TaintEffect>,
    /// For NoExecute: how long the pod stays bound after the taint appears.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

impl std::fmt::Display for TaintEffect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Taint {
    /// A taint without a `timeAdded`.
    pub fn new(key: impl Into<String>, value: impl Into<String>, effect: TaintEffect) -> Taint {
        Taint {
            key: key.into(),
            value: value.into(),
            effect,
            time_added: None,
        }
    }

    /// Whether two taints have the same key and effect (Kubernetes `MatchTaint`; the value is
    /// not compared, as a node holds at most one taint per key and effect).
    pub fn matches(&self, other: &Taint) -> bool {
        self.key == other.key && self.effect == other.effect
    }
}

impl std::fmt::Display for Taint {
    /// `key=value:Effect`, or `key:Effect` when the value is empty.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect)
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect)
        }
    }
}

impl Toleration {
    /// Whether this toleration tolerates `taint` (Kubernetes `ToleratesTaint`):
    ///
    /// - an absent effect matches every effect, otherwise the effects must be equal;
    /// - an empty key matches every key, but only with `Exists` (an empty key with any other
    ///   operator is invalid in Kubernetes and tolerates nothing here); otherwise keys must be
    ///   equal;
    /// - `Exists` matches any value; `Equal` (or an absent operator) needs equal values;
    /// - `Gt` / `Lt` compare the taint's value against the toleration's value as integers
    ///   (`taint > toleration` / `taint < toleration`); if either does not parse as an `i64`
    ///   the toleration does not match.
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|effect| effect != taint.effect) {
            return false;
        }
        let operator = self.operator.unwrap_or_default();
        if self.key.is_empty() {
            if operator != TolerationOperator::Exists {
                return false;
            }
        } else if self.key != taint.key {
            return false;
        }
        match operator {
            TolerationOperator::Exists => true,
            TolerationOperator::Equal => self.value == taint.value,
            TolerationOperator::Gt | TolerationOperator::Lt => {
                let (Ok(taint_value), Ok(toleration_value)) =
                    (taint.value.parse::<i64>(), self.value.parse::<i64>())
                else {
                    return false;
                };
                if operator == TolerationOperator::Gt {
                    taint_value > toleration_value
                } else {
                    taint_value < toleration_value
                }
            }
        }
    }
}

/// Why a set of tolerations does not admit a set of taints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaintError {
    /// No toleration tolerates this taint.
    #[error("did not tolerate taint {taint}")]
    NotTolerated {
        /// The first untolerated taint.
        taint: Taint,
    },
}

/// Checks that every taint is tolerated by some toleration, naming the first one (in the given
/// order) that is not. All effects count, `PreferNoSchedule` included: the scheduler relaxes
/// those later by adding [`prefer_no_schedule_wildcard`].
pub fn tolerates_all(tolerations: &[Toleration], taints: &[Taint]) -> Result<(), TaintError> {
    match taints
        .iter()
        .find(|taint| !tolerations.iter().any(|t| t.tolerates(taint)))
    {
        Some(taint) => Err(TaintError::NotTolerated {
            taint: taint.clone(),
        }),
        None => Ok(()),
    }
}

/// The toleration the scheduler adds when relaxing preferences: `{operator: Exists, effect:
/// PreferNoSchedule}`, which tolerates every `PreferNoSchedule` taint.
pub fn prefer_no_schedule_wildcard() -> Toleration {
    Toleration {
        operator: Some(TolerationOperator::Exists),
        effect: Some(TaintEffect::PreferNoSchedule),
        ..Toleration::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Karpenter's well-known taints
// ---------------------------------------------------------------------------------------------

/// The disrupted taint, `karpenter.sh/disrupted:NoSchedule`, put on nodes being disrupted or
/// drained.
pub fn disrupted_taint() -> Taint {
    Taint::new(labels::DISRUPTED_TAINT_KEY, "", TaintEffect::NoSchedule)
}

/// The unregistered taint, `karpenter.sh/unregistered:NoExecute`, that nodes carry until
/// registration completes.
pub fn unregistered_taint() -> Taint {
    Taint::new(labels::UNREGISTERED_TAINT_KEY, "", TaintEffect::NoExecute)
}

/// Taints whose presence means the Node is still starting (matched by key and effect; any key
/// prefixed `readiness.k8s.io/` also counts).
pub fn known_ephemeral_taints() -> [Taint; 5] {
    [
        Taint::new("node.kubernetes.io/not-ready", "", TaintEffect::NoSchedule),
        Taint::new("node.kubernetes.io/not-ready", "", TaintEffect::NoExecute),
        Taint::new(
            "node.kubernetes.io/unreachable",
            "",
            TaintEffect::NoSchedule,
        ),
        Taint::new(
            "node.cloudprovider.kubernetes.io/uninitialized",
            "true",
            TaintEffect::NoSchedule,
        ),
        unregistered_taint(),
    ]
}

/// The prefix of readiness-gate taint keys, treated as known ephemeral taints.
pub const READINESS_TAINT_PREFIX: &str = "readiness.k8s.io/";

/// Whether a Node taint is a known ephemeral taint.
pub fn is_known_ephemeral_taint(taint: &Taint) -> bool {
    taint.key.starts_with(READINESS_TAINT_PREFIX)
        || known_ephemeral_taints().iter().any(|k| k.matches(taint))
}

#[cfg(test)]
mod tests {
    use super::*;
    use TaintEffect::*;
    use TolerationOperator::*;

    fn tol(
        key: &str,
        op: Option<TolerationOperator>,
        value: &str,
        effect: Option<TaintEffect>,
    ) -> Toleration {
        Toleration {
            key: key.to_owned(),
            operator: op,
            value: value.to_owned(),
            effect,
            toleration_seconds: None,
        }
    }

    #[test]
    fn display_and_matches() {
        assert_eq!(
            Taint::new("a", "b", NoSchedule).to_string(),
            "a=b:NoSchedule"
        );
        assert_eq!(
            Taint::new("a", "", PreferNoSchedule).to_string(),
            "a:PreferNoSchedule"
        );
        assert!(Taint::new("a", "x", NoSchedule).matches(&Taint::new("a", "y", NoSchedule)));
        assert!(!Taint::new("a", "x", NoSchedule).matches(&Taint::new("a", "x", NoExecute)));
        assert!(!Taint::new("a", "x", NoSchedule).matches(&Taint::new("b", "x", NoSchedule)));
    }

    #[test]
    fn effect_rule() {
        let taint = Taint::new("k", "v", NoExecute);
        assert!(tol("k", Some(Equal), "v", None).tolerates(&taint));
        assert!(tol("k", Some(Equal), "v", Some(NoExecute)).tolerates(&taint));
        assert!(!tol("k", Some(Equal), "v", Some(NoSchedule)).tolerates(&taint));
    }

    #[test]
    fn key_rule() {
        let taint = Taint::new("k", "v", NoSchedule);
        assert!(tol("", Some(Exists), "", None).tolerates(&taint));
        assert!(tol("", Some(Exists), "", Some(NoSchedule)).tolerates(&taint));
        assert!(!tol("", Some(Exists), "", Some(NoExecute)).tolerates(&taint));
        // Empty key is only meaningful with Exists.
        assert!(!tol("", Some(Equal), "v", None).tolerates(&taint));
        assert!(!tol("", None, "v", None).tolerates(&taint));
        assert!(!tol("other", Some(Exists), "", None).tolerates(&taint));
        assert!(tol("k", Some(Exists), "", None).tolerates(&taint));
    }

    #[test]
    fn value_rule() {
        let taint = Taint::new("k", "v", NoSchedule);
        assert!(tol("k", Some(Exists), "ignored", None).tolerates(&taint));
        assert!(tol("k", Some(Equal), "v", None).tolerates(&taint));
        assert!(tol("k", None, "v", None).tolerates(&taint));
        assert!(!tol("k", None, "w", None).tolerates(&taint));
        assert!(!tol("k", None, "", None).tolerates(&taint));
        let empty = Taint::new("k", "", NoSchedule);
        assert!(tol("k", None, "", None).tolerates(&empty));
    }

    #[test]
    fn numeric_rule() {
        let taint = Taint::new("k", "5", NoSchedule);
        assert!(tol("k", Some(Gt), "4", None).tolerates(&taint));
        assert!(!tol("k", Some(Gt), "5", None).tolerates(&taint));
        assert!(!tol("k", Some(Gt), "6", None).tolerates(&taint));
        assert!(tol("k", Some(Lt), "6", None).tolerates(&taint));
        assert!(!tol("k", Some(Lt), "5", None).tolerates(&taint));
        assert!(tol("k", Some(Gt), "-10", None).tolerates(&taint));
        // Non-integers never match.
        assert!(!tol("k", Some(Gt), "x", None).tolerates(&taint));
        assert!(!tol("k", Some(Lt), "5.5", None).tolerates(&taint));
        assert!(!tol("k", Some(Lt), "", None).tolerates(&taint));
        let text = Taint::new("k", "big", NoSchedule);
        assert!(!tol("k", Some(Gt), "1", None).tolerates(&text));
        assert!(!tol("k", Some(Lt), "1", None).tolerates(&text));
        // Key and effect still apply.
        assert!(!tol("j", Some(Gt), "1", None).tolerates(&taint));
        assert!(!tol("k", Some(Gt), "1", Some(NoExecute)).tolerates(&taint));
    }

    #[test]
    fn tolerates_all_reports_first_untolerated() {
        let taints = [
            Taint::new("a", "1", NoSchedule),
            Taint::new("b", "2", NoSchedule),
            Taint::new("c", "", PreferNoSchedule),
        ];
        assert_eq!(tolerates_all(&[], &[]), Ok(()));
        let err = tolerates_all(&[tol("a", None, "1", None)], &taints);
        assert_eq!(
            err,
            Err(TaintError::NotTolerated {
                taint: Taint::new("b", "2", NoSchedule)
            })
        );
        assert_eq!(
            err.err().map(|e| e.to_string()).as_deref(),
            Some("did not tolerate taint b=2:NoSchedule")
        );
        // PreferNoSchedule must be tolerated too, until the wildcard is added.
        let tols = [tol("a", None, "1", None), tol("b", Some(Exists), "", None)];
        assert_eq!(
            tolerates_all(&tols, &taints)
                .err()
                .map(|e| e.to_string())
                .as_deref(),
            Some("did not tolerate taint c:PreferNoSchedule")
        );
        let mut relaxed = tols.to_vec();
        relaxed.push(prefer_no_schedule_wildcard());
        assert_eq!(tolerates_all(&relaxed, &taints), Ok(()));
        // The wildcard tolerates nothing else.
        assert!(!prefer_no_schedule_wildcard().tolerates(&Taint::new("a", "1", NoSchedule)));
        assert!(prefer_no_schedule_wildcard().tolerates(&Taint::new("z", "q", PreferNoSchedule)));
        // A universal toleration tolerates everything.
        assert_eq!(
            tolerates_all(&[tol("", Some(Exists), "", None)], &taints),
            Ok(())
        );
    }

    #[test]
    fn serde_round_trip() {
        let t: Toleration = serde_json::from_str(
            r#"{"key":"k","operator":"Gt","value":"3","effect":"NoSchedule"}"#,
        )
        .unwrap_or_default();
        assert_eq!(t, tol("k", Some(Gt), "3", Some(NoSchedule)));
        assert!(t.tolerates(&Taint::new("k", "4", NoSchedule)));
    }
}
