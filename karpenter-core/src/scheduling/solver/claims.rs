//! The solver's NodeClaims: fitting a pod on an in-flight claim, instance-type filtering,
//! opening new claims, reservations and finalising the results.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;

use crate::hostports::HostPortUsage;
use crate::labels::{self};
use crate::model::InstanceType;
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::ResourceList;
use crate::taints::{self};

use crate::scheduling::dense::{self, Res};
use crate::scheduling::gosort;
use crate::scheduling::{
    ExistingNodeResult, MinValuesPolicy, NewNodeClaim, PodErrorKind, ReservedCapacityMode, Results,
};

use super::{
    AddError, Claim, ClaimUpdate, Criteria, FilterStats, OfferingView, PodState, Solver, Template,
    TopologyKeyCache, Touched, TypeSet, filter_error_message, min_values_relaxation, pod_error,
    topology_key_cache,
};

/// The inputs of one attempt to add a pod to a NodeClaim: an in-flight claim's state
/// ([`ClaimAttempt::in_flight`]) or a new claim's starting point.
#[derive(Clone, Copy)]
pub(super) struct ClaimAttempt<'c, 'p> {
    /// The claim's template.
    pub(super) template: usize,
    /// The claim's requirements before the pod.
    pub(super) requirements: &'c Requirements,
    /// The claim's instance-type options (indices into the template's types).
    pub(super) options: &'c TypeSet,
    /// The requests of the claim's pods so far.
    pub(super) requests: &'c Res,
    /// The host ports the claim's pods use.
    pub(super) host_ports: &'c HostPortUsage,
    /// The reservations the claim holds.
    pub(super) reservations: &'c BTreeSet<String>,
    /// The pod as attempted.
    pub(super) pod: &'c PodState<'p>,
    /// Lower unmet `minValues` to what the options achieve (BestEffort, new claims).
    pub(super) relax_min_values: bool,
    /// Build error messages.
    pub(super) verbose: bool,
}

impl<'c, 'p> ClaimAttempt<'c, 'p> {
    /// Adding `pod` to the in-flight `claim` (no `minValues` relaxation, no messages).
    pub(super) fn in_flight(claim: &'c Claim, pod: &'c PodState<'p>) -> Self {
        ClaimAttempt {
            template: claim.template,
            requirements: &claim.requirements,
            options: &claim.options,
            requests: &claim.requests,
            host_ports: &claim.host_ports,
            reservations: &claim.reservations,
            pod,
            relax_min_values: false,
            verbose: false,
        }
    }
}

impl<'a> Solver<'a> {
    /// Whether the claim's pods plus this pod exceed even its largest remaining option.
    pub(super) fn claim_over_capacity(&self, claim: &Claim, st: &PodState<'_>) -> bool {
        !dense::fits_sum(&claim.requests, &st.requests, &claim.max_allocatable)
    }

    /// Spec 3.8 `CanAdd`: the pod's volume alternatives are tried in order, the first that
    /// passes every check wins; when all fail, the last failure is reported.
    pub(super) fn claim_can_add(&self, a: &ClaimAttempt<'_, '_>) -> Result<ClaimUpdate, AddError> {
        let mut last = None;
        for volume in a.pod.volumes.alternatives() {
            match self.claim_can_add_alternative(a, volume) {
                Ok(update) => return Ok(update),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(AddError::Pod(PodErrorKind::Requirements, String::new())))
    }

    /// [`claim_can_add`](Self::claim_can_add) with one volume alternative (`None`: no volume
    /// requirement).
    pub(super) fn claim_can_add_alternative(
        &self,
        a: &ClaimAttempt<'_, '_>,
        volume: Option<&Requirements>,
    ) -> Result<ClaimUpdate, AddError> {
        let ClaimAttempt {
            template: t,
            requirements: claim_reqs,
            options,
            requests,
            host_ports,
            reservations: held,
            pod: st,
            relax_min_values,
            verbose,
        } = *a;
        // Messages are only built when someone will read them (new claims from templates);
        // failed attempts on in-flight claims are discarded, and they are the hot path.
        let fail = |kind: PodErrorKind, message: &dyn Fn() -> String| {
            AddError::Pod(kind, if verbose { message() } else { String::new() })
        };
        let policy = self.policy;
        let tpl = &self.templates[t];
        if let Err(e) = taints::tolerates_all(&st.pod.tolerations, &tpl.taints) {
            return Err(fail(PodErrorKind::Taints, &|| e.to_string()));
        }
        if !st.pod.host_ports.is_empty()
            && let Err(e) = host_ports.conflicts(&st.key, &st.pod.host_ports)
        {
            return Err(fail(PodErrorKind::HostPorts, &|| e.to_string()));
        }
        if !claim_reqs.is_compatible(&st.reqs.requirements, Some(policy)) {
            return Err(fail(PodErrorKind::Requirements, &|| {
                let e = claim_reqs.incompatibility(&st.reqs.requirements, Some(policy));
                format!("incompatible requirements, {e}")
            }));
        }
        // Borrowed while the attempt leaves the claim's requirements as they are (most failed
        // attempts): copied only when they change or the attempt succeeds.
        // A pod whose constraints the claim already meets leaves them as they are.
        let mut reqs: Cow<'_, Requirements> =
            match claim_reqs.intersection_if_changed(&st.reqs.requirements) {
                None => Cow::Borrowed(claim_reqs),
                Some(changed) => Cow::Owned(changed),
            };
        // Spec 3.8 step 3a: the volume alternative constrains the NodeClaim only.
        if let Some(volume) = volume {
            if !reqs.is_compatible(volume, Some(policy)) {
                return Err(fail(PodErrorKind::Requirements, &|| {
                    let e = reqs.incompatibility(volume, Some(policy));
                    format!("incompatible volume requirements, {e}")
                }));
            }
            reqs.to_mut().add_all(volume);
        }
        if st.constrained {
            let topo = self
                .topology
                .add_requirements_at(&st.pod, st.topology_ref, &st.reqs.strict, &reqs)
                .map_err(|e| fail(PodErrorKind::Topology, &|| e.to_string()))?;
            if !reqs.is_compatible(&topo, Some(policy)) {
                return Err(fail(PodErrorKind::Topology, &|| {
                    let e = reqs.incompatibility(&topo, Some(policy));
                    format!("unsatisfiable topology constraint, {e}")
                }));
            }
            reqs = Cow::Owned(topo);
        }
        let total = dense::add(requests, &st.requests);
        let unchanged = matches!(reqs, Cow::Borrowed(_)) || *reqs == *claim_reqs;
        let (survivors, stats, min_values) =
            self.filter(t, options, &reqs, unchanged, st, &total, relax_min_values);
        if survivors.is_empty() {
            let kind = if min_values.is_some() {
                PodErrorKind::MinValues
            } else {
                PodErrorKind::InstanceTypes
            };
            return Err(fail(kind, &|| {
                filter_error_message(&stats, min_values.as_deref(), &reqs, &total, self.index)
            }));
        }
        let mut relaxed = false;
        if let Some(achieved) = &min_values_relaxation(&reqs, &survivors, self, t)
            && relax_min_values
        {
            for (key, count) in achieved {
                if let Some(r) = reqs.to_mut().get_mut(key) {
                    r.set_min_values(Some(*count as i64));
                    relaxed = true;
                }
            }
        }
        let reservations = self.reservations_for(t, &reqs, &survivors, held)?;
        Ok(ClaimUpdate {
            // Unchanged requirements are not copied: the claim keeps its own.
            requirements: (!unchanged || relaxed).then(|| reqs.into_owned()),
            options: survivors,
            min_values_relaxed: relaxed,
            reservations,
        })
    }

    /// The offering view of template `t` under `reqs` (cached).
    pub(super) fn offering_view(&self, t: usize, reqs: &Requirements) -> Arc<OfferingView> {
        let tpl = &self.templates[t];
        let key = tpl.offering_keys.iter().map(|k| reqs.get(k));
        if let Some(v) = self.offering_cache.borrow().get(t, key.clone()) {
            return v;
        }
        // Each distinct offering requirement set is checked once.
        let compatible: Vec<bool> = tpl
            .offering_requirements
            .iter()
            .map(|o| reqs.is_compatible(o, Some(self.policy)))
            .collect();
        let mut cheapest = Vec::with_capacity(tpl.instance_types.len());
        for offerings in &tpl.offerings {
            let mut best = f64::INFINITY;
            for &(price, r) in offerings {
                if price < best && compatible[r as usize] {
                    best = price;
                }
            }
            cheapest.push(best);
        }
        let view = Arc::new(OfferingView { cheapest });
        self.offering_cache
            .borrow_mut()
            .insert(t, key, view.clone());
        view
    }

    /// The requirement and offering criteria of template `t` under `reqs` (cached by the
    /// requirements without the hostname, which no instance type or offering carries).
    fn criteria(&self, t: usize, reqs: &Requirements) -> Arc<Criteria> {
        let key_reqs = reqs
            .iter()
            .filter(|r| r.key() != labels::HOSTNAME)
            .map(Some);
        if let Some(c) = self.filter_cache.borrow().get(t, key_reqs.clone()) {
            return c;
        }
        let tpl = &self.templates[t];
        let view = self.offering_view(t, reqs);
        let count = tpl.instance_types.len();
        let mut compatible = TypeSet::empty(count);
        let mut offering = TypeSet::empty(count);
        for (i, it) in tpl.instance_types.iter().enumerate() {
            if it.requirements().intersects(reqs).is_ok() {
                compatible.insert(i as u32);
            }
            if view.cheapest[i].is_finite() {
                offering.insert(i as u32);
            }
        }
        let computed = Arc::new(Criteria {
            compatible,
            offering,
        });
        self.filter_cache
            .borrow_mut()
            .insert(t, key_reqs, computed.clone());
        computed
    }

    /// Spec 3.9 for the candidates `options` of template `t`: the options meeting the
    /// requirements, holding a compatible available offering and fitting `total` plus their
    /// daemon group's overhead, as set operations (see [`TypeSet`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn filter(
        &self,
        t: usize,
        options: &TypeSet,
        reqs: &Requirements,
        reqs_unchanged: bool,
        st: &PodState<'_>,
        total: &Res,
        relax_min_values: bool,
    ) -> (TypeSet, FilterStats, Option<String>) {
        // Requirement and offering criteria depend only on the requirements: cache them.
        // Unchanged requirements: the options met both when they were kept.
        let criteria = (!reqs_unchanged).then(|| self.criteria(t, reqs));
        let tpl = &self.templates[t];
        let count = tpl.instance_types.len();
        let mut stats = FilterStats::default();
        let survivors = if tpl.has_overrides {
            // Templates with offering overrides take the general path (allocatable groups).
            let mut survivors = TypeSet::empty(count);
            self.filter_with_groups(
                tpl,
                options,
                reqs,
                criteria.as_deref(),
                st,
                total,
                (&mut survivors, &mut stats),
            );
            survivors
        } else {
            self.filter_fast(tpl, options, criteria.as_deref(), st, total, &mut stats)
        };
        let mut min_values_error = None;
        let mut survivors = survivors;
        if !survivors.is_empty() && reqs.has_min_values() {
            let result = reqs.satisfies_min_values(
                survivors
                    .iter()
                    .map(|i| tpl.instance_types[i as usize].requirements()),
            );
            if let Err(e) = result
                && !(relax_min_values
                    || self.options.min_values_policy == MinValuesPolicy::BestEffort)
            {
                min_values_error = Some(e.to_string());
                survivors = TypeSet::empty(count);
            }
        }
        (survivors, stats, min_values_error)
    }

    /// [`filter`](Self::filter) for a template without offering overrides, where the base
    /// allocatable group holds every available offering: options whose daemon group's host
    /// ports conflict with the pod's are left out, the rest is intersected with the criteria
    /// and with the types that fit (per daemon group, [`FitTable::fitting`](super::FitTable)).
    fn filter_fast(
        &self,
        tpl: &Template,
        options: &TypeSet,
        criteria: Option<&Criteria>,
        st: &PodState<'_>,
        total: &Res,
        stats: &mut FilterStats,
    ) -> TypeSet {
        let count = tpl.instance_types.len();
        let mut options = Cow::Borrowed(options);
        if !st.pod.host_ports.is_empty() {
            for (g, group) in tpl.groups.iter().enumerate() {
                if group
                    .host_ports
                    .conflicts(&st.key, &st.pod.host_ports)
                    .is_err()
                {
                    match tpl.group_members.get(g) {
                        Some(members) => options.to_mut().remove_all(members),
                        None => options = Cow::Owned(TypeSet::empty(count)),
                    }
                }
            }
        }
        // The requests plus each daemon group's overhead: the types that fit them.
        let fits = match tpl.groups.as_slice() {
            [] => TypeSet::empty(count),
            [only] => tpl.fit.fitting(&dense::add(total, &only.overhead)),
            groups => {
                let mut fits = TypeSet::empty(count);
                for (group, members) in groups.iter().zip(&tpl.group_members) {
                    let mut of_group = tpl.fit.fitting(&dense::add(total, &group.overhead));
                    of_group.and_assign(members);
                    fits.or_assign(&of_group);
                }
                fits
            }
        };
        let full;
        let (compatible, offering) = match criteria {
            Some(c) => (&c.compatible, &c.offering),
            None => {
                full = TypeSet::full(count);
                (&full, &full)
            }
        };
        stats.requirements = options.meets(compatible, compatible);
        stats.fits = options.meets(&fits, &fits);
        stats.offering = options.meets(offering, offering);
        stats.requirements_and_fits = options.meets(compatible, &fits);
        stats.requirements_and_offering = options.meets(compatible, offering);
        stats.fits_and_offering = options.meets(&fits, offering);
        let mut survivors = options.into_owned();
        survivors.and_assign(&fits);
        if criteria.is_some() {
            survivors.and_assign(compatible);
            survivors.and_assign(offering);
        }
        survivors
    }

    /// The loop of [`filter`](Self::filter) for a template with offering overrides (spec
    /// 3.9): an instance type survives when one of its allocatable groups both fits the
    /// requests plus daemon overhead and holds an available offering compatible with `reqs`.
    /// "Fits" (for error messages) holds when any group fits. Kept out of line: overrides are
    /// rare and the fast loop is the hot path.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn filter_with_groups(
        &self,
        tpl: &Template,
        options: &TypeSet,
        reqs: &Requirements,
        criteria: Option<&Criteria>,
        st: &PodState<'_>,
        total: &Res,
        (survivors, stats): (&mut TypeSet, &mut FilterStats),
    ) {
        let pod_key = st.key.as_str();
        let compatible_offering = |it: &InstanceType, offerings: &[usize]| {
            offerings.iter().any(|&o| {
                it.offerings
                    .get(o)
                    .is_some_and(|o| reqs.is_compatible(o.requirements(), Some(self.policy)))
            })
        };
        for i in options.iter() {
            let i_ = i as usize;
            let (Some(it), Some(&g), Some(base)) = (
                tpl.instance_types.get(i_),
                tpl.group_of.get(i_),
                tpl.allocatable.get(i_),
            ) else {
                continue;
            };
            let Some(group) = tpl.groups.get(g) else {
                continue;
            };
            if !st.pod.host_ports.is_empty()
                && group
                    .host_ports
                    .conflicts(pod_key, &st.pod.host_ports)
                    .is_err()
            {
                continue;
            }
            let need = dense::add(total, &group.overhead);
            let (compatible, offering) = criteria.map_or((true, true), |c| {
                (c.compatible.contains(i), c.offering.contains(i))
            });
            let (fits, fits_with_offering) = match tpl.alloc_groups.get(i_) {
                Some(groups) if !groups.is_empty() => {
                    let fitting = groups.iter().filter(|g| dense::fits(&need, &g.allocatable));
                    let mut fits = false;
                    let mut both = false;
                    for g in fitting {
                        fits = true;
                        if compatible_offering(it, &g.offerings) {
                            both = true;
                            break;
                        }
                    }
                    (fits, both)
                }
                _ => {
                    let fits = dense::fits(&need, base);
                    (fits, fits)
                }
            };
            stats.requirements |= compatible;
            stats.fits |= fits;
            stats.offering |= offering;
            stats.requirements_and_fits |= compatible && fits;
            stats.requirements_and_offering |= compatible && offering;
            stats.fits_and_offering |= fits && offering;
            if compatible && fits_with_offering && offering {
                survivors.insert(i);
            }
        }
    }

    pub(super) fn new_claim(
        &mut self,
        t: usize,
        idx: usize,
        st: &PodState<'_>,
        verbose: bool,
    ) -> Result<(), AddError> {
        // Limits (spec 3.10).
        let tpl = &self.templates[t];
        if self.nodes_limit[t] == Some(0) {
            return Err(AddError::Pod(
                PodErrorKind::Limits,
                format!(
                    "node limits have been exhausted for nodepool {:?}",
                    tpl.pool
                ),
            ));
        }
        let count = tpl.instance_types.len();
        let options = match self.limits.get(t) {
            Some(limits) if !limits.is_empty() => {
                let mut options = TypeSet::empty(count);
                for (i, capacity) in tpl.capacity.iter().enumerate() {
                    if limits
                        .iter()
                        .all(|&(r, remaining)| capacity[r] <= remaining)
                    {
                        options.insert(i as u32);
                    }
                }
                options
            }
            // No limited resource: every instance type (no per-type check).
            _ => TypeSet::full(count),
        };
        if options.is_empty() {
            return Err(AddError::Pod(
                PodErrorKind::Limits,
                format!(
                    "all available instance types exceed limits for nodepool {:?}",
                    tpl.pool
                ),
            ));
        }
        let hostname = format!("hostname-placeholder-{:04}", self.hostname_counter + 1);
        let mut reqs = tpl.requirements.clone();
        reqs.add(Requirement::new(
            labels::HOSTNAME,
            Operator::In,
            [hostname.as_str()],
        ));
        let relax = self.options.min_values_policy == MinValuesPolicy::BestEffort;
        let requests = self.index.zero();
        let ports = HostPortUsage::default();
        let held = BTreeSet::new();
        let update = self.claim_can_add(&ClaimAttempt {
            template: t,
            requirements: &reqs,
            options: &options,
            requests: &requests,
            host_ports: &ports,
            reservations: &held,
            pod: st,
            relax_min_values: relax,
            verbose,
        })?;
        self.hostname_counter += 1;
        let c = self.claims.len();
        self.claims.push(Claim {
            template: t,
            hostname,
            requirements: reqs,
            options,
            requests,
            pods: Vec::new(),
            host_ports: ports,
            min_values_relaxed: false,
            max_allocatable: self.index.zero(),
            reservations: held,
            hostname_id: None,
            topology_keys: TopologyKeyCache::new(),
        });
        self.claim_order.push(c);
        self.claim_add(c, self.claim_order.len() - 1, idx, st, update);
        // Subtract the largest capacity among the claim's options from the pool's limits.
        let tpl = &self.templates[t];
        let claim = &self.claims[c];
        for (r, remaining) in self.limits[t].iter_mut() {
            let max = claim
                .options
                .iter()
                .map(|i| tpl.capacity[i as usize][*r])
                .max()
                .unwrap_or(0);
            *remaining -= max;
        }
        Ok(())
    }

    /// Upstream sorts its NodeClaim list with Go's `sort.Slice` by pod count before every
    /// placement attempt that gets past the existing nodes. That sort is deterministic but
    /// not stable beyond 12 claims, so ties depend on the list's history: we keep the same
    /// list and run the same algorithm ([`gosort`]), but only when the list is out of order.
    /// On sorted input Go's sort swaps nothing, so skipping it then gives the identical order.
    ///
    /// The list was sorted after the last sort, and since then one claim (at one position)
    /// gained a pod, or was appended and gained its first, because every placement attempt
    /// starts here. So the list is sorted but for that claim, and [`gosort::sort_moved`] gives
    /// Go's permutation from a few comparisons around it (nothing when it is in order). If more
    /// than one position changed, the whole list is checked and sorted.
    pub(super) fn sort_claims(&mut self) {
        let touched = std::mem::replace(&mut self.claim_order_touched, Touched::Nothing);
        let claims = &self.claims;
        let mut less = |a: &usize, b: &usize| claims[*a].pods.len() < claims[*b].pods.len();
        match touched {
            Touched::Nothing => {}
            // One claim moved: Go's sort of a list sorted but for one element, without a pass
            // over the whole list (see `gosort::sort_moved`); a no-op when it is in order.
            Touched::At(p) => gosort::sort_moved(&mut self.claim_order, &mut less, p),
            Touched::Many => {
                if !gosort::is_sorted(&self.claim_order, &mut less) {
                    gosort::sort_slice(&mut self.claim_order, &mut less);
                }
            }
        }
        debug_assert!(gosort::is_sorted(&self.claim_order, &mut less));
    }

    pub(super) fn claim_add(
        &mut self,
        c: usize,
        pos: usize,
        idx: usize,
        st: &PodState<'_>,
        update: ClaimUpdate,
    ) {
        let claim = &mut self.claims[c];
        let tpl = &self.templates[claim.template];
        // The options only shrink (survivors of the current ones): the same count means the
        // same options, hence the same bound — except for a new claim, whose bound is unset.
        let options_changed = claim.pods.is_empty() || update.options != claim.options;
        claim.pods.push(idx);
        self.claim_order_touched = match self.claim_order_touched {
            Touched::Nothing => Touched::At(pos),
            Touched::At(p) if p == pos => Touched::At(pos),
            _ => Touched::Many,
        };
        let requirements_changed = update.requirements.is_some();
        if let Some(requirements) = update.requirements {
            claim.requirements = requirements;
        }
        claim.options = update.options;
        claim.min_values_relaxed |= update.min_values_relaxed;
        dense::add_assign(&mut claim.requests, &st.requests);
        claim.host_ports.add(&st.key, &st.pod.host_ports);
        if options_changed {
            // From the template's fit table: a few word operations per resource instead of a
            // pass over the remaining types.
            let mut max = tpl.fit.max_over(&claim.options);
            if tpl.has_overrides {
                // Override groups may offer more than the base: keep the bound an upper bound.
                for i in claim.options.iter() {
                    for g in tpl.alloc_groups.get(i as usize).into_iter().flatten() {
                        dense::max_assign(&mut max, &g.allocatable);
                    }
                }
            }
            claim.max_allocatable = max;
        }
        // Reservations: take new ones, release ones no longer wanted.
        for id in update.reservations.difference(&claim.reservations) {
            *self.reservation_capacity.entry(id.clone()).or_insert(0) -= 1;
        }
        for id in claim.reservations.difference(&update.reservations) {
            *self.reservation_capacity.entry(id.clone()).or_insert(0) += 1;
        }
        claim.reservations = update.reservations;
        let claim = &self.claims[c];
        self.topology.register(labels::HOSTNAME, &claim.hostname);
        self.topology.record_at(
            &st.pod,
            st.topology_ref,
            st.known_class(),
            &tpl.taints,
            &claim.requirements,
        );
        // The hostname's id never changes once interned; the per-key cache is rebuilt when the
        // requirements change or the topology has interned new keys since it was built.
        let hostname_id = match claim.hostname_id {
            Some(id) => Some(id),
            None => self.topology.hostname_id(&claim.hostname),
        };
        let stale = requirements_changed
            || claim.pods.len() == 1
            || claim.topology_keys.len() != self.topology.key_names().len();
        let topology_keys = stale.then(|| topology_key_cache(&self.topology, &claim.requirements));
        let claim = &mut self.claims[c];
        claim.hostname_id = hostname_id;
        if let Some(keys) = topology_keys {
            claim.topology_keys = keys;
        }
    }

    /// Spec 5.4: the reserved offerings a claim would hold.
    pub(super) fn reservations_for(
        &self,
        t: usize,
        reqs: &Requirements,
        options: &TypeSet,
        held: &BTreeSet<String>,
    ) -> Result<BTreeSet<String>, AddError> {
        let tpl = &self.templates[t];
        let mut compatible = false;
        let mut wanted = BTreeSet::new();
        if !tpl.has_reserved && held.is_empty() {
            return Ok(wanted);
        }
        for i in options.iter() {
            for o in tpl.instance_types[i as usize].available_offerings() {
                let Some(id) = o.reservation_id().filter(|_| o.is_reserved()) else {
                    continue;
                };
                if !reqs.is_compatible(o.requirements(), Some(self.policy)) {
                    continue;
                }
                compatible = true;
                if held.contains(id) || self.reservation_capacity.get(id).is_some_and(|c| *c > 0) {
                    wanted.insert(id.to_string());
                }
            }
        }
        if self.options.reserved_capacity_mode == ReservedCapacityMode::Strict
            && ((compatible && wanted.is_empty()) || (!held.is_empty() && wanted.is_empty()))
        {
            return Err(AddError::Reserved(
                "compatible reserved offerings exist but none has capacity left".into(),
            ));
        }
        Ok(wanted)
    }

    // ---- finalisation ----------------------------------------------------------------------

    pub(super) fn finish(mut self) -> Results {
        let pods = self.pods;
        let mut results = Results::default();
        let claims = std::mem::take(&mut self.claims);
        for claim in claims {
            let tpl = &self.templates[claim.template];
            let mut reqs = claim.requirements;
            reqs.remove(labels::HOSTNAME);
            if !claim.reservations.is_empty() {
                reqs.remove(labels::CAPACITY_TYPE);
                reqs.add(Requirement::new(
                    labels::CAPACITY_TYPE,
                    Operator::In,
                    [labels::CAPACITY_TYPE_RESERVED],
                ));
                if let Some(key) = &self.options.reservation_id_label {
                    reqs.remove(key);
                    reqs.add(Requirement::new(
                        key,
                        Operator::In,
                        claim.reservations.iter().map(String::as_str),
                    ));
                }
            }
            // Order by cheapest compatible offering, truncate, re-check minValues (spec 3.11).
            let view = self.offering_view(claim.template, &reqs);
            // (price, index): the instance types themselves are shared only for the kept ones.
            let mut its: Vec<(f64, usize)> = claim
                .options
                .iter()
                .map(|i| (view.cheapest[i as usize], i as usize))
                .collect();
            // A total order (indices are distinct): selecting the first `max` and sorting them
            // gives the prefix of the fully sorted list.
            let by_price =
                |a: &(f64, usize), b: &(f64, usize)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
            let max = self.options.max_instance_types;
            if max > 0 && its.len() > max {
                its.select_nth_unstable_by(max - 1, by_price);
            }
            its.truncate(max);
            its.sort_by(by_price);
            if reqs.has_min_values()
                && self.options.min_values_policy == MinValuesPolicy::Strict
                && let Err(e) = reqs.satisfies_min_values(
                    its.iter().map(|x| tpl.instance_types[x.1].requirements()),
                )
            {
                for &p in &claim.pods {
                    self.errors.insert(
                        p,
                        pod_error(
                            PodErrorKind::MinValues,
                            format!(
                                "pod didn't schedule because NodePool {:?} couldn't meet minValues requirements, {e}",
                                tpl.pool
                            ),
                        ),
                    );
                }
                continue;
            }
            // Requests: pods plus the smallest overhead among groups still holding an option.
            let mut requests = ResourceList::new();
            for &p in &claim.pods {
                requests.add_assign(&pods[p].scheduling_requests());
            }
            // In group order, as a set of groups would iterate them.
            let live_groups =
                tpl.groups
                    .iter()
                    .enumerate()
                    .filter(|&(g, _)| match tpl.group_members.get(g) {
                        Some(members) => claim.options.meets(members, members),
                        None => !claim.options.is_empty(),
                    });
            let overhead =
                ResourceList::min_common(live_groups.map(|(_, group)| &group.overhead_list));
            requests.add_assign(&overhead);

            // Output requirements: drop the simulation keys. The instance-type and
            // capacity-type requirements of the NodeClaim are derived from the kept options
            // when it is created (`NewNodeClaim::node_claim_requirements`, upstream ToNodeClaim).
            reqs.remove(labels::REGISTERED);
            reqs.remove(labels::INITIALIZED);
            let mut node_labels = tpl.labels.clone();
            node_labels.extend(reqs.labels(self.policy));
            // A vector of exactly the kept options (not one sized for every option before
            // truncation, up to 400 per claim).
            let mut instance_types = Vec::with_capacity(its.len());
            instance_types.extend(its.iter().map(|x| tpl.instance_types[x.1].clone()));
            results.new_node_claims.push(NewNodeClaim {
                node_pool: tpl.pool.clone(),
                requirements: reqs,
                instance_types,
                pods: claim.pods.iter().map(|&p| self.pod_key(p)).collect(),
                requests,
                labels: node_labels,
                taints: tpl.taints.clone(),
                startup_taints: tpl.startup_taints.clone(),
                min_values_relaxed: claim.min_values_relaxed,
                reservation_ids: claim.reservations.iter().cloned().collect(),
            });
        }
        for node in &self.existing {
            if !node.pods.is_empty() {
                results.existing_nodes.push(ExistingNodeResult {
                    name: node.name.clone(),
                    pods: node.pods.iter().map(|&p| self.pod_key(p)).collect(),
                });
            }
        }
        let errors = std::mem::take(&mut self.errors);
        results.pod_errors = errors
            .into_iter()
            .map(|(i, e)| (self.pod_key(i), e))
            .collect();
        results
    }
}
