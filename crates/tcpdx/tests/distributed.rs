//! The staged run (`tcpdx::distributed`: shard, analyse the partitions, merge) gives the
//! diagnosis of the single run, byte for byte as JSON, on lab fixtures and a corpus
//! capture, whole or cut into consecutive files (a ring buffer), in 1 to 4 partitions.

use std::path::{Path, PathBuf};

use tcpdx::distributed::{self, Partial, ShardMeta};
use tcpdx::{Capture, Diagnosis, Options};
use tcpdx_capture::CaptureReader;
use tcpdx_testkit::{OwnedFrame, write_pcap};

fn repo(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(p)
}

fn json(d: &Diagnosis) -> String {
    let mut out = Vec::new();
    tcpdx_report::write_diagnosis_json(&mut out, d).unwrap();
    String::from_utf8(out).unwrap()
}

fn frames(path: &Path) -> Vec<OwnedFrame> {
    let mut r = CaptureReader::open(path).unwrap();
    let mut out = Vec::new();
    while let Some(f) = r.next_frame().unwrap() {
        out.push(OwnedFrame {
            no: f.no,
            ts: f.ts,
            link: f.link,
            orig_len: f.orig_len,
            data: f.data.to_vec(),
        });
    }
    out
}

/// `path` cut into `n` consecutive pcap files of about equal frame counts in `dir`.
fn cut(path: &Path, n: usize, dir: &Path) -> Vec<PathBuf> {
    let all = frames(path);
    let per = all.len().div_ceil(n).max(1);
    all.chunks(per)
        .enumerate()
        .map(|(i, c)| {
            let p = dir.join(format!("ring{i:02}.pcap"));
            let mut f = std::fs::File::create(&p).unwrap();
            write_pcap(&mut f, c, true).unwrap();
            p
        })
        .collect()
}

/// The staged run over `files` in `partitions` partitions equals the single run on
/// `whole` (JSON byte for byte), and the frames are all counted.
fn check(whole: &Path, files: &[PathBuf], partitions: u16) {
    let o = Options::default();
    let mut c = Capture::open(whole);
    let want = c.diagnose(&o).unwrap();
    let want_frames = c.summary().unwrap().stats.frames;
    let shards = tempfile::tempdir().unwrap();
    let (got, summary) = distributed::diagnose_files(files, shards.path(), partitions, &o).unwrap();
    assert_eq!(
        json(&got),
        json(&want),
        "{} in {} files, {partitions} partitions",
        whole.display(),
        files.len()
    );
    assert_eq!(summary.stats.frames, want_frames);
    let metas = distributed::shard_metas(shards.path()).unwrap();
    assert_eq!(metas.iter().map(|m| m.frames).sum::<u64>(), want_frames);
    // Each partition analysed apart (one call each, as one task each would), last first,
    // written to bytes and read back (as from another process), then merged: the same
    // diagnosis and counters.
    let partials: Vec<_> = (0..partitions)
        .rev()
        .map(|p| {
            let partial = distributed::diagnose_partition(shards.path(), p, &o).unwrap();
            let bytes = partial.to_bytes().unwrap();
            Partial::read_from(&bytes, Path::new("p.partial")).unwrap()
        })
        .collect();
    let (merged, merged_summary) =
        distributed::merge_partials(shards.path(), partials, &o).unwrap();
    assert_eq!(
        json(&merged),
        json(&want),
        "{} in {} files, {partitions} partitions analysed apart",
        whole.display(),
        files.len()
    );
    assert_eq!(merged_summary.stats, summary.stats);
}

const LAB: [&str; 6] = [
    "case000_rto_delack/server.pcap.gz",
    "case001_reorder_behind/client.pcap.gz",
    "case003_nfs_write_stall/server.pcap.gz",
    "iscsi_read_slow_server/client.pcap.gz",
    "smb3_write_loss1pct/server.pcap.gz",
    "clean_bulk_cubic/client.pcap.gz",
];

#[test]
fn lab_fixtures_whole_in_one_to_four_partitions() {
    for case in LAB {
        let path = repo(&format!("tests/data/lab/{case}"));
        for partitions in 1..=4 {
            check(&path, std::slice::from_ref(&path), partitions);
        }
    }
}

#[test]
fn lab_fixtures_cut_into_a_ring_buffer() {
    for case in LAB {
        let path = repo(&format!("tests/data/lab/{case}"));
        let dir = tempfile::tempdir().unwrap();
        let files = cut(&path, 10, dir.path());
        for partitions in [1, 3] {
            check(&path, &files, partitions);
        }
        // Given in any order (a shell glob sorts ring10 before ring2): the same result.
        let mut shuffled = files.clone();
        shuffled.reverse();
        check(&path, &shuffled, 2);
    }
}

#[test]
fn corpus_capture_whole_and_cut() {
    let path = repo("../shared/corpus/captures/arkime__arkime/tests__pcap__arkime_synthetic.pcap");
    assert!(
        path.exists(),
        "the corpus is at ../shared/corpus: {}",
        path.display()
    );
    for partitions in [1, 2, 4] {
        check(&path, std::slice::from_ref(&path), partitions);
    }
    // Its times jump back (a synthetic capture): cut, its pieces overlap and are refused.
    let dir = tempfile::tempdir().unwrap();
    let files = cut(&path, 4, dir.path());
    let shards = tempfile::tempdir().unwrap();
    let e = distributed::diagnose_files(&files, shards.path(), 2, &Options::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("overlap"), "{e}");
    // One whose times go forward, cut into a ring buffer.
    let path =
        repo("../shared/corpus/captures/zeek__zeek/testing__btest__Traces__ftp__bruteforce.pcap");
    check(&path, std::slice::from_ref(&path), 2);
    let dir = tempfile::tempdir().unwrap();
    let files = cut(&path, 4, dir.path());
    check(&path, &files, 3);
}

#[test]
fn global_frame_numbers_continue_across_files() {
    // Evidence frames of the cut run are those of the whole file: the cut changes no
    // frame of the JSON (checked above); here the metas add up, file by file.
    let path = repo("tests/data/lab/case000_rto_delack/server.pcap.gz");
    let dir = tempfile::tempdir().unwrap();
    let files = cut(&path, 3, dir.path());
    let shards = tempfile::tempdir().unwrap();
    let o = Options::default();
    let metas: Vec<ShardMeta> = files
        .iter()
        .enumerate()
        .map(|(i, f)| distributed::shard(f, shards.path(), i as u32, 2, &o).unwrap())
        .collect();
    let total = frames(&path).len() as u64;
    assert_eq!(metas.iter().map(|m| m.frames).sum::<u64>(), total);
    // Written metas read back as returned.
    assert_eq!(distributed::shard_metas(shards.path()).unwrap(), metas);
    // Each file starts no earlier than the one before ends.
    for w in metas.windows(2) {
        assert!(w[1].first_ts_ns >= w[0].last_ts_ns);
    }
    // Only headers (and storage payloads, none here) travel: under half the frames' bytes.
    let frame_bytes: usize = frames(&path).iter().map(|f| f.data.len()).sum();
    let shard_bytes: u64 = metas.iter().map(|m| m.shard_bytes).sum();
    assert!(
        shard_bytes * 2 < frame_bytes as u64,
        "{shard_bytes} of {frame_bytes}"
    );
}

#[test]
fn overlapping_files_and_bad_shards_are_errors() {
    let path = repo("tests/data/lab/case000_rto_delack/server.pcap.gz");
    let dir = tempfile::tempdir().unwrap();
    let files = cut(&path, 2, dir.path());
    let o = Options::default();
    // The whole file with one of its pieces: they overlap in time.
    let shards = tempfile::tempdir().unwrap();
    let both = [path.clone(), files[1].clone()];
    let e = distributed::diagnose_files(&both, shards.path(), 2, &o)
        .unwrap_err()
        .to_string();
    assert!(e.contains("overlap") && e.contains("mergecap"), "{e}");
    // Files sharded into different partition counts.
    let shards = tempfile::tempdir().unwrap();
    distributed::shard(&files[0], shards.path(), 0, 2, &o).unwrap();
    distributed::shard(&files[1], shards.path(), 1, 3, &o).unwrap();
    let e = distributed::diagnose_shards(shards.path(), &o)
        .unwrap_err()
        .to_string();
    assert!(e.contains("partitions"), "{e}");
    // A shard cut short: an error naming it, not a panic or a quiet partial result.
    let shards = tempfile::tempdir().unwrap();
    distributed::shard(&path, shards.path(), 0, 2, &o).unwrap();
    let victim = shards.path().join("f00000.p001.shard");
    let len = std::fs::metadata(&victim).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&victim)
        .unwrap();
    f.set_len(len - 3).unwrap();
    let e = distributed::diagnose_shards(shards.path(), &o)
        .unwrap_err()
        .to_string();
    assert!(e.contains("f00000.p001.shard"), "{e}");
    // No shards at all; partitions out of range; a missing capture.
    let empty = tempfile::tempdir().unwrap();
    assert!(distributed::diagnose_shards(empty.path(), &o).is_err());
    assert!(distributed::shard(&path, empty.path(), 0, 0, &o).is_err());
    assert!(distributed::shard(&path, empty.path(), 0, 256, &o).is_err());
    assert!(distributed::shard(&dir.path().join("nope.pcap"), empty.path(), 0, 2, &o).is_err());
}

#[test]
fn a_file_without_frames_adds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.pcap");
    write_pcap(&mut std::fs::File::create(&empty).unwrap(), &[], true).unwrap();
    // Alone: the empty diagnosis a single run gives.
    check(&empty, std::slice::from_ref(&empty), 2);
    // Among the pieces of a ring buffer (first here): nothing changes.
    let path = repo("tests/data/lab/case001_reorder_time/server.pcap.gz");
    let mut files = vec![empty];
    files.extend(cut(&path, 3, dir.path()));
    check(&path, &files, 2);
}

#[test]
fn sweeps_across_a_ring_buffer_of_many_short_connections() {
    // 140,000 frames: two of the analyzer's expiry sweeps and several of the diagnoser's
    // looks for closed connections (one per 16,384 segments) fall inside the files. (Where
    // each lands is checked against the reader's in distributed::feed's unit test; this
    // capture's diagnosis would not show a misplaced one.)
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("bulk.pcap");
    let cfg = tcpdx_testkit::bulk::BulkConfig {
        packets: 140_000,
        concurrent: 300,
        per_conn: 150,
        ..Default::default()
    };
    tcpdx_testkit::bulk::write_bulk(std::fs::File::create(&whole).unwrap(), cfg).unwrap();
    let files = cut(&whole, 7, dir.path());
    check(&whole, &files, 3);
}

/// Every file of the two directories, name and bytes.
fn tables(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect();
    out.sort();
    out
}

#[test]
fn export_of_a_ring_buffer_equals_the_whole_capture() {
    let meta = [("tcpdx_version", "test")];
    let o = Options::default();
    for case in [
        "case003_nfs_write_stall/server.pcap.gz",
        "smb3_write_loss1pct/client.pcap.gz",
        "case001_reorder_behind/client.pcap.gz",
    ] {
        let path = repo(&format!("tests/data/lab/{case}"));
        let dir = tempfile::tempdir().unwrap();
        let want = dir.path().join("want");
        Capture::open(&path).export(&o, &want, &meta).unwrap();
        let files = cut(&path, 5, dir.path());
        let shards = dir.path().join("shards");
        for (i, f) in files.iter().enumerate() {
            distributed::shard(f, &shards, i as u32, 3, &o).unwrap();
        }
        let got = dir.path().join("got");
        let rows = distributed::export_shards(&shards, &got, &o, &meta).unwrap();
        let (w, g) = (tables(&want), tables(&got));
        assert!(w.len() >= 5, "{case}: {} tables", w.len());
        assert_eq!(
            g.iter().map(|t| &t.0).collect::<Vec<_>>(),
            w.iter().map(|t| &t.0).collect::<Vec<_>>()
        );
        for (a, b) in g.iter().zip(&w) {
            assert!(a.1 == b.1, "{case}: {} differs", a.0);
        }
        assert!(format!("{rows:?}").contains(char::is_numeric));
    }
}

/// Offsets of the records of the (microsecond or nanosecond, little-endian) pcap `bytes`.
fn record_starts(bytes: &[u8]) -> Vec<u64> {
    let mut at = 24usize;
    let mut out = Vec::new();
    while at + 16 <= bytes.len() {
        out.push(at as u64);
        let caplen = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + caplen;
    }
    out
}

/// `file` sharded in the byte ranges between `cuts` (and 0, and its end) into `shards`,
/// the pieces' indexes in reverse of their order in the file.
fn shard_in_ranges(file: &Path, cuts: &[u64], shards: &Path, partitions: u16) -> Vec<ShardMeta> {
    let len = std::fs::metadata(file).unwrap().len();
    let mut bounds = vec![0];
    bounds.extend_from_slice(cuts);
    bounds.push(len);
    let n = bounds.len() - 1;
    let o = Options::default();
    bounds
        .windows(2)
        .enumerate()
        .map(|(i, w)| {
            let index = (n - 1 - i) as u32;
            distributed::shard_range(file, shards, index, partitions, (w[0], w[1]), &o).unwrap()
        })
        .collect()
}

/// The cuts of `n` ranges of a file of `len` bytes whose records start at `starts`: about
/// equal, one exactly at a record boundary, one a byte past one, the others wherever.
fn cuts_of(n: usize, len: u64, starts: &[u64]) -> Vec<u64> {
    let mut cuts: Vec<u64> = (1..n as u64).map(|k| len * k / n as u64 + 7 * k).collect();
    let at = |c: u64| starts[starts.partition_point(|&s| s < c).min(starts.len() - 1)];
    cuts[0] = at(cuts[0]);
    if n > 2 {
        cuts[1] = at(cuts[1]) + 1;
    }
    cuts
}

#[test]
fn lab_fixtures_in_byte_ranges_equal_the_whole_file() {
    let o = Options::default();
    for case in LAB {
        let path = repo(&format!("tests/data/lab/{case}"));
        let dir = tempfile::tempdir().unwrap();
        // The fixture as one uncompressed pcap file (byte ranges are of such files).
        let whole = cut(&path, 1, dir.path()).remove(0);
        let bytes = std::fs::read(&whole).unwrap();
        let starts = record_starts(&bytes);
        let mut c = Capture::open(&whole);
        let want = json(&c.diagnose(&o).unwrap());
        let want_frames = c.summary().unwrap().stats.frames;
        for (n, partitions) in [(3, 2), (7, 3)] {
            let cuts = cuts_of(n, bytes.len() as u64, &starts);
            // Mid-record cuts exist among them (a record straddling the cut).
            assert!(cuts.iter().any(|c| !starts.contains(c)), "{cuts:?}");
            assert!(starts.contains(&cuts[0]));
            let shards = tempfile::tempdir().unwrap();
            let metas = shard_in_ranges(&whole, &cuts, shards.path(), partitions);
            assert_eq!(metas.iter().map(|m| m.frames).sum::<u64>(), want_frames);
            assert!(metas.iter().all(|m| m.frames > 0), "{case}: {n} ranges");
            let (got, summary) = distributed::diagnose_shards(shards.path(), &o).unwrap();
            assert_eq!(json(&got), want, "{case} in {n} byte ranges");
            assert_eq!(summary.stats.frames, want_frames);
        }
    }
}

#[test]
fn export_of_byte_ranges_equals_the_whole_file() {
    let meta = [("tcpdx_version", "test")];
    let o = Options::default();
    for case in [
        "case003_nfs_write_stall/server.pcap.gz",
        "case001_reorder_behind/client.pcap.gz",
    ] {
        let path = repo(&format!("tests/data/lab/{case}"));
        let dir = tempfile::tempdir().unwrap();
        let whole = cut(&path, 1, dir.path()).remove(0);
        let bytes = std::fs::read(&whole).unwrap();
        let want = dir.path().join("want");
        Capture::open(&whole).export(&o, &want, &meta).unwrap();
        let cuts = cuts_of(7, bytes.len() as u64, &record_starts(&bytes));
        let shards = dir.path().join("shards");
        shard_in_ranges(&whole, &cuts, &shards, 3);
        let got = dir.path().join("got");
        distributed::export_shards(&shards, &got, &o, &meta).unwrap();
        let (w, g) = (tables(&want), tables(&got));
        assert!(w.len() >= 5, "{case}: {} tables", w.len());
        assert_eq!(
            g.iter().map(|t| &t.0).collect::<Vec<_>>(),
            w.iter().map(|t| &t.0).collect::<Vec<_>>()
        );
        for (a, b) in g.iter().zip(&w) {
            assert!(a.1 == b.1, "{case}: {} differs", a.0);
        }
    }
}

#[test]
fn byte_ranges_of_a_garbled_or_cut_file_read_as_the_whole_reader_does() {
    let o = Options::default();
    let path = repo("tests/data/lab/case000_rto_delack/server.pcap.gz");
    let dir = tempfile::tempdir().unwrap();
    let whole = cut(&path, 1, dir.path()).remove(0);
    let bytes = std::fs::read(&whole).unwrap();
    let starts = record_starts(&bytes);
    // A record cut off by the end of the file: the same warning (offset, frame number).
    let short = dir.path().join("short.pcap");
    std::fs::write(&short, &bytes[..bytes.len() - 20]).unwrap();
    let mut c = Capture::open(&short);
    let want = json(&c.diagnose(&o).unwrap());
    let want_warnings = c.summary().unwrap().capture_warnings.clone();
    assert_eq!(want_warnings.len(), 1);
    let shards = tempfile::tempdir().unwrap();
    let cuts = cuts_of(3, bytes.len() as u64 - 20, &starts);
    shard_in_ranges(&short, &cuts, shards.path(), 2);
    let (got, summary) = distributed::diagnose_shards(shards.path(), &o).unwrap();
    assert_eq!(json(&got), want);
    assert_eq!(summary.capture_warnings, want_warnings);
    // A record's captured length made absurd in the middle: the single run's error, from
    // the range that holds it; a range starting inside it resyncs at the next record.
    let k = starts.len() / 2;
    let mut garbled = bytes.clone();
    let at = starts[k] as usize + 8;
    garbled[at..at + 4].copy_from_slice(&0x7fff_0000u32.to_le_bytes());
    let bad = dir.path().join("garbled.pcap");
    std::fs::write(&bad, &garbled).unwrap();
    let want = Capture::open(&bad).diagnose(&o).unwrap_err().to_string();
    assert!(want.contains(&format!("byte {}", starts[k])), "{want}");
    let shards = tempfile::tempdir().unwrap();
    let len = garbled.len() as u64;
    let e = distributed::shard_range(&bad, shards.path(), 0, 2, (0, starts[k] + 3), &o)
        .unwrap_err()
        .to_string();
    assert_eq!(e, want);
    let m = distributed::shard_range(&bad, shards.path(), 1, 2, (starts[k] + 3, len), &o).unwrap();
    assert_eq!(m.range.unwrap().began, starts[k + 1]);
    // Ranges that miss bytes, or a piece missing: errors naming the file.
    let shards = tempfile::tempdir().unwrap();
    distributed::shard_range(&whole, shards.path(), 0, 2, (0, starts[5]), &o).unwrap();
    distributed::shard_range(&whole, shards.path(), 1, 2, (starts[5] + 1, len), &o).unwrap();
    let e = distributed::diagnose_shards(shards.path(), &o)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("ring00.pcap") && e.contains("do not meet"),
        "{e}"
    );
    // Compressed: whole files only.
    let e = distributed::shard_range(&path, shards.path(), 2, 2, (0, 1000), &o)
        .unwrap_err()
        .to_string();
    assert!(e.contains("compressed"), "{e}");
}

#[test]
fn damaged_partials_are_errors_naming_file_and_offset() {
    let path = repo("tests/data/lab/case003_nfs_write_stall/server.pcap.gz");
    let o = Options::default();
    let shards = tempfile::tempdir().unwrap();
    distributed::shard(&path, shards.path(), 0, 2, &o).unwrap();
    let file = shards.path().join("p0.partial");
    let p0 = distributed::diagnose_partition(shards.path(), 0, &o).unwrap();
    p0.write_file(&file).unwrap();
    let bytes = std::fs::read(&file).unwrap();
    assert_eq!(bytes, p0.to_bytes().unwrap());
    assert_eq!(Partial::read_file(&file).unwrap().partition, 0);
    // Cut anywhere, one byte changed anywhere, a byte added: an error naming the file and
    // an offset, never a panic (every cut of a small prefix, then sampled).
    let cuts = (0..bytes.len().min(64)).chain((64..bytes.len()).step_by(97));
    for cut in cuts {
        let e = Partial::read_from(&bytes[..cut], &file)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with(&format!("{}: offset ", file.display())),
            "{e}"
        );
    }
    for at in (0..bytes.len()).step_by(13) {
        let mut bad = bytes.clone();
        bad[at] ^= 0x41;
        let e = Partial::read_from(&bad, &file).err().unwrap().to_string();
        assert!(e.contains("offset "), "byte {at}: {e}");
    }
    let mut long = bytes.clone();
    long.push(0);
    let e = Partial::read_from(&long, &file).err().unwrap().to_string();
    assert!(e.contains("after the end"), "{e}");
    // Not a partial at all; a missing file.
    let e = Partial::read_from(b"tcpdx-shard 1\nindex 0\n", &file)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("not a tcpdx partial"), "{e}");
    assert!(Partial::read_file(&shards.path().join("nope.partial")).is_err());
    // A partial of other shards (same capture, another partition count) is not merged;
    // nor a set with a partition missing.
    let other = tempfile::tempdir().unwrap();
    distributed::shard(&path, other.path(), 0, 3, &o).unwrap();
    let foreign = distributed::diagnose_partition(other.path(), 1, &o).unwrap();
    let e = distributed::merge_partials(
        shards.path(),
        vec![Partial::read_file(&file).unwrap(), foreign],
        &o,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("other shards"), "{e}");
    let e =
        distributed::merge_partials(shards.path(), vec![Partial::read_file(&file).unwrap()], &o)
            .err()
            .unwrap()
            .to_string();
    assert!(e.contains("partitions [0] given"), "{e}");
}
