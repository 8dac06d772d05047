//! The Karpenter controller as a library: the kube-rs shell around karpenter-core's operator
//! loops, generic over the cloud provider.
//!
//! A provider is a [`Provider`]: a [`CloudProvider`](karpenter_core::cloud::CloudProvider)
//! plus, optionally, loops of its own. [`run`] finds the cluster as kubectl does, starts the
//! watches, the metrics and probe servers and the leader election; while this replica leads it
//! runs the operator and carries out its actions; it stops on SIGTERM or SIGINT (calls in
//! flight finish, then the Lease is released and the servers stop).
//!
//! ```no_run
//! use std::sync::Arc;
//! use karpenter_controller::{ControllerArgs, PlainProvider};
//!
//! // `karpenter controller`'s flags and environment variables (upstream's names).
//! let args = ControllerArgs::parse_env();
//! karpenter_controller::run_blocking(args, |_client| async {
//!     // Any CloudProvider: here the in-memory fake.
//!     Ok(PlainProvider::new(Arc::new(karpenter_fake::FakeCloudProvider::new())))
//! })
//! .expect("the controller ran");
//! ```
//!
//! - [`settings`]: flags and environment (upstream's names and defaults);
//! - [`cluster`]: reflectors for every kind the operator reads, and their changes;
//! - [`provider`]: the [`Provider`] trait and [`PlainProvider`];
//! - [`kwok`]: a provider whose instances are kwok Nodes, with any catalog (`karpenter
//!   controller --cloud-provider fake`);
//! - [`kwok_upstream`]: upstream's kwok provider (its catalog, `KWOKNodeClass` and Node shape),
//!   which upstream's end-to-end suites drive (`karpenter controller --cloud-provider kwok`);
//! - `aws` (feature `aws`): the AWS provider's controller parts;
//! - [`leader`]: leader election on a `coordination.k8s.io` Lease;
//! - [`logging`]: log lines as upstream's controller writes them (zap JSON, its keys);
//! - [`metrics`]: Prometheus metrics with upstream's names and labels;
//! - [`operate`]: the operator shell (watch changes in, actions out as API and cloud calls);
//! - [`ratelimit`]: the client-side rate limiter of API calls (`KUBE_CLIENT_QPS` / `_BURST`);
//! - [`server`]: `/metrics`, `/healthz`, `/readyz`;
//! - [`crds`]: the CustomResourceDefinitions the controller reads and writes.

#[cfg(feature = "aws")]
pub mod aws;
pub mod cluster;
pub mod crds;
pub mod kwok;
pub mod kwok_upstream;
pub mod leader;
pub mod logging;
pub mod metrics;
pub mod operate;
pub mod provider;
pub mod ratelimit;
pub mod retry;
pub mod server;
pub mod settings;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::coordination::v1::Lease;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use tokio::sync::{mpsc, watch};

pub use provider::{PlainProvider, Provider, ProviderContext};
pub use settings::ControllerArgs;

/// Why the controller stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// A setting is invalid.
    #[error("{0}")]
    Settings(String),
    /// The cluster could not be found or reached.
    #[error("kubernetes client: {0}")]
    Client(String),
    /// The chosen cloud provider cannot run.
    #[error("{0}")]
    CloudProvider(String),
    /// A server could not start.
    #[error("{0}")]
    Server(String),
    /// Leadership was lost.
    #[error(transparent)]
    Leader(#[from] leader::LeaderError),
}

impl ControllerError {
    /// The process exit status: 2 for bad settings, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            ControllerError::Settings(_)
            | ControllerError::CloudProvider(_)
            | ControllerError::Leader(leader::LeaderError::Unusable { .. }) => 2,
            _ => 1,
        }
    }
}

/// The read timeout of the controller's API connections (kube's recommendation for clients with
/// watches).
pub const READ_TIMEOUT: Duration = Duration::from_secs(295);

/// Installs the JSON log subscriber at `level` (once per process; later calls are ignored):
/// upstream's line format ([`logging`]) on standard output.
pub fn init_logging(level: settings::LogLevel) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::new(format!(
        "{},hyper=warn,tower=warn,rustls=warn",
        level.directive()
    ));
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(logging::ZapJsonLayer::new(|| {
            Box::new(std::io::stdout()) as Box<dyn std::io::Write>
        }))
        .try_init();
}

/// A kube client found as kubectl finds its cluster: `--kubeconfig`, else KUBECONFIG, else
/// `~/.kube/config`, else the in-cluster service account.
pub async fn client(kubeconfig: Option<&str>) -> Result<Client, ControllerError> {
    let config = client_config(kubeconfig).await?;
    Client::try_from(config).map_err(|e| ControllerError::Client(e.to_string()))
}

/// [`client`] whose API calls are rate-limited to `qps` a second with bursts of `burst`
/// (client-go's token bucket, [`ratelimit`]).
pub async fn rate_limited_client(
    kubeconfig: Option<&str>,
    qps: u32,
    burst: u32,
) -> Result<Client, ControllerError> {
    let mut config = client_config(kubeconfig).await?;
    // kube's own retry (429, 503 and 504, fifteen times) would also retry an eviction's 429,
    // a PodDisruptionBudget's answer that the drain must see: the shell's policy replaces it.
    config.default_retry = false;
    let builder = kube::client::ClientBuilder::try_from(config)
        .map_err(|e| ControllerError::Client(e.to_string()))?;
    Ok(builder
        // A retry sends a request again: the stack below it is made cloneable by a buffer.
        .with_layer(&tower::buffer::BufferLayer::new(1024))
        .with_layer(&tower::retry::RetryLayer::new(retry::ApiRetry::default()))
        .with_layer(&ratelimit::RateLimitLayer::new(qps, burst))
        .build())
}

async fn client_config(kubeconfig: Option<&str>) -> Result<Config, ControllerError> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .map_err(|e| ControllerError::Client(format!("--kubeconfig {path}: {e}")))?;
            Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| ControllerError::Client(format!("--kubeconfig {path}: {e}")))?
        }
        None => Config::infer().await.map_err(|e| {
            ControllerError::Client(format!(
                "no cluster found (KUBECONFIG, ~/.kube/config, in-cluster): {e}"
            ))
        })?,
    };
    let mut config = config;
    // A connection that stops answering fails instead of hanging: the watches' requests end
    // within 290 s on the server's side (and carry bookmarks meanwhile), so a read idle for
    // longer is a dead connection. Writes are also bounded per call by the operator shell.
    config.read_timeout.get_or_insert(READ_TIMEOUT);
    Ok(config)
}

/// This replica's identity in the Lease: POD_NAME (or the host name) and a per-process suffix.
pub fn identity(configured: Option<&str>) -> String {
    if let Some(id) = configured.filter(|s| !s.is_empty()) {
        return id.to_string();
    }
    let host = std::env::var("POD_NAME")
        .ok()
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "karpenter".to_string());
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{host}_{:08x}", nanos ^ std::process::id().rotate_left(16))
}

/// [`run`] on a new tokio runtime, until SIGTERM/SIGINT or a fatal error.
pub fn run_blocking<P, F, Fut>(
    args: ControllerArgs,
    make_provider: F,
) -> Result<(), ControllerError>
where
    P: Provider,
    F: FnOnce(Client) -> Fut,
    Fut: Future<Output = Result<P, ControllerError>>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| ControllerError::Server(format!("starting the async runtime: {e}")))?;
    runtime.block_on(run(args, make_provider))
}

/// Resolves when SIGTERM or SIGINT arrives.
async fn signalled() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = term => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// The controller (see the crate docs): `make_provider` builds the provider with the
/// controller's API client, once the settings are checked.
pub async fn run<P, F, Fut>(args: ControllerArgs, make_provider: F) -> Result<(), ControllerError>
where
    P: Provider,
    F: FnOnce(Client) -> Fut,
    Fut: Future<Output = Result<P, ControllerError>>,
{
    init_logging(args.log_level);
    let bind: IpAddr = args.bind_address.parse().map_err(|e| {
        ControllerError::Settings(format!("--bind-address {}: {e}", args.bind_address))
    })?;
    if args.batch_idle_duration > args.batch_max_duration {
        return Err(ControllerError::Settings(format!(
            "BATCH_IDLE_DURATION ({:?}) must not exceed BATCH_MAX_DURATION ({:?})",
            args.batch_idle_duration, args.batch_max_duration
        )));
    }
    args.feature_gates
        .require_supported(settings::UNSUPPORTED_GATES)
        .map_err(|e| ControllerError::Settings(format!("FEATURE_GATES (--feature-gates): {e}")))?;
    let client = rate_limited_client(
        args.kubeconfig.as_deref(),
        args.kube_client_qps,
        args.kube_client_burst,
    )
    .await?;
    let provider_ext = make_provider(client.clone()).await?;
    let provider = provider_ext.cloud_provider();
    // The well-known labels label the node metrics (upstream's: core's and the provider's).
    let label_policy = provider.label_policy();

    let (shutdown_tx, shutdown) = watch::channel(false);
    let (changes_tx, changes) = mpsc::channel(cluster::CHANGES_CAPACITY);
    let caches = cluster::start(
        &client,
        changes_tx.clone(),
        shutdown.clone(),
        args.feature_gates
            .enabled(karpenter_core::features::Gate::NodeOverlay),
    );
    let metrics = Arc::new(
        metrics::Metrics::new(&label_policy)
            .with_cluster_state_observability(!args.disable_cluster_state_observability),
    );
    let (refresh_tx, refresh_rx) = tokio::sync::mpsc::channel(4);
    let shared = server::Shared {
        metrics: metrics.clone(),
        caches: caches.clone(),
        refresh: refresh_tx,
    };
    let metrics_listener = server::bind(SocketAddr::new(bind, args.metrics_port), "metrics")
        .await
        .map_err(ControllerError::Server)?;
    let probes_listener = server::bind(SocketAddr::new(bind, args.health_probe_port), "probe")
        .await
        .map_err(ControllerError::Server)?;
    let metrics_server = tokio::spawn(server::serve(
        metrics_listener,
        server::metrics_router(shared.clone()),
        shutdown.clone(),
    ));
    let probes_server = tokio::spawn(server::serve(
        probes_listener,
        server::probes_router(shared),
        shutdown.clone(),
    ));

    let (leading_tx, leading) = watch::channel(args.disable_leader_election);
    let leadership = if args.disable_leader_election {
        leader::Leadership::always()
    } else {
        leader::Leadership::elected()
    };
    // The Lease is released only after the operator stopped and its calls in flight finished,
    // so a successor never acts while this replica still writes.
    let (release_tx, release) = watch::channel(false);
    let election = if args.disable_leader_election {
        None
    } else {
        let namespace = args
            .leader_election_namespace
            .clone()
            .or_else(|| std::env::var("SYSTEM_NAMESPACE").ok())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "karpenter".to_string());
        let cfg = leader::Config {
            name: args.leader_election_name.clone(),
            namespace: namespace.clone(),
            identity: identity(args.leader_election_identity.as_deref()),
            lease_duration: args.lease_duration,
            renew_deadline: args.lease_renew_deadline,
            retry_period: args.lease_renew_period,
        };
        cfg.check().map_err(|e| {
            ControllerError::Settings(format!(
                "LEADER_ELECTION_LEASE_DURATION, LEADER_ELECTION_RENEW_DEADLINE, \
                 LEADER_ELECTION_RENEW_PERIOD: {e}"
            ))
        })?;
        tracing::info!(identity = %cfg.identity, lease = %format!("{namespace}/{}", cfg.name), "leader election started");
        // The Lease has a client of its own, outside the rate limiter (as controller-runtime's
        // leader election has its own): a backlog of other calls must not delay a renewal past
        // the lease duration.
        let lease_client = self::client(args.kubeconfig.as_deref()).await?;
        Some(tokio::spawn(leader::run(
            Api::<Lease>::namespaced(lease_client, &namespace),
            cfg,
            leadership.clone(),
            leading_tx,
            release.clone(),
        )))
    };

    Box::new(provider_ext).start(ProviderContext {
        client: client.clone(),
        caches: caches.clone(),
        changes: changes_tx,
        leading: leading.clone(),
        leadership: leadership.clone(),
        shutdown: shutdown.clone(),
        metrics: metrics.clone(),
    });
    let (in_flight, mut in_flight_done) = operate::InFlight::new();
    let operator = tokio::spawn(operate::run(
        operate::Context {
            client: client.clone(),
            provider,
            caches,
            metrics,
            settings: args.clone(),
            leadership,
            in_flight,
            events: Default::default(),
        },
        changes,
        leading.clone(),
        shutdown.clone(),
        refresh_rx,
    ));

    tracing::info!(
        metrics_port = args.metrics_port,
        health_probe_port = args.health_probe_port,
        "karpenter controller started"
    );
    let mut result = Ok(());
    let mut election = election;
    tokio::select! {
        _ = signalled() => tracing::info!("shutting down (signal)"),
        r = async {
            match election.as_mut() {
                Some(e) => e.await,
                None => std::future::pending().await,
            }
        } => {
            election = None;
            if let Ok(Err(e)) = r {
                tracing::error!(error = %e, "leader election ended");
                result = Err(ControllerError::Leader(e));
            }
        }
    }
    // Graceful shutdown, in upstream's order: stop acting (the operator loops return after
    // the call they are making), let the calls in flight (evictions, cloud calls, events)
    // finish, then release the Lease and stop the servers.
    let _ = shutdown_tx.send(true);
    let _ = tokio::time::timeout(operate::SHUTDOWN_GRACE, operator).await;
    let finished = tokio::time::timeout(operate::SHUTDOWN_GRACE, in_flight_done.recv())
        .await
        .is_ok();
    if finished {
        tracing::info!("calls in flight finished");
    } else {
        tracing::warn!(grace = ?operate::SHUTDOWN_GRACE, "calls still in flight after the grace period; stopping anyway");
    }
    let _ = release_tx.send(true);
    if let Some(e) = election {
        // The election releases the Lease on shutdown.
        let _ = tokio::time::timeout(Duration::from_secs(5), e).await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), metrics_server).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), probes_server).await;
    tracing::info!("karpenter controller stopped");
    result
}

/// Feature gates this build knows (upstream's names).
pub const KNOWN_GATES: [karpenter_core::features::Gate; 6] = karpenter_core::features::Gate::ALL;
