//! The structural schema of NodePools and NodeClaims, walked over a `serde_json::Value` before
//! decoding: it names every field the schema does not define (the API server prunes those and
//! `kubectl` warns about them) and reports, with its path, every value that decoding would
//! reject (wrong type, unknown enum value, unparsable duration or quantity, missing required
//! field).
//!
//! Leaf checks decode the leaf with the same serde type the typed objects use, so the walker and
//! the decoder cannot disagree.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::duration::{Duration, NillableDuration};
use super::meta::ConditionStatus;
use super::nodepool::{ConsolidationPolicy, DisruptionReason};
use super::validation::{Path, ValidationError, ValidationErrorKind, ValidationErrors};
use crate::requirements::Operator;
use crate::resources::Quantity;
use crate::taints::TaintEffect;

type LeafCheck = fn(&Value) -> Result<(), String>;

/// A node of the schema.
#[derive(Clone, Copy)]
pub(crate) enum Node {
    /// An object with these fields; other keys are unknown.
    Object(&'static [Field]),
    /// An object whose values all have this schema (labels, resource lists).
    Map(&'static Node),
    /// A list whose items have this schema.
    List(&'static Node),
    /// A scalar checked by decoding it.
    Leaf(LeafCheck),
    /// Anything (kept verbatim, e.g. `metadata.managedFields`).
    Any,
}

/// What a missing or `null` field means.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Presence {
    /// Must be present and not null.
    Required,
    /// May be absent or null.
    Optional,
    /// May be absent, but not null.
    NotNull,
}

/// A field of an object node.
pub(crate) struct Field {
    name: &'static str,
    node: Node,
    presence: Presence,
}

const fn f(name: &'static str, node: Node) -> Field {
    Field {
        name,
        node,
        presence: Presence::Optional,
    }
}

const fn req(name: &'static str, node: Node) -> Field {
    Field {
        name,
        node,
        presence: Presence::Required,
    }
}

const fn not_null(name: &'static str, node: Node) -> Field {
    Field {
        name,
        node,
        presence: Presence::NotNull,
    }
}

fn check<T: DeserializeOwned>(v: &Value) -> Result<(), String> {
    T::deserialize(v).map(|_| ()).map_err(|e| e.to_string())
}

const STRING: Node = Node::Leaf(check::<String>);
const INT32: Node = Node::Leaf(check::<i32>);
const INT64: Node = Node::Leaf(check::<i64>);
const BOOL: Node = Node::Leaf(check::<bool>);
const QUANTITY: Node = Node::Leaf(check::<Quantity>);
const DURATION: Node = Node::Leaf(check::<Duration>);
const NILLABLE: Node = Node::Leaf(check::<NillableDuration>);
const STRING_MAP: Node = Node::Map(&STRING);
const RESOURCE_LIST: Node = Node::Map(&QUANTITY);

const OWNER_REFERENCE: Node = Node::Object(&[
    not_null("apiVersion", STRING),
    not_null("kind", STRING),
    not_null("name", STRING),
    not_null("uid", STRING),
    f("controller", BOOL),
    f("blockOwnerDeletion", BOOL),
]);

const OBJECT_META: Node = Node::Object(&[
    f("name", STRING),
    f("generateName", Node::Any),
    f("namespace", STRING),
    f("selfLink", Node::Any),
    f("uid", STRING),
    f("resourceVersion", STRING),
    f("generation", INT64),
    f("creationTimestamp", STRING),
    f("deletionTimestamp", STRING),
    f("deletionGracePeriodSeconds", Node::Any),
    f("labels", STRING_MAP),
    f("annotations", STRING_MAP),
    f("ownerReferences", Node::List(&OWNER_REFERENCE)),
    f("finalizers", Node::List(&STRING)),
    f("managedFields", Node::Any),
]);

const TAINT: Node = Node::Object(&[
    req("key", STRING),
    not_null("value", STRING),
    req("effect", Node::Leaf(check::<TaintEffect>)),
    f("timeAdded", STRING),
]);

const REQUIREMENT: Node = Node::Object(&[
    req("key", STRING),
    req("operator", Node::Leaf(check::<Operator>)),
    not_null("values", Node::List(&STRING)),
    f("minValues", INT64),
]);

const NODE_CLASS_REF: Node =
    Node::Object(&[f("group", STRING), f("kind", STRING), f("name", STRING)]);

const CONDITION: Node = Node::Object(&[
    req("type", STRING),
    req("status", Node::Leaf(check::<ConditionStatus>)),
    f("reason", STRING),
    f("message", STRING),
    f("lastTransitionTime", STRING),
    f("observedGeneration", INT64),
]);

const BUDGET: Node = Node::Object(&[
    f("nodes", STRING),
    f("schedule", STRING),
    f("duration", DURATION),
    f(
        "reasons",
        Node::List(&Node::Leaf(check::<DisruptionReason>)),
    ),
]);

const DISRUPTION: Node = Node::Object(&[
    f("consolidateAfter", NILLABLE),
    f(
        "consolidationPolicy",
        Node::Leaf(check::<ConsolidationPolicy>),
    ),
    f("budgets", Node::List(&BUDGET)),
]);

const TEMPLATE_SPEC: Node = Node::Object(&[
    f("taints", Node::List(&TAINT)),
    f("startupTaints", Node::List(&TAINT)),
    f("requirements", Node::List(&REQUIREMENT)),
    req("nodeClassRef", NODE_CLASS_REF),
    f("expireAfter", NILLABLE),
    f("terminationGracePeriod", DURATION),
]);

const TEMPLATE: Node = Node::Object(&[
    f(
        "metadata",
        Node::Object(&[f("labels", STRING_MAP), f("annotations", STRING_MAP)]),
    ),
    req("spec", TEMPLATE_SPEC),
]);

const NODEPOOL_SPEC: Node = Node::Object(&[
    req("template", TEMPLATE),
    f("disruption", DISRUPTION),
    f("limits", RESOURCE_LIST),
    f("weight", INT32),
    f("replicas", INT64),
]);

const NODEPOOL_STATUS: Node = Node::Object(&[
    f("resources", RESOURCE_LIST),
    f("nodes", INT64),
    f("nodeClassObservedGeneration", INT64),
    f("conditions", Node::List(&CONDITION)),
]);

/// The schema of a NodePool.
pub(crate) const NODEPOOL: Node = Node::Object(&[
    not_null("apiVersion", STRING),
    not_null("kind", STRING),
    f("metadata", OBJECT_META),
    req("spec", NODEPOOL_SPEC),
    f("status", NODEPOOL_STATUS),
]);

const NODECLAIM_SPEC: Node = Node::Object(&[
    f("taints", Node::List(&TAINT)),
    f("startupTaints", Node::List(&TAINT)),
    f("requirements", Node::List(&REQUIREMENT)),
    f("resources", Node::Object(&[f("requests", RESOURCE_LIST)])),
    req("nodeClassRef", NODE_CLASS_REF),
    f("terminationGracePeriod", DURATION),
    f("expireAfter", NILLABLE),
]);

const NODECLAIM_STATUS: Node = Node::Object(&[
    f("nodeName", STRING),
    f("providerID", STRING),
    f("imageID", STRING),
    f("capacity", RESOURCE_LIST),
    f("allocatable", RESOURCE_LIST),
    f("conditions", Node::List(&CONDITION)),
    f("lastPodEventTime", STRING),
]);

/// The schema of a NodeClaim.
pub(crate) const NODECLAIM: Node = Node::Object(&[
    not_null("apiVersion", STRING),
    not_null("kind", STRING),
    f("metadata", OBJECT_META),
    req("spec", NODECLAIM_SPEC),
    f("status", NODECLAIM_STATUS),
]);

/// What walking a value found.
#[derive(Default)]
pub(crate) struct Report {
    /// Paths of fields the schema does not define, sorted.
    pub(crate) unknown: Vec<String>,
    /// Values decoding would reject.
    pub(crate) errors: ValidationErrors,
}

/// Walks `value` against `node`.
pub(crate) fn walk(node: &Node, value: &Value) -> Report {
    let mut report = Report::default();
    visit(node, value, &Path::root(), &mut report);
    report.unknown.sort();
    report
}

fn display(path: &Path) -> String {
    if path.0.is_empty() {
        "<root>".to_string()
    } else {
        path.0.clone()
    }
}

fn error(report: &mut Report, path: &Path, kind: ValidationErrorKind, message: String) {
    report.errors.0.push(ValidationError {
        path: display(path),
        kind,
        message,
    });
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "object",
    }
}

fn visit(node: &Node, value: &Value, path: &Path, report: &mut Report) {
    match node {
        Node::Any => {}
        Node::Leaf(check) => {
            if let Err(message) = check(value) {
                let kind = if message.starts_with("unknown variant") {
                    ValidationErrorKind::NotSupported
                } else if message.starts_with("invalid type") {
                    ValidationErrorKind::Type
                } else {
                    ValidationErrorKind::Invalid
                };
                error(report, path, kind, message);
            }
        }
        Node::List(item) => match value {
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    visit(item, v, &path.index(i), report);
                }
            }
            other => error(
                report,
                path,
                ValidationErrorKind::Type,
                format!("expected a list, found {}", type_name(other)),
            ),
        },
        Node::Map(item) => match value {
            Value::Object(map) => {
                for (k, v) in map {
                    visit(item, v, &path.key(k), report);
                }
            }
            other => error(
                report,
                path,
                ValidationErrorKind::Type,
                format!("expected an object, found {}", type_name(other)),
            ),
        },
        Node::Object(fields) => {
            let Value::Object(map) = value else {
                error(
                    report,
                    path,
                    ValidationErrorKind::Type,
                    format!("expected an object, found {}", type_name(value)),
                );
                return;
            };
            for field in fields.iter() {
                let p = path.field(field.name);
                match (map.get(field.name), field.presence) {
                    (None, Presence::Required) | (Some(Value::Null), Presence::Required) => {
                        error(
                            report,
                            &p,
                            ValidationErrorKind::Required,
                            format!("missing field `{}`", field.name),
                        );
                    }
                    (Some(Value::Null), Presence::NotNull) => error(
                        report,
                        &p,
                        ValidationErrorKind::Type,
                        "must not be null".to_string(),
                    ),
                    (None, _) | (Some(Value::Null), Presence::Optional) => {}
                    (Some(v), _) => visit(&field.node, v, &p, report),
                }
            }
            for key in map.keys() {
                if !fields.iter().any(|f| f.name == key) {
                    report.unknown.push(path.field(key).0);
                }
            }
        }
    }
}
