//! `tcpdx-lab`: the network lab orchestrator (list, run, verify, cleanup, install,
//! bench-relay) plus the bulk workload and the relay as subcommands.
#![forbid(unsafe_code)]

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use tcpdx_lab::{relay, run, scenario, sweep, topology, verify, workload::bulk, workload::reqresp};

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
    /// Run randomized sweep cases (as root): one `seedNNNNN` directory per seed in --out;
    /// cases already there are kept. With --tcpdx, score them afterwards.
    Sweep {
        /// Seeds: N, N-M or a comma list of both (e.g. 1-40).
        #[arg(long)]
        seeds: String,
        /// Run directory (required unless --list).
        #[arg(long, required_unless_present = "list")]
        out: Option<PathBuf>,
        /// tcpdx binary to score the cases with afterwards.
        #[arg(long)]
        tcpdx: Option<PathBuf>,
        /// Write the score as JSON here (with --tcpdx).
        #[arg(long)]
        json: Option<PathBuf>,
        /// Only print the generated cases (no root needed).
        #[arg(long)]
        list: bool,
    },
    /// Score the cases of a sweep directory with a tcpdx binary (no lab run, no root):
    /// per-kind TP/FP/FN, precision and recall, and a per-case table.
    SweepScore {
        /// Run directory of `tcpdx-lab sweep`.
        dir: PathBuf,
        /// tcpdx binary.
        #[arg(long)]
        tcpdx: PathBuf,
        /// Only these seeds (default: every case in the directory).
        #[arg(long)]
        seeds: Option<String>,
        /// Write the whole report as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Score tcpdx's rounds (in process) against the kernel's state in each case's
    /// truth.json: per congestion control and capture point, the limit label and the cwnd
    /// estimate's error on rounds cwnd limited (before: the largest flight per round).
    RoundsScore {
        /// Run directory of `tcpdx-lab sweep` (or of lab cases).
        dir: PathBuf,
        /// Only these seeds (default: every case in the directory).
        #[arg(long)]
        seeds: Option<String>,
        /// Write the whole score as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// Request/response workload (Nagle + delayed ACK unless --nodelay).
    Rr {
        #[command(subcommand)]
        cmd: RrCmd,
    },
}

#[derive(Subcommand)]
enum RrCmd {
    /// Connect and run the transactions.
    Client(reqresp::ClientArgs),
    /// Accept one connection and answer each request.
    Serve(reqresp::ServeArgs),
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

/// An error in the command line's values (exit code 2).
#[derive(Debug)]
struct BadInput(String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

fn main() {
    // One line per error (the context chain), never a backtrace dump.
    if let Err(e) = real_main(Cli::parse()) {
        eprintln!("tcpdx-lab: {e:#}");
        std::process::exit(if e.downcast_ref::<BadInput>().is_some() {
            2
        } else {
            1
        });
    }
}

fn seeds_arg(s: &str) -> Result<Vec<u64>> {
    Ok(sweep::parse_seeds(s).map_err(BadInput)?)
}

fn score_and_print(
    dir: &std::path::Path,
    bin: &std::path::Path,
    seeds: Option<&[u64]>,
    json: Option<&std::path::Path>,
) -> Result<()> {
    if !bin.is_file() {
        return Err(BadInput(format!("no tcpdx binary at {}", bin.display())).into());
    }
    let r = sweep::score::score_run(dir, bin, seeds)?;
    print!("{}", r.text());
    if let Some(p) = json {
        std::fs::write(p, serde_json::to_vec_pretty(&r)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if !r.errors.is_empty() {
        bail!("{} case(s) could not be scored", r.errors.len());
    }
    Ok(())
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
        Cmd::Sweep {
            seeds,
            out,
            tcpdx,
            json,
            list,
        } => {
            let seeds = seeds_arg(&seeds)?;
            if list {
                for s in &seeds {
                    println!("{s:<6} {}", sweep::generate(*s).description);
                }
                return Ok(());
            }
            let Some(out) = out else {
                return Err(BadInput("--out is required to run the cases".into()).into());
            };
            need_root()?;
            let runs = sweep::run_sweep(&sweep::SweepOpts {
                seeds: seeds.clone(),
                out: out.clone(),
            })?;
            let failed: Vec<String> = runs
                .iter()
                .filter(|r| !r.ok)
                .map(|r| r.seed.to_string())
                .collect();
            eprintln!(
                "sweep: {} run, {} failed{}",
                runs.len(),
                failed.len(),
                if failed.is_empty() {
                    String::new()
                } else {
                    format!(" (seeds {})", failed.join(","))
                }
            );
            if let Some(bin) = tcpdx {
                score_and_print(&out, &bin, Some(&seeds), json.as_deref())?;
            }
        }
        Cmd::SweepScore {
            dir,
            tcpdx,
            seeds,
            json,
        } => {
            if !dir.is_dir() {
                return Err(BadInput(format!("no sweep directory at {}", dir.display())).into());
            }
            let seeds = seeds.as_deref().map(seeds_arg).transpose()?;
            score_and_print(&dir, &tcpdx, seeds.as_deref(), json.as_deref())?;
        }
        Cmd::RoundsScore { dir, seeds, json } => {
            if !dir.is_dir() {
                return Err(BadInput(format!("no directory at {}", dir.display())).into());
            }
            let seeds = seeds.as_deref().map(seeds_arg).transpose()?;
            let r = sweep::rounds::score_run(&dir, seeds.as_deref())?;
            print!("{}", r.text());
            if let Some(p) = json {
                std::fs::write(&p, serde_json::to_vec_pretty(&r)?)
                    .with_context(|| format!("writing {}", p.display()))?;
            }
            if !r.errors.is_empty() {
                bail!(
                    "{} case(s) could not be scored: {}",
                    r.errors.len(),
                    r.errors.join("; ")
                );
            }
        }
        Cmd::Rr { cmd } => {
            let r = match cmd {
                RrCmd::Client(a) => reqresp::client(&a)?,
                RrCmd::Serve(a) => reqresp::serve(&a)?,
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
