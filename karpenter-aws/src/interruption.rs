//! Interruption messages as typed events: parsing the EventBridge messages the interruption
//! queue receives, and mapping each event onto karpenter-core's operator input
//! ([`Event::operator_events`]), where the one interruption decision is made (which NodeClaims
//! are deleted, which offerings are marked unavailable, what is recorded).
//!
//! The SQS shell (`sdk::interruption`, feature `sdk`) receives messages
//! (`MaxNumberOfMessages=10`, `VisibilityTimeout=20`, `WaitTimeSeconds=20`), calls
//! [`parse_message`], hands the operator events on, and deletes the message. A malformed or
//! foreign message is an error ([`MessageError`]): it is counted ([`MESSAGE_ERRORS`] by
//! [`MessageError::label`]) and deleted, never retried and never a panic.

use std::collections::BTreeMap;

use karpenter_core::operator::{InterruptionEvent, InterruptionKind};

use serde::Deserialize;
use serde_json::Value;

/// `karpenter_interruption_received_messages_total{message_type}`.
pub const RECEIVED_MESSAGES: &str = "karpenter_interruption_received_messages_total";
/// `karpenter_interruption_deleted_messages_total`.
pub const DELETED_MESSAGES: &str = "karpenter_interruption_deleted_messages_total";
/// `karpenter_interruption_message_queue_duration_seconds` (histogram of now − event time).
pub const MESSAGE_QUEUE_DURATION: &str = "karpenter_interruption_message_queue_duration_seconds";
/// `karpenter_nodeclaims_disrupted_total{reason, nodepool, capacity_type}` (core's metric).
pub const NODECLAIMS_DISRUPTED: &str = "karpenter_nodeclaims_disrupted_total";
/// Messages that could not be parsed, by error kind (this crate's addition:
/// `karpenter_interruption_message_errors_total{error}`).
pub const MESSAGE_ERRORS: &str = "karpenter_interruption_message_errors_total";

/// The kind of an interruption event (upstream's `message_type` label values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `EC2 Spot Instance Interruption Warning`.
    SpotInterrupted,
    /// `EC2 Instance Rebalance Recommendation`.
    RebalanceRecommendation,
    /// `EC2 Instance State-change Notification`, stopping or stopped.
    InstanceStopped,
    /// `EC2 Instance State-change Notification`, shutting-down or terminated.
    InstanceTerminated,
    /// `AWS Health Event` of category `scheduledChange` for EC2.
    ScheduledChange,
    /// `EC2 Capacity Reservation Instance Interruption Warning`.
    CapacityReservationInterrupted,
    /// A known message that needs nothing (another state, another health category).
    NoOp,
}

impl Kind {
    /// The `message_type` / disruption `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::SpotInterrupted => "spot_interrupted",
            Kind::RebalanceRecommendation => "rebalance_recommendation",
            Kind::InstanceStopped => "instance_stopped",
            Kind::InstanceTerminated => "instance_terminated",
            Kind::ScheduledChange => "scheduled_change",
            Kind::CapacityReservationInterrupted => "capacity_reservation_interrupted",
            Kind::NoOp => "no_op",
        }
    }
}

/// A parsed message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// What happened.
    pub kind: Kind,
    /// The EventBridge event id.
    pub id: Option<String>,
    /// The event time (RFC 3339).
    pub time: jiff::Timestamp,
    /// The affected instances.
    pub instance_ids: Vec<String>,
    /// Details worth logging (state, instance action, health event type code).
    pub detail: BTreeMap<String, String>,
}

/// Why a message is not an interruption event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// The body is empty.
    #[error("empty message body")]
    Empty,
    /// The body is not a JSON object.
    #[error("message body is not an EventBridge event: {0}")]
    InvalidJson(String),
    /// The envelope `version` is not `0`.
    #[error("unsupported event version {0:?}")]
    UnsupportedVersion(String),
    /// Not one of the five kinds the interruption queue subscribes to.
    #[error("unrecognised event: source {event_source:?}, detail-type {detail_type:?}")]
    Unrecognized {
        /// `source`.
        event_source: String,
        /// `detail-type`.
        detail_type: String,
    },
    /// A required field is missing or has the wrong type.
    #[error("{field}: missing or invalid")]
    MissingField {
        /// The field (`detail.instance-id`).
        field: &'static str,
    },
}

impl MessageError {
    /// The `error` label of [`MESSAGE_ERRORS`].
    pub fn label(&self) -> &'static str {
        match self {
            MessageError::Empty => "empty",
            MessageError::InvalidJson(_) => "invalid_json",
            MessageError::UnsupportedVersion(_) => "unsupported_version",
            MessageError::Unrecognized { .. } => "unrecognized",
            MessageError::MissingField { .. } => "missing_field",
        }
    }
}

#[derive(Deserialize)]
struct Envelope {
    version: Option<String>,
    id: Option<String>,
    #[serde(rename = "detail-type")]
    detail_type: Option<String>,
    source: Option<String>,
    time: Option<String>,
    #[serde(default)]
    detail: Value,
}

fn field<'a>(detail: &'a Value, name: &str, path: &'static str) -> Result<&'a str, MessageError> {
    detail
        .get(name)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or(MessageError::MissingField { field: path })
}

/// Parses one SQS message body.
pub fn parse_message(body: &str) -> Result<Event, MessageError> {
    if body.trim().is_empty() {
        return Err(MessageError::Empty);
    }
    let env: Envelope =
        serde_json::from_str(body).map_err(|e| MessageError::InvalidJson(e.to_string()))?;
    let version = env.version.unwrap_or_default();
    let source = env.source.unwrap_or_default();
    let detail_type = env.detail_type.unwrap_or_default();
    let known = matches!(
        (source.as_str(), detail_type.as_str()),
        ("aws.ec2", "EC2 Spot Instance Interruption Warning")
            | ("aws.ec2", "EC2 Instance Rebalance Recommendation")
            | ("aws.ec2", "EC2 Instance State-change Notification")
            | (
                "aws.ec2",
                "EC2 Capacity Reservation Instance Interruption Warning"
            )
            | ("aws.health", "AWS Health Event")
    );
    if !known {
        return Err(MessageError::Unrecognized {
            event_source: source,
            detail_type,
        });
    }
    if version != "0" {
        return Err(MessageError::UnsupportedVersion(version));
    }
    let time: jiff::Timestamp = env
        .time
        .as_deref()
        .and_then(|t| t.parse().ok())
        .ok_or(MessageError::MissingField { field: "time" })?;
    let d = &env.detail;
    let mut detail = BTreeMap::new();
    let (kind, instance_ids) = match detail_type.as_str() {
        "EC2 Spot Instance Interruption Warning"
        | "EC2 Capacity Reservation Instance Interruption Warning" => {
            let id = field(d, "instance-id", "detail.instance-id")?;
            if let Some(a) = d.get("instance-action").and_then(Value::as_str) {
                detail.insert("instance-action".into(), a.to_string());
            }
            let kind = if detail_type.starts_with("EC2 Spot") {
                Kind::SpotInterrupted
            } else {
                Kind::CapacityReservationInterrupted
            };
            (kind, vec![id.to_string()])
        }
        "EC2 Instance Rebalance Recommendation" => {
            let id = field(d, "instance-id", "detail.instance-id")?;
            (Kind::RebalanceRecommendation, vec![id.to_string()])
        }
        "EC2 Instance State-change Notification" => {
            let id = field(d, "instance-id", "detail.instance-id")?;
            let state = field(d, "state", "detail.state")?;
            detail.insert("state".into(), state.to_string());
            let kind = match state {
                "stopping" | "stopped" => Kind::InstanceStopped,
                "shutting-down" | "terminated" => Kind::InstanceTerminated,
                _ => Kind::NoOp,
            };
            (kind, vec![id.to_string()])
        }
        _ => {
            // AWS Health Event.
            let service = d.get("service").and_then(Value::as_str).unwrap_or("");
            let category = d
                .get("eventTypeCategory")
                .and_then(Value::as_str)
                .unwrap_or("");
            for k in ["eventTypeCode", "eventArn", "startTime", "endTime"] {
                if let Some(v) = d.get(k).and_then(Value::as_str) {
                    detail.insert(k.to_string(), v.to_string());
                }
            }
            if service != "EC2" || category != "scheduledChange" {
                (Kind::NoOp, Vec::new())
            } else {
                let entities = d.get("affectedEntities").and_then(Value::as_array).ok_or(
                    MessageError::MissingField {
                        field: "detail.affectedEntities",
                    },
                )?;
                let ids = entities
                    .iter()
                    .filter_map(|e| e.get("entityValue").and_then(Value::as_str))
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect();
                (Kind::ScheduledChange, ids)
            }
        }
    };
    Ok(Event {
        kind,
        id: env.id,
        time,
        instance_ids,
        detail,
    })
}

/// The operator's kind of an AWS event kind (`None` for [`Kind::NoOp`]). karpenter-core's
/// operator makes every interruption decision (which NodeClaim is deleted, which offering is
/// marked unavailable, which events and metrics are recorded); this crate only types the
/// messages.
pub fn operator_kind(kind: Kind) -> Option<InterruptionKind> {
    Some(match kind {
        Kind::SpotInterrupted => InterruptionKind::SpotInterrupted,
        Kind::RebalanceRecommendation => InterruptionKind::RebalanceRecommendation,
        Kind::InstanceStopped => InterruptionKind::InstanceStopped,
        Kind::InstanceTerminated => InterruptionKind::InstanceTerminated,
        Kind::ScheduledChange => InterruptionKind::ScheduledChange,
        Kind::CapacityReservationInterrupted => InterruptionKind::CapacityReservationInterrupted,
        Kind::NoOp => return None,
    })
}

impl Event {
    /// The operator inputs of this event: one [`InterruptionEvent`] per affected instance that
    /// `provider_id` knows (instance id → the provider id of its NodeClaim, as upstream finds
    /// NodeClaims through the `status.instanceID` index); unknown instances are ignored, as
    /// upstream ignores them.
    pub fn operator_events(
        &self,
        provider_id: impl Fn(&str) -> Option<String>,
    ) -> Vec<InterruptionEvent> {
        let Some(kind) = operator_kind(self.kind) else {
            return Vec::new();
        };
        self.instance_ids
            .iter()
            .filter_map(|id| provider_id(id))
            .map(|p| InterruptionEvent::new(kind, p))
            .collect()
    }

    /// Seconds between the event and `now` (`karpenter_interruption_message_queue_duration_seconds`).
    pub fn queue_delay_seconds(&self, now: jiff::Timestamp) -> f64 {
        (now.as_millisecond() - self.time.as_millisecond()).max(0) as f64 / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/interruption")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn known(id: &str) -> Option<String> {
        (id == "i-0b2c3d4e5f6a7b8c9").then(|| format!("aws:///us-east-1b/{id}"))
    }

    #[test]
    fn every_fixture_parses_to_its_kind() {
        for (file, kind, ids) in [
            ("spot-interruption.json", Kind::SpotInterrupted, 1),
            (
                "rebalance-recommendation.json",
                Kind::RebalanceRecommendation,
                1,
            ),
            ("state-change-stopping.json", Kind::InstanceStopped, 1),
            ("state-change-stopped.json", Kind::InstanceStopped, 1),
            (
                "state-change-shutting-down.json",
                Kind::InstanceTerminated,
                1,
            ),
            ("state-change-terminated.json", Kind::InstanceTerminated, 1),
            ("state-change-running.json", Kind::NoOp, 1),
            ("scheduled-change.json", Kind::ScheduledChange, 2),
            ("health-issue-not-scheduled.json", Kind::NoOp, 0),
            (
                "capacity-reservation-interruption.json",
                Kind::CapacityReservationInterrupted,
                1,
            ),
        ] {
            let e = parse_message(&fixture(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(e.kind, kind, "{file}");
            assert_eq!(e.instance_ids.len(), ids, "{file}");
        }
    }

    #[test]
    fn events_map_onto_the_operator_kinds_for_known_instances_only() {
        for (file, kind) in [
            ("spot-interruption.json", InterruptionKind::SpotInterrupted),
            (
                "rebalance-recommendation.json",
                InterruptionKind::RebalanceRecommendation,
            ),
        ] {
            let e = parse_message(&fixture(file)).unwrap();
            let events = e.operator_events(known);
            assert_eq!(
                events,
                [InterruptionEvent::new(
                    kind,
                    "aws:///us-east-1b/i-0b2c3d4e5f6a7b8c9"
                )],
                "{file}"
            );
            assert!(e.operator_events(|_| None).is_empty());
            let later = e
                .time
                .checked_add(jiff::SignedDuration::from_secs(2))
                .unwrap();
            assert_eq!(e.queue_delay_seconds(later), 2.0);
            assert_eq!(e.queue_delay_seconds(jiff::Timestamp::UNIX_EPOCH), 0.0);
        }
        assert_eq!(operator_kind(Kind::NoOp), None);
        assert_eq!(
            operator_kind(Kind::InstanceStopped),
            Some(InterruptionKind::InstanceStopped)
        );
        assert_eq!(
            operator_kind(Kind::CapacityReservationInterrupted),
            Some(InterruptionKind::CapacityReservationInterrupted)
        );
    }

    #[test]
    fn malformed_and_foreign_messages_are_counted_errors() {
        let cases = [
            (fixture("foreign-s3-event.json"), "unrecognized"),
            (String::new(), "empty"),
            ("not json".to_string(), "invalid_json"),
            ("[1,2]".to_string(), "invalid_json"),
            (r#"{"version":"1","source":"aws.ec2","detail-type":"EC2 Instance Rebalance Recommendation","time":"2026-01-01T00:00:00Z","detail":{"instance-id":"i-1"}}"#.to_string(), "unsupported_version"),
            (r#"{"version":"0","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","time":"2026-01-01T00:00:00Z","detail":{}}"#.to_string(), "missing_field"),
            (r#"{"version":"0","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","time":"yesterday","detail":{"instance-id":"i-1"}}"#.to_string(), "missing_field"),
            (r#"{"version":"0","source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","time":"2026-01-01T00:00:00Z","detail":{"instance-id":"i-1","state":7}}"#.to_string(), "missing_field"),
            (r#"{"version":"0","source":"aws.health","detail-type":"AWS Health Event","time":"2026-01-01T00:00:00Z","detail":{"service":"EC2","eventTypeCategory":"scheduledChange"}}"#.to_string(), "missing_field"),
        ];
        for (body, label) in cases {
            let parsed = parse_message(&body);
            let err = parsed.as_ref().expect_err(&body);
            assert_eq!(err.label(), label, "{body}");
        }
    }

    #[test]
    fn the_spec_minimal_bodies_parse() {
        for body in [
            r#"{"version":"0","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","time":"2026-01-01T00:00:00Z","detail":{"instance-id":"i-0abc","instance-action":"terminate"}}"#,
            r#"{"version":"0","source":"aws.health","detail-type":"AWS Health Event","time":"2026-01-01T00:00:00Z","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","eventTypeCode":"AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED","affectedEntities":[{"entityValue":"i-0abc"}]}}"#,
        ] {
            assert_eq!(parse_message(body).unwrap().instance_ids, ["i-0abc"]);
        }
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bodies_never_panic(body in ".{0,200}") {
            if let Ok(e) = parse_message(&body) {
                let _ = e.operator_events(|id| Some(id.to_string()));
            }
        }
    }
}
