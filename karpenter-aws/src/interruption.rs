//! Interruption handling as pure functions: parsing the EventBridge messages the interruption
//! queue receives into typed events, and deciding what each one does (which NodeClaims are
//! deleted, which offerings are marked unavailable, what is counted).
//!
//! The SQS shell receives messages (`MaxNumberOfMessages=10`, `VisibilityTimeout=20`,
//! `WaitTimeSeconds=20`), calls [`parse_message`] and [`decide`] with the NodeClaims it finds by
//! instance id, carries out the [`Action`]s, records the [`Decision::metrics`] and deletes the
//! message. A malformed or foreign message is an error ([`MessageError`]): it is counted
//! ([`RECEIVED_MESSAGES`] with `message_type="no_op"` plus [`MESSAGE_ERRORS`] by kind) and
//! deleted, never retried and never a panic.

use std::collections::BTreeMap;

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

    /// The Kubernetes event reason upstream records on the NodeClaim.
    pub fn event_reason(self) -> Option<&'static str> {
        Some(match self {
            Kind::SpotInterrupted => "SpotInterrupted",
            Kind::RebalanceRecommendation => "RebalanceRecommendation",
            Kind::InstanceStopped => "Stopping",
            Kind::InstanceTerminated => "Terminating",
            Kind::ScheduledChange => "Unhealthy",
            Kind::CapacityReservationInterrupted => "CapacityReservationInstanceInterrupted",
            Kind::NoOp => return None,
        })
    }

    /// Whether the NodeClaims of the affected instances are deleted.
    pub fn deletes_nodeclaim(self) -> bool {
        !matches!(self, Kind::RebalanceRecommendation | Kind::NoOp)
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

/// A NodeClaim found for an instance (through the `status.instanceID` index).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimRef {
    /// The NodeClaim name.
    pub name: String,
    /// Its NodePool (`karpenter.sh/nodepool`).
    pub nodepool: String,
    /// `karpenter.sh/capacity-type`.
    pub capacity_type: String,
    /// `node.kubernetes.io/instance-type`.
    pub instance_type: String,
    /// `topology.kubernetes.io/zone`.
    pub zone: String,
    /// `karpenter.sh/capacity-reservation-id`, if any.
    pub reservation_id: Option<String>,
    /// Whether it is already being deleted.
    pub deleting: bool,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Mark an offering unavailable for the unavailable-offerings TTL (3 minutes).
    MarkOfferingUnavailable {
        /// `spot`.
        capacity_type: String,
        /// The instance type.
        instance_type: String,
        /// The zone.
        zone: String,
    },
    /// Mark a capacity reservation unavailable.
    MarkReservationUnavailable {
        /// The reservation id.
        reservation_id: String,
    },
    /// Record a Kubernetes event on the NodeClaim.
    RecordEvent {
        /// The NodeClaim.
        nodeclaim: String,
        /// The event reason.
        reason: &'static str,
    },
    /// Delete the NodeClaim (core's termination cordons and drains).
    DeleteNodeClaim {
        /// The NodeClaim.
        nodeclaim: String,
    },
}

/// One metric increment.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricSample {
    /// The metric name.
    pub name: &'static str,
    /// Label pairs.
    pub labels: Vec<(&'static str, String)>,
    /// The counter increment or histogram observation.
    pub value: f64,
}

/// What one message leads to.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The actions, in order.
    pub actions: Vec<Action>,
    /// The metrics to record.
    pub metrics: Vec<MetricSample>,
    /// Whether to delete the message from the queue once the actions succeeded (always, as
    /// upstream: handled, no-op and unparseable messages are all deleted).
    pub delete_message: bool,
}

/// Decides what a parsed (or failed) message does. `claims` maps instance ids to their
/// NodeClaims; unknown instances are ignored. `now` measures the queue delay.
pub fn decide(
    message: &Result<Event, MessageError>,
    claims: &BTreeMap<String, ClaimRef>,
    now: jiff::Timestamp,
) -> Decision {
    let deleted = MetricSample {
        name: DELETED_MESSAGES,
        labels: Vec::new(),
        value: 1.0,
    };
    let event = match message {
        Ok(e) => e,
        Err(err) => {
            return Decision {
                actions: Vec::new(),
                metrics: vec![
                    MetricSample {
                        name: RECEIVED_MESSAGES,
                        labels: vec![("message_type", Kind::NoOp.as_str().into())],
                        value: 1.0,
                    },
                    MetricSample {
                        name: MESSAGE_ERRORS,
                        labels: vec![("error", err.label().into())],
                        value: 1.0,
                    },
                    deleted,
                ],
                delete_message: true,
            };
        }
    };
    let mut actions = Vec::new();
    let mut metrics = vec![
        MetricSample {
            name: RECEIVED_MESSAGES,
            labels: vec![("message_type", event.kind.as_str().into())],
            value: 1.0,
        },
        MetricSample {
            name: MESSAGE_QUEUE_DURATION,
            labels: Vec::new(),
            value: (now.as_millisecond() - event.time.as_millisecond()).max(0) as f64 / 1000.0,
        },
    ];
    for id in &event.instance_ids {
        let Some(claim) = claims.get(id) else {
            continue;
        };
        match event.kind {
            Kind::SpotInterrupted => actions.push(Action::MarkOfferingUnavailable {
                capacity_type: "spot".into(),
                instance_type: claim.instance_type.clone(),
                zone: claim.zone.clone(),
            }),
            Kind::CapacityReservationInterrupted => {
                if let Some(r) = &claim.reservation_id {
                    actions.push(Action::MarkReservationUnavailable {
                        reservation_id: r.clone(),
                    });
                }
            }
            _ => {}
        }
        if let Some(reason) = event.kind.event_reason() {
            actions.push(Action::RecordEvent {
                nodeclaim: claim.name.clone(),
                reason,
            });
        }
        if event.kind.deletes_nodeclaim() && !claim.deleting {
            actions.push(Action::RecordEvent {
                nodeclaim: claim.name.clone(),
                reason: "TerminatingOnInterruption",
            });
            actions.push(Action::DeleteNodeClaim {
                nodeclaim: claim.name.clone(),
            });
            metrics.push(MetricSample {
                name: NODECLAIMS_DISRUPTED,
                labels: vec![
                    ("reason", event.kind.as_str().into()),
                    ("nodepool", claim.nodepool.clone()),
                    ("capacity_type", claim.capacity_type.clone()),
                ],
                value: 1.0,
            });
        }
    }
    metrics.push(deleted);
    Decision {
        actions,
        metrics,
        delete_message: true,
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

    fn claims() -> BTreeMap<String, ClaimRef> {
        let mut m = BTreeMap::new();
        m.insert(
            "i-0b2c3d4e5f6a7b8c9".to_string(),
            ClaimRef {
                name: "default-abc12".into(),
                nodepool: "default".into(),
                capacity_type: "spot".into(),
                instance_type: "m5.large".into(),
                zone: "us-east-1b".into(),
                reservation_id: Some("cr-0123".into()),
                deleting: false,
            },
        );
        m
    }

    fn now() -> jiff::Timestamp {
        "2026-01-01T00:00:02Z".parse().unwrap()
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
    fn spot_interruption_marks_the_offering_and_deletes_the_claim() {
        let d = decide(
            &parse_message(&fixture("spot-interruption.json")),
            &claims(),
            now(),
        );
        assert_eq!(
            d.actions,
            vec![
                Action::MarkOfferingUnavailable {
                    capacity_type: "spot".into(),
                    instance_type: "m5.large".into(),
                    zone: "us-east-1b".into()
                },
                Action::RecordEvent {
                    nodeclaim: "default-abc12".into(),
                    reason: "SpotInterrupted"
                },
                Action::RecordEvent {
                    nodeclaim: "default-abc12".into(),
                    reason: "TerminatingOnInterruption"
                },
                Action::DeleteNodeClaim {
                    nodeclaim: "default-abc12".into()
                },
            ]
        );
        assert!(d.delete_message);
        let names: Vec<&str> = d.metrics.iter().map(|m| m.name).collect();
        assert_eq!(
            names,
            [
                RECEIVED_MESSAGES,
                MESSAGE_QUEUE_DURATION,
                NODECLAIMS_DISRUPTED,
                DELETED_MESSAGES
            ]
        );
        assert_eq!(
            d.metrics[0].labels,
            vec![("message_type", "spot_interrupted".to_string())]
        );
        assert_eq!(d.metrics[1].value, 2.0);
        assert_eq!(
            d.metrics[2].labels[0],
            ("reason", "spot_interrupted".to_string())
        );
    }

    #[test]
    fn rebalance_only_records_an_event_and_reservations_are_marked() {
        let d = decide(
            &parse_message(&fixture("rebalance-recommendation.json")),
            &claims(),
            now(),
        );
        assert_eq!(
            d.actions,
            vec![Action::RecordEvent {
                nodeclaim: "default-abc12".into(),
                reason: "RebalanceRecommendation"
            }]
        );
        let d = decide(
            &parse_message(&fixture("capacity-reservation-interruption.json")),
            &claims(),
            now(),
        );
        assert_eq!(
            d.actions[0],
            Action::MarkReservationUnavailable {
                reservation_id: "cr-0123".into()
            }
        );
        assert!(d.actions.contains(&Action::DeleteNodeClaim {
            nodeclaim: "default-abc12".into()
        }));
    }

    #[test]
    fn state_changes_and_health_events_delete_known_claims_only() {
        for file in [
            "state-change-stopping.json",
            "state-change-terminated.json",
            "scheduled-change.json",
        ] {
            let d = decide(&parse_message(&fixture(file)), &claims(), now());
            let deletes: Vec<_> = d
                .actions
                .iter()
                .filter(|a| matches!(a, Action::DeleteNodeClaim { .. }))
                .collect();
            assert_eq!(
                deletes.len(),
                1,
                "{file}: the second health entity has no NodeClaim"
            );
            assert!(
                !d.actions
                    .iter()
                    .any(|a| matches!(a, Action::MarkOfferingUnavailable { .. })),
                "{file}"
            );
        }
        let mut deleting = claims();
        deleting.values_mut().for_each(|c| c.deleting = true);
        let d = decide(
            &parse_message(&fixture("state-change-stopped.json")),
            &deleting,
            now(),
        );
        assert!(
            !d.actions
                .iter()
                .any(|a| matches!(a, Action::DeleteNodeClaim { .. }))
        );
        let d = decide(
            &parse_message(&fixture("state-change-running.json")),
            &claims(),
            now(),
        );
        assert!(d.actions.is_empty());
        assert_eq!(d.metrics[0].labels[0].1, "no_op");
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
            let d = decide(&parsed, &claims(), now());
            assert!(d.actions.is_empty());
            assert!(d.delete_message);
            assert!(
                d.metrics
                    .iter()
                    .any(|m| m.name == MESSAGE_ERRORS && m.labels[0].1 == label)
            );
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
            let parsed = parse_message(&body);
            let _ = decide(&parsed, &BTreeMap::new(), jiff::Timestamp::UNIX_EPOCH);
        }
    }
}
