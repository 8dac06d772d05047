//! Fuzz target `manifests`: see `karpenter_fuzz::checks::manifests`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| karpenter_fuzz::checks::manifests(data));
