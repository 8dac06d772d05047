//! Caches keyed by a template and a sequence of requirements, looked up by borrowing the
//! requirements: a hit hashes and compares them in place, and only a miss copies them.

use std::hash::{Hash, Hasher};

use rustc_hash::{FxHashMap, FxHasher};
use smallvec::SmallVec;

use crate::requirements::Requirement;

/// One stored key: the template and the requirements (`None`: a key without a requirement).
type Key = (usize, Box<[Option<Requirement>]>);

/// Template × requirement sequence → `V`.
pub(super) struct RequirementsCache<V> {
    buckets: FxHashMap<u64, SmallVec<[(Key, V); 1]>>,
}

impl<V> Default for RequirementsCache<V> {
    fn default() -> Self {
        Self {
            buckets: FxHashMap::default(),
        }
    }
}

fn hash_of<'r>(t: usize, seq: impl Iterator<Item = Option<&'r Requirement>>) -> u64 {
    let mut h = FxHasher::default();
    t.hash(&mut h);
    for r in seq {
        r.hash(&mut h);
    }
    h.finish()
}

fn same<'r>(key: &Key, t: usize, mut seq: impl Iterator<Item = Option<&'r Requirement>>) -> bool {
    key.0 == t
        && key
            .1
            .iter()
            .all(|stored| seq.next() == Some(stored.as_ref()))
        && seq.next().is_none()
}

impl<V: Clone> RequirementsCache<V> {
    /// The value stored for `(t, seq)`.
    pub(super) fn get<'r, I>(&self, t: usize, seq: I) -> Option<V>
    where
        I: Iterator<Item = Option<&'r Requirement>> + Clone,
    {
        let bucket = self.buckets.get(&hash_of(t, seq.clone()))?;
        bucket
            .iter()
            .find(|(k, _)| same(k, t, seq.clone()))
            .map(|(_, v)| v.clone())
    }

    /// Stores `value` for `(t, seq)` (the requirements are copied).
    pub(super) fn insert<'r, I>(&mut self, t: usize, seq: I, value: V)
    where
        I: Iterator<Item = Option<&'r Requirement>> + Clone,
    {
        let hash = hash_of(t, seq.clone());
        let key: Key = (t, seq.map(|r| r.cloned()).collect());
        let bucket = self.buckets.entry(hash).or_default();
        match bucket.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => bucket.push((key, value)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requirements::Operator;

    fn req(key: &str, v: &str) -> Requirement {
        Requirement::new(key, Operator::In, [v])
    }

    #[test]
    fn hits_only_the_same_template_and_sequence() {
        let a = req("zone", "a");
        let b = req("zone", "b");
        let mut cache = RequirementsCache::default();
        cache.insert(0, [Some(&a), None].into_iter(), 1);
        cache.insert(1, [Some(&a), None].into_iter(), 2);
        assert_eq!(cache.get(0, [Some(&a), None].into_iter()), Some(1));
        assert_eq!(cache.get(1, [Some(&a), None].into_iter()), Some(2));
        assert_eq!(cache.get(0, [Some(&b), None].into_iter()), None);
        assert_eq!(cache.get(0, [Some(&a)].into_iter()), None);
        assert_eq!(cache.get(0, [Some(&a), None, None].into_iter()), None);
        assert_eq!(cache.get(0, [None, Some(&a)].into_iter()), None);
        cache.insert(0, [Some(&a), None].into_iter(), 3);
        assert_eq!(cache.get(0, [Some(&a), None].into_iter()), Some(3));
    }
}
