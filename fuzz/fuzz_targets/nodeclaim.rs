//! Fuzz target `nodeclaim`: see `karpenter_fuzz::checks::nodeclaim`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| karpenter_fuzz::checks::nodeclaim(data));
