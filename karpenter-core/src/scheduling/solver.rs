//! The Solve (spec section 3): queue, placement on existing nodes, in-flight and new NodeClaims,
//! instance-type filtering, limits, reserved capacity and finalisation.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use std::borrow::Cow;
use std::cell::RefCell;

use fixedbitset::FixedBitSet;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

/// (template, requirements without hostname) → the instance types meeting the requirements and
/// those with a compatible available offering.
type FilterCache = RequirementsCache<Arc<Criteria>>;

/// The requirement and offering criteria of spec 3.9 under some requirements, per instance type
/// of a template.
struct Criteria {
    /// The types whose requirements intersect the requirements.
    compatible: TypeSet,
    /// The types with an available offering compatible with the requirements.
    offering: TypeSet,
}

/// (template, the requirements on the keys offerings carry) → the offering view.
type OfferingCache = RequirementsCache<Arc<OfferingView>>;

/// What the available offerings of a template's instance types look like under some
/// requirements. Offering compatibility depends only on the requirements of the keys offerings
/// carry (zone, capacity type, reservation id), so one view serves every claim that agrees on
/// those keys.
struct OfferingView {
    /// Per instance type: the price of its cheapest compatible available offering (infinite
    /// when there is none).
    cheapest: Vec<f64>,
}

use crate::hostports::HostPortUsage;
use crate::labels::{self, LabelPolicy};
use crate::model::{InstanceType, Pod};
use crate::requirements::{Requirement, Requirements};
use crate::resources::ResourceList;
use crate::taints::{self, Taint};

mod cache;
mod claims;
mod classes;
mod existing;
mod hints;
mod messages;
mod prepared;
mod scan;
mod typeset;

use typeset::{FitTable, TypeSet};

pub(crate) use hints::PodHint;

use messages::{filter_error_message, format_resources, min_values_relaxation, pod_error};

use cache::RequirementsCache;
use classes::PodClasses;
use existing::build_existing;
pub(crate) use existing::{ExistingKey, ExistingMemo};
use scan::ClaimScan;

use super::dense::{self, Res, ResourceIndex};
use super::podreqs::{self, PodRequirements};
use super::topology::{
    DomainUniverse, HostnameGroups, PodRef, Topology, TopologyBase, TopologyInput, TopologyTemplate,
};
use super::volumes::{NodeVolumes, PodVolumes};
use super::{
    ExistingNodeRef, PodError, PodErrorKind, PreferencePolicy, Results, SchedulerOptions,
    SchedulingInput,
};

/// Runs a solve. See the [module documentation](super).
pub fn solve(input: &SchedulingInput, options: &SchedulerOptions) -> Results {
    solve_with_existing(input, &[], options)
}

/// Runs a solve whose existing nodes are `input.existing_nodes` followed by `extra_existing`,
/// borrowed rather than owned. The result is exactly that of [`solve`] over an input holding all
/// of those nodes in that order; callers that already hold the nodes and their pods (a
/// consolidation simulation over a cluster snapshot) avoid copying them.
pub fn solve_with_existing(
    input: &SchedulingInput,
    extra_existing: &[ExistingNodeRef<'_>],
    options: &SchedulerOptions,
) -> Results {
    solve_with_existing_memo(input, extra_existing, options, None)
}

/// [`solve_with_existing`] reusing the existing nodes `memo` kept from the last solve it
/// served: `keys` names each node of `extra_existing` (see [`ExistingKey`]). The result is
/// exactly [`solve_with_existing`]'s.
pub(crate) fn solve_with_existing_memo(
    input: &SchedulingInput,
    extra_existing: &[ExistingNodeRef<'_>],
    options: &SchedulerOptions,
    memo: Option<(&mut ExistingMemo, &[ExistingKey])>,
) -> Results {
    let nodes: Vec<ExistingNodeRef<'_>> = input
        .existing_nodes
        .iter()
        .map(ExistingNodeRef::from)
        .chain(extra_existing.iter().copied())
        .collect();
    let consolidation = input.consolidation.as_ref();
    let pods: Vec<&Pod> = input.pods.iter().collect();
    let keys: Vec<Option<ExistingKey>> = match &memo {
        Some((_, keys)) => std::iter::repeat_n(None, input.existing_nodes.len())
            .chain(keys.iter().cloned().map(Some))
            .collect(),
        None => Vec::new(),
    };
    let memo = memo.map(|(memo, _)| (memo, keys.as_slice()));
    Prepared::new_with_memo(input, nodes, options, &pods, memo)
        .solve(&SolveRequest {
            pods: &pods,
            removed: &[],
            refusing: consolidation.map(|c| &c.nodes_refusing_displaced_pods),
            displaced: consolidation.map(|c| &c.displaced_pods),
            hints: None,
            new_claim_limit: None,
        })
        // Without a limit a solve always runs to its end.
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Templates and daemon overhead groups
// ---------------------------------------------------------------------------------------------

/// Instance types of one template with the same set of compatible DaemonSets (spec 5.1).
struct DaemonGroup {
    overhead: Res,
    overhead_list: ResourceList,
    host_ports: HostPortUsage,
}

struct Template {
    pool: String,
    requirements: Requirements,
    labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
    startup_taints: Vec<Taint>,
    instance_types: Vec<Arc<InstanceType>>,
    /// Per instance type: the base allocatable (allocatable group 0).
    allocatable: Vec<Res>,
    /// Per instance type: every allocatable group (spec 1.3), base first, when some offering
    /// carries overrides; empty otherwise (the fast path: the base group holds every available
    /// offering).
    alloc_groups: Vec<Vec<AllocGroup>>,
    /// Whether any instance type has allocatable groups beyond the base.
    has_overrides: bool,
    group_of: Vec<usize>,
    groups: Vec<DaemonGroup>,
    /// Per daemon group: its instance types (empty when there is a single group).
    group_members: Vec<TypeSet>,
    /// Which instance types' base allocatable covers a need.
    fit: FitTable,
    /// Limited resources: (resource index, remaining milli-units). `nodes` is tracked too.
    limits: Vec<(usize, i64)>,
    nodes_limit: Option<i64>,
    capacity: Vec<Res>,
    /// The distinct requirement sets of the instance types' offerings.
    offering_requirements: Vec<Requirements>,
    /// Per instance type: its available offerings in order, as (price, index into
    /// `offering_requirements`).
    offerings: Vec<Vec<(f64, u32)>>,
    /// Every label key that appears in an offering's requirements, sorted.
    offering_keys: Vec<String>,
    /// Whether any instance type has a reserved offering.
    has_reserved: bool,
}

/// An allocatable group of an instance type with offering overrides (spec 1.3).
struct AllocGroup {
    allocatable: Res,
    /// Indices into the instance type's offerings (available ones only).
    offerings: Vec<usize>,
}

/// Pre-filter (spec 3.1) on resources and offerings: some allocatable group has no negative
/// resource and an available offering compatible with `reqs`.
fn has_usable_group(it: &InstanceType, reqs: &Requirements, policy: &LabelPolicy) -> bool {
    if !it.has_offering_overrides() {
        return it
            .available_offerings()
            .any(|o| reqs.is_compatible(o.requirements(), Some(policy)))
            && it.allocatable().iter().all(|(_, q)| !q.is_negative());
    }
    it.allocatable_groups().iter().any(|g| {
        g.allocatable.iter().all(|(_, q)| !q.is_negative())
            && g.offerings.iter().any(|&o| {
                it.offerings
                    .get(o)
                    .is_some_and(|o| reqs.is_compatible(o.requirements(), Some(policy)))
            })
    })
}

/// Whether a DaemonSet pod would run on a node described by `node_reqs` (and, for templates, an
/// instance type): trying its required node-affinity terms in order (spec 5.1).
fn daemon_compatible(
    daemon: &Pod,
    node_reqs: &Requirements,
    instance_type: Option<&InstanceType>,
    loose: Option<&LabelPolicy>,
) -> bool {
    let compatible = |pod: &Pod| {
        let reqs = podreqs::pod_requirements(pod, PreferencePolicy::Ignore).strict;
        node_reqs.is_compatible(&reqs, loose)
            && instance_type.is_none_or(|it| it.requirements().intersects(&reqs).is_ok())
    };
    // The first try reads the DaemonSet pod itself; it is copied only to drop terms.
    if compatible(daemon) {
        return true;
    }
    let mut pod = daemon.clone();
    loop {
        match pod.node_affinity.as_mut() {
            Some(a) if a.required.len() >= 2 => {
                a.required.remove(0);
            }
            _ => return false,
        }
        if compatible(&pod) {
            return true;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Existing nodes and NodeClaims under construction
// ---------------------------------------------------------------------------------------------

#[derive(Clone)]
struct ExistingNode {
    name: String,
    requirements: Requirements,
    taints: Vec<Taint>,
    remaining: Res,
    host_ports: HostPortUsage,
    volumes: NodeVolumes,
    pods: Vec<usize>,
}

struct Claim {
    template: usize,
    hostname: String,
    requirements: Requirements,
    /// The instance types still possible (indices into the template's types).
    options: TypeSet,
    requests: Res,
    pods: Vec<usize>,
    host_ports: HostPortUsage,
    min_values_relaxed: bool,
    /// Per-resource maximum allocatable over `options`: a cheap upper bound for early rejects.
    max_allocatable: Res,
    reservations: BTreeSet<String>,
    /// The hostname's interned topology id, once registered.
    hostname_id: Option<u32>,
    /// `requirements` on each topology key.
    topology_keys: TopologyKeyCache,
}

/// A candidate's requirements on each topology key, indexed by the topology's key id (keys
/// interned after the last refresh fall back to a map look-up).
type TopologyKeyCache = SmallVec<[KeyRequirement; 4]>;

/// A candidate's requirement on one topology key: its values as a domain mask when it has one
/// ([`Topology::domain_mask`]), otherwise a copy of the requirement (none: the candidate lacks
/// the key). A candidate whose requirement has a mask is asked for the requirement itself only
/// when a limit has no mask.
#[derive(Clone)]
struct KeyRequirement {
    requirement: Option<Requirement>,
    mask: Option<u64>,
}

/// The cache for `reqs`.
fn topology_key_cache(topology: &Topology<'_>, reqs: &Requirements) -> TopologyKeyCache {
    topology
        .key_names()
        .enumerate()
        .map(|(kid, k)| {
            let requirement = reqs.get(k);
            let mask = requirement.and_then(|r| topology.domain_mask(kid as u32, r));
            KeyRequirement {
                requirement: requirement.filter(|_| mask.is_none()).cloned(),
                mask,
            }
        })
        .collect()
}

/// Where a pod goes.
enum Placement {
    Existing(usize, Requirements),
    /// A claim and its position in the in-flight list.
    Claim(usize, usize, ClaimUpdate),
}

/// Which positions of the in-flight claim list changed since it was last sorted.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Touched {
    /// None: the list is in order.
    Nothing,
    /// One claim, at this position, gained a pod (or was appended).
    At(usize),
    /// More than one position.
    Many,
}

/// What adding a pod to a claim would change.
struct ClaimUpdate {
    /// The new requirements; `None` when they are unchanged.
    requirements: Option<Requirements>,
    options: TypeSet,
    min_values_relaxed: bool,
    reservations: BTreeSet<String>,
}

#[derive(Debug)]
enum AddError {
    Pod(PodErrorKind, String),
    /// Compatible reserved offerings exist but none has capacity (strict mode).
    Reserved(String),
}

/// Per-pod data that changes when the pod is relaxed.
struct PodState<'p> {
    /// The pod as attempted: borrowed from the input until a relaxation needs a copy.
    pod: Cow<'p, Pod>,
    /// `namespace/name`, computed once.
    key: String,
    /// Displaced from a consolidation candidate: refused by nodes under `consolidateAfter`.
    displaced: bool,
    /// The pod's class (see [`classes`]) and how many relaxation steps it has taken.
    class: u32,
    step: usize,
    /// The class's requirements at `step`.
    reqs: Arc<PodRequirements>,
    requests: Res,
    constrained: bool,
    /// Where the topology keeps the pod's entry (a relaxed copy shares it).
    topology_ref: PodRef,
    /// The pod's volumes (unchanged by relaxation).
    volumes: Arc<PodVolumes>,
}

impl PodState<'_> {
    /// The pod's class, when it has one (pods of a class share their namespace and labels).
    fn known_class(&self) -> Option<u32> {
        (self.class != u32::MAX).then_some(self.class)
    }
}

/// Which of the three instance-type criteria were met, for error messages (spec 3.9).
#[derive(Default)]
struct FilterStats {
    requirements: bool,
    fits: bool,
    offering: bool,
    requirements_and_fits: bool,
    requirements_and_offering: bool,
    fits_and_offering: bool,
}

/// The cluster side of a solve, prepared once: the resource index, the templates with their
/// daemon overhead groups, the existing nodes' state and the topology domain universe. Any
/// number of solves can share it: each names the pods to place and which existing nodes to
/// leave out (a consolidation simulation removes its candidates), and costs little beyond the
/// pods it places — the prepared state is borrowed, and an existing node is copied only when a
/// pod lands on it.
pub(crate) struct Prepared<'a> {
    options: &'a SchedulerOptions,
    input: &'a SchedulingInput,
    index: ResourceIndex,
    templates: Vec<Template>,
    /// Per template: the position of its pool's existing nodes in `nodes` (for limits).
    pool_nodes: Vec<Vec<usize>>,
    universe: Arc<DomainUniverse>,
    /// The topology's prepared side; it also holds every existing node, in input order.
    topology: Arc<TopologyBase<'a>>,
    reservation_capacity: BTreeMap<String, i64>,
    tolerate_prefer_no_schedule: bool,
    /// Existing nodes not marked for deletion, in placement order (initialized first, then by
    /// name): (position in `nodes`, state before the solve).
    existing: Vec<(usize, Arc<ExistingNode>)>,
    /// The topology every solve that leaves nodes out forks, built by the first such solve.
    topology_template: std::sync::OnceLock<TopologyTemplate<'a>>,
}

/// One solve over a [`Prepared`] cluster.
pub(crate) struct SolveRequest<'r> {
    /// The pods to place, borrowed (a consolidation simulation does not copy the pods it
    /// moves).
    pub(crate) pods: &'r [&'r Pod],
    /// Per position in the prepared nodes: whether the node is left out (empty: none is).
    pub(crate) removed: &'r [bool],
    /// Names of existing nodes that refuse `displaced` pods (spec 2.10).
    pub(crate) refusing: Option<&'r BTreeSet<String>>,
    /// Keys (`namespace/name`) of the pods displaced from consolidation candidates.
    pub(crate) displaced: Option<&'r BTreeSet<String>>,
    /// Per pod of `pods`, what [`Prepared::pod_hints`] computed for it once for many solves
    /// (ignored unless it has one entry per pod).
    pub(crate) hints: Option<&'r [&'r PodHint]>,
    /// Stop as soon as the solve holds more new NodeClaims than this: [`Prepared::solve`] then
    /// returns `None` (a caller that rejects such results, the multi-node consolidation search,
    /// need not finish the solve: NodeClaims are never taken away during a solve).
    pub(crate) new_claim_limit: Option<usize>,
}

/// Per existing node, what a solve knows beyond the prepared state.
struct ExistingMeta {
    /// In a consolidation simulation: the node refuses displaced pods (spec 2.10).
    refuses_displaced: bool,
    /// The hostname's interned topology id (existing hosts are registered at construction).
    hostname_id: Option<u32>,
    /// The node's requirements on each topology key, set when a pod lands on it (until then
    /// look-ups read the requirements).
    /// Boxed: most nodes take no pod, and a small entry per node keeps the per-solve table
    /// small.
    topology_keys: Option<Box<TopologyKeyCache>>,
}

struct Solver<'a> {
    options: &'a SchedulerOptions,
    policy: &'a LabelPolicy,
    input: &'a SchedulingInput,
    pods: &'a [&'a Pod],
    /// Per pod of `pods`: its hint, when the caller computed them.
    hints: Option<&'a [&'a PodHint]>,
    /// See [`SolveRequest::new_claim_limit`].
    new_claim_limit: Option<usize>,
    displaced: Option<&'a BTreeSet<String>>,
    index: &'a ResourceIndex,
    templates: &'a [Template],
    /// Per template: limited resources, (resource index, remaining milli-units).
    limits: Vec<Vec<(usize, i64)>>,
    /// Per template: NodeClaims the `nodes` limit still allows.
    nodes_limit: Vec<Option<i64>>,
    existing: Vec<Arc<ExistingNode>>,
    existing_meta: Vec<ExistingMeta>,
    /// The existing nodes' remaining CPU (resource index 0), to skip full nodes.
    existing_cpu: dense::MaxTree,
    claims: Vec<Claim>,
    /// Per claim: the inputs of the claim scan's cheap checks (see [`scan`]).
    claim_scan: Vec<ClaimScan>,
    /// The NodeClaims of this solve in upstream's order: one persistent list, re-sorted in
    /// place by pod count with Go's `sort.Slice` before each placement attempt that reaches
    /// it (spec 3.8), new claims appended at the end. See [`Solver::sort_claims`].
    claim_order: Vec<usize>,
    /// What changed in `claim_order` since it was last sorted.
    claim_order_touched: Touched,
    topology: Topology<'a>,
    tolerate_prefer_no_schedule: bool,
    hostname_counter: usize,
    /// Reservation id → instances left (spec 5.4).
    reservation_capacity: BTreeMap<String, i64>,
    /// Cache: (template, requirements without hostname) → options passing the requirement and
    /// offering criteria.
    filter_cache: RefCell<FilterCache>,
    offering_cache: RefCell<OfferingCache>,
    errors: BTreeMap<usize, PodError>,
    /// Per input pod: its volumes (spec 5.3), resolved before the queue is built.
    pod_volumes: Vec<Arc<PodVolumes>>,
    /// The pods grouped by scheduling signature, with what each class shares.
    classes: PodClasses,
    /// Per set of hostname groups whose rejections last: the NodeClaims they reject for good.
    host_rejections: RefCell<FxHashMap<HostnameGroups, HostRejections>>,
}

/// The NodeClaims some hostname groups reject for good (see `HostnameCheck::rejects_for_good`):
/// later pods constrained by the same groups skip them without looking, and skip the whole
/// claim list when every claim is in the set (a pod with hostname anti-affinity, once every
/// claim holds one of its kind).
#[derive(Default)]
struct HostRejections {
    /// By claim index.
    claims: FixedBitSet,
    /// How many claims are in the set.
    count: usize,
}

impl<'a> Solver<'a> {
    fn new(prepared: &'a Prepared<'_>, request: &SolveRequest<'a>) -> Solver<'a> {
        let removed = |i: usize| request.removed.get(i).copied().unwrap_or(false);
        let options = prepared.options;
        let policy = &options.label_policy;
        let mut limits = Vec::with_capacity(prepared.templates.len());
        let mut nodes_limit = Vec::with_capacity(prepared.templates.len());
        for (t, tpl) in prepared.templates.iter().enumerate() {
            let mut l = tpl.limits.clone();
            let mut n = tpl.nodes_limit;
            for &i in prepared.pool_nodes.get(t).into_iter().flatten() {
                if !removed(i) {
                    continue;
                }
                n = n.map(|n| n + 1);
                let capacity = &prepared.topology.nodes()[i].node.capacity;
                for (r, remaining) in l.iter_mut() {
                    *remaining += capacity.get_or_zero(prepared.index.name(*r)).milli_value();
                }
            }
            limits.push(l);
            nodes_limit.push(n);
        }

        // With hints (one per pod), the pods' classes were found once for many solves.
        let hints = request.hints.filter(|h| h.len() == request.pods.len());
        let known: Option<Vec<u32>> = hints.map(|h| h.iter().map(|h| h.class).collect());
        let classes = PodClasses::build(
            request.pods,
            known.as_deref(),
            policy,
            options.preference_policy,
            &prepared.index,
        );
        let topology_input = TopologyInput {
            preference_policy: options.preference_policy,
            universe: prepared.universe.clone(),
            base: prepared.topology.clone(),
            removed: request.removed,
            batch_pods: request.pods,
            batch_classes: classes.ids(),
            batch_uids_distinct: hints.is_some_and(|h| h.iter().all(|h| h.unique_uid)),
        };
        // A solve that leaves nodes out (a consolidation simulation) forks the prepared topology
        // instead of building it over every existing node again.
        let forked = if request.removed.iter().any(|&r| r) {
            prepared.topology_template().fork(&topology_input)
        } else {
            None
        };
        let topology = forked.unwrap_or_else(|| Topology::new(topology_input));

        let mut existing = Vec::with_capacity(prepared.existing.len());
        let mut existing_meta = Vec::with_capacity(prepared.existing.len());
        for (i, node) in &prepared.existing {
            if removed(*i) {
                continue;
            }
            existing_meta.push(ExistingMeta {
                refuses_displaced: request.refusing.is_some_and(|r| {
                    !r.is_empty() && r.contains(&prepared.topology.nodes()[*i].node.name)
                }),
                hostname_id: topology.base_hostname_id(*i, &node.name),
                topology_keys: None,
            });
            existing.push(node.clone());
        }
        let cpu: Vec<i64> = existing
            .iter()
            .map(|n| n.remaining.first().copied().unwrap_or(0))
            .collect();
        Solver {
            existing_cpu: dense::MaxTree::new(&cpu),
            options,
            policy,
            input: prepared.input,
            pods: request.pods,
            hints,
            new_claim_limit: request.new_claim_limit,
            displaced: request.displaced,
            index: &prepared.index,
            templates: &prepared.templates,
            limits,
            nodes_limit,
            existing,
            existing_meta,
            claims: Vec::new(),
            claim_scan: Vec::new(),
            claim_order: Vec::new(),
            claim_order_touched: Touched::Nothing,
            topology,
            tolerate_prefer_no_schedule: prepared.tolerate_prefer_no_schedule,
            hostname_counter: 0,
            reservation_capacity: prepared.reservation_capacity.clone(),
            filter_cache: RefCell::new(RequirementsCache::default()),
            offering_cache: RefCell::new(RequirementsCache::default()),
            errors: BTreeMap::new(),
            pod_volumes: Vec::new(),
            classes,
            host_rejections: RefCell::new(FxHashMap::default()),
        }
    }

    /// The state of the unrelaxed pod `idx` for a placement attempt.
    fn pod_state(&mut self, idx: usize) -> PodState<'a> {
        let pods = self.pods;
        let pod = pods[idx];
        let class = self.classes.class_id(idx);
        let (reqs, requests) = match self.classes.of_pod(idx) {
            Some(c) => (
                c.unrelaxed().cloned().unwrap_or_else(|| {
                    Arc::new(podreqs::pod_requirements(
                        pod,
                        self.options.preference_policy,
                    ))
                }),
                c.requests.clone(),
            ),
            None => (
                Arc::new(podreqs::pod_requirements(
                    pod,
                    self.options.preference_policy,
                )),
                self.index.dense(&pod.scheduling_requests()),
            ),
        };
        let key = self.pod_key(idx);
        let topology_ref = self.topology.batch_pod_ref(idx);
        let constrained = self.topology.constrains_at(pod, topology_ref);
        PodState {
            pod: Cow::Borrowed(pod),
            displaced: self.displaced.is_some_and(|d| d.contains(&key)),
            key,
            class,
            step: 0,
            reqs,
            requests,
            constrained,
            topology_ref,
            volumes: self.pod_volumes.get(idx).cloned().unwrap_or_default(),
        }
    }

    /// Runs the solve; `None` when it stopped at its new-NodeClaim limit.
    fn run(mut self) -> Option<Results> {
        let pods = self.pods;
        // Validation before scheduling (spec 1.5).
        let mut queue: Vec<usize> = Vec::new();
        self.pod_volumes = vec![Arc::default(); pods.len()];
        let mut metrics = super::SolveMetrics::default();
        for (i, pod) in pods.iter().enumerate() {
            // Validation and the pod's requirements: once per class, the same error text.
            let Some(class) = self.classes.of_pod(i) else {
                continue;
            };
            let reqs = match (&class.invalid, class.unrelaxed()) {
                (None, Some(reqs)) => reqs.clone(),
                (Some(e), _) => {
                    self.errors.insert(i, e.clone());
                    continue;
                }
                (None, None) => continue,
            };
            // Volumes (spec 5.3): pods whose claims are not usable yet are left out.
            match PodVolumes::prepare(&self.input.volumes, pod) {
                // Pods without volumes (most) keep the shared empty entry.
                Ok(v) if v == PodVolumes::default() => {}
                Ok(v) => self.pod_volumes[i] = Arc::new(v),
                Err(e) => {
                    self.errors.insert(
                        i,
                        pod_error(PodErrorKind::Invalid, format!("ignoring pod: {e}")),
                    );
                    continue;
                }
            }
            if pod.phase == crate::model::PodPhase::Pending {
                metrics.count_pending(super::metrics::effective_zone(
                    &self.topology,
                    self.topology.batch_pod_ref(i),
                    &reqs,
                ));
            }
            queue.push(i);
        }
        let queue = hints::queue_sorted(pods, queue, self.hints);
        let mut queue: std::collections::VecDeque<usize> = queue.into();
        let mut marker: FxHashMap<usize, usize> = FxHashMap::default();
        while let Some(&head) = queue.front() {
            metrics.queue_depth_max = metrics.queue_depth_max.max(queue.len());
            if marker.get(&head) == Some(&queue.len()) {
                break;
            }
            queue.pop_front();
            match self.try_schedule(head) {
                Ok(()) => {
                    self.errors.remove(&head);
                    if self.new_claim_limit.is_some_and(|l| self.claims.len() > l) {
                        return None;
                    }
                }
                Err(e) => {
                    self.errors.insert(head, e);
                    // Retries start again from the unrelaxed pod.
                    let at = self.topology.batch_pod_ref(head);
                    self.topology.update_batch(pods[head], at);
                    queue.push_back(head);
                    marker.insert(head, queue.len());
                }
            }
        }
        let mut results = self.finish();
        metrics.count_errors(results.pod_errors.values());
        results.metrics = metrics;
        Some(results)
    }

    fn try_schedule(&mut self, idx: usize) -> Result<(), PodError> {
        let mut state = self.pod_state(idx);
        loop {
            // Error text is built only for the attempt whose error is kept: the one no
            // relaxation follows. Attempts are pure until they succeed, so running the failed
            // attempt again with messages gives exactly its error.
            let err = match self.add(idx, &state, false) {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if let AddError::Reserved(m) = err {
                return Err(pod_error(PodErrorKind::ReservedOffering, m));
            }
            if let AddError::Pod(PodErrorKind::Dra, m) = err {
                return Err(pod_error(PodErrorKind::Dra, m));
            }
            let mut pod = state.pod.as_ref().clone();
            let affinity_terms = |p: &Pod| {
                p.node_affinity
                    .as_ref()
                    .map(|a| (a.required.len(), a.preferred.len()))
            };
            let before = affinity_terms(&pod);
            if !podreqs::relax(
                &mut pod,
                self.options.preference_policy,
                self.tolerate_prefer_no_schedule,
            ) {
                let (kind, message) = match self.add(idx, &state, true) {
                    Err(AddError::Reserved(m)) => (PodErrorKind::ReservedOffering, m),
                    Err(AddError::Pod(k, m)) => (k, m),
                    // Unreachable (the attempt is deterministic); keep the placement.
                    Ok(()) => return Ok(()),
                };
                return Err(pod_error(kind, message));
            }
            self.topology.update_at(&pod, state.topology_ref);
            // The pod's requirements read only its node selector and node affinity; a
            // relaxation removes terms, so unchanged term counts mean unchanged requirements.
            state.step += 1;
            state.reqs = self.classes.step_requirements(
                state.class,
                state.step,
                &pod,
                before != affinity_terms(&pod),
                self.options.preference_policy,
            );
            state.constrained = self.topology.constrains_at(&pod, state.topology_ref);
            state.pod = Cow::Owned(pod);
        }
    }

    /// One placement attempt. `verbose`: build error messages (otherwise a failure carries
    /// its kind and an empty message).
    fn add(&mut self, idx: usize, st: &PodState<'_>, verbose: bool) -> Result<(), AddError> {
        if st.pod.has_resource_claims && self.options.ignore_dra_requests {
            return Err(AddError::Pod(
                PodErrorKind::Dra,
                "pod has Dynamic Resource Allocation requirements that are not supported".into(),
            ));
        }
        // Upstream sorts its claims only when the pod fits no existing node; the existing
        // nodes do not change the claims and sorting a sorted list is the identity, so sorting
        // first gives the same order.
        self.sort_claims();
        // Placement on an existing node or an in-flight claim. Two cheap, exact pre-checks run
        // first, both resolved once per attempt: the pod's hostname groups (per candidate: a
        // few array reads by interned hostname) and node-independent topology domain limits.
        let chosen = {
            let host = self.topology.hostname_check_at(st.topology_ref);
            // Each limit with its domain mask: candidates whose requirement on the key has one
            // too are checked with a bit test instead of comparing values.
            let prefilter: SmallVec<[(u32, Requirement, Option<u64>); 2]> = if st.constrained {
                self.topology
                    .domain_prefilter_at(st.topology_ref, &st.reqs.strict)
                    .into_iter()
                    .map(|(kid, r)| {
                        let mask = self.topology.domain_mask(kid, &r);
                        (kid, r, mask)
                    })
                    .collect()
            } else {
                SmallVec::new()
            };
            // The limits as (key, mask) when each has a mask: most candidates are then
            // checked from their scan record alone.
            let mask_limits: Option<SmallVec<[(u32, u64); 2]>> = prefilter
                .iter()
                .map(|(kid, _, mask)| mask.map(|m| (*kid, m)))
                .collect();
            let passes_prefilter = |cache: &[KeyRequirement], reqs: &Requirements| {
                prefilter.iter().all(|(kid, r, mask)| {
                    let nd = match cache.get(*kid as usize) {
                        Some(cached) => {
                            match (cached.mask, *mask) {
                                (Some(a), Some(b)) => return a & b != 0,
                                // The cache keeps no copy of a requirement with a mask.
                                (Some(_), None) => reqs.get(r.key()),
                                (None, _) => cached.requirement.as_ref(),
                            }
                        }
                        None => reqs.get(r.key()),
                    };
                    match nd {
                        Some(nd) => nd.has_intersection(r),
                        None => !r.is_empty(),
                    }
                })
            };
            let mut chosen = None;
            // 1. Existing nodes, in order; those without the pod's CPU left are skipped (they
            // would fail the resource check).
            let cpu_needed = st.requests.first().copied().unwrap_or(0);
            let mut from = 0;
            while let Some(n) = self.existing_cpu.first_at_least(from, cpu_needed) {
                from = n + 1;
                let (Some(node), Some(meta)) = (self.existing.get(n), self.existing_meta.get(n))
                else {
                    break;
                };
                let keys = meta
                    .topology_keys
                    .as_ref()
                    .map_or(&[][..], |k| k.as_slice());
                if host.rejects(meta.hostname_id) || !passes_prefilter(keys, &node.requirements) {
                    continue;
                }
                if let Some(reqs) = self.existing_can_add(n, st) {
                    chosen = Some(Placement::Existing(n, reqs));
                    break;
                }
            }
            // 2. NodeClaims of this solve, fewest pods first, in upstream's order. Claims the
            // pod's hostname groups reject for good are remembered per set of groups.
            let lasting = host.lasting_groups();
            let host_groups = !host.is_empty();
            let mut memos = self.host_rejections.borrow_mut();
            let mut memo = (!lasting.is_empty()).then(|| memos.entry(lasting.clone()).or_default());
            let all_rejected = memo.as_ref().is_some_and(|m| m.count >= self.claims.len());
            if chosen.is_none() && !all_rejected {
                for (pos, &c) in self.claim_order.iter().enumerate() {
                    if memo.as_ref().is_some_and(|m| m.claims.contains(c)) {
                        continue;
                    }
                    let Some(scan) = self.claim_scan.get(c) else {
                        continue;
                    };
                    if host_groups && host.rejects(scan.hostname_id()) {
                        if let Some(m) = memo.as_mut()
                            && host.rejects_for_good(scan.hostname_id())
                        {
                            m.claims.grow(c + 1);
                            m.claims.insert(c);
                            m.count += 1;
                        }
                        continue;
                    }
                    if scan.over_capacity(&st.requests) {
                        continue;
                    }
                    let from_scan = mask_limits
                        .as_deref()
                        .and_then(|limits| scan.passes_masks(limits));
                    if from_scan == Some(false) {
                        continue;
                    }
                    let claim = &self.claims[c];
                    if self.claim_over_capacity(claim, st)
                        || (from_scan.is_none()
                            && !passes_prefilter(&claim.topology_keys, &claim.requirements))
                    {
                        continue;
                    }
                    let tpl = &self.templates[claim.template];
                    if taints::tolerates_all(&st.pod.tolerations, &tpl.taints).is_err() {
                        continue;
                    }
                    if let Ok(update) =
                        self.claim_can_add(&claims::ClaimAttempt::in_flight(claim, st))
                    {
                        chosen = Some(Placement::Claim(c, pos, update));
                        break;
                    }
                }
            }
            chosen
        };
        match chosen {
            Some(Placement::Existing(n, reqs)) => {
                self.existing_add(n, idx, st, reqs);
                return Ok(());
            }
            Some(Placement::Claim(c, pos, update)) => {
                self.claim_add(c, pos, idx, st, update);
                self.refresh_scan(c);
                return Ok(());
            }
            None => {}
        }
        // 3./4. A new NodeClaim from the first template that can take the pod.
        if self.templates.is_empty() {
            return Err(AddError::Pod(
                PodErrorKind::NoNodePools,
                "nodepool requirements filtered out all available instance types".into(),
            ));
        }
        let mut errors = Vec::new();
        let mut kind = None;
        for t in 0..self.templates.len() {
            match self.new_claim(t, idx, st, verbose) {
                Ok(()) => {
                    // The new claim is the last one.
                    self.refresh_scan(self.claims.len().saturating_sub(1));
                    return Ok(());
                }
                Err(AddError::Reserved(m)) => {
                    return Err(AddError::Reserved(format!(
                        "incompatible with nodepool {:?}: {m}",
                        self.templates[t].pool
                    )));
                }
                Err(AddError::Pod(k, m)) => {
                    kind = kind.or(Some(k));
                    if !verbose {
                        continue;
                    }
                    errors.push(format!(
                        "incompatible with nodepool {:?}, daemonset overhead={}, {m}",
                        self.templates[t].pool,
                        self.daemon_overhead_summary(t)
                    ));
                }
            }
        }
        Err(AddError::Pod(
            kind.unwrap_or(PodErrorKind::InstanceTypes),
            errors.join("; "),
        ))
    }

    /// Brings claim `c`'s scan record up to date (after a pod was added to it).
    fn refresh_scan(&mut self, c: usize) {
        // Claims are appended one at a time, each refreshed when it takes its first pod.
        while self.claim_scan.len() < c {
            let Some(claim) = self.claims.get(self.claim_scan.len()) else {
                return;
            };
            self.claim_scan.push(ClaimScan::of(claim));
        }
        let Some(claim) = self.claims.get(c) else {
            return;
        };
        let scan = ClaimScan::of(claim);
        match self.claim_scan.get_mut(c) {
            Some(slot) => *slot = scan,
            None => self.claim_scan.push(scan),
        }
    }

    fn daemon_overhead_summary(&self, t: usize) -> String {
        let tpl = &self.templates[t];
        let lists: Vec<&ResourceList> = tpl.groups.iter().map(|g| &g.overhead_list).collect();
        let min = ResourceList::min_common(lists.iter().copied());
        format_resources(&min)
    }
}
