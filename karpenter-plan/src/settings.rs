//! Upstream's decision-changing settings for `plan` and `simulate`: `--feature-gates`,
//! `--preference-policy` and `--min-values-policy`, read as the controller reads
//! `FEATURE_GATES`, `PREFERENCE_POLICY` and `MIN_VALUES_POLICY` ([`karpenter_core::features`]).

use karpenter_core::features::{FeatureGates, Gate};
use karpenter_core::labels::LabelPolicy;
use karpenter_core::scheduling::{MinValuesPolicy, PreferencePolicy, SchedulerOptions};

use crate::error::PlanError;

/// The gate states `plan` and `simulate` refuse, and why.
pub const UNSUPPORTED_GATES: &[(Gate, bool, &str)] = &[
    (
        Gate::StaticCapacity,
        true,
        "NodePools with spec.replicas are not provisioned by this build yet; leave it false",
    ),
    (
        Gate::CapacityBuffer,
        true,
        "CapacityBuffer objects are not implemented by this build; leave it false",
    ),
    (
        Gate::ReservedCapacity,
        false,
        "this build always schedules reserved offerings as upstream's default does; leave it true",
    ),
];

/// The settings, upstream's defaults unless given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Settings {
    /// `--feature-gates`.
    pub feature_gates: FeatureGates,
    /// `--preference-policy`.
    pub preference_policy: PreferencePolicy,
    /// `--min-values-policy`.
    pub min_values_policy: MinValuesPolicy,
}

impl Settings {
    /// Parses the three flags (each `None` when not given), refusing unknown gates, unknown
    /// policy values and the gate states of [`UNSUPPORTED_GATES`].
    pub fn parse(
        feature_gates: Option<&str>,
        preference_policy: Option<&str>,
        min_values_policy: Option<&str>,
    ) -> Result<Settings, PlanError> {
        let input =
            |flag: &str, e: &dyn std::fmt::Display| PlanError::Input(format!("{flag}: {e}"));
        let mut s = Settings::default();
        if let Some(text) = feature_gates {
            s.feature_gates = text.parse().map_err(|e| input("--feature-gates", &e))?;
        }
        s.feature_gates
            .require_supported(UNSUPPORTED_GATES)
            .map_err(|e| input("--feature-gates", &e))?;
        if let Some(text) = preference_policy {
            s.preference_policy = text.parse().map_err(|e| input("--preference-policy", &e))?;
        }
        if let Some(text) = min_values_policy {
            s.min_values_policy = text.parse().map_err(|e| input("--min-values-policy", &e))?;
        }
        Ok(s)
    }

    /// Whether `gate` is on.
    pub fn enabled(&self, gate: Gate) -> bool {
        self.feature_gates.enabled(gate)
    }

    /// The scheduler's options under these settings and `policy`.
    pub fn scheduler_options(&self, policy: LabelPolicy) -> SchedulerOptions {
        SchedulerOptions::default()
            .with_label_policy(policy)
            .with_preference_policy(self.preference_policy)
            .with_min_values_policy(self.min_values_policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_over_upstreams_defaults_and_name_themselves_when_wrong() {
        let s = Settings::parse(None, None, None).unwrap();
        assert_eq!(s, Settings::default());
        assert!(s.enabled(Gate::ReservedCapacity));
        let s = Settings::parse(
            Some("SpotToSpotConsolidation=true,NodeOverlay=true"),
            Some("Ignore"),
            Some("BestEffort"),
        )
        .unwrap();
        assert!(s.enabled(Gate::SpotToSpotConsolidation) && s.enabled(Gate::NodeOverlay));
        let o = s.scheduler_options(LabelPolicy::core());
        assert_eq!(o.preference_policy, PreferencePolicy::Ignore);
        assert_eq!(o.min_values_policy, MinValuesPolicy::BestEffort);
        for (args, needle) in [
            (
                (Some("Bogus=true"), None, None),
                "--feature-gates: unknown feature gate \"Bogus\"",
            ),
            (
                (Some("StaticCapacity=true"), None, None),
                "--feature-gates: StaticCapacity=true",
            ),
            (
                (Some("ReservedCapacity=false"), None, None),
                "ReservedCapacity=false",
            ),
            (
                (None, Some("Prefer"), None),
                "--preference-policy: invalid preference policy",
            ),
            (
                (None, None, Some("strict")),
                "--min-values-policy: invalid min-values policy",
            ),
        ] {
            let e = Settings::parse(args.0, args.1, args.2).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains(needle), "{e}");
        }
    }
}
