//! tcpdx lab: reproduce TCP pathologies with real Linux stacks in network namespaces,
//! capture them and record the kernel's own ground truth (`truth.json`) next to each capture.
// `deny`, not `forbid`: sys.rs (FFI, SAFETY comments) is the workspace's one exception.
#![deny(unsafe_code)]
pub mod bench;
pub mod capture;
pub mod cmd;
pub mod install;
pub mod lock;
pub mod relay;
pub mod run;
pub mod scenario;
pub mod storage;
pub mod sweep;
pub mod sys;
pub mod topology;
pub mod trace;
pub mod truth;
pub mod verify;
pub mod workload;
