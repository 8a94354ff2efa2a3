//! The library's entry points on captures shipped in the repository.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tcpdx::{Capture, Error, EventSink, Filter, Options, Progress, SegmentAnalysis, SrtConfig};

fn data(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data")
        .join(p)
}

fn threads(n: usize) -> Options {
    Options {
        threads: Some(n),
        ..Options::default()
    }
}

/// Segments seen, and those with an analysis flag.
#[derive(Default)]
struct Count {
    segments: u64,
    flagged: u64,
    streams: Vec<u32>,
}

impl EventSink for Count {
    fn segment(&mut self, a: &SegmentAnalysis) {
        self.segments += 1;
        self.flagged += u64::from(!a.flags.is_empty());
        if !self.streams.contains(&a.stream.0) {
            self.streams.push(a.stream.0);
        }
    }
}

#[test]
fn the_diagnosis_is_the_same_on_one_thread_and_on_two() {
    let path = data("lab/case003_nfs_write_stall/client.pcap.gz");
    let one = Capture::open(&path).diagnose(&threads(1)).unwrap();
    let two = Capture::open(&path).diagnose(&threads(2)).unwrap();
    assert!(!one.findings.is_empty());
    let key = |d: &tcpdx::Diagnosis| {
        d.findings
            .iter()
            .map(|f| (f.kind, f.stream, f.evidence.len(), f.cost.seconds.to_bits()))
            .collect::<Vec<_>>()
    };
    assert_eq!(key(&one), key(&two));
    // The storage findings are part of it: the server's 5 s hold of one operation, named
    // on the application-limited finding (one hold cannot show a repeating timer).
    assert!(
        one.findings
            .iter()
            .any(|f| f.kind.as_str() == "application-limited"
                && f.explanation.contains("a whole 5 s: a timer")),
        "{:?}",
        key(&one)
    );
}

#[test]
fn flows_srt_and_events_agree_on_a_capture() {
    let path = data("lab/nfs3_read_clean/client.pcap.gz");
    for n in [1, 2] {
        let o = threads(n);
        let mut c = Capture::open(&path);
        let flows = c.flows(&o).unwrap();
        assert!(!flows.flows.is_empty(), "{n} threads");
        assert_eq!(flows.evicted.connections, 0);
        let frames = c.summary().unwrap().stats.frames;
        let srt = c.srt(&o, SrtConfig::default()).unwrap();
        assert!(!srt.tables.is_empty(), "{n} threads: NFS calls timed");
        let mut count = Count::default();
        c.events(&o, &mut count, |_| false).unwrap();
        assert!(count.segments > 0 && count.segments <= frames);
        // Flagged only: a subset, every one of them flagged.
        let mut flagged = Count::default();
        let only = Options {
            filter: Filter {
                flagged: true,
                ..Filter::default()
            },
            ..threads(n)
        };
        c.events(&only, &mut flagged, |_| false).unwrap();
        assert_eq!(flagged.segments, flagged.flagged);
        assert_eq!(flagged.segments, count.flagged);
    }
}

#[test]
fn the_stream_filter_keeps_one_connection() {
    let path = data("lab/case000_rto_delack/server.pcap.gz");
    for n in [1, 2] {
        let mut all = Count::default();
        let mut c = Capture::open(&path);
        c.events(&threads(n), &mut all, |_| false).unwrap();
        let last = *all.streams.last().unwrap();
        let mut one = Count::default();
        let o = Options {
            filter: Filter {
                streams: vec![last],
                ..Filter::default()
            },
            ..threads(n)
        };
        c.events(&o, &mut one, |_| false).unwrap();
        assert_eq!(one.streams, [last]);
        assert!(one.segments < all.segments || all.streams.len() == 1);
    }
}

#[test]
fn a_stream_is_read_once() {
    let bytes = std::fs::read(data("fast-retransmission.pcapng")).unwrap();
    let mut c = Capture::from_reader(std::io::Cursor::new(bytes));
    let d = c.diagnose(&threads(1)).unwrap();
    let file = Capture::open(data("fast-retransmission.pcapng"))
        .diagnose(&threads(1))
        .unwrap();
    assert_eq!(d.findings.len(), file.findings.len());
    assert!(matches!(c.flows(&threads(1)), Err(Error::ReadTwice)));
}

#[test]
fn bad_input_is_a_capture_error_naming_the_file() {
    let e = Capture::open(data("malformed/empty.pcap"))
        .diagnose(&Options::default())
        .unwrap_err();
    assert!(matches!(e, Error::Capture(_)), "{e}");
    assert!(e.to_string().contains("empty.pcap"), "{e}");
    let missing = Capture::open(data("no-such.pcap"))
        .flows(&Options::default())
        .unwrap_err();
    assert!(missing.to_string().contains("no-such.pcap"), "{missing}");
}

#[derive(Default)]
struct Seen {
    starts: AtomicU64,
    frames: AtomicU64,
    finishes: AtomicU64,
}

impl Progress for Seen {
    fn start(&self, _len: Option<u64>) {
        self.starts.fetch_add(1, Ordering::Relaxed);
    }
    fn update(&self, _bytes: u64, frames: u64) {
        self.frames.store(frames, Ordering::Relaxed);
    }
    fn finish(&self) {
        self.finishes.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn progress_is_told_of_each_pass() {
    let seen = Arc::new(Seen::default());
    for n in [1, 2] {
        let o = Options {
            progress: Some(seen.clone()),
            ..threads(n)
        };
        Capture::open(data("lab/smb3_read_clean/client.pcap.gz"))
            .flows(&o)
            .unwrap();
    }
    assert_eq!(seen.starts.load(Ordering::Relaxed), 2);
    assert_eq!(seen.finishes.load(Ordering::Relaxed), 2);
}

#[test]
fn export_writes_the_tables_and_bad_input_leaves_no_directory() {
    let base = std::env::temp_dir().join(format!("tcpdx-facade-export-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let dir = base.join("tables");
    let counts = Capture::open(data("fast-retransmission.pcapng"))
        .export(&Options::default(), &dir, &[])
        .unwrap();
    assert!(
        counts.iter().any(|(t, n)| *t == "findings" && *n > 0),
        "{counts:?}"
    );
    let none = base.join("none");
    assert!(
        Capture::open(data("malformed/empty.pcap"))
            .export(&Options::default(), &none, &[])
            .is_err()
    );
    assert!(!none.exists());
    std::fs::remove_dir_all(&base).unwrap();
}

/// Asks to stop at its first update.
struct StopAtOnce(AtomicU64);

impl Progress for StopAtOnce {
    fn update(&self, _bytes: u64, _frames: u64) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    fn cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed) > 0
    }
}

#[test]
fn a_progress_that_cancels_stops_the_pass_on_any_number_of_threads() {
    for n in [1, 2] {
        let stop = Arc::new(StopAtOnce(AtomicU64::new(0)));
        let o = Options {
            progress: Some(stop.clone()),
            ..threads(n)
        };
        let mut c = Capture::open(data("lab/case000_rto_delack/client.pcap.gz"));
        let e = c.diagnose(&o).unwrap_err();
        assert!(matches!(e, Error::Cancelled), "{n} threads: {e}");
        assert_eq!(e.one_line(), "cancelled");
        assert_eq!(
            stop.0.load(Ordering::Relaxed),
            1,
            "{n} threads: one update, then stop"
        );
        let mut count = Count::default();
        assert!(matches!(
            c.events(&o, &mut count, |_| false),
            Err(Error::Cancelled)
        ));
    }
}

#[test]
fn the_messages_of_a_cut_capture_say_where_it_was_cut() {
    for n in [1, 2] {
        let mut c = Capture::open(data("malformed/pcap-record-cut.pcap"));
        c.diagnose(&threads(n)).unwrap();
        let m = c.summary().unwrap().messages(10);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(m[0].starts_with("warning: "), "{m:?}");
        assert!(
            m[0].ends_with(
                "pcap-record-cut.pcap: record cut off at byte 94 (frame 2): analysed up to there"
            ),
            "{m:?}"
        );
    }
    let mut clean = Capture::open(data("fast-retransmission.pcapng"));
    clean.diagnose(&Options::default()).unwrap();
    assert!(clean.summary().unwrap().messages(10).is_empty());
}

#[test]
fn one_line_names_the_file_and_the_offset() {
    let e = Capture::open(data("malformed/pcap-caplen-2gb.pcap"))
        .diagnose(&Options::default())
        .unwrap_err();
    let line = e.one_line();
    assert!(!line.contains('\n'), "{line}");
    assert!(
        line.ends_with("pcap-caplen-2gb.pcap: byte 94: record has captured length 2147483647, more than the maximum of 262144 (corrupt capture?)"),
        "{line}"
    );
}

#[test]
fn a_set_of_files_is_one_capture() {
    // A lab capture cut in three consecutive files, given as a list and as a directory.
    use tcpdx_testkit::OwnedFrame;
    let one = data("lab/case000_rto_delack/server.pcap.gz");
    let mut r = tcpdx_capture::CaptureReader::open(&one).unwrap();
    let mut all = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        all.push(OwnedFrame {
            no: f.no,
            ts: f.ts,
            link: f.link,
            orig_len: f.orig_len,
            data: f.data.to_vec(),
        });
    }
    let dir = std::env::temp_dir().join(format!("tcpdx-lib-set-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let per = all.len().div_ceil(3);
    let parts: Vec<PathBuf> = all
        .chunks(per)
        .enumerate()
        .map(|(i, c)| {
            let p = dir.join(format!("part{i}.pcap"));
            let mut f = std::fs::File::create(&p).unwrap();
            tcpdx_testkit::pcap_writer::write_pcap(&mut f, c, true).unwrap();
            p
        })
        .collect();
    let want = Capture::open(&one).diagnose(&threads(1)).unwrap();
    assert!(want.findings.iter().any(|f| !f.evidence.is_empty()));
    for n in [1, 2] {
        let mut set = Capture::open_set(&parts, tcpdx::SetOrder::Merge);
        let mut got = set.diagnose(&threads(n)).unwrap();
        let map = set.summary().and_then(|s| s.set.clone()).expect("a set");
        assert_eq!(map.paths(), parts.as_slice());
        for e in got.findings.iter_mut().flat_map(|f| f.evidence.iter_mut()) {
            let src = e.source.take().expect("the evidence names its file");
            let i = (e.frame - 1) / per as u64;
            assert_eq!(src.file, parts[i as usize].display().to_string());
            assert_eq!(src.frame, e.frame - i * per as u64);
        }
        assert_eq!(got, want, "{n} thread(s)");
        // The directory: the same files.
        let by_dir = Capture::open(&dir).diagnose(&threads(n)).unwrap();
        assert_eq!(by_dir.findings.len(), want.findings.len());
    }
    // One file: no source.
    let mut single = Capture::open_set([&one], tcpdx::SetOrder::Merge);
    let d = single.diagnose(&threads(1)).unwrap();
    assert!(single.summary().unwrap().set.is_none());
    assert!(
        d.findings
            .iter()
            .flat_map(|f| &f.evidence)
            .all(|e| e.source.is_none())
    );
}
