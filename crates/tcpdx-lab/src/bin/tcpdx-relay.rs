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

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let st = tcpdx_lab::relay::run(&cli.args)?;
    eprintln!("{}", serde_json::to_string(&st)?);
    Ok(())
}
