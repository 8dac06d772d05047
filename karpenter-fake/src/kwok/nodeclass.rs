//! The `KWOKNodeClass` API (`karpenter.kwok.sh/v1alpha1`): the typed object, its readiness and
//! its CustomResourceDefinition.

use karpenter_core::api::{Condition, ConditionStatus, Duration, ObjectMeta, find_condition};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{API_VERSION, GROUP, NODECLASS_KIND, NODECLASS_PLURAL, VERSION};

/// The `Ready` condition type.
pub const CONDITION_READY: &str = "Ready";

/// The `lastTransitionTime` of the `Ready` condition the CRD defaults the status to.
pub const DEFAULT_READY_TRANSITION_TIME: &str = "2024-01-01T01:01:01Z";

/// The singular resource name, `kwoknodeclass`.
pub const NODECLASS_SINGULAR: &str = "kwoknodeclass";

/// The short names, `kwoknc` and `kwokncs`.
pub const NODECLASS_SHORT_NAMES: [&str; 2] = ["kwoknc", "kwokncs"];

/// The resource categories, `karpenter`.
pub const NODECLASS_CATEGORIES: [&str; 1] = ["karpenter"];

/// The pattern the CRD enforces on `spec.nodeRegistrationDelay`.
pub const NODE_REGISTRATION_DELAY_PATTERN: &str = "^([0-9]+(s|m|h))+$";

/// Why a [`KwokNodeClass`] is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KwokNodeClassError {
    /// `spec.nodeRegistrationDelay` does not match [`NODE_REGISTRATION_DELAY_PATTERN`].
    #[error("spec.nodeRegistrationDelay: Invalid value: {0:?}: should match '^([0-9]+(s|m|h))+$'")]
    NodeRegistrationDelay(String),
}

/// A `KWOKNodeClass`: the node class of NodePools launched by the kwok provider.
///
/// A class read without a `status` gets the status the CRD defaults it to: one `Ready=True`
/// condition ([`KwokNodeClassStatus::crd_default`]), as the API server serves it.
///
/// ```
/// use karpenter_fake::kwok::KwokNodeClass;
///
/// let class: KwokNodeClass = serde_json::from_str(
///     r#"{"apiVersion":"karpenter.kwok.sh/v1alpha1","kind":"KWOKNodeClass","metadata":{"name":"default"}}"#,
/// ).unwrap();
/// assert!(class.is_ready());
/// assert_eq!(class.not_ready_message(), None);
/// assert_eq!(class.registration_delay(), std::time::Duration::ZERO);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KwokNodeClass {
    /// `karpenter.kwok.sh/v1alpha1`.
    #[serde(default = "default_api_version")]
    pub api_version: String,
    /// `KWOKNodeClass`.
    #[serde(default = "default_kind")]
    pub kind: String,
    /// Object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The spec.
    #[serde(default)]
    pub spec: KwokNodeClassSpec,
    /// The status; [`KwokNodeClassStatus::crd_default`] when absent.
    #[serde(default = "KwokNodeClassStatus::crd_default")]
    pub status: KwokNodeClassStatus,
}

/// `spec` of a [`KwokNodeClass`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KwokNodeClassSpec {
    /// How long after a launch the kwok provider creates the Node, modelling an instance's boot
    /// time. Unset means no delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_registration_delay: Option<Duration>,
}

/// `status` of a [`KwokNodeClass`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KwokNodeClassStatus {
    /// Status conditions; only `Ready` is defined.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

fn default_api_version() -> String {
    API_VERSION.to_string()
}

fn default_kind() -> String {
    NODECLASS_KIND.to_string()
}

impl KwokNodeClassStatus {
    /// The status the CRD gives a class stored without one: a single condition `Ready=True`,
    /// reason `Ready`, an empty message, `lastTransitionTime` [`DEFAULT_READY_TRANSITION_TIME`].
    pub fn crd_default() -> Self {
        KwokNodeClassStatus {
            conditions: vec![Condition {
                type_: CONDITION_READY.to_string(),
                status: ConditionStatus::True,
                reason: Some(CONDITION_READY.to_string()),
                message: Some(String::new()),
                last_transition_time: Some(DEFAULT_READY_TRANSITION_TIME.to_string()),
                observed_generation: None,
            }],
        }
    }
}

impl KwokNodeClass {
    /// A class named `name` with an empty spec and the CRD's default status (ready).
    pub fn new(name: impl Into<String>) -> Self {
        KwokNodeClass {
            api_version: default_api_version(),
            kind: default_kind(),
            metadata: ObjectMeta::named(name),
            spec: KwokNodeClassSpec::default(),
            status: KwokNodeClassStatus::crd_default(),
        }
    }

    /// The class's name (`""` if unset).
    pub fn name(&self) -> &str {
        self.metadata.name_or_empty()
    }

    /// The `Ready` condition's status; `Unknown` when the class has no `Ready` condition (the
    /// root condition of a status-conditions object reads as `Unknown` until it is set).
    pub fn ready_status(&self) -> ConditionStatus {
        find_condition(&self.status.conditions, CONDITION_READY)
            .map_or(ConditionStatus::Unknown, |c| c.status)
    }

    /// Whether the class is ready (`Ready=True`), which is what makes its NodePools ready.
    pub fn is_ready(&self) -> bool {
        self.ready_status() == ConditionStatus::True
    }

    /// What blocks a launch from this class: `Some(message)` (the `Ready` condition's message,
    /// possibly empty) when `Ready` is `False`; `None` otherwise, including when `Ready` is
    /// `Unknown` or absent (a launch only refuses a class explicitly not ready).
    pub fn not_ready_message(&self) -> Option<String> {
        find_condition(&self.status.conditions, CONDITION_READY)
            .filter(|c| c.status == ConditionStatus::False)
            .map(|c| c.message.clone().unwrap_or_default())
    }

    /// The delay before a launched instance's Node is created: `spec.nodeRegistrationDelay`, or
    /// zero when unset (or negative).
    pub fn registration_delay(&self) -> std::time::Duration {
        self.spec
            .node_registration_delay
            .as_ref()
            .and_then(Duration::to_std)
            .unwrap_or_default()
    }

    /// Checks what the CRD enforces on the spec: `nodeRegistrationDelay` matches
    /// [`NODE_REGISTRATION_DELAY_PATTERN`].
    pub fn validate(&self) -> Result<(), KwokNodeClassError> {
        match &self.spec.node_registration_delay {
            Some(d) if !d.matches_api_pattern() => Err(KwokNodeClassError::NodeRegistrationDelay(
                d.as_str().to_string(),
            )),
            _ => Ok(()),
        }
    }
}

/// The `KWOKNodeClass` CustomResourceDefinition, as JSON ready to apply: cluster-scoped, group
/// `karpenter.kwok.sh`, version `v1alpha1` (served, stored), status subresource, names
/// `kwoknodeclasses` / `kwoknodeclass` / `KWOKNodeClass`, short names `kwoknc` and `kwokncs`,
/// category `karpenter`; `spec.nodeRegistrationDelay` a string matching
/// [`NODE_REGISTRATION_DELAY_PATTERN`]; `status` defaulted to
/// [`KwokNodeClassStatus::crd_default`].
///
/// ```
/// let crd = karpenter_fake::kwok::nodeclass_crd();
/// assert_eq!(crd["metadata"]["name"], "kwoknodeclasses.karpenter.kwok.sh");
/// ```
pub fn nodeclass_crd() -> Value {
    let default_status =
        serde_json::to_value(KwokNodeClassStatus::crd_default()).unwrap_or(Value::Null);
    let condition = json!({
        "type": "object",
        "description": "A status condition.",
        "required": ["lastTransitionTime", "message", "reason", "status", "type"],
        "properties": {
            "lastTransitionTime": {"type": "string", "format": "date-time",
                "description": "When the condition last changed status."},
            "message": {"type": "string", "maxLength": 32768,
                "description": "A human-readable message; may be empty."},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0,
                "description": "The metadata.generation the condition was computed from."},
            "reason": {"type": "string", "minLength": 1, "maxLength": 1024,
                "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
                "description": "A machine-readable reason in CamelCase."},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"],
                "description": "True, False or Unknown."},
            "type": {"type": "string", "maxLength": 316,
                "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
                "description": "The condition type."}
        }
    });
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{NODECLASS_PLURAL}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "names": {
                "categories": NODECLASS_CATEGORIES,
                "kind": NODECLASS_KIND,
                "listKind": format!("{NODECLASS_KIND}List"),
                "plural": NODECLASS_PLURAL,
                "shortNames": NODECLASS_SHORT_NAMES,
                "singular": NODECLASS_SINGULAR
            },
            "scope": "Cluster",
            "versions": [{
                "name": VERSION,
                "served": true,
                "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "The node class of NodePools launched by the kwok provider.",
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": {
                            "type": "object",
                            "properties": {
                                "nodeRegistrationDelay": {
                                    "type": "string",
                                    "pattern": NODE_REGISTRATION_DELAY_PATTERN,
                                    "description": "How long after a launch the Node is created."
                                }
                            }
                        },
                        "status": {
                            "type": "object",
                            "default": default_status,
                            "description": "The resolved state of the node class.",
                            "properties": {
                                "conditions": {"type": "array", "items": condition,
                                    "description": "Readiness signals."}
                            }
                        }
                    }
                }}
            }]
        }
    })
}
