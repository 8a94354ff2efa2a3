//! `tcpdx-lab`: the network lab orchestrator (list, run, verify, cleanup, install,
//! bench-relay) plus the bulk workload and the relay as subcommands.
#![forbid(unsafe_code)]

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use tcpdx_lab::{relay, run, scenario, topology, verify, workload::bulk};

#[derive(Parser)]
#[command(
    name = "tcpdx-lab",
    about = "Reproduce TCP pathologies in network namespaces with kernel ground truth"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List the scenarios.
    List {
        /// Print the full recipes as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run a scenario (as root) and write captures + truth.json to --out.
    Run {
        /// Scenario name (see `list`), or "all".
        scenario: String,
        /// Output directory (for "all": one subdirectory per scenario).
        #[arg(long)]
        out: PathBuf,
        /// Short run (fixture/CI size).
        #[arg(long)]
        short: bool,
        /// Override the scenario's seed.
        #[arg(long)]
        seed: Option<u64>,
        /// Override the link MTU (1500 or 9000).
        #[arg(long)]
        mtu: Option<u32>,
        /// Keep the raw tracefs text.
        #[arg(long)]
        keep_trace: bool,
        /// Keep captures as plain .pcap (default: gzip).
        #[arg(long)]
        no_gzip: bool,
        /// Run `verify` on the result.
        #[arg(long)]
        verify: bool,
        /// Append one JSON line per scenario ({"scenario","ok","secs","error"}) to this file.
        #[arg(long)]
        results: Option<PathBuf>,
        /// Relay in GSO mode: GRO super-packets forwarded whole, cut only where an
        /// impairment acts (multi-Gbit/s; not with router captures or router nft loss).
        #[arg(long)]
        relay_gso: bool,
    },
    /// Validate a run directory's truth.json against its captures.
    Verify {
        /// Run directories.
        dirs: Vec<PathBuf>,
    },
    /// Remove labs left behind by dead runs (or all with --force) and restore host settings.
    Cleanup {
        /// Also remove labs whose owner is still running.
        #[arg(long)]
        force: bool,
    },
    /// Install the lab's Debian packages with apt-get.
    Install {
        /// Only the bulk-lab tools (no storage servers).
        #[arg(long)]
        bulk_only: bool,
    },
    /// Measure packets/s through the relay with bulk TCP flows.
    BenchRelay(tcpdx_lab::bench::BenchOpts),
    /// Bulk TCP workload.
    Bulk {
        #[command(subcommand)]
        cmd: BulkCmd,
    },
    /// The impairment relay (same as the tcpdx-relay binary).
    Relay(relay::RelayArgs),
}

#[derive(Subcommand)]
enum BulkCmd {
    /// Connect and send.
    Send(bulk::SendArgs),
    /// Accept one connection and receive.
    Recv(bulk::RecvArgs),
}

fn need_root() -> Result<()> {
    if !nix_is_root() {
        bail!("this command needs root (network namespaces, tracefs)");
    }
    Ok(())
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

fn main() {
    // One line per error (the context chain), never a backtrace dump.
    if let Err(e) = real_main(Cli::parse()) {
        eprintln!("tcpdx-lab: {e:#}");
        std::process::exit(1);
    }
}

fn real_main(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::List { json } => {
            for s in scenario::registry() {
                if json {
                    println!("{}", serde_json::to_string(&s)?);
                } else {
                    println!("{:<26} {}", s.name, s.description);
                }
            }
        }
        Cmd::Run {
            scenario: name,
            out,
            short,
            seed,
            mtu,
            keep_trace,
            no_gzip,
            verify: do_verify,
            relay_gso,
            results,
        } => {
            need_root()?;
            let list: Vec<scenario::Scenario> =
                if name == "all" {
                    scenario::registry()
                } else {
                    vec![scenario::find(&name).with_context(|| {
                        format!("unknown scenario {name} (see `tcpdx-lab list`)")
                    })?]
                };
            let mut failed = Vec::new();
            for sc in &list {
                let dir = if name == "all" {
                    out.join(&sc.name)
                } else {
                    out.clone()
                };
                let o = run::RunOpts {
                    out: dir.clone(),
                    short,
                    seed,
                    mtu,
                    keep_trace,
                    gzip: !no_gzip,
                    relay_gso,
                };
                let t0 = std::time::Instant::now();
                eprintln!("== {}", sc.name);
                let error = match run::run_scenario(sc, &o) {
                    Ok(t) => {
                        eprintln!("{}", verify::summary(&t));
                        eprintln!(
                            "   ({:.1} s) -> {}",
                            t0.elapsed().as_secs_f64(),
                            dir.display()
                        );
                        if do_verify {
                            match verify::verify_dir(&dir) {
                                Ok(r) => {
                                    r.print();
                                    (!r.ok())
                                        .then(|| format!("verification failed: {}", r.failures()))
                                }
                                Err(e) => Some(format!("verify: {e:#}")),
                            }
                        } else {
                            None
                        }
                    }
                    Err(e) => {
                        eprintln!("   FAILED: {e:#}");
                        Some(format!("{e:#}"))
                    }
                };
                if let Some(p) = &results {
                    let line = serde_json::json!({
                        "scenario": sc.name,
                        "ok": error.is_none(),
                        "secs": (t0.elapsed().as_secs_f64() * 10.0).round() / 10.0,
                        "error": error,
                    });
                    let mut f = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(p)
                        .with_context(|| format!("opening {}", p.display()))?;
                    writeln!(f, "{line}")?;
                }
                if error.is_some() {
                    failed.push(sc.name.clone());
                }
            }
            eprintln!(
                "run: {} passed, {} failed",
                list.len() - failed.len(),
                failed.len()
            );
            if !failed.is_empty() {
                bail!("failed: {}", failed.join(", "));
            }
        }
        Cmd::Verify { dirs } => {
            let mut bad = 0;
            for d in &dirs {
                let r = verify::verify_dir(d)?;
                r.print();
                bad += usize::from(!r.ok());
            }
            if bad > 0 {
                bail!("{bad} run(s) failed verification");
            }
        }
        Cmd::Cleanup { force } => {
            need_root()?;
            let n = topology::cleanup(force)?;
            eprintln!("cleanup: removed {n} lab(s)/namespace(s)");
        }
        Cmd::Install { bulk_only } => {
            need_root()?;
            tcpdx_lab::install::install(bulk_only)?;
        }
        Cmd::BenchRelay(o) => {
            need_root()?;
            let r = tcpdx_lab::bench::bench_relay(&o)?;
            println!("{}", serde_json::to_string_pretty(&r)?);
            let w = &r.window;
            let mode = format!(
                "{}{}{}",
                match (o.gso, o.gso_to_hosts) {
                    (false, _) => "per-packet",
                    (true, false) =>
                        "GSO (super-packets forwarded whole, cut to MTU size after the router)",
                    (true, true) =>
                        "GSO to hosts (super-packets continue to the receiver; benchmark only)",
                },
                if o.sender_offloads {
                    " + sender TSO"
                } else {
                    ""
                },
                if o.host_gro { " + host GRO" } else { "" },
            );
            println!(
                "relay: {:.0} kpps = MTU-sized wire segments/s written by the relay ({:.0} k data c2s + {:.0} k ACKs s2c per s; hosts' counters {}); MTU {}, delay {} ms each way, {} flow(s), {} mode; {:.0} Mbit/s goodput; unintended drops {}; relay CPU {:.0}% = {:.0} kpps per relay CPU-second; CPUs busy {}",
                r.kpps,
                w.relay_c2s as f64 / r.secs / 1e3,
                w.relay_s2c as f64 / r.secs / 1e3,
                if w.counts_agree { "agree" } else { "DISAGREE" },
                o.mtu,
                o.delay_ms,
                o.flows,
                mode,
                r.goodput_mbit_s,
                r.unintended_drops,
                r.relay_busy * 100.0,
                r.kpps_per_cpu_s,
                r.cpu_busy
                    .iter()
                    .map(|b| format!("{:.0}%", b * 100.0))
                    .collect::<Vec<_>>()
                    .join(" / ")
            );
        }
        Cmd::Bulk { cmd } => {
            let r = match cmd {
                BulkCmd::Send(a) => bulk::send(&a)?,
                BulkCmd::Recv(a) => bulk::recv(&a)?,
            };
            println!("{}", serde_json::to_string(&r)?);
        }
        Cmd::Relay(a) => {
            let st = relay::run(&a)?;
            eprintln!("{}", serde_json::to_string(&st)?);
        }
    }
    Ok(())
}
