//! Integration tests of karpenter-aws's public API, driven the way the SDK shell will drive it.

#[cfg(feature = "sdk")]
mod moto;
mod provider_flow;
