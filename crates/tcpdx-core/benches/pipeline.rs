//! Component benchmarks of the pipeline's hot path, one stage at a time, on a generated
//! capture of interleaved bulk transfers (`cargo bench -p tcpdx-core`). Whole runs against
//! tshark and tcptrace are measured by bench/run.sh.

use std::hint::black_box;
use std::io::Cursor;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tcpdx_capture::CaptureReader;
use tcpdx_core::{Analyzer, AnalyzerConfig, EventSink, FrameInput};
use tcpdx_testkit::bulk::bulk_capture;

const FRAMES: u64 = 100_000;

fn reader(pcap: &[u8]) -> CaptureReader {
    CaptureReader::from_reader("bench", Box::new(Cursor::new(pcap.to_vec()))).expect("open")
}

/// Counts rows so the analysis cannot be optimised away.
#[derive(Default)]
struct Count(u64);

impl EventSink for Count {
    fn segment(&mut self, a: &tcpdx_core::SegmentAnalysis) {
        self.0 += u64::from(a.flags.is_empty());
    }
}

fn stages(c: &mut Criterion) {
    let pcap = bulk_capture(FRAMES);
    let mut inputs = Vec::new();
    let mut r = reader(&pcap);
    while let Some(f) = r.next_frame().expect("frame") {
        inputs.push(FrameInput::classify(&f));
    }
    let mut g = c.benchmark_group("pipeline");
    g.throughput(Throughput::Elements(FRAMES));
    g.bench_function("capture: read records", |b| {
        b.iter(|| {
            let mut r = reader(&pcap);
            let mut n = 0u64;
            while let Some(f) = r.next_frame().expect("frame") {
                n += f.data.len() as u64;
            }
            black_box(n)
        })
    });
    g.bench_function("capture+wire: read and decode", |b| {
        b.iter(|| {
            // Into one reused input, as the analyzer decodes.
            let mut r = reader(&pcap);
            let mut input = FrameInput::EMPTY;
            let mut n = 0u64;
            while let Some(f) = r.next_frame().expect("frame") {
                n += input.decode_from(&f).len() as u64;
                black_box(&input);
            }
            black_box(n)
        })
    });
    g.bench_function("core: analyse decoded segments", |b| {
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
    g.finish();
}

criterion_group!(benches, stages);
criterion_main!(benches);
