//! What the disruption planner reads of one pod (upstream `pod.IsDisruptable` and
//! `utils/pod/scheduling.go`): its `karpenter.sh/do-not-disrupt` annotation and its
//! classification. The node facts ([`super::facts`]) are computed from these predicates, below
//! the candidates module, which re-exports them (they are public as
//! `disruption::candidates::*`).

use crate::api::Duration;
use crate::labels;
use crate::model::{Pod, Timestamp};
use crate::taints::disrupted_taint;

// ---------------------------------------------------------------------------------------------
// do-not-disrupt on pods (upstream `pod.IsDisruptable`)
// ---------------------------------------------------------------------------------------------

/// The state of a pod's `karpenter.sh/do-not-disrupt` annotation at some time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DoNotDisrupt {
    /// No annotation, or a duration that has elapsed since the pod started.
    Inactive,
    /// The pod must not be disrupted. `until` is when a duration-based annotation expires
    /// (`status.startTime` + duration); `None` for `"true"` or when the start time is unknown.
    Active {
        /// When the protection ends, if it ever does.
        until: Option<Timestamp>,
    },
    /// The value is neither `"true"` nor a positive Go duration; it is treated as absent
    /// (upstream publishes an `InvalidDoNotDisruptAnnotation` warning with this message).
    Invalid(String),
}

impl DoNotDisrupt {
    /// Whether the protection is active.
    pub fn is_active(&self) -> bool {
        matches!(self, DoNotDisrupt::Active { .. })
    }
}

/// Evaluates the pod's `karpenter.sh/do-not-disrupt` annotation at `now` (upstream's
/// `IsDoNotDisruptActive`): absent → inactive; `"true"` → active; otherwise a Go duration that
/// must be positive, active while `now − status.startTime < duration` (and, failing safe, while
/// the start time is unknown); anything else is [`DoNotDisrupt::Invalid`] and counts as absent.
///
/// This reads only the annotation: terminal and terminating pods never block disruption, see
/// [`is_disruptable`].
pub fn is_do_not_disrupt_active(pod: &Pod, now: Timestamp) -> DoNotDisrupt {
    let Some(value) = pod.annotations.get(labels::DO_NOT_DISRUPT_ANNOTATION) else {
        return DoNotDisrupt::Inactive;
    };
    if value == "true" {
        return DoNotDisrupt::Active { until: None };
    }
    let duration = match Duration::parse(value) {
        Ok(d) if d.as_nanos() > 0 => d,
        Ok(_) => return DoNotDisrupt::Invalid(format!("duration {value:?} must be positive")),
        Err(e) => {
            return DoNotDisrupt::Invalid(format!("failed to parse {value:?} as a duration: {e}"));
        }
    };
    let Some(start) = pod.start_time else {
        return DoNotDisrupt::Active { until: None };
    };
    let window = duration.as_signed_duration();
    if now.duration_since(start) < window {
        DoNotDisrupt::Active {
            until: start.checked_add(window).ok(),
        }
    } else {
        DoNotDisrupt::Inactive
    }
}

// ---------------------------------------------------------------------------------------------
// Pod classification (upstream `utils/pod/scheduling.go`)
// ---------------------------------------------------------------------------------------------

/// Whether the pod is running or about to: neither terminal (`Succeeded`/`Failed`) nor
/// terminating.
pub fn is_active(pod: &Pod) -> bool {
    !pod.is_terminal() && !pod.is_terminating()
}

/// Whether the pod's controlling owner is a StatefulSet (`apps/v1`).
pub fn is_owned_by_statefulset(pod: &Pod) -> bool {
    pod.is_owned_by("apps/v1", "StatefulSet")
}

/// Whether the pod must be rescheduled elsewhere when its node goes away (upstream's
/// `IsReschedulable`): active, or a terminating StatefulSet pod (its replacement can only start
/// once it is gone); and neither a DaemonSet pod nor a mirror pod.
pub fn is_reschedulable(pod: &Pod) -> bool {
    (is_active(pod) || (is_owned_by_statefulset(pod) && pod.is_terminating()))
        && !pod.is_daemonset_pod()
        && !pod.is_mirror_pod()
}

/// Whether the pod tolerates `karpenter.sh/disrupted:NoSchedule`. Such pods are never evicted
/// by a drain and are ignored by PDB checks.
pub fn tolerates_disrupted_taint(pod: &Pod) -> bool {
    let taint = disrupted_taint();
    pod.tolerations.iter().any(|t| t.tolerates(&taint))
}

/// Whether the pod may be disrupted at `now` (upstream's `IsDisruptable`): not active, or no
/// active `karpenter.sh/do-not-disrupt` annotation.
pub fn is_disruptable(pod: &Pod, now: Timestamp) -> bool {
    !is_active(pod) || !is_do_not_disrupt_active(pod, now).is_active()
}

/// Whether draining would call the eviction API for the pod (upstream's `IsEvictable`): active,
/// not tolerating the disrupted taint, not a mirror pod, and no active do-not-disrupt
/// annotation. PDBs only matter for such pods.
pub fn is_evictable(pod: &Pod, now: Timestamp) -> bool {
    is_active(pod)
        && !tolerates_disrupted_taint(pod)
        && !pod.is_mirror_pod()
        && !is_do_not_disrupt_active(pod, now).is_active()
}
