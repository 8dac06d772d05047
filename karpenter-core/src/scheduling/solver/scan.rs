//! What the scan of the in-flight NodeClaims reads per claim, kept compact.
//!
//! Every placement attempt that gets past the existing nodes walks the NodeClaims in order
//! and rejects most of them with cheap checks (hostname groups, capacity, topology domains)
//! before one takes the pod. With thousands of claims the walk dominates the attempt, and
//! reading those checks' inputs from the claims themselves (requirements, resource vectors,
//! per-key caches, each behind its own pointer) costs a cache miss or more per claim. A
//! [`ClaimScan`] per claim holds copies of exactly those inputs in one small record, refreshed
//! whenever a pod is added to its claim (the only time they change), so the walk reads one
//! contiguous array. Every check it answers is the same test on the same values; whatever it
//! cannot answer falls back to the claim.

use super::super::dense::Res;
use super::{Claim, KeyRequirement};

/// How many resources (the first of the resource index: CPU, memory) and topology keys (by
/// interned id) a record copies.
const RESOURCES: usize = 2;
const KEYS: usize = 2;

/// A claim's scan record (see the module documentation).
#[derive(Clone, Copy, Debug)]
pub(super) struct ClaimScan {
    /// The claim's interned hostname id (`u32::MAX`: none).
    hostname_id: u32,
    /// Bit `k`: `masks[k]` holds the claim's domain mask on topology key `k`.
    masks_known: u8,
    /// The claim's requests on the first resources.
    requests: [i64; RESOURCES],
    /// The claim's largest allocatable on the first resources.
    max_allocatable: [i64; RESOURCES],
    /// Per topology key id below [`KEYS`]: the domain mask of the claim's requirement on it.
    masks: [u64; KEYS],
}

impl ClaimScan {
    /// The record of `claim` as it is now.
    pub(super) fn of(claim: &Claim) -> ClaimScan {
        let mut scan = ClaimScan {
            hostname_id: claim.hostname_id.unwrap_or(u32::MAX),
            masks_known: 0,
            requests: [0; RESOURCES],
            max_allocatable: [i64::MAX; RESOURCES],
            masks: [0; KEYS],
        };
        for r in 0..RESOURCES {
            // A resource the index lacks never makes a claim over capacity.
            scan.requests[r] = claim.requests.get(r).copied().unwrap_or(0);
            scan.max_allocatable[r] = claim.max_allocatable.get(r).copied().unwrap_or(i64::MAX);
        }
        for (k, cached) in claim.topology_keys.iter().take(KEYS).enumerate() {
            // A mask is only ever found for a requirement the claim has.
            if let KeyRequirement {
                mask: Some(mask), ..
            } = cached
            {
                scan.masks[k] = *mask;
                scan.masks_known |= 1 << k;
            }
        }
        scan
    }

    /// The claim's hostname id, as [`Claim::hostname_id`].
    pub(super) fn hostname_id(&self) -> Option<u32> {
        (self.hostname_id != u32::MAX).then_some(self.hostname_id)
    }

    /// True when adding `requests` certainly exceeds the claim's largest option on one of the
    /// first resources: the test of `dense::fits_sum` on those resources (a claim this does not
    /// reject may still be over capacity on another).
    pub(super) fn over_capacity(&self, requests: &Res) -> bool {
        (0..RESOURCES).any(|r| {
            let need = requests.get(r).copied().unwrap_or(0);
            let max = self.max_allocatable[r];
            max < 0 || self.requests[r].saturating_add(need) > max
        })
    }

    /// The domain pre-check of an attempt on this claim when every limit is a domain mask on a
    /// key this record covers and the claim's requirement on it has a mask: `Some(passes)`,
    /// the same bit test the pre-check does; `None` when the claim must be asked.
    pub(super) fn passes_masks(&self, limits: &[(u32, u64)]) -> Option<bool> {
        let mut passes = true;
        for &(kid, mask) in limits {
            let k = kid as usize;
            if k >= KEYS || self.masks_known & (1 << k) == 0 {
                return None;
            }
            passes &= self.masks[k] & mask != 0;
        }
        Some(passes)
    }
}
