//! Sets of a template's instance types as bit sets, and the per-template table that turns a
//! resource need into the set of instance types whose allocatable covers it.
//!
//! A NodeClaim keeps its remaining instance types as a [`TypeSet`]; adding a pod intersects
//! it with the types compatible with the new requirements (cached per requirements) and with
//! the types that fit the new requests ([`FitTable::fitting`]), a few word operations per
//! resource instead of a check per remaining type. Iteration is in ascending index order, the
//! order the option lists had.

use smallvec::SmallVec;

use crate::scheduling::dense::Res;

/// A set of instance-type indices below the template's type count.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(super) struct TypeSet {
    words: SmallVec<[u64; 8]>,
}

impl TypeSet {
    /// The empty set over `n` types.
    pub(super) fn empty(n: usize) -> TypeSet {
        TypeSet {
            words: SmallVec::from_elem(0, n.div_ceil(64)),
        }
    }

    /// Every index below `n`.
    pub(super) fn full(n: usize) -> TypeSet {
        let mut s = TypeSet::empty(n);
        for (w, word) in s.words.iter_mut().enumerate() {
            let left = n - w * 64;
            *word = if left >= 64 {
                u64::MAX
            } else {
                (1u64 << left) - 1
            };
        }
        s
    }

    /// Adds `i` (which must be below the set's size).
    pub(super) fn insert(&mut self, i: u32) {
        if let Some(w) = self.words.get_mut(i as usize / 64) {
            *w |= 1u64 << (i % 64);
        }
    }

    /// Whether `i` is in the set.
    pub(super) fn contains(&self, i: u32) -> bool {
        self.words
            .get(i as usize / 64)
            .is_some_and(|w| w & (1u64 << (i % 64)) != 0)
    }

    /// `self ∩= other`.
    pub(super) fn and_assign(&mut self, other: &TypeSet) {
        for (a, b) in self.words.iter_mut().zip(other.words.iter()) {
            *a &= *b;
        }
    }

    /// `self ∪= other`.
    pub(super) fn or_assign(&mut self, other: &TypeSet) {
        for (a, b) in self.words.iter_mut().zip(other.words.iter()) {
            *a |= *b;
        }
    }

    /// `self ∖= other`.
    pub(super) fn remove_all(&mut self, other: &TypeSet) {
        for (a, b) in self.words.iter_mut().zip(other.words.iter()) {
            *a &= !*b;
        }
    }

    /// Whether the set is empty.
    pub(super) fn is_empty(&self) -> bool {
        self.words.iter().all(|w| *w == 0)
    }

    /// Whether `self ∩ a ∩ b` is non-empty.
    pub(super) fn meets(&self, a: &TypeSet, b: &TypeSet) -> bool {
        self.words
            .iter()
            .zip(a.words.iter())
            .zip(b.words.iter())
            .any(|((x, y), z)| x & y & z != 0)
    }

    /// The number of indices in the set.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The indices in ascending order.
    pub(super) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(w, &word)| {
            let mut bits = word;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                Some(w as u32 * 64 + b)
            })
        })
    }
}

/// One resource of a [`FitTable`]: the distinct allocatable values of the template's types in
/// ascending order, and per value the set of types whose allocatable is at least that value.
#[derive(Debug, Default)]
struct Dimension {
    values: Vec<i64>,
    at_least: Vec<TypeSet>,
}

/// Per template: which instance types' allocatable covers a resource need, as upstream's
/// `Fits` decides it (every allocatable entry non-negative, every need at most the matching
/// allocatable entry).
#[derive(Debug, Default)]
pub(super) struct FitTable {
    count: usize,
    /// Types whose allocatable has no negative entry.
    non_negative: TypeSet,
    dims: Vec<Dimension>,
}

impl FitTable {
    /// The table over `allocatable` (one entry per instance type, each as long as the
    /// resource index).
    pub(super) fn new(allocatable: &[Res]) -> FitTable {
        let count = allocatable.len();
        let width = allocatable.first().map_or(0, |a| a.len());
        let mut non_negative = TypeSet::empty(count);
        for (i, a) in allocatable.iter().enumerate() {
            if a.iter().all(|v| *v >= 0) {
                non_negative.insert(i as u32);
            }
        }
        let dims = (0..width)
            .map(|d| {
                let value = |i: usize| allocatable[i].get(d).copied().unwrap_or(0);
                let mut order: Vec<usize> = (0..count).collect();
                order.sort_by_key(|&i| value(i));
                let mut values = Vec::new();
                let mut at_least = Vec::new();
                // Walking from the largest value down, the set grows by each value's types.
                let mut set = TypeSet::empty(count);
                let mut k = count;
                while k > 0 {
                    let v = value(order[k - 1]);
                    while k > 0 && value(order[k - 1]) == v {
                        set.insert(order[k - 1] as u32);
                        k -= 1;
                    }
                    values.push(v);
                    at_least.push(set.clone());
                }
                values.reverse();
                at_least.reverse();
                Dimension { values, at_least }
            })
            .collect();
        FitTable {
            count,
            non_negative,
            dims,
        }
    }

    /// Per resource, the largest allocatable among the types of `set`, at least zero (zero
    /// for an empty set): what folding `dense::max_assign` over them from zero gives.
    pub(super) fn max_over(&self, set: &TypeSet) -> Res {
        self.dims
            .iter()
            .map(|dim| {
                // The largest value whose at-least set meets `set` is the largest member's.
                let top = dim
                    .values
                    .iter()
                    .zip(&dim.at_least)
                    .rev()
                    .find(|(_, at_least)| set.meets(at_least, at_least))
                    .map_or(0, |(&v, _)| v);
                top.max(0)
            })
            .collect()
    }

    /// The types that fit `need`: [`dense::fits`](crate::scheduling::dense::fits)`(need,
    /// allocatable)` for each of them.
    pub(super) fn fitting(&self, need: &Res) -> TypeSet {
        let mut set = self.non_negative.clone();
        for (d, dim) in self.dims.iter().enumerate() {
            let x = need.get(d).copied().unwrap_or(0);
            // Every type covers a need at or below the smallest value (non-negative types
            // already hold every value at or above zero, and a smaller need passes anyway).
            if dim.values.first().is_none_or(|&min| x <= min) {
                continue;
            }
            let k = dim.values.partition_point(|&v| v < x);
            match dim.at_least.get(k) {
                Some(s) => set.and_assign(s),
                None => return TypeSet::empty(self.count),
            }
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduling::dense;
    use smallvec::smallvec;

    #[test]
    fn full_sets_hold_exactly_the_indices_below_their_size() {
        for n in [0usize, 1, 63, 64, 65, 128, 400] {
            let s = TypeSet::full(n);
            assert_eq!(s.len(), n);
            assert_eq!(
                s.iter().collect::<Vec<_>>(),
                (0..n as u32).collect::<Vec<_>>()
            );
            assert!(!s.contains(n as u32));
            assert_eq!(TypeSet::empty(n).len(), 0);
        }
    }

    #[test]
    fn set_operations_match_their_definitions() {
        let a: Vec<u32> = (0..300).filter(|i| i % 3 == 0).collect();
        let b: Vec<u32> = (0..300).filter(|i| i % 5 == 0).collect();
        let mut sa = TypeSet::empty(300);
        a.iter().for_each(|&i| sa.insert(i));
        let mut sb = TypeSet::empty(300);
        b.iter().for_each(|&i| sb.insert(i));
        let mut and = sa.clone();
        and.and_assign(&sb);
        assert_eq!(
            and.iter().collect::<Vec<_>>(),
            (0..300).filter(|i| i % 15 == 0).collect::<Vec<u32>>()
        );
        let mut or = sa.clone();
        or.or_assign(&sb);
        assert_eq!(
            or.iter().collect::<Vec<_>>(),
            (0..300)
                .filter(|i| i % 3 == 0 || i % 5 == 0)
                .collect::<Vec<u32>>()
        );
        let mut minus = sa.clone();
        minus.remove_all(&sb);
        assert_eq!(
            minus.iter().collect::<Vec<_>>(),
            (0..300)
                .filter(|i| i % 3 == 0 && i % 5 != 0)
                .collect::<Vec<u32>>()
        );
        assert!(sa.meets(&sb, &TypeSet::full(300)));
        let mut odd = TypeSet::empty(300);
        (0..300).filter(|i| i % 2 == 1).for_each(|i| odd.insert(i));
        assert!(sa.meets(&sb, &odd)); // 15
        let mut only_30 = TypeSet::empty(300);
        only_30.insert(31);
        assert!(!sa.meets(&sb, &only_30));
        assert_eq!(sa.len(), a.len());
    }

    #[test]
    fn fitting_matches_the_per_type_check() {
        // Types with repeated, negative and zero entries; needs around every boundary.
        let mut allocatable: Vec<Res> = Vec::new();
        for i in 0..150i64 {
            allocatable.push(smallvec![(i % 13) * 250, (i % 7) * 1024 - 1024, i % 3, 0]);
        }
        let table = FitTable::new(&allocatable);
        let mut needs: Vec<Res> = vec![smallvec![0, 0, 0, 0], smallvec![-5, -5, -5, -5]];
        for c in [-1, 0, 1, 250, 251, 3000, 3001] {
            for m in [-1025, 0, 1, 1024, 5120, 5121] {
                for p in [0, 1, 2, 3] {
                    needs.push(smallvec![c, m, p, 0]);
                    needs.push(smallvec![c, m, p, 1]);
                }
            }
        }
        for need in &needs {
            let want: Vec<u32> = (0..allocatable.len() as u32)
                .filter(|&i| dense::fits(need, &allocatable[i as usize]))
                .collect();
            assert_eq!(
                table.fitting(need).iter().collect::<Vec<_>>(),
                want,
                "{need:?}"
            );
        }
        assert!(FitTable::new(&[]).fitting(&smallvec![1]).is_empty());
        // The per-resource maximum over subsets, as a fold of `max_assign` from zero.
        for step in [1u32, 2, 7, 64, 149] {
            let mut set = TypeSet::empty(allocatable.len());
            (0..allocatable.len() as u32)
                .filter(|i| i % step == step - 1)
                .for_each(|i| set.insert(i));
            let mut want: Res = smallvec![0, 0, 0, 0];
            for i in set.iter() {
                dense::max_assign(&mut want, &allocatable[i as usize]);
            }
            assert_eq!(table.max_over(&set), want, "every {step}th type");
        }
        let none = TypeSet::empty(allocatable.len());
        assert_eq!(table.max_over(&none), Res::from_elem(0, 4));
    }
}
