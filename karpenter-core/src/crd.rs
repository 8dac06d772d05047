//! `karpenter.sh/v1` NodePool and NodeClaim as Kubernetes custom resources (feature `kube`).
//!
//! - [`nodepool_crd`] / [`nodeclaim_crd`] build the CustomResourceDefinitions a controller
//!   installs: group `karpenter.sh`, version `v1`, cluster-scoped, status subresource (and the
//!   scale subresource for NodePools, as upstream), upstream's printer columns, and an OpenAPI
//!   schema generated with `schemars` from the [`api`] types, carrying upstream's key validation:
//!   duration patterns, the budget `nodes` / `schedule` / `duration` patterns, weight
//!   `1..=100`, `minValues` `1..=50`, at most 100 requirements and 50 budgets, the operator,
//!   taint-effect, consolidation-policy and reason enums, label-key and label-value patterns,
//!   quantity patterns, the CRD defaults (`expireAfter: 720h`, `consolidateAfter: 0s`, budgets
//!   `[{nodes: 10%}]`, ...) and upstream's CEL rules on requirements, requirement keys and
//!   template labels (the restricted `karpenter.sh` domain and labels), budgets and
//!   `nodeClassRef`.
//! - [`api::NodePool`] and [`api::NodeClaim`] implement
//!   [`CustomResourceExt`](kube::core::CustomResourceExt).
//! - [`KubeNodePool`] and [`KubeNodeClaim`] implement [`kube::Resource`] (plus
//!   [`HasSpec`](kube::core::object::HasSpec) / [`HasStatus`](kube::core::object::HasStatus)), so
//!   `kube::Api<KubeNodePool>` reads and writes NodePools.
//!
//! # Why wrappers
//!
//! `kube::Resource::meta()` must return a reference to `k8s-openapi`'s `ObjectMeta`, while the
//! [`api`] types carry their own [`api::ObjectMeta`] (which keeps timestamps as written and
//! round-trips unknown metadata fields). The API types therefore cannot implement
//! `kube::Resource` themselves; the wrappers hold `k8s-openapi` metadata next to the same
//! `spec` and `status` types and convert from and to the API types
//! ([`KubeNodePool::from_nodepool`], [`KubeNodePool::into_nodepool`]). Both serialise to the
//! same JSON.
//!
//! ```
//! use karpenter_core::crd;
//! use kube::CustomResourceExt;
//!
//! let crd = crd::nodepool_crd();
//! assert_eq!(crd.spec.group, "karpenter.sh");
//! assert_eq!(crd.spec.scope, "Cluster");
//! assert_eq!(karpenter_core::api::NodePool::crd_name(), "nodepools.karpenter.sh");
//! ```

mod wrappers;

pub use self::wrappers::{CrdError, KubeNodeClaim, KubeNodeOverlay, KubeNodePool};

use std::borrow::Cow;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde_json::{Map, Value, json};

use crate::api::{
    self, NillableDuration, NodeClaimSpec, NodeClaimStatus, NodePoolSpec, NodePoolStatus,
};
use crate::requirements::{NodeSelectorRequirement, Operator};
use crate::resources::{Quantity, ResourceList};
use crate::taints::{Taint, TaintEffect};

/// The API group: `karpenter.sh`.
pub const GROUP: &str = "karpenter.sh";
/// The API version: `v1`.
pub const VERSION: &str = "v1";
/// The NodePool CRD's name.
pub const NODEPOOL_CRD_NAME: &str = "nodepools.karpenter.sh";
/// The NodeClaim CRD's name.
pub const NODECLAIM_CRD_NAME: &str = "nodeclaims.karpenter.sh";
/// NodePool short names (`kubectl get np`).
pub const NODEPOOL_SHORT_NAMES: &[&str] = &["np", "nps"];
/// NodeClaim short names (`kubectl get nc`).
pub const NODECLAIM_SHORT_NAMES: &[&str] = &["nc", "ncs"];

// ---------------------------------------------------------------------------------------------
// Patterns (upstream's CRD)
// ---------------------------------------------------------------------------------------------

/// A resource quantity.
const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";
/// A qualified name (label key, taint key).
const QUALIFIED_NAME_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$";
/// A label value.
const LABEL_VALUE_PATTERN: &str = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";
/// `terminationGracePeriod`.
const DURATION_PATTERN: &str = r"^([0-9]+(s|m|h))+$";
/// `expireAfter`, `consolidateAfter`.
const NILLABLE_DURATION_PATTERN: &str = r"^(([0-9]+(s|m|h))+|Never)$";
/// A budget's `duration`: hours and minutes (with the optional `0s` Go's formatting adds).
const BUDGET_DURATION_PATTERN: &str = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$";
/// A budget's `nodes`: a count or a percentage.
const BUDGET_NODES_PATTERN: &str = r"^((100|[0-9]{1,2})%|[0-9]+)$";
/// A budget's `schedule`: a macro or five fields.
const BUDGET_SCHEDULE_PATTERN: &str =
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$";

// ---------------------------------------------------------------------------------------------
// Schemas of the non-`api` types the API types contain
// ---------------------------------------------------------------------------------------------

impl JsonSchema for Quantity {
    fn schema_name() -> Cow<'static, str> {
        "Quantity".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": true
        })
    }
}

impl JsonSchema for ResourceList {
    fn schema_name() -> Cow<'static, str> {
        "ResourceList".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "additionalProperties": generator.subschema_for::<Quantity>()
        })
    }
}

impl JsonSchema for api::Duration {
    fn schema_name() -> Cow<'static, str> {
        "Duration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "pattern": DURATION_PATTERN})
    }
}

impl JsonSchema for NillableDuration {
    fn schema_name() -> Cow<'static, str> {
        "NillableDuration".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "pattern": NILLABLE_DURATION_PATTERN})
    }
}

impl JsonSchema for TaintEffect {
    fn schema_name() -> Cow<'static, str> {
        "TaintEffect".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "The effect of the taint on pods that do not tolerate it.",
            "type": "string",
            "enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]
        })
    }
}

impl JsonSchema for Taint {
    fn schema_name() -> Cow<'static, str> {
        "Taint".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A taint: pods that do not tolerate it are affected by its effect.",
            "type": "object",
            "properties": {
                "key": {
                    "description": "The taint key.",
                    "type": "string",
                    "minLength": 1,
                    "pattern": QUALIFIED_NAME_PATTERN
                },
                "value": {
                    "description": "The taint value.",
                    "type": "string",
                    "pattern": QUALIFIED_NAME_PATTERN
                },
                "effect": generator.subschema_for::<TaintEffect>(),
                "timeAdded": {
                    "description": "When the taint was added.",
                    "type": "string",
                    "format": "date-time"
                }
            },
            "required": ["effect", "key"]
        })
    }
}

impl JsonSchema for Operator {
    fn schema_name() -> Cow<'static, str> {
        "Operator".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "The key's relationship to the values.",
            "type": "string",
            "enum": ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]
        })
    }
}

impl JsonSchema for NodeSelectorRequirement {
    fn schema_name() -> Cow<'static, str> {
        "NodeSelectorRequirement".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A requirement on a node label, with the minimum number of distinct values the candidate instance types must offer.",
            "type": "object",
            "properties": {
                "key": {
                    "description": "The label key.",
                    "type": "string",
                    "maxLength": 316,
                    "pattern": QUALIFIED_NAME_PATTERN
                },
                "operator": generator.subschema_for::<Operator>(),
                "values": {
                    "description": "The values: non-empty for In, empty for Exists and DoesNotExist, one integer for Gt, Lt, Gte and Lte.",
                    "type": "array",
                    "items": {"type": "string", "maxLength": 63, "pattern": LABEL_VALUE_PATTERN},
                    "x-kubernetes-list-type": "atomic"
                },
                "minValues": {
                    "description": "The minimum number of distinct values of the key among the candidate instance types.",
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 50
                }
            },
            "required": ["key", "operator"]
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Schema generation and upstream's extra validation
// ---------------------------------------------------------------------------------------------

/// How [`schema_for`] shapes a generated schema beyond kube's `#[derive(CustomResource)]`
/// settings (OpenAPI v3, everything inlined, `nullable` for options, structural-schema
/// rewrites, optional enums). Built with [`SchemaStyle::new`] and the `with_*` methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SchemaStyle {
    int_or_string: bool,
    strip_defaults: bool,
}

impl SchemaStyle {
    /// kube's derive settings and nothing more.
    pub const fn new() -> Self {
        SchemaStyle {
            int_or_string: false,
            strip_defaults: false,
        }
    }

    /// Int-or-string fields (`x-kubernetes-int-or-string`, such as [`Quantity`]) are written
    /// as Kubernetes writes them, `anyOf: [{type: integer}, {type: string}]`, and an optional
    /// one gets kube's `OptionalIntOrString` rewrite. Karpenter's own CRDs use it.
    pub const fn with_int_or_string(mut self) -> Self {
        self.int_or_string = true;
        self
    }

    /// Every `default` schemars derives from `#[serde(default)]` (empty lists, empty strings)
    /// is removed: a real kube-apiserver rejects a CRD whose default breaks its own schema (an
    /// empty list against `minItems: 1`, `""` against an enum). A CRD's own defaults are patched
    /// in afterwards with [`patch`].
    pub const fn with_defaults_stripped(mut self) -> Self {
        self.strip_defaults = true;
        self
    }

    fn generator(self) -> SchemaGenerator {
        let settings = schemars::generate::SchemaSettings::openapi3()
            .with(|s| {
                s.inline_subschemas = true;
                s.meta_schema = None;
            })
            .with_transform(schemars::transform::AddNullable::default())
            .with_transform(kube::core::schema::StructuralSchemaRewriter)
            .with_transform(kube::core::schema::OptionalEnum);
        if self.int_or_string {
            settings
                .with_transform(kube::core::schema::OptionalIntOrString)
                .into_generator()
        } else {
            settings.into_generator()
        }
    }
}

/// The OpenAPI v3 schema of `T` as JSON, in the given style, without the root's `title` (a
/// CRD's sub-schemas need none). Providers generate their own CRDs' schemas with it, then
/// [`patch`] in upstream's validation.
pub fn schema_for<T: JsonSchema>(style: SchemaStyle) -> Value {
    let mut value = style.generator().into_root_schema_for::<T>().to_value();
    if let Some(map) = value.as_object_mut() {
        map.remove("title");
    }
    if style.int_or_string {
        restore_int_or_string(&mut value);
    }
    if style.strip_defaults {
        strip_defaults(&mut value);
    }
    value
}

/// The style of karpenter.sh's CRDs.
fn schema_value<T: JsonSchema>() -> Value {
    schema_for::<T>(SchemaStyle::new().with_int_or_string())
}

/// kube's structural rewrite hoists the `type`s out of an int-or-string's `anyOf`, leaving
/// empty alternatives; put them back as Kubernetes writes them.
fn restore_int_or_string(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
                map.remove("type");
                map.insert(
                    "anyOf".to_string(),
                    json!([{"type": "integer"}, {"type": "string"}]),
                );
            }
            map.values_mut().for_each(restore_int_or_string);
        }
        Value::Array(items) => items.iter_mut().for_each(restore_int_or_string),
        _ => {}
    }
}

/// Removes every `default` key (see [`SchemaStyle::with_defaults_stripped`]).
fn strip_defaults(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("default");
            map.values_mut().for_each(strip_defaults);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_defaults),
        _ => {}
    }
}

/// The schema object at `path` (`.`-separated property names; a trailing `[]` steps into an
/// array's items). `None` if the path does not exist.
pub fn schema_at<'a>(schema: &'a mut Value, path: &str) -> Option<&'a mut Map<String, Value>> {
    let mut node = schema;
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        let (name, items) = match segment.strip_suffix("[]") {
            Some(name) => (name, true),
            None => (segment, false),
        };
        node = node.get_mut("properties")?.get_mut(name)?;
        if items {
            node = node.get_mut("items")?;
        }
    }
    node.as_object_mut()
}

/// Sets `entries` on the schema at `path` (a `null` entry removes that key); records the path
/// in `missing` if it does not exist. Providers patch their own CRDs' generated schemas with it.
pub fn patch(schema: &mut Value, path: &str, entries: Value, missing: &mut Vec<String>) {
    match (schema_at(schema, path), entries) {
        (Some(node), Value::Object(entries)) => {
            for (key, value) in entries {
                if value.is_null() {
                    node.remove(&key);
                } else {
                    node.insert(key, value);
                }
            }
        }
        _ => missing.push(path.to_string()),
    }
}

/// One `x-kubernetes-validations` entry: a CEL `rule` and the `message` shown when it fails.
pub fn cel(rule: &str, message: &str) -> Value {
    json!({"rule": rule, "message": message})
}

/// The CEL rules upstream puts on a requirements list.
fn requirement_rules() -> Value {
    json!([
        cel(
            "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
            "requirements with operator 'In' must have a value defined",
        ),
        cel(
            "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
            "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
        ),
        cel(
            "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",
            "requirements with 'minValues' must have at least that many values specified in the 'values' field",
        ),
    ])
}

/// Upstream's rule on a label key: the `karpenter.sh` domain is restricted but for the
/// capacity type and NodePool labels (`var` names the key in the CEL expression).
fn restricted_domain_rule(var: &str) -> String {
    format!(
        "{var} in [\"karpenter.sh/capacity-type\", \"karpenter.sh/nodepool\"] || !{var}.find(\"^([^/]+)\").endsWith(\"karpenter.sh\")"
    )
}

/// The CEL rules upstream puts on a requirement's `key`: the restricted `karpenter.sh` domain,
/// `karpenter.sh/nodepool` in a NodePool's template only (a NodeClaim's requirements carry it),
/// and `kubernetes.io/hostname`.
fn requirement_key_rules(nodepool: bool) -> Value {
    let mut rules = vec![cel(
        &restricted_domain_rule("self"),
        "label domain \"karpenter.sh\" is restricted",
    )];
    if nodepool {
        rules.push(cel(
            "self != \"karpenter.sh/nodepool\"",
            "label \"karpenter.sh/nodepool\" is restricted",
        ));
    }
    rules.push(cel(
        "self != \"kubernetes.io/hostname\"",
        "label \"kubernetes.io/hostname\" is restricted",
    ));
    Value::Array(rules)
}

/// The patches shared by a NodePool template's spec and a NodeClaim's spec (`base` is the
/// path of the spec; `nodepool` when it is a NodePool's template).
fn patch_claim_spec(schema: &mut Value, base: &str, nodepool: bool, missing: &mut Vec<String>) {
    patch(
        schema,
        base,
        json!({"required": ["nodeClassRef", "requirements"]}),
        missing,
    );
    patch(
        schema,
        &format!("{base}.requirements"),
        json!({
            "maxItems": 100,
            "x-kubernetes-list-type": "atomic",
            "x-kubernetes-validations": requirement_rules()
        }),
        missing,
    );
    patch(
        schema,
        &format!("{base}.expireAfter"),
        json!({"default": api::DEFAULT_EXPIRE_AFTER}),
        missing,
    );
    patch(
        schema,
        &format!("{base}.nodeClassRef"),
        json!({"required": ["group", "kind", "name"]}),
        missing,
    );
    patch(
        schema,
        &format!("{base}.requirements[].key"),
        json!({"x-kubernetes-validations": requirement_key_rules(nodepool)}),
        missing,
    );
    for (field, extra) in [
        ("group", json!({"pattern": "^[^/]*$"})),
        ("kind", json!({})),
        ("name", json!({})),
    ] {
        let mut entries = json!({
            // The API types default these to "" when absent; the CRD requires them instead.
            "default": null,
            "x-kubernetes-validations": [cel("self != ''", &format!("{field} may not be empty"))]
        });
        if let (Some(e), Value::Object(extra)) = (entries.as_object_mut(), extra) {
            e.extend(extra);
        }
        patch(
            schema,
            &format!("{base}.nodeClassRef.{field}"),
            entries,
            missing,
        );
    }
}

/// The patches of a status' conditions (`base` is the path of the status).
fn patch_conditions(schema: &mut Value, base: &str, missing: &mut Vec<String>) {
    patch(
        schema,
        &format!("{base}.conditions"),
        json!({"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}),
        missing,
    );
    patch(
        schema,
        &format!("{base}.conditions[].lastTransitionTime"),
        json!({"format": "date-time"}),
        missing,
    );
    patch(
        schema,
        &format!("{base}.conditions[].message"),
        json!({"maxLength": 32768}),
        missing,
    );
    patch(
        schema,
        &format!("{base}.conditions[].reason"),
        json!({"maxLength": 1024}),
        missing,
    );
    patch(
        schema,
        &format!("{base}.conditions[].type"),
        json!({"maxLength": 316}),
        missing,
    );
}

/// The root schema of a custom resource with the given spec and status schemas.
fn root_schema(description: &str, spec: Value, status: Value) -> Value {
    json!({
        "description": description,
        "type": "object",
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this representation of an object.",
                "type": "string"
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource this object represents.",
                "type": "string"
            },
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status
        },
        "required": ["spec"]
    })
}

/// The NodePool CRD's OpenAPI schema as JSON, and the paths of patches that found no field
/// (empty unless the API types and this module disagree).
fn nodepool_schema_value() -> (Value, Vec<String>) {
    let mut status = schema_value::<NodePoolStatus>();
    if let Some(s) = status.as_object_mut() {
        s.remove("nullable");
    }
    let mut schema = root_schema(
        "NodePool is the Schema for the NodePools API",
        schema_value::<NodePoolSpec>(),
        status,
    );
    let mut missing = Vec::new();
    let m = &mut missing;
    patch(
        &mut schema,
        "spec.weight",
        json!({"format": "int32", "minimum": 1, "maximum": 100}),
        m,
    );
    patch(
        &mut schema,
        "spec.replicas",
        json!({"format": "int64", "minimum": 0}),
        m,
    );
    patch(
        &mut schema,
        "spec.disruption",
        json!({"default": {"consolidateAfter": api::DEFAULT_CONSOLIDATE_AFTER}}),
        m,
    );
    patch(
        &mut schema,
        "spec.disruption.consolidateAfter",
        json!({"default": api::DEFAULT_CONSOLIDATE_AFTER}),
        m,
    );
    patch(
        &mut schema,
        "spec.disruption.consolidationPolicy",
        json!({"default": "WhenEmptyOrUnderutilized"}),
        m,
    );
    patch(
        &mut schema,
        "spec.disruption.budgets",
        json!({
            "default": [{"nodes": api::DEFAULT_BUDGET_NODES}],
            "maxItems": api::MAX_BUDGETS,
            "x-kubernetes-list-type": "atomic",
            "x-kubernetes-validations": [cel(
                "self.all(x, has(x.schedule) == has(x.duration))",
                "'schedule' must be set with 'duration'",
            )]
        }),
        m,
    );
    patch(
        &mut schema,
        "spec.disruption.budgets[]",
        json!({"required": ["nodes"]}),
        m,
    );
    patch(
        &mut schema,
        "spec.disruption.budgets[].nodes",
        json!({"pattern": BUDGET_NODES_PATTERN, "default": api::DEFAULT_BUDGET_NODES}),
        m,
    );
    patch(
        &mut schema,
        "spec.disruption.budgets[].schedule",
        json!({"pattern": BUDGET_SCHEDULE_PATTERN}),
        m,
    );
    patch(
        &mut schema,
        "spec.disruption.budgets[].duration",
        json!({"pattern": BUDGET_DURATION_PATTERN}),
        m,
    );
    patch(
        &mut schema,
        "spec.disruption.budgets[].reasons",
        json!({"maxItems": api::MAX_BUDGETS, "x-kubernetes-list-type": "set"}),
        m,
    );
    patch(
        &mut schema,
        "spec.template",
        json!({"required": ["spec"]}),
        m,
    );
    patch(
        &mut schema,
        "spec.template.metadata.labels",
        json!({
            "maxProperties": api::MAX_TEMPLATE_LABELS,
            "additionalProperties": {"type": "string", "maxLength": 63, "pattern": LABEL_VALUE_PATTERN},
            "x-kubernetes-validations": [
                cel(
                    &format!("self.all(x, {})", restricted_domain_rule("x")),
                    "label domain \"karpenter.sh\" is restricted",
                ),
                cel("self.all(x, x != \"karpenter.sh/nodepool\")", "label \"karpenter.sh/nodepool\" is restricted"),
                cel("self.all(x, x != \"kubernetes.io/hostname\")", "label \"kubernetes.io/hostname\" is restricted"),
            ]
        }),
        m,
    );
    patch_claim_spec(&mut schema, "spec.template.spec", true, m);
    patch_conditions(&mut schema, "status", m);
    patch(
        &mut schema,
        "spec",
        json!({"x-kubernetes-validations": [
            cel(
                "!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))",
                "only 'limits.nodes' is supported on static NodePools",
            ),
            cel("!has(self.replicas) || !has(self.weight)", "'weight' is not supported on static NodePools"),
        ]}),
        m,
    );
    (schema, missing)
}

/// The NodeClaim CRD's OpenAPI schema as JSON, and the paths of patches that found no field.
fn nodeclaim_schema_value() -> (Value, Vec<String>) {
    let mut schema = root_schema(
        "NodeClaim is the Schema for the NodeClaims API",
        schema_value::<NodeClaimSpec>(),
        schema_value::<NodeClaimStatus>(),
    );
    let mut missing = Vec::new();
    patch_claim_spec(&mut schema, "spec", false, &mut missing);
    patch_conditions(&mut schema, "status", &mut missing);
    patch(
        &mut schema,
        "status.lastPodEventTime",
        json!({"format": "date-time"}),
        &mut missing,
    );
    (schema, missing)
}

/// A schema built as JSON (by [`schema_for`] and [`patch`]) as the CRD's `JSONSchemaProps`.
///
/// Every schema built from API types deserialises; a failure would be a bug the CRD tests
/// catch by comparing the result with the JSON, so this falls back to an open object
/// (`x-kubernetes-preserve-unknown-fields`) rather than panic.
pub fn schema_props(value: Value) -> apiext::JSONSchemaProps {
    serde_json::from_value(value).unwrap_or_else(|_| apiext::JSONSchemaProps {
        type_: Some("object".to_string()),
        x_kubernetes_preserve_unknown_fields: Some(true),
        ..Default::default()
    })
}

fn column(name: &str, json_path: &str, type_: &str, priority: Option<i32>) -> Value {
    let mut c = json!({"name": name, "jsonPath": json_path, "type": type_});
    if let (Some(p), Some(map)) = (priority, c.as_object_mut()) {
        map.insert("priority".to_string(), json!(p));
    }
    c
}

#[allow(clippy::too_many_arguments)]
fn crd(
    version_name: &str,
    kind: &str,
    plural: &str,
    singular: &str,
    short_names: &[&str],
    schema: Value,
    columns: Vec<Value>,
    subresources: Value,
) -> apiext::CustomResourceDefinition {
    let version = json!({
        "name": version_name,
        "served": true,
        "storage": true,
        "additionalPrinterColumns": columns,
        "subresources": subresources,
    });
    let mut version: apiext::CustomResourceDefinitionVersion = serde_json::from_value(version)
        .unwrap_or_else(|_| apiext::CustomResourceDefinitionVersion {
            name: version_name.to_string(),
            served: true,
            storage: true,
            ..Default::default()
        });
    version.schema = Some(apiext::CustomResourceValidation {
        open_api_v3_schema: Some(schema_props(schema)),
    });
    apiext::CustomResourceDefinition {
        metadata: meta::ObjectMeta {
            name: Some(format!("{plural}.{GROUP}")),
            ..Default::default()
        },
        spec: apiext::CustomResourceDefinitionSpec {
            group: GROUP.to_string(),
            names: apiext::CustomResourceDefinitionNames {
                categories: Some(vec!["karpenter".to_string()]),
                kind: kind.to_string(),
                list_kind: Some(format!("{kind}List")),
                plural: plural.to_string(),
                short_names: Some(short_names.iter().map(|s| s.to_string()).collect()),
                singular: Some(singular.to_string()),
            },
            scope: "Cluster".to_string(),
            versions: vec![version],
            ..Default::default()
        },
        status: None,
    }
}

/// The `nodepools.karpenter.sh` CustomResourceDefinition (see the module docs).
pub fn nodepool_crd() -> apiext::CustomResourceDefinition {
    let columns = vec![
        column(
            "NodeClass",
            ".spec.template.spec.nodeClassRef.name",
            "string",
            None,
        ),
        column("Nodes", ".status.nodes", "string", None),
        column(
            "Ready",
            ".status.conditions[?(@.type==\"Ready\")].status",
            "string",
            None,
        ),
        column("Age", ".metadata.creationTimestamp", "date", None),
        column("Weight", ".spec.weight", "integer", Some(1)),
        column("CPU", ".status.resources.cpu", "string", Some(1)),
        column("Memory", ".status.resources.memory", "string", Some(1)),
    ];
    let subresources = json!({
        "status": {},
        "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.nodes"}
    });
    crd(
        VERSION,
        api::NODEPOOL_KIND,
        "nodepools",
        "nodepool",
        NODEPOOL_SHORT_NAMES,
        nodepool_schema_value().0,
        columns,
        subresources,
    )
}

/// The `nodeclaims.karpenter.sh` CustomResourceDefinition (see the module docs).
pub fn nodeclaim_crd() -> apiext::CustomResourceDefinition {
    let label = |name: &str, key: &str, priority| {
        column(
            name,
            &format!(".metadata.labels.{}", key.replace('.', "\\.")),
            "string",
            priority,
        )
    };
    let columns = vec![
        label("Type", crate::labels::INSTANCE_TYPE, None),
        label("Capacity", crate::labels::CAPACITY_TYPE, None),
        label("Zone", crate::labels::ZONE, None),
        column("Node", ".status.nodeName", "string", None),
        column(
            "Ready",
            ".status.conditions[?(@.type==\"Ready\")].status",
            "string",
            None,
        ),
        column("Age", ".metadata.creationTimestamp", "date", None),
        column("ImageID", ".status.imageID", "string", Some(1)),
        column("ID", ".status.providerID", "string", Some(1)),
        label("NodePool", crate::labels::NODEPOOL, Some(1)),
        column("NodeClass", ".spec.nodeClassRef.name", "string", Some(1)),
        column(
            "Drifted",
            ".status.conditions[?(@.type==\"Drifted\")].status",
            "string",
            Some(1),
        ),
    ];
    crd(
        VERSION,
        api::NODECLAIM_KIND,
        "nodeclaims",
        "nodeclaim",
        NODECLAIM_SHORT_NAMES,
        nodeclaim_schema_value().0,
        columns,
        json!({"status": {}}),
    )
}

/// The NodeOverlay CRD's version: `v1alpha1`.
pub const NODEOVERLAY_VERSION: &str = "v1alpha1";
/// The NodeOverlay CRD's name.
pub const NODEOVERLAY_CRD_NAME: &str = "nodeoverlays.karpenter.sh";
/// NodeOverlay short names (`kubectl get overlays`).
pub const NODEOVERLAY_SHORT_NAMES: &[&str] = &["overlays"];

/// The NodeOverlay CRD's OpenAPI schema as JSON, and the paths of patches that found no field.
fn nodeoverlay_schema_value() -> (Value, Vec<String>) {
    let mut schema = root_schema(
        "NodeOverlay is the Schema for the NodeOverlays API",
        schema_value::<api::NodeOverlaySpec>(),
        schema_value::<api::NodeOverlayStatus>(),
    );
    let mut missing = Vec::new();
    let m = &mut missing;
    patch(
        &mut schema,
        "spec",
        json!({
            "required": ["requirements"],
            "x-kubernetes-validations": [cel(
                "!has(self.price) || !has(self.priceAdjustment)",
                "cannot set both 'price' and 'priceAdjustment'",
            )]
        }),
        m,
    );
    let mut rules = vec![cel(
        "self.all(x, x.operator == 'NotIn' ? x.values.size() != 0 : true)",
        "requirements with operator 'NotIn' must have a value defined",
    )];
    if let Value::Array(base) = requirement_rules() {
        // minValues does not exist on an overlay's requirements.
        rules.extend(base.into_iter().take(2));
    }
    patch(
        &mut schema,
        "spec.requirements",
        json!({
            "maxItems": api::MAX_OVERLAY_REQUIREMENTS,
            "x-kubernetes-list-type": "atomic",
            "x-kubernetes-validations": rules,
            "default": null
        }),
        m,
    );
    patch(
        &mut schema,
        "spec.requirements[]",
        json!({"required": ["key", "operator"]}),
        m,
    );
    patch(
        &mut schema,
        "spec.requirements[].key",
        json!({
            "maxLength": 316,
            "pattern": QUALIFIED_NAME_PATTERN,
            "x-kubernetes-validations": requirement_key_rules(false)
        }),
        m,
    );
    patch(
        &mut schema,
        "spec.requirements[].values",
        json!({"x-kubernetes-list-type": "atomic", "default": null}),
        m,
    );
    patch(
        &mut schema,
        "spec.price",
        json!({"pattern": r"^\d+(\.\d+)?$"}),
        m,
    );
    patch(
        &mut schema,
        "spec.priceAdjustment",
        json!({"pattern": r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$"}),
        m,
    );
    patch(
        &mut schema,
        "spec.capacity",
        json!({"x-kubernetes-validations": [cel(
            "self.all(x, !(x in ['cpu', 'memory', 'ephemeral-storage', 'pods']))",
            "invalid resource restricted",
        )]}),
        m,
    );
    patch(
        &mut schema,
        "spec.weight",
        json!({"format": "int32", "minimum": 1, "maximum": 10000}),
        m,
    );
    patch_conditions(&mut schema, "status", m);
    (schema, missing)
}

/// The `nodeoverlays.karpenter.sh` CustomResourceDefinition (`v1alpha1`, upstream's schema
/// rules, printer columns and status subresource).
pub fn nodeoverlay_crd() -> apiext::CustomResourceDefinition {
    let columns = vec![
        column(
            "Ready",
            ".status.conditions[?(@.type==\"Ready\")].status",
            "string",
            None,
        ),
        column("Age", ".metadata.creationTimestamp", "date", None),
        column("Weight", ".spec.weight", "integer", Some(1)),
    ];
    crd(
        NODEOVERLAY_VERSION,
        api::NODEOVERLAY_KIND,
        "nodeoverlays",
        "nodeoverlay",
        NODEOVERLAY_SHORT_NAMES,
        nodeoverlay_schema_value().0,
        columns,
        json!({"status": {}}),
    )
}

#[cfg(test)]
mod tests;
