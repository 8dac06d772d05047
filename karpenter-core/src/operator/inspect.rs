//! What the operator exposes about its state, read-only: its configuration and view, the
//! work waiting in each loop, and when it next wants to run.

use std::collections::BTreeMap;

use super::*;

impl Operator {
    /// The configuration.
    pub fn config(&self) -> &OperatorConfig {
        &self.config
    }

    /// The operator's view of the cluster.
    pub fn view(&self) -> &ClusterView {
        &self.view
    }

    /// Whether [`Input::Synced`] was received (the loops act only after it).
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    /// The disruption commands in the queue (started, waiting for replacements or deleting).
    pub fn queued_commands(&self) -> Vec<crate::lifecycle::queue::QueuedCommand> {
        self.queue.commands().cloned().collect()
    }

    /// Offerings currently held unavailable (insufficient capacity, spot interruptions), with
    /// when each becomes available again.
    pub fn unavailable_offerings(&self) -> &BTreeMap<UnavailableOffering, Timestamp> {
        &self.unavailable
    }

    /// How many nodes the last disruption pass of each reason found eligible (candidates that
    /// pass the method's own filter, before budgets), by upstream's `reason` label of
    /// `karpenter_voluntary_disruption_eligible_nodes`: `empty`, `drifted`, `underutilized`.
    /// A reason whose method has not run yet is absent.
    pub fn eligible_nodes(&self) -> &BTreeMap<&'static str, usize> {
        &self.eligible_nodes
    }

    /// The disruption budgets of every NodePool for each reason (`Empty`, `Drifted`,
    /// `Underutilized`, upstream's `reason` label of `karpenter_nodepools_allowed_disruptions`),
    /// by `(nodepool, reason)`, as the last disruption pass evaluated them. Empty until a pass
    /// ran.
    pub fn disruption_budgets(
        &self,
    ) -> &BTreeMap<(String, &'static str), crate::disruption::budgets::PoolBudget> {
        &self.budgets
    }

    /// The pods seen `Pending` that have not become ready yet and are not terminal (upstream's
    /// `karpenter_pods_unstarted_time_seconds` reports these), in key order.
    pub fn unstarted_pods(&self) -> impl Iterator<Item = &crate::model::Pod> + '_ {
        self.unstarted
            .iter()
            .filter_map(|k| self.view.pods().get(k))
            .filter(|p| !p.is_terminal())
    }

    /// The reconcile queues of the per-object loops, with upstream's controller names, as
    /// controller-runtime's `workqueue_depth` and `workqueue_adds_total` report them.
    pub fn work_queues(&self) -> Vec<WorkQueue> {
        [
            (controllers::NODECLAIM_LIFECYCLE, &self.claims),
            (controllers::NODE_TERMINATION, &self.nodes),
            (controllers::NODEPOOL_READINESS, &self.pools),
        ]
        .into_iter()
        .map(|(controller, work)| WorkQueue {
            controller,
            depth: work.depth(self.now),
            adds: work.adds,
        })
        .collect()
    }

    /// The earliest time something is due: deliver [`Input::Tick`] then. `None` when nothing
    /// waits on time (the operator waits for inputs).
    pub fn next_wakeup(&self) -> Option<Timestamp> {
        self.wakeups().into_iter().map(|(_, t)| t).min()
    }

    /// Every pending wake-up with the loop it belongs to (`claims`, `nodes`, `pools`,
    /// `instance-types`, `batch`, `provisioning-retry`, `disruption`, `validation`, `queue`,
    /// `gc`, `evictions`, `offerings`), for diagnostics.
    pub fn wakeups(&self) -> Vec<(&'static str, Timestamp)> {
        if !self.synced {
            return Vec::new();
        }
        let mut times: Vec<(&'static str, Option<Timestamp>)> = vec![
            ("claims", self.claims.next()),
            ("nodes", self.nodes.next()),
            ("pools", self.pools.next()),
            (
                "instance-types",
                self.instance_types_due.values().min().copied(),
            ),
            ("batch", self.batch_due()),
            ("provisioning-retry", self.retry_at),
            // While a command waits out its validation delay, the loop is blocked.
            (
                "disruption",
                self.disruption_due.filter(|_| self.validation.is_none()),
            ),
            ("validation", self.validation.as_ref().map(|v| v.due)),
            ("queue", self.queue_due.values().min().copied()),
            ("gc", self.gc_due),
            ("offerings", self.unavailable.values().min().copied()),
        ];
        times.push((
            "evictions",
            self.evictions
                .values()
                .filter(|e| e.in_flight.is_none())
                .filter_map(|e| e.next_at)
                .min(),
        ));
        times
            .into_iter()
            .filter_map(|(n, t)| t.map(|t| (n, t)))
            .collect()
    }
}
