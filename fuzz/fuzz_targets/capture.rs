//! Fuzz target `capture`: see `tcpdx_fuzz::capture`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tcpdx_fuzz::capture::run(data));
