//! The node-requirement algebra (spec section 2): one [`Requirement`] per label key, the
//! [`Requirements`] map that intersects them, and the serde shape upstream uses for requirements
//! in NodePools and NodeClaims ([`NodeSelectorRequirement`]).
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

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use rustc_hash::FxHashSet;
use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use crate::labels::{self, LabelPolicy};

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

/// The value set of a [`Requirement`]: sorted (byte order), without duplicates. Most
/// requirements have one or two values, which stay inline.
type ValueSet = SmallVec<[Box<str>; 2]>;

/// How many values [`Requirement`]'s `Display` lists before summarising the rest.
const DISPLAY_VALUES: usize = 5;

/// Parses a value the way upstream's bounds do (Go `strconv.Atoi` on 64-bit): an optional `+`
/// or `-`, then one or more decimal digits, fitting in `i64`.
fn parse_int(value: &str) -> Option<i64> {
    value.parse::<i64>().ok()
}

/// Whether `value` is within the inclusive bounds. Without bounds every string is; with any
/// bound only integers within it are.
fn within(value: &str, gte: Option<i64>, lte: Option<i64>) -> bool {
    if gte.is_none() && lte.is_none() {
        return true;
    }
    match parse_int(value) {
        Some(n) => gte.is_none_or(|g| n >= g) && lte.is_none_or(|l| n <= l),
        None => false,
    }
}

fn max_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Whether merged bounds admit no integer at all.
fn bounds_empty(gte: Option<i64>, lte: Option<i64>) -> bool {
    matches!((gte, lte), (Some(g), Some(l)) if g > l)
}

fn sorted_set<I, V>(values: I) -> ValueSet
where
    I: IntoIterator<Item = V>,
    V: AsRef<str>,
{
    let mut set: ValueSet = values.into_iter().map(|v| Box::from(v.as_ref())).collect();
    set.sort_unstable();
    set.dedup();
    set
}

fn set_contains(set: &[Box<str>], value: &str) -> bool {
    set.binary_search_by(|x| (**x).cmp(value)).is_ok()
}

/// Whether an operator is one an absent label satisfies (the Intersects / Compatible exception).
fn absent_ok(op: Operator) -> bool {
    matches!(op, Operator::NotIn | Operator::DoesNotExist)
}

/// One label key's constraint: a finite set of allowed values or the complement of a finite set
/// (the excluded values), intersected with optional inclusive integer bounds, plus an optional
/// `minValues` (spec 2.1).
///
/// Invariants kept by every constructor and operation: the key is normalised
/// ([`labels::normalize_key`]); values are sorted and deduplicated; a non-complement requirement
/// carries no bounds; a requirement with bounds lists no value outside them; and bounds are never
/// empty (an empty intersection becomes `DoesNotExist`).
///
/// The derived `PartialEq`/`Hash` compare this canonical representation; two requirements that
/// allow the same strings compare equal except that `minValues` is part of the comparison.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: String,
    complement: bool,
    values: ValueSet,
    gte: Option<i64>,
    lte: Option<i64>,
    min_values: Option<i64>,
}

impl Requirement {
    /// Builds a requirement from an operator and its values (spec 2.2). The key is normalised
    /// with [`labels::normalize_key`].
    ///
    /// | operator | allowed values |
    /// |---|---|
    /// | `In` | exactly `values` |
    /// | `NotIn` | every string except `values` |
    /// | `Exists` | every string |
    /// | `DoesNotExist` | nothing |
    /// | `Gt n` | integers `>= n+1` (`n == i64::MAX` → `DoesNotExist`) |
    /// | `Lt n` | integers `<= n-1` (`n == i64::MIN` → `DoesNotExist`) |
    /// | `Gte n` / `Lte n` | integers `>= n` / `<= n` |
    ///
    /// `Gt`/`Lt`/`Gte`/`Lte` read their first value; a missing or unparsable value counts as 0
    /// (upstream assumes pre-validated input). `Exists`/`DoesNotExist` ignore `values`.
    ///
    /// `Lt i64::MIN` is a deliberate deviation: upstream computes `n-1` with Go's wrapping
    /// arithmetic (which would turn it into "any integer"); here nothing is below `i64::MIN`, so it
    /// is `DoesNotExist`, mirroring upstream's rule for `Gt i64::MAX`.
    pub fn new<I, V>(key: &str, op: Operator, values: I) -> Requirement
    where
        I: IntoIterator<Item = V>,
        V: AsRef<str>,
    {
        let key = labels::normalize_key(key).to_owned();
        let empty = |complement: bool, key: String| Requirement {
            key,
            complement,
            values: ValueSet::new(),
            gte: None,
            lte: None,
            min_values: None,
        };
        let first_int = |values: I| {
            values
                .into_iter()
                .next()
                .and_then(|v| parse_int(v.as_ref()))
                .unwrap_or(0)
        };
        match op {
            Operator::In | Operator::NotIn => Requirement {
                values: sorted_set(values),
                ..empty(op == Operator::NotIn, key)
            },
            Operator::Exists => empty(true, key),
            Operator::DoesNotExist => empty(false, key),
            Operator::Gt => match first_int(values).checked_add(1) {
                Some(g) => Requirement {
                    gte: Some(g),
                    ..empty(true, key)
                },
                None => empty(false, key),
            },
            Operator::Lt => match first_int(values).checked_sub(1) {
                Some(l) => Requirement {
                    lte: Some(l),
                    ..empty(true, key)
                },
                None => empty(false, key),
            },
            Operator::Gte => Requirement {
                gte: Some(first_int(values)),
                ..empty(true, key)
            },
            Operator::Lte => Requirement {
                lte: Some(first_int(values)),
                ..empty(true, key)
            },
        }
    }

    /// `key Exists`: every value, the label must be present.
    pub fn exists(key: &str) -> Requirement {
        Requirement::new(key, Operator::Exists, [""; 0])
    }

    /// `key DoesNotExist`: no value, the label must be absent.
    pub fn does_not_exist(key: &str) -> Requirement {
        Requirement::new(key, Operator::DoesNotExist, [""; 0])
    }

    /// Builds a requirement from its YAML shape, carrying `minValues` — except for `Gt i64::MAX`
    /// (and `Lt i64::MIN`), which become a plain `DoesNotExist` without `minValues` (spec 2.2).
    pub fn from_node_selector(r: &NodeSelectorRequirement) -> Requirement {
        let req = Requirement::new(&r.key, r.operator, &r.values);
        let bound_op = matches!(r.operator, Operator::Gt | Operator::Lt);
        if bound_op && req.gte.is_none() && req.lte.is_none() {
            return req;
        }
        req.with_min_values(r.min_values)
    }

    /// Returns the requirement with `minValues` replaced.
    #[must_use]
    pub fn with_min_values(mut self, m: Option<i64>) -> Requirement {
        self.min_values = m;
        self
    }

    /// Replaces `minValues` in place.
    pub fn set_min_values(&mut self, m: Option<i64>) {
        self.min_values = m;
    }

    /// The (normalised) label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator this requirement behaves as (spec 2.3), derived from its representation:
    /// a complement with excluded values is `NotIn`; a complement without excluded values is
    /// `Exists` (this includes pure `Gt`/`Lt`/`Gte`/`Lte` bounds); a set with values is `In`; an
    /// empty set is `DoesNotExist`. Never returns `Gt`/`Lt`/`Gte`/`Lte`.
    pub fn operator(&self) -> Operator {
        match (self.complement, self.values.is_empty()) {
            (true, false) => Operator::NotIn,
            (true, true) => Operator::Exists,
            (false, false) => Operator::In,
            (false, true) => Operator::DoesNotExist,
        }
    }

    /// The `minValues` constraint, if any.
    pub fn min_values(&self) -> Option<i64> {
        self.min_values
    }

    /// Whether the requirement is a complement (`NotIn`, `Exists` or bounds): the values it lists
    /// are excluded rather than allowed.
    pub fn is_complement(&self) -> bool {
        self.complement
    }

    /// The inclusive lower integer bound (`Gt n` is stored as `n+1`).
    pub fn gte(&self) -> Option<i64> {
        self.gte
    }

    /// The inclusive upper integer bound (`Lt n` is stored as `n-1`).
    pub fn lte(&self) -> Option<i64> {
        self.lte
    }

    /// The raw value set, sorted: the allowed values of an `In`, the *excluded* values of a
    /// complement.
    pub fn values(&self) -> impl ExactSizeIterator<Item = &str> + DoubleEndedIterator {
        self.values.iter().map(|v| &**v)
    }

    /// Upstream's `Len()`: the number of values for a set, `u64::MAX - |excluded|` for a
    /// complement (upstream uses `MaxInt64`; only comparisons such as "is it smaller than a
    /// complement" are meaningful). Bounds are not taken into account.
    pub fn len(&self) -> u64 {
        let n = self.values.len() as u64;
        if self.complement { u64::MAX - n } else { n }
    }

    /// Whether the requirement allows no value at all: `DoesNotExist` (an empty set, including
    /// the result of intersecting disjoint bounds). A complement with non-empty bounds is never
    /// empty, even if every canonical integer in range is excluded, because integers have
    /// infinitely many spellings (`7`, `07`, `+7`, …) that all satisfy the bounds.
    pub fn is_empty(&self) -> bool {
        if self.complement {
            bounds_empty(self.gte, self.lte)
        } else {
            !self.values.iter().any(|v| self.within_bounds(v))
        }
    }

    /// Whether the requirement allows `value`.
    pub fn has(&self, value: &str) -> bool {
        (set_contains(&self.values, value) != self.complement) && self.within_bounds(value)
    }

    fn within_bounds(&self, value: &str) -> bool {
        within(value, self.gte, self.lte)
    }

    /// The intersection of two requirements (spec 2.4); the result keeps `self`'s key.
    ///
    /// Complement only if both are; bounds are the tighter of each (`gte` max, `lte` min) and
    /// `minValues` the larger (absent = none). Disjoint bounds give `DoesNotExist` with the merged
    /// `minValues`. Values: union of exclusions (both complements), the set minus the other's
    /// exclusions (one complement) or the set intersection (neither); then values outside the
    /// merged bounds are removed, and a non-complement result drops its bounds.
    pub fn intersection(&self, other: &Requirement) -> Requirement {
        let complement = self.complement && other.complement;
        let mut gte = max_opt(self.gte, other.gte);
        let mut lte = min_opt(self.lte, other.lte);
        let min_values = max_opt(self.min_values, other.min_values);
        if bounds_empty(gte, lte) {
            return Requirement {
                key: self.key.clone(),
                complement: false,
                values: ValueSet::new(),
                gte: None,
                lte: None,
                min_values,
            };
        }
        let values: ValueSet = match (self.complement, other.complement) {
            (true, true) => union_within(&self.values, &other.values, gte, lte),
            (true, false) => other
                .values
                .iter()
                .filter(|v| !set_contains(&self.values, v))
                .filter(|v| within(v, gte, lte))
                .cloned()
                .collect(),
            (false, true) => self
                .values
                .iter()
                .filter(|v| !set_contains(&other.values, v))
                .filter(|v| within(v, gte, lte))
                .cloned()
                .collect(),
            (false, false) => self
                .values
                .iter()
                .filter(|v| set_contains(&other.values, v))
                .filter(|v| within(v, gte, lte))
                .cloned()
                .collect(),
        };
        if !complement {
            gte = None;
            lte = None;
        }
        Requirement {
            key: self.key.clone(),
            complement,
            values,
            gte,
            lte,
            min_values,
        }
    }

    /// Whether [`intersection`](Self::intersection) would allow some value, without allocating
    /// (spec 2.4): false if the merged bounds are empty; true if both are complements; otherwise
    /// true iff some value of a set side is allowed by the other side and within both bounds.
    /// Consequently `DoesNotExist` intersects nothing, not even another `DoesNotExist`.
    pub fn has_intersection(&self, other: &Requirement) -> bool {
        if bounds_empty(max_opt(self.gte, other.gte), min_opt(self.lte, other.lte)) {
            return false;
        }
        match (self.complement, other.complement) {
            (true, true) => true,
            (false, true) => self
                .values
                .iter()
                .any(|v| self.within_bounds(v) && other.has(v)),
            (true, false) => other
                .values
                .iter()
                .any(|v| other.within_bounds(v) && self.has(v)),
            (false, false) => {
                let (small, large) = if self.values.len() <= other.values.len() {
                    (self, other)
                } else {
                    (other, self)
                };
                small
                    .values
                    .iter()
                    .any(|v| small.within_bounds(v) && large.has(v))
            }
        }
    }

    /// A value this requirement allows, chosen deterministically (upstream picks arbitrarily or
    /// randomly, spec 2.3):
    /// - `In`: the smallest value (byte order);
    /// - `NotIn` / `Exists`: the smallest integer `>= gte` (or `>= 0` without a lower bound) and
    ///   `<= lte` whose decimal rendering is not excluded, or `None` if there is none (e.g. `Lt 0`
    ///   without a lower bound);
    /// - `DoesNotExist`: `None`.
    pub fn any(&self) -> Option<String> {
        match self.operator() {
            Operator::In => self
                .values
                .iter()
                .find(|v| self.within_bounds(v))
                .map(|v| v.to_string()),
            Operator::NotIn | Operator::Exists => {
                let end = self.lte.unwrap_or(i64::MAX);
                let mut candidate = self.gte.unwrap_or(0);
                while candidate <= end {
                    let rendered = candidate.to_string();
                    if !set_contains(&self.values, &rendered) {
                        return Some(rendered);
                    }
                    candidate = candidate.checked_add(1)?;
                }
                None
            }
            _ => None,
        }
    }

    /// Adds `value` to the raw set in place (upstream `Insert`): allows it for a set (turning
    /// `DoesNotExist` into `In`), excludes it for a complement. A value outside the bounds is not
    /// recorded, since the bounds already reject it (keeps the representation canonical).
    pub fn insert(&mut self, value: &str) {
        if !self.within_bounds(value) {
            return;
        }
        if let Err(pos) = self.values.binary_search_by(|x| (**x).cmp(value)) {
            self.values.insert(pos, Box::from(value));
        }
    }

    /// `Some(v)` iff the requirement is `In` with exactly one value `v`.
    pub fn single_value(&self) -> Option<&str> {
        match (&*self.values, self.complement) {
            ([only], false) => Some(only),
            _ => None,
        }
    }

    /// The YAML entries this requirement serialises to (spec 2.10), each carrying `minValues`:
    /// - set: `In [sorted values]`, or `DoesNotExist` when empty;
    /// - complement with bounds: `Gte [n]` and/or `Lte [n]`, followed by `NotIn [excluded]` if
    ///   any value is excluded;
    /// - complement without bounds: `NotIn [excluded]`, or `Exists`.
    ///
    /// Deviation from upstream: upstream emits only the bound entries for a bounded complement and
    /// loses its exclusions; emitting the `NotIn` as well makes the round trip through
    /// [`Requirements::from_node_selector_requirements`] exact.
    pub fn to_node_selector_requirements(&self) -> Vec<NodeSelectorRequirement> {
        let entry = |operator: Operator, values: Vec<String>| NodeSelectorRequirement {
            key: self.key.clone(),
            operator,
            values,
            min_values: self.min_values,
        };
        let listed = || self.values().map(String::from).collect::<Vec<_>>();
        let mut out = Vec::with_capacity(1);
        if !self.complement {
            if self.values.is_empty() {
                out.push(entry(Operator::DoesNotExist, Vec::new()));
            } else {
                out.push(entry(Operator::In, listed()));
            }
            return out;
        }
        if let Some(g) = self.gte {
            out.push(entry(Operator::Gte, vec![g.to_string()]));
        }
        if let Some(l) = self.lte {
            out.push(entry(Operator::Lte, vec![l.to_string()]));
        }
        if !self.values.is_empty() {
            out.push(entry(Operator::NotIn, listed()));
        } else if out.is_empty() {
            out.push(entry(Operator::Exists, Vec::new()));
        }
        out
    }

    /// The requirement without its key, for messages: `[a b]` for `In`, otherwise the operator
    /// with values and bounds (`NotIn [a]`, `Gt 8`, `Exists`, `DoesNotExist`).
    fn describe(&self) -> String {
        let mut s = String::new();
        // Writing into a String cannot fail.
        let _ = self.write_body(&mut s, false);
        s
    }

    fn write_body(&self, f: &mut dyn fmt::Write, with_in_word: bool) -> fmt::Result {
        let op = self.operator();
        let has_bounds = self.gte.is_some() || self.lte.is_some();
        let mut sep = "";
        match op {
            Operator::In | Operator::NotIn => {
                if op == Operator::NotIn || with_in_word {
                    write!(f, "{op} ")?;
                }
                f.write_char('[')?;
                for (i, v) in self.values.iter().take(DISPLAY_VALUES).enumerate() {
                    if i > 0 {
                        f.write_char(' ')?;
                    }
                    f.write_str(v)?;
                }
                if self.values.len() > DISPLAY_VALUES {
                    write!(f, " and {} others", self.values.len() - DISPLAY_VALUES)?;
                }
                f.write_char(']')?;
                sep = " ";
            }
            Operator::Exists if has_bounds => {}
            _ => {
                f.write_str(op.as_str())?;
                sep = " ";
            }
        }
        if let Some(g) = self.gte {
            match g.checked_sub(1) {
                Some(n) => write!(f, "{sep}Gt {n}")?,
                None => write!(f, "{sep}Gte {g}")?,
            }
            sep = " ";
        }
        if let Some(l) = self.lte {
            match l.checked_add(1) {
                Some(n) => write!(f, "{sep}Lt {n}")?,
                None => write!(f, "{sep}Lte {l}")?,
            }
        }
        Ok(())
    }
}

/// Sorted union of two sorted sets, keeping only values within the bounds.
fn union_within(a: &[Box<str>], b: &[Box<str>], gte: Option<i64>, lte: Option<i64>) -> ValueSet {
    let mut out = ValueSet::with_capacity(a.len().max(b.len()));
    let (mut i, mut j) = (0, 0);
    loop {
        let next = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) => match x.cmp(y) {
                std::cmp::Ordering::Less => {
                    i += 1;
                    x
                }
                std::cmp::Ordering::Greater => {
                    j += 1;
                    y
                }
                std::cmp::Ordering::Equal => {
                    i += 1;
                    j += 1;
                    x
                }
            },
            (Some(x), None) => {
                i += 1;
                x
            }
            (None, Some(y)) => {
                j += 1;
                y
            }
            (None, None) => break,
        };
        if within(next, gte, lte) {
            out.push(next.clone());
        }
    }
    out
}

/// `key In [a b]`, `key NotIn [a]`, `key Exists`, `key DoesNotExist`, `key Gt 8`,
/// `key NotIn [9] Gt 8 Lt 20`, followed by ` minValues m` when set. Lower bounds print as
/// `Gt gte-1` and upper bounds as `Lt lte+1` (`Gte`/`Lte` only at the `i64` limits). More than
/// five values print as `[v1 … v5 and N others]`.
impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ", self.key)?;
        self.write_body(f, true)?;
        if let Some(m) = self.min_values {
            write!(f, " minValues {m}")?;
        }
        Ok(())
    }
}

/// Why two sets of requirements are not compatible.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
/// `minValues` (spec 2.9).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "minValues requirement is not met for label(s) (label(s)=[{}])",
    join_keys(.achieved)
)]
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

/// Requirements by label key (spec 2.5): at most one [`Requirement`] per key; adding a second
/// requirement for a key stores the intersection. Iteration is sorted by key.
///
/// Keys are normalised when requirements are built; lookups (`get`, `has`, …) use the key as
/// given.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Requirements {
    map: BTreeMap<String, Requirement>,
}

impl Requirements {
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

    /// Builds requirements from YAML entries; entries for the same key are intersected (so their
    /// `minValues` combine to the maximum).
    pub fn from_node_selector_requirements(reqs: &[NodeSelectorRequirement]) -> Self {
        reqs.iter().map(Requirement::from_node_selector).collect()
    }

    /// Adds a requirement: stores `r ∩ existing` if the key is present, else `r`.
    pub fn add(&mut self, r: Requirement) {
        match self.map.get_mut(&r.key) {
            Some(existing) => *existing = r.intersection(existing),
            None => {
                self.map.insert(r.key.clone(), r);
            }
        }
    }

    /// Adds every requirement of `other` (see [`add`](Self::add)).
    pub fn add_all(&mut self, other: &Requirements) {
        for r in other.map.values() {
            match self.map.get_mut(&r.key) {
                Some(existing) => *existing = r.intersection(existing),
                None => {
                    self.map.insert(r.key.clone(), r.clone());
                }
            }
        }
    }

    /// The requirement for `key`, if defined.
    pub fn get(&self, key: &str) -> Option<&Requirement> {
        self.map.get(key)
    }

    /// Upstream `Get`: the requirement for `key`, or a fresh `key Exists` when undefined.
    pub fn get_or_exists(&self, key: &str) -> Cow<'_, Requirement> {
        match self.map.get(key) {
            Some(r) => Cow::Borrowed(r),
            None => Cow::Owned(Requirement::exists(key)),
        }
    }

    /// Mutable access to the requirement for `key` (e.g. to lower its `minValues`).
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Requirement> {
        self.map.get_mut(key)
    }

    /// Whether `key` is defined.
    pub fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    /// Removes and returns the requirement for `key`.
    pub fn remove(&mut self, key: &str) -> Option<Requirement> {
        self.map.remove(key)
    }

    /// The requirements, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = &Requirement> {
        self.map.values()
    }

    /// The keys, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.map.keys().map(String::as_str)
    }

    /// The number of keys.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no key is defined.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Upstream `Intersects` (spec 2.6): for every key defined on both sides the requirements must
    /// intersect ([`Requirement::has_intersection`]), except that two requirements whose derived
    /// operators are both `NotIn` or `DoesNotExist` are accepted (an absent label satisfies both).
    /// Keys defined on one side only are ignored.
    ///
    /// Reports the first failing key in key order (upstream aggregates all failures).
    pub fn intersects(&self, other: &Requirements) -> Result<(), IncompatibleError> {
        let self_smaller = self.map.len() <= other.map.len();
        let (small, large) = if self_smaller {
            (self, other)
        } else {
            (other, self)
        };
        for (key, s) in &small.map {
            let Some(l) = large.map.get(key) else {
                continue;
            };
            let (left, right) = if self_smaller { (s, l) } else { (l, s) };
            // An absent label satisfies two NotIn / DoesNotExist requirements.
            let accepted = left.has_intersection(right)
                || (absent_ok(left.operator()) && absent_ok(right.operator()));
            if !accepted {
                return Err(IncompatibleError::NoIntersection {
                    key: key.clone(),
                    left: left.describe(),
                    right: right.describe(),
                });
            }
        }
        Ok(())
    }

    /// Upstream `Compatible` (spec 2.7): can a node described by `self` satisfy the constraints
    /// `other`?
    ///
    /// 1. Every key of `other` must be defined on `self`, unless `other`'s requirement for it is
    ///    `NotIn`/`DoesNotExist`, or (loose mode, `allow_undefined = Some(policy)`) the key is
    ///    well-known in `policy`. Otherwise: [`IncompatibleError::UndefinedKey`] for the first such
    ///    key in key order.
    /// 2. Then [`intersects`](Self::intersects).
    ///
    /// `None` is strict mode (existing nodes, topology node filter); `Some(policy)` is loose mode
    /// (NodeClaim templates, offerings).
    pub fn compatible(
        &self,
        other: &Requirements,
        allow_undefined: Option<&LabelPolicy>,
    ) -> Result<(), IncompatibleError> {
        for (key, r) in &other.map {
            if allow_undefined.is_some_and(|p| p.is_well_known(key)) {
                continue;
            }
            if !self.map.contains_key(key) && !absent_ok(r.operator()) {
                return Err(IncompatibleError::UndefinedKey { key: key.clone() });
            }
        }
        self.intersects(other)
    }

    /// Whether [`compatible`](Self::compatible) succeeds.
    pub fn is_compatible(
        &self,
        other: &Requirements,
        allow_undefined: Option<&LabelPolicy>,
    ) -> bool {
        self.compatible(other, allow_undefined).is_ok()
    }

    /// `self` with every requirement of `other` added (intersected per key).
    pub fn intersection(&self, other: &Requirements) -> Requirements {
        let mut out = self.clone();
        out.add_all(other);
        out
    }

    /// Whether any requirement has `minValues`.
    pub fn has_min_values(&self) -> bool {
        self.map.values().any(|r| r.min_values.is_some())
    }

    /// The YAML entries of every requirement, sorted by key (see
    /// [`Requirement::to_node_selector_requirements`]).
    pub fn to_node_selector_requirements(&self) -> Vec<NodeSelectorRequirement> {
        self.map
            .values()
            .flat_map(Requirement::to_node_selector_requirements)
            .collect()
    }

    /// The custom labels a NodeClaim gets from these requirements (spec 3.11): for every key that
    /// is neither restricted nor well-known in `policy`, `key → any()` (keys whose requirement
    /// allows no deterministic value, e.g. `DoesNotExist`, are skipped).
    pub fn labels(&self, policy: &LabelPolicy) -> BTreeMap<String, String> {
        self.map
            .iter()
            .filter(|(k, _)| !policy.is_restricted(k) && !policy.is_well_known(k))
            .filter_map(|(k, r)| r.any().map(|v| (k.clone(), v)))
            .collect()
    }

    /// Upstream `SatisfiesMinValues` (spec 2.9): walks the instance types' requirements in order,
    /// accumulating for each key with `minValues` the distinct raw values the types list for it
    /// (a type that doesn't define the key adds nothing; values are counted even if `self`
    /// disallows them, and a complement contributes its excluded values, as upstream's `Values()`
    /// does). Returns the number of types needed (index + 1) as soon as every such key has at
    /// least `minValues` distinct values, `Ok(0)` when no key has `minValues` (or, with no
    /// instance types, when every `minValues` is `<= 0`), else the achieved counts of the
    /// unsatisfied keys.
    pub fn satisfies_min_values<'a, I>(
        &self,
        instance_type_requirements: I,
    ) -> Result<usize, MinValuesError>
    where
        I: IntoIterator<Item = &'a Requirements>,
    {
        let keyed: SmallVec<[(&str, i64); 4]> = self
            .map
            .iter()
            .filter_map(|(k, r)| r.min_values.map(|m| (k.as_str(), m)))
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
    type IntoIter = std::collections::btree_map::Values<'a, String, Requirement>;
    fn into_iter(self) -> Self::IntoIter {
        self.map.values()
    }
}

/// The requirements sorted by key, separated by `, `.
impl fmt::Display for Requirements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.map.values().enumerate() {
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
