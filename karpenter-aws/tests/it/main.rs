//! Integration tests of karpenter-aws's public API, driven the way the SDK shell will drive it.

mod provider_flow;
