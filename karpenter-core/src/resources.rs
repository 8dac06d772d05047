//! Exact Kubernetes resource quantities and resource lists.
//!
//! A [`Quantity`] holds its value exactly, as a signed count of nano-units (`i128`), together with
//! the [`Format`] it was written in. Parsing accepts every form Kubernetes accepts (`500m`, `1.5`,
//! `2Gi`, `1e3`, `.5`, …), rounds values finer than a nano-unit up (away from zero) like
//! Kubernetes, and rejects values beyond the representable range instead of silently capping
//! them. Printing follows Kubernetes' canonical form (`Quantity.String()`), so `1024Mi` prints as
//! `1Gi` and `1.5` as `1500m`.
//!
//! Equality, ordering and hashing look at the value only: `1Gi == 1024Mi == 1073741824`.
//!
//! A [`ResourceList`] maps resource names (see [`names`]) to quantities, iterates in name order
//! and offers the arithmetic the scheduler needs ([`ResourceList::add`], [`ResourceList::sub`],
//! [`ResourceList::fits`], …).

mod quantity;

pub use self::quantity::{Format, Quantity, QuantityError};

use std::collections::BTreeMap;
use std::fmt;
use std::hash::Hash;

use serde::{Deserialize, Serialize};

/// Well-known resource names.
pub mod names {
    /// CPU, in cores (`1`, `500m`).
    pub const CPU: &str = "cpu";
    /// Memory, in bytes (`1Gi`).
    pub const MEMORY: &str = "memory";
    /// Number of pods.
    pub const PODS: &str = "pods";
    /// Local ephemeral storage, in bytes.
    pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
    /// Number of nodes (used in NodePool limits).
    pub const NODES: &str = "nodes";
}

/// A map from resource name to quantity, iterated in name order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ResourceList(BTreeMap<String, Quantity>);

impl ResourceList {
    /// An empty list.
    pub fn new() -> Self {
        ResourceList(BTreeMap::new())
    }

    /// The quantity of `name`, if present.
    pub fn get(&self, name: &str) -> Option<Quantity> {
        self.0.get(name).copied()
    }

    /// The quantity of `name`, or zero when absent.
    pub fn get_or_zero(&self, name: &str) -> Quantity {
        self.get(name).unwrap_or(Quantity::ZERO)
    }

    /// Sets `name` to `q`, replacing any previous value.
    pub fn insert(&mut self, name: impl Into<String>, q: Quantity) {
        self.0.insert(name.into(), q);
    }

    /// Removes `name`, returning its quantity.
    pub fn remove(&mut self, name: &str) -> Option<Quantity> {
        self.0.remove(name)
    }

    /// The entries, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Quantity)> {
        self.0.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// The resource names, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the list has no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `name` has an entry.
    pub fn contains_key(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// The per-resource sum over the union of both lists' names.
    pub fn add(&self, other: &ResourceList) -> ResourceList {
        let mut out = self.clone();
        out.add_assign(other);
        out
    }

    /// Adds `other` into `self`, per resource, over the union of names.
    pub fn add_assign(&mut self, other: &ResourceList) {
        for (name, q) in other.iter() {
            match self.0.get_mut(name) {
                Some(existing) => *existing += q,
                None => {
                    self.0.insert(name.to_owned(), q);
                }
            }
        }
    }

    /// `self - other` per resource, over the union of names (an absent entry counts as zero,
    /// so results may be negative).
    pub fn sub(&self, other: &ResourceList) -> ResourceList {
        let mut out = self.clone();
        for (name, q) in other.iter() {
            match out.0.get_mut(name) {
                Some(existing) => *existing -= q,
                None => {
                    out.0.insert(name.to_owned(), -q);
                }
            }
        }
        out
    }

    /// Whether `candidate` fits in `total` (Karpenter's `Fits`): false if any quantity of
    /// `total` is negative; otherwise every resource of `candidate` must be at most `total`'s
    /// (an absent entry of `total` counts as zero, so a zero request of an unknown resource
    /// fits and a non-zero one does not).
    pub fn fits(candidate: &ResourceList, total: &ResourceList) -> bool {
        if total.0.values().any(Quantity::is_negative) {
            return false;
        }
        candidate
            .iter()
            .all(|(name, q)| q <= total.get_or_zero(name))
    }

    /// The per-resource maximum over the union of all lists' names.
    pub fn max_per_key<'a>(lists: impl IntoIterator<Item = &'a ResourceList>) -> ResourceList {
        let mut out = ResourceList::new();
        for list in lists {
            for (name, q) in list.iter() {
                match out.0.get_mut(name) {
                    Some(existing) => *existing = Ord::max(*existing, q),
                    None => {
                        out.0.insert(name.to_owned(), q);
                    }
                }
            }
        }
        out
    }

    /// The per-resource minimum over the names present in every list; empty input gives an
    /// empty list.
    pub fn min_common<'a>(lists: impl IntoIterator<Item = &'a ResourceList>) -> ResourceList {
        let mut iter = lists.into_iter();
        let Some(first) = iter.next() else {
            return ResourceList::new();
        };
        let mut out = first.clone();
        for list in iter {
            out.0.retain(|name, existing| match list.get(name) {
                Some(q) => {
                    *existing = Ord::min(*existing, q);
                    true
                }
                None => false,
            });
        }
        out
    }

    /// Replaces negative quantities with zero.
    pub fn clamp_non_negative(&mut self) {
        for q in self.0.values_mut() {
            if q.is_negative() {
                *q = Quantity {
                    nanos: 0,
                    format: q.format,
                };
            }
        }
    }

    /// The name of the first resource (in name order) of `self` whose quantity is greater than
    /// its limit, considering only names present in `limits`; `None` when all are within limits.
    pub fn exceeds(&self, limits: &ResourceList) -> Option<String> {
        self.iter()
            .find(|(name, q)| limits.get(name).is_some_and(|limit| *q > limit))
            .map(|(name, _)| name.to_owned())
    }
}

impl fmt::Display for ResourceList {
    /// `{cpu: 1, memory: 1Gi}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (name, q)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{name}: {q}")?;
        }
        f.write_str("}")
    }
}

impl<K: Into<String>> FromIterator<(K, Quantity)> for ResourceList {
    fn from_iter<I: IntoIterator<Item = (K, Quantity)>>(iter: I) -> Self {
        ResourceList(iter.into_iter().map(|(k, q)| (k.into(), q)).collect())
    }
}

impl<K: Into<String>> Extend<(K, Quantity)> for ResourceList {
    fn extend<I: IntoIterator<Item = (K, Quantity)>>(&mut self, iter: I) {
        self.0.extend(iter.into_iter().map(|(k, q)| (k.into(), q)));
    }
}

type EntryFn = for<'a> fn((&'a String, &'a Quantity)) -> (&'a str, Quantity);

/// Iterator over a [`ResourceList`]'s entries in name order.
pub struct Iter<'a>(
    std::iter::Map<std::collections::btree_map::Iter<'a, String, Quantity>, EntryFn>,
);

impl<'a> Iterator for Iter<'a> {
    type Item = (&'a str, Quantity);
    fn next(&mut self) -> Option<Self::Item> {
        self.0.next()
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl<'a> IntoIterator for &'a ResourceList {
    type Item = (&'a str, Quantity);
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        fn entry<'b>((k, v): (&'b String, &'b Quantity)) -> (&'b str, Quantity) {
            (k.as_str(), *v)
        }
        Iter(self.0.iter().map(entry as EntryFn))
    }
}

#[cfg(test)]
mod tests;
