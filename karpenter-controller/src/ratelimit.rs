//! A client-side rate limiter on Kubernetes API calls: client-go's token bucket
//! (`KUBE_CLIENT_QPS` tokens a second, at most `KUBE_CLIENT_BURST` saved up), as a tower layer of
//! the kube client's service stack. Every request (a list, a watch, a write) takes one token;
//! when none is left, the request waits until one is.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tower::{Layer, Service};

/// A token bucket: `qps` tokens a second, holding at most `burst`, full at the start.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket refilled at `qps` tokens a second, holding at most `burst` (both at least
    /// 1; the settings validate them).
    pub fn new(qps: u32, burst: u32, now: Instant) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps: f64::from(qps.max(1)),
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// Takes a token at `now`: `None` when one was available, else how long to wait before a
    /// token is (the caller asks again then; a request that waits reserves nothing, as
    /// client-go's `Wait`, so waiting callers are served in the order they come back).
    pub fn take(&mut self, now: Instant) -> Option<Duration> {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = self.last.max(now);
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            None
        } else {
            Some(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
        }
    }
}

/// The tower layer that rate-limits a service with one shared [`TokenBucket`].
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    bucket: Arc<Mutex<TokenBucket>>,
}

impl RateLimitLayer {
    /// `qps` requests a second, bursts of at most `burst`.
    pub fn new(qps: u32, burst: u32) -> RateLimitLayer {
        RateLimitLayer {
            bucket: Arc::new(Mutex::new(TokenBucket::new(qps, burst, Instant::now()))),
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> RateLimited<S> {
        RateLimited {
            inner,
            bucket: self.bucket.clone(),
            sleep: None,
            token: false,
        }
    }
}

/// A service whose requests wait for a token of the bucket (see [`RateLimitLayer`]).
pub struct RateLimited<S> {
    inner: S,
    bucket: Arc<Mutex<TokenBucket>>,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    /// A token was taken for the next call.
    token: bool,
}

impl<S, R> Service<R> for RateLimited<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        while !self.token {
            if let Some(sleep) = self.sleep.as_mut() {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.sleep = None;
            }
            let wait = match self.bucket.lock() {
                Ok(mut b) => b.take(Instant::now()),
                // A poisoned lock (a panic elsewhere) does not stop the client.
                Err(_) => None,
            };
            match wait {
                None => self.token = true,
                Some(d) => self.sleep = Some(Box::pin(tokio::time::sleep(d))),
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.token = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bucket_allows_a_burst_then_the_rate() {
        let start = Instant::now();
        let mut b = TokenBucket::new(10, 3, start);
        for _ in 0..3 {
            assert_eq!(b.take(start), None, "the burst is available at once");
        }
        let wait = b.take(start).expect("the burst is spent");
        assert!(
            (wait.as_secs_f64() - 0.1).abs() < 1e-9,
            "one token every 100 ms: {wait:?}"
        );
        assert_eq!(b.take(start + Duration::from_millis(100)), None);
        assert!(b.take(start + Duration::from_millis(100)).is_some());
        // A long pause refills to the burst, not beyond.
        let later = start + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(b.take(later), None);
        }
        assert!(b.take(later).is_some());
    }

    /// Through the layer, 20 requests a second with a burst of 2: of three requests sent at
    /// once, the third waits about 50 ms.
    #[test]
    fn requests_through_the_layer_wait_for_tokens() {
        use tower::ServiceExt;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        runtime.block_on(async {
            let layer = RateLimitLayer::new(20, 2);
            let service =
                tower::service_fn(|_: ()| async { Ok::<_, std::convert::Infallible>(()) });
            let mut limited = layer.layer(service);
            let start = Instant::now();
            for _ in 0..2 {
                limited.ready().await.unwrap().call(()).await.unwrap();
            }
            assert!(start.elapsed() < Duration::from_millis(40), "the burst");
            limited.ready().await.unwrap().call(()).await.unwrap();
            let waited = start.elapsed();
            assert!(waited >= Duration::from_millis(45), "{waited:?}");
        });
    }
}
