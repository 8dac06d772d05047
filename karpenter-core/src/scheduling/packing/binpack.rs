//! A multi-resource bin packer for free-form batches: it proposes groups of pods (one group per
//! node) that the faithful solve then turns into NodeClaims.
//!
//! For a node kind (an instance type's allocatable minus the DaemonSet overhead, at its price),
//! pods are taken largest first; each node is opened with the largest pod left and then filled
//! with the pod whose requests best match what the node has left (the largest dot product of
//! the pod's and the remaining capacity's CPU and memory shares), so that nodes fill evenly in
//! CPU and memory instead of running out of one while the other idles. Every group is priced at
//! the cheapest node kind that holds it. The proposal is only an estimate: the solve of each
//! group decides the real NodeClaim(s).

use crate::resources::{ResourceList, names};

/// A node kind the packer can fill.
#[derive(Debug, Clone)]
pub(super) struct Kind {
    /// Capacity per dimension for pods (allocatable minus DaemonSet overhead).
    pub capacity: Vec<i64>,
    /// Hourly price.
    pub price: f64,
}

/// Dense request vectors over a fixed list of resource names; CPU and memory first.
pub(super) struct Dims {
    names: Vec<String>,
}

impl Dims {
    /// CPU, memory, pods and every other resource some request names, in a fixed order.
    pub(super) fn new<'a>(lists: impl IntoIterator<Item = &'a ResourceList>) -> Dims {
        let mut names: Vec<String> = vec![
            names::CPU.to_string(),
            names::MEMORY.to_string(),
            names::PODS.to_string(),
        ];
        let mut extra = std::collections::BTreeSet::new();
        for l in lists {
            for k in l.keys() {
                if !names.iter().any(|n| n == k) {
                    extra.insert(k.to_string());
                }
            }
        }
        names.extend(extra);
        Dims { names }
    }

    /// The list as a vector (milli-units).
    pub(super) fn dense(&self, list: &ResourceList) -> Vec<i64> {
        self.names
            .iter()
            .map(|n| list.get_or_zero(n).milli_value())
            .collect()
    }
}

/// A proposal: groups of pod indices, and the estimated price of each.
#[derive(Debug, Clone, Default)]
pub(super) struct Proposal {
    pub groups: Vec<Vec<usize>>,
    pub estimate: f64,
}

fn fits(req: &[i64], left: &[i64]) -> bool {
    req.iter().zip(left).all(|(r, l)| r <= l)
}

/// The cheapest kind that holds `total`, if any.
fn cheapest_holding(total: &[i64], kinds: &[Kind]) -> Option<f64> {
    kinds
        .iter()
        .filter(|k| fits(total, &k.capacity))
        .map(|k| k.price)
        .min_by(f64::total_cmp)
}

/// Packs `pods` (request vectors, indexed as given) on nodes of `kind`; `None` when a pod does
/// not fit the kind at all.
fn fill(pods: &[(usize, Vec<i64>)], kind: &Kind, kinds: &[Kind]) -> Option<Proposal> {
    let cap = &kind.capacity;
    let share = |v: &[i64], d: usize| {
        if cap[d] > 0 {
            v[d] as f64 / cap[d] as f64
        } else {
            0.0
        }
    };
    let mut order: Vec<&(usize, Vec<i64>)> = pods.iter().collect();
    if order.iter().any(|(_, r)| !fits(r, cap)) {
        return None;
    }
    let size = |r: &[i64]| share(r, 0).max(share(r, 1));
    order.sort_by(|a, b| size(&b.1).total_cmp(&size(&a.1)).then(a.0.cmp(&b.0)));
    let mut left: Vec<&(usize, Vec<i64>)> = order;
    let mut proposal = Proposal::default();
    while !left.is_empty() {
        let mut room = cap.clone();
        let mut group = Vec::new();
        let mut total = vec![0; cap.len()];
        let mut take = |i: usize,
                        left: &mut Vec<&(usize, Vec<i64>)>,
                        room: &mut Vec<i64>,
                        total: &mut Vec<i64>| {
            let (idx, req) = left.remove(i);
            for d in 0..room.len() {
                room[d] -= req[d];
                total[d] += req[d];
            }
            group.push(*idx);
        };
        take(0, &mut left, &mut room, &mut total);
        loop {
            let mut best: Option<(f64, usize)> = None;
            for (i, (_, req)) in left.iter().enumerate() {
                if !fits(req, &room) {
                    continue;
                }
                let score = share(req, 0) * share(&room, 0) + share(req, 1) * share(&room, 1);
                if best.is_none_or(|(s, _)| score > s) {
                    best = Some((score, i));
                }
            }
            match best {
                Some((_, i)) => take(i, &mut left, &mut room, &mut total),
                None => break,
            }
        }
        proposal.estimate += cheapest_holding(&total, kinds).unwrap_or(kind.price);
        proposal.groups.push(group);
    }
    Some(proposal)
}

/// The best proposal over the `tries` node kinds whose whole-batch estimate (nodes needed for
/// the busiest resource times price) is lowest.
pub(super) fn propose(
    pods: &[(usize, Vec<i64>)],
    kinds: &[Kind],
    tries: usize,
) -> Option<Proposal> {
    if pods.is_empty() {
        return Some(Proposal::default());
    }
    let dims = kinds.first().map_or(0, |k| k.capacity.len());
    let mut demand = vec![0i64; dims];
    for (_, r) in pods {
        for d in 0..dims {
            demand[d] += r[d];
        }
    }
    let mut ranked: Vec<(f64, usize)> = kinds
        .iter()
        .enumerate()
        .filter(|(_, k)| pods.iter().all(|(_, r)| fits(r, &k.capacity)))
        .map(|(i, k)| {
            let nodes = (0..dims)
                .filter(|&d| demand[d] > 0)
                .map(|d| {
                    if k.capacity[d] > 0 {
                        demand[d] as f64 / k.capacity[d] as f64
                    } else {
                        f64::INFINITY
                    }
                })
                .fold(0.0, f64::max);
            (nodes * k.price, i)
        })
        .collect();
    ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    ranked
        .iter()
        .take(tries)
        .filter_map(|&(_, i)| fill(pods, &kinds[i], kinds))
        .min_by(|a, b| a.estimate.total_cmp(&b.estimate))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balanced_fill_pairs_cpu_heavy_with_memory_heavy_pods() {
        // Nodes of 4 CPU / 4 GiB: two CPU-heavy (3, 1) and two memory-heavy (1, 3) pods fit on
        // two nodes only when each node takes one of each.
        let kind = Kind {
            capacity: vec![4000, 4000, 110_000],
            price: 1.0,
        };
        let pods = vec![
            (0, vec![3000, 1000, 1000]),
            (1, vec![3000, 1000, 1000]),
            (2, vec![1000, 3000, 1000]),
            (3, vec![1000, 3000, 1000]),
        ];
        let p = propose(&pods, std::slice::from_ref(&kind), 1).expect("fits");
        assert_eq!(p.groups.len(), 2);
        assert_eq!(p.estimate, 2.0);
        for g in &p.groups {
            let cpu: i64 = g.iter().map(|&i| pods[i].1[0]).sum();
            assert_eq!(cpu, 4000);
        }
    }

    #[test]
    fn a_pod_too_large_for_every_kind_gives_no_proposal() {
        let kind = Kind {
            capacity: vec![1000, 1000, 110_000],
            price: 1.0,
        };
        let pods = vec![(0, vec![2000, 10, 1000])];
        assert!(propose(&pods, &[kind], 3).is_none());
    }
}
