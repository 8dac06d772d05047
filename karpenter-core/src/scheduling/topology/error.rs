//! The error of a topology constraint no domain can satisfy.

use crate::requirements::Requirement;
use crate::scheduling::topology::group::TopologyType;
use std::fmt;

/// A topology constraint no domain can satisfy on the candidate node (upstream
/// `Topology.AddRequirements`).
///
/// Displays as upstream: `unsatisfiable topology constraint for <type>, key=<key> (counts =
/// <up to 25 domain: count pairs, sorted>, podDomains = <requirement>, nodeDomains =
/// <requirement>)`. Boxed: it is returned on the scheduler's hot path.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub(crate) struct TopologyError(pub(super) Box<TopologyErrorDetails>);

#[cfg(test)]
impl TopologyError {
    /// The type of the failing group.
    pub(crate) fn kind(&self) -> TopologyType {
        self.0.kind
    }

    /// The failing group's topology key.
    pub(crate) fn key(&self) -> &str {
        &self.0.key
    }
}

#[derive(Debug, Clone)]
pub(super) struct TopologyErrorDetails {
    pub(super) kind: TopologyType,
    pub(super) key: String,
    pub(super) counts: CountsSample,
    /// The pod's own (strict) requirement for the key (`Exists` if it has none).
    pub(super) pod_domains: Requirement,
    /// The candidate's requirement for the key (`Exists` if it has none).
    pub(super) node_domains: Requirement,
}

impl fmt::Display for TopologyErrorDetails {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unsatisfiable topology constraint for {}, key={} (counts = {}, podDomains = {}, nodeDomains = {})",
            self.kind, self.key, self.counts, self.pod_domains, self.node_domains
        )
    }
}

/// The first domains of a group with their counts, for error messages.
#[derive(Debug, Clone)]
pub(super) struct CountsSample {
    pub(super) entries: Vec<(String, u32)>,
    pub(super) others: usize,
}

impl fmt::Display for CountsSample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (domain, count)) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{domain}: {count}")?;
        }
        if self.others > 0 {
            write!(f, " and {} other(s)", self.others)?;
        }
        Ok(())
    }
}

/// How many domains an error message lists (upstream `pretty.Map(domains, 25)`).
pub(super) const ERROR_SAMPLE: usize = 25;
