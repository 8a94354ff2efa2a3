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
    /// GSO mode: the TUN passes TCP super-packets (IFF_VNET_HDR + TUNSETOFFLOAD) that the
    /// relay forwards whole, cutting them into wire segments only where an impairment acts.
    #[arg(long)]
    #[serde(default)]
    pub gso: bool,
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
    /// Wire segments read (a GSO super-packet counts as its MTU-sized segments).
    #[serde(default)]
    pub rx_wire: u64,
    /// Wire segments written back.
    #[serde(default)]
    pub tx_wire: u64,
    /// Of `tx_wire`, the client-to-server ones (data of a bulk upload).
    #[serde(default)]
    pub tx_wire_c2s: u64,
    /// Of `tx_wire`, the server-to-client ones (ACKs of a bulk upload).
    #[serde(default)]
    pub tx_wire_s2c: u64,
    /// GSO super-packets cut into segments because an impairment acted on them.
    #[serde(default)]
    pub cut: u64,
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
        if self.gso {
            a.push("--gso".into());
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

/// Where injected events go: the JSONL log (first write error kept) and the counters.
struct Sink {
    log: Option<BufWriter<File>>,
    err: Option<std::io::Error>,
}

impl Sink {
    fn event(&mut self, st: &mut RelayStats, e: &Event) {
        if let Some(w) = self.log.as_mut()
            && let Err(err) = write_event(w, e)
        {
            self.err.get_or_insert(err);
        }
        match e.kind {
            sched::EventKind::Reorder => st.reordered += 1,
            sched::EventKind::BlackoutStart => {}
            _ => st.dropped += 1,
        }
    }
}

/// The relay's packet memory: `n` slots of `size` bytes, a free list and per-slot lengths
/// and wire-segment counts. Allocated once; slots are reused LIFO so few pages are hot.
struct Pool {
    buf: Vec<u8>,
    size: usize,
    lens: Vec<u32>,
    segs: Vec<u32>,
    free: Vec<u32>,
}

impl Pool {
    fn new(n: usize, size: usize) -> Pool {
        Pool {
            buf: vec![0u8; n * size],
            size,
            lens: vec![0; n],
            segs: vec![1; n],
            free: (0..n as u32).rev().collect(),
        }
    }

    fn slot(&self, slot: u32) -> &[u8] {
        let off = slot as usize * self.size;
        &self.buf[off..off + self.lens[slot as usize] as usize]
    }

    fn slot_mut(&mut self, slot: u32) -> &mut [u8] {
        let off = slot as usize * self.size;
        &mut self.buf[off..off + self.size]
    }
}

/// The relay's state apart from the TUN: decisions, release queue, packet memory, counters.
struct Core {
    imp: Impairer,
    q: Scheduler,
    pool: Pool,
    st: RelayStats,
    sink: Sink,
    scratch: Vec<u8>,
    /// vnet header bytes before each packet (0 without GSO).
    hdr: usize,
}

impl Core {
    /// Decides the plain packet in `slot` and queues, holds or frees it.
    fn decide_slot(&mut self, now: i64, slot: u32) {
        let (st, sink) = (&mut self.st, &mut self.sink);
        let p = &self.pool.slot(slot)[self.hdr..];
        let (dir, v) = self.imp.decide(now, p, &mut |e| sink.event(st, &e));
        match v {
            Verdict::Forward { due } => self.q.push(due, slot, dir),
            Verdict::Hold { k, deadline } => self.q.hold(slot, dir, k, deadline),
            Verdict::Drop => self.pool.free.push(slot),
        }
    }

    /// Handles a GSO super-packet of `k` wire segments in `slot`: forwarded whole when no
    /// impairment can act on it, else cut into plain segments (each in its own slot, with
    /// a zero vnet header: checksums complete) and decided one by one, as on the wire.
    fn decide_super(&mut self, now: i64, slot: u32, k: u32, gso_size: usize) {
        let h = self.hdr;
        if !self.q.has_held()
            && let Some((dir, Verdict::Forward { due })) =
                self.imp.decide_whole(now, &self.pool.slot(slot)[h..], k)
        {
            self.pool.segs[slot as usize] = k;
            self.q.push(due, slot, dir);
            return;
        }
        let n = self.pool.slot(slot).len() - h;
        self.scratch[..n].copy_from_slice(&self.pool.slot(slot)[h..]);
        self.pool.free.push(slot);
        self.st.cut += 1;
        for i in 0..k as usize {
            let Some(s2) = self.pool.free.pop() else {
                self.st.pool_overflow += u64::from(k) - i as u64;
                return;
            };
            let buf = self.pool.slot_mut(s2);
            buf[..h].fill(0);
            let Some(m) = pkt::gso_segment(&self.scratch[..n], gso_size, i, &mut buf[h..]) else {
                self.pool.free.push(s2);
                self.st.write_errors += 1;
                continue;
            };
            self.pool.lens[s2 as usize] = (h + m) as u32;
            self.pool.segs[s2 as usize] = 1;
            self.decide_slot(now, s2);
        }
    }

    /// Handles the packet just read into `slot` (`n` bytes).
    fn on_read(&mut self, now: i64, slot: u32, n: usize) {
        self.st.rx += 1;
        self.pool.lens[slot as usize] = n as u32;
        self.pool.segs[slot as usize] = 1;
        if self.hdr == 0 {
            self.st.rx_wire += 1;
            return self.decide_slot(now, slot);
        }
        if n < self.hdr {
            self.pool.free.push(slot);
            self.st.write_errors += 1;
            return;
        }
        let v = pkt::vnet(self.pool.slot(slot)).unwrap_or_default();
        let t = pkt::parse(&self.pool.slot(slot)[self.hdr..]);
        let k = pkt::wire_segments(v, t.as_ref());
        self.st.rx_wire += u64::from(k);
        if k > 1 {
            self.decide_super(now, slot, k, usize::from(v.gso_size));
        } else {
            self.decide_slot(now, slot);
        }
    }

    /// Writes `slot` (travelling in direction `dir`) to the TUN and returns it to the pool.
    fn send(&mut self, tun: &mut File, slot: u32, dir: Dir) {
        match tun.write(self.pool.slot(slot)) {
            Ok(_) => {
                let k = u64::from(self.pool.segs[slot as usize]);
                self.st.tx += 1;
                self.st.tx_wire += k;
                match dir {
                    Dir::C2s => self.st.tx_wire_c2s += k,
                    Dir::S2c => self.st.tx_wire_s2c += k,
                }
            }
            Err(_) => self.st.write_errors += 1,
        }
        self.pool.free.push(slot);
    }

    /// Sends everything due at `now`, with the held packets it releases.
    fn release_due(&mut self, tun: &mut File, now: i64) {
        while let Some((slot, dir, id)) = self.q.pop_due(now) {
            self.send(tun, slot, dir);
            let (mut d, mut i): (Dir, u64) = (dir, id);
            while let Some((s2, d2, i2)) = self.q.on_sent(d, i).or_else(|| self.q.pop_released()) {
                self.send(tun, s2, d2);
                (d, i) = (d2, i2);
            }
        }
    }

    /// The counters as of now (`t0`: monotonic start time).
    fn stats(&self, t0: i64) -> RelayStats {
        let mut st = self.st.clone();
        st.data_segments = self.imp.data_segments();
        st.left_in_queue = self.q.len() as u64;
        st.elapsed_s = (crate::sys::mono_ns() - t0) as f64 / 1e9;
        st.cpu_s = crate::sys::cpu_seconds();
        st
    }
}

/// Path of the counter snapshot a running relay writes on SIGUSR1 (next to `stats`).
pub fn snapshot_path(stats: &str) -> String {
    format!("{stats}.snap")
}

/// Writes `st` to `path` atomically (temporary file, then rename), so a reader never
/// sees a half-written snapshot.
fn write_snapshot(path: &str, st: &RelayStats) -> Result<()> {
    let tmp = format!("{path}.tmp");
    std::fs::write(&tmp, serde_json::to_vec(st)?)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

/// Runs the relay until SIGINT/SIGTERM; returns its counters. On SIGUSR1 it writes the
/// counters so far to [`snapshot_path`] of `--stats` (how a benchmark reads a window).
pub fn run(args: &RelayArgs) -> Result<RelayStats> {
    let imp = args.impairments()?;
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&stop))?;
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&stop))?;
    let snap = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGUSR1, Arc::clone(&snap))?;
    let mut tun = crate::sys::open_tun(&args.dev, args.gso)
        .with_context(|| format!("opening TUN {}", args.dev))?;
    crate::sys::set_min_timer_slack();
    // The relay is the network: a higher CPU share keeps other jobs on CPU0 from
    // delaying it (its TUN ring of 10000 packets overflows after ~70 ms at 140 kpps).
    if !crate::sys::set_nice(args.nice) {
        eprintln!("relay: cannot set nice {} (not root?)", args.nice);
    }
    let sink = Sink {
        log: match &args.log {
            Some(p) => Some(BufWriter::with_capacity(
                1 << 20,
                File::create(p).with_context(|| format!("creating {p}"))?,
            )),
            None => None,
        },
        err: None,
    };
    // With GSO a slot must hold a 64 KiB super-packet plus its vnet header; fewer slots
    // then (untouched pages of the pool cost no memory).
    let hdr = if args.gso { pkt::VNET_HDR_LEN } else { 0 };
    let (nslots, ssize) = if args.gso {
        (args.slots.clamp(16, 8192), 65536 + 64)
    } else {
        (args.slots.max(16), args.slot_size.max(2048))
    };
    let mut c = Core {
        imp: Impairer::new(imp),
        q: Scheduler::with_capacity(nslots),
        pool: Pool::new(nslots, ssize),
        st: RelayStats::default(),
        sink,
        scratch: vec![0u8; 65536 + 64],
        hdr,
    };
    let t0 = crate::sys::mono_ns();
    let mut got = 0usize;
    let spin_ns = i64::from(args.spin_us) * 1000;
    while !stop.load(Ordering::Relaxed) {
        // Only sleep when the last read found nothing and nothing is due within spin_us:
        // under load the loop is read batch -> release due, with no poll syscall and
        // no context switch.
        if got == 0 {
            let now = crate::sys::mono_ns();
            let timeout = match c.q.next_due() {
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
        for _ in 0..BATCH {
            let Some(slot) = c.pool.free.pop() else {
                // pool exhausted: read and discard (counted as an unintended loss)
                match tun.read(&mut c.scratch) {
                    Ok(_n) => {
                        c.st.rx += 1;
                        c.st.rx_wire += 1;
                        c.st.pool_overflow += 1;
                        got += 1;
                        continue;
                    }
                    Err(_) => break,
                }
            };
            match tun.read(c.pool.slot_mut(slot)) {
                Ok(n) => {
                    got += 1;
                    c.on_read(crate::sys::mono_ns(), slot, n);
                }
                Err(e) => {
                    c.pool.free.push(slot);
                    if e.kind() != ErrorKind::WouldBlock && e.kind() != ErrorKind::Interrupted {
                        return Err(e).context("reading TUN");
                    }
                    break;
                }
            }
        }
        c.st.max_queue = c.st.max_queue.max(c.q.len() as u64);
        c.release_due(&mut tun, crate::sys::mono_ns());
        if snap.swap(false, Ordering::Relaxed)
            && let Some(p) = &args.stats
        {
            write_snapshot(&snapshot_path(p), &c.stats(t0))?;
        }
    }
    let st = c.stats(t0);
    if let Some(mut w) = c.sink.log {
        w.flush()?;
    }
    if let Some(e) = c.sink.err {
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
