//! Fuzz target `cron`: see `karpenter_fuzz::checks::cron`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| karpenter_fuzz::checks::cron(data));
