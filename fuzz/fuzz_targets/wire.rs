//! Fuzz target `wire`: see `tcpdx_fuzz::wire`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tcpdx_fuzz::wire::run(data));
