//! One module per subcommand.

pub mod events;
pub mod flows;
