//! What every fuzz target runs: the production parser an input reaches, then the properties its
//! result must have. A panic (including a failed assertion) is a bug.
//!
//! This file is shared, byte for byte, by the cargo-fuzz crate (`fuzz/`, nightly, libFuzzer)
//! and by the stable test of `karpenter-cli` (`examples/tests/it/fuzz.rs`) that feeds it every
//! corpus and regression input, so `cargo test` exercises the corpora without nightly. It may
//! therefore use only what both crates depend on: karpenter-core, karpenter-aws, karpenter-plan,
//! serde_json and jiff.

use karpenter_aws::interruption::{self, Kind};
use karpenter_aws::nodeclass::EC2NodeClass;
use karpenter_aws::userdata::{self, BootstrapOptions, UserDataError};
use karpenter_core::api::{
    self, Budget, DisruptionReason, Duration, NillableDuration, NodeClaim, NodePool, Schedule,
    matches_schedule_pattern,
};
use karpenter_core::labels::LabelPolicy;
use karpenter_core::requirements::{NodeSelectorRequirement, Requirement, Requirements};
use karpenter_core::resources::{Format, Quantity};
use karpenter_core::world::{self, Located};
use karpenter_plan::catalog::{CatalogSpec, aws_label_policy, typed_nodeclass};
use karpenter_plan::manifests::{Document, documents_from_str, object_name};
use karpenter_plan::output;
use karpenter_plan::plan::{PlanError, PlanOptions, plan};

/// A target's check: takes the fuzzer's input, panics on a bug.
pub type Check = fn(&[u8]);

/// The targets: name and check.
pub const TARGETS: [(&str, Check); 9] = [
    ("quantity", quantity),
    ("duration", duration),
    ("cron", cron),
    ("requirements", requirements),
    ("nodepool", nodepool),
    ("nodeclaim", nodeclaim),
    ("ec2nodeclass", ec2nodeclass),
    ("interruption", interruption),
    ("manifests", manifests),
];

/// Fixed instants the time-dependent checks evaluate at (a leap day, a year end, the epoch).
fn instants() -> [jiff::Timestamp; 3] {
    [
        jiff::Timestamp::UNIX_EPOCH,
        jiff::Timestamp::from_second(1_709_164_800).unwrap_or(jiff::Timestamp::UNIX_EPOCH), // 2024-02-29
        jiff::Timestamp::from_second(1_798_761_599).unwrap_or(jiff::Timestamp::UNIX_EPOCH), // 2026-12-31T23:59:59
    ]
}

/// The input as text: every parser here reads text (`karpenter plan` reads files with
/// `read_to_string`, SQS bodies are strings), so non-UTF-8 input never reaches them.
fn text(data: &[u8]) -> Option<&str> {
    std::str::from_utf8(data).ok()
}

/// YAML documents the way `karpenter plan` reads a file; a syntax error must name the file.
fn yaml_documents(text: &str) -> Option<Vec<Document>> {
    match documents_from_str("fuzz.yaml", text, false) {
        Ok(docs) => Some(docs),
        Err(e) => {
            let message = e.to_string();
            assert!(
                message.contains("fuzz.yaml"),
                "error without its file: {message}"
            );
            None
        }
    }
}

/// Resource quantities (`cpu: 500m`, `memory: 1.5Gi`): `Quantity::parse`, which serde uses for
/// every quantity in a manifest. Properties: the canonical form parses back to the same value
/// and is a fixed point; the JSON round trip keeps the value.
pub fn quantity(data: &[u8]) {
    let Some(text) = text(data) else { return };
    match Quantity::parse(text) {
        Ok(q) => {
            let printed = q.to_string();
            let again = Quantity::parse(&printed).unwrap_or_else(|e| {
                panic!("{text:?} prints as {printed:?}, which does not parse: {e}")
            });
            assert_eq!(again, q, "{text:?} prints as {printed:?}, another value");
            // Like Kubernetes, an integer BinarySI value that no power of 1024 divides prints
            // without a suffix (`1.953125Ki` prints `2000`), which reads back as DecimalSI and
            // prints `2k`. Every other canonical form is a fixed point at once; that one after
            // a second round.
            let reprinted = again.to_string();
            let binary_without_suffix = q.format() == Format::BinarySI
                && printed.bytes().all(|b| b.is_ascii_digit() || b == b'-');
            if !binary_without_suffix {
                assert_eq!(reprinted, printed, "the canonical form of {text:?}");
            }
            let third = Quantity::parse(&reprinted).ok().map(|v| v.to_string());
            assert_eq!(
                third.as_deref(),
                Some(reprinted.as_str()),
                "the canonical form of {text:?}"
            );
            let json = serde_json::to_string(&q).expect("a quantity serialises");
            let back: Quantity = serde_json::from_str(&json).expect("its JSON decodes");
            assert_eq!(back, q, "JSON round trip of {text:?}");
            assert_eq!(-(-q), q, "double negation of {text:?}");
            let _ = (q.milli_value(), q.value(), q.as_f64(), q.is_zero());
        }
        Err(e) => assert!(e.to_string().starts_with("invalid quantity"), "{e}"),
    }
    // A YAML number (`cpu: 1.5`) arrives as a JSON number.
    if let Ok(number) = serde_json::from_str::<serde_json::Number>(text)
        && let Ok(q) = serde_json::from_value::<Quantity>(serde_json::Value::Number(number))
    {
        let printed = q.to_string();
        assert_eq!(
            Quantity::parse(&printed).ok(),
            Some(q),
            "{text:?} as a number"
        );
    }
}

/// Go durations (`consolidateAfter`, `expireAfter`, `terminationGracePeriod`, budget
/// durations): `Duration::parse` and `NillableDuration::parse`. Properties: the text is kept;
/// the canonical Go rendering of the length parses back to the same length; the CRD patterns
/// only admit non-negative lengths; `Never` is the only disabled value.
pub fn duration(data: &[u8]) {
    let Some(text) = text(data) else { return };
    match Duration::parse(text) {
        Ok(d) => {
            assert_eq!(d.as_str(), text);
            let canonical = Duration::from_nanos(d.as_nanos());
            let again = Duration::parse(canonical.as_str()).unwrap_or_else(|e| {
                panic!(
                    "{text:?} renders as {:?}, which does not parse: {e}",
                    canonical.as_str()
                )
            });
            assert_eq!(again.as_nanos(), d.as_nanos(), "{text:?} via {canonical}");
            if d.matches_api_pattern() || d.matches_budget_pattern() {
                assert!(
                    d.as_nanos() >= 0,
                    "{text:?} matches a CRD pattern but is negative"
                );
                assert!(d.to_std().is_some());
            }
            let _ = (d.as_secs(), d.as_signed_duration());
        }
        Err(e) => assert!(e.to_string().starts_with("invalid duration"), "{e}"),
    }
    let nillable = NillableDuration::parse(text);
    match &nillable {
        Ok(n) => {
            assert_eq!(n.is_never(), text == api::NEVER);
            assert_eq!(n.as_str(), text);
            let _ = n.matches_api_pattern();
        }
        Err(_) => assert!(Duration::parse(text).is_err()),
    }
    let decoded = serde_json::from_value::<NillableDuration>(serde_json::Value::from(text));
    assert_eq!(
        decoded.ok(),
        nillable.ok(),
        "serde and parse disagree on {text:?}"
    );
}

/// Budget schedules (`spec.disruption.budgets[].schedule`): `Schedule::parse` and the budget
/// evaluation that runs it. Properties: the next hit is strictly later, on a whole minute, and
/// itself followed by a later one; a parsed schedule makes a budget evaluable at any instant.
pub fn cron(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let _ = matches_schedule_pattern(text);
    match Schedule::parse(text) {
        Ok(schedule) => {
            for now in instants() {
                let after = now.to_zoned(jiff::tz::TimeZone::UTC).datetime();
                if let Some(next) = schedule.next_after(after) {
                    assert!(next > after, "{text:?}: next hit {next} not after {after}");
                    assert_eq!(
                        (next.second(), next.subsec_nanosecond()),
                        (0, 0),
                        "{text:?}"
                    );
                    if let Some(then) = schedule.next_after(next) {
                        assert!(then > next, "{text:?}: {then} not after {next}");
                    }
                }
                let mut budget = Budget::nodes("10%");
                budget.schedule = Some(text.to_string());
                budget.duration = Duration::parse("1h30m").ok();
                let allowed = budget.allowed_disruptions(20, now);
                assert!(
                    allowed.is_ok(),
                    "{text:?} parses but the budget fails: {allowed:?}"
                );
            }
        }
        Err(e) => assert!(e.to_string().starts_with("invalid cron"), "{e}"),
    }
}

/// Node selector requirements (NodePool / NodeClaim `requirements`, as JSON): validation for
/// NodePools and NodeClaims, the requirement algebra they become. Properties: the YAML entries
/// of a requirement set rebuild the same set; intersection is commutative and idempotent; the
/// value `any()` picks is allowed.
pub fn requirements(data: &[u8]) {
    let Ok(entries) = serde_json::from_slice::<Vec<NodeSelectorRequirement>>(data) else {
        return;
    };
    let policy = aws_label_policy();
    for r in &entries {
        for result in [
            api::validate_requirement(r, Some(&policy)),
            api::validate_requirement(r, None),
        ] {
            if let Err(errors) = result {
                assert!(!errors.is_empty());
            }
        }
        let req = Requirement::from_node_selector(r);
        if let Some(v) = req.any() {
            assert!(req.has(&v), "{req}: any() = {v:?} is not allowed");
        }
        assert_eq!(req.intersection(&req), req, "{req} ∩ itself");
        let _ = (req.to_string(), req.len(), req.single_value());
    }
    let all = Requirements::from_node_selector_requirements(&entries);
    let rebuilt =
        Requirements::from_node_selector_requirements(&all.to_node_selector_requirements());
    assert_eq!(rebuilt, all, "round trip of {all}");
    let (a, b) = entries.split_at(entries.len() / 2);
    let (a, b) = (
        Requirements::from_node_selector_requirements(a),
        Requirements::from_node_selector_requirements(b),
    );
    assert_eq!(
        a.intersection(&b),
        b.intersection(&a),
        "{a} ∩ {b} is not commutative"
    );
    assert_eq!(
        a.intersection(&b),
        all,
        "{a} ∩ {b} differs from the whole list"
    );
    let _ = (
        a.intersects(&b),
        a.compatible(&b, Some(&LabelPolicy::core())),
        all.labels(&policy),
    );
}

/// NodePool documents: decoding (`api::nodepool_from_value`, after the YAML reader of
/// `karpenter plan`), validation against the AWS label policy, and what a valid NodePool is used
/// for. Properties: a decoded NodePool serialises and decodes to itself; a valid one's budgets
/// evaluate without error at any instant; validation agrees with `world::usable_node_pools`.
pub fn nodepool(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let Some(docs) = yaml_documents(text) else {
        return;
    };
    let policy = aws_label_policy();
    for doc in docs {
        let pool: NodePool = match api::nodepool_from_value(doc.value) {
            Ok(parsed) => parsed.object,
            Err(e) => {
                if let Some(errors) = e.field_errors() {
                    assert!(!errors.is_empty(), "a schema error without errors");
                }
                continue;
            }
        };
        let valid = pool.validate(&policy);
        if let Err(errors) = &valid {
            assert!(!errors.is_empty());
        }
        let value = serde_json::to_value(&pool).expect("a NodePool serialises");
        let back = api::nodepool_from_value(value)
            .unwrap_or_else(|e| panic!("a decoded NodePool does not decode again: {e}"));
        assert_eq!(back.object, pool, "JSON round trip");
        let located = [Located::new("fuzz.yaml", "NodePool/fuzz", pool)];
        let usable = world::usable_node_pools(&located, &policy);
        assert_eq!(
            usable.is_ok(),
            valid.is_ok(),
            "validate and usable_node_pools disagree"
        );
        let pool = &located[0].object;
        if valid.is_ok() {
            for now in instants() {
                for reason in DisruptionReason::ALL {
                    for total in [0, 1, 19, 1000] {
                        let allowed = pool.allowed_disruptions(reason, total, now);
                        assert!(
                            allowed.is_ok(),
                            "a valid NodePool's budgets fail: {allowed:?}"
                        );
                    }
                }
            }
            let spec = &pool.spec.template.spec;
            let _ = (
                spec.effective_expire_after(),
                pool.spec.weight,
                pool.is_static(),
            );
            let _ = Requirements::from_node_selector_requirements(spec.requirements()).to_string();
        }
    }
}

/// NodeClaim documents: `api::nodeclaim_from_value` and `NodeClaim::validate`. Property: a
/// decoded NodeClaim serialises and decodes to itself.
pub fn nodeclaim(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let Some(docs) = yaml_documents(text) else {
        return;
    };
    for doc in docs {
        let claim: NodeClaim = match api::nodeclaim_from_value(doc.value) {
            Ok(parsed) => parsed.object,
            Err(e) => {
                if let Some(errors) = e.field_errors() {
                    assert!(!errors.is_empty(), "a schema error without errors");
                }
                continue;
            }
        };
        if let Err(errors) = claim.validate() {
            assert!(!errors.is_empty());
        }
        let value = serde_json::to_value(&claim).expect("a NodeClaim serialises");
        let back = api::nodeclaim_from_value(value)
            .unwrap_or_else(|e| panic!("a decoded NodeClaim does not decode again: {e}"));
        assert_eq!(back.object, claim, "JSON round trip");
        let _ = Requirements::from_node_selector_requirements(
            claim.spec.requirements.as_deref().unwrap_or_default(),
        )
        .to_string();
    }
}

/// EC2NodeClass documents: `karpenter_plan::catalog::typed_nodeclass` (decode with the field
/// named, then validate), the drift hash and the user data built from the class. Properties:
/// a valid class has an AMI family, hashes deterministically, round-trips through JSON with the
/// same hash; user data errors name `spec.userData`.
pub fn ec2nodeclass(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let Some(docs) = yaml_documents(text) else {
        return;
    };
    for doc in docs {
        let name = object_name(&doc.value);
        let class = match typed_nodeclass("fuzz.yaml", &name, &doc.value) {
            Ok(class) => class,
            Err(e) => {
                let message = e.to_string();
                assert!(
                    message.contains("fuzz.yaml"),
                    "error without its file: {message}"
                );
                continue;
            }
        };
        let hash = class.static_hash();
        assert_eq!(class.static_hash(), hash, "the hash is not deterministic");
        let value = serde_json::to_value(&class).expect("an EC2NodeClass serialises");
        let back = EC2NodeClass::from_json_value(value)
            .unwrap_or_else(|e| panic!("a valid EC2NodeClass does not decode again: {e}"));
        assert_eq!(back, class, "JSON round trip");
        assert_eq!(
            back.static_hash(),
            hash,
            "the hash changed over a JSON round trip"
        );
        let _ = karpenter_aws::drift::hash_annotations(&class);
        let spec = &class.spec;
        let family = spec.resolved_ami_family();
        let family = family.unwrap_or_else(|| panic!("a valid class without an AMI family"));
        let _ = (spec.alias(), spec.resolved_metadata_options());
        let options = BootstrapOptions {
            cluster_name: "fuzz".into(),
            api_server_endpoint: "https://fuzz.example".into(),
            cluster_cidr: Some("10.100.0.0/16".into()),
            kubelet: spec.kubelet.clone(),
            custom_user_data: spec.user_data.clone(),
            ..BootstrapOptions::default()
        };
        match userdata::user_data(family, &options) {
            Ok(_) => {}
            Err(e @ (UserDataError::InvalidToml(_) | UserDataError::InvalidMime(_))) => {
                assert!(e.to_string().starts_with("spec.userData"), "{e}");
            }
            Err(e) => panic!("user data failed with a cluster CIDR given: {e}"),
        }
    }
}

/// SQS interruption messages: `karpenter_aws::interruption::parse_message`, then the mapping
/// into the operator's inputs (`Event::operator_events`, the path the queue consumer takes) with
/// the event's instances known and unknown. Properties: instance ids are non-empty; an event
/// about one instance (spot or capacity-reservation interruption, rebalance, state change)
/// names exactly one; an error has a metric label and a message; instances without a NodeClaim
/// give no operator input; every known instance of an actionable event gives exactly one, for its
/// own provider id; the queue delay is never negative.
pub fn interruption(data: &[u8]) {
    let Some(text) = text(data) else { return };
    match interruption::parse_message(text) {
        Ok(event) => {
            let single = matches!(
                event.kind,
                Kind::SpotInterrupted
                    | Kind::CapacityReservationInterrupted
                    | Kind::RebalanceRecommendation
                    | Kind::InstanceStopped
                    | Kind::InstanceTerminated
            );
            if single {
                assert_eq!(event.instance_ids.len(), 1, "{:?}", event.kind);
            }
            for id in &event.instance_ids {
                assert!(!id.is_empty(), "an empty instance id");
            }
            let _ = event.kind.as_str();
            assert!(
                event.operator_events(|_| None).is_empty(),
                "operator inputs without a NodeClaim"
            );
            let known = event.operator_events(|id| Some(provider_id(id)));
            if interruption::operator_kind(event.kind).is_some() {
                assert_eq!(known.len(), event.instance_ids.len(), "{:?}", event.kind);
            } else {
                assert!(known.is_empty(), "a no-op event gave operator inputs");
            }
            let delay = event.queue_delay_seconds(instants()[2]);
            assert!(delay.is_finite() && delay >= 0.0, "queue delay {delay}");
        }
        Err(e) => {
            assert!(!e.label().is_empty());
            assert!(!e.to_string().is_empty());
        }
    }
}

fn provider_id(instance_id: &str) -> String {
    format!("aws:///us-east-1a/{instance_id}")
}

/// A whole manifest stream as `karpenter plan -f FILE` reads it: `documents_from_str` (YAML,
/// or JSON when the text starts with `{`), then `plan` (decode by kind, EC2NodeClasses,
/// `world::usable_node_pools`, `world::build`, the solve, the lower bound, advice) on the
/// embedded AWS catalog, then the renderers. Properties: only input errors (exit status 2), never
/// an internal error; a plan renders as JSON, YAML and a table; no more pods scheduled than
/// pending.
pub fn manifests(data: &[u8]) {
    let Some(text) = text(data) else { return };
    let json = text.trim_start().starts_with('{');
    let docs = match documents_from_str("fuzz.yaml", text, json) {
        Ok(docs) => docs,
        Err(e) => {
            let message = e.to_string();
            assert!(
                message.contains("fuzz.yaml"),
                "error without its file: {message}"
            );
            return;
        }
    };
    let mut opts = PlanOptions::new(instants()[1]);
    opts.catalog = CatalogSpec::Aws;
    match plan(&docs, &opts, &mut |_| {}) {
        Ok(result) => {
            let out = &result.output;
            output::to_json(out).expect("a plan renders as JSON");
            output::to_yaml(out).expect("a plan renders as YAML");
            let _ = output::to_table(out);
            let s = &out.summary;
            assert!(
                s.scheduled <= s.pods,
                "scheduled {} of {} pods",
                s.scheduled,
                s.pods
            );
            assert_eq!(s.new_node_claims, out.node_claims.len());
            assert!(
                s.cost_per_hour.is_finite() && s.cost_per_hour >= 0.0,
                "{}",
                s.cost_per_hour
            );
        }
        Err(PlanError::Internal(e)) => panic!("internal error on input: {e}"),
        Err(e @ PlanError::Input(_)) => assert!(!e.to_string().is_empty()),
    }
}
