//! Fuzz target `analyzer`: see `tcpdx_fuzz::analyzer`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tcpdx_fuzz::analyzer::run(data));
