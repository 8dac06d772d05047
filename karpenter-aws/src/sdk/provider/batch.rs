//! Batching of calls by instance id (DescribeInstances, TerminateInstances), as upstream's
//! batchers: the first request opens a window; identical requests (same key) arriving before
//! it closes join it; it closes after `idle` without a new request, `max` after it opened, or
//! at `max_items` ids; then one call carries every id and each caller gets its own id's
//! result.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::lock;

/// The answer for one id: a value, or an API error as (code, message).
pub(super) type IdResult<T> = Result<T, (String, String)>;

/// What a batch executes: all ids of the window (distinct, in arrival order) → the result per
/// id. An id missing from the map gets [`MISSING`].
pub(super) type Execute<T> = Arc<
    dyn Fn(Vec<String>) -> Pin<Box<dyn Future<Output = BTreeMap<String, IdResult<T>>> + Send>>
        + Send
        + Sync,
>;

/// An [`Execute`] from an async function of the ids.
pub(super) fn execute<T, F, Fut>(f: F) -> Execute<T>
where
    F: Fn(Vec<String>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = BTreeMap<String, IdResult<T>>> + Send + 'static,
{
    Arc::new(move |ids| {
        Box::pin(f(ids)) as Pin<Box<dyn Future<Output = BTreeMap<String, IdResult<T>>> + Send>>
    })
}

/// The error a caller gets when the batch's execution returned nothing for its id.
pub(super) const MISSING: &str = "the batched call returned no result for this id";

struct Bucket<T> {
    generation: u64,
    waiters: Vec<(String, oneshot::Sender<IdResult<T>>)>,
    last_join: Instant,
}

/// A batcher of calls by id; see the module docs.
pub(super) struct IdBatcher<T> {
    buckets: Arc<Mutex<HashMap<String, Bucket<T>>>>,
    generation: Mutex<u64>,
    idle: Duration,
    max: Duration,
    max_items: usize,
}

impl<T: Clone + Send + 'static> IdBatcher<T> {
    /// A batcher whose windows close after `idle` without a new request, `max` after they
    /// opened, or at `max_items` ids.
    pub(super) fn new(idle: Duration, max: Duration, max_items: usize) -> Self {
        IdBatcher {
            buckets: Arc::new(Mutex::new(HashMap::new())),
            generation: Mutex::new(0),
            idle,
            max,
            max_items: max_items.max(1),
        }
    }

    /// Submits `id` under `key`; `execute` runs the window's call (the one of the request
    /// that opened the window).
    pub(super) async fn submit(&self, key: &str, id: &str, execute: Execute<T>) -> IdResult<T> {
        let (tx, rx) = oneshot::channel();
        let opened = {
            let mut buckets = lock(&self.buckets);
            match buckets.get_mut(key) {
                Some(b) => {
                    b.waiters.push((id.to_string(), tx));
                    b.last_join = Instant::now();
                    if b.waiters.len() >= self.max_items {
                        // Full: close it now, in this caller's task.
                        let full = buckets.remove(key);
                        drop(buckets);
                        if let Some(full) = full {
                            tokio::spawn(run(full.waiters, Arc::clone(&execute)));
                        }
                    }
                    None
                }
                None => {
                    let generation = {
                        let mut g = lock(&self.generation);
                        *g += 1;
                        *g
                    };
                    buckets.insert(
                        key.to_string(),
                        Bucket {
                            generation,
                            waiters: vec![(id.to_string(), tx)],
                            last_join: Instant::now(),
                        },
                    );
                    Some(generation)
                }
            }
        };
        if let Some(generation) = opened {
            let buckets = Arc::clone(&self.buckets);
            let key = key.to_string();
            let (idle, max) = (self.idle, self.max);
            // The window and the call run in their own task, so a caller that gives up does
            // not strand the others.
            tokio::spawn(async move {
                let started = Instant::now();
                loop {
                    tokio::time::sleep(idle).await;
                    let done = lock(&buckets).get(&key).is_none_or(|b| {
                        b.generation != generation || b.last_join.elapsed() >= idle
                    });
                    if done || started.elapsed() >= max {
                        break;
                    }
                }
                let bucket = {
                    let mut b = lock(&buckets);
                    match b.get(&key) {
                        Some(x) if x.generation == generation => b.remove(&key),
                        _ => None,
                    }
                };
                if let Some(bucket) = bucket {
                    run(bucket.waiters, execute).await;
                }
            });
        }
        rx.await
            .unwrap_or_else(|_| Err((String::new(), "the batch was dropped".to_string())))
    }
}

async fn run<T: Clone>(waiters: Vec<(String, oneshot::Sender<IdResult<T>>)>, execute: Execute<T>) {
    let mut ids: Vec<String> = Vec::with_capacity(waiters.len());
    for (id, _) in &waiters {
        if !ids.contains(id) {
            ids.push(id.clone());
        }
    }
    let results = execute(ids).await;
    for (id, tx) in waiters {
        let r = results
            .get(&id)
            .cloned()
            .unwrap_or_else(|| Err((String::new(), MISSING.to_string())));
        let _ = tx.send(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn echo(calls: Arc<AtomicUsize>, sizes: Arc<Mutex<Vec<usize>>>) -> Execute<String> {
        execute(move |ids: Vec<String>| {
            calls.fetch_add(1, Ordering::SeqCst);
            lock(&sizes).push(ids.len());
            async move {
                ids.into_iter()
                    .filter(|id| id != "missing")
                    .map(|id| {
                        let v = if id == "bad" {
                            Err(("Boom".to_string(), id.clone()))
                        } else {
                            Ok(format!("v-{id}"))
                        };
                        (id, v)
                    })
                    .collect()
            }
        })
    }

    #[tokio::test]
    async fn concurrent_ids_share_one_call_and_get_their_own_result() {
        let b = IdBatcher::new(Duration::from_millis(30), Duration::from_secs(1), 500);
        let calls = Arc::new(AtomicUsize::new(0));
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let exec = echo(Arc::clone(&calls), Arc::clone(&sizes));
        let ids = ["a", "b", "a", "bad", "missing"];
        let futs = ids.iter().map(|id| b.submit("k", id, Arc::clone(&exec)));
        let got = futures::future::join_all(futs).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // Duplicates are sent once.
        assert_eq!(*lock(&sizes), [4]);
        assert_eq!(got[0], Ok("v-a".to_string()));
        assert_eq!(got[1], Ok("v-b".to_string()));
        assert_eq!(got[2], Ok("v-a".to_string()));
        assert_eq!(got[3], Err(("Boom".to_string(), "bad".to_string())));
        assert_eq!(got[4], Err((String::new(), MISSING.to_string())));
    }

    #[tokio::test]
    async fn different_keys_and_full_windows_make_separate_calls() {
        let b = IdBatcher::new(Duration::from_millis(30), Duration::from_secs(1), 2);
        let calls = Arc::new(AtomicUsize::new(0));
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let exec = echo(Arc::clone(&calls), Arc::clone(&sizes));
        let futs = [("k", "a"), ("k", "b"), ("k", "c"), ("j", "d")]
            .into_iter()
            .map(|(k, id)| b.submit(k, id, Arc::clone(&exec)));
        let got = futures::future::join_all(futs).await;
        assert!(got.iter().all(Result::is_ok), "{got:?}");
        // "k" filled at two ids ("a", "b"), "c" opened a new window; "j" has its own.
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        let mut s = lock(&sizes).clone();
        s.sort();
        assert_eq!(s, [1, 1, 2]);
    }

    #[tokio::test]
    async fn sequential_requests_after_the_window_make_their_own_calls() {
        let b = IdBatcher::new(Duration::from_millis(5), Duration::from_secs(1), 500);
        let calls = Arc::new(AtomicUsize::new(0));
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let exec = echo(Arc::clone(&calls), sizes);
        assert!(b.submit("k", "a", Arc::clone(&exec)).await.is_ok());
        assert!(b.submit("k", "b", Arc::clone(&exec)).await.is_ok());
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}
