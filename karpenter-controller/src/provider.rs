//! What a cloud provider brings to the controller: its [`CloudProvider`] (every launch,
//! termination and instance-type question the operator asks, and the well-known labels it
//! adds) and, optionally, loops of its own (node-class status, an interruption source, garbage
//! collection, periodic refreshes) that run beside the operator.

use std::sync::Arc;

use karpenter_core::cloud::CloudProvider;
use kube::Client;
use tokio::sync::{mpsc, watch};

use crate::cluster::{Caches, Change};
use crate::leader::Leadership;

/// The handles a provider's own loops get from [`crate::run`].
///
/// A loop that writes to the cluster or the cloud does so only while [`leadership`] says so,
/// and returns once [`shutdown`] turns `true`.
///
/// [`leadership`]: ProviderContext::leadership
/// [`shutdown`]: ProviderContext::shutdown
#[derive(Clone)]
#[non_exhaustive]
pub struct ProviderContext {
    /// The API client (the controller's, rate-limited).
    pub client: Client,
    /// The watch caches (Nodes, NodeClaims, NodePools, ...).
    pub caches: Caches,
    /// Sends changes to the operator on the watches' channel; a provider's interruption
    /// consumer sends [`Change::Interruption`] here.
    pub changes: mpsc::Sender<Change>,
    /// `true` while this replica holds the leader Lease (always `true` without leader
    /// election); changes are announced here.
    pub leading: watch::Receiver<bool>,
    /// Whether this replica may act right now: check it immediately before every write and
    /// cloud call (it turns false at the renew deadline even when the election is slow to
    /// say so).
    pub leadership: Leadership,
    /// Turns `true` when the controller stops.
    pub shutdown: watch::Receiver<bool>,
    /// The metrics registry (a provider's loops count what they do here).
    pub metrics: Arc<crate::metrics::Metrics>,
}

/// A cloud provider as the controller runs it.
///
/// Most providers need only [`Provider::cloud_provider`]: wrap a [`CloudProvider`] in a
/// [`PlainProvider`]. A provider with loops of its own (the AWS provider's node-class status,
/// SQS interruption queue, housekeeping and price refreshes) starts them in
/// [`Provider::start`].
pub trait Provider: Send + 'static {
    /// The CloudProvider the operator's cloud calls go to.
    fn cloud_provider(&self) -> Arc<dyn CloudProvider>;

    /// Starts the provider's own loops, once, after the watches started. Default: none.
    fn start(self: Box<Self>, ctx: ProviderContext) {
        let _ = ctx;
    }
}

/// A [`Provider`] that is only a [`CloudProvider`]: no loops of its own.
///
/// ```
/// use std::sync::Arc;
/// use karpenter_controller::{PlainProvider, Provider};
///
/// let provider = PlainProvider::new(Arc::new(karpenter_fake::FakeCloudProvider::new()));
/// assert_eq!(provider.cloud_provider().name(), "fake");
/// ```
#[derive(Clone)]
pub struct PlainProvider {
    cloud: Arc<dyn CloudProvider>,
}

impl PlainProvider {
    /// The controller's provider for `cloud`.
    pub fn new(cloud: Arc<dyn CloudProvider>) -> Self {
        PlainProvider { cloud }
    }
}

impl Provider for PlainProvider {
    fn cloud_provider(&self) -> Arc<dyn CloudProvider> {
        self.cloud.clone()
    }
}

/// A provider chosen at run time (for instance by a `--cloud-provider` flag).
impl Provider for Box<dyn Provider> {
    fn cloud_provider(&self) -> Arc<dyn CloudProvider> {
        self.as_ref().cloud_provider()
    }

    fn start(self: Box<Self>, ctx: ProviderContext) {
        <dyn Provider as Provider>::start(*self, ctx)
    }
}
