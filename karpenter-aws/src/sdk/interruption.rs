//! The SQS interruption-queue consumer: receives messages (long polling), parses them with
//! [`crate::interruption::parse_message`], maps each event onto karpenter-core's operator input
//! ([`operator_events`]; the operator makes the decision), and deletes every message it has
//! handled. Malformed or foreign messages are counted and deleted; nothing in a message can make
//! the consumer fail.

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

/// What one receive did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PollStats {
    /// Messages received.
    pub received: usize,
    /// Messages that were not interruption events (counted as errors by kind label).
    pub malformed: Vec<&'static str>,
    /// Messages deleted.
    pub deleted: usize,
    /// Operator inputs produced.
    pub events: usize,
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
        })
    }

    /// The queue's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// One receive (long polling for at most `wait`): every message is parsed, its events
    /// handed to `sink`, and deleted; a malformed one is counted and deleted too.
    pub async fn poll(
        &self,
        wait: Duration,
        provider_id: impl Fn(&str) -> Option<String>,
        mut sink: impl FnMut(InterruptionEvent),
    ) -> Result<PollStats, QueueError> {
        let out = self
            .sqs
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(MAX_MESSAGES)
            .visibility_timeout(VISIBILITY_TIMEOUT)
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
        let mut stats = PollStats::default();
        for m in out.messages() {
            stats.received += 1;
            let parsed: Result<Event, MessageError> = parse_message(m.body().unwrap_or_default());
            match &parsed {
                Ok(event) => {
                    for e in operator_events(event, &provider_id) {
                        stats.events += 1;
                        sink(e);
                    }
                }
                Err(err) => stats.malformed.push(err.label()),
            }
            if let Some(receipt) = m.receipt_handle() {
                self.sqs
                    .delete_message()
                    .queue_url(&self.url)
                    .receipt_handle(receipt)
                    .send()
                    .await
                    .map_err(|e| QueueError {
                        call: "DeleteMessage",
                        message: display_chain(&e),
                    })?;
                stats.deleted += 1;
            }
        }
        Ok(stats)
    }
}
