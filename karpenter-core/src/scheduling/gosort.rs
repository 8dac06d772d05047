//! Go's `sort.Slice`, reproduced exactly: the permutation it leaves a slice in, for any input.
//!
//! Upstream keeps the NodeClaims created during a solve in one list and, before each pod that
//! reaches them, re-sorts that list in place by pod count with `sort.Slice`. `sort.Slice` is not
//! stable, but it is deterministic: equal elements end up in an order fixed by the algorithm and
//! the list's previous order. To decide exactly as upstream, the solver sorts with the same
//! algorithm (Go 1.19 and later, unchanged since):
//!
//! - 12 elements or fewer: insertion sort (stable: ties keep the list's previous order);
//! - more: pattern-defeating quicksort (pdqsort) without BlockQuicksort's optimisations:
//!   median-of-three pivot (Tukey's ninther from 50 elements), a check for already sorted or
//!   reversed runs, a partial insertion sort on likely sorted input (shifting only from 50
//!   elements), a partition of elements equal to the previous pivot, a fixed xorshift sequence
//!   (seeded with the length) to break patterns after an unbalanced partition, and heapsort
//!   once `bits.Len(n)` unbalanced partitions have been seen.
//!
//! This is our own implementation of that behaviour; the tests pin permutations checked
//! against Go's.
//!
//! A property the solver relies on: on input that is already sorted, [`sort_slice`] swaps
//! nothing (insertion sort finds every pair in order; pdqsort's pivot choice counts no swaps,
//! reports an increasing run, and the partial insertion sort finds the whole slice in order).

/// Sorts `v` exactly as Go's `sort.Slice(v, less)` does.
pub(crate) fn sort_slice<T>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool) {
    let n = v.len();
    let limit = bit_len(n);
    pdqsort(v, less, 0, n, limit);
}

/// Sorts `v` exactly as Go's `sort.Slice(v, less)` does, given that `v` was sorted before the
/// element at `moved` changed: every element before `moved` is not greater than every element
/// after it, and both sides are sorted (only the moved element may be out of place). The
/// solver's claim list is in that state before each sort: one claim gained a pod, or a claim
/// was appended.
///
/// The result is [`sort_slice`]'s, at a cost of a few comparisons and one rotation instead of a
/// pass over the whole slice. From 50 elements, when Go's pivot choice over the whole slice
/// counts no swaps (an increasing hint), Go's pdqsort starts with its partial insertion sort,
/// which here finds one out-of-order pair at the moved element, swaps it and shifts the moved
/// element over every neighbour strictly on the wrong side of it, then finds the rest in order:
/// the moved element lands before the first element after it that is not less than it (or
/// after the last element before it that it is not less than), the others keeping their order.
/// Anything else (fewer elements, another pivot hint, or a slice that breaks the assumption)
/// runs [`sort_slice`].
pub(crate) fn sort_moved<T>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool, moved: usize) {
    const SHORTEST_SHIFTING: usize = 50;
    let n = v.len();
    if moved >= n || n < SHORTEST_SHIFTING {
        sort_slice(v, less);
        return;
    }
    let left_bad = moved > 0 && lt(v, less, moved, moved - 1);
    let right_bad = moved + 1 < n && lt(v, less, moved + 1, moved);
    if !left_bad && !right_bad {
        // Sorted: Go's sort swaps nothing.
        return;
    }
    if left_bad == right_bad || choose_pivot(v, less, 0, n).1 != Hint::Increasing {
        sort_slice(v, less);
        return;
    }
    if right_bad {
        let (head, tail) = v.split_at(moved + 1);
        let element = &head[moved];
        let end = moved + 1 + tail.partition_point(|x| less(x, element));
        v[moved..end].rotate_left(1);
    } else {
        let (head, tail) = v.split_at(moved);
        let element = &tail[0];
        let start = head.partition_point(|x| !less(element, x));
        v[start..=moved].rotate_right(1);
    }
}

/// Whether `v` is sorted (no element less than its predecessor).
pub(crate) fn is_sorted<T>(v: &[T], less: &mut impl FnMut(&T, &T) -> bool) -> bool {
    v.windows(2).all(|w| !less(&w[1], &w[0]))
}

/// Go's `bits.Len`: the number of bits needed to represent `n`.
fn bit_len(n: usize) -> usize {
    (usize::BITS - n.leading_zeros()) as usize
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Hint {
    Unknown,
    Increasing,
    Decreasing,
}

fn lt<T>(v: &[T], less: &mut impl FnMut(&T, &T) -> bool, i: usize, j: usize) -> bool {
    less(&v[i], &v[j])
}

fn insertion_sort<T>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool, a: usize, b: usize) {
    for i in a + 1..b {
        let mut j = i;
        while j > a && lt(v, less, j, j - 1) {
            v.swap(j, j - 1);
            j -= 1;
        }
    }
}

fn sift_down<T>(
    v: &mut [T],
    less: &mut impl FnMut(&T, &T) -> bool,
    lo: usize,
    hi: usize,
    first: usize,
) {
    let mut root = lo;
    loop {
        let mut child = 2 * root + 1;
        if child >= hi {
            return;
        }
        if child + 1 < hi && lt(v, less, first + child, first + child + 1) {
            child += 1;
        }
        if !lt(v, less, first + root, first + child) {
            return;
        }
        v.swap(first + root, first + child);
        root = child;
    }
}

fn heap_sort<T>(v: &mut [T], less: &mut impl FnMut(&T, &T) -> bool, a: usize, b: usize) {
    let first = a;
    let hi = b - a;
    if hi == 0 {
        return;
    }
    for i in (0..=(hi - 1) / 2).rev() {
        sift_down(v, less, i, hi, first);
    }
    for i in (0..hi).rev() {
        v.swap(first, first + i);
        sift_down(v, less, 0, i, first);
    }
}

fn pdqsort<T>(
    v: &mut [T],
    less: &mut impl FnMut(&T, &T) -> bool,
    mut a: usize,
    mut b: usize,
    mut limit: usize,
) {
    const MAX_INSERTION: usize = 12;
    let mut was_balanced = true;
    let mut was_partitioned = true;
    loop {
        let length = b - a;
        if length <= MAX_INSERTION {
            insertion_sort(v, less, a, b);
            return;
        }
        if limit == 0 {
            heap_sort(v, less, a, b);
            return;
        }
        if !was_balanced {
            break_patterns(v, a, b);
            limit -= 1;
        }
        let (mut pivot, mut hint) = choose_pivot(v, less, a, b);
        if hint == Hint::Decreasing {
            v[a..b].reverse();
            pivot = (b - 1) - (pivot - a);
            hint = Hint::Increasing;
        }
        if was_balanced
            && was_partitioned
            && hint == Hint::Increasing
            && partial_insertion_sort(v, less, a, b)
        {
            return;
        }
        if a > 0 && !lt(v, less, a - 1, pivot) {
            a = partition_equal(v, less, a, b, pivot);
            continue;
        }
        let (mid, already) = partition(v, less, a, b, pivot);
        was_partitioned = already;
        let (left, right) = (mid - a, b - mid);
        let threshold = length / 8;
        if left < right {
            was_balanced = left >= threshold;
            pdqsort(v, less, a, mid, limit);
            a = mid + 1;
        } else {
            was_balanced = right >= threshold;
            pdqsort(v, less, mid + 1, b, limit);
            b = mid;
        }
    }
}

fn partition<T>(
    v: &mut [T],
    less: &mut impl FnMut(&T, &T) -> bool,
    a: usize,
    b: usize,
    pivot: usize,
) -> (usize, bool) {
    v.swap(a, pivot);
    // i and j are inclusive bounds of what remains; j may step to a (never below a + 0) and
    // i to b, so signed arithmetic keeps Go's loop conditions readable.
    let (mut i, mut j) = (a as isize + 1, b as isize - 1);
    let at = |x: isize| x as usize;
    while i <= j && lt(v, less, at(i), a) {
        i += 1;
    }
    while i <= j && !lt(v, less, at(j), a) {
        j -= 1;
    }
    if i > j {
        v.swap(at(j), a);
        return (at(j), true);
    }
    v.swap(at(i), at(j));
    i += 1;
    j -= 1;
    loop {
        while i <= j && lt(v, less, at(i), a) {
            i += 1;
        }
        while i <= j && !lt(v, less, at(j), a) {
            j -= 1;
        }
        if i > j {
            break;
        }
        v.swap(at(i), at(j));
        i += 1;
        j -= 1;
    }
    v.swap(at(j), a);
    (at(j), false)
}

fn partition_equal<T>(
    v: &mut [T],
    less: &mut impl FnMut(&T, &T) -> bool,
    a: usize,
    b: usize,
    pivot: usize,
) -> usize {
    v.swap(a, pivot);
    let (mut i, mut j) = (a as isize + 1, b as isize - 1);
    let at = |x: isize| x as usize;
    loop {
        while i <= j && !lt(v, less, a, at(i)) {
            i += 1;
        }
        while i <= j && lt(v, less, a, at(j)) {
            j -= 1;
        }
        if i > j {
            break;
        }
        v.swap(at(i), at(j));
        i += 1;
        j -= 1;
    }
    at(i)
}

fn partial_insertion_sort<T>(
    v: &mut [T],
    less: &mut impl FnMut(&T, &T) -> bool,
    a: usize,
    b: usize,
) -> bool {
    const MAX_STEPS: usize = 5;
    const SHORTEST_SHIFTING: usize = 50;
    let mut i = a + 1;
    for _ in 0..MAX_STEPS {
        while i < b && !lt(v, less, i, i - 1) {
            i += 1;
        }
        if i == b {
            return true;
        }
        if b - a < SHORTEST_SHIFTING {
            return false;
        }
        v.swap(i, i - 1);
        // Shift the smaller one to the left. Go bounds this walk by index 1, not by `a`.
        if i - a >= 2 {
            let mut j = i - 1;
            while j >= 1 {
                if !lt(v, less, j, j - 1) {
                    break;
                }
                v.swap(j, j - 1);
                j -= 1;
            }
        }
        // Shift the greater one to the right.
        if b - i >= 2 {
            let mut j = i + 1;
            while j < b {
                if !lt(v, less, j, j - 1) {
                    break;
                }
                v.swap(j, j - 1);
                j += 1;
            }
        }
    }
    false
}

fn break_patterns<T>(v: &mut [T], a: usize, b: usize) {
    let length = b - a;
    if length >= 8 {
        // Go's xorshift, seeded with the length.
        let mut random = length as u64;
        let modulus = 1usize << bit_len(length);
        let mid = a + (length / 4) * 2;
        for idx in mid - 1..=mid + 1 {
            random ^= random << 13;
            random ^= random >> 7;
            random ^= random << 17;
            let mut other = (random as usize) & (modulus - 1);
            if other >= length {
                other -= length;
            }
            v.swap(idx, a + other);
        }
    }
}

fn choose_pivot<T>(
    v: &[T],
    less: &mut impl FnMut(&T, &T) -> bool,
    a: usize,
    b: usize,
) -> (usize, Hint) {
    const SHORTEST_NINTHER: usize = 50;
    const MAX_SWAPS: usize = 4 * 3;
    let l = b - a;
    let mut swaps = 0;
    let mut i = a + l / 4;
    let mut j = a + l / 4 * 2;
    let mut k = a + l / 4 * 3;
    if l >= 8 {
        if l >= SHORTEST_NINTHER {
            i = median(v, less, i - 1, i, i + 1, &mut swaps);
            j = median(v, less, j - 1, j, j + 1, &mut swaps);
            k = median(v, less, k - 1, k, k + 1, &mut swaps);
        }
        j = median(v, less, i, j, k, &mut swaps);
    }
    let hint = match swaps {
        0 => Hint::Increasing,
        MAX_SWAPS => Hint::Decreasing,
        _ => Hint::Unknown,
    };
    (j, hint)
}

fn order2<T>(
    v: &[T],
    less: &mut impl FnMut(&T, &T) -> bool,
    a: usize,
    b: usize,
    swaps: &mut usize,
) -> (usize, usize) {
    if lt(v, less, b, a) {
        *swaps += 1;
        (b, a)
    } else {
        (a, b)
    }
}

fn median<T>(
    v: &[T],
    less: &mut impl FnMut(&T, &T) -> bool,
    a: usize,
    b: usize,
    c: usize,
    swaps: &mut usize,
) -> usize {
    let (a, b) = order2(v, less, a, b, swaps);
    let (b, c) = order2(v, less, b, c, swaps);
    let _ = c;
    let (_, b) = order2(v, less, a, b, swaps);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sorts `(key, id)` pairs by key only and returns the ids in their final order.
    fn ids_after_sort(keys: &[u32]) -> Vec<u32> {
        let mut v: Vec<(u32, u32)> = keys.iter().zip(0..).map(|(&k, i)| (k, i)).collect();
        sort_slice(&mut v, &mut |a: &(u32, u32), b: &(u32, u32)| a.0 < b.0);
        v.into_iter().map(|(_, id)| id).collect()
    }

    #[test]
    fn insertion_sort_regime_is_stable() {
        // 12 elements or fewer: insertion sort, ties keep their previous order.
        assert_eq!(ids_after_sort(&[2, 1, 2, 1, 0]), vec![4, 1, 3, 0, 2]);
        let keys = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0];
        assert_eq!(
            ids_after_sort(&keys),
            vec![11, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
        );
    }

    // The expected permutations below are what Go's `sort.Slice` produces for the same keys
    // (checked with Go 1.26; the algorithm is unchanged since Go 1.19).

    #[test]
    fn pdqsort_regime_matches_go() {
        // 14 elements: median-of-three pivot, partitions, insertion sort below 13.
        assert_eq!(
            ids_after_sort(&[3, 1, 2, 1, 3, 2, 1, 0, 2, 3, 1, 0, 2, 1]),
            vec![7, 11, 6, 3, 10, 1, 13, 5, 2, 8, 12, 4, 0, 9]
        );
        // 13 equal keys but the last: the ties do not keep their order.
        assert_eq!(
            ids_after_sort(&[2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1]),
            vec![12, 6, 2, 3, 4, 5, 0, 7, 8, 9, 10, 11, 1]
        );
        // The solver's case: 14 claims with one pod each, the eighth just got a second pod.
        assert_eq!(
            ids_after_sort(&[1, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1, 1, 1, 1]),
            vec![6, 12, 2, 3, 4, 5, 8, 0, 1, 9, 10, 11, 13, 7]
        );
    }

    /// The generator the Go reference ran: a 64-bit LCG and eight key patterns (few distinct
    /// keys, many, ascending, descending, sawtooth, organ pipe, sorted runs with one key
    /// bumped, eight distinct keys) over sizes 0 to 300.
    fn generated(c: usize, state: &mut u64) -> Vec<u32> {
        let mut next = || {
            *state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            *state >> 33
        };
        let n = c % 301;
        let pattern = c % 8;
        let mut v: Vec<u32> = (0..n)
            .map(|i| match pattern {
                0 => (next() % 3) as u32,
                1 => (next() % 1000) as u32,
                2 => i as u32,
                3 => (n - i) as u32,
                4 => (i % 17) as u32,
                5 if i < n / 2 => i as u32,
                5 => (n - i) as u32,
                6 => (i / 7) as u32,
                _ => (next() % 8) as u32,
            })
            .collect();
        if pattern == 6 && n > 0 {
            let j = (next() % n as u64) as usize;
            v[j] += 1;
        }
        v
    }

    #[test]
    fn two_thousand_generated_inputs_match_go() {
        // FNV-1a over every resulting id (4 bytes, little endian) of 2,000 generated inputs,
        // as computed by Go's sort.Slice on the same inputs.
        let mut state = 42u64;
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for c in 0..2000 {
            let keys = generated(c, &mut state);
            for id in ids_after_sort(&keys) {
                for b in id.to_le_bytes() {
                    h ^= u64::from(b);
                    h = h.wrapping_mul(0x0000_0100_0000_01b3);
                }
            }
        }
        assert_eq!(h, 18190342226876856249);
    }

    /// Sorts `(key, id)` pairs with [`sort_moved`] and [`sort_slice`] and checks both leave
    /// the same permutation.
    fn check_moved(v: &[(u32, u32)], moved: usize) {
        let less = &mut |a: &(u32, u32), b: &(u32, u32)| a.0 < b.0;
        let mut fast = v.to_vec();
        sort_moved(&mut fast, less, moved);
        let mut full = v.to_vec();
        sort_slice(&mut full, less);
        assert_eq!(fast, full, "moved={moved} input={v:?}");
    }

    #[test]
    fn sort_moved_matches_sort_slice() {
        // Sorted lists of claims (pod counts with many ties), then one claim gains a pod, or a
        // claim with few pods is appended: every position, sizes around the 50-element
        // threshold and beyond, including positions the pivot choice samples.
        let mut state = 7u64;
        let mut next = move |m: u64| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % m
        };
        let mut cases = 0;
        for n in [1usize, 2, 12, 13, 49, 50, 51, 64, 100, 257] {
            for _ in 0..4 {
                let spread = 1 + next(6) as u32;
                let mut keys: Vec<u32> =
                    (0..n).map(|_| 1 + next(u64::from(spread)) as u32).collect();
                keys.sort_unstable();
                let base: Vec<(u32, u32)> = keys.iter().copied().zip(0..).collect();
                for p in 0..n {
                    let mut v = base.clone();
                    v[p].0 += 1 + next(2) as u32;
                    check_moved(&v, p);
                    cases += 1;
                }
                for k in 1..=spread + 1 {
                    let mut v = base.clone();
                    v.push((k, n as u32));
                    check_moved(&v, n);
                    cases += 1;
                }
            }
        }
        assert!(cases > 2000);
    }

    #[test]
    fn sorted_input_is_left_untouched() {
        // The solver skips the sort when the list is already sorted: that must be a no-op.
        for n in [0, 1, 5, 12, 13, 49, 50, 51, 200] {
            let keys: Vec<u32> = (0..n).map(|i| i / 3).collect();
            assert_eq!(ids_after_sort(&keys), (0..n).collect::<Vec<_>>(), "n={n}");
            assert!(is_sorted(&keys, &mut |a, b| a < b));
        }
    }
}

#[cfg(test)]
mod adversary_tests {
    use super::*;
    use std::cell::RefCell;

    /// McIlroy's adversary ("A killer adversary for quicksort"): values are fixed lazily, as
    /// comparisons need them, so as to make the sort do badly. The values it ends with depend
    /// on every comparison the algorithm made, in order.
    pub(super) fn adversary_values(n: usize) -> Vec<usize> {
        let gas = n;
        let state = RefCell::new((vec![gas; n], 0usize, 0usize));
        let mut ids: Vec<usize> = (0..n).collect();
        sort_slice(&mut ids, &mut |&x: &usize, &y: &usize| {
            let mut s = state.borrow_mut();
            let (val, nsolid, candidate) = &mut *s;
            if val[x] == gas && val[y] == gas {
                if x == *candidate {
                    val[x] = *nsolid;
                } else {
                    val[y] = *nsolid;
                }
                *nsolid += 1;
            }
            if val[x] == gas {
                *candidate = x;
            } else if val[y] == gas {
                *candidate = y;
            }
            val[x] < val[y]
        });
        state.into_inner().0
    }

    #[test]
    fn adversary_values_match_go() {
        // Go's sort.Slice under the same adversary fixes these values (n = 64): every
        // comparison, in order, matches.
        let expected: Vec<usize> = vec![
            6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 0, 1, 21, 22, 23, 24, 25, 26,
            27, 28, 29, 30, 31, 32, 33, 34, 2, 3, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46,
            47, 48, 4, 5, 51, 52, 57, 49, 56, 53, 50, 55, 54, 58, 59, 60, 61, 62, 64,
        ];
        assert_eq!(adversary_values(64), expected);
    }

    #[test]
    fn heapsort_fallback_matches_go() {
        // Go's heapSort over data[2:15] of these keys (the fallback pdqsort takes after too
        // many unbalanced partitions, which inputs here never reach).
        let keys = [3, 1, 2, 1, 3, 2, 1, 0, 2, 3, 1, 0, 2, 1, 5, 4];
        let mut v: Vec<(u32, usize)> = keys.iter().copied().zip(0..).collect();
        heap_sort(
            &mut v,
            &mut |a: &(u32, usize), b: &(u32, usize)| a.0 < b.0,
            2,
            15,
        );
        let ids: Vec<usize> = v.into_iter().map(|(_, id)| id).collect();
        assert_eq!(
            ids,
            vec![0, 1, 7, 11, 13, 6, 10, 3, 8, 2, 12, 5, 4, 9, 14, 15]
        );
    }
}
