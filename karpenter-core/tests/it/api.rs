//! `karpenter_core::api`: the seed guide's manifests, round-trips, validation of malformed
//! NodePools, unknown fields, and budget arithmetic.

use std::path::PathBuf;

use karpenter_core::api::{
    self, ApiError, Budget, ConsolidationPolicy, Disruption, DisruptionReason, Duration, Limits,
    NillableDuration, NodeClaim, NodePool, Object, UNBOUNDED_DISRUPTIONS, ValidationErrorKind,
    ValidationErrors,
};
use karpenter_core::labels::LabelPolicy;
use karpenter_core::requirements::{NodeSelectorRequirement, Operator};
use karpenter_core::resources::Quantity;
use karpenter_core::taints::{Taint, TaintEffect};
use proptest::prelude::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Helpers

fn fixture(name: &str) -> String {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "tests",
        "fixtures",
        "seed",
        name,
    ]
    .iter()
    .collect();
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every YAML document of a fixture, as JSON values.
fn docs(name: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn one_doc(name: &str) -> Value {
    let mut d = docs(name);
    assert_eq!(d.len(), 1, "{name} should hold one document");
    d.remove(0)
}

fn core() -> LabelPolicy {
    LabelPolicy::core()
}

/// A policy like the AWS provider's: its own domain restricted, its instance labels well-known.
fn aws_like() -> LabelPolicy {
    LabelPolicy::core()
        .with_restricted_domains(["karpenter.k8s.aws"])
        .with_well_known([
            "karpenter.k8s.aws/instance-category",
            "karpenter.k8s.aws/instance-family",
            "karpenter.k8s.aws/instance-generation",
            "karpenter.k8s.aws/instance-size",
        ])
}

/// A minimal valid NodePool.
fn base() -> Value {
    json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            "requirements": [
                {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
            ]
        }}}
    })
}

/// Merges `patch` into `target`: objects key by key, anything else replaced.
fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p.clone(),
    }
}

fn with(patch: Value) -> Value {
    let mut v = base();
    merge(&mut v, &patch);
    v
}

fn parse_pool(value: Value) -> NodePool {
    match api::nodepool_from_value(value) {
        Ok(p) => {
            assert!(
                p.unknown_fields.is_empty(),
                "unknown: {:?}",
                p.unknown_fields
            );
            p.object
        }
        Err(e) => panic!("{e}"),
    }
}

/// The validation errors of a NodePool that must be invalid.
fn invalid(value: Value) -> ValidationErrors {
    match parse_pool(value).validate(&core()) {
        Ok(()) => panic!("should be invalid"),
        Err(e) => e,
    }
}

fn assert_error(errs: &ValidationErrors, path: &str, kind: ValidationErrorKind) {
    assert!(
        errs.errors()
            .iter()
            .any(|e| e.path == path && e.kind == kind),
        "expected {kind:?} at {path}, got: {errs}"
    );
}

/// The schema errors of a value that must not decode.
fn undecodable(value: Value) -> ValidationErrors {
    match api::nodepool_from_value(value) {
        Ok(p) => panic!("should not decode: {:?}", p.object),
        Err(ApiError::Schema { errors, .. }) => errors,
        Err(e) => panic!("expected a schema error, got {e}"),
    }
}

/// Rewrites the quantities of the resource lists in `v` to their canonical form (`"1000"` →
/// `"1k"`), which is how quantities serialise (as Go's `resource.Quantity` does).
fn canonical_quantities(v: &mut Value) {
    let lists = [
        "/spec/limits",
        "/spec/resources/requests",
        "/status/capacity",
        "/status/allocatable",
        "/status/resources",
    ];
    for pointer in lists {
        if let Some(Value::Object(map)) = v.pointer_mut(pointer) {
            for q in map.values_mut() {
                let text = match &*q {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                let parsed = Quantity::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
                *q = Value::String(parsed.to_string());
            }
        }
    }
}

fn ts(s: &str) -> jiff::Timestamp {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// Seeds

const NODEPOOL_FILES: [(&str, &[&str]); 10] = [
    ("4.1-nodepool-general-purpose.yaml", &["general-purpose"]),
    ("5.1-nodepool-structure.yaml", &["example"]),
    (
        "5.2-pattern1-workload-types.yaml",
        &["general", "compute-intensive", "memory-intensive"],
    ),
    (
        "5.2-pattern2-spot-on-demand.yaml",
        &["spot-preferred", "on-demand-fallback"],
    ),
    ("7.6-nodepool-gpu-workloads.yaml", &["gpu-workloads"]),
    ("11.1-nodepool-spot-workloads.yaml", &["spot-workloads"]),
    (
        "12.1-multi-arch-nodepools.yaml",
        &["arm-preferred", "amd-fallback"],
    ),
    ("18.1-nodepool-team-a.yaml", &["team-a"]),
    ("18.2-nodepool-batch-jobs.yaml", &["batch-jobs"]),
    ("18.3-nodepool-ml-training.yaml", &["ml-training"]),
];

#[test]
fn every_seed_nodepool_parses_and_round_trips() {
    for (file, names) in NODEPOOL_FILES {
        let values = docs(file);
        assert_eq!(values.len(), names.len(), "{file}");
        for (value, name) in values.into_iter().zip(names.iter()) {
            // Through the schema walk: no unknown fields.
            let parsed =
                api::nodepool_from_value(value.clone()).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert!(
                parsed.unknown_fields.is_empty(),
                "{file}: {:?}",
                parsed.unknown_fields
            );
            let pool = parsed.object;
            assert_eq!(pool.name(), *name);

            // Serialising gives back the manifest, field for field (5.1's empty maps and lists,
            // which upstream omits too, aside; quantities in canonical form).
            let mut expected = value.clone();
            canonical_quantities(&mut expected);
            if file.starts_with("5.1") {
                let t = &mut expected["spec"]["template"];
                if let Some(o) = t.as_object_mut() {
                    o.remove("metadata");
                }
                if let Some(o) = t["spec"].as_object_mut() {
                    o.remove("taints");
                    o.remove("startupTaints");
                }
            }
            let out = serde_json::to_value(&pool).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(out, expected, "{file}: serialised form differs");

            // YAML → typed → YAML → typed gives an equal object.
            let yaml = serde_saphyr::to_string(&pool).unwrap_or_else(|e| panic!("{file}: {e}"));
            let again: NodePool =
                serde_saphyr::from_str(&yaml).unwrap_or_else(|e| panic!("{file}: {e}\n{yaml}"));
            assert_eq!(again, pool, "{file}: YAML round trip");
        }
    }
}

#[test]
fn seed_nodepools_decode_directly_from_yaml() {
    // Single-document files decode straight into the typed objects (no Value in between).
    for (file, names) in NODEPOOL_FILES {
        if names.len() == 1 {
            let pool: NodePool =
                serde_saphyr::from_str(&fixture(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(pool.name(), names[0]);
        } else {
            let pools: Vec<NodePool> = serde_saphyr::from_multiple(&fixture(file))
                .unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(pools.len(), names.len());
        }
    }
    let claim: NodeClaim = serde_saphyr::from_str(&fixture("4.2-nodeclaim-status.yaml"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(claim.name(), "general-purpose-abc123");
}

#[test]
fn seed_nodepools_validate_except_team_a() {
    for (file, _) in NODEPOOL_FILES {
        for value in docs(file) {
            let pool = parse_pool(value);
            for policy in [core(), aws_like()] {
                let result = pool.validate(&policy);
                if file.starts_with("18.1") {
                    continue;
                }
                assert!(result.is_ok(), "{file} ({}): {:?}", pool.name(), result);
            }
        }
    }
}

#[test]
fn seed_values_are_read_as_written() {
    let pool = parse_pool(one_doc("4.1-nodepool-general-purpose.yaml"));
    let spec = &pool.spec;
    assert_eq!(spec.weight, Some(50));
    assert_eq!(
        spec.template
            .metadata
            .labels
            .get("team")
            .map(String::as_str),
        Some("platform")
    );
    let reqs = spec.template.spec.requirements();
    assert_eq!(reqs.len(), 4);
    assert_eq!(reqs[1].key, "karpenter.sh/capacity-type");
    assert_eq!(reqs[1].values, ["on-demand", "spot"]);
    assert_eq!(reqs[3].operator, Operator::Gt);
    let limits = spec
        .limits
        .as_ref()
        .map(|l| (l.get("cpu"), l.get("memory")));
    assert_eq!(
        limits,
        Some((Quantity::parse("1000").ok(), Quantity::parse("1000Gi").ok()))
    );
    assert_eq!(
        spec.disruption.consolidation_policy,
        Some(ConsolidationPolicy::WhenEmptyOrUnderutilized)
    );
    assert_eq!(
        spec.disruption
            .consolidate_after
            .as_ref()
            .and_then(NillableDuration::duration)
            .map(Duration::as_secs),
        Some(60)
    );
    // Defaults the manifest leaves out.
    assert_eq!(spec.disruption.effective_budgets(), [Budget::nodes("10%")]);
    assert_eq!(
        spec.template.spec.effective_expire_after().as_str(),
        api::DEFAULT_EXPIRE_AFTER
    );
    assert_eq!(
        spec.template
            .spec
            .effective_expire_after()
            .duration()
            .map(Duration::as_secs),
        Some(720 * 3600)
    );

    let batch = parse_pool(one_doc("18.2-nodepool-batch-jobs.yaml"));
    assert_eq!(
        batch
            .spec
            .template
            .spec
            .expire_after
            .as_ref()
            .map(NillableDuration::as_str),
        Some("24h")
    );
    assert_eq!(
        batch.spec.disruption.effective_consolidation_policy(),
        ConsolidationPolicy::WhenEmpty
    );
    assert_eq!(
        batch.spec.template.spec.taints,
        [Taint {
            key: "workload-type".into(),
            value: "batch".into(),
            effect: TaintEffect::NoSchedule,
            time_added: None
        }]
    );

    // 5.1 writes `budgets: []`: no budget at all, which upstream treats as unbounded.
    let structure = parse_pool(one_doc("5.1-nodepool-structure.yaml"));
    assert_eq!(structure.spec.disruption.budgets, Some(vec![]));
    assert!(structure.spec.disruption.effective_budgets().is_empty());
    assert_eq!(
        structure
            .spec
            .template
            .spec
            .termination_grace_period
            .as_ref()
            .map(Duration::as_secs),
        Some(24 * 3600)
    );
    assert_eq!(
        structure.allowed_disruptions(DisruptionReason::Empty, 10, ts("2024-01-01T00:00:00Z")),
        Ok(UNBOUNDED_DISRUPTIONS)
    );
}

#[test]
fn team_a_is_rejected_for_its_missing_requirements() {
    // The v1 CRD lists `requirements` as required in spec.template.spec; the API server rejects
    // the object ("Required value"). Here it decodes, and validation names the field.
    let pool = parse_pool(one_doc("18.1-nodepool-team-a.yaml"));
    assert_eq!(pool.spec.template.spec.requirements, None);
    assert!(pool.spec.template.spec.requirements().is_empty());
    for policy in [core(), aws_like()] {
        let errs = pool.validate(&policy).err().unwrap_or_default();
        assert_eq!(errs.paths(), ["spec.template.spec.requirements"], "{errs}");
        assert_eq!(errs.errors()[0].kind, ValidationErrorKind::Required);
    }
    // With an empty list added, it is valid.
    let mut fixed = pool.clone();
    fixed.spec.template.spec.requirements = Some(vec![]);
    assert_eq!(fixed.validate(&core()), Ok(()));
}

#[test]
fn nodeclaim_status_seed_has_two_unknown_fields_and_no_transition_time() {
    let value = one_doc("4.2-nodeclaim-status.yaml");
    assert_eq!(
        api::unknown_fields_nodeclaim(&value),
        ["status.instanceType", "status.zone"]
    );
    let parsed = api::nodeclaim_from_value(value.clone()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        parsed.unknown_fields,
        ["status.instanceType", "status.zone"]
    );
    let claim = parsed.object;
    assert_eq!(
        claim.status.provider_id.as_deref(),
        Some("aws:///us-west-2a/i-0123456789abcdef0")
    );
    assert_eq!(
        claim.status.capacity.get("pods"),
        Quantity::parse("58").ok()
    );
    assert_eq!(
        claim.status.allocatable.get("cpu"),
        Some(Quantity::from_milli(3920))
    );
    assert_eq!(claim.status.conditions.len(), 1);
    assert!(claim.status.conditions[0].is_true());
    assert_eq!(claim.status.conditions[0].last_transition_time, None);

    // Upstream's CRD requires lastTransitionTime on every condition: that is the only problem.
    let errs = claim.validate().err().unwrap_or_default();
    assert_eq!(
        errs.paths(),
        ["status.conditions[0].lastTransitionTime"],
        "{errs}"
    );
    assert_eq!(errs.errors()[0].kind, ValidationErrorKind::Required);

    // Serialising keeps upstream's field names (providerID, not providerId) and drops the
    // unknown fields, as the API server prunes them.
    let mut expected = value;
    canonical_quantities(&mut expected);
    if let Some(status) = expected["status"].as_object_mut() {
        status.remove("instanceType");
        status.remove("zone");
    }
    assert_eq!(serde_json::to_value(&claim).ok(), Some(expected));

    let yaml = serde_saphyr::to_string(&claim).unwrap_or_default();
    let again: NodeClaim = serde_saphyr::from_str(&yaml).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again, claim);

    // Through the generic entry point.
    let any = api::object_from_value(one_doc("4.2-nodeclaim-status.yaml"));
    assert!(matches!(
        any,
        Ok(api::Parsed {
            object: Object::NodeClaim(_),
            ..
        })
    ));
}

#[test]
fn object_from_value_dispatches_on_kind() {
    for value in docs("5.2-pattern1-workload-types.yaml") {
        assert!(matches!(
            api::object_from_value(value),
            Ok(api::Parsed {
                object: Object::NodePool(_),
                ..
            })
        ));
    }
    let pdb = json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget"});
    assert_eq!(
        api::object_from_value(pdb),
        Err(ApiError::UnsupportedKind {
            api_version: "policy/v1".into(),
            kind: "PodDisruptionBudget".into()
        })
    );
}

/// Each fragment is merged into a minimal NodePool, which must decode and validate.
#[test]
fn seed_fragments_merge_into_valid_nodepools() {
    let fragments = [
        "5.4-limits-fragment.yaml",
        "5.5-startup-taints-fragment.yaml",
        "8.2-consolidation-when-empty-fragment.yaml",
        "8.2-consolidation-when-empty-or-underutilized-fragment.yaml",
        "8.4-disruption-budgets-fragment.yaml",
        "9.4-rolling-update-budgets-fragment.yaml",
        "10.3-termination-grace-period-fragment.yaml",
        "16.1-nodepool-requirements-fragment.yaml",
    ];
    for file in fragments {
        let pool = parse_pool(with(one_doc(file)));
        assert_eq!(pool.validate(&core()), Ok(()), "{file}");
        assert_eq!(pool.validate(&aws_like()), Ok(()), "{file}");
    }

    let limits: Limits =
        serde_json::from_value(one_doc("5.4-limits-fragment.yaml")["spec"]["limits"].clone())
            .unwrap_or_default();
    assert_eq!(limits.get("cpu"), Quantity::parse("1000").ok());

    let startup: Vec<Taint> = serde_json::from_value(
        one_doc("5.5-startup-taints-fragment.yaml")["spec"]["template"]["spec"]["startupTaints"]
            .clone(),
    )
    .unwrap_or_default();
    assert_eq!(startup.len(), 2);
    assert_eq!(startup[0].key, "node.kubernetes.io/not-ready");

    let grace = parse_pool(with(one_doc("10.3-termination-grace-period-fragment.yaml")));
    assert_eq!(
        grace
            .spec
            .template
            .spec
            .termination_grace_period
            .as_ref()
            .map(Duration::as_secs),
        Some(48 * 3600)
    );

    let reqs: Vec<NodeSelectorRequirement> = serde_json::from_value(
        one_doc("16.1-nodepool-requirements-fragment.yaml")["spec"]["template"]["spec"]["requirements"]
            .clone(),
    )
    .unwrap_or_default();
    assert_eq!(reqs.len(), 3);

    let empty: Disruption = serde_json::from_value(
        one_doc("8.2-consolidation-when-empty-fragment.yaml")["spec"]["disruption"].clone(),
    )
    .unwrap_or_default();
    assert_eq!(
        empty.effective_consolidation_policy(),
        ConsolidationPolicy::WhenEmpty
    );
    assert_eq!(
        empty
            .effective_consolidate_after()
            .duration()
            .map(Duration::as_secs),
        Some(30)
    );
}

// ---------------------------------------------------------------------------------------------
// Budgets of the seed guide

fn budgets_of(file: &str) -> NodePool {
    parse_pool(with(one_doc(file)))
}

#[test]
fn business_hours_and_christmas_budgets() {
    // 8.4: 10% always; none on weekdays 09:00-17:00 UTC; none on Christmas day.
    let pool = budgets_of("8.4-disruption-budgets-fragment.yaml");
    let allowed = |at: &str| {
        DisruptionReason::ALL.map(|r| pool.allowed_disruptions(r, 19, ts(at)).unwrap_or(999))
    };
    // Monday 2024-01-08.
    assert_eq!(allowed("2024-01-08T08:59:59Z"), [2; 3], "before the window");
    assert_eq!(
        allowed("2024-01-08T09:00:00Z"),
        [0; 3],
        "a hit at now counts"
    );
    assert_eq!(allowed("2024-01-08T16:59:59Z"), [0; 3]);
    assert_eq!(
        allowed("2024-01-08T17:00:00Z"),
        [2; 3],
        "the window is (hit, hit + 8h)"
    );
    // Saturday.
    assert_eq!(allowed("2024-01-13T12:00:00Z"), [2; 3]);
    // Christmas 2024 is a Wednesday: blocked all day, also after 17:00.
    assert_eq!(allowed("2024-12-25T20:00:00Z"), [0; 3]);
    assert_eq!(allowed("2024-12-26T00:00:00Z"), [2; 3]);
}

#[test]
fn rolling_update_budgets() {
    // 9.4: 10% always; none on weekdays 14:00-23:00; 25% from Saturday 00:00 for 48h.
    let pool = budgets_of("9.4-rolling-update-budgets-fragment.yaml");
    let at = |t: &str| pool.allowed_disruptions(DisruptionReason::Drifted, 40, ts(t));
    assert_eq!(at("2024-01-12T20:00:00Z"), Ok(0), "Friday evening");
    assert_eq!(
        at("2024-01-13T10:00:00Z"),
        Ok(4),
        "Saturday: min(10%, 25%) of 40"
    );
    assert_eq!(at("2024-01-15T02:00:00Z"), Ok(4), "Monday night");
    assert_eq!(at("2024-01-15T13:59:00Z"), Ok(4));
    assert_eq!(at("2024-01-15T14:00:00Z"), Ok(0));
}

// ---------------------------------------------------------------------------------------------
// Budget arithmetic

fn budget(nodes: &str, schedule: Option<&str>, duration: Option<&str>) -> Budget {
    Budget {
        nodes: nodes.into(),
        schedule: schedule.map(String::from),
        duration: duration.map(|d| Duration::parse(d).unwrap_or_else(|e| panic!("{e}"))),
        reasons: None,
    }
}

fn pool_with_budgets(budgets: Vec<Budget>) -> NodePool {
    let mut pool = parse_pool(base());
    pool.spec.disruption.budgets = Some(budgets);
    pool
}

#[test]
fn budget_counts_and_percentages() {
    let now = ts("2000-06-15T12:30:30Z");
    let n = |nodes: &str, total: usize| budget(nodes, None, None).allowed_disruptions(total, now);
    assert_eq!(n("10%", 19), Ok(2), "percentages round up");
    assert_eq!(n("10%", 20), Ok(2));
    assert_eq!(n("10%", 21), Ok(3));
    assert_eq!(n("5%", 10), Ok(1));
    assert_eq!(n("50%", 3), Ok(2));
    assert_eq!(n("30%", 10), Ok(3));
    assert_eq!(n("0%", 100), Ok(0));
    assert_eq!(n("100%", 7), Ok(7));
    assert_eq!(n("10%", 0), Ok(0));
    assert_eq!(n("0", 19), Ok(0));
    assert_eq!(n("5", 19), Ok(5));
    assert_eq!(n("5", 2), Ok(5), "a count is not capped by the node count");
    assert!(matches!(
        n("1000a%", 10),
        Err(api::BudgetError::InvalidNodes(_))
    ));
    assert!(matches!(
        n("ten", 10),
        Err(api::BudgetError::InvalidNodes(_))
    ));
}

#[test]
fn budget_schedules() {
    let now = ts("2000-06-15T12:30:30Z");
    let every_minute = budget("10", Some("* * * * *"), Some("1h"));
    assert_eq!(every_minute.is_active(now), Ok(true));
    assert_eq!(every_minute.allowed_disruptions(100, now), Ok(10));

    let yearly = budget("10", Some("@yearly"), Some("1h"));
    assert_eq!(yearly.is_active(now), Ok(false));
    assert_eq!(
        yearly.allowed_disruptions(100, now),
        Ok(UNBOUNDED_DISRUPTIONS)
    );

    assert_eq!(budget("10", None, None).is_active(now), Ok(true));

    // The hit is in the middle of the window.
    let new_year = budget("0", Some("@yearly"), Some("24h"));
    assert_eq!(new_year.is_active(ts("1000-01-01T12:00:00Z")), Ok(true));
    // A duration longer than the recurrence: always active.
    let daily_48h = budget("0", Some("@daily"), Some("48h"));
    assert_eq!(daily_48h.is_active(ts("2024-01-07T00:00:00Z")), Ok(true));
    // Sunday 06:30 + 6h, asked at Sunday 00:00: not yet.
    let sunday = budget("0", Some("30 6 * * SUN"), Some("6h"));
    assert_eq!(sunday.is_active(ts("2024-01-07T00:00:00Z")), Ok(false));
    assert_eq!(sunday.is_active(ts("2024-01-07T12:29:59Z")), Ok(true));
    assert_eq!(sunday.is_active(ts("2024-01-07T12:30:00Z")), Ok(false));
    // Always UTC: 00:00 at UTC+1 is 23:00 UTC, outside @daily + 30m.
    let daily = budget("0", Some("@daily"), Some("30m"));
    assert_eq!(daily.is_active(ts("2000-05-31T00:00:00+01:00")), Ok(false));
    assert_eq!(daily.is_active(ts("2000-05-31T00:00:00-00:15")), Ok(true));

    // Invalid schedules fail closed.
    let bad = budget("10", Some("0 0 * * tue-mon"), Some("6h"));
    match bad.is_active(now) {
        Err(api::BudgetError::InvalidSchedule(e)) => {
            assert!(
                e.message
                    .contains("beginning of range (2) beyond end of range (1)"),
                "{e}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(
        budget("10", Some("@wrongly"), Some("1h"))
            .allowed_disruptions(100, now)
            .is_err()
    );
    // A duration without a schedule cannot be evaluated either (validation rejects it).
    assert!(budget("10", None, Some("1h")).is_active(now).is_err());
    // A schedule without a duration is never active (zero-length window).
    assert_eq!(
        budget("10", Some("* * * * *"), None).is_active(now),
        Ok(false)
    );

    // Upstream quirk: a schedule that never fires makes the budget permanently active.
    let never = budget("0", Some("0 0 30 2 *"), Some("1h"));
    assert_eq!(never.is_active(now), Ok(true));
}

#[test]
fn nodepool_budgets_by_reason() {
    let now = ts("2000-06-15T12:30:30Z");
    let with_reasons = |mut b: Budget, reasons: &[DisruptionReason]| {
        b.reasons = Some(reasons.to_vec());
        b
    };
    use DisruptionReason::{Drifted, Empty, Underutilized};
    let pool = pool_with_budgets(vec![
        budget("10", Some("* * * * *"), Some("1h")),
        budget("100%", None, None),
        with_reasons(budget("15", None, None), &[Drifted, Underutilized]),
        with_reasons(budget("5", None, None), &[Drifted]),
        with_reasons(budget("4", None, None), &[Empty]),
        with_reasons(
            budget("0", Some("@weekly"), Some("1h")),
            &[Underutilized, Drifted, Empty],
        ),
        with_reasons(budget("0", None, None), &[]),
    ]);
    assert_eq!(pool.allowed_disruptions(Empty, 100, now), Ok(4));
    assert_eq!(pool.allowed_disruptions(Drifted, 100, now), Ok(5));
    assert_eq!(pool.allowed_disruptions(Underutilized, 100, now), Ok(10));

    // The weekly budget active (Sunday 2000-06-18 00:30) blocks everything.
    let sunday = ts("2000-06-18T00:30:00Z");
    for r in DisruptionReason::ALL {
        assert_eq!(pool.allowed_disruptions(r, 100, sunday), Ok(0));
    }

    // No applicable active budget: unbounded.
    let inactive = pool_with_budgets(vec![budget("1", Some("@yearly"), Some("1h"))]);
    assert_eq!(
        inactive.allowed_disruptions(Empty, 100, now),
        Ok(UNBOUNDED_DISRUPTIONS)
    );

    // Default budgets when the field is absent: 10%.
    let default = parse_pool(base());
    assert_eq!(default.spec.disruption.budgets, None);
    assert_eq!(default.allowed_disruptions(Drifted, 19, now), Ok(2));

    // A broken budget poisons every reason, even ones it does not apply to.
    let broken = pool_with_budgets(vec![
        budget("10", None, None),
        with_reasons(budget("1", Some("@wrongly"), Some("1h")), &[Drifted]),
    ]);
    assert!(broken.allowed_disruptions(Empty, 100, now).is_err());
    assert_eq!(broken.allowed_disruptions_or_zero(Empty, 100, now), 0);
}

// ---------------------------------------------------------------------------------------------
// Malformed NodePools

fn requirement(key: &str, op: &str, values: &[&str]) -> Value {
    json!({"key": key, "operator": op, "values": values})
}

fn with_requirements(reqs: Vec<Value>) -> Value {
    with(json!({"spec": {"template": {"spec": {"requirements": reqs}}}}))
}

fn with_budgets(budgets: Value) -> Value {
    with(json!({"spec": {"disruption": {"budgets": budgets}}}))
}

#[test]
fn bad_operator_is_a_decoding_error_naming_the_field() {
    let value = with_requirements(vec![requirement(
        "kubernetes.io/arch",
        "Within",
        &["amd64"],
    )]);
    let errs = undecodable(value);
    assert_error(
        &errs,
        "spec.template.spec.requirements[0].operator",
        ValidationErrorKind::NotSupported,
    );
    assert!(
        errs.to_string()
            .contains("spec.template.spec.requirements[0].operator"),
        "{errs}"
    );
    assert!(errs.to_string().contains("Within"), "{errs}");

    // Decoding YAML directly also fails, without panicking; serde-saphyr's message gives the
    // line and column and quotes the offending line, so the field is named there too.
    let yaml =
        fixture("4.1-nodepool-general-purpose.yaml").replace("operator: Gt", "operator: Within");
    let direct = serde_saphyr::from_str::<NodePool>(&yaml);
    let message = direct.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(message.contains("line 27"), "{message}");
    assert!(message.contains("operator: Within"), "{message}");
    assert!(message.contains("unknown variant `Within`"), "{message}");
}

#[test]
fn other_decoding_errors_name_their_fields() {
    let cases = [
        (
            json!({"spec": {"weight": "50"}}),
            "spec.weight",
            ValidationErrorKind::Type,
        ),
        (
            json!({"spec": {"disruption": {"consolidateAfter": "30x"}}}),
            "spec.disruption.consolidateAfter",
            ValidationErrorKind::Invalid,
        ),
        (
            json!({"spec": {"disruption": {"consolidationPolicy": "WhenIdle"}}}),
            "spec.disruption.consolidationPolicy",
            ValidationErrorKind::NotSupported,
        ),
        (
            json!({"spec": {"disruption": {"budgets": [{"nodes": "1", "reasons": ["Expired"]}]}}}),
            "spec.disruption.budgets[0].reasons[0]",
            ValidationErrorKind::NotSupported,
        ),
        (
            json!({"spec": {"template": {"spec": {"taints": [{"key": "a", "effect": "NoWay"}]}}}}),
            "spec.template.spec.taints[0].effect",
            ValidationErrorKind::NotSupported,
        ),
        (
            json!({"spec": {"template": {"spec": {"taints": [{"key": "a", "value": true, "effect": "NoSchedule"}]}}}}),
            "spec.template.spec.taints[0].value",
            ValidationErrorKind::Type,
        ),
        (
            json!({"spec": {"template": {"spec": {"nodeClassRef": null}}}}),
            "spec.template.spec.nodeClassRef",
            ValidationErrorKind::Required,
        ),
        (
            json!({"spec": {"limits": {"cpu": "lots"}}}),
            "spec.limits[cpu]",
            ValidationErrorKind::Invalid,
        ),
        (
            json!({"spec": {"template": {"metadata": {"labels": {"team": 5}}}}}),
            "spec.template.metadata.labels[team]",
            ValidationErrorKind::Type,
        ),
        (
            json!({"spec": {"template": {"spec": {"requirements": [{"key": "a", "operator": "In", "values": "a"}]}}}}),
            "spec.template.spec.requirements[0].values",
            ValidationErrorKind::Type,
        ),
        (
            json!({"spec": {"template": {"spec": {"requirements": [{"operator": "Exists"}]}}}}),
            "spec.template.spec.requirements[0].key",
            ValidationErrorKind::Required,
        ),
        (
            json!({"spec": {"template": {"spec": {"expireAfter": "1y"}}}}),
            "spec.template.spec.expireAfter",
            ValidationErrorKind::Invalid,
        ),
    ];
    for (patch, path, kind) in cases {
        let errs = undecodable(with(patch));
        assert_error(&errs, path, kind);
        assert_eq!(errs.len(), 1, "{errs}");
    }
    // All problems at once.
    let errs = undecodable(with(json!({"spec": {"weight": "50", "replicas": "1"}})));
    assert_eq!(errs.paths(), ["spec.weight", "spec.replicas"]);
    // Not even an object.
    assert_error(
        &undecodable(json!([1, 2])),
        "<root>",
        ValidationErrorKind::Type,
    );
    assert_error(
        &undecodable(json!({"kind": "NodePool"})),
        "spec",
        ValidationErrorKind::Required,
    );
}

#[test]
fn nulls_count_as_absent() {
    let pool = parse_pool(with(json!({
        "metadata": {"labels": null, "creationTimestamp": null},
        "spec": {
            "disruption": null,
            "weight": null,
            "template": {"metadata": null, "spec": {"taints": null, "nodeClassRef": {"group": "g", "kind": "K", "name": "n"}}}
        }
    })));
    assert!(pool.spec.disruption.is_unset());
    assert_eq!(pool.validate(&core()), Ok(()));
}

#[test]
fn unknown_fields_are_reported_with_paths() {
    let value = with(json!({
        "metadata": {"managedFields": [], "somethingElse": 1},
        "spec": {
            "template": {"spec": {
                "requirements": [{"key": "a", "operator": "Exists", "minValue": 2}],
                "taints": [{"key": "a", "effect": "NoSchedule", "colour": "red"}],
                "kubelet": {"maxPods": 110}
            }},
            "disruption": {"budgets": [{"nodes": "1", "when": "always"}]},
            "provider": {}
        },
        "status": {"instanceType": "m5.large"}
    }));
    let expected = [
        "metadata.somethingElse",
        "spec.disruption.budgets[0].when",
        "spec.provider",
        "spec.template.spec.kubelet",
        "spec.template.spec.requirements[0].minValue",
        "spec.template.spec.taints[0].colour",
        "status.instanceType",
    ];
    assert_eq!(api::unknown_fields_nodepool(&value), expected);
    let parsed = api::nodepool_from_value(value).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(parsed.unknown_fields, expected);
    // Unknown metadata is kept verbatim; other unknown fields are dropped.
    let out = serde_json::to_value(&parsed.object).unwrap_or_default();
    assert_eq!(out["metadata"]["somethingElse"], json!(1));
    assert_eq!(out["metadata"]["managedFields"], json!([]));
    assert_eq!(out["spec"].get("provider"), None);
}

#[test]
fn gt_with_two_values() {
    let errs = invalid(with_requirements(vec![requirement(
        "karpenter.k8s.aws/instance-generation",
        "Gt",
        &["4", "5"],
    )]));
    assert_error(
        &errs,
        "spec.template.spec.requirements[0].values",
        ValidationErrorKind::Invalid,
    );
    for (op, values) in [
        ("Gt", &[][..]),
        ("Lt", &["a"][..]),
        ("Gte", &["-1"][..]),
        ("Lte", &["1", "2"][..]),
    ] {
        let errs = invalid(with_requirements(vec![requirement(
            "topology.kubernetes.io/zone",
            op,
            values,
        )]));
        assert_error(
            &errs,
            "spec.template.spec.requirements[0].values",
            ValidationErrorKind::Invalid,
        );
    }
    for op in ["Gt", "Lt", "Gte", "Lte"] {
        let ok = parse_pool(with_requirements(vec![requirement(
            "example.com/size",
            op,
            &["0"],
        )]));
        assert_eq!(ok.validate(&core()), Ok(()), "{op}");
    }
}

#[test]
fn operator_value_rules() {
    // In needs a value; NotIn, Exists and DoesNotExist have no rule on values.
    let errs = invalid(with_requirements(vec![requirement(
        "example.com/a",
        "In",
        &[],
    )]));
    assert_error(
        &errs,
        "spec.template.spec.requirements[0].values",
        ValidationErrorKind::Required,
    );
    let ok = parse_pool(with_requirements(vec![
        requirement("topology.kubernetes.io/zone", "NotIn", &[]),
        requirement("topology.kubernetes.io/zone", "Exists", &[]),
        requirement("example.com/b", "DoesNotExist", &[]),
        requirement("topology.kubernetes.io/zone", "In", &["test", "foo"]),
        requirement("topology.kubernetes.io/zone", "NotIn", &["test", "bar"]),
    ]));
    assert_eq!(ok.validate(&core()), Ok(()));
    // Values are label values.
    let errs = invalid(with_requirements(vec![requirement(
        "example.com/a",
        "In",
        &["ok", "not ok"],
    )]));
    assert_eq!(
        errs.paths(),
        ["spec.template.spec.requirements[0].values[1]"]
    );
    // More than 100 requirements.
    let many = (0..101)
        .map(|i| requirement(&format!("example.com/k{i}"), "Exists", &[]))
        .collect();
    assert_error(
        &invalid(with_requirements(many)),
        "spec.template.spec.requirements",
        ValidationErrorKind::TooMany,
    );
}

#[test]
fn min_values_rules() {
    let mut r = requirement("node.kubernetes.io/instance-type", "Exists", &[]);
    r["minValues"] = json!(51);
    assert_error(
        &invalid(with_requirements(vec![r.clone()])),
        "spec.template.spec.requirements[0].minValues",
        ValidationErrorKind::Invalid,
    );
    for m in [0, -1] {
        r["minValues"] = json!(m);
        assert_error(
            &invalid(with_requirements(vec![r.clone()])),
            "spec.template.spec.requirements[0].minValues",
            ValidationErrorKind::Invalid,
        );
    }
    let mut few = requirement("node.kubernetes.io/instance-type", "In", &["m5.large"]);
    few["minValues"] = json!(2);
    let errs = invalid(with_requirements(vec![few.clone()]));
    assert_eq!(
        errs.paths(),
        ["spec.template.spec.requirements[0].values"],
        "{errs}"
    );
    few["values"] = json!(["m5.large", "m5.xlarge"]);
    assert_eq!(
        parse_pool(with_requirements(vec![few])).validate(&core()),
        Ok(())
    );
    // More than 50 values are fine without minValues.
    let values: Vec<String> = (0..60).map(|i| format!("type-{i}")).collect();
    let refs: Vec<&str> = values.iter().map(String::as_str).collect();
    let ok = parse_pool(with_requirements(vec![requirement(
        "node.kubernetes.io/instance-type",
        "In",
        &refs,
    )]));
    assert_eq!(ok.validate(&core()), Ok(()));
}

#[test]
fn capacity_type_values_must_be_known() {
    let errs = invalid(with_requirements(vec![requirement(
        "karpenter.sh/capacity-type",
        "In",
        &["cheap"],
    )]));
    assert_error(
        &errs,
        "spec.template.spec.requirements[0].values",
        ValidationErrorKind::NotSupported,
    );
    // One known value is enough (the unknown one is ignored upstream, with a log line).
    let ok = parse_pool(with_requirements(vec![requirement(
        "karpenter.sh/capacity-type",
        "In",
        &["spot", "cheap"],
    )]));
    assert_eq!(ok.validate(&core()), Ok(()));
    // ... unless minValues asks for more known values.
    let mut r = requirement("karpenter.sh/capacity-type", "In", &["spot", "cheap"]);
    r["minValues"] = json!(2);
    assert_error(
        &invalid(with_requirements(vec![r])),
        "spec.template.spec.requirements[0].values",
        ValidationErrorKind::Invalid,
    );
    // NotIn is not checked.
    let ok = parse_pool(with_requirements(vec![requirement(
        "karpenter.sh/capacity-type",
        "NotIn",
        &["cheap"],
    )]));
    assert_eq!(ok.validate(&core()), Ok(()));
}

#[test]
fn restricted_requirement_keys() {
    for key in [
        "karpenter.sh/nodepool",
        "kubernetes.io/hostname",
        "karpenter.sh/test",
        "sub.karpenter.sh/test",
    ] {
        let errs = invalid(with_requirements(vec![requirement(key, "In", &["test"])]));
        assert_error(
            &errs,
            "spec.template.spec.requirements[0].key",
            ValidationErrorKind::Forbidden,
        );
    }
    for key in [
        "kubernetes.io/test",
        "k8s.io/test",
        "subdomain.kubernetes.io/test",
        "subdomain.k8s.io/test",
        "topology.kubernetes.io/zone",
        "node.kubernetes.io/instance-type",
        "kubernetes.io/os",
        "beta.kubernetes.io/arch",
    ] {
        let ok = parse_pool(with_requirements(vec![requirement(key, "In", &["test"])]));
        assert_eq!(ok.validate(&core()), Ok(()), "{key}");
    }
    // A provider's restricted domain, unless the key is well-known.
    let aws = aws_like();
    let pool = parse_pool(with_requirements(vec![requirement(
        "karpenter.k8s.aws/secret",
        "Exists",
        &[],
    )]));
    assert!(pool.validate(&core()).is_ok());
    let errs = pool.validate(&aws).err().unwrap_or_default();
    assert_error(
        &errs,
        "spec.template.spec.requirements[0].key",
        ValidationErrorKind::Forbidden,
    );
    // Malformed keys.
    for key in [
        "test.com.com}",
        "Test.com/test",
        "test/test/test",
        "test/",
        "/test",
    ] {
        let errs = invalid(with_requirements(vec![requirement(key, "Exists", &[])]));
        assert_error(
            &errs,
            "spec.template.spec.requirements[0].key",
            ValidationErrorKind::Invalid,
        );
    }
}

#[test]
fn restricted_template_labels() {
    let labels =
        |k: &str, v: &str| with(json!({"spec": {"template": {"metadata": {"labels": {k: v}}}}}));
    for key in [
        "karpenter.sh/nodepool",
        "karpenter.sh/custom",
        "kubernetes.io/hostname",
        "x.karpenter.sh/y",
    ] {
        let errs = invalid(labels(key, "value"));
        assert_error(
            &errs,
            &format!("spec.template.metadata.labels[{key}]"),
            ValidationErrorKind::Forbidden,
        );
    }
    for key in [
        "karpenter.sh/capacity-type",
        "kops.k8s.io/instancegroup",
        "kubernetes.io",
        "k8s.io/key",
        "subdomain.kubernetes.io/key",
        "topology.kubernetes.io/zone",
    ] {
        assert_eq!(
            parse_pool(labels(key, "value")).validate(&core()),
            Ok(()),
            "{key}"
        );
    }
    let errs = invalid(labels("spaces are not allowed", "value"));
    assert_error(
        &errs,
        "spec.template.metadata.labels[spaces are not allowed]",
        ValidationErrorKind::Invalid,
    );
    let errs = invalid(labels("team", "/ is not allowed"));
    assert_error(
        &errs,
        "spec.template.metadata.labels[team]",
        ValidationErrorKind::Invalid,
    );
    let many: serde_json::Map<String, Value> =
        (0..101).map(|i| (format!("k{i}"), json!("v"))).collect();
    let errs = invalid(with(
        json!({"spec": {"template": {"metadata": {"labels": many}}}}),
    ));
    assert_error(
        &errs,
        "spec.template.metadata.labels",
        ValidationErrorKind::TooMany,
    );
}

#[test]
fn weight_bounds() {
    for w in [0, 101, -5] {
        let errs = invalid(with(json!({"spec": {"weight": w}})));
        assert_eq!(errs.paths(), ["spec.weight"], "{w}: {errs}");
    }
    for w in [1, 100] {
        assert_eq!(
            parse_pool(with(json!({"spec": {"weight": w}}))).validate(&core()),
            Ok(())
        );
    }
}

#[test]
fn static_pools() {
    let ok = parse_pool(with(
        json!({"spec": {"replicas": 3, "limits": {"nodes": 10}}}),
    ));
    assert!(ok.is_static());
    assert_eq!(ok.validate(&core()), Ok(()));
    let errs = invalid(with(
        json!({"spec": {"replicas": 3, "weight": 10, "limits": {"cpu": 10}}}),
    ));
    assert_error(&errs, "spec.weight", ValidationErrorKind::Forbidden);
    assert_error(&errs, "spec.limits", ValidationErrorKind::Forbidden);
    assert_error(
        &invalid(with(json!({"spec": {"replicas": -1}}))),
        "spec.replicas",
        ValidationErrorKind::Invalid,
    );
}

#[test]
fn budget_rules() {
    let b0 = "spec.disruption.budgets[0]";
    let errs = invalid(with_budgets(
        json!([{"nodes": "0", "schedule": "0 9 * * 1-5"}]),
    ));
    assert_eq!(errs.paths(), [format!("{b0}.duration")], "{errs}");
    assert_eq!(errs.errors()[0].kind, ValidationErrorKind::Required);
    let errs = invalid(with_budgets(json!([{"nodes": "0", "duration": "8h"}])));
    assert_eq!(errs.paths(), [format!("{b0}.schedule")], "{errs}");

    for nodes in ["110%", "1000%", "-10", "-10%", "ten"] {
        let errs = invalid(with_budgets(json!([{"nodes": nodes}])));
        assert_eq!(errs.paths(), [format!("{b0}.nodes")], "{nodes}");
    }
    for schedule in [
        "*",
        "* * * * ",
        "@wrongly",
        "0 0 * * tue-mon",
        "61 * * * *",
        "@every 1h",
    ] {
        let errs = invalid(with_budgets(
            json!([{"nodes": "1", "schedule": schedule, "duration": "1h"}]),
        ));
        assert_eq!(
            errs.paths(),
            [format!("{b0}.schedule")],
            "{schedule}: {errs}"
        );
    }
    for duration in ["30s", "1h30m5s", "-20m", "1.5h"] {
        let errs = invalid(with_budgets(
            json!([{"nodes": "1", "schedule": "@daily", "duration": duration}]),
        ));
        assert_eq!(
            errs.paths(),
            [format!("{b0}.duration")],
            "{duration}: {errs}"
        );
    }
    // A second budget's error is reported with its own index, and the first one's too.
    let errs = invalid(with_budgets(json!([
        {"nodes": "10", "schedule": "*", "duration": "20m"},
        {"nodes": "110%"}
    ])));
    assert_eq!(
        errs.paths(),
        [
            "spec.disruption.budgets[0].schedule",
            "spec.disruption.budgets[1].nodes"
        ]
    );
    let errs = invalid(with_budgets(
        json!([{"nodes": "1", "reasons": ["Empty", "Empty"]}]),
    ));
    assert_error(
        &errs,
        "spec.disruption.budgets[0].reasons[1]",
        ValidationErrorKind::Duplicate,
    );
    let many: Vec<Value> = (0..51).map(|_| json!({"nodes": "1"})).collect();
    assert_error(
        &invalid(with_budgets(json!(many))),
        "spec.disruption.budgets",
        ValidationErrorKind::TooMany,
    );

    for ok in [
        json!([{"nodes": "10", "schedule": "@annually", "duration": "20m"}]),
        json!([{"nodes": "10", "schedule": "* * * * *", "duration": "2h20m"}]),
        json!([{"nodes": "10", "schedule": "0 9 * * mon-fri", "duration": "8h0m0s"}]),
        json!([{"nodes": "20%", "reasons": ["Underutilized", "Empty", "Drifted"]}]),
        json!([{"schedule": "@daily", "duration": "1h"}]),
    ] {
        let pool = parse_pool(with_budgets(ok.clone()));
        assert_eq!(pool.validate(&core()), Ok(()), "{ok}");
    }
    // A budget written without nodes gets the CRD default.
    let pool = parse_pool(with_budgets(
        json!([{"schedule": "@daily", "duration": "1h"}]),
    ));
    assert_eq!(pool.spec.disruption.effective_budgets()[0].nodes, "10%");
}

#[test]
fn duration_field_patterns() {
    let ok = |patch: Value| parse_pool(with(patch)).validate(&core());
    assert_eq!(
        ok(json!({"spec": {"template": {"spec": {"expireAfter": "Never"}}}})),
        Ok(())
    );
    assert_eq!(
        ok(json!({"spec": {"disruption": {"consolidateAfter": "Never"}}})),
        Ok(())
    );
    assert_eq!(
        ok(json!({"spec": {"template": {"spec": {"terminationGracePeriod": "1h30m5s"}}}})),
        Ok(())
    );
    let cases = [
        (
            json!({"spec": {"template": {"spec": {"terminationGracePeriod": "-1s"}}}}),
            "spec.template.spec.terminationGracePeriod",
        ),
        (
            json!({"spec": {"template": {"spec": {"terminationGracePeriod": "300ms"}}}}),
            "spec.template.spec.terminationGracePeriod",
        ),
        (
            json!({"spec": {"template": {"spec": {"expireAfter": "1.5h"}}}}),
            "spec.template.spec.expireAfter",
        ),
        (
            json!({"spec": {"disruption": {"consolidateAfter": "-30s"}}}),
            "spec.disruption.consolidateAfter",
        ),
    ];
    for (patch, path) in cases {
        let errs = invalid(with(patch));
        assert_eq!(errs.paths(), [path], "{errs}");
    }
    // "Never" is not a valid grace period (not even decodable as a duration).
    let errs = undecodable(with(
        json!({"spec": {"template": {"spec": {"terminationGracePeriod": "Never"}}}}),
    ));
    assert_eq!(errs.paths(), ["spec.template.spec.terminationGracePeriod"]);
}

#[test]
fn taint_rules() {
    let taints = |t: Value| with(json!({"spec": {"template": {"spec": {"taints": t}}}}));
    let ok = parse_pool(taints(json!([
        {"key": "a", "value": "b", "effect": "NoSchedule"},
        {"key": "Test", "value": "f", "effect": "PreferNoSchedule"},
        {"key": "test.com/Test", "value": "f", "effect": "PreferNoSchedule"},
        {"key": "key-only", "effect": "NoExecute"},
        {"key": "a", "effect": "NoExecute"}
    ])));
    assert_eq!(ok.validate(&core()), Ok(()));
    for key in [
        "test.com.com}",
        "Test.com/test",
        "test/test/test",
        "test/",
        "/test",
    ] {
        let errs = invalid(taints(json!([{"key": key, "effect": "NoSchedule"}])));
        assert_eq!(errs.paths(), ["spec.template.spec.taints[0].key"], "{key}");
    }
    let errs = invalid(taints(json!([{"key": "", "effect": "NoSchedule"}])));
    assert_error(
        &errs,
        "spec.template.spec.taints[0].key",
        ValidationErrorKind::Required,
    );
    let errs = invalid(taints(
        json!([{"key": "invalid-value", "value": "???", "effect": "NoSchedule"}]),
    ));
    assert_eq!(errs.paths(), ["spec.template.spec.taints[0].value"]);
    // The same key and effect twice, across taints and startup taints.
    let errs = invalid(with(json!({"spec": {"template": {"spec": {
        "taints": [{"key": "a", "effect": "NoSchedule"}],
        "startupTaints": [{"key": "a", "value": "x", "effect": "NoSchedule"}]
    }}}})));
    assert_error(
        &errs,
        "spec.template.spec.startupTaints[0]",
        ValidationErrorKind::Duplicate,
    );
}

#[test]
fn node_class_ref_rules() {
    let errs = invalid(with(
        json!({"spec": {"template": {"spec": {"nodeClassRef": {"group": "", "kind": "", "name": ""}}}}}),
    ));
    assert_eq!(
        errs.paths(),
        [
            "spec.template.spec.nodeClassRef.group",
            "spec.template.spec.nodeClassRef.kind",
            "spec.template.spec.nodeClassRef.name"
        ]
    );
    let errs = invalid(with(
        json!({"spec": {"template": {"spec": {"nodeClassRef": {"group": "a/b"}}}}}),
    ));
    assert_eq!(errs.paths(), ["spec.template.spec.nodeClassRef.group"]);
}

#[test]
fn every_error_is_reported_at_once() {
    let errs = invalid(with(json!({
        "apiVersion": "karpenter.sh/v1beta1",
        "spec": {
            "weight": 0,
            "template": {
                "metadata": {"labels": {"karpenter.sh/nodepool": "x"}},
                "spec": {"requirements": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["a"]},
                    {"key": "example.com/n", "operator": "Gt", "values": ["1", "2"]}
                ]}
            },
            "disruption": {"budgets": [{"nodes": "110%", "schedule": "bad cron", "duration": "1h"}]}
        }
    })));
    assert_eq!(
        errs.paths(),
        [
            "apiVersion",
            "spec.template.metadata.labels[karpenter.sh/nodepool]",
            "spec.template.spec.requirements[0].key",
            "spec.template.spec.requirements[1].values",
            "spec.disruption.budgets[0].nodes",
            "spec.disruption.budgets[0].schedule",
            "spec.weight",
        ],
        "{errs}"
    );
}

#[test]
fn nodeclaim_rules() {
    let claim = |patch: Value| {
        let mut v = json!({
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {"name": "c"},
            "spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]}]
            }
        });
        merge(&mut v, &patch);
        api::nodeclaim_from_value(v)
            .unwrap_or_else(|e| panic!("{e}"))
            .object
    };
    // karpenter.sh/nodepool is allowed in NodeClaim requirements.
    assert_eq!(claim(json!({})).validate(), Ok(()));
    let errs = claim(json!({"spec": {"requirements": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["a"]},
        {"key": "karpenter.sh/other", "operator": "Exists"},
        {"key": "a", "operator": "Lt", "values": []}
    ]}}))
    .validate()
    .err()
    .unwrap_or_default();
    assert_eq!(
        errs.paths(),
        [
            "spec.requirements[0].key",
            "spec.requirements[1].key",
            "spec.requirements[2].values"
        ],
        "{errs}"
    );
    let mut missing = claim(json!({}));
    missing.spec.requirements = None;
    assert_eq!(
        missing.validate().err().unwrap_or_default().paths(),
        ["spec.requirements"]
    );
    let errs = claim(json!({"status": {"conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z"},
        {"type": "Launched", "status": "True", "lastTransitionTime": "yesterday", "reason": "9lives"},
        {"type": "Ready", "status": "False", "lastTransitionTime": "2024-01-01T00:00:00Z"}
    ]}}))
    .validate()
    .err()
    .unwrap_or_default();
    assert_eq!(
        errs.paths(),
        [
            "status.conditions[1].lastTransitionTime",
            "status.conditions[1].reason",
            "status.conditions[2]"
        ],
        "{errs}"
    );
    let errs = undecodable_claim(
        json!({"status": {"conditions": [{"type": "Ready", "status": "Maybe"}]}}),
    );
    assert_error(
        &errs,
        "status.conditions[0].status",
        ValidationErrorKind::NotSupported,
    );
}

fn undecodable_claim(patch: Value) -> ValidationErrors {
    let mut v = json!({
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "spec": {"nodeClassRef": {"group": "g", "kind": "K", "name": "n"}, "requirements": []}
    });
    merge(&mut v, &patch);
    match api::nodeclaim_from_value(v) {
        Err(ApiError::Schema { errors, .. }) => errors,
        other => panic!("expected a schema error, got {other:?}"),
    }
}

#[test]
fn nodepool_status_conditions_need_reason_and_message() {
    let errs = invalid(with(json!({"status": {"nodes": 3, "conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-01T00:00:00Z"}
    ]}})));
    assert_eq!(
        errs.paths(),
        [
            "status.conditions[0].reason",
            "status.conditions[0].message"
        ],
        "{errs}"
    );
    let ok = parse_pool(with(
        json!({"status": {"resources": {"cpu": "4"}, "conditions": [
            {"type": "Ready", "status": "True", "reason": "Ready", "message": "",
             "lastTransitionTime": "2024-01-01T00:00:00Z", "observedGeneration": 1}
        ]}}),
    ));
    assert_eq!(ok.validate(&core()), Ok(()));
    assert_eq!(
        ok.status.as_ref().map(|s| s.resources.get("cpu")),
        Some(Quantity::parse("4").ok())
    );
}

// ---------------------------------------------------------------------------------------------
// Properties

fn arb_key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("kubernetes.io/arch".to_string()),
        Just("topology.kubernetes.io/zone".to_string()),
        "[a-z]{1,8}(\\.[a-z]{1,5})?/[a-z][a-z0-9-]{0,8}[a-z0-9]",
    ]
}

fn arb_requirement() -> impl Strategy<Value = NodeSelectorRequirement> {
    (
        arb_key(),
        prop_oneof![
            Just(Operator::In),
            Just(Operator::NotIn),
            Just(Operator::Exists),
            Just(Operator::Gt)
        ],
        prop::collection::vec("[a-z0-9]{1,6}", 1..4),
        prop::option::of(1i64..=50),
    )
        .prop_map(|(key, operator, values, min_values)| {
            let values = match operator {
                Operator::Exists => vec![],
                Operator::Gt => vec!["3".to_string()],
                _ => values,
            };
            let min_values = match operator {
                Operator::In => min_values.map(|m| m.min(i64::try_from(values.len()).unwrap_or(1))),
                _ => None,
            };
            NodeSelectorRequirement {
                key,
                operator,
                values,
                min_values,
            }
        })
}

fn arb_budget() -> impl Strategy<Value = Budget> {
    (
        prop_oneof!["[0-9]{1,3}", "(100|[0-9]{1,2})%"],
        prop::option::of((
            prop_oneof![Just("@daily"), Just("0 9 * * 1-5"), Just("*/5 * * * *")],
            1u32..48,
        )),
        prop::option::of(prop::collection::btree_set(
            prop_oneof![
                Just(DisruptionReason::Empty),
                Just(DisruptionReason::Drifted),
                Just(DisruptionReason::Underutilized)
            ],
            1..3,
        )),
    )
        .prop_map(|(nodes, window, reasons)| Budget {
            nodes,
            schedule: window.map(|(s, _)| s.to_string()),
            duration: window.and_then(|(_, h)| Duration::parse(&format!("{h}h")).ok()),
            reasons: reasons.map(|r| r.into_iter().collect()),
        })
}

fn arb_nodepool() -> impl Strategy<Value = NodePool> {
    (
        prop::collection::vec(arb_requirement(), 0..5),
        prop::option::of(prop::collection::vec(arb_budget(), 0..4)),
        prop::option::of(1i32..=100),
        prop::collection::btree_map("[a-z]{1,6}", "[a-z0-9]{0,6}", 0..3),
        prop::option::of(prop_oneof![
            Just(ConsolidationPolicy::WhenEmpty),
            Just(ConsolidationPolicy::Balanced)
        ]),
        prop::option::of(0u64..100_000),
    )
        .prop_map(|(requirements, budgets, weight, labels, policy, after)| {
            let mut pool = parse_pool(base());
            pool.spec.template.spec.requirements = Some(requirements);
            pool.spec.template.metadata.labels = labels;
            pool.spec.disruption.budgets = budgets;
            pool.spec.disruption.consolidation_policy = policy;
            pool.spec.disruption.consolidate_after =
                after.map(|s| NillableDuration::Duration(Duration::from_secs(s)));
            pool.spec.weight = weight;
            pool
        })
}

proptest! {
    #[test]
    fn nodepools_round_trip_through_json_and_yaml(pool in arb_nodepool()) {
        let value = serde_json::to_value(&pool).unwrap_or_default();
        prop_assert!(api::unknown_fields_nodepool(&value).is_empty());
        let parsed = api::nodepool_from_value(value).map(|p| p.object);
        prop_assert_eq!(parsed.as_ref(), Ok(&pool));
        let yaml = serde_saphyr::to_string(&pool).unwrap_or_default();
        let again: Option<NodePool> = serde_saphyr::from_str(&yaml).ok();
        prop_assert_eq!(again.as_ref(), Some(&pool));
        // Generated pools are valid by construction.
        prop_assert_eq!(pool.validate(&LabelPolicy::core()), Ok(()));
    }

    #[test]
    fn go_durations_round_trip(nanos in any::<i64>()) {
        let d = Duration::from_nanos(nanos);
        prop_assert_eq!(Duration::parse(d.as_str()).map(|p| p.as_nanos()), Ok(nanos));
    }

    #[test]
    fn api_durations_parse_to_their_sum(h in 0u32..10_000, m in 0u32..1_000, s in 0u32..1_000) {
        let text = format!("{h}h{m}m{s}s");
        let d = Duration::parse(&text);
        prop_assert_eq!(d.as_ref().map(Duration::as_secs), Ok(i64::from(h) * 3600 + i64::from(m) * 60 + i64::from(s)));
        prop_assert!(d.is_ok_and(|d| d.matches_api_pattern()));
    }

    #[test]
    fn percentages_round_up(p in 0u32..=100, total in 0usize..100_000) {
        let b = Budget::nodes(format!("{p}%"));
        let allowed = b.nodes_value(total).unwrap_or(usize::MAX);
        let exact = u64::from(p) * total as u64;
        prop_assert!(allowed as u64 * 100 >= exact);
        prop_assert!(allowed == 0 || (allowed as u64 - 1) * 100 < exact);
        prop_assert!(allowed <= total);
    }

    #[test]
    fn pool_allowance_is_the_minimum_of_applicable_budgets(
        budgets in prop::collection::vec(arb_budget(), 0..5),
        total in 0usize..500,
        minutes in 0i64..(60 * 24 * 14),
    ) {
        let now = ts("2024-01-01T00:00:00Z")
            .checked_add(jiff::SignedDuration::from_mins(minutes))
            .unwrap_or_else(|e| panic!("{e}"));
        let pool = pool_with_budgets(budgets.clone());
        for reason in DisruptionReason::ALL {
            let expected = budgets
                .iter()
                .filter(|b| b.applies_to(reason))
                .map(|b| b.allowed_disruptions(total, now).unwrap_or(0))
                .min()
                .unwrap_or(UNBOUNDED_DISRUPTIONS);
            prop_assert_eq!(pool.allowed_disruptions(reason, total, now), Ok(expected));
        }
    }
}
