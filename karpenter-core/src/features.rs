//! Upstream's operator-wide settings that change decisions, parsed once for every shell (the
//! controller's `FEATURE_GATES`, `PREFERENCE_POLICY` and `MIN_VALUES_POLICY`; `karpenter plan`
//! and `karpenter simulate`'s `--feature-gates`, `--preference-policy` and
//! `--min-values-policy`).
//!
//! Feature gates are written as upstream writes them: `Name=true,Other=false`, names
//! case-sensitive, values as Go's `strconv.ParseBool` reads them (`true`, `True`, `TRUE`, `t`,
//! `T`, `1` and their false counterparts). Gates not mentioned keep upstream's defaults
//! ([`FeatureGates::default`]); a gate upstream does not have is an error, as is a gate a shell
//! cannot honour ([`FeatureGates::require_supported`]).
//!
//! ```
//! use karpenter_core::features::{FeatureGates, Gate};
//!
//! let gates: FeatureGates = "SpotToSpotConsolidation=true".parse().unwrap();
//! assert!(gates.enabled(Gate::SpotToSpotConsolidation));
//! assert!(gates.enabled(Gate::ReservedCapacity), "upstream's default is kept");
//! assert!("SpotToSpot=true".parse::<FeatureGates>().is_err());
//! ```

use std::fmt;
use std::str::FromStr;

use crate::scheduling::{MinValuesPolicy, PreferencePolicy};

/// One of upstream's feature gates (v1.14).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Gate {
    /// Node auto-repair from the provider's repair policies (default off).
    NodeRepair,
    /// Reserved-capacity offerings (capacity reservations) are scheduled (default on).
    ReservedCapacity,
    /// Consolidation may replace a spot node by a cheaper spot node (default off).
    SpotToSpotConsolidation,
    /// NodeOverlay objects adjust instance types' prices and capacity (default off).
    NodeOverlay,
    /// NodePools with `spec.replicas` (default off).
    StaticCapacity,
    /// CapacityBuffer objects (default off).
    CapacityBuffer,
}

impl Gate {
    /// Every gate, in upstream's order.
    pub const ALL: [Gate; 6] = [
        Gate::NodeRepair,
        Gate::ReservedCapacity,
        Gate::SpotToSpotConsolidation,
        Gate::NodeOverlay,
        Gate::StaticCapacity,
        Gate::CapacityBuffer,
    ];

    /// The gate's name as written in `FEATURE_GATES`.
    pub fn name(self) -> &'static str {
        match self {
            Gate::NodeRepair => "NodeRepair",
            Gate::ReservedCapacity => "ReservedCapacity",
            Gate::SpotToSpotConsolidation => "SpotToSpotConsolidation",
            Gate::NodeOverlay => "NodeOverlay",
            Gate::StaticCapacity => "StaticCapacity",
            Gate::CapacityBuffer => "CapacityBuffer",
        }
    }

    /// Upstream's default value.
    pub fn default_value(self) -> bool {
        matches!(self, Gate::ReservedCapacity)
    }

    fn index(self) -> usize {
        Gate::ALL.iter().position(|g| *g == self).unwrap_or(0)
    }
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Upstream's defaults as a `FEATURE_GATES` string (the controller's default value).
pub const DEFAULT_FEATURE_GATES: &str = "NodeRepair=false,ReservedCapacity=true,\
SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false";

/// Why settings could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// An entry without `=`.
    #[error("feature gate {entry:?}: expected Name=true or Name=false")]
    MissingValue {
        /// The entry as written.
        entry: String,
    },
    /// A gate upstream does not have.
    #[error("unknown feature gate {name:?} (known: {known})")]
    UnknownGate {
        /// The name as written.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// A value that is not a boolean.
    #[error("feature gate {gate}: {value:?} is not true or false")]
    BadValue {
        /// The gate.
        gate: Gate,
        /// The value as written.
        value: String,
    },
    /// A gate this shell cannot honour in the state asked for.
    #[error("{gate}={value}: {reason}")]
    Unsupported {
        /// The gate.
        gate: Gate,
        /// The value asked for.
        value: bool,
        /// Why it is refused.
        reason: String,
    },
    /// A `PREFERENCE_POLICY` other than `Respect` or `Ignore`.
    #[error("invalid preference policy {0:?}: expected Respect or Ignore")]
    PreferencePolicy(String),
    /// A `MIN_VALUES_POLICY` other than `Strict` or `BestEffort`.
    #[error("invalid min-values policy {0:?}: expected Strict or BestEffort")]
    MinValuesPolicy(String),
}

/// The feature gates, every one set (to upstream's default unless given).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureGates {
    values: [bool; 6],
    given: [bool; 6],
}

impl Default for FeatureGates {
    /// Upstream's defaults: only `ReservedCapacity` on.
    fn default() -> Self {
        FeatureGates {
            values: Gate::ALL.map(Gate::default_value),
            given: [false; 6],
        }
    }
}

impl FeatureGates {
    /// Whether `gate` is on.
    pub fn enabled(&self, gate: Gate) -> bool {
        self.values[gate.index()]
    }

    /// Whether `gate` was written in the parsed text (rather than defaulted).
    pub fn given(&self, gate: Gate) -> bool {
        self.given[gate.index()]
    }

    /// The gates with `gate` set to `on`.
    pub fn with(mut self, gate: Gate, on: bool) -> Self {
        self.values[gate.index()] = on;
        self.given[gate.index()] = true;
        self
    }

    /// Refuses the gate states a shell cannot honour: each `(gate, value, reason)` of
    /// `unsupported` whose gate has that value is an error naming the reason.
    pub fn require_supported(
        &self,
        unsupported: &[(Gate, bool, &str)],
    ) -> Result<(), SettingsError> {
        for (gate, value, reason) in unsupported {
            if self.enabled(*gate) == *value {
                return Err(SettingsError::Unsupported {
                    gate: *gate,
                    value: *value,
                    reason: (*reason).to_string(),
                });
            }
        }
        Ok(())
    }
}

impl fmt::Display for FeatureGates {
    /// Every gate as `Name=value`, comma-separated, in upstream's order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, gate) in Gate::ALL.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}={}", gate.name(), self.enabled(*gate))?;
        }
        Ok(())
    }
}

/// Go's `strconv.ParseBool`.
fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

impl FromStr for FeatureGates {
    type Err = SettingsError;

    /// Parses `Name=true,Other=false` over upstream's defaults (entries trimmed, empty
    /// entries skipped, a later entry for the same gate wins), as upstream's
    /// `ParseFeatureGates` does, but refusing unknown names.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut gates = FeatureGates::default();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (name, value) =
                entry
                    .split_once('=')
                    .ok_or_else(|| SettingsError::MissingValue {
                        entry: entry.to_string(),
                    })?;
            let name = name.trim();
            let gate = Gate::ALL
                .into_iter()
                .find(|g| g.name() == name)
                .ok_or_else(|| SettingsError::UnknownGate {
                    name: name.to_string(),
                    known: Gate::ALL.map(Gate::name).join(", "),
                })?;
            let value = parse_bool(value.trim()).ok_or_else(|| SettingsError::BadValue {
                gate,
                value: value.trim().to_string(),
            })?;
            gates = gates.with(gate, value);
        }
        Ok(gates)
    }
}

impl FromStr for PreferencePolicy {
    type Err = SettingsError;

    /// `Respect` or `Ignore`, case-sensitive as upstream.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "Respect" => Ok(PreferencePolicy::Respect),
            "Ignore" => Ok(PreferencePolicy::Ignore),
            other => Err(SettingsError::PreferencePolicy(other.to_string())),
        }
    }
}

impl FromStr for MinValuesPolicy {
    type Err = SettingsError;

    /// `Strict` or `BestEffort`, case-sensitive as upstream.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "Strict" => Ok(MinValuesPolicy::Strict),
            "BestEffort" => Ok(MinValuesPolicy::BestEffort),
            other => Err(SettingsError::MinValuesPolicy(other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_upstreams() {
        let d = FeatureGates::default();
        for gate in Gate::ALL {
            assert_eq!(d.enabled(gate), gate == Gate::ReservedCapacity, "{gate}");
            assert!(!d.given(gate));
        }
        assert_eq!(
            DEFAULT_FEATURE_GATES
                .parse::<FeatureGates>()
                .unwrap()
                .to_string(),
            d.to_string()
        );
        assert_eq!("".parse::<FeatureGates>().unwrap(), d);
    }

    #[test]
    fn entries_override_defaults_and_parse_like_go() {
        let g: FeatureGates = " NodeRepair = T , ReservedCapacity=0,,NodeRepair=true"
            .parse()
            .unwrap();
        assert!(g.enabled(Gate::NodeRepair));
        assert!(!g.enabled(Gate::ReservedCapacity));
        assert!(g.given(Gate::ReservedCapacity));
        assert!(!g.enabled(Gate::NodeOverlay) && !g.given(Gate::NodeOverlay));
        assert_eq!(
            g.to_string(),
            "NodeRepair=true,ReservedCapacity=false,SpotToSpotConsolidation=false,\
             NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false"
        );
    }

    #[test]
    fn bad_entries_are_named() {
        let e = "NodeRepiar=true".parse::<FeatureGates>().unwrap_err();
        assert!(
            e.to_string()
                .contains("unknown feature gate \"NodeRepiar\""),
            "{e}"
        );
        assert!(e.to_string().contains("NodeOverlay"), "{e}");
        let e = "nodeoverlay=true".parse::<FeatureGates>().unwrap_err();
        assert!(
            matches!(e, SettingsError::UnknownGate { .. }),
            "names are case-sensitive"
        );
        let e = "NodeRepair".parse::<FeatureGates>().unwrap_err();
        assert_eq!(
            e,
            SettingsError::MissingValue {
                entry: "NodeRepair".into()
            }
        );
        let e = "NodeRepair=yes".parse::<FeatureGates>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "feature gate NodeRepair: \"yes\" is not true or false"
        );
    }

    #[test]
    fn unsupported_states_are_refused_with_their_reason() {
        let g: FeatureGates = "StaticCapacity=true".parse().unwrap();
        let rules = [
            (Gate::StaticCapacity, true, "not implemented"),
            (Gate::ReservedCapacity, false, "always on"),
        ];
        let e = g.require_supported(&rules).unwrap_err();
        assert_eq!(e.to_string(), "StaticCapacity=true: not implemented");
        let e = "ReservedCapacity=false"
            .parse::<FeatureGates>()
            .unwrap()
            .require_supported(&rules);
        assert_eq!(
            e.unwrap_err().to_string(),
            "ReservedCapacity=false: always on"
        );
        assert_eq!(FeatureGates::default().require_supported(&rules), Ok(()));
    }

    #[test]
    fn policies_parse_case_sensitively() {
        assert_eq!("Ignore".parse(), Ok(PreferencePolicy::Ignore));
        assert_eq!("Respect".parse(), Ok(PreferencePolicy::Respect));
        assert!("ignore".parse::<PreferencePolicy>().is_err());
        assert_eq!("BestEffort".parse(), Ok(MinValuesPolicy::BestEffort));
        assert_eq!("Strict".parse(), Ok(MinValuesPolicy::Strict));
        let e = "Lax".parse::<MinValuesPolicy>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid min-values policy \"Lax\": expected Strict or BestEffort"
        );
    }
}
