//! One module per subcommand.

pub mod annotate;
pub mod diagnose;
pub mod events;
pub mod flows;
pub mod srt;
