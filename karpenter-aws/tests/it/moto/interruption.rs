//! The SQS interruption consumer against a moto queue: what is handed on, what is deleted, and
//! that a message is deleted only after its action is durable.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use karpenter_aws::sdk::interruption::{InterruptionHandler, InterruptionQueue, Received};
use karpenter_core::operator::{InterruptionEvent, InterruptionKind};

use super::env::{clients, cluster_name};

/// A handler that records what it was given and answers as told.
#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<InterruptionEvent>>,
    fail: AtomicBool,
}

#[async_trait::async_trait]
impl InterruptionHandler for Recorder {
    async fn act(&self, _m: &Received, events: Vec<InterruptionEvent>) -> Result<(), String> {
        self.events.lock().unwrap().extend(events);
        if self.fail.load(Ordering::SeqCst) {
            Err("the NodeClaim delete failed".into())
        } else {
            Ok(())
        }
    }
}

async fn queue(clients: &karpenter_aws::sdk::AwsClients, name: &str) -> InterruptionQueue {
    clients
        .sqs
        .create_queue()
        .queue_name(name)
        .send()
        .await
        .unwrap();
    InterruptionQueue::new(clients, name).await.unwrap()
}

async fn send(clients: &karpenter_aws::sdk::AwsClients, q: &InterruptionQueue, body: &str) {
    clients
        .sqs
        .send_message()
        .queue_url(q.url())
        .message_body(body)
        .send()
        .await
        .unwrap();
}

fn spot(instance: &str) -> String {
    format!(
        r#"{{"version":"0","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","time":"2026-01-01T00:00:00Z","detail":{{"instance-id":"{instance}","instance-action":"terminate"}}}}"#
    )
}

/// Messages in the queue, visible or not (GetQueueAttributes).
async fn in_queue(clients: &karpenter_aws::sdk::AwsClients, q: &InterruptionQueue) -> usize {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let out = clients
        .sqs
        .get_queue_attributes()
        .queue_url(q.url())
        .attribute_names(A::ApproximateNumberOfMessages)
        .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .unwrap();
    let attrs = out.attributes().unwrap();
    [
        A::ApproximateNumberOfMessages,
        A::ApproximateNumberOfMessagesNotVisible,
    ]
    .iter()
    .map(|a| attrs.get(a).unwrap().parse::<usize>().unwrap())
    .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn messages_become_operator_inputs_and_malformed_ones_are_deleted() {
    let clients = clients(None).await;
    let queue = queue(&clients, &cluster_name("queue")).await;
    let bodies = [
        spot("i-0abc"),
        r#"{"version":"0","source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","time":"2026-01-01T00:00:00Z","detail":{"instance-id":"i-0def","state":"stopping"}}"#.to_string(),
        r#"{"version":"0","source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","time":"2026-01-01T00:00:00Z","detail":{"instance-id":"i-0unknown","state":"stopping"}}"#.to_string(),
        "not json".to_string(),
        r#"{"version":"0","source":"aws.s3","detail-type":"Object Created","time":"2026-01-01T00:00:00Z","detail":{}}"#.to_string(),
    ];
    for b in &bodies {
        send(&clients, &queue, b).await;
    }
    let known: BTreeMap<&str, &str> = [
        ("i-0abc", "aws:///us-east-1a/i-0abc"),
        ("i-0def", "aws:///us-east-1b/i-0def"),
    ]
    .into();
    let handler = Recorder::default();
    let mut malformed = Vec::new();
    let (mut received, mut no_op) = (0, 0);
    for _ in 0..5 {
        let stats = queue
            .poll(
                Duration::from_secs(1),
                |id| known.get(id).map(|p| p.to_string()),
                &handler,
            )
            .await
            .unwrap();
        received += stats.received;
        no_op += stats.no_op;
        assert_eq!(stats.deleted, stats.received);
        assert!(stats.kept.is_empty() && stats.delete_errors.is_empty());
        malformed.extend(stats.malformed.into_iter().map(|m| m.error.label()));
        if received == bodies.len() {
            break;
        }
    }
    assert_eq!(received, bodies.len());
    let mut events = handler.events.lock().unwrap().clone();
    events.sort_by(|a, b| a.provider_id.cmp(&b.provider_id));
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].kind, InterruptionKind::SpotInterrupted);
    assert_eq!(events[0].provider_id, "aws:///us-east-1a/i-0abc");
    assert_eq!(events[1].kind, InterruptionKind::InstanceStopped);
    // The unknown instance's message needed nothing: deleted without an action.
    assert_eq!(no_op, 1);
    malformed.sort();
    assert_eq!(malformed, ["invalid_json", "unrecognized"]);
    // Everything was deleted: the queue is empty.
    assert_eq!(in_queue(&clients, &queue).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn a_message_whose_action_failed_is_kept_and_handled_again() {
    let clients = clients(None).await;
    let queue = queue(&clients, &cluster_name("kept"))
        .await
        .with_visibility_timeout(Duration::from_secs(1));
    send(&clients, &queue, &spot("i-0abc")).await;
    let known = |id: &str| (id == "i-0abc").then(|| format!("aws:///us-east-1a/{id}"));
    let handler = Recorder::default();
    handler.fail.store(true, Ordering::SeqCst);
    let stats = queue
        .poll(Duration::from_secs(1), known, &handler)
        .await
        .unwrap();
    assert_eq!((stats.received, stats.deleted, stats.kept.len()), (1, 0, 1));
    assert_eq!(stats.kept[0].1, "the NodeClaim delete failed");
    assert_eq!(in_queue(&clients, &queue).await, 1);
    // The next delivery (after the visibility timeout) succeeds and deletes it.
    handler.fail.store(false, Ordering::SeqCst);
    let mut deleted = 0;
    for _ in 0..10 {
        deleted += queue
            .poll(Duration::from_secs(2), known, &handler)
            .await
            .unwrap()
            .deleted;
        if deleted == 1 {
            break;
        }
    }
    assert_eq!(deleted, 1);
    assert_eq!(handler.events.lock().unwrap().len(), 2);
    assert_eq!(in_queue(&clients, &queue).await, 0);
}

/// The order of the durable actions and the message deletes, on one clock.
#[derive(Default)]
struct Ledger {
    clock: AtomicU64,
    /// Receipt handle → the tick its NodeClaim delete was accepted.
    accepted: Mutex<BTreeMap<String, u64>>,
    /// Receipt handle → the tick its DeleteMessage was sent.
    deleted: Mutex<BTreeMap<String, u64>>,
    /// NodeClaim deletes accepted, by provider id (the "API server").
    claim_deletes: Mutex<BTreeMap<String, usize>>,
    /// NodeClaims being deleted.
    deleting: Mutex<BTreeSet<String>>,
}

impl Ledger {
    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::SeqCst)
    }
}

/// A replica's handoff: the leader deletes the NodeClaim (once; a claim being deleted is a
/// no-op) and reports it durable; a follower reports nothing durable, as the controller's
/// `OperatorHandoff` does (its operator would drop the action).
struct Replica {
    leads: bool,
    ledger: Arc<Ledger>,
}

#[async_trait::async_trait]
impl InterruptionHandler for Replica {
    async fn act(&self, m: &Received, events: Vec<InterruptionEvent>) -> Result<(), String> {
        if !self.leads {
            return Err("this replica does not lead".into());
        }
        for e in events {
            let fresh = self
                .ledger
                .deleting
                .lock()
                .unwrap()
                .insert(e.provider_id.clone());
            if fresh {
                // The API server's answer takes a moment.
                tokio::time::sleep(Duration::from_millis(5)).await;
                *self
                    .ledger
                    .claim_deletes
                    .lock()
                    .unwrap()
                    .entry(e.provider_id)
                    .or_default() += 1;
            }
        }
        let t = self.ledger.tick();
        self.ledger
            .accepted
            .lock()
            .unwrap()
            .insert(m.receipt_handle.clone(), t);
        Ok(())
    }
}

/// Records the receipt handle of every DeleteMessage on the ledger's clock.
#[derive(Debug, Clone)]
struct DeleteRecorder {
    inner: SharedHttpClient,
    ledger: Arc<Ledger>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ledger")
    }
}

#[derive(Debug)]
struct DeleteConnector {
    inner: SharedHttpConnector,
    ledger: Arc<Ledger>,
}

impl HttpClient for DeleteRecorder {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(DeleteConnector {
            inner: self.inner.http_connector(settings, components),
            ledger: Arc::clone(&self.ledger),
        })
    }
}

impl HttpConnector for DeleteConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let target = request
            .headers()
            .get("x-amz-target")
            .unwrap_or_default()
            .to_string();
        if target.ends_with(".DeleteMessage") {
            let body: serde_json::Value = request
                .body()
                .bytes()
                .and_then(|b| serde_json::from_slice(b).ok())
                .unwrap_or_default();
            let receipt = body["ReceiptHandle"].as_str().unwrap_or_default();
            let ledger = &self.ledger;
            let t = ledger.tick();
            let prev = ledger
                .deleted
                .lock()
                .unwrap()
                .insert(receipt.to_string(), t);
            assert!(prev.is_none(), "a receipt deleted twice");
        }
        self.inner.call(request)
    }
}

/// Fifty spot interruptions for fifty instances, two replicas consuming the same queue: only
/// the leader's actions are durable. Every message is acted on once and deleted once, none
/// before its action; the follower's deliveries come back to the leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn two_replicas_lose_no_message_and_delete_each_after_its_action() {
    let ledger = Arc::new(Ledger::default());
    let http = SharedHttpClient::new(DeleteRecorder {
        inner: karpenter_aws::sdk::http_client(),
        ledger: Arc::clone(&ledger),
    });
    let clients = clients(Some(http)).await;
    let name = cluster_name("replicas");
    let leader_q = queue(&clients, &name)
        .await
        .with_visibility_timeout(Duration::from_secs(2));
    let follower_q = InterruptionQueue::new(&clients, &name)
        .await
        .unwrap()
        .with_visibility_timeout(Duration::from_secs(2));
    let instances: Vec<String> = (0..50).map(|i| format!("i-{i:017x}")).collect();
    for id in &instances {
        send(&clients, &leader_q, &spot(id)).await;
    }
    let known: Arc<BTreeMap<String, String>> = Arc::new(
        instances
            .iter()
            .map(|id| (id.clone(), format!("aws:///us-east-1a/{id}")))
            .collect(),
    );
    // The follower receives first: what it got must come back to the leader.
    let first = follower_q
        .poll(
            Duration::from_secs(1),
            |id| known.get(id).cloned(),
            &Replica {
                leads: false,
                ledger: Arc::clone(&ledger),
            },
        )
        .await
        .unwrap();
    assert!(first.received > 0);
    assert_eq!((first.kept.len(), first.deleted), (first.received, 0));
    let done = Arc::new(AtomicBool::new(false));
    let run = |q: InterruptionQueue, leads: bool| {
        let known = Arc::clone(&known);
        let done = Arc::clone(&done);
        let handler = Replica {
            leads,
            ledger: Arc::clone(&ledger),
        };
        tokio::spawn(async move {
            let (mut deleted, mut kept) = (0, 0);
            while !done.load(Ordering::SeqCst) {
                let stats = q
                    .poll(
                        Duration::from_secs(1),
                        |id| known.get(id).cloned(),
                        &handler,
                    )
                    .await
                    .unwrap();
                assert!(stats.malformed.is_empty() && stats.delete_errors.is_empty());
                deleted += stats.deleted;
                kept += stats.kept.len();
            }
            (deleted, kept)
        })
    };
    let leader = run(leader_q.clone(), true);
    let follower = run(follower_q, false);
    for _ in 0..600 {
        if ledger.deleted.lock().unwrap().len() >= 50 && in_queue(&clients, &leader_q).await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    done.store(true, Ordering::SeqCst);
    let (leader_deleted, _) = leader.await.unwrap();
    let (follower_deleted, follower_kept) = follower.await.unwrap();
    // 50 NodeClaim deletes, one per instance.
    let claim_deletes = ledger.claim_deletes.lock().unwrap().clone();
    assert_eq!(claim_deletes.len(), 50);
    assert!(claim_deletes.values().all(|n| *n == 1), "{claim_deletes:?}");
    // 50 message deletes, all by the leader, each after its action.
    assert_eq!((leader_deleted, follower_deleted), (50, 0));
    let accepted = ledger.accepted.lock().unwrap().clone();
    let deleted = ledger.deleted.lock().unwrap().clone();
    assert_eq!(deleted.len(), 50);
    for (receipt, t) in &deleted {
        let acted = accepted
            .get(receipt)
            .unwrap_or_else(|| panic!("message deleted without an action: {receipt}"));
        assert!(acted < t, "message deleted before its action");
    }
    assert_eq!(in_queue(&clients, &leader_q).await, 0);
    eprintln!(
        "follower kept {} deliveries ({} in its first receive)",
        follower_kept + first.kept.len(),
        first.kept.len()
    );
}
