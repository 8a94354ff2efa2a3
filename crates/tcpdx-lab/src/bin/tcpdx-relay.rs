//! `tcpdx-relay`: the lab's TUN impairment relay as a standalone binary.
#![forbid(unsafe_code)]
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "tcpdx-relay",
    about = "TUN impairment relay: delay, drop, blackout, reorder; JSONL event log"
)]
struct Cli {
    #[command(flatten)]
    args: tcpdx_lab::relay::RelayArgs,
}

fn main() {
    let cli = Cli::parse();
    match tcpdx_lab::relay::run(&cli.args) {
        Ok(st) => eprintln!("{}", serde_json::to_string(&st).unwrap_or_default()),
        Err(e) => {
            eprintln!("tcpdx-relay: {e:#}");
            std::process::exit(1);
        }
    }
}
