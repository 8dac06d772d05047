//! Retries of API requests the server did not carry out, with exponential back-off: a tower
//! retry policy on the kube client's service stack, in place of kube's default one.
//!
//! What is retried (at most [`MAX_RETRIES`] times, each after [`backoff`], or the server's
//! `Retry-After` when it gives one, at most [`MAX_RETRY_AFTER`]):
//! - 429 (API priority and fairness turned the request away) and 503: the request was not
//!   carried out, so any request is retried;
//! - 500, 502 and 504: the request may have been carried out, so only requests that can be
//!   repeated without a second effect are retried (GET, HEAD, PUT, PATCH, DELETE; a create
//!   could be made twice);
//! - never an eviction's 429: that is a PodDisruptionBudget's answer, which the drain backs
//!   off from itself.
//!
//! The operator shell bounds each call as a whole (`operate::bounded`), retries included.

use std::time::Duration;

use http::{Method, Request, Response, StatusCode};
use kube::client::Body;
use tower::BoxError;
use tower::retry::Policy;

/// Retries of one request, at most.
pub const MAX_RETRIES: u32 = 5;
/// The first back-off.
pub const BASE_DELAY: Duration = Duration::from_millis(200);
/// The longest back-off.
pub const MAX_DELAY: Duration = Duration::from_secs(5);
/// The longest `Retry-After` honoured (a longer one is cut to this).
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(10);

/// The back-off before retry number `attempt` (1 for the first): [`BASE_DELAY`] doubled each
/// time, at most [`MAX_DELAY`].
pub fn backoff(attempt: u32) -> Duration {
    BASE_DELAY
        .saturating_mul(
            1u32.checked_shl(attempt.saturating_sub(1))
                .unwrap_or(u32::MAX),
        )
        .min(MAX_DELAY)
}

/// How long to wait before retrying a request (`method` on `path`) answered `status`, with the
/// server's `Retry-After` in seconds if it sent one, as retry number `attempt` (1 for the
/// first); `None` when it is not retried. See the module docs.
pub fn retry_delay(
    method: &Method,
    path: &str,
    status: StatusCode,
    retry_after: Option<u64>,
    attempt: u32,
) -> Option<Duration> {
    if attempt > MAX_RETRIES {
        return None;
    }
    let repeatable = matches!(
        *method,
        Method::GET | Method::HEAD | Method::PUT | Method::PATCH | Method::DELETE
    );
    let retry = match status.as_u16() {
        429 => !path.ends_with("/eviction"),
        503 => true,
        500 | 502 | 504 => repeatable,
        _ => false,
    };
    if !retry {
        return None;
    }
    Some(match retry_after {
        Some(secs) => Duration::from_secs(secs).min(MAX_RETRY_AFTER),
        None => backoff(attempt),
    })
}

/// The tower retry policy of [`retry_delay`], one per request.
#[derive(Clone, Debug, Default)]
pub struct ApiRetry {
    attempts: u32,
}

impl<Res> Policy<Request<Body>, Response<Res>, BoxError> for ApiRetry {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        req: &mut Request<Body>,
        result: &mut Result<Response<Res>, BoxError>,
    ) -> Option<Self::Future> {
        let response = result.as_ref().ok()?;
        let retry_after = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let delay = retry_delay(
            req.method(),
            req.uri().path(),
            response.status(),
            retry_after,
            self.attempts + 1,
        )?;
        self.attempts += 1;
        tracing::debug!(
            method = %req.method(),
            path = req.uri().path(),
            status = response.status().as_u16(),
            attempt = self.attempts,
            ?delay,
            "API request not carried out: retrying"
        );
        Some(tokio::time::sleep(delay))
    }

    fn clone_request(&mut self, req: &Request<Body>) -> Option<Request<Body>> {
        // Only a body held whole can be sent again (a streamed one is not retried).
        let body = req.body().try_clone()?;
        let mut clone = Request::builder()
            .method(req.method().clone())
            .uri(req.uri().clone())
            .version(req.version())
            .body(body)
            .ok()?;
        *clone.headers_mut() = req.headers().clone();
        *clone.extensions_mut() = req.extensions().clone();
        Some(clone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_cap() {
        let delays: Vec<u64> = (1..=7).map(|a| backoff(a).as_millis() as u64).collect();
        assert_eq!(delays, [200, 400, 800, 1600, 3200, 5000, 5000]);
        assert_eq!(backoff(u32::MAX), MAX_DELAY);
    }

    #[test]
    fn what_is_retried() {
        let nodes = "/api/v1/nodes/n1";
        let eviction = "/api/v1/namespaces/default/pods/p/eviction";
        let claims = "/apis/karpenter.sh/v1/nodeclaims";
        let too_many = StatusCode::TOO_MANY_REQUESTS;
        // Not carried out: any request, but an eviction's 429 (a PDB's answer).
        assert_eq!(
            retry_delay(&Method::PATCH, nodes, too_many, None, 1),
            Some(BASE_DELAY)
        );
        assert_eq!(
            retry_delay(&Method::POST, claims, too_many, None, 2),
            Some(Duration::from_millis(400))
        );
        assert_eq!(
            retry_delay(&Method::POST, eviction, too_many, None, 1),
            None
        );
        assert!(
            retry_delay(
                &Method::POST,
                claims,
                StatusCode::SERVICE_UNAVAILABLE,
                None,
                1
            )
            .is_some()
        );
        // Maybe carried out: only what can be repeated.
        for status in [
            StatusCode::INTERNAL_SERVER_ERROR,
            StatusCode::BAD_GATEWAY,
            StatusCode::GATEWAY_TIMEOUT,
        ] {
            assert!(retry_delay(&Method::GET, nodes, status, None, 1).is_some());
            assert!(retry_delay(&Method::PATCH, nodes, status, None, 1).is_some());
            assert!(retry_delay(&Method::DELETE, nodes, status, None, 1).is_some());
            assert_eq!(retry_delay(&Method::POST, claims, status, None, 1), None);
        }
        // Answers that a retry would not change.
        for status in [
            StatusCode::OK,
            StatusCode::NOT_FOUND,
            StatusCode::CONFLICT,
            StatusCode::FORBIDDEN,
            StatusCode::UNPROCESSABLE_ENTITY,
        ] {
            assert_eq!(retry_delay(&Method::GET, nodes, status, None, 1), None);
        }
        // The server's Retry-After, within reason; and a bounded number of retries.
        assert_eq!(
            retry_delay(&Method::GET, nodes, too_many, Some(3), 1),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            retry_delay(&Method::GET, nodes, too_many, Some(3600), 1),
            Some(MAX_RETRY_AFTER)
        );
        assert!(retry_delay(&Method::GET, nodes, too_many, None, MAX_RETRIES).is_some());
        assert_eq!(
            retry_delay(&Method::GET, nodes, too_many, None, MAX_RETRIES + 1),
            None
        );
    }

    /// Through the layer, against a stub server that answers 429 twice and then 200, and one
    /// that always answers 500 to a create: the first request succeeds on its third try, the
    /// create is sent once.
    #[test]
    fn the_layer_retries_against_a_stub() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicU32, Ordering};
        use tower::{Layer, ServiceExt};
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(async {
            let calls = Arc::new(AtomicU32::new(0));
            let stub = {
                let calls = calls.clone();
                tower::service_fn(move |req: Request<Body>| {
                    let n = calls.fetch_add(1, Ordering::SeqCst);
                    let status = if req.method() == Method::POST {
                        500
                    } else if n < 2 {
                        429
                    } else {
                        200
                    };
                    async move {
                        Ok::<_, BoxError>(Response::builder().status(status).body(()).unwrap())
                    }
                })
            };
            let layer = tower::retry::RetryLayer::new(ApiRetry::default());
            let get = Request::get("/api/v1/nodes/n1")
                .body(Body::from(Vec::new()))
                .unwrap();
            let answer = layer.layer(stub.clone()).oneshot(get).await.unwrap();
            assert_eq!(answer.status(), StatusCode::OK);
            assert_eq!(calls.load(Ordering::SeqCst), 3);
            calls.store(0, Ordering::SeqCst);
            let create = Request::post("/apis/karpenter.sh/v1/nodeclaims")
                .body(Body::from(b"{}".to_vec()))
                .unwrap();
            let answer = layer.layer(stub).oneshot(create).await.unwrap();
            assert_eq!(answer.status(), StatusCode::INTERNAL_SERVER_ERROR);
            assert_eq!(calls.load(Ordering::SeqCst), 1);
        });
    }
}
