//! One module per subcommand.

pub mod annotate;
pub mod compare;
pub mod diagnose;
pub mod distributed;
pub mod events;
pub mod export;
pub mod flows;
pub mod report;
pub mod srt;
