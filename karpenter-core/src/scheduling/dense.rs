//! Dense resource vectors for the scheduler's hot path.
//!
//! Every resource name that appears in a solve (pod requests, daemon overhead, instance-type
//! capacity, NodePool limits) is interned once into an index; requests and allocatable become
//! small vectors of milli-units, so a fit check is a handful of integer comparisons instead of
//! map look-ups.

use smallvec::SmallVec;

use crate::resources::ResourceList;

/// Milli-unit values indexed by [`ResourceIndex`].
pub(crate) type Res = SmallVec<[i64; 6]>;

/// The per-solve interning of resource names.
#[derive(Debug, Clone, Default)]
pub(crate) struct ResourceIndex {
    names: Vec<String>,
}

impl ResourceIndex {
    /// Registers every name of `list`.
    pub(crate) fn register(&mut self, list: &ResourceList) {
        for name in list.keys() {
            if !self.names.iter().any(|n| n == name) {
                self.names.push(name.to_string());
            }
        }
    }

    /// The number of interned names.
    pub(crate) fn len(&self) -> usize {
        self.names.len()
    }

    /// The name at index `i`.
    pub(crate) fn name(&self, i: usize) -> &str {
        &self.names[i]
    }

    /// The index of `name`, if registered.
    pub(crate) fn position(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// A zero vector.
    pub(crate) fn zero(&self) -> Res {
        SmallVec::from_elem(0, self.names.len())
    }

    /// The dense form of a list; names that were never registered are ignored, so register
    /// every list first.
    pub(crate) fn dense(&self, list: &ResourceList) -> Res {
        let mut out = self.zero();
        for (name, q) in list.iter() {
            if let Some(i) = self.names.iter().position(|n| n == name) {
                out[i] = q.milli_value();
            }
        }
        out
    }
}

/// `a + b`, element-wise (saturating).
pub(crate) fn add(a: &Res, b: &Res) -> Res {
    a.iter()
        .zip(b.iter())
        .map(|(x, y)| x.saturating_add(*y))
        .collect()
}

/// `a += b`.
pub(crate) fn add_assign(a: &mut Res, b: &Res) {
    for (x, y) in a.iter_mut().zip(b.iter()) {
        *x = x.saturating_add(*y);
    }
}

/// `a -= b`.
pub(crate) fn sub_assign(a: &mut Res, b: &Res) {
    for (x, y) in a.iter_mut().zip(b.iter()) {
        *x = x.saturating_sub(*y);
    }
}

/// Upstream's `Fits(candidate, total)`: false if any entry of `total` is negative, else every
/// entry of `candidate` is at most the matching entry of `total`.
pub(crate) fn fits(candidate: &Res, total: &Res) -> bool {
    total.iter().all(|t| *t >= 0) && candidate.iter().zip(total.iter()).all(|(c, t)| c <= t)
}

/// Element-wise maximum.
pub(crate) fn max_assign(a: &mut Res, b: &Res) {
    for (x, y) in a.iter_mut().zip(b.iter()) {
        *x = (*x).max(*y);
    }
}
