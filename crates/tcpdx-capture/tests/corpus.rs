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

/// Files whose frame count legitimately differs from tshark's, with the reason.
const ALLOWED_DIFFERENCES: &[(&str, &str)] = &[];

/// Formats we read (the manifest also says `pcap(unreadable by wiretap)`: tshark could not
/// read those, so there is no count to compare with).
const FORMATS: &[&str] = &["pcap", "nsecpcap", "pcapng"];

struct Outcome {
    frames: u64,
    warnings: Vec<String>,
    error: Option<String>,
}

fn read(path: &Path) -> Outcome {
    let mut reader = match CaptureReader::open(path) {
        Ok(r) => r,
        Err(e) => return Outcome { frames: 0, warnings: Vec::new(), error: Some(e.to_string()) },
    };
    let mut frames = 0;
    let error = loop {
        match reader.next_frame() {
            Ok(Some(_)) => frames += 1,
            Ok(None) => break None,
            Err(e) => break Some(e.to_string()),
        }
    };
    let warnings = reader.warnings().iter().map(|w| w.to_string()).collect();
    Outcome { frames, warnings, error }
}

#[test]
fn frame_counts_match_tshark() {
    let dir = corpus_dir();
    let manifest = dir.join("MANIFEST.tsv");
    let Ok(text) = std::fs::read_to_string(&manifest) else {
        eprintln!("corpus test skipped: {} not found", manifest.display());
        return;
    };
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("manifest header").split('\t').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no column {name}"));
    let (c_id, c_path, c_format, c_packets) = (col("id"), col("local_path"), col("format"), col("packets"));
    let allowed: HashMap<&str, &str> = ALLOWED_DIFFERENCES.iter().copied().collect();

    let (mut files, mut frames, mut with_warning, mut with_error) = (0, 0u64, 0, 0);
    let mut failures = String::new();
    for line in lines {
        let cols: Vec<&str> = line.split('\t').collect();
        if !FORMATS.contains(&cols[c_format]) {
            continue;
        }
        let id = cols[c_id];
        let want: u64 = cols[c_packets].parse().unwrap_or_else(|_| panic!("{id}: packets column"));
        let out = read(&dir.join(cols[c_path]));
        files += 1;
        frames += out.frames;
        with_warning += usize::from(!out.warnings.is_empty());
        with_error += usize::from(out.error.is_some());
        if std::env::var_os("TCPDX_CORPUS_VERBOSE").is_some() && (out.error.is_some() || !out.warnings.is_empty()) {
            eprintln!("{id}: {} frames, tshark {want}; {:?} {:?}", out.frames, out.warnings, out.error);
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
        "corpus: {files} files, {frames} frames matched tshark's count; \
         {with_warning} ended with a cut-off warning, {with_error} with an error"
    );
    assert!(failures.is_empty(), "frame counts differing from tshark:\n{failures}");
}
