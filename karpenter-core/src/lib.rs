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
pub mod hostports;
pub mod labels;
pub mod launch;
pub mod lifecycle;
pub mod model;
pub mod operator;
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
