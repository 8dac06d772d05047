//! Reading `-f` inputs: files, directories (recursively, `*.yaml`, `*.yml`, `*.json` in sorted
//! path order) and standard input; splitting multi-document YAML; expanding `kind: List`; and
//! decoding each document by `apiVersion` / `kind` into typed objects.
//!
//! Every object keeps its [`Origin`] (file, document index, list item) so that an error can name
//! the file, the document, the object and the field.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass};
use karpenter_aws::nodeclass::EC2NodeClass;
use karpenter_core::api::{self, ApiError, NodeClaim, NodePool, ValidationErrors};
use karpenter_core::world::WorldError;
pub use karpenter_core::world::{Located, Workload};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// One `-f` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A file or a directory.
    Path(PathBuf),
    /// Standard input (`-f -`).
    Stdin,
}

impl Input {
    /// `-` is standard input; anything else a path.
    pub fn parse(arg: &str) -> Input {
        if arg == "-" {
            Input::Stdin
        } else {
            Input::Path(PathBuf::from(arg))
        }
    }
}

/// Where a document came from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Origin {
    /// The file as given (or found under a directory), `<stdin>` for standard input.
    pub file: String,
    /// The document's index in the file, counting from 1 (empty documents count).
    pub document: usize,
    /// The index in a `kind: List`'s `items`, if the object came from one.
    pub item: Option<usize>,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: document {}", self.file, self.document)?;
        if let Some(i) = self.item {
            write!(f, ", items[{i}]")?;
        }
        Ok(())
    }
}

/// Why the input is invalid (exit status 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// A file or directory could not be read.
    #[error("{path}: {message}")]
    Read {
        /// The path.
        path: String,
        /// The I/O error.
        message: String,
    },
    /// A document is not valid YAML or JSON.
    #[error("{origin}: {message}")]
    Syntax {
        /// Where.
        origin: Origin,
        /// The parser's message (with a line number relative to the file).
        message: String,
    },
    /// An object breaks its schema or a validation rule.
    #[error("{origin}: {object}: {field}: {message}")]
    Invalid {
        /// Where ([`Origin`]'s text).
        origin: String,
        /// `Kind/name` or `Kind/namespace/name`.
        object: String,
        /// The field path (`spec.template.spec.requirements[0].operator`); `-` for the whole
        /// object.
        field: String,
        /// What is wrong.
        message: String,
    },
}

impl ManifestError {
    /// An [`ManifestError::Invalid`] error.
    pub fn invalid(
        origin: impl fmt::Display,
        object: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        let field = field.into();
        ManifestError::Invalid {
            origin: origin.to_string(),
            object: object.into(),
            field: if field.is_empty() { "-".into() } else { field },
            message: message.into(),
        }
    }
}

/// A raw document: a JSON value and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Document {
    /// Where it came from.
    pub origin: Origin,
    /// The decoded document.
    pub value: Value,
}

/// Reads every input into documents (empty documents dropped, `kind: List` expanded), in
/// argument order; directories contribute their files in sorted path order.
pub fn read_inputs(inputs: &[Input], stdin: &mut dyn Read) -> Result<Vec<Document>, ManifestError> {
    let mut out = Vec::new();
    for input in inputs {
        match input {
            Input::Stdin => {
                let mut text = String::new();
                stdin
                    .read_to_string(&mut text)
                    .map_err(|e| ManifestError::Read {
                        path: "<stdin>".into(),
                        message: e.to_string(),
                    })?;
                out.extend(documents_from_str("<stdin>", &text, false)?);
            }
            Input::Path(path) => {
                for file in collect_files(path)? {
                    let name = file.display().to_string();
                    let text = std::fs::read_to_string(&file).map_err(|e| ManifestError::Read {
                        path: name.clone(),
                        message: e.to_string(),
                    })?;
                    let json = file.extension().is_some_and(|e| e == "json");
                    out.extend(documents_from_str(&name, &text, json)?);
                }
            }
        }
    }
    Ok(out)
}

fn is_manifest(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
}

/// The files of a path: the path itself if it is a file (whatever its extension), else the
/// manifests under it, recursively, sorted by path.
fn collect_files(path: &Path) -> Result<Vec<PathBuf>, ManifestError> {
    let read_err = |p: &Path, e: std::io::Error| ManifestError::Read {
        path: p.display().to_string(),
        message: e.to_string(),
    };
    let meta = std::fs::metadata(path).map_err(|e| read_err(path, e))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| read_err(&dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| read_err(&dir, e))?;
            let p = entry.path();
            let ft = entry.file_type().map_err(|e| read_err(&p, e))?;
            if ft.is_dir() {
                stack.push(p);
            } else if is_manifest(&p) {
                files.push(p);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Whether a line starts a new YAML document (`---` at column 0).
fn is_document_start(line: &str) -> bool {
    line == "---"
        || line.starts_with("--- ")
        || line.starts_with("---\t")
        || line.trim_end() == "---"
}

/// Whether a line ends a YAML document (`...` at column 0).
fn is_document_end(line: &str) -> bool {
    line.trim_end() == "..."
}

/// Splits a stream into documents: (first line number, text). The text of a `--- <content>`
/// line keeps its content.
fn split_documents(text: &str) -> Vec<(usize, String)> {
    let mut docs: Vec<(usize, String)> = Vec::new();
    let mut current = String::new();
    let mut start = 1;
    let mut seen_content = false;
    for (i, line) in text.lines().enumerate() {
        let line_no = i + 1;
        if is_document_start(line) {
            if seen_content || !current.trim().is_empty() {
                docs.push((start, std::mem::take(&mut current)));
            }
            current.clear();
            seen_content = true;
            start = line_no;
            let rest = line.get(3..).unwrap_or("").trim_start();
            // Keep line numbers aligned: the rest stays on the document's first line.
            current.push_str(rest);
            current.push('\n');
            continue;
        }
        if is_document_end(line) {
            docs.push((start, std::mem::take(&mut current)));
            seen_content = false;
            start = line_no + 1;
            continue;
        }
        if current.is_empty() {
            start = line_no;
        }
        current.push_str(line);
        current.push('\n');
        if !line.trim().is_empty() && !line.trim_start().starts_with('#') {
            seen_content = true;
        }
    }
    if !current.trim().is_empty() {
        docs.push((start, current));
    }
    docs
}

/// Parses a file's text into documents. JSON files are one JSON document; YAML streams are split
/// on `---`. Empty and `null` documents are dropped (they still count for the index).
pub fn documents_from_str(
    file: &str,
    text: &str,
    json: bool,
) -> Result<Vec<Document>, ManifestError> {
    let mut out = Vec::new();
    if json {
        let origin = Origin {
            file: file.to_string(),
            document: 1,
            item: None,
        };
        let value: Value = serde_json::from_str(text).map_err(|e| ManifestError::Syntax {
            origin: origin.clone(),
            message: format!("invalid JSON: {e}"),
        })?;
        push_document(&mut out, origin, value);
        return Ok(out);
    }
    for (index, (first_line, doc)) in split_documents(text).into_iter().enumerate() {
        let origin = Origin {
            file: file.to_string(),
            document: index + 1,
            item: None,
        };
        if doc
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
        {
            continue;
        }
        let value: Value = serde_saphyr::from_str_with_options(&doc, yaml_options(doc.len()))
            .map_err(|e| ManifestError::Syntax {
                origin: origin.clone(),
                message: format!(
                    "invalid YAML (document starting at line {first_line}): {}",
                    first_line_of(&e.to_string())
                ),
            })?;
        push_document(&mut out, origin, value);
    }
    Ok(out)
}

/// The YAML parser's limits for a document of `bytes` bytes. The default budget (250,000
/// nodes, a million events) refuses a `kubectl get pods -o yaml` dump of a few thousand pods;
/// a node or event needs at least one byte of text, so limits that grow with the text admit any
/// dump while alias expansion (the attack the budget is for) stays limited as by default.
fn yaml_options(bytes: usize) -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_nodes = budget.max_nodes.max(bytes);
    budget.max_events = budget.max_events.max(bytes.saturating_mul(2));
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

fn first_line_of(message: &str) -> String {
    message.lines().next().unwrap_or(message).to_string()
}

/// Adds a document, expanding lists (`kind: List` or `*List` with `items`); list items are
/// moved, not copied.
fn push_document(out: &mut Vec<Document>, origin: Origin, mut value: Value) {
    if value.is_null() {
        return;
    }
    let is_list = value
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k == "List" || (k.ends_with("List") && value.get("items").is_some()));
    if is_list && let Some(Value::Array(items)) = value.get_mut("items") {
        for (i, item) in std::mem::take(items).into_iter().enumerate() {
            if item.is_null() {
                continue;
            }
            out.push(Document {
                origin: Origin {
                    item: Some(i),
                    ..origin.clone()
                },
                value: item,
            });
        }
        return;
    }
    out.push(Document { origin, value });
}

/// An `EC2NodeClass` (`karpenter.k8s.aws/v1`), validated but kept as its JSON value: the
/// planner reads only the fields that shape instance types.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeClass {
    /// `metadata.name`.
    pub name: String,
    /// The whole object.
    pub value: Value,
}

/// The input documents, decoded and sorted by kind.
#[derive(Debug, Clone, Default)]
pub struct Manifests {
    /// `karpenter.sh/v1 NodePool`s (not yet validated against a label policy).
    pub nodepools: Vec<Located<NodePool>>,
    /// `karpenter.sh/v1 NodeClaim`s.
    pub nodeclaims: Vec<Located<NodeClaim>>,
    /// `karpenter.k8s.aws/v1 EC2NodeClass`es.
    pub nodeclasses: Vec<Located<NodeClass>>,
    /// `karpenter.sh/v1alpha1 NodeOverlay`s, valid under upstream's CRD rules.
    pub overlays: Vec<Located<api::NodeOverlay>>,
    /// `v1 Node`s.
    pub nodes: Vec<Located<Node>>,
    /// `v1 Pod`s, bound or pending.
    pub pods: Vec<Located<Pod>>,
    /// Deployments, ReplicaSets, StatefulSets and Jobs.
    pub workloads: Vec<Located<Workload>>,
    /// `apps/v1 DaemonSet`s.
    pub daemonsets: Vec<Located<DaemonSet>>,
    /// `policy/v1 PodDisruptionBudget`s.
    pub pdbs: Vec<Located<PodDisruptionBudget>>,
    /// `v1 PersistentVolumeClaim`s.
    pub claims: Vec<Located<PersistentVolumeClaim>>,
    /// `v1 PersistentVolume`s.
    pub volumes: Vec<Located<PersistentVolume>>,
    /// `storage.k8s.io/v1 StorageClass`es.
    pub storage_classes: Vec<Located<StorageClass>>,
    /// `storage.k8s.io/v1 CSINode`s (nodes' per-driver volume limits).
    pub csinodes: Vec<Located<CSINode>>,
    /// Things worth telling the user on standard error: skipped kinds, ignored fields.
    pub notices: Vec<String>,
}

/// `Kind/name` or `Kind/namespace/name` of a raw document.
pub fn object_name(value: &Value) -> String {
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("?");
    let meta = value.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("<unnamed>");
    match meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
    {
        Some(ns) if is_namespaced(kind) => format!("{kind}/{ns}/{name}"),
        _ if is_namespaced(kind) => format!("{kind}/default/{name}"),
        _ => format!("{kind}/{name}"),
    }
}

fn is_namespaced(kind: &str) -> bool {
    !matches!(
        kind,
        "Node"
            | "NodePool"
            | "NodeClaim"
            | "EC2NodeClass"
            | "Provisioner"
            | "AWSNodeTemplate"
            | "Machine"
            | "NodeOverlay"
            | "Namespace"
            | "PersistentVolume"
            | "StorageClass"
            | "CSINode"
            | "?"
    )
}

/// Decodes a k8s-openapi object, naming the field of a decoding error.
fn decode<T: DeserializeOwned>(doc: &Document, object: &str) -> Result<T, ManifestError> {
    serde_path_to_error::deserialize(doc.value.clone()).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        ManifestError::invalid(&doc.origin, object, field, e.into_inner().to_string())
    })
}

fn located<T>(doc: &Document, name: &str, object: T) -> Located<T> {
    Located::new(doc.origin.to_string(), name, object)
}

/// Decodes the documents by `apiVersion` / `kind`. Unknown kinds and non-objects become
/// notices; schema errors are fatal.
pub fn classify(docs: &[Document]) -> Result<Manifests, ManifestError> {
    let mut m = Manifests::default();
    for doc in docs {
        let name = object_name(&doc.value);
        if !doc.value.is_object() {
            m.notices
                .push(format!("{}: skipped: not a Kubernetes object", doc.origin));
            continue;
        }
        let api_version = doc
            .value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = doc.value.get("kind").and_then(Value::as_str).unwrap_or("");
        match (api_version, kind) {
            ("karpenter.sh/v1", "NodePool" | "NodeClaim") => {
                let parsed = api::object_from_value(doc.value.clone())
                    .map_err(|e| api_error(doc, &name, e))?;
                for field in &parsed.unknown_fields {
                    m.notices.push(format!(
                        "{}: {name}: unknown field {field} (ignored)",
                        doc.origin
                    ));
                }
                match parsed.object {
                    api::Object::NodePool(p) => m.nodepools.push(located(doc, &name, *p)),
                    api::Object::NodeClaim(c) => m.nodeclaims.push(located(doc, &name, *c)),
                }
            }
            (api::NODEOVERLAY_API_VERSION, api::NODEOVERLAY_KIND) => {
                let overlay: api::NodeOverlay = decode(doc, &name)?;
                if let Err(errors) = overlay.validate() {
                    let first = &errors.errors()[0];
                    return Err(ManifestError::invalid(
                        &doc.origin,
                        &name,
                        first.path.clone(),
                        errors.to_string(),
                    ));
                }
                m.overlays.push(located(doc, &name, overlay));
            }
            ("karpenter.k8s.aws/v1", "EC2NodeClass") => {
                let class = validate_nodeclass(doc, &name)?;
                m.nodeclasses.push(located(doc, &name, class));
            }
            ("v1", "Node") => m.nodes.push(located(doc, &name, decode(doc, &name)?)),
            ("v1", "Pod") => m.pods.push(located(doc, &name, decode(doc, &name)?)),
            ("apps/v1", "Deployment") => m.workloads.push(located(
                doc,
                &name,
                Workload::Deployment(Box::new(decode(doc, &name)?)),
            )),
            ("apps/v1", "ReplicaSet") => m.workloads.push(located(
                doc,
                &name,
                Workload::ReplicaSet(Box::new(decode(doc, &name)?)),
            )),
            ("apps/v1", "StatefulSet") => m.workloads.push(located(
                doc,
                &name,
                Workload::StatefulSet(Box::new(decode(doc, &name)?)),
            )),
            ("batch/v1", "Job") => m.workloads.push(located(
                doc,
                &name,
                Workload::Job(Box::new(decode(doc, &name)?)),
            )),
            ("apps/v1", "DaemonSet") => {
                m.daemonsets.push(located(doc, &name, decode(doc, &name)?))
            }
            ("policy/v1", "PodDisruptionBudget") => {
                m.pdbs.push(located(doc, &name, decode(doc, &name)?))
            }
            ("v1", "PersistentVolumeClaim") => {
                m.claims.push(located(doc, &name, decode(doc, &name)?))
            }
            ("v1", "PersistentVolume") => {
                m.volumes.push(located(doc, &name, decode(doc, &name)?))
            }
            ("storage.k8s.io/v1", "StorageClass") => {
                m.storage_classes
                    .push(located(doc, &name, decode(doc, &name)?))
            }
            ("storage.k8s.io/v1", "CSINode") => {
                m.csinodes.push(located(doc, &name, decode(doc, &name)?))
            }
            ("", _) | (_, "") => m.notices.push(format!(
                "{}: skipped: no apiVersion/kind (a fragment?)",
                doc.origin
            )),
            _ => m.notices.push(format!(
                "{}: {name}: skipped: {api_version} {kind} is not an input kind of `karpenter plan`",
                doc.origin
            )),
        }
    }
    Ok(m)
}

fn api_error(doc: &Document, name: &str, e: ApiError) -> ManifestError {
    match e {
        ApiError::Schema { errors, .. } => {
            // Name the first field; list the others in the message.
            let mut iter = errors.0.into_iter();
            match iter.next() {
                Some(first) => {
                    let rest: Vec<String> = iter.map(|e| e.to_string()).collect();
                    let mut message = first.message.clone();
                    if !rest.is_empty() {
                        message = format!("{message} (also: {})", rest.join("; "));
                    }
                    ManifestError::invalid(&doc.origin, name, first.path, message)
                }
                None => ManifestError::invalid(&doc.origin, name, "", "invalid object"),
            }
        }
        other => ManifestError::invalid(&doc.origin, name, "", other.to_string()),
    }
}

impl From<WorldError> for ManifestError {
    fn from(e: WorldError) -> Self {
        match e {
            WorldError::Invalid {
                origin,
                object,
                field,
                message,
            } => ManifestError::Invalid {
                origin,
                object,
                field,
                message,
            },
            // A kind of world error this binary does not know yet: still an input error.
            other => ManifestError::invalid("-", "-", "-", other.to_string()),
        }
    }
}

/// The EC2NodeClass checks of the v1 CRD: the document is decoded as `karpenter-aws`'s typed
/// EC2NodeClass and validated with upstream's CRD rules; the first offending field is named.
fn validate_nodeclass(doc: &Document, name: &str) -> Result<NodeClass, ManifestError> {
    let class = typed_nodeclass(&doc.origin.to_string(), name, &doc.value)?;
    Ok(NodeClass {
        name: class.name().to_string(),
        value: doc.value.clone(),
    })
}

/// Decodes an EC2NodeClass document as the typed class and validates it with upstream's CRD
/// rules ([`EC2NodeClass::validate`]); errors name the first offending field and list every
/// violation.
pub fn typed_nodeclass(
    origin: &str,
    object: &str,
    value: &Value,
) -> Result<EC2NodeClass, ManifestError> {
    let class = EC2NodeClass::from_json_value(value.clone()).map_err(|e| {
        ManifestError::invalid(
            origin,
            object,
            e.path,
            format!("Invalid value: {}", e.message),
        )
    })?;
    class
        .validate()
        .map_err(|errs| nodeclass_error(origin, object, errs))?;
    Ok(class)
}

/// A ManifestError naming the first field of `errs` and listing every violation.
pub(crate) fn nodeclass_error(origin: &str, object: &str, errs: ValidationErrors) -> ManifestError {
    let first = errs
        .errors()
        .first()
        .map(|e| e.path.clone())
        .unwrap_or_default();
    let message = errs
        .errors()
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let text = e.to_string();
            match (i, text.strip_prefix(&format!("{}: ", e.path))) {
                (0, Some(rest)) => rest.to_string(),
                _ => text,
            }
        })
        .collect::<Vec<_>>()
        .join("; ");
    ManifestError::invalid(origin, object, first, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_documents_and_counts_empty_ones() {
        let text = "---\na: 1\n---\n# only a comment\n---\nb: 2\n...\n--- {c: 3}\n";
        let docs = documents_from_str("f.yaml", text, false).unwrap();
        let got: Vec<(usize, Value)> = docs
            .iter()
            .map(|d| (d.origin.document, d.value.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, serde_json::json!({"a": 1})),
                (3, serde_json::json!({"b": 2})),
                (4, serde_json::json!({"c": 3})),
            ]
        );
    }

    #[test]
    fn expands_lists_with_item_indices() {
        let text = "apiVersion: v1\nkind: List\nitems:\n- {kind: Pod}\n- null\n- {kind: Node}\n";
        let docs = documents_from_str("f.yaml", text, false).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].origin.item, Some(2));
        assert_eq!(docs[1].origin.to_string(), "f.yaml: document 1, items[2]");
    }

    #[test]
    fn syntax_errors_name_the_document() {
        let err = documents_from_str("f.yaml", "a: 1\n---\nb: [1,\n", false).unwrap_err();
        match err {
            ManifestError::Syntax { origin, message } => {
                assert_eq!(origin.document, 2);
                assert!(message.contains("line 2"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert!(documents_from_str("f.json", "{", true).is_err());
    }

    #[test]
    fn decode_errors_name_the_field() {
        let docs = documents_from_str(
            "d.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: many\n  selector: {}\n  template: {}\n",
            false,
        )
        .unwrap();
        let err = classify(&docs).unwrap_err();
        match err {
            ManifestError::Invalid { object, field, .. } => {
                assert_eq!(object, "Deployment/default/web");
                assert_eq!(field, "spec.replicas");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unknown_kinds_are_notices() {
        let docs = documents_from_str(
            "x.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\nfoo: bar\n---\n- 1\n",
            false,
        )
        .unwrap();
        let m = classify(&docs).unwrap();
        assert_eq!(m.notices.len(), 3, "{:?}", m.notices);
        assert!(m.notices[0].contains("ConfigMap/default/c"));
    }

    #[test]
    fn storage_kinds_are_decoded() {
        let text = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: db}\nspec: {storageClassName: gp3}\n---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv-1}\nspec: {csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}}\n---\napiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: gp3}\nprovisioner: ebs.csi.aws.com\n---\napiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {name: node-1}\nspec: {drivers: [{name: ebs.csi.aws.com, nodeID: i-1, allocatable: {count: 25}}]}\n";
        let m = classify(&documents_from_str("s.yaml", text, false).unwrap()).unwrap();
        assert!(m.notices.is_empty(), "{:?}", m.notices);
        assert_eq!(m.claims[0].name, "PersistentVolumeClaim/db/data");
        assert_eq!(m.volumes[0].name, "PersistentVolume/pv-1");
        assert_eq!(m.storage_classes[0].name, "StorageClass/gp3");
        assert_eq!(m.csinodes[0].name, "CSINode/node-1");
    }

    #[test]
    fn nodeclass_validation() {
        let ok = "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: default}\nspec:\n  role: r\n  amiSelectorTerms: [{alias: al2023@latest}]\n  subnetSelectorTerms: [{tags: {a: b}}]\n  securityGroupSelectorTerms: [{tags: {a: b}}]\n";
        let m = classify(&documents_from_str("c.yaml", ok, false).unwrap()).unwrap();
        assert_eq!(m.nodeclasses[0].object.name, "default");
        let bad = ok.replace("  subnetSelectorTerms: [{tags: {a: b}}]\n", "");
        let err = classify(&documents_from_str("c.yaml", &bad, false).unwrap()).unwrap_err();
        assert!(
            matches!(&err, ManifestError::Invalid { field, .. } if field == "spec.subnetSelectorTerms"),
            "{err:?}"
        );
        let both = ok.replace("  role: r\n", "  role: r\n  instanceProfile: p\n");
        assert!(classify(&documents_from_str("c.yaml", &both, false).unwrap()).is_err());
    }
}
