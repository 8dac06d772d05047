//! `karpenter migrate`: v1beta1 NodePools and EC2NodeClasses rewritten as `karpenter.sh/v1` /
//! `karpenter.k8s.aws/v1`, the way upstream's v1 migration guide and its conversion webhooks
//! carry them over, with every change explained.
//!
//! What changes (upstream's v1.0 changelog):
//!
//! - NodePool `spec.disruption.consolidationPolicy: WhenUnderutilized` (also v1beta1's default)
//!   becomes `WhenEmptyOrUnderutilized`, and `consolidateAfter`, required in v1, is `0s` (the
//!   v1beta1 behaviour), or stays `Never` when it was `Never`;
//! - `spec.disruption.expireAfter` moves to `spec.template.spec.expireAfter` (v1beta1's default
//!   `720h` is written out);
//! - `spec.template.spec.kubelet` moves to the referenced EC2NodeClass's `spec.kubelet`. When
//!   NodePools that share a class disagree, each NodePool with a kubelet gets a class of its own
//!   (`<class>-<nodepool>`, a copy of the class with that kubelet) and is pointed at it;
//! - `nodeClassRef {apiVersion, kind, name}` becomes `{group, kind, name}`, all required;
//! - EC2NodeClass `amiFamily` of a known family without `amiSelectorTerms` becomes an alias term
//!   (`al2023@latest`); `Ubuntu` (dropped in v1) becomes `AL2` with Ubuntu's root volume, and
//!   needs `amiSelectorTerms`; v1beta1's `metadataOptions` defaults (hop limit 2) are written
//!   out, since v1's default hop limit is 1;
//! - `terminationGracePeriod` is new in v1 and left unset.
//!
//! What cannot be carried over is an error naming the file, the object and the field: a field
//! v1beta1 does not define, `spec.template.spec.resources`, the removed
//! `karpenter.sh/do-not-consolidate` / `do-not-evict` annotations, `Ubuntu` without
//! `amiSelectorTerms`, a kubelet whose EC2NodeClass is not among the inputs, and anything the
//! result breaks of the v1 validation.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use karpenter_core::api;
use serde_json::{Map, Value, json};

use crate::catalog::aws_label_policy;
use crate::manifests::{Document, ManifestError, Origin, object_name, typed_nodeclass};

mod nodeclass;
use nodeclass::{move_kubelets, nodeclass};

/// The NodePool / NodeClaim API version written.
const CORE_V1: &str = "karpenter.sh/v1";
/// The v1beta1 NodePool / NodeClaim API version read.
const CORE_V1BETA1: &str = "karpenter.sh/v1beta1";
/// The EC2NodeClass API version written.
const AWS_V1: &str = "karpenter.k8s.aws/v1";
/// The v1beta1 EC2NodeClass API version read.
const AWS_V1BETA1: &str = "karpenter.k8s.aws/v1beta1";
/// The group of EC2NodeClass.
const AWS_GROUP: &str = "karpenter.k8s.aws";
/// The kind of the AWS node class.
const EC2NODECLASS: &str = "EC2NodeClass";
/// v1beta1 annotation upstream's webhook wrote for a pinned alias version.
const ALIAS_VERSION_ANNOTATION: &str = "compatibility.karpenter.k8s.aws/v1beta1-alias-version";
/// The NodePool annotation upstream's webhook kept a v1beta1 kubelet in.
const KUBELET_ANNOTATION: &str = "compatibility.karpenter.sh/v1beta1-kubelet-conversion";

/// One change made to an object, or a note about it, for standard error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Where the object came from ([`Origin`]'s text).
    pub origin: String,
    /// `Kind/name` of the object (as read).
    pub object: String,
    /// The field changed (its v1beta1 path), `-` for the whole object.
    pub field: String,
    /// What was done and why.
    pub message: String,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {}: {}",
            self.origin, self.object, self.field, self.message
        )
    }
}

/// One output object.
#[derive(Debug, Clone, PartialEq)]
pub struct Migrated {
    /// Where it came from (a class created for a NodePool names the class it copies).
    pub origin: Origin,
    /// `Kind/name` as written.
    pub object: String,
    /// The object, v1 for NodePools and EC2NodeClasses, unchanged for other kinds.
    pub value: Value,
}

/// The result of [`migrate`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Migration {
    /// Every input object that is kept, migrated, in input order; classes created for
    /// NodePools follow the class they copy.
    pub objects: Vec<Migrated>,
    /// Every change and note, in input order.
    pub changes: Vec<Change>,
}

impl Migration {
    /// The objects as a multi-document YAML stream.
    pub fn to_yaml(&self) -> Result<String, MigrateError> {
        let mut out = String::new();
        for (i, m) in self.objects.iter().enumerate() {
            if i > 0 {
                out.push_str("---\n");
            }
            let text = serde_saphyr::to_string(&m.value).map_err(|e| MigrateError::Render {
                object: m.object.clone(),
                message: e.to_string(),
            })?;
            out.push_str(&text);
            if !text.ends_with('\n') {
                out.push('\n');
            }
        }
        Ok(out)
    }
}

/// Why the inputs could not be migrated (exit status 2, except [`MigrateError::Render`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MigrateError {
    /// Fields that cannot be carried over, or a result that is not valid v1: every one found.
    #[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n"))]
    Cannot(Vec<ManifestError>),
    /// The YAML writer failed (a bug).
    #[error("internal error: writing {object}: {message}")]
    Render {
        /// The object.
        object: String,
        /// The writer's message.
        message: String,
    },
}

impl MigrateError {
    /// The process exit status for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            MigrateError::Cannot(_) => 2,
            MigrateError::Render { .. } => 1,
        }
    }
}

/// The state of one migration run.
struct Run {
    changes: Vec<Change>,
    errors: Vec<ManifestError>,
}

/// The object being migrated: where it is from and its name, for messages.
struct Ctx<'a> {
    origin: &'a Origin,
    object: &'a str,
}

impl Run {
    fn change(&mut self, cx: &Ctx<'_>, field: &str, message: impl Into<String>) {
        self.changes.push(Change {
            origin: cx.origin.to_string(),
            object: cx.object.to_string(),
            field: if field.is_empty() {
                "-".into()
            } else {
                field.into()
            },
            message: message.into(),
        });
    }

    fn error(&mut self, cx: &Ctx<'_>, field: &str, message: impl Into<String>) {
        self.errors
            .push(ManifestError::invalid(cx.origin, cx.object, field, message));
    }

    /// Errors for every key of `map` (at `path`) that v1beta1 does not define.
    fn known_fields(&mut self, cx: &Ctx<'_>, path: &str, map: &Map<String, Value>, known: &[&str]) {
        for key in map.keys() {
            if !known.contains(&key.as_str()) {
                let field = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                self.error(
                    cx,
                    &field,
                    "unknown field: v1beta1 does not define it, so it has no v1 equivalent",
                );
            }
        }
    }
}

/// A NodePool's kubelet, to be moved to its class.
struct KubeletMove {
    /// The index of the NodePool in the output.
    pool: usize,
    /// The NodePool's name.
    pool_name: String,
    /// The class it references.
    class: String,
    /// The kubelet, if it had one.
    kubelet: Option<Value>,
    origin: Origin,
    object: String,
}

/// Rewrites the v1beta1 NodePools and EC2NodeClasses of `docs` to v1. v1 objects are checked
/// and kept (a v1 EC2NodeClass can receive a NodePool's kubelet); v1beta1 NodeClaims are
/// dropped (Karpenter creates them); other objects are kept unchanged. Every change is in
/// [`Migration::changes`]; the output is validated as v1.
pub fn migrate(docs: &[Document]) -> Result<Migration, MigrateError> {
    let mut run = Run {
        changes: Vec::new(),
        errors: Vec::new(),
    };
    let mut objects: Vec<Migrated> = Vec::new();
    let mut moves: Vec<KubeletMove> = Vec::new();
    for doc in docs {
        let object = object_name(&doc.value);
        let cx = Ctx {
            origin: &doc.origin,
            object: &object,
        };
        let text = |k: &str| doc.value.get(k).and_then(Value::as_str).unwrap_or("");
        let (api_version, kind) = (text("apiVersion"), text("kind"));
        match (api_version, kind) {
            (CORE_V1BETA1, "NodePool") => {
                if let Some((value, kubelet, class)) = nodepool(&mut run, &cx, &doc.value) {
                    let pool_name = name_of(&value);
                    moves.push(KubeletMove {
                        pool: objects.len(),
                        pool_name,
                        class,
                        kubelet,
                        origin: doc.origin.clone(),
                        object: object.clone(),
                    });
                    objects.push(Migrated {
                        origin: doc.origin.clone(),
                        object: object.clone(),
                        value,
                    });
                }
            }
            (AWS_V1BETA1, EC2NODECLASS) => {
                if let Some(value) = nodeclass(&mut run, &cx, &doc.value) {
                    objects.push(Migrated {
                        origin: doc.origin.clone(),
                        object: object.clone(),
                        value,
                    });
                }
            }
            (CORE_V1BETA1, "NodeClaim") => run.change(
                &cx,
                "",
                "dropped: NodeClaims are created by Karpenter from NodePools; the v1 controller \
                 makes its own",
            ),
            ("karpenter.sh/v1alpha5", _) | ("karpenter.k8s.aws/v1alpha1", _) => run.error(
                &cx,
                "apiVersion",
                format!(
                    "{api_version} {kind} is older than v1beta1: migrate it to v1beta1 first \
                     (upstream's karpenter-convert tool of v0.32), then run karpenter migrate"
                ),
            ),
            (CORE_V1, "NodePool") => {
                let class = doc
                    .value
                    .pointer("/spec/template/spec/nodeClassRef/name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                moves.push(KubeletMove {
                    pool: objects.len(),
                    pool_name: name_of(&doc.value),
                    class,
                    kubelet: None,
                    origin: doc.origin.clone(),
                    object: object.clone(),
                });
                run.change(&cx, "", "already v1: kept");
                objects.push(Migrated {
                    origin: doc.origin.clone(),
                    object: object.clone(),
                    value: doc.value.clone(),
                });
            }
            (AWS_V1, EC2NODECLASS) => {
                run.change(&cx, "", "already v1: kept");
                objects.push(Migrated {
                    origin: doc.origin.clone(),
                    object: object.clone(),
                    value: doc.value.clone(),
                });
            }
            _ => {
                run.change(&cx, "", "not a v1beta1 Karpenter object: kept unchanged");
                objects.push(Migrated {
                    origin: doc.origin.clone(),
                    object: object.clone(),
                    value: doc.value.clone(),
                });
            }
        }
    }
    move_kubelets(&mut run, &mut objects, &moves);
    validate(&mut run, &objects);
    if !run.errors.is_empty() {
        return Err(MigrateError::Cannot(run.errors));
    }
    Ok(Migration {
        objects,
        changes: run.changes,
    })
}

fn name_of(value: &Value) -> String {
    value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

fn as_map<'a>(
    run: &mut Run,
    cx: &Ctx<'_>,
    field: &str,
    value: Option<&'a Value>,
) -> Option<&'a Map<String, Value>> {
    match value {
        None | Some(Value::Null) => None,
        Some(Value::Object(m)) => Some(m),
        Some(_) => {
            run.error(cx, field, "must be an object");
            None
        }
    }
}

fn str_field<'a>(
    run: &mut Run,
    cx: &Ctx<'_>,
    field: &str,
    value: Option<&'a Value>,
) -> Option<&'a str> {
    match value {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            run.error(cx, field, "must be a string");
            None
        }
    }
}

const NODEPOOL_TOP: &[&str] = &["apiVersion", "kind", "metadata", "spec", "status"];
const NODEPOOL_SPEC: &[&str] = &["template", "disruption", "limits", "weight"];
const TEMPLATE: &[&str] = &["metadata", "spec"];
const TEMPLATE_META: &[&str] = &["labels", "annotations"];
const TEMPLATE_SPEC: &[&str] = &[
    "taints",
    "startupTaints",
    "requirements",
    "resources",
    "kubelet",
    "nodeClassRef",
];
const NODECLASS_REF: &[&str] = &["apiVersion", "kind", "name"];
const DISRUPTION: &[&str] = &[
    "consolidateAfter",
    "consolidationPolicy",
    "expireAfter",
    "budgets",
];
const BUDGET: &[&str] = &["nodes", "schedule", "duration"];
/// A v1beta1 NodePool's kubelet fields: the ones a v1 EC2NodeClass's kubelet takes for every
/// family.
const KUBELET: &[&str] = karpenter_aws::nodeclass::validation::MANAGED_KUBELET_FIELDS;

/// A v1beta1 NodePool as v1, its kubelet (moved out) and the name of its class.
fn nodepool(run: &mut Run, cx: &Ctx<'_>, input: &Value) -> Option<(Value, Option<Value>, String)> {
    let errors_before = run.errors.len();
    let top = as_map(run, cx, "", Some(input))?;
    run.known_fields(cx, "", top, NODEPOOL_TOP);
    let mut out = top.clone();
    out.insert("apiVersion".into(), json!(CORE_V1));
    run.change(cx, "apiVersion", format!("{CORE_V1BETA1} -> {CORE_V1}"));
    if out.remove("status").is_some() {
        run.change(cx, "status", "dropped: the controller writes the status");
    }
    let spec_in = as_map(run, cx, "spec", input.get("spec"))
        .cloned()
        .unwrap_or_default();
    run.known_fields(cx, "spec", &spec_in, NODEPOOL_SPEC);
    let mut spec = spec_in.clone();

    // spec.template
    let template_in = as_map(run, cx, "spec.template", spec_in.get("template"))
        .cloned()
        .unwrap_or_default();
    run.known_fields(cx, "spec.template", &template_in, TEMPLATE);
    let mut template = template_in.clone();
    if let Some(meta) = as_map(
        run,
        cx,
        "spec.template.metadata",
        template_in.get("metadata"),
    ) {
        run.known_fields(cx, "spec.template.metadata", meta, TEMPLATE_META);
        if let Some(annotations) = as_map(
            run,
            cx,
            "spec.template.metadata.annotations",
            meta.get("annotations"),
        ) {
            for removed in [
                "karpenter.sh/do-not-consolidate",
                "karpenter.sh/do-not-evict",
            ] {
                if annotations.contains_key(removed) {
                    run.error(
                        cx,
                        &format!("spec.template.metadata.annotations[{removed}]"),
                        format!(
                            "{removed} is not supported in v1 (removed with v1.0); \
                             karpenter.sh/do-not-disrupt: \"true\" blocks every voluntary \
                             disruption of a node, which is more than {removed} did: choose it \
                             deliberately"
                        ),
                    );
                }
            }
        }
    }
    let tspec_in = as_map(run, cx, "spec.template.spec", template_in.get("spec"))
        .cloned()
        .unwrap_or_default();
    run.known_fields(cx, "spec.template.spec", &tspec_in, TEMPLATE_SPEC);
    let mut tspec = tspec_in.clone();

    // resources: not in v1's NodePool template.
    if let Some(resources) = tspec.remove("resources") {
        let empty = match &resources {
            Value::Null => true,
            Value::Object(m) => m.values().all(|v| match v {
                Value::Null => true,
                Value::Object(r) => r.is_empty(),
                _ => false,
            }),
            _ => false,
        };
        if empty {
            run.change(
                cx,
                "spec.template.spec.resources",
                "dropped: empty, and v1 NodePool templates have no resources",
            );
        } else {
            run.error(
                cx,
                "spec.template.spec.resources",
                "v1 NodePool templates have no resources (upstream's conversion drops them): \
                 remove the field; instance sizes follow the pods' requests",
            );
        }
    }

    // nodeClassRef: {apiVersion, kind, name} -> {group, kind, name}.
    let mut class_name = String::new();
    match as_map(
        run,
        cx,
        "spec.template.spec.nodeClassRef",
        tspec_in.get("nodeClassRef"),
    ) {
        None => run.error(
            cx,
            "spec.template.spec.nodeClassRef",
            "required: the NodePool must name its EC2NodeClass",
        ),
        Some(r) => {
            run.known_fields(cx, "spec.template.spec.nodeClassRef", r, NODECLASS_REF);
            let name = str_field(
                run,
                cx,
                "spec.template.spec.nodeClassRef.name",
                r.get("name"),
            );
            let kind = str_field(
                run,
                cx,
                "spec.template.spec.nodeClassRef.kind",
                r.get("kind"),
            );
            let api_version = str_field(
                run,
                cx,
                "spec.template.spec.nodeClassRef.apiVersion",
                r.get("apiVersion"),
            );
            match name {
                None | Some("") => run.error(
                    cx,
                    "spec.template.spec.nodeClassRef.name",
                    "required: the name of the EC2NodeClass",
                ),
                Some(n) => class_name = n.to_string(),
            }
            let group = match api_version {
                None | Some("") => AWS_GROUP.to_string(),
                Some(v) => v.split('/').next().unwrap_or(v).to_string(),
            };
            let kind = kind.filter(|k| !k.is_empty()).unwrap_or(EC2NODECLASS);
            let mut how = format!(
                "{{apiVersion, kind, name}} -> {{group: {group}, kind: {kind}, name: {class_name}}} \
                 (v1 requires all three"
            );
            if api_version.is_none_or(str::is_empty) || r.get("kind").is_none() {
                how.push_str("; the missing ones default to EC2NodeClass of karpenter.k8s.aws");
            }
            how.push(')');
            run.change(cx, "spec.template.spec.nodeClassRef", how);
            tspec.insert(
                "nodeClassRef".into(),
                json!({"group": group, "kind": kind, "name": class_name}),
            );
        }
    }

    // kubelet: moved to the EC2NodeClass (below, once every class is read).
    let kubelet = tspec.remove("kubelet").filter(|k| !k.is_null());
    if let Some(k) = &kubelet {
        match k.as_object() {
            Some(m) => run.known_fields(cx, "spec.template.spec.kubelet", m, KUBELET),
            None => run.error(cx, "spec.template.spec.kubelet", "must be an object"),
        }
    }

    // disruption
    let disruption_in = as_map(run, cx, "spec.disruption", spec_in.get("disruption"))
        .cloned()
        .unwrap_or_default();
    run.known_fields(cx, "spec.disruption", &disruption_in, DISRUPTION);
    if let Some(budgets) = disruption_in.get("budgets").and_then(Value::as_array) {
        for (i, b) in budgets.iter().enumerate() {
            if let Some(m) = b.as_object() {
                run.known_fields(cx, &format!("spec.disruption.budgets[{i}]"), m, BUDGET);
            }
        }
    }
    let mut disruption = disruption_in.clone();
    let policy = str_field(
        run,
        cx,
        "spec.disruption.consolidationPolicy",
        disruption_in.get("consolidationPolicy"),
    );
    let after = str_field(
        run,
        cx,
        "spec.disruption.consolidateAfter",
        disruption_in.get("consolidateAfter"),
    );
    match policy {
        None | Some("WhenUnderutilized") => {
            let default = if policy.is_none() {
                " (v1beta1's default)"
            } else {
                ""
            };
            disruption.insert(
                "consolidationPolicy".into(),
                json!("WhenEmptyOrUnderutilized"),
            );
            run.change(
                cx,
                "spec.disruption.consolidationPolicy",
                format!("WhenUnderutilized{default} -> WhenEmptyOrUnderutilized (renamed in v1)"),
            );
            match after {
                Some("Never") => run.change(
                    cx,
                    "spec.disruption.consolidateAfter",
                    "kept Never: consolidation stays off (upstream's webhook would write 0s, \
                     which turns it on)",
                ),
                Some(other) => run.error(
                    cx,
                    "spec.disruption.consolidateAfter",
                    format!(
                        "consolidateAfter: {other} with WhenUnderutilized is invalid in v1beta1 \
                         (only Never is allowed)"
                    ),
                ),
                None => {
                    disruption.insert("consolidateAfter".into(), json!("0s"));
                    run.change(
                        cx,
                        "spec.disruption.consolidateAfter",
                        "set to 0s: v1 requires it, and 0s consolidates as soon as v1beta1's \
                         WhenUnderutilized did",
                    );
                }
            }
        }
        Some("WhenEmpty") => {
            if after.is_none() {
                run.error(
                    cx,
                    "spec.disruption.consolidateAfter",
                    "required with consolidationPolicy WhenEmpty (v1beta1 and v1)",
                );
            }
        }
        Some(other) => run.error(
            cx,
            "spec.disruption.consolidationPolicy",
            format!("Unsupported value: {other:?}: v1beta1 allows WhenEmpty or WhenUnderutilized"),
        ),
    }
    let expire = disruption.remove("expireAfter");
    let expire = match expire {
        Some(Value::String(s)) => {
            run.change(
                cx,
                "spec.disruption.expireAfter",
                format!(
                    "moved to spec.template.spec.expireAfter ({s}); in v1 expiry is forceful (no \
                     wait for a replacement or for PDBs) and changing it drifts nodes"
                ),
            );
            s
        }
        None | Some(Value::Null) => {
            run.change(
                cx,
                "spec.disruption.expireAfter",
                "unset: v1beta1's default 720h is written to spec.template.spec.expireAfter; in \
                 v1 expiry is forceful (no wait for a replacement or for PDBs)",
            );
            "720h".to_string()
        }
        Some(_) => {
            run.error(cx, "spec.disruption.expireAfter", "must be a string");
            String::new()
        }
    };
    tspec.insert("expireAfter".into(), json!(expire));
    run.change(
        cx,
        "spec.template.spec.terminationGracePeriod",
        "new in v1 and left unset: draining waits for every pod, as in v1beta1",
    );
    spec.insert("disruption".into(), Value::Object(disruption));

    template.insert("spec".into(), Value::Object(tspec));
    spec.insert("template".into(), Value::Object(template));
    out.insert("spec".into(), Value::Object(spec));
    if let Some(Value::Object(meta)) = out.get_mut("metadata")
        && let Some(Value::Object(annotations)) = meta.get_mut("annotations")
        && annotations.remove(KUBELET_ANNOTATION).is_some()
    {
        run.change(
            cx,
            &format!("metadata.annotations[{KUBELET_ANNOTATION}]"),
            "dropped: the kubelet lives in the EC2NodeClass in v1",
        );
    }
    if run.errors.len() > errors_before {
        return None;
    }
    Some((Value::Object(out), kubelet, class_name))
}

/// Checks every NodePool and EC2NodeClass of the output as v1.
fn validate(run: &mut Run, objects: &[Migrated]) {
    let policy = aws_label_policy();
    for o in objects {
        let text = |k: &str| o.value.get(k).and_then(Value::as_str).unwrap_or("");
        let origin = o.origin.to_string();
        match (text("apiVersion"), text("kind")) {
            (CORE_V1, "NodePool") => {
                let parsed = match api::nodepool_from_value(o.value.clone()) {
                    Ok(p) => p,
                    Err(api::ApiError::Schema { errors, .. }) => {
                        for e in errors.0 {
                            run.errors.push(ManifestError::invalid(
                                &origin,
                                &o.object,
                                e.path.clone(),
                                format!("not valid v1: {}", e.message),
                            ));
                        }
                        continue;
                    }
                    Err(e) => {
                        run.errors.push(ManifestError::invalid(
                            &origin,
                            &o.object,
                            "",
                            format!("not valid v1: {e}"),
                        ));
                        continue;
                    }
                };
                for f in &parsed.unknown_fields {
                    run.errors.push(ManifestError::invalid(
                        &origin,
                        &o.object,
                        f.clone(),
                        "not valid v1: unknown field",
                    ));
                }
                if let Err(errs) = parsed.object.validate(&policy) {
                    for e in errs.errors() {
                        run.errors.push(ManifestError::invalid(
                            &origin,
                            &o.object,
                            e.path.clone(),
                            format!("not valid v1: {}", e.message),
                        ));
                    }
                }
            }
            (AWS_V1, EC2NODECLASS) => {
                if let Err(e) = typed_nodeclass(&origin, &o.object, &o.value) {
                    run.errors.push(match e {
                        ManifestError::Invalid {
                            origin,
                            object,
                            field,
                            message,
                        } => ManifestError::Invalid {
                            origin,
                            object,
                            field,
                            message: format!("not valid v1: {message}"),
                        },
                        other => other,
                    });
                }
            }
            _ => {}
        }
    }
}
