//! Fuzz target `duration`: see `karpenter_fuzz::checks::duration`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| karpenter_fuzz::checks::duration(data));
