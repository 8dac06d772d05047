//! # karpenter-core
//!
//! Karpenter's node-autoscaling decisions as a library: the `karpenter.sh/v1` API types, exact
//! Kubernetes resource quantities, the node-requirement algebra, the provisioning scheduler and
//! the disruption planner.
//!
//! ## Quick start
//!
//! Build a NodePool and pending pods in code, solve them against a small catalog of instance
//! types, and read the NodeClaims the scheduler would create with their launch price. Start
//! from [`prelude`]:
//!
//! ```
//! use std::sync::Arc;
//!
//! use karpenter_core::prelude::*;
//!
//! // A catalog: two instance types, each offered on-demand and as spot in one zone.
//! let instance_type = |name: &str, cpu: i64, on_demand: f64| {
//!     let capacity: ResourceList = [
//!         ("cpu", Quantity::from_units(cpu)),
//!         ("memory", Quantity::from_bytes((cpu * 4) << 30)),
//!         ("pods", Quantity::from_units(110)),
//!     ]
//!     .into_iter()
//!     .collect();
//!     let offerings = vec![
//!         Offering::new("us-east-1a", "on-demand", on_demand),
//!         Offering::new("us-east-1a", "spot", on_demand * 0.4),
//!     ];
//!     Arc::new(InstanceType::new(name, Requirements::new(), offerings, capacity, Overhead::default()))
//! };
//! let catalog = vec![instance_type("m.large", 2, 0.096), instance_type("m.xlarge", 4, 0.192)];
//!
//! // A NodePool that allows on-demand capacity only.
//! let class = NodeClassReference::new("karpenter.k8s.aws", "EC2NodeClass", "default");
//! let mut template = NodeClaimTemplateSpec::new(class);
//! template.requirements = Some(vec![karpenter_core::requirements::NodeSelectorRequirement::new(
//!     "karpenter.sh/capacity-type",
//!     Operator::In,
//!     ["on-demand"],
//! )]);
//! let pool = NodePool::new("default", NodePoolSpec::new(NodeClaimTemplate::new(template)));
//!
//! // Three pods asking for one CPU each.
//! let pods = (0..3)
//!     .map(|i| Pod::new("default", format!("web-{i}")).with_requests([("cpu", Quantity::from_units(1))]))
//!     .collect();
//!
//! let input = SchedulingInput::new()
//!     .with_node_pools(vec![NodePoolInput::from_nodepool(&pool, catalog)])
//!     .with_pods(pods);
//! let options = SchedulerOptions::default();
//! let results = solve(&input, &options);
//!
//! assert!(results.pod_errors.is_empty());
//! assert_eq!(results.new_node_claims.len(), 1);
//! let claim = &results.new_node_claims[0];
//! assert_eq!(claim.pods, ["default/web-0", "default/web-1", "default/web-2"]);
//! // Three CPUs need the xlarge; the pool allows on-demand only.
//! assert_eq!(claim.instance_types[0].name(), "m.xlarge");
//! assert_eq!(claim.launch_price(&options.label_policy), Some(0.192));
//!
//! // The NodeClaim to create through a cloud provider.
//! let node_claim = to_node_claim(claim, &pool, &options.label_policy);
//! assert_eq!(node_claim.metadata.labels["karpenter.sh/nodepool"], "default");
//! ```
//!
//! The steps after a solve (a planned claim to an API [`NodeClaim`](api::NodeClaim), the choice
//! of offering a provider launches) are in [`launch`]; the provider interface is
//! [`cloud::CloudProvider`]. The `custom_provider` example of this crate
//! (`cargo run -p karpenter-core --example custom_provider`) implements a provider and runs one
//! provisioning round through `dyn CloudProvider`. A provider proves it keeps the trait's
//! contract with the conformance suite (feature `conformance`, module `conformance`; the
//! `provider_conformance` example runs it against the example provider).
//!
//! The crate is *sans-IO* and deterministic: it performs no network or file I/O, never reads the
//! wall clock (time is a parameter) and iterates in stable orders, so the same input always gives
//! the same output. The only async surface is the [`cloud::CloudProvider`] trait, which callers
//! implement (see `karpenter-fake` for an in-memory provider and `karpenter-aws` for EC2).
//!
//! Data flows one way: [`api`] → [`model`] → scheduling / disruption → results.
//!
//! ## Stability
//!
//! How the public types may grow without breaking users (0.x releases: a minor release may
//! break, a patch release never does):
//!
//! - **The CRD mirror types** in [`api`] (`NodePool`, `NodePoolSpec`, `NodeClaimTemplate`,
//!   `NodeClaimTemplateSpec`, `NodeClaim`, `NodeClaimSpec`, `NodeClaimStatus`, `ObjectMeta`,
//!   `Disruption`, `Budget`, `Condition`, ...) mirror the `karpenter.sh/v1` schema the way
//!   `k8s-openapi` mirrors Kubernetes': exhaustive, every field public, and every one
//!   implements [`Default`]. Build them with a constructor or with struct update syntax,
//!   `Budget { schedule: Some("@daily".into()), ..Default::default() }`, and code keeps compiling
//!   when a field is added. A field upstream adds to the CRD arrives in a minor release. The
//!   same holds for the other schema mirrors: the Kubernetes shapes in [`model`] (affinity terms,
//!   label selectors, volumes, Node conditions), [`requirements::NodeSelectorRequirement`],
//!   [`taints::Taint`] and the catalog file format in [`catalog`]. None of them caches a value
//!   derived from another field, so no public field can leave one stale.
//! - **Types with derived state** keep it private behind constructors and setters:
//!   [`model::InstanceType`] (requirements, allocatable) and [`model::Offering`]
//!   (requirements). `InstanceType::offerings` stays public because availability changes while
//!   a provider runs; its zone and capacity-type requirements are computed once, from the
//!   offerings available at construction, as upstream does.
//! - **The scheduler's model and inputs** ([`model::Pod`], `SchedulingInput`,
//!   `SchedulerOptions`, ...) are `#[non_exhaustive]` and built with `new` and `with_*` methods.
//! - **Values core produces** (decisions, updates, reports, budgets, error structs) are
//!   `#[non_exhaustive]`: read their fields, do not build them. **Error enums** are
//!   `#[non_exhaustive]`: match them with a wildcard arm.
//! - **Exhaustive on purpose**: the operator's [`operator::Input`] / [`operator::Action`] /
//!   `CloudCall` / `CloudResponse`, the lifecycle decision enums and the inputs the lifecycle
//!   state machines take from a shell (`LifecycleInputs`, `DriftCheck`, `RegistrationHook`,
//!   `QueuedCommand`, ...). A new action or decision must be a compile error in every shell that
//!   interprets them, and a new input field must be filled in by every shell rather than
//!   silently defaulted: a decision made on a missing observation is a wrong decision.
//!
//! ```
//! use karpenter_core::api::{Budget, NodePool, NodePoolSpec};
//!
//! let budget = Budget { schedule: Some("@daily".into()), ..Default::default() };
//! assert_eq!(budget.nodes, "10%");
//! let pool = NodePool {
//!     spec: NodePoolSpec { weight: Some(10), ..Default::default() },
//!     ..Default::default()
//! };
//! assert_eq!(pool.kind, "NodePool");
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod api;
pub mod catalog;
pub mod cloud;
#[cfg(feature = "conformance")]
#[cfg_attr(docsrs, doc(cfg(feature = "conformance")))]
pub mod conformance;
#[cfg(feature = "k8s-openapi")]
#[cfg_attr(docsrs, doc(cfg(feature = "k8s-openapi")))]
pub mod convert;
#[cfg(feature = "kube")]
#[cfg_attr(docsrs, doc(cfg(feature = "kube")))]
pub mod crd;
pub mod disruption;
pub mod features;
pub mod hostports;
pub mod labels;
pub mod launch;
pub mod leader;
pub mod lifecycle;
pub mod model;
pub mod operator;
pub mod overlay;
pub mod prelude;
pub mod requirements;
pub mod resources;
pub mod scheduling;
pub mod state;
pub mod taints;
pub mod volumes;
#[cfg(feature = "k8s-openapi")]
#[cfg_attr(docsrs, doc(cfg(feature = "k8s-openapi")))]
pub mod world;
