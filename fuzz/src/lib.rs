//! The fuzz targets' checks (see [`checks`]); each target in `fuzz_targets/` calls one function.

pub mod checks;
