//! The SQS interruption-queue consumer: receives messages (long polling), parses them with
//! [`crate::interruption::parse_message`], maps each event onto karpenter-core's operator input
//! ([`operator_events`]; the operator makes the decision), hands the inputs to an
//! [`InterruptionHandler`], and deletes a message only once its action is durable:
//!
//! - the handler reported the action done (for a NodeClaim delete: the API server accepted
//!   it), or
//! - the message needs no action (an instance without a NodeClaim, a kind that calls for
//!   nothing), or
//! - the message is not an interruption event (malformed or foreign): it is reported in
//!   [`PollStats::malformed`] for the caller to count and log, and deleted at once, so it is
//!   never received again.
//!
//! A message whose action failed or was not confirmed is kept: it is received again once its
//! visibility timeout passes (upstream deletes a message only after handling it, too).
//! Nothing in a message can make the consumer fail.

use std::time::Duration;

use karpenter_core::operator::InterruptionEvent;

use super::{AwsClients, display_chain};
use crate::interruption::{Event, MessageError, parse_message};

/// Upstream's receive settings.
pub const MAX_MESSAGES: i32 = 10;
/// Seconds a received message stays invisible.
pub const VISIBILITY_TIMEOUT: i32 = 20;
/// Long-polling wait in seconds.
pub const WAIT_SECONDS: i32 = 20;

pub use crate::interruption::operator_kind;

/// The operator inputs of a parsed message ([`Event::operator_events`]).
pub fn operator_events(
    event: &Event,
    provider_id: impl Fn(&str) -> Option<String>,
) -> Vec<InterruptionEvent> {
    event.operator_events(provider_id)
}

/// One received message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The SQS message id.
    pub message_id: String,
    /// The receipt handle its delete needs.
    pub receipt_handle: String,
    /// The body.
    pub body: String,
}

/// Acts on the operator inputs of one message.
#[async_trait::async_trait]
pub trait InterruptionHandler: Send + Sync {
    /// Hands `events` (never empty) to whatever acts on them and returns once the action is
    /// durable (`Ok`: the message is deleted), or with why it is not (`Err`: the message is
    /// kept and received again after its visibility timeout). Called once per message; the
    /// messages of one receive are handled concurrently.
    async fn act(&self, message: &Received, events: Vec<InterruptionEvent>) -> Result<(), String>;
}

/// A message that was not an interruption event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed {
    /// The SQS message id.
    pub message_id: String,
    /// Why.
    pub error: MessageError,
}

/// What one receive did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PollStats {
    /// Messages received.
    pub received: usize,
    /// Messages that were not interruption events (deleted; the caller counts them by
    /// [`MessageError::label`] in [`crate::interruption::MESSAGE_ERRORS`] and logs each once).
    pub malformed: Vec<Malformed>,
    /// Messages deleted.
    pub deleted: usize,
    /// Messages deleted without an action (no NodeClaim for the instance, nothing to do).
    pub no_op: usize,
    /// Operator inputs handed to the handler.
    pub events: usize,
    /// Messages kept for another delivery: (message id, why).
    pub kept: Vec<(String, String)>,
    /// Deletes that failed: (message id, error); the message comes back and is handled again.
    pub delete_errors: Vec<(String, String)>,
}

/// Why the queue could not be used.
#[derive(Debug, thiserror::Error)]
#[error("{call}: {message}")]
pub struct QueueError {
    /// The SQS call.
    pub call: &'static str,
    /// What went wrong.
    pub message: String,
}

/// The interruption queue.
#[derive(Debug, Clone)]
pub struct InterruptionQueue {
    sqs: aws_sdk_sqs::Client,
    url: String,
    visibility_timeout: i32,
}

/// What became of one message.
enum Outcome {
    Acted(usize),
    NoOp,
    Malformed(Malformed),
    Kept(String),
}

impl InterruptionQueue {
    /// The queue named `name` (GetQueueUrl).
    pub async fn new(clients: &AwsClients, name: &str) -> Result<Self, QueueError> {
        let out = clients
            .sqs
            .get_queue_url()
            .queue_name(name)
            .send()
            .await
            .map_err(|e| QueueError {
                call: "GetQueueUrl",
                message: display_chain(&e),
            })?;
        let url = out.queue_url().unwrap_or_default().to_string();
        Ok(InterruptionQueue {
            sqs: clients.sqs.clone(),
            url,
            visibility_timeout: VISIBILITY_TIMEOUT,
        })
    }

    /// The same queue with another visibility timeout (whole seconds, at least 1): how long
    /// a kept message stays invisible before it is received again. Default
    /// [`VISIBILITY_TIMEOUT`], upstream's.
    pub fn with_visibility_timeout(mut self, timeout: Duration) -> Self {
        self.visibility_timeout = i32::try_from(timeout.as_secs()).unwrap_or(i32::MAX).max(1);
        self
    }

    /// The queue's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// One receive (long polling for at most `wait`): every message is parsed and its operator
    /// inputs (instances that `provider_id` knows) handed to `handler`; the messages are
    /// handled at once, and each is deleted once its action is durable (see the module docs).
    /// `Err` only when the receive itself fails.
    pub async fn poll(
        &self,
        wait: Duration,
        provider_id: impl Fn(&str) -> Option<String>,
        handler: &dyn InterruptionHandler,
    ) -> Result<PollStats, QueueError> {
        let out = self
            .sqs
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(MAX_MESSAGES)
            .visibility_timeout(self.visibility_timeout)
            .wait_time_seconds(
                i32::try_from(wait.as_secs())
                    .unwrap_or(WAIT_SECONDS)
                    .min(WAIT_SECONDS),
            )
            .message_attribute_names("All")
            .send()
            .await
            .map_err(|e| QueueError {
                call: "ReceiveMessage",
                message: display_chain(&e),
            })?;
        let received: Vec<Received> = out
            .messages()
            .iter()
            .filter_map(|m| {
                Some(Received {
                    message_id: m.message_id().unwrap_or_default().to_string(),
                    receipt_handle: m.receipt_handle()?.to_string(),
                    body: m.body().unwrap_or_default().to_string(),
                })
            })
            .collect();
        let mut stats = PollStats {
            received: out.messages().len(),
            ..PollStats::default()
        };
        let outcomes = futures::future::join_all(
            received
                .iter()
                .map(|m| self.handle(m, &provider_id, handler)),
        )
        .await;
        for (m, (outcome, deleted)) in received.iter().zip(outcomes) {
            match outcome {
                Outcome::Acted(n) => stats.events += n,
                Outcome::NoOp => stats.no_op += 1,
                Outcome::Malformed(e) => stats.malformed.push(e),
                Outcome::Kept(why) => stats.kept.push((m.message_id.clone(), why)),
            }
            match deleted {
                Some(Ok(())) => stats.deleted += 1,
                Some(Err(e)) => stats.delete_errors.push((m.message_id.clone(), e)),
                None => {}
            }
        }
        Ok(stats)
    }

    /// One message: its outcome, and the result of its delete (`None`: kept).
    async fn handle(
        &self,
        m: &Received,
        provider_id: &impl Fn(&str) -> Option<String>,
        handler: &dyn InterruptionHandler,
    ) -> (Outcome, Option<Result<(), String>>) {
        let outcome = match parse_message(&m.body) {
            Err(error) => Outcome::Malformed(Malformed {
                message_id: m.message_id.clone(),
                error,
            }),
            Ok(event) => {
                let events = operator_events(&event, provider_id);
                if events.is_empty() {
                    Outcome::NoOp
                } else {
                    let n = events.len();
                    match handler.act(m, events).await {
                        Ok(()) => Outcome::Acted(n),
                        Err(why) => Outcome::Kept(why),
                    }
                }
            }
        };
        if matches!(outcome, Outcome::Kept(_)) {
            return (outcome, None);
        }
        let deleted = self.delete(&m.receipt_handle).await;
        (outcome, Some(deleted))
    }

    /// DeleteMessage.
    async fn delete(&self, receipt_handle: &str) -> Result<(), String> {
        self.sqs
            .delete_message()
            .queue_url(&self.url)
            .receipt_handle(receipt_handle)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| format!("DeleteMessage: {}", display_chain(&e)))
    }
}
