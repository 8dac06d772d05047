//! Label selectors as topology groups use them: validity, matching, identity and an index from
//! pod labels to the groups that may select them.

use std::collections::BTreeMap;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::labels::{validate_label_value, validate_qualified_name};
use crate::model::{LabelSelector, LabelSelectorRequirement, SelectorOperator};

/// A label selector compiled for matching.
///
/// Kubernetes semantics (`metav1.LabelSelectorAsSelector`): a nil selector selects **nothing**,
/// an invalid one (bad key or value, `In`/`NotIn` without values, `Exists`/`DoesNotExist` with
/// values) selects nothing, an empty one selects everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Selector {
    /// Selects no pod (nil or invalid selector).
    Nothing,
    /// A valid selector (possibly empty = everything).
    Match(LabelSelector),
}

impl Selector {
    /// Compiles an optional selector.
    pub(super) fn compile(selector: Option<&LabelSelector>) -> Selector {
        match selector {
            Some(s) if is_valid(s) => Selector::Match(s.clone()),
            _ => Selector::Nothing,
        }
    }

    /// Whether the labels satisfy the selector.
    pub(super) fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Selector::Nothing => false,
            Selector::Match(s) => s.matches(labels),
        }
    }
}

/// Whether Kubernetes would accept the selector (`labels.NewRequirement` rules).
pub(super) fn is_valid(s: &LabelSelector) -> bool {
    let labels_ok = s
        .match_labels
        .iter()
        .all(|(k, v)| validate_qualified_name(k).is_ok() && validate_label_value(v).is_ok());
    labels_ok && s.match_expressions.iter().all(expression_is_valid)
}

fn expression_is_valid(e: &LabelSelectorRequirement) -> bool {
    if validate_qualified_name(&e.key).is_err() {
        return false;
    }
    match e.operator {
        SelectorOperator::In | SelectorOperator::NotIn => {
            !e.values.is_empty() && e.values.iter().all(|v| validate_label_value(v).is_ok())
        }
        SelectorOperator::Exists | SelectorOperator::DoesNotExist => e.values.is_empty(),
    }
}

/// The identity of a selector for group sharing (upstream `hashSelector`): `matchLabels` plus
/// `matchExpressions` taken as a set (duplicates ignored, order ignored), each expression's
/// values taken as a set. `None` is the nil selector, which is distinct from the empty one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct SelectorKey {
    labels: Vec<(String, String)>,
    expressions: Vec<(String, SelectorOperator, Vec<String>)>,
}

impl SelectorKey {
    pub(super) fn of(s: &LabelSelector) -> SelectorKey {
        let labels = s
            .match_labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut expressions: Vec<_> = s
            .match_expressions
            .iter()
            .map(|e| {
                let mut values = e.values.clone();
                values.sort();
                values.dedup();
                (e.key.clone(), e.operator, values)
            })
            .collect();
        expressions.sort();
        expressions.dedup();
        SelectorKey {
            labels,
            expressions,
        }
    }
}

/// Label value → the groups filed under it.
type GroupsByValue = FxHashMap<Arc<str>, SmallVec<[u32; 2]>>;

/// An index from pod labels to the groups whose selector may match them, so that finding the
/// groups selecting a pod costs one lookup per pod label instead of one selector test per
/// group.
///
/// Each group is filed under one pivot: its first `matchLabels` entry, else every value of its
/// first `In` expression, else in the `scan` list that every lookup returns. Groups whose selector
/// selects nothing are not filed at all. Candidates still have to pass the full test.
#[derive(Debug, Default, Clone)]
pub(super) struct SelectorIndex {
    /// Label key → label value → groups. Shared strings: a topology forked from a template
    /// clones the index without copying them.
    by_label: FxHashMap<Arc<str>, GroupsByValue>,
    scan: Vec<u32>,
}

impl SelectorIndex {
    pub(super) fn insert(&mut self, id: u32, selector: &Selector) {
        let Selector::Match(s) = selector else {
            return;
        };
        if let Some((k, v)) = s.match_labels.iter().next() {
            self.file(k, v, id);
        } else if let Some(e) = s
            .match_expressions
            .iter()
            .find(|e| e.operator == SelectorOperator::In)
        {
            let mut values: Vec<&String> = e.values.iter().collect();
            values.sort();
            values.dedup();
            for v in values {
                self.file(&e.key, v, id);
            }
        } else {
            self.scan.push(id);
        }
    }

    /// Removes group `id`, filed by [`insert`](Self::insert) with the same `selector`.
    pub(super) fn remove(&mut self, id: u32, selector: &Selector) {
        let Selector::Match(s) = selector else {
            return;
        };
        let mut unfile = |key: &str, value: &str| {
            if let Some(ids) = self
                .by_label
                .get_mut(key)
                .and_then(|values| values.get_mut(value))
            {
                ids.retain(|g| *g != id);
            }
        };
        if let Some((k, v)) = s.match_labels.iter().next() {
            unfile(k, v);
        } else if let Some(e) = s
            .match_expressions
            .iter()
            .find(|e| e.operator == SelectorOperator::In)
        {
            for v in &e.values {
                unfile(&e.key, v);
            }
        } else {
            self.scan.retain(|g| *g != id);
        }
    }

    fn file(&mut self, key: &str, value: &str, id: u32) {
        if !self.by_label.contains_key(key) {
            self.by_label.insert(Arc::from(key), FxHashMap::default());
        }
        let Some(values) = self.by_label.get_mut(key) else {
            return;
        };
        match values.get_mut(value) {
            Some(ids) => ids.push(id),
            None => {
                let mut ids = SmallVec::new();
                ids.push(id);
                values.insert(Arc::from(value), ids);
            }
        }
    }

    /// Appends the candidate groups for a pod with these labels (each at most once; unsorted).
    pub(super) fn candidates(
        &self,
        labels: &BTreeMap<String, String>,
        out: &mut SmallVec<[u32; 8]>,
    ) {
        for (k, v) in labels {
            if let Some(ids) = self
                .by_label
                .get(k.as_str())
                .and_then(|values| values.get(v.as_str()))
            {
                out.extend(ids.iter().copied());
            }
        }
        out.extend(self.scan.iter().copied());
    }
}
