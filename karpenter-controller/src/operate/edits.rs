//! Node writes that cannot lose another writer's entries.
//!
//! The operator says what a Node's labels, annotations, taints, finalizers and owner
//! references should be ([`NodeUpdate`]: each changed field whole). Sent as a merge patch,
//! a whole list replaces the list on the server, so an entry another controller added since
//! the operator last saw the Node (its finalizer, its taint) would be dropped. Instead the
//! shell turns the update into the operator's *edits*, what it added and what it removed
//! relative to the Node it decided on (its base), and applies only those edits to the Node as
//! it is now (the live object), in a merge patch that carries the live object's
//! `resourceVersion`: a Node changed in between is answered 409, read again and edited again.
//!
//! Entries are matched by their identity: a finalizer by its name, a taint by key and effect
//! (the API server's uniqueness rule), an owner reference by uid; maps key by key.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as core;
use karpenter_core::lifecycle::{self, NodeUpdate};
use serde::Serialize;
use serde_json::{Map, Value, json};

/// A list field of a Node and the identity of its entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListKind {
    Finalizers,
    Taints,
    OwnerReferences,
}

impl ListKind {
    /// Entries with the same identity cannot both be on the Node.
    fn identity(self, v: &Value) -> String {
        match self {
            ListKind::Finalizers => v.as_str().unwrap_or_default().to_string(),
            ListKind::Taints => format!("{}\u{0}{}", field(v, "key"), field(v, "effect")),
            ListKind::OwnerReferences => field(v, "uid"),
        }
    }

    /// What makes two entries of one identity the same entry: a taint's value too (its
    /// `timeAdded` is formatted differently by different writers and is not compared).
    fn content(self, v: &Value) -> String {
        match self {
            ListKind::Taints => format!("{}\u{0}{}", self.identity(v), field(v, "value")),
            ListKind::Finalizers | ListKind::OwnerReferences => self.identity(v),
        }
    }
}

fn field(v: &Value, name: &str) -> String {
    v.get(name)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn values<T: Serialize>(items: &[T]) -> Vec<Value> {
    items
        .iter()
        .map(|i| serde_json::to_value(i).unwrap_or(Value::Null))
        .collect()
}

/// `live` with the operator's edits (`base` -> `after`) applied: entries of `base` that
/// `after` no longer holds are removed, entries of `after` that `base` did not hold are added
/// (replacing a live entry of the same identity), and every other live entry (another writer's)
/// stays where it is.
fn edit_list(kind: ListKind, live: &[Value], base: &[Value], after: &[Value]) -> Vec<Value> {
    let contents = |l: &[Value]| l.iter().map(|v| kind.content(v)).collect::<Vec<_>>();
    let (base_c, after_c) = (contents(base), contents(after));
    let removed: Vec<String> = base
        .iter()
        .zip(&base_c)
        .filter(|(_, c)| !after_c.contains(c))
        .map(|(v, _)| kind.identity(v))
        .collect();
    let added: Vec<&Value> = after
        .iter()
        .zip(&after_c)
        .filter(|(_, c)| !base_c.contains(c))
        .map(|(v, _)| v)
        .collect();
    let added_ids: Vec<String> = added.iter().map(|v| kind.identity(v)).collect();
    let added_c: Vec<String> = added.iter().map(|v| kind.content(v)).collect();
    let mut out = Vec::new();
    let mut present = vec![false; added.len()];
    for v in live {
        let id = kind.identity(v);
        if let Some(i) = added_c.iter().position(|c| *c == kind.content(v)) {
            // Already there as the operator wants it: keep it in place.
            present[i] = true;
            out.push(v.clone());
        } else if removed.contains(&id) || added_ids.contains(&id) {
            // Removed by the operator, or replaced below by the operator's entry.
        } else {
            out.push(v.clone());
        }
    }
    for (v, there) in added.into_iter().zip(present) {
        if !there {
            out.push(v.clone());
        }
    }
    out
}

/// The merge patch of a string map that turns `base` into `after`: only the keys the operator
/// changed (a new value, or `null` for a key it removed); keys it did not touch are left out,
/// whoever set them.
pub fn map_edit(base: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Value {
    let mut m = Map::new();
    for k in base.keys() {
        if !after.contains_key(k) {
            m.insert(k.clone(), Value::Null);
        }
    }
    for (k, v) in after {
        if base.get(k) != Some(v) {
            m.insert(k.clone(), Value::String(v.clone()));
        }
    }
    Value::Object(m)
}

/// The merge patch that applies `update`, decided on `base` (the Node as the operator saw it),
/// to `live` (the Node as it is now), carrying `live`'s `resourceVersion` so the API server
/// refuses it (409) if the Node changed since `live` was read; `None` when `live` already is
/// as the operator wants it. Lists are sent whole (a merge patch cannot edit a list), but
/// built from `live`'s: other writers' entries stay. See the module docs.
pub fn node_patch(base: &lifecycle::Node, update: &NodeUpdate, live: &core::Node) -> Option<Value> {
    let live_meta = &live.metadata;
    let mut meta = Map::new();
    let mut changed = false;
    let mut map = |name: &str,
                   base: &BTreeMap<String, String>,
                   after: &Option<BTreeMap<String, String>>,
                   live: &Option<BTreeMap<String, String>>| {
        let Some(after) = after else { return };
        let edit = map_edit(base, after);
        let live = live.clone().unwrap_or_default();
        let needed = edit
            .as_object()
            .into_iter()
            .flatten()
            .any(|(k, v)| match v {
                Value::Null => live.contains_key(k),
                v => live.get(k).map(String::as_str) != v.as_str(),
            });
        if needed {
            changed = true;
            meta.insert(name.into(), edit);
        }
    };
    map("labels", &base.labels, &update.labels, &live_meta.labels);
    map(
        "annotations",
        &base.annotations,
        &update.annotations,
        &live_meta.annotations,
    );
    let mut list =
        |kind: ListKind, live: Vec<Value>, base: Vec<Value>, after: Option<Vec<Value>>| {
            let after = after?;
            let edited = edit_list(kind, &live, &base, &after);
            if edited == live {
                return None;
            }
            changed = true;
            Some(Value::Array(edited))
        };
    if let Some(f) = list(
        ListKind::Finalizers,
        values(live_meta.finalizers.as_deref().unwrap_or_default()),
        values(&base.finalizers),
        update.finalizers.as_deref().map(values),
    ) {
        meta.insert("finalizers".into(), f);
    }
    if let Some(o) = list(
        ListKind::OwnerReferences,
        values(live_meta.owner_references.as_deref().unwrap_or_default()),
        values(&base.owner_references),
        update.owner_references.as_deref().map(values),
    ) {
        meta.insert("ownerReferences".into(), o);
    }
    let taints = list(
        ListKind::Taints,
        values(
            live.spec
                .as_ref()
                .and_then(|s| s.taints.as_deref())
                .unwrap_or_default(),
        ),
        values(&base.taints),
        update.taints.as_deref().map(values),
    );
    if !changed {
        return None;
    }
    if let Some(rv) = &live_meta.resource_version {
        meta.insert("resourceVersion".into(), json!(rv));
    }
    let mut patch = Map::new();
    patch.insert("metadata".into(), Value::Object(meta));
    if let Some(t) = taints {
        patch.insert("spec".into(), json!({ "taints": t }));
    }
    Some(Value::Object(patch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_core::taints::{Taint, TaintEffect};

    fn taint(key: &str, value: &str, effect: TaintEffect) -> Taint {
        Taint {
            key: key.into(),
            value: value.into(),
            effect,
            time_added: None,
        }
    }

    fn live(value: Value) -> core::Node {
        serde_json::from_value(value).unwrap()
    }

    /// The operator adds its finalizer and its taint on a Node it saw bare; meanwhile another
    /// writer added its own: both stay, and the patch is a compare-and-swap on the live
    /// version.
    #[test]
    fn additions_keep_another_writers_finalizer_and_taint() {
        let base = lifecycle::Node::new("n1", "fake://1");
        let mut update = NodeUpdate::default();
        update.node_name = "n1".into();
        update.finalizers = Some(vec!["karpenter.sh/termination".into()]);
        update.taints = Some(vec![taint(
            "karpenter.sh/disrupted",
            "",
            TaintEffect::NoSchedule,
        )]);
        let node = live(json!({
            "metadata": {"name": "n1", "resourceVersion": "42", "finalizers": ["other.io/keep"]},
            "spec": {"taints": [{"key": "other.io/mark", "value": "x", "effect": "NoExecute"}]}
        }));
        assert_eq!(
            node_patch(&base, &update, &node),
            Some(json!({
                "metadata": {"resourceVersion": "42",
                             "finalizers": ["other.io/keep", "karpenter.sh/termination"]},
                "spec": {"taints": [
                    {"key": "other.io/mark", "value": "x", "effect": "NoExecute"},
                    {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}
                ]}
            }))
        );
    }

    /// Removals take away only the operator's own entries; a taint of the same key but
    /// another effect is another entry.
    #[test]
    fn removals_take_only_the_operators_entries() {
        let mut base = lifecycle::Node::new("n1", "fake://1");
        base.finalizers = vec!["karpenter.sh/termination".into()];
        base.taints = vec![taint(
            "karpenter.sh/unregistered",
            "",
            TaintEffect::NoExecute,
        )];
        let mut update = NodeUpdate::default();
        update.node_name = "n1".into();
        update.finalizers = Some(vec![]);
        update.taints = Some(vec![]);
        let node = live(json!({
            "metadata": {"name": "n1", "resourceVersion": "7",
                         "finalizers": ["karpenter.sh/termination", "other.io/keep"]},
            "spec": {"taints": [
                {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
                {"key": "karpenter.sh/unregistered", "effect": "NoSchedule"},
                {"key": "other.io/mark", "effect": "NoSchedule"}
            ]}
        }));
        assert_eq!(
            node_patch(&base, &update, &node),
            Some(json!({
                "metadata": {"resourceVersion": "7", "finalizers": ["other.io/keep"]},
                "spec": {"taints": [
                    {"key": "karpenter.sh/unregistered", "effect": "NoSchedule"},
                    {"key": "other.io/mark", "effect": "NoSchedule"}
                ]}
            }))
        );
    }

    /// A changed taint value replaces the live entry of that key and effect; maps carry only
    /// the keys the operator changed (another writer's label is not sent, not even as it is).
    #[test]
    fn changes_replace_by_identity_and_maps_carry_only_the_operators_keys() {
        let mut base = lifecycle::Node::new("n1", "fake://1");
        base.taints = vec![taint("example.com/t", "a", TaintEffect::NoSchedule)];
        base.labels = BTreeMap::from([
            ("mine".to_string(), "1".to_string()),
            ("gone".to_string(), "x".to_string()),
        ]);
        let mut update = NodeUpdate::default();
        update.node_name = "n1".into();
        update.taints = Some(vec![taint("example.com/t", "b", TaintEffect::NoSchedule)]);
        update.labels = Some(BTreeMap::from([
            ("mine".to_string(), "2".to_string()),
            ("new".to_string(), "y".to_string()),
        ]));
        let node = live(json!({
            "metadata": {"name": "n1", "resourceVersion": "9",
                         "labels": {"mine": "1", "gone": "x", "theirs": "z"}},
            "spec": {"taints": [{"key": "example.com/t", "value": "a", "effect": "NoSchedule",
                                 "timeAdded": "2026-01-01T00:00:00Z"}]}
        }));
        assert_eq!(
            node_patch(&base, &update, &node),
            Some(json!({
                "metadata": {"resourceVersion": "9",
                             "labels": {"mine": "2", "new": "y", "gone": null}},
                "spec": {"taints": [{"key": "example.com/t", "value": "b", "effect": "NoSchedule"}]}
            }))
        );
    }

    /// A Node already as the operator wants it (another writer got there first, or the
    /// patch is a retry) gets no patch.
    #[test]
    fn nothing_to_do_is_no_patch() {
        let base = lifecycle::Node::new("n1", "fake://1");
        let mut update = NodeUpdate::default();
        update.node_name = "n1".into();
        update.finalizers = Some(vec!["karpenter.sh/termination".into()]);
        update.labels = Some(BTreeMap::from([("a".to_string(), "1".to_string())]));
        let node = live(json!({
            "metadata": {"name": "n1", "resourceVersion": "3", "labels": {"a": "1"},
                         "finalizers": ["other.io/keep", "karpenter.sh/termination"]}
        }));
        assert_eq!(node_patch(&base, &update, &node), None);
    }

    /// Owner references are matched by uid.
    #[test]
    fn owner_references_are_edited_by_uid() {
        let base = lifecycle::Node::new("n1", "fake://1");
        let owner: karpenter_core::api::OwnerReference = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": "c1", "uid": "u1",
            "blockOwnerDeletion": true
        }))
        .unwrap();
        let mut update = NodeUpdate::default();
        update.node_name = "n1".into();
        update.owner_references = Some(vec![owner]);
        let node = live(json!({
            "metadata": {"name": "n1", "resourceVersion": "5",
                         "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                                              "name": "x", "uid": "u0"}]}
        }));
        let patch = node_patch(&base, &update, &node).unwrap();
        let refs = patch["metadata"]["ownerReferences"].as_array().unwrap();
        let uids: Vec<&str> = refs.iter().map(|r| r["uid"].as_str().unwrap()).collect();
        assert_eq!(uids, ["u0", "u1"]);
    }
}
