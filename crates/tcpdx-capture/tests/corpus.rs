//! Reads every pcap/pcapng file of the public corpus and compares the frame count with
//! tshark's (the `packets` column of `MANIFEST.tsv`).
//!
//! The corpus lives outside the repository (`/work/shared/corpus`, see its README.md: never
//! copy its files here); when it is absent the test says so and passes.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use tcpdx_capture::CaptureReader;

/// Where the corpus is; `TCPDX_CORPUS` overrides.
fn corpus_dir() -> PathBuf {
    std::env::var_os("TCPDX_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/work/shared/corpus"))
}

/// Files whose frame count legitimately differs from tshark's, with the reason. Empty: every
/// file matches. (Frames are packet records; pcapng custom blocks and systemd journal
/// entries, which tshark also numbers, are counted in frame numbers but not delivered, like
/// the manifest's `packets`, which counts packets only.)
const ALLOWED_DIFFERENCES: &[(&str, &str)] = &[];

/// Formats whose counts we compare. The manifest also has `pcap(unreadable by wiretap)` and
/// `pcapng(unreadable by wiretap)`: tshark cannot read those (unknown link types, bad
/// versions), so there is no tshark count; they are still read, to check that they end in
/// frames or a clean error, never a panic.
const FORMATS: &[&str] = &["pcap", "nsecpcap", "pcapng"];

/// Marker in the manifest notes of files that tshark itself reported as damaged.
const TSHARK_COMPLAINED: &str = "tshark: The file";

#[derive(Debug, PartialEq)]
struct Outcome {
    frames: u64,
    /// The captured bytes of every frame, summed (to compare the two ways of reading).
    bytes: u64,
    warnings: Vec<String>,
    error: Option<String>,
}

/// Reads the file three ways (a reading thread or a map must change nothing) and returns the
/// outcome.
fn read(path: &Path) -> Outcome {
    let direct = read_with(path, CaptureReader::open);
    let ahead = read_with(path, CaptureReader::open_read_ahead);
    assert_eq!(
        direct,
        ahead,
        "{}: read ahead, it reads otherwise",
        path.display()
    );
    let mapped = read_with(path, |p| CaptureReader::open_mapped(p, true));
    assert_eq!(
        direct,
        mapped,
        "{}: mapped, it reads otherwise",
        path.display()
    );
    direct
}

fn read_with(
    path: &Path,
    open: fn(&Path) -> Result<CaptureReader, tcpdx_capture::CaptureError>,
) -> Outcome {
    let mut reader = match open(path) {
        Ok(r) => r,
        Err(e) => {
            return Outcome {
                frames: 0,
                bytes: 0,
                warnings: Vec::new(),
                error: Some(e.to_string()),
            };
        }
    };
    let (mut frames, mut bytes) = (0, 0);
    let error = loop {
        match reader.next_frame() {
            Ok(Some(f)) => {
                frames += 1;
                bytes += f.data.iter().map(|&b| u64::from(b)).sum::<u64>();
            }
            Ok(None) => break None,
            Err(e) => break Some(e.to_string()),
        }
    };
    let warnings = reader.warnings().iter().map(|w| w.to_string()).collect();
    Outcome {
        frames,
        bytes,
        warnings,
        error,
    }
}

#[test]
fn frame_counts_match_tshark() {
    let dir = corpus_dir();
    let manifest = dir.join("MANIFEST.tsv");
    let Ok(text) = std::fs::read_to_string(&manifest) else {
        eprintln!("corpus test skipped: {} not found", manifest.display());
        return;
    };
    let verbose = std::env::var_os("TCPDX_CORPUS_VERBOSE").is_some();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("manifest header").split('\t').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    };
    let (c_id, c_path, c_format) = (col("id"), col("local_path"), col("format"));
    let (c_packets, c_notes) = (col("packets"), col("notes"));
    let allowed: HashMap<&str, &str> = ALLOWED_DIFFERENCES.iter().copied().collect();

    let (mut files, mut frames, mut with_warning, mut with_error) = (0, 0u64, 0, 0);
    let mut unreadable = 0;
    let mut failures = String::new();
    for line in lines {
        let cols: Vec<&str> = line.split('\t').collect();
        let id = cols[c_id];
        if !FORMATS.contains(&cols[c_format]) {
            if cols[c_format].contains("unreadable") {
                let out = read(&dir.join(cols[c_path]));
                unreadable += 1;
                if verbose {
                    eprintln!(
                        "{id} (unreadable by tshark): {} frames; {:?}",
                        out.frames, out.error
                    );
                }
            }
            continue;
        }
        let want: u64 = cols[c_packets]
            .parse()
            .unwrap_or_else(|_| panic!("{id}: packets column"));
        let out = read(&dir.join(cols[c_path]));
        files += 1;
        frames += out.frames;
        with_warning += usize::from(!out.warnings.is_empty());
        with_error += usize::from(out.error.is_some());
        if verbose && (out.error.is_some() || !out.warnings.is_empty()) {
            eprintln!(
                "{id}: {} frames, tshark {want}; {:?} {:?}",
                out.frames, out.warnings, out.error
            );
        }
        // An error on a file that tshark read without complaint is our bug, even with the
        // same count.
        let tshark_complained = cols
            .get(c_notes)
            .is_some_and(|n| n.contains(TSHARK_COMPLAINED));
        if out.error.is_some() && !tshark_complained {
            let _ = writeln!(
                failures,
                "{id}: error {:?} where tshark read the file",
                out.error
            );
        }
        if out.frames != want && !allowed.contains_key(id) {
            let _ = writeln!(
                failures,
                "{id} {}: read {} frames, tshark {want}; warnings {:?}; error {:?}",
                cols[c_path], out.frames, out.warnings, out.error
            );
        }
    }
    eprintln!(
        "corpus: {files} files, {frames} frames, every count equal to tshark's; \
         {with_warning} ended with a cut-off warning, {with_error} with an error; \
         {unreadable} files that tshark cannot read were read without a panic"
    );
    assert!(failures.is_empty(), "differences from tshark:\n{failures}");
}
