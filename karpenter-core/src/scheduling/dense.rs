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
#[derive(Debug, Clone, Default, PartialEq)]
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

/// [`fits`]`(&`[`add`]`(a, b), total)` without building the sum.
pub(crate) fn fits_sum(a: &Res, b: &Res, total: &Res) -> bool {
    total.iter().all(|t| *t >= 0)
        && a.iter()
            .zip(b.iter())
            .zip(total.iter())
            .all(|((x, y), t)| x.saturating_add(*y) <= *t)
}

/// Element-wise maximum.
pub(crate) fn max_assign(a: &mut Res, b: &Res) {
    for (x, y) in a.iter_mut().zip(b.iter()) {
        *x = (*x).max(*y);
    }
}

/// A max segment tree over one resource of the existing nodes (their remaining milli-units):
/// finds the next node, in placement order, with at least a given amount left, so that a solve
/// skips full nodes in O(log n) instead of checking them one by one.
#[derive(Debug, Clone)]
pub(crate) struct MaxTree {
    size: usize,
    tree: Vec<i64>,
}

impl MaxTree {
    /// The tree over `values`.
    pub(crate) fn new(values: &[i64]) -> MaxTree {
        let size = values.len().next_power_of_two().max(1);
        let mut tree = vec![i64::MIN; 2 * size];
        for (i, &v) in values.iter().enumerate() {
            if let Some(slot) = tree.get_mut(size + i) {
                *slot = v;
            }
        }
        for i in (1..size).rev() {
            tree[i] = tree[2 * i].max(tree[2 * i + 1]);
        }
        MaxTree { size, tree }
    }

    /// Sets the value at `i`.
    pub(crate) fn set(&mut self, i: usize, value: i64) {
        let mut at = self.size + i;
        if at >= self.tree.len() {
            return;
        }
        self.tree[at] = value;
        while at > 1 {
            at /= 2;
            self.tree[at] = self.tree[2 * at].max(self.tree[2 * at + 1]);
        }
    }

    /// The smallest position `>= from` whose value is at least `x`.
    pub(crate) fn first_at_least(&self, from: usize, x: i64) -> Option<usize> {
        self.find(1, 0, self.size, from, x)
    }

    fn find(&self, node: usize, lo: usize, hi: usize, from: usize, x: i64) -> Option<usize> {
        if hi <= from || self.tree.get(node).is_none_or(|&m| m < x) {
            return None;
        }
        if hi - lo == 1 {
            return Some(lo);
        }
        let mid = (lo + hi) / 2;
        self.find(2 * node, lo, mid, from, x)
            .or_else(|| self.find(2 * node + 1, mid, hi, from, x))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::MaxTree;

    proptest! {
        /// `first_at_least` agrees with a linear scan, before and after updates.
        #[test]
        fn max_tree_finds_what_a_scan_finds(
            mut values in proptest::collection::vec(-5i64..20, 0..40),
            updates in proptest::collection::vec((0usize..40, -5i64..20), 0..20),
            queries in proptest::collection::vec((0usize..45, -5i64..25), 1..20),
        ) {
            let mut tree = MaxTree::new(&values);
            for (i, v) in updates {
                if i < values.len() {
                    values[i] = v;
                    tree.set(i, v);
                }
            }
            for (from, x) in queries {
                let scan = (from..values.len()).find(|&i| values[i] >= x);
                prop_assert_eq!(tree.first_at_least(from, x), scan);
            }
        }
    }
}
