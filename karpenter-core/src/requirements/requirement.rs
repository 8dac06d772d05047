//! [`Requirement`]: the constraint on one label key (a finite value set or its complement, plus
//! integer bounds) and its algebra: intersection, compatibility, membership and printing.

use super::{NodeSelectorRequirement, Operator};
use crate::labels;
use smallvec::SmallVec;
use std::fmt;
use std::sync::Arc;

/// The value set of a [`Requirement`]: sorted (byte order), without duplicates. Most
/// requirements have one or two values, which stay inline. Values are shared (`Arc`): copying
/// a requirement, or intersecting two, copies no string.
pub(super) type ValueSet = SmallVec<[Arc<str>; 2]>;

/// How many values [`Requirement`]'s `Display` lists before summarising the rest.
pub(super) const DISPLAY_VALUES: usize = 5;

/// Parses a value the way upstream's bounds do (Go `strconv.Atoi` on 64-bit): an optional `+`
/// or `-`, then one or more decimal digits, fitting in `i64`.
pub(super) fn parse_int(value: &str) -> Option<i64> {
    value.parse::<i64>().ok()
}

/// Whether `value` is within the inclusive bounds. Without bounds every string is; with any
/// bound only integers within it are.
pub(super) fn within(value: &str, gte: Option<i64>, lte: Option<i64>) -> bool {
    if gte.is_none() && lte.is_none() {
        return true;
    }
    match parse_int(value) {
        Some(n) => gte.is_none_or(|g| n >= g) && lte.is_none_or(|l| n <= l),
        None => false,
    }
}

pub(super) fn max_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

pub(super) fn min_opt(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

/// Whether merged bounds admit no integer at all.
pub(super) fn bounds_empty(gte: Option<i64>, lte: Option<i64>) -> bool {
    matches!((gte, lte), (Some(g), Some(l)) if g > l)
}

pub(super) fn sorted_set<I, V>(values: I) -> ValueSet
where
    I: IntoIterator<Item = V>,
    V: AsRef<str>,
{
    let mut set: ValueSet = values.into_iter().map(|v| Arc::from(v.as_ref())).collect();
    set.sort_unstable();
    set.dedup();
    set
}

pub(super) fn set_contains(set: &[Arc<str>], value: &str) -> bool {
    set.binary_search_by(|x| (**x).cmp(value)).is_ok()
}

/// Whether an operator is one an absent label satisfies (the Intersects / Compatible exception).
pub(super) fn absent_ok(op: Operator) -> bool {
    matches!(op, Operator::NotIn | Operator::DoesNotExist)
}

/// One label key's constraint: a finite set of allowed values or the complement of a finite set
/// (the excluded values), intersected with optional inclusive integer bounds, plus an optional
/// `minValues` (upstream `scheduling/requirement.go`).
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
    pub(super) key: Arc<str>,
    pub(super) complement: bool,
    pub(super) values: ValueSet,
    pub(super) gte: Option<i64>,
    pub(super) lte: Option<i64>,
    pub(super) min_values: Option<i64>,
}

impl Requirement {
    /// `key In [value]` from shared strings (`key` already normalised), without allocating.
    pub(crate) fn in_shared(key: Arc<str>, value: Arc<str>) -> Requirement {
        let mut values = ValueSet::new();
        values.push(value);
        Requirement {
            key,
            complement: false,
            values,
            gte: None,
            lte: None,
            min_values: None,
        }
    }

    /// Builds a requirement from an operator and its values (upstream `NewRequirement`). The key is
    /// normalised with [`labels::normalize_key`].
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
        let key: Arc<str> = Arc::from(labels::normalize_key(key));
        let empty = |complement: bool, key: Arc<str>| Requirement {
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
    /// (and `Lt i64::MIN`), which become a plain `DoesNotExist` without `minValues` (upstream
    /// `NewRequirement`).
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

    /// The operator this requirement behaves as (upstream `Requirement.Operator`), derived from its
    /// representation: a complement with excluded values is `NotIn`; a complement without excluded
    /// values is `Exists` (this includes pure `Gt`/`Lt`/`Gte`/`Lte` bounds); a set with values is
    /// `In`; an empty set is `DoesNotExist`. Never returns `Gt`/`Lt`/`Gte`/`Lte`.
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

    pub(super) fn within_bounds(&self, value: &str) -> bool {
        within(value, self.gte, self.lte)
    }

    /// The intersection of two requirements (upstream `Requirement.Intersection`); the result keeps
    /// `self`'s key.
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
    /// (upstream `Requirement.Intersection`): false if the merged bounds are empty; true if both
    /// are complements; otherwise true iff some value of a set side is allowed by the other side
    /// and within both bounds. Consequently `DoesNotExist` intersects nothing, not even another
    /// `DoesNotExist`.
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
    /// randomly, upstream `Requirement.Operator`):
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
            self.values.insert(pos, Arc::from(value));
        }
    }

    /// `Some(v)` iff the requirement is `In` with exactly one value `v`.
    pub fn single_value(&self) -> Option<&str> {
        match (&*self.values, self.complement) {
            ([only], false) => Some(only),
            _ => None,
        }
    }

    /// The YAML entries this requirement serialises to (upstream
    /// `Requirements.NodeSelectorRequirements`), each carrying `minValues`:
    /// - set: `In [sorted values]`, or `DoesNotExist` when empty;
    /// - complement with bounds: `Gte [n]` and/or `Lte [n]`, followed by `NotIn [excluded]` if
    ///   any value is excluded;
    /// - complement without bounds: `NotIn [excluded]`, or `Exists`.
    ///
    /// Deviation from upstream: upstream emits only the bound entries for a bounded complement and
    /// loses its exclusions; emitting the `NotIn` as well makes the round trip through
    /// [`Requirements::from_node_selector_requirements`](super::Requirements::from_node_selector_requirements)
    /// exact.
    pub fn to_node_selector_requirements(&self) -> Vec<NodeSelectorRequirement> {
        let entry = |operator: Operator, values: Vec<String>| NodeSelectorRequirement {
            key: self.key.to_string(),
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
    pub(super) fn describe(&self) -> String {
        let mut s = String::new();
        // Writing into a String cannot fail.
        let _ = self.write_body(&mut s, false);
        s
    }

    pub(super) fn write_body(&self, f: &mut dyn fmt::Write, with_in_word: bool) -> fmt::Result {
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
pub(super) fn union_within(
    a: &[Arc<str>],
    b: &[Arc<str>],
    gte: Option<i64>,
    lte: Option<i64>,
) -> ValueSet {
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
