//! The HTTP endpoints: Prometheus metrics (`/metrics` on the metrics port) and the probes
//! (`/healthz` and `/readyz` on the health-probe port).
//!
//! Liveness is "the process answers"; readiness is "every watch cache has its initial list", as
//! upstream's readiness check waits for its informers.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use tokio::sync::{mpsc, oneshot, watch};

use super::cluster::Caches;
use super::metrics::Metrics;
use super::operate::RefreshRequest;

/// What the handlers read.
#[derive(Clone)]
pub struct Shared {
    /// The metrics.
    pub metrics: Arc<Metrics>,
    /// The watch caches.
    pub caches: Caches,
    /// Asks the operator shell to recompute the cluster gauges from its view (pods live only
    /// there).
    pub refresh: mpsc::Sender<RefreshRequest>,
}

/// How long a scrape waits for the operator shell to recompute the cluster gauges before it
/// serves the last values.
const REFRESH_WAIT: Duration = Duration::from_secs(5);

async fn metrics(
    State(s): State<Shared>,
) -> (StatusCode, [(&'static str, &'static str); 1], String) {
    let (tx, rx) = oneshot::channel();
    if s.refresh.send(tx).await.is_ok() {
        let _ = tokio::time::timeout(REFRESH_WAIT, rx).await;
    }
    s.metrics
        .cluster_state_synced
        .set(if s.caches.synced() { 1.0 } else { 0.0 });
    (
        StatusCode::OK,
        [(
            "content-type",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        s.metrics.encode(),
    )
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(s): State<Shared>) -> (StatusCode, &'static str) {
    if s.caches.synced() {
        (StatusCode::OK, "ok")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "watch caches not synced yet",
        )
    }
}

/// The metrics router.
pub fn metrics_router(shared: Shared) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .with_state(shared)
}

/// The probes router.
pub fn probes_router(shared: Shared) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(shared)
}

/// Serves `router` on `addr` until `shutdown` turns true.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            let _ = shutdown.wait_for(|s| *s).await;
        })
        .await
}

/// Binds `addr`, naming it in the error.
pub async fn bind(addr: SocketAddr, what: &str) -> Result<tokio::net::TcpListener, String> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("binding the {what} server on {addr}: {e}"))
}
