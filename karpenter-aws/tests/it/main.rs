//! Integration tests of karpenter-aws's public API, driven the way the SDK shell will drive it.

mod house;
#[cfg(feature = "sdk")]
mod moto;
mod provider_flow;
#[cfg(feature = "sdk")]
mod sdk_pricing;
