//! The node-class loop's helpers: what wakes it, and what a deleted EC2NodeClass takes with it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use karpenter_aws::nodeclass::EC2NodeClass;
use karpenter_aws::sdk::provider::INSTANCE_PROFILE_ANNOTATION;
use kube::Api;
use kube::api::DynamicObject;

use super::AwsProvider;
use crate::cluster::{Caches, objects};

/// Aborts a task when dropped.
pub(super) struct AbortOnDrop(pub(super) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Whether a watch event calls for a node-class pass: a class seen for the first time, a new
/// generation (a spec change; the loop's own status writes keep the generation), or a
/// deletion. `generations` is what was seen so far.
pub(super) fn class_changed(
    generations: &mut BTreeMap<String, Option<i64>>,
    name: &str,
    generation: Option<i64>,
    deleted: bool,
) -> bool {
    if deleted {
        return generations.remove(name).is_some();
    }
    generations.insert(name.to_string(), generation) != Some(generation)
}

/// Wakes the node-class loop when an EC2NodeClass is created, changed or deleted, as
/// upstream's node-class controller reconciles on watch events.
pub(super) async fn class_changes(api: Api<DynamicObject>, wake: Arc<tokio::sync::Notify>) {
    use futures::StreamExt;
    use kube::runtime::WatchStreamExt;
    use kube::runtime::watcher::{self, Event};
    let mut generations = BTreeMap::new();
    let mut stream = watcher::watcher(api, watcher::Config::default())
        .default_backoff()
        .boxed();
    while let Some(event) = stream.next().await {
        let (obj, deleted) = match event {
            Ok(Event::Apply(o) | Event::InitApply(o)) => (o, false),
            Ok(Event::Delete(o)) => (o, true),
            Ok(_) => continue,
            Err(e) => {
                tracing::debug!(error = %e, "watching EC2NodeClasses");
                continue;
            }
        };
        let name = obj.metadata.name.clone().unwrap_or_default();
        if class_changed(&mut generations, &name, obj.metadata.generation, deleted) {
            wake.notify_one();
        }
    }
}

/// What a deleted EC2NodeClass leaves: its launch templates are deleted, and its managed
/// instance profile too unless a NodeClaim still names it (then the garbage collection takes
/// it once the NodeClaim is gone).
pub(super) async fn class_deleted(
    rt: &AwsProvider,
    class: &EC2NodeClass,
    in_use: &BTreeSet<String>,
) {
    let name = class.name();
    match rt.provider.delete_class_launch_templates(name).await {
        Ok(deleted) => {
            tracing::info!(controller = "nodeclass", nodeclass = %name, templates = deleted.len(), "deleted the launch templates of a deleted EC2NodeClass")
        }
        Err(e) => {
            tracing::warn!(controller = "nodeclass", nodeclass = %name, error = %e, "deleting launch templates")
        }
    }
    if let Some(profile) = class_profile_to_keep(class, in_use) {
        tracing::info!(controller = "nodeclass", nodeclass = %name, profile = %profile, "the instance profile of a deleted EC2NodeClass is still in use; the garbage collection deletes it later");
        return;
    }
    match rt.resolver.delete_instance_profile(class).await {
        Ok(()) => {
            tracing::info!(controller = "nodeclass", nodeclass = %name, "deleted the instance profile of a deleted EC2NodeClass")
        }
        Err(e) => {
            tracing::warn!(controller = "nodeclass", nodeclass = %name, error = %e, "deleting the instance profile")
        }
    }
}

/// The instance profile of a deleted class that a NodeClaim still names (`in_use`), if any.
pub(super) fn class_profile_to_keep(
    class: &EC2NodeClass,
    in_use: &BTreeSet<String>,
) -> Option<String> {
    class
        .status
        .instance_profile
        .clone()
        .filter(|p| in_use.contains(p))
}

/// The instance profiles live NodeClaims launched with (their
/// `karpenter.k8s.aws/instance-profile-name` annotations).
pub(super) fn profiles_in_use(caches: &Caches) -> BTreeSet<String> {
    objects(&caches.nodeclaims)
        .iter()
        .filter_map(|c| {
            let v = serde_json::to_value(&**c).ok()?;
            let key = INSTANCE_PROFILE_ANNOTATION
                .replace('~', "~0")
                .replace('/', "~1");
            Some(
                v.pointer(&format!("/metadata/annotations/{key}"))?
                    .as_str()?
                    .to_string(),
            )
        })
        .collect()
}
