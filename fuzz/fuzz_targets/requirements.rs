//! Fuzz target `requirements`: see `karpenter_fuzz::checks::requirements`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| karpenter_fuzz::checks::requirements(data));
