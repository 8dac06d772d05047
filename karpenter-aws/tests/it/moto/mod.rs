//! The AWS provider against a real moto server on loopback (feature `sdk`).
//!
//! The server comes from `KARPENTER_MOTO_ENDPOINT` (scripts/test starts one), or is started
//! here from the virtualenv `scripts/moto/install.sh` made (`KARPENTER_MOTO_PYTHON`, default
//! `~/.cache/karpenter-rs/moto/bin/python`) and stops when this test process exits. The tests
//! are `#[ignore]`d: a plain `cargo test` reports them as ignored, and
//! `cargo test -p karpenter-aws --all-features --test it -- --ignored moto::` runs them (scripts/test
//! does). Without moto they fail: none passes without its real component. Fake
//! credentials, a fixed loopback endpoint: nothing talks to AWS.

mod cluster;
mod conformance;
mod devices;
mod env;
mod housekeeping;
mod inject;
mod interruption;
mod launch_fields;
mod profiles;
mod provider;
mod reservations;
mod standins;
mod tagging;
