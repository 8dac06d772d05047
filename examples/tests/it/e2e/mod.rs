//! End-to-end tests against a real control plane: etcd, kube-apiserver, kube-scheduler,
//! kube-controller-manager and kwok on loopback, started by `scripts/control-plane/up.sh` (`scripts/test` does it and exports
//! the variables below). The controller runs as the `karpenter` binary under the RBAC of
//! `deploy/rbac.yaml` (the token of `system:serviceaccount:karpenter:karpenter`).
//!
//! - `KARPENTER_E2E_KUBECONFIG`: an admin kubeconfig (the tests' own client);
//! - `KARPENTER_E2E_CONTROLLER_KUBECONFIG`: the karpenter service account's kubeconfig.
//!
//! The tests are `#[ignore]`d: a plain `cargo test` reports them as ignored, and
//! `cargo test -p karpenter-cli --test it -- --ignored e2e::` runs them (scripts/test does, with
//! `--skip ::perf_`: the `perf_` measurements take minutes and scripts/e2e-perf.sh runs them).
//! Run without a control plane, they fail: none passes without its real component. They share one cluster, so they take a lock and run one at a time,
//! and each cleans up its objects. They were written for a control plane without
//! kube-controller-manager, so they keep to namespace `default` and create pods directly (no
//! Deployments), which works either way (`KCP_CONTROLLER_MANAGER=0` in up.sh).

mod faults;
pub(crate) mod harness;
mod kubectl;
mod memory;
mod scenarios;
