//! Fuzz target `nodepool`: see `karpenter_fuzz::checks::nodepool`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| karpenter_fuzz::checks::nodepool(data));
