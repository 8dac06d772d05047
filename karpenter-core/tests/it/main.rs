//! The integration-test binary of `karpenter-core` (one binary, one module per area).

mod api;
mod lifecycle;
