//! Local improvement of a cost-aware plan.

use super::{PackingOutcome, Search};

pub(super) fn improve(_search: &Search<'_>, _outcome: &mut PackingOutcome) {}
