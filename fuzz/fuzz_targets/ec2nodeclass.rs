//! Fuzz target `ec2nodeclass`: see `karpenter_fuzz::checks::ec2nodeclass`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| karpenter_fuzz::checks::ec2nodeclass(data));
