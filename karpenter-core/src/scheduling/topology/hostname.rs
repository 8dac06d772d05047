//! The per-candidate hostname checks of one pod's placement attempt.

use super::*;

impl HostnameCheck<'_> {
    /// Whether no hostname group constrains the pod: then no host is rejected.
    pub(crate) fn is_empty(&self) -> bool {
        self.owned.is_empty() && self.inverse.is_empty()
    }

    /// The groups whose rejections last, identifying them across pods: two pods with equal
    /// lists are rejected for good by the same hosts (empty: none can be).
    pub(crate) fn lasting_groups(&self) -> &HostnameGroups {
        &self.lasting
    }

    /// Whether the host with interned id `id` is rejected by a group whose rejection lasts for
    /// the rest of the solve: an owned spread over `maxSkew` there, an owned anti-affinity group
    /// or an inverse group counting it. Counts only grow while a solve places pods, so such a
    /// host stays rejected (by [`rejects`](Self::rejects)) for every pod with the same
    /// [`lasting_groups`](Self::lasting_groups). An owned affinity group's rejection (no
    /// matching pod there yet) does not last.
    pub(crate) fn rejects_for_good(&self, id: Option<u32>) -> bool {
        self.rejected(id, true)
    }

    /// Whether the pod certainly cannot go to the host with interned id `id` (`None`: a host the
    /// groups do not know, which counts 0).
    pub(crate) fn rejects(&self, id: Option<u32>) -> bool {
        self.rejected(id, false)
    }

    /// [`rejects`](Self::rejects), or with `for_good` only the rejections that last (an owned
    /// affinity group's never does).
    fn rejected(&self, id: Option<u32>, for_good: bool) -> bool {
        let count = |g: &Group| id.and_then(|i| g.count(i)).unwrap_or(0);
        self.owned.iter().any(|&(g, selects)| {
            let c = count(g);
            match g.kind {
                TopologyType::Spread => i64::from(c) + i64::from(selects) > i64::from(g.max_skew),
                TopologyType::PodAntiAffinity => c > 0,
                TopologyType::PodAffinity => !for_good && c == 0 && !selects,
            }
        }) || self.inverse.iter().any(|g| count(g) > 0)
    }
}
