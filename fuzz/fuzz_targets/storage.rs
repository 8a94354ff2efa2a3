//! Fuzz target `storage`: see `tcpdx_fuzz::storage`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tcpdx_fuzz::storage::run(data));
