//! The universe of topology domains (upstream `buildDomainGroups`, upstream `buildDomainGroups` and
//! `TopologyDomainGroup`).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::model::InstanceType;
use crate::requirements::{Operator, Requirement, Requirements};
use crate::taints::{self, Taint, Toleration};

/// A NodePool as the domain universe sees it.
///
/// `requirements` must be the pool's `spec.template.spec.requirements` intersected with `In [v]`
/// for every `spec.template.metadata.labels` entry — and nothing else: upstream does not add the
/// `karpenter.sh/nodepool`, node-class or simulation-only (`registered`/`initialized`) keys here,
/// so passing the full template requirements would invent domains for those keys.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UniversePool<'a> {
    /// The pool's requirements ∧ its template labels.
    pub requirements: &'a Requirements,
    /// The pool's `spec.template.spec.taints` (not its startup taints).
    pub taints: &'a [Taint],
    /// The instance types the provider offers for the pool. A pool without instance types
    /// contributes nothing.
    pub instance_types: &'a [Arc<InstanceType>],
}

/// The taint sets of the pools that can produce one domain.
///
/// Upstream's insertion rule: inserting with an empty taint set replaces the list with `[∅]`
/// ("always tolerated"); once `[∅]` is present further sets are not recorded. Identical sets are
/// recorded once (upstream appends duplicates; the result of the tolerance test is the same).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct DomainTaints {
    sets: Vec<Vec<Taint>>,
}

impl DomainTaints {
    fn insert(&mut self, taints: &[Taint]) {
        if taints.is_empty() {
            self.sets.clear();
            self.sets.push(Vec::new());
            return;
        }
        if self.sets.first().is_some_and(Vec::is_empty) {
            return;
        }
        if !self.sets.iter().any(|s| s.as_slice() == taints) {
            self.sets.push(taints.to_vec());
        }
    }

    /// Whether a pod with these tolerations tolerates at least one pool producing the domain.
    pub(super) fn tolerated_by(&self, tolerations: &[Toleration]) -> bool {
        self.sets
            .iter()
            .any(|set| taints::tolerates_all(tolerations, set).is_ok())
    }
}

/// Every domain (label value) per topology key that the NodePools could create, each with the
/// taint sets of the pools producing it (upstream `buildDomainGroups`).
///
/// Hostname domains never come from here: they come from existing nodes and from new
/// NodeClaims, through [`super::Topology::register`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct DomainUniverse {
    keys: BTreeMap<String, BTreeMap<String, DomainTaints>>,
}

impl DomainUniverse {
    /// Builds the universe (upstream `buildDomainGroups`). For every pool that has instance types:
    ///
    /// - for every instance type, `pool requirements ∧ instance-type requirements` is computed
    ///   key by key, and every value of every key's requirement becomes a domain of that key,
    ///   tagged with the pool's taints — so zones or capacity types an instance type offers but
    ///   the pool excludes are not domains;
    /// - every pool requirement whose operator is `In` contributes its values as well (custom
    ///   keys no instance type defines, or values no instance type offers, are still domains).
    ///
    /// Upstream quirk, reproduced: "every value" is the requirement's raw value set, which for a
    /// `NotIn` requirement is its *excluded* list (only reachable for a pool `NotIn` on a key the
    /// instance type leaves undefined).
    pub(crate) fn build(pools: &[UniversePool<'_>]) -> DomainUniverse {
        let mut universe = DomainUniverse::default();
        for pool in pools {
            if pool.instance_types.is_empty() {
                continue;
            }
            for it in pool.instance_types {
                universe.insert_intersection(pool.requirements, &it.requirements, pool.taints);
            }
            for r in pool.requirements.iter() {
                if r.operator() == Operator::In {
                    universe.insert_values(r, pool.taints);
                }
            }
        }
        universe
    }

    /// Inserts every value of every key of `a ∧ b` without materialising the intersection map.
    fn insert_intersection(&mut self, a: &Requirements, b: &Requirements, taints: &[Taint]) {
        for ra in a.iter() {
            match b.get(ra.key()) {
                Some(rb) => self.insert_values(&ra.intersection(rb), taints),
                None => self.insert_values(ra, taints),
            }
        }
        for rb in b.iter() {
            if !a.has(rb.key()) {
                self.insert_values(rb, taints);
            }
        }
    }

    fn insert_values(&mut self, r: &Requirement, taints: &[Taint]) {
        if r.values().len() == 0 {
            return;
        }
        let domains = self.keys.entry(r.key().to_owned()).or_default();
        for v in r.values() {
            match domains.get_mut(v) {
                Some(d) => d.insert(taints),
                None => {
                    let mut d = DomainTaints::default();
                    d.insert(taints);
                    domains.insert(v.to_owned(), d);
                }
            }
        }
    }

    /// Adds one domain by hand (tests and callers that know extra domains).
    #[cfg(test)]
    pub(crate) fn insert(&mut self, key: &str, domain: &str, taints: &[Taint]) {
        self.keys
            .entry(key.to_owned())
            .or_default()
            .entry(domain.to_owned())
            .or_default()
            .insert(taints);
    }

    /// The domains of `key`, sorted, with their taint sets.
    pub(super) fn domains<'a>(
        &'a self,
        key: &str,
    ) -> impl Iterator<Item = (&'a str, &'a DomainTaints)> + use<'a> {
        self.keys
            .get(key)
            .into_iter()
            .flat_map(|m| m.iter().map(|(d, t)| (d.as_str(), t)))
    }
}
