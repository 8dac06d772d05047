//! Fuzz target `interruption`: see `karpenter_fuzz::checks::interruption`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| karpenter_fuzz::checks::interruption(data));
