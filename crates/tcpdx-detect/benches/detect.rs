//! Component benchmarks of the detect stage (`cargo bench -p tcpdx-detect`): the whole
//! diagnoser over analysed segments of generated bulk transfers, and the per-round record
//! it keeps for every sender (append, decode for a diagnosis, walk). Whole runs against
//! tshark are measured by bench/run.sh.

use std::hint::black_box;
use std::io::Cursor;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tcpdx_capture::CaptureReader;
use tcpdx_core::{Analyzer, AnalyzerConfig, EventSink, FrameInput, SegmentAnalysis};
use tcpdx_detect::Diagnoser;
use tcpdx_detect::infer::rounds::Rounds;
use tcpdx_detect::infer::sender::Round;
use tcpdx_testkit::bulk::bulk_capture;

const FRAMES: u64 = 100_000;
/// Rounds appended per run of the rounds benchmarks, over [`SENDERS`] senders (a bulk
/// transfer closes a round every three segments or so).
const ROUNDS: u64 = 33_000;
const SENDERS: usize = 64;

/// The decoded frames of a generated capture of 64 interleaved bulk transfers.
fn inputs() -> Vec<FrameInput> {
    let pcap = bulk_capture(FRAMES);
    let mut r = CaptureReader::from_reader("bench", Box::new(Cursor::new(pcap))).expect("open");
    let mut inputs = Vec::new();
    while let Some(f) = r.next_frame().expect("frame") {
        inputs.push(FrameInput::classify(&f));
    }
    inputs
}

/// Counts rows: the analysis alone, to subtract from the diagnoser's run.
#[derive(Default)]
struct Count(u64);

impl EventSink for Count {
    fn segment(&mut self, a: &SegmentAnalysis) {
        self.0 += u64::from(a.flags.is_empty());
    }
}

/// Round `i` of a steady bulk sender: 0.65 ms apart, a few segments each.
fn round(i: u64) -> Round {
    let start = 1_700_000_000_000_000_000 + i as i64 * 650_000;
    Round {
        start,
        end: start + 640_000 + (i % 7) as i64 * 1_000,
        pkts: 3 + (i % 3) as u32,
        bytes: 4_344,
        acked: 4_344,
        retx: 0,
        rwnd_limited: false,
        in_recovery: false,
        timeout: false,
        recovery_at_end: false,
        paced: false,
        rcv_window: 1_048_576,
        max_in_flight: 8_688,
    }
}

fn filled() -> Vec<Rounds> {
    let mut rs: Vec<Rounds> = (0..SENDERS).map(|_| Rounds::default()).collect();
    for i in 0..ROUNDS {
        rs[i as usize % SENDERS].push(&round(i));
    }
    rs
}

fn diagnoser(c: &mut Criterion) {
    let inputs = inputs();
    let mut g = c.benchmark_group("detect");
    g.throughput(Throughput::Elements(FRAMES));
    g.bench_function("analysis alone (baseline)", |b| {
        b.iter(|| {
            let mut an = Analyzer::new(AnalyzerConfig::default());
            let mut sink = Count::default();
            for i in &inputs {
                an.handle_input(i, &mut sink);
            }
            an.handle_end(&mut sink);
            black_box(sink.0)
        })
    });
    g.bench_function("analysis + diagnoser", |b| {
        b.iter(|| {
            let mut an = Analyzer::new(AnalyzerConfig::default());
            let mut d = Diagnoser::new();
            for i in &inputs {
                an.handle_input(i, &mut d);
            }
            an.handle_end(&mut d);
            black_box(d.finish().findings.len())
        })
    });
    g.finish();
}

fn rounds(c: &mut Criterion) {
    let mut g = c.benchmark_group("rounds");
    g.throughput(Throughput::Elements(ROUNDS));
    g.bench_function("append (encode)", |b| b.iter(|| black_box(filled())));
    g.bench_function("append + decode all", |b| {
        b.iter(|| {
            let mut rs = filled();
            for r in &mut rs {
                r.decode_all();
            }
            black_box(rs)
        })
    });
    let mut decoded = filled();
    for r in &mut decoded {
        r.decode_all();
    }
    g.bench_function("walk decoded", |b| {
        b.iter(|| {
            let pkts: u64 = decoded
                .iter()
                .flat_map(|r| r.iter())
                .map(|r| u64::from(r.pkts))
                .sum();
            black_box(pkts)
        })
    });
    let encoded = filled();
    g.bench_function("walk encoded", |b| {
        b.iter(|| {
            let pkts: u64 = encoded
                .iter()
                .flat_map(|r| r.iter())
                .map(|r| u64::from(r.pkts))
                .sum();
            black_box(pkts)
        })
    });
    g.finish();
}

criterion_group!(benches, diagnoser, rounds);
criterion_main!(benches);
