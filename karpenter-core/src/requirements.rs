//! The node-requirement algebra (upstream `scheduling/requirements.go`): one [`Requirement`] per
//! label key, the [`Requirements`] map that intersects them, and the serde shape upstream uses for
//! requirements in NodePools and NodeClaims ([`NodeSelectorRequirement`]).
//!
//! A [`Requirement`] is a finite set of values or the complement of one (every string except the
//! listed ones), optionally intersected with inclusive integer bounds. Bounds only admit values
//! that parse as 64-bit decimal integers (Go's `strconv.Atoi` rules: optional sign, digits,
//! leading zeros allowed).
//!
//! ```
//! use karpenter_core::requirements::{Operator, Requirement, Requirements};
//!
//! let pool = Requirement::new("topology.kubernetes.io/zone", Operator::In, ["a", "b"]);
//! let pod = Requirement::new("topology.kubernetes.io/zone", Operator::NotIn, ["a"]);
//! let both = pool.intersection(&pod);
//! assert_eq!(both.to_string(), "topology.kubernetes.io/zone In [b]");
//! assert_eq!(both.single_value(), Some("b"));
//!
//! let gt = Requirement::new("integer", Operator::Gt, ["8"]);
//! assert!(gt.has("9") && !gt.has("8") && !gt.has("x"));
//! assert_eq!(gt.operator(), Operator::Exists); // bounds alone derive to Exists
//!
//! let node = Requirements::from_labels([("topology.kubernetes.io/zone", "b")]);
//! let mut wants = Requirements::new();
//! wants.add(pod);
//! assert!(node.is_compatible(&wants, None));
//! ```
//!
//! # Determinism
//!
//! Upstream iterates Go sets (unordered) and draws random integers in `Any()`. Here values are
//! always kept sorted (byte order, which is Go's string order), [`Requirement::any`] is a pure
//! function (see its documentation), and [`Requirements`] iterates keys in sorted order.

mod requirement;

pub use self::requirement::Requirement;
use self::requirement::absent_ok;

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use rustc_hash::FxHashSet;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use crate::labels::LabelPolicy;

/// A node-selector operator, as written in YAML. `Gte` and `Lte` are the inclusive forms
/// upstream's NodePool API accepts besides Kubernetes' own operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Operator {
    /// The label's value is one of `values`.
    In,
    /// The label is absent or its value is none of `values`.
    NotIn,
    /// The label is present (any value).
    Exists,
    /// The label is absent.
    DoesNotExist,
    /// The label's value is an integer greater than the single value.
    Gt,
    /// The label's value is an integer less than the single value.
    Lt,
    /// The label's value is an integer greater than or equal to the single value.
    Gte,
    /// The label's value is an integer less than or equal to the single value.
    Lte,
}

impl Operator {
    /// The operator's name as written in YAML.
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::In => "In",
            Operator::NotIn => "NotIn",
            Operator::Exists => "Exists",
            Operator::DoesNotExist => "DoesNotExist",
            Operator::Gt => "Gt",
            Operator::Lt => "Lt",
            Operator::Gte => "Gte",
            Operator::Lte => "Lte",
        }
    }
}

impl std::fmt::Display for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A requirement as written in a NodePool or NodeClaim (`NodeSelectorRequirementWithMinValues`
/// upstream): `{key, operator, values, minValues}`. Field names and their order match upstream's
/// YAML; `values` is omitted when empty and `minValues` when unset.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirement {
    /// The label key.
    pub key: String,
    /// The operator.
    pub operator: Operator,
    /// The values (empty for `Exists` / `DoesNotExist`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// The minimum number of distinct values the candidate instance types must offer for `key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_values: Option<i64>,
}

impl NodeSelectorRequirement {
    /// A requirement without `minValues`.
    pub fn new<K, I, V>(key: K, operator: Operator, values: I) -> Self
    where
        K: Into<String>,
        I: IntoIterator<Item = V>,
        V: Into<String>,
    {
        NodeSelectorRequirement {
            key: key.into(),
            operator,
            values: values.into_iter().map(Into::into).collect(),
            min_values: None,
        }
    }

    /// The requirement with this `minValues`.
    pub fn with_min_values(mut self, min_values: Option<i64>) -> Self {
        self.min_values = min_values;
        self
    }
}

/// Why two sets of requirements are not compatible.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IncompatibleError {
    /// A key the constraints require (with a value) is not defined by the node side.
    #[error("label \"{key}\" does not have known values")]
    UndefinedKey {
        /// The label key.
        key: String,
    },
    /// Both sides define the key but no value satisfies both.
    #[error("key {key}: {right} not in {left}")]
    NoIntersection {
        /// The label key.
        key: String,
        /// The receiver's (node side's) requirement, without the key (`[a b]`, `Gt 8`, `Exists`…).
        left: String,
        /// The argument's (constraint side's) requirement, without the key.
        right: String,
    },
}

/// The instance types do not collectively offer enough distinct values for some keys with
/// `minValues` (upstream `Requirements.SatisfiesMinValues`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "minValues requirement is not met for label(s) (label(s)=[{}])",
    join_keys(.achieved)
)]
#[non_exhaustive]
pub struct MinValuesError {
    /// For every unsatisfied key, the number of distinct values the instance types offered.
    pub achieved: BTreeMap<String, usize>,
}

fn join_keys(map: &BTreeMap<String, usize>) -> String {
    let mut s = String::new();
    for (i, k) in map.keys().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(k);
    }
    s
}

/// Requirements by label key (upstream `scheduling/requirements.go`): at most one [`Requirement`]
/// per key; adding a second requirement for a key stores the intersection. Iteration is sorted by
/// key.
///
/// Keys are normalised when requirements are built; lookups (`get`, `has`, …) use the key as
/// given.
///
/// Stored as a vector sorted by key (a requirement carries its key): requirement sets hold a
/// few keys, so a vector is a fraction of a B-tree node's size and clones in one allocation.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct Requirements {
    reqs: Vec<Requirement>,
}

impl fmt::Debug for Requirements {
    /// `Requirements { map: {"key": Requirement { .. }, ..} }`, keyed like a map.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        struct Map<'a>(&'a [Requirement]);
        impl fmt::Debug for Map<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_map()
                    .entries(self.0.iter().map(|r| (&r.key, r)))
                    .finish()
            }
        }
        f.debug_struct("Requirements")
            .field("map", &Map(&self.reqs))
            .finish()
    }
}

impl Requirements {
    /// Position of `key` in the sorted vector (or where it would go).
    fn position(&self, key: &str) -> Result<usize, usize> {
        self.reqs.binary_search_by(|r| (*r.key).cmp(key))
    }

    /// No requirements.
    pub fn new() -> Self {
        Self::default()
    }

    /// `key In [value]` for every label (upstream `NewLabelRequirements`).
    pub fn from_labels<'a>(labels: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        labels
            .into_iter()
            .map(|(k, v)| Requirement::new(k, Operator::In, [v]))
            .collect()
    }

    /// [`Requirements::from_labels`] with keys and values shared through `interner`: building
    /// many nodes' requirements (every existing node of a solve) allocates each distinct key and
    /// value once instead of once per node.
    pub(crate) fn from_labels_interned<'a>(
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
        interner: &mut LabelInterner<'a>,
    ) -> Self {
        let labels = labels.into_iter();
        let mut out = Requirements::new();
        // One more for the hostname requirement callers add next.
        out.reqs.reserve(labels.size_hint().0 + 1);
        for (k, v) in labels {
            let key = interner.get(crate::labels::normalize_key(k));
            let value = interner.get(v);
            // Label maps come sorted by key: most keys go after the last one, no search needed.
            if out.reqs.last().is_none_or(|last| *last.key < *key) {
                out.reqs.push(Requirement::in_shared(key, value));
            } else {
                out.add(Requirement::in_shared(key, value));
            }
        }
        out
    }

    /// Builds requirements from YAML entries; entries for the same key are intersected (so their
    /// `minValues` combine to the maximum).
    pub fn from_node_selector_requirements(reqs: &[NodeSelectorRequirement]) -> Self {
        reqs.iter().map(Requirement::from_node_selector).collect()
    }

    /// Adds a requirement: stores `r ∩ existing` if the key is present, else `r`.
    pub fn add(&mut self, r: Requirement) {
        match self.position(&r.key) {
            Ok(i) => {
                if let Some(existing) = self.reqs.get_mut(i) {
                    *existing = r.intersection(existing);
                }
            }
            Err(i) => self.reqs.insert(i, r),
        }
    }

    /// Adds every requirement of `other` (see [`add`](Self::add)).
    pub fn add_all(&mut self, other: &Requirements) {
        self.reqs.reserve(other.reqs.len());
        for r in &other.reqs {
            match self.position(&r.key) {
                Ok(i) => {
                    if let Some(existing) = self.reqs.get_mut(i) {
                        *existing = r.intersection(existing);
                    }
                }
                Err(i) => self.reqs.insert(i, r.clone()),
            }
        }
    }

    /// The requirement for `key`, if defined.
    pub fn get(&self, key: &str) -> Option<&Requirement> {
        self.reqs.get(self.position(key).ok()?)
    }

    /// Upstream `Get`: the requirement for `key`, or a fresh `key Exists` when undefined.
    pub fn get_or_exists(&self, key: &str) -> Cow<'_, Requirement> {
        match self.get(key) {
            Some(r) => Cow::Borrowed(r),
            None => Cow::Owned(Requirement::exists(key)),
        }
    }

    /// Mutable access to the requirement for `key` (e.g. to lower its `minValues`).
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Requirement> {
        let i = self.position(key).ok()?;
        self.reqs.get_mut(i)
    }

    /// Whether `key` is defined.
    pub fn has(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// Removes and returns the requirement for `key`.
    pub fn remove(&mut self, key: &str) -> Option<Requirement> {
        let i = self.position(key).ok()?;
        Some(self.reqs.remove(i))
    }

    /// The requirements, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = &Requirement> + Clone {
        self.reqs.iter()
    }

    /// The keys, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.reqs.iter().map(|r| &*r.key)
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.reqs.len()
    }

    /// Whether no key is defined.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// Upstream `Intersects` (upstream `Requirements.Intersects`): for every key defined on both
    /// sides the requirements must intersect ([`Requirement::has_intersection`]), except that two
    /// requirements whose derived operators are both `NotIn` or `DoesNotExist` are accepted (an
    /// absent label satisfies both). Keys defined on one side only are ignored.
    ///
    /// Reports the first failing key in key order (upstream aggregates all failures).
    pub fn intersects(&self, other: &Requirements) -> Result<(), IncompatibleError> {
        match common_keys(&self.reqs, &other.reqs, None::<fn(&Requirement) -> _>)? {
            Some((left, right)) => Err(no_intersection(left, right)),
            None => Ok(()),
        }
    }

    /// Upstream `Compatible` (upstream `Requirements.Compatible`): can a node described by `self`
    /// satisfy the constraints `other`?
    ///
    /// 1. Every key of `other` must be defined on `self`, unless `other`'s requirement for it is
    ///    `NotIn`/`DoesNotExist`, or (loose mode, `allow_undefined = Some(policy)`) the key is
    ///    well-known in `policy`. Otherwise: [`IncompatibleError::UndefinedKey`] for the first such
    ///    key in key order.
    /// 2. Then [`intersects`](Self::intersects).
    ///
    /// `None` is strict mode (existing nodes, topology node filter); `Some(policy)` is loose mode
    /// (NodeClaim templates, offerings).
    ///
    /// Both steps are one walk over the two sorted key lists: an undefined key anywhere is
    /// reported before an intersection failure, as step 1 comes first.
    pub fn compatible(
        &self,
        other: &Requirements,
        allow_undefined: Option<&LabelPolicy>,
    ) -> Result<(), IncompatibleError> {
        let undefined = |r: &Requirement| {
            if may_be_undefined(r, allow_undefined) {
                Ok(())
            } else {
                Err(IncompatibleError::UndefinedKey {
                    key: r.key.to_string(),
                })
            }
        };
        match common_keys(&self.reqs, &other.reqs, Some(undefined))? {
            Some((left, right)) => Err(no_intersection(left, right)),
            None => Ok(()),
        }
    }

    /// Whether [`compatible`](Self::compatible) succeeds, without building its error.
    pub fn is_compatible(
        &self,
        other: &Requirements,
        allow_undefined: Option<&LabelPolicy>,
    ) -> bool {
        let undefined = |r: &Requirement| {
            if may_be_undefined(r, allow_undefined) {
                Ok(())
            } else {
                // Only the failure matters here: no key text.
                Err(IncompatibleError::UndefinedKey { key: String::new() })
            }
        };
        matches!(
            common_keys(&self.reqs, &other.reqs, Some(undefined)),
            Ok(None)
        )
    }

    /// The error of [`compatible`](Self::compatible), as text (empty when compatible): for
    /// callers that test [`is_compatible`](Self::is_compatible) first and describe a failure
    /// only when it is reported.
    pub fn incompatibility(
        &self,
        other: &Requirements,
        allow_undefined: Option<&LabelPolicy>,
    ) -> String {
        self.compatible(other, allow_undefined)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    /// `self` with every requirement of `other` added (intersected per key).
    pub fn intersection(&self, other: &Requirements) -> Requirements {
        let mut out = self.clone();
        out.add_all(other);
        out
    }

    /// [`intersection`](Self::intersection), or `None` when it would equal `self` (every key of
    /// `other` is defined on `self` and intersecting it changes nothing): then `self` is not
    /// copied. The scheduler's common case, a pod whose constraints its NodeClaim already meets.
    pub fn intersection_if_changed(&self, other: &Requirements) -> Option<Requirements> {
        for (n, r) in other.reqs.iter().enumerate() {
            let Ok(i) = self.position(&r.key) else {
                return Some(self.intersection(other));
            };
            let existing = &self.reqs[i];
            let merged = r.intersection(existing);
            if merged != *existing {
                // The keys before `n` change nothing: start from `self` with this key merged.
                let mut out = self.clone();
                out.reqs[i] = merged;
                for rest in &other.reqs[n + 1..] {
                    out.add(rest.clone());
                }
                return Some(out);
            }
        }
        None
    }

    /// Whether any requirement has `minValues`.
    pub fn has_min_values(&self) -> bool {
        self.reqs.iter().any(|r| r.min_values.is_some())
    }

    /// The YAML entries of every requirement, sorted by key (see
    /// [`Requirement::to_node_selector_requirements`]).
    pub fn to_node_selector_requirements(&self) -> Vec<NodeSelectorRequirement> {
        self.reqs
            .iter()
            .flat_map(Requirement::to_node_selector_requirements)
            .collect()
    }

    /// The custom labels a NodeClaim gets from these requirements (upstream
    /// `NodeClaim.FinalizeScheduling` / `nodeclaimtemplate.go`): for every key that is neither
    /// restricted nor well-known in `policy`, `key → any()` (keys whose requirement allows no
    /// deterministic value, e.g. `DoesNotExist`, are skipped).
    pub fn labels(&self, policy: &LabelPolicy) -> BTreeMap<String, String> {
        self.reqs
            .iter()
            .filter(|r| !policy.is_restricted(&r.key) && !policy.is_well_known(&r.key))
            .filter_map(|r| r.any().map(|v| (r.key.to_string(), v)))
            .collect()
    }

    /// Upstream `SatisfiesMinValues` (upstream `Requirements.SatisfiesMinValues`): walks the
    /// instance types' requirements in order, accumulating for each key with `minValues` the
    /// distinct raw values the types list for it (a type that doesn't define the key adds nothing;
    /// values are counted even if `self` disallows them, and a complement contributes its excluded
    /// values, as upstream's `Values()` does). Returns the number of types needed (index + 1) as
    /// soon as every such key has at least `minValues` distinct values, `Ok(0)` when no key has
    /// `minValues` (or, with no instance types, when every `minValues` is `<= 0`), else the
    /// achieved counts of the unsatisfied keys.
    pub fn satisfies_min_values<'a, I>(
        &self,
        instance_type_requirements: I,
    ) -> Result<usize, MinValuesError>
    where
        I: IntoIterator<Item = &'a Requirements>,
    {
        let keyed: SmallVec<[(&str, i64); 4]> = self
            .reqs
            .iter()
            .filter_map(|r| r.min_values.map(|m| (&*r.key, m)))
            .collect();
        if keyed.is_empty() {
            return Ok(0);
        }
        let short =
            |seen: &FxHashSet<&str>, m: i64| i64::try_from(seen.len()).unwrap_or(i64::MAX) < m;
        let mut seen: SmallVec<[FxHashSet<&'a str>; 4]> =
            keyed.iter().map(|_| FxHashSet::default()).collect();
        for (i, it) in instance_type_requirements.into_iter().enumerate() {
            for ((key, _), set) in keyed.iter().zip(seen.iter_mut()) {
                if let Some(r) = it.get(key) {
                    set.extend(r.values());
                }
            }
            if !keyed.iter().zip(&seen).any(|((_, m), s)| short(s, *m)) {
                return Ok(i + 1);
            }
        }
        let achieved: BTreeMap<String, usize> = keyed
            .iter()
            .zip(&seen)
            .filter(|((_, m), s)| short(s, *m))
            .map(|((k, _), s)| ((*k).to_owned(), s.len()))
            .collect();
        if achieved.is_empty() {
            return Ok(0);
        }
        Err(MinValuesError { achieved })
    }
}

/// Whether two requirements for the same key are accepted by `intersects`: they intersect, or
/// an absent label satisfies both (both `NotIn` / `DoesNotExist`).
fn accepted(left: &Requirement, right: &Requirement) -> bool {
    left.has_intersection(right) || (absent_ok(left.operator()) && absent_ok(right.operator()))
}

/// The `intersects` error for `left` (the node side) and `right` (the constraint side).
fn no_intersection(left: &Requirement, right: &Requirement) -> IncompatibleError {
    IncompatibleError::NoIntersection {
        key: left.key.to_string(),
        left: left.describe(),
        right: right.describe(),
    }
}

/// Compares two keys, equal without reading them when they share one string.
fn key_cmp(a: &Arc<str>, b: &Arc<str>) -> Ordering {
    if Arc::ptr_eq(a, b) {
        Ordering::Equal
    } else {
        (**a).cmp(&**b)
    }
}

/// One merge walk over two key-sorted requirement lists: `missing` (if given) is called for
/// every requirement of `other` whose key `mine` lacks (its error ends the walk), and the first
/// pair (in key order) defined on both sides that [`accepted`] rejects is returned as
/// `(mine's, other's)`. Without `missing` the walk ends at that pair.
fn common_keys<'a, F>(
    mine: &'a [Requirement],
    other: &'a [Requirement],
    mut missing: Option<F>,
) -> Result<Option<(&'a Requirement, &'a Requirement)>, IncompatibleError>
where
    F: FnMut(&Requirement) -> Result<(), IncompatibleError>,
{
    let mut failed = None;
    let mut i = 0;
    for r in other {
        if failed.is_some() && missing.is_none() {
            break;
        }
        let mut found = None;
        while let Some(m) = mine.get(i) {
            match key_cmp(&m.key, &r.key) {
                Ordering::Less => i += 1,
                Ordering::Equal => {
                    found = Some(m);
                    i += 1;
                    break;
                }
                Ordering::Greater => break,
            }
        }
        match found {
            Some(m) => {
                if failed.is_none() && !accepted(m, r) {
                    failed = Some((m, r));
                }
            }
            None => {
                if let Some(missing) = missing.as_mut() {
                    missing(r)?;
                }
            }
        }
    }
    Ok(failed)
}

/// Whether `r` may stand for a key the other side does not define (the Compatible exception):
/// an operator an absent label satisfies, or a well-known key `allow_undefined` admits.
fn may_be_undefined(r: &Requirement, allow_undefined: Option<&LabelPolicy>) -> bool {
    absent_ok(r.operator()) || allow_undefined.is_some_and(|p| p.is_well_known(&r.key))
}

/// Shared copies of label keys and values, so requirements built from many label maps hold one
/// allocation per distinct string (see [`Requirements::from_labels_interned`]).
#[derive(Debug, Default)]
pub(crate) struct LabelInterner<'a> {
    strings: rustc_hash::FxHashMap<&'a str, Arc<str>>,
}

impl<'a> LabelInterner<'a> {
    /// The shared copy of `s`.
    pub(crate) fn get(&mut self, s: &'a str) -> Arc<str> {
        Arc::clone(self.strings.entry(s).or_insert_with(|| Arc::from(s)))
    }
}

impl FromIterator<Requirement> for Requirements {
    fn from_iter<T: IntoIterator<Item = Requirement>>(iter: T) -> Self {
        let mut out = Requirements::new();
        out.extend(iter);
        out
    }
}

impl Extend<Requirement> for Requirements {
    fn extend<T: IntoIterator<Item = Requirement>>(&mut self, iter: T) {
        for r in iter {
            self.add(r);
        }
    }
}

impl<'a> IntoIterator for &'a Requirements {
    type Item = &'a Requirement;
    type IntoIter = std::slice::Iter<'a, Requirement>;
    fn into_iter(self) -> Self::IntoIter {
        self.reqs.iter()
    }
}

/// The requirements sorted by key, separated by `, `.
impl fmt::Display for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.reqs.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
