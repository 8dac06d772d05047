//! The suite against an in-memory provider that can be told to break one rule at a time: each
//! broken rule must make exactly the check that guards it fail, naming what went wrong.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::*;
use crate::api::{NodeClaimSpec, NodeClassReference, NodePool};
use crate::cloud::RepairPolicy;
use crate::launch::resolve_launch;
use crate::model::{InstanceType, Offering, Overhead};
use crate::requirements::Requirement;
use crate::resources::{Quantity, ResourceList};

/// Rules the test provider can break.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Breach {
    /// `get` of an unknown id answers `Other`.
    GetUnknownIsOther,
    /// `list` never lists anything.
    ListsNothing,
    /// `delete` forgets nothing.
    DeleteKeepsTheMachine,
    /// A second `delete` answers `Other`.
    SecondDeleteIsOther,
    /// Launched claims lose the zone label.
    NoZoneLabel,
    /// `get` reports another capacity type.
    GetChangesCapacityType,
    /// Failed offerings answer `Create` instead of insufficient capacity.
    CapacityErrorIsCreate,
}

struct Test {
    types: Vec<Arc<InstanceType>>,
    machines: Mutex<BTreeMap<String, NodeClaim>>,
    deleted: Mutex<BTreeSet<String>>,
    failed: Mutex<BTreeSet<UnavailableOffering>>,
    launches: Mutex<u64>,
    breaches: BTreeSet<Breach>,
}

impl Test {
    fn new(breaches: &[Breach]) -> Test {
        let mut requirements = Requirements::new();
        requirements.add(Requirement::new(labels::ARCH, Operator::In, ["amd64"]));
        requirements.add(Requirement::new(labels::OS, Operator::In, ["linux"]));
        let capacity: ResourceList = [("cpu", Quantity::from_units(2))].into_iter().collect();
        let it = InstanceType::new(
            "t.small",
            requirements,
            vec![
                Offering::new("zone-a", "spot", 0.05),
                Offering::new("zone-a", "on-demand", 0.1),
            ],
            capacity,
            Overhead::default(),
        );
        Test {
            types: vec![Arc::new(it)],
            machines: Mutex::new(BTreeMap::new()),
            deleted: Mutex::new(BTreeSet::new()),
            failed: Mutex::new(BTreeSet::new()),
            launches: Mutex::new(0),
            breaches: breaches.iter().copied().collect(),
        }
    }

    fn breaks(&self, b: Breach) -> bool {
        self.breaches.contains(&b)
    }

    fn fail(&self, offering: &UnavailableOffering) {
        self.failed.lock().expect("lock").insert(offering.clone());
    }
}

#[async_trait]
impl CloudProvider for Test {
    async fn create(&self, claim: &NodeClaim) -> Result<NodeClaim, CloudProviderError> {
        let failed = self.failed.lock().expect("lock").clone();
        let is_failed =
            |it: &InstanceType, o: &Offering| failed.contains(&UnavailableOffering::of(it, o));
        let Some(launch) =
            resolve_launch(claim, &self.types, &self.label_policy(), None, is_failed)
        else {
            let offerings: Vec<UnavailableOffering> = failed.into_iter().collect();
            if self.breaks(Breach::CapacityErrorIsCreate) {
                return Err(CloudProviderError::create("Failed", "no capacity"));
            }
            return Err(CloudProviderError::insufficient_capacity(
                offerings,
                "no capacity",
            ));
        };
        let mut launches = self.launches.lock().expect("lock");
        *launches += 1;
        let id = format!("test://{launches}");
        let mut machines = self.machines.lock().expect("lock");
        let mut launched = launch.launched(claim, id.clone());
        if self.breaks(Breach::NoZoneLabel) {
            launched.metadata.labels.remove(labels::ZONE);
        }
        machines.insert(id, launched.clone());
        Ok(launched)
    }

    async fn delete(&self, claim: &NodeClaim) -> Result<(), CloudProviderError> {
        let id = claim.status.provider_id.clone().unwrap_or_default();
        let mut deleted = self.deleted.lock().expect("lock");
        if deleted.contains(&id) && self.breaks(Breach::SecondDeleteIsOther) {
            return Err(CloudProviderError::other("already deleting"));
        }
        if self.breaks(Breach::DeleteKeepsTheMachine) {
            deleted.insert(id);
            return Ok(());
        }
        match self.machines.lock().expect("lock").remove(&id) {
            Some(_) => {
                deleted.insert(id);
                Ok(())
            }
            None => Err(CloudProviderError::not_found(id)),
        }
    }

    async fn get(&self, id: &str) -> Result<NodeClaim, CloudProviderError> {
        match self.machines.lock().expect("lock").get(id) {
            Some(claim) => {
                let mut claim = claim.clone();
                if self.breaks(Breach::GetChangesCapacityType) {
                    claim
                        .metadata
                        .labels
                        .insert(labels::CAPACITY_TYPE.into(), "reserved".into());
                }
                Ok(claim)
            }
            None if self.breaks(Breach::GetUnknownIsOther) => {
                Err(CloudProviderError::other("bad id"))
            }
            None => Err(CloudProviderError::not_found(id)),
        }
    }

    async fn list(&self) -> Result<Vec<NodeClaim>, CloudProviderError> {
        if self.breaks(Breach::ListsNothing) {
            return Ok(Vec::new());
        }
        Ok(self
            .machines
            .lock()
            .expect("lock")
            .values()
            .cloned()
            .collect())
    }

    async fn instance_types(
        &self,
        _node_pool: &NodePool,
    ) -> Result<Vec<Arc<InstanceType>>, CloudProviderError> {
        Ok(self.types.clone())
    }

    async fn is_drifted(&self, _claim: &NodeClaim) -> Result<Option<String>, CloudProviderError> {
        Ok(None)
    }

    fn repair_policies(&self) -> Vec<RepairPolicy> {
        Vec::new()
    }

    fn name(&self) -> &str {
        "test"
    }
}

fn template() -> NodeClaim {
    let mut claim = NodeClaim::new("c", NodeClaimSpec::new(NodeClassReference::default()));
    claim
        .metadata
        .labels
        .insert(labels::NODEPOOL.into(), "default".into());
    claim
}

fn config(provider: &Arc<Test>) -> ConformanceConfig {
    let p = Arc::clone(provider);
    ConformanceConfig::new(template()).with_insufficient_capacity(
        InsufficientCapacityCase::new(UnavailableOffering::new("t.small", "zone-a", "on-demand"))
            .with_inject(move |o| p.fail(o)),
    )
}

fn run(breaches: &[Breach]) -> ConformanceReport {
    let provider = Arc::new(Test::new(breaches));
    futures::executor::block_on(run_all(provider.as_ref(), &config(&provider)))
}

/// The checks that failed, each with its error's text.
fn failed(report: &ConformanceReport) -> Vec<(Check, String)> {
    report
        .failures()
        .map(|e| (e.check(), e.to_string()))
        .collect()
}

#[test]
fn a_conforming_provider_passes_every_check() {
    let report = run(&[]);
    assert!(report.is_success(), "{report}");
    assert_eq!(report.results.len(), Check::ALL.len());
    assert!(
        report
            .results
            .iter()
            .all(|(_, o)| matches!(o, Outcome::Passed)),
        "{report}"
    );
    assert_eq!(
        report.to_string().lines().next(),
        Some("test: not-found: passed")
    );
}

#[test]
fn every_launched_claim_is_deleted_again() {
    let provider = Arc::new(Test::new(&[Breach::NoZoneLabel]));
    let report = futures::executor::block_on(run_all(provider.as_ref(), &config(&provider)));
    assert!(!report.is_success());
    assert!(provider.machines.lock().expect("lock").is_empty());
}

#[test]
fn without_a_case_insufficient_capacity_is_skipped() {
    let provider = Test::new(&[]);
    let config = ConformanceConfig::new(template());
    let report = futures::executor::block_on(run_all(&provider, &config));
    assert!(report.is_success());
    assert!(matches!(
        report.outcome(Check::InsufficientCapacity),
        Some(Outcome::Skipped(_))
    ));
}

#[test]
fn get_of_an_unknown_id_must_answer_not_found() {
    assert_eq!(
        failed(&run(&[Breach::GetUnknownIsOther])),
        [
            (
                Check::NotFound,
                "not-found: get of an unknown id(conformance:///does-not-exist) should answer \
                 NodeClaimNotFound, got Err(bad id)"
                    .to_string()
            ),
            (
                Check::CreateGetListDelete,
                "create-get-list-delete: get after delete(test://1) should answer \
                 NodeClaimNotFound, got Err(bad id)"
                    .to_string()
            )
        ]
    );
}

#[test]
fn list_must_list_a_launched_claim() {
    let report = run(&[Breach::ListsNothing]);
    assert_eq!(
        failed(&report),
        [(
            Check::CreateGetListDelete,
            "create-get-list-delete: list does not contain test://1 after create".to_string()
        )]
    );
}

#[test]
fn delete_must_remove_the_machine() {
    let checks: Vec<Check> = failed(&run(&[Breach::DeleteKeepsTheMachine]))
        .into_iter()
        .map(|(c, _)| c)
        .collect();
    // Deleting an unknown id "succeeds" too, and the claim outlives its delete.
    assert_eq!(checks, [Check::NotFound, Check::CreateGetListDelete]);
}

#[test]
fn a_second_delete_must_succeed_or_answer_not_found() {
    let report = run(&[Breach::SecondDeleteIsOther]);
    let failures: Vec<&ConformanceError> = report.failures().collect();
    assert_eq!(failures.len(), 1);
    assert!(matches!(
        failures[0],
        ConformanceError::SecondDelete {
            check: Check::IdempotentDelete,
            ..
        }
    ));
}

#[test]
fn a_launched_claim_must_carry_the_zone() {
    let report = run(&[Breach::NoZoneLabel]);
    let labels_failure = report
        .failures()
        .find(|e| e.check() == Check::LaunchedLabels)
        .expect("labels check fails");
    assert_eq!(
        labels_failure.to_string(),
        "launched-labels: the launched claim test://2 has no label topology.kubernetes.io/zone"
    );
}

#[test]
fn get_must_report_the_launched_capacity_type() {
    let report = run(&[Breach::GetChangesCapacityType]);
    assert_eq!(
        failed(&report),
        [(
            Check::LaunchedLabels,
            "launched-labels: get(test://2) has karpenter.sh/capacity-type=Some(\"reserved\"), \
             create returned \"spot\""
                .to_string()
        )]
    );
}

#[test]
fn insufficient_capacity_must_be_typed() {
    let report = run(&[Breach::CapacityErrorIsCreate]);
    let failures: Vec<&ConformanceError> = report.failures().collect();
    assert_eq!(failures.len(), 1);
    assert!(matches!(
        failures[0],
        ConformanceError::ExpectedInsufficientCapacity {
            check: Check::InsufficientCapacity,
            ..
        }
    ));
    let err = report.into_result().expect_err("a failure");
    assert_eq!(err.failures.len(), 1);
    assert!(
        err.to_string()
            .starts_with("provider test: 1 conformance check(s) failed: ")
    );
}

#[test]
fn pinned_replaces_the_offering_keys_only() {
    let mut claim = template();
    claim.spec.requirements = Some(vec![
        NodeSelectorRequirement::new(labels::ZONE, Operator::In, ["zone-b"]),
        NodeSelectorRequirement::new(labels::ARCH, Operator::In, ["amd64"]),
    ]);
    let pinned = pinned(
        claim,
        &UnavailableOffering::new("t.small", "zone-a", "spot"),
    );
    let keys: Vec<(&str, Vec<String>)> = pinned
        .spec
        .requirements()
        .iter()
        .map(|r| (r.key.as_str(), r.values.clone()))
        .collect();
    assert_eq!(
        keys,
        [
            (labels::ARCH, vec!["amd64".to_string()]),
            (labels::INSTANCE_TYPE, vec!["t.small".to_string()]),
            (labels::ZONE, vec!["zone-a".to_string()]),
            (labels::CAPACITY_TYPE, vec!["spot".to_string()]),
        ]
    );
}
