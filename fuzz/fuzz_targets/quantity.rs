//! Fuzz target `quantity`: see `karpenter_fuzz::checks::quantity`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| karpenter_fuzz::checks::quantity(data));
