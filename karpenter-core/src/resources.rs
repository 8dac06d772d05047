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
///
/// Stored as a vector sorted by name (lists hold a handful of entries: a vector is a fraction of
/// a B-tree node's size), with the well-known [`names`] kept as static strings.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct ResourceList(Vec<(Name, Quantity)>);

/// A resource name: the well-known ones are not allocated.
type Name = std::borrow::Cow<'static, str>;

/// `name` as a [`Name`], static when it is one of the well-known [`names`].
fn name_of(name: String) -> Name {
    const KNOWN: [&str; 5] = [
        names::CPU,
        names::MEMORY,
        names::PODS,
        names::EPHEMERAL_STORAGE,
        names::NODES,
    ];
    match KNOWN.iter().find(|k| **k == name) {
        Some(k) => Name::Borrowed(k),
        None => Name::Owned(name),
    }
}

impl ResourceList {
    /// An empty list.
    pub fn new() -> Self {
        ResourceList(Vec::new())
    }

    fn position(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| (**k).cmp(name))
    }

    fn get_mut(&mut self, name: &str) -> Option<&mut Quantity> {
        let i = self.position(name).ok()?;
        self.0.get_mut(i).map(|(_, q)| q)
    }

    /// The quantity of `name`, if present.
    pub fn get(&self, name: &str) -> Option<Quantity> {
        let i = self.position(name).ok()?;
        self.0.get(i).map(|(_, q)| *q)
    }

    /// The quantity of `name`, or zero when absent.
    pub fn get_or_zero(&self, name: &str) -> Quantity {
        self.get(name).unwrap_or(Quantity::ZERO)
    }

    /// Sets `name` to `q`, replacing any previous value.
    pub fn insert(&mut self, name: impl Into<String>, q: Quantity) {
        let name = name.into();
        match self.position(&name) {
            Ok(i) => {
                if let Some(entry) = self.0.get_mut(i) {
                    entry.1 = q;
                }
            }
            Err(i) => self.0.insert(i, (name_of(name), q)),
        }
    }

    /// Sets `name` (absent) to `q`, copying the name only when it is not a well-known one.
    fn insert_new(&mut self, name: &str, q: Quantity) {
        if let Err(i) = self.position(name) {
            self.0.insert(i, (name_of(name.to_owned()), q));
        }
    }

    /// Removes `name`, returning its quantity.
    pub fn remove(&mut self, name: &str) -> Option<Quantity> {
        let i = self.position(name).ok()?;
        Some(self.0.remove(i).1)
    }

    /// The entries, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Quantity)> {
        self.into_iter()
    }

    /// The resource names, sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(k, _)| &**k)
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
        self.position(name).is_ok()
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
            match self.get_mut(name) {
                Some(existing) => *existing += q,
                None => self.insert_new(name, q),
            }
        }
    }

    /// `self - other` per resource, over the union of names (an absent entry counts as zero,
    /// so results may be negative).
    pub fn sub(&self, other: &ResourceList) -> ResourceList {
        let mut out = self.clone();
        for (name, q) in other.iter() {
            match out.get_mut(name) {
                Some(existing) => *existing -= q,
                None => out.insert_new(name, -q),
            }
        }
        out
    }

    /// Whether `candidate` fits in `total` (Karpenter's `Fits`): false if any quantity of
    /// `total` is negative; otherwise every resource of `candidate` must be at most `total`'s
    /// (an absent entry of `total` counts as zero, so a zero request of an unknown resource
    /// fits and a non-zero one does not).
    pub fn fits(candidate: &ResourceList, total: &ResourceList) -> bool {
        if total.0.iter().any(|(_, q)| q.is_negative()) {
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
                match out.get_mut(name) {
                    Some(existing) => *existing = Ord::max(*existing, q),
                    None => out.insert_new(name, q),
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
            out.0.retain_mut(|(name, existing)| match list.get(name) {
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
        for (_, q) in self.0.iter_mut() {
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

impl fmt::Debug for ResourceList {
    /// `ResourceList({"cpu": …, "memory": …})`, as a map.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResourceList(")?;
        f.debug_map()
            .entries(self.0.iter().map(|(k, v)| (&**k, v)))
            .finish()?;
        f.write_str(")")
    }
}

impl Serialize for ResourceList {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(k, v)| (&**k, v)))
    }
}

impl<'de> Deserialize<'de> for ResourceList {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Through a map: duplicate names resolve as they always have (the last one wins).
        let map = BTreeMap::<String, Quantity>::deserialize(deserializer)?;
        Ok(map.into_iter().collect())
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
        let mut list = ResourceList::new();
        list.extend(iter);
        list
    }
}

impl<K: Into<String>> Extend<(K, Quantity)> for ResourceList {
    /// Later entries replace earlier ones of the same name.
    fn extend<I: IntoIterator<Item = (K, Quantity)>>(&mut self, iter: I) {
        for (k, q) in iter {
            self.insert(k, q);
        }
    }
}

type EntryFn = for<'a> fn(&'a (Name, Quantity)) -> (&'a str, Quantity);

/// Iterator over a [`ResourceList`]'s entries in name order.
pub struct Iter<'a>(std::iter::Map<std::slice::Iter<'a, (Name, Quantity)>, EntryFn>);

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
        fn entry((k, v): &(Name, Quantity)) -> (&str, Quantity) {
            (&**k, *v)
        }
        Iter(self.0.iter().map(entry as EntryFn))
    }
}

#[cfg(test)]
mod tests;
