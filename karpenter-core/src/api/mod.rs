//! Serde types for the `karpenter.sh/v1` API (NodePool, NodeClaim) that accept upstream's YAML
//! unchanged, plus validation equal to upstream's CRD rules.
