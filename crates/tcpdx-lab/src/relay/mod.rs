//! Impairment relay on a TUN device (netem substitute), run inside the router namespace.
//!
//! Policy routing steers packets into the TUN; the relay reads them, delays, drops or
//! reorders them and writes them back into the same TUN, from where the kernel forwards
//! them. Packets live in a preallocated slot pool and are released from a time-ordered
//! queue ([`sched::Scheduler`]); reads are drained in batches; nothing is allocated per
//! packet. Every injected event is logged as one JSON line with a CLOCK_REALTIME ns
//! timestamp (the pcap clock).

pub mod pkt;
pub mod sched;

use anyhow::{Context, Result, bail};
use clap::Args;
use sched::{Dir, Event, Impairer, Impairments, Scheduler, Verdict};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufWriter, ErrorKind, Read, Write};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Command-line options of the relay (`tcpdx-relay` / `tcpdx-lab relay`).
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct RelayArgs {
    /// TUN device name (created in the current netns if missing).
    #[arg(long, default_value = "tdxtun0")]
    pub dev: String,
    /// Server address: packets to it are client-to-server, all others server-to-client.
    #[arg(long)]
    pub server: Ipv4Addr,
    /// One-way delay in both directions (ms).
    #[arg(long, default_value_t = 0.0)]
    pub delay_ms: f64,
    /// One-way delay client-to-server (ms; overrides --delay-ms).
    #[arg(long)]
    pub delay_c2s_ms: Option<f64>,
    /// One-way delay server-to-client (ms; overrides --delay-ms).
    #[arg(long)]
    pub delay_s2c_ms: Option<f64>,
    /// Apply drops/reorders only to segments with this source or destination port.
    #[arg(long)]
    pub only_port: Option<u16>,
    /// Drop these data segments (1-based, e.g. "100,200-230").
    #[arg(long, default_value = "")]
    pub drop_nth: String,
    /// Also drop the next R retransmissions of each dropped segment.
    #[arg(long, default_value_t = 0)]
    pub drop_repeat: u32,
    /// Drop each data segment with this probability (seeded).
    #[arg(long, default_value_t = 0.0)]
    pub drop_prob: f64,
    /// Start a blackout at these data segments (e.g. "1500,4000").
    #[arg(long, default_value = "")]
    pub blackout_after: String,
    /// Blackout length (ms): every data segment is dropped meanwhile.
    #[arg(long, default_value_t = 0.0)]
    pub blackout_ms: f64,
    /// Reorder these data segments.
    #[arg(long, default_value = "")]
    pub reorder_nth: String,
    /// Reorder each data segment with this probability (seeded).
    #[arg(long, default_value_t = 0.0)]
    pub reorder_prob: f64,
    /// Count-based reordering: release a held segment after K later packets.
    #[arg(long, default_value_t = 3)]
    pub reorder_k: u32,
    /// Time-based reordering: send a held segment this many ms late (0 = count-based).
    #[arg(long, default_value_t = 0.0)]
    pub reorder_delay_ms: f64,
    /// Seed of the random choices.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// JSONL log of injected events.
    #[arg(long)]
    pub log: Option<String>,
    /// Write final counters (JSON) here on exit.
    #[arg(long)]
    pub stats: Option<String>,
    /// Packet slots in the pool (queue capacity).
    #[arg(long, default_value_t = 32768)]
    pub slots: usize,
    /// Largest packet (bytes) a slot holds (MTU + headroom).
    #[arg(long, default_value_t = 9216)]
    pub slot_size: usize,
    /// Busy-poll instead of sleeping when the next release is this close (µs). Longer
    /// spinning (1000 µs) measured slower: it starves other work on CPU0.
    #[arg(long, default_value_t = 20)]
    #[serde(default)]
    pub spin_us: u32,
    /// Nice value of the relay process (negative: more CPU share than other jobs).
    #[arg(long, default_value_t = -10, allow_negative_numbers = true)]
    #[serde(default)]
    pub nice: i32,
}

/// Counters reported when the relay exits.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RelayStats {
    /// Packets read from the TUN.
    pub rx: u64,
    /// Packets written back.
    pub tx: u64,
    /// Data segments on the impaired flow(s).
    pub data_segments: u64,
    /// Packets dropped on purpose.
    pub dropped: u64,
    /// Segments reordered on purpose.
    pub reordered: u64,
    /// Packets lost because the pool was full (unintended).
    pub pool_overflow: u64,
    /// Failed writes (unintended losses).
    pub write_errors: u64,
    /// Largest number of packets queued at once.
    pub max_queue: u64,
    /// Packets still queued at exit (not sent).
    pub left_in_queue: u64,
    /// Run time in seconds.
    pub elapsed_s: f64,
    /// CPU time the relay used (user + system, seconds).
    #[serde(default)]
    pub cpu_s: f64,
}

/// Parses "1,5,10-12" into a sorted list of indices.
pub fn parse_list(s: &str) -> Result<Vec<u64>> {
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((a, b)) = part.split_once('-') {
            let (a, b): (u64, u64) = (a.parse()?, b.parse()?);
            if b < a {
                bail!("bad range {part}");
            }
            v.extend(a..=b);
        } else {
            v.push(part.parse().with_context(|| format!("bad index {part}"))?);
        }
    }
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

fn ms_ns(ms: f64) -> i64 {
    (ms * 1e6).round() as i64
}

impl RelayArgs {
    /// The impairment parameters these options describe.
    pub fn impairments(&self) -> Result<Impairments> {
        Ok(Impairments {
            server: u32::from(self.server),
            delay_c2s_ns: ms_ns(self.delay_c2s_ms.unwrap_or(self.delay_ms)),
            delay_s2c_ns: ms_ns(self.delay_s2c_ms.unwrap_or(self.delay_ms)),
            only_port: self.only_port,
            drop_nth: parse_list(&self.drop_nth)?,
            drop_repeat: self.drop_repeat,
            drop_prob: self.drop_prob,
            blackout_after: parse_list(&self.blackout_after)?,
            blackout_ns: ms_ns(self.blackout_ms),
            reorder_nth: parse_list(&self.reorder_nth)?,
            reorder_prob: self.reorder_prob,
            reorder_k: self.reorder_k,
            reorder_delay_ns: ms_ns(self.reorder_delay_ms),
            seed: self.seed,
        })
    }

    /// Renders the options as command-line arguments (for spawning the relay).
    pub fn to_args(&self) -> Vec<String> {
        let mut a = vec![
            "--dev".into(),
            self.dev.clone(),
            "--server".into(),
            self.server.to_string(),
        ];
        let mut opt = |k: &str, v: String| {
            a.push(format!("--{k}"));
            a.push(v);
        };
        opt("delay-ms", self.delay_ms.to_string());
        if let Some(d) = self.delay_c2s_ms {
            opt("delay-c2s-ms", d.to_string());
        }
        if let Some(d) = self.delay_s2c_ms {
            opt("delay-s2c-ms", d.to_string());
        }
        if let Some(p) = self.only_port {
            opt("only-port", p.to_string());
        }
        for (k, v) in [
            ("drop-nth", &self.drop_nth),
            ("blackout-after", &self.blackout_after),
            ("reorder-nth", &self.reorder_nth),
        ] {
            if !v.is_empty() {
                opt(k, v.clone());
            }
        }
        opt("drop-repeat", self.drop_repeat.to_string());
        opt("drop-prob", self.drop_prob.to_string());
        opt("blackout-ms", self.blackout_ms.to_string());
        opt("reorder-prob", self.reorder_prob.to_string());
        opt("reorder-k", self.reorder_k.to_string());
        opt("reorder-delay-ms", self.reorder_delay_ms.to_string());
        opt("seed", self.seed.to_string());
        opt("slots", self.slots.to_string());
        opt("slot-size", self.slot_size.to_string());
        opt("spin-us", self.spin_us.to_string());
        opt("nice", self.nice.to_string());
        if let Some(l) = &self.log {
            opt("log", l.clone());
        }
        if let Some(s) = &self.stats {
            opt("stats", s.clone());
        }
        a
    }
}

fn write_event(w: &mut impl Write, e: &Event) -> std::io::Result<()> {
    let t = e.tcp;
    writeln!(
        w,
        r#"{{"t_ns":{},"ev":"{}","n":{},"dir":"{}","src":"{}","dst":"{}","sport":{},"dport":{},"seq":{},"len":{}}}"#,
        crate::sys::realtime_ns(),
        e.kind.name(),
        e.n,
        e.dir.name(),
        Ipv4Addr::from(t.src),
        Ipv4Addr::from(t.dst),
        t.sport,
        t.dport,
        t.seq,
        t.payload
    )
}

const BATCH: usize = 256;

/// Runs the relay until SIGINT/SIGTERM; returns its counters.
pub fn run(args: &RelayArgs) -> Result<RelayStats> {
    let imp = args.impairments()?;
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&stop))?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&stop))?;
    let mut tun =
        crate::sys::open_tun(&args.dev).with_context(|| format!("opening TUN {}", args.dev))?;
    crate::sys::set_min_timer_slack();
    // The relay is the network: a higher CPU share keeps other jobs on CPU0 from
    // delaying it (its TUN ring of 10000 packets overflows after ~70 ms at 140 kpps).
    if !crate::sys::set_nice(args.nice) {
        eprintln!("relay: cannot set nice {} (not root?)", args.nice);
    }
    let mut log: Option<BufWriter<File>> = match &args.log {
        Some(p) => Some(BufWriter::with_capacity(
            1 << 20,
            File::create(p).with_context(|| format!("creating {p}"))?,
        )),
        None => None,
    };
    let (nslots, ssize) = (args.slots.max(16), args.slot_size.max(2048));
    let mut pool = vec![0u8; nslots * ssize];
    let mut lens = vec![0u32; nslots];
    let mut free: Vec<u32> = (0..nslots as u32).rev().collect();
    let mut scratch = vec![0u8; 65536];
    let mut q = Scheduler::with_capacity(nslots);
    let mut imp = Impairer::new(imp);
    let mut st = RelayStats::default();
    let t0 = crate::sys::mono_ns();
    let mut log_err = None;

    // Writes one slot to the TUN and returns it to the pool.
    let send = |tun: &mut File,
                pool: &[u8],
                lens: &[u32],
                free: &mut Vec<u32>,
                st: &mut RelayStats,
                slot: u32| {
        let off = slot as usize * ssize;
        let len = lens[slot as usize] as usize;
        match tun.write(&pool[off..off + len]) {
            Ok(_) => st.tx += 1,
            Err(_) => st.write_errors += 1,
        }
        free.push(slot);
    };

    let mut got = 0usize;
    let spin_ns = i64::from(args.spin_us) * 1000;
    while !stop.load(Ordering::Relaxed) {
        // Only sleep when the last read found nothing and nothing is due within spin_us:
        // under load the loop is read batch -> release due, with no poll syscall and
        // no context switch.
        if got == 0 {
            let now = crate::sys::mono_ns();
            let timeout = match q.next_due() {
                Some(d) if d - now <= spin_ns => None,
                Some(d) => {
                    Some(Duration::from_nanos((d - now) as u64).min(Duration::from_millis(50)))
                }
                None => Some(Duration::from_millis(50)),
            };
            if let Some(t) = timeout {
                crate::sys::poll_readable(&tun, Some(t))?;
            }
        }
        got = 0;
        {
            for _ in 0..BATCH {
                let Some(slot) = free.pop() else {
                    // pool exhausted: read and discard (counted as an unintended loss)
                    match tun.read(&mut scratch) {
                        Ok(_n) => {
                            st.rx += 1;
                            st.pool_overflow += 1;
                            got += 1;
                            continue;
                        }
                        Err(_) => break,
                    }
                };
                let off = slot as usize * ssize;
                let n = match tun.read(&mut pool[off..off + ssize]) {
                    Ok(n) => n,
                    Err(e) => {
                        free.push(slot);
                        if e.kind() != ErrorKind::WouldBlock && e.kind() != ErrorKind::Interrupted {
                            return Err(e).context("reading TUN");
                        }
                        break;
                    }
                };
                got += 1;
                st.rx += 1;
                lens[slot as usize] = n as u32;
                let now = crate::sys::mono_ns();
                let mut on_event = |e: Event| {
                    if let Some(w) = log.as_mut()
                        && let Err(err) = write_event(w, &e)
                    {
                        log_err = Some(err);
                    }
                    match e.kind {
                        sched::EventKind::Reorder => st.reordered += 1,
                        sched::EventKind::BlackoutStart => {}
                        _ => st.dropped += 1,
                    }
                };
                let (dir, v) = imp.decide(now, &pool[off..off + n], &mut on_event);
                match v {
                    Verdict::Forward { due } => q.push(due, slot, dir),
                    Verdict::Hold { k, deadline } => q.hold(slot, dir, k, deadline),
                    Verdict::Drop => free.push(slot),
                }
            }
            st.max_queue = st.max_queue.max(q.len() as u64);
        }
        let now = crate::sys::mono_ns();
        while let Some((slot, dir, id)) = q.pop_due(now) {
            send(&mut tun, &pool, &lens, &mut free, &mut st, slot);
            let (mut d, mut i): (Dir, u64) = (dir, id);
            while let Some((s2, d2, i2)) = q.on_sent(d, i).or_else(|| q.pop_released()) {
                send(&mut tun, &pool, &lens, &mut free, &mut st, s2);
                (d, i) = (d2, i2);
            }
        }
    }
    st.data_segments = imp.data_segments();
    st.left_in_queue = q.len() as u64;
    st.elapsed_s = (crate::sys::mono_ns() - t0) as f64 / 1e9;
    st.cpu_s = crate::sys::cpu_seconds();
    if let Some(mut w) = log {
        w.flush()?;
    }
    if let Some(e) = log_err {
        return Err(e).context("writing relay log");
    }
    if let Some(p) = &args.stats {
        std::fs::write(p, serde_json::to_vec(&st)?)?;
    }
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse() {
        assert_eq!(parse_list("5,1-3, 3").unwrap(), vec![1, 2, 3, 5]);
        assert!(parse_list("4-2").is_err());
        assert!(parse_list("").unwrap().is_empty());
    }

    #[test]
    fn args_roundtrip_through_cli() {
        use clap::Parser;
        #[derive(Parser)]
        struct W {
            #[command(flatten)]
            r: RelayArgs,
        }
        let a = W::parse_from([
            "x",
            "--server",
            "10.1.2.2",
            "--delay-ms",
            "5",
            "--drop-nth",
            "3,4",
        ])
        .r;
        let mut argv = vec!["x".to_string()];
        argv.extend(a.to_args());
        let b = W::parse_from(argv).r;
        assert_eq!(b.impairments().unwrap().drop_nth, vec![3, 4]);
        assert_eq!(b.impairments().unwrap().delay_c2s_ns, 5_000_000);
    }
}
