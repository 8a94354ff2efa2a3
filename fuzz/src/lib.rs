//! The bodies of tcpdx's fuzz targets, and the input encodings `make-seeds` writes.
//!
//! Each target in `fuzz_targets/` is one line calling a function here, so that the seed
//! generator (`src/bin/make-seeds.rs`) and the harnesses share one definition of every input
//! format. Adding a target for a new parser: see `fuzz/README.md`.
#![forbid(unsafe_code)]

pub mod analyzer;
pub mod capture;
pub mod storage;
pub mod wire;
