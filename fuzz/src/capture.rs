//! Target `capture`: any bytes as a capture file, through the whole pipeline.
//!
//! Input: one mode byte, then the file. Mode (low 2 bits) 0 and 1: the bytes as they are
//! (they may themselves start with a gzip or zstd magic); 2: the bytes gzip-compressed
//! first; 3: zstd-compressed first (so the decompressing readers see valid streams of
//! hostile captures, which random bytes almost never are). Every frame read is fed to the
//! analyzer, which decodes it (wire) and analyses it (core).
//!
//! Checked: no panic; frame numbers strictly increase; a frame's captured length stays under
//! the largest record the reader accepts; an error or the end is final (`next_frame` returns
//! `Ok(None)` afterwards); the error message is one line naming the byte.

use std::io::{Cursor, Write};

use tcpdx_capture::CaptureReader;
use tcpdx_core::{Analyzer, AnalyzerConfig, Event};

/// Largest captured length any link type may have (USB / D-Bus: 128 MiB).
const MAX_CAPLEN_ANY: usize = 128 * 1024 * 1024;

/// Input encoding: the mode byte in front of a capture file.
pub fn encode(mode: u8, file: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(file.len() + 1);
    v.push(mode);
    v.extend_from_slice(file);
    v
}

/// Runs one input.
pub fn run(data: &[u8]) {
    let Some((&mode, file)) = data.split_first() else {
        return;
    };
    let bytes = match mode & 3 {
        2 => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            if e.write_all(file).is_err() {
                return;
            }
            match e.finish() {
                Ok(b) => b,
                Err(_) => return,
            }
        }
        3 => match zstd::stream::encode_all(file, 1) {
            Ok(b) => b,
            Err(_) => return,
        },
        _ => file.to_vec(),
    };
    let mut reader = match CaptureReader::from_reader("fuzz", Box::new(Cursor::new(bytes))) {
        Ok(r) => r,
        Err(e) => {
            check_message(&e.to_string());
            return;
        }
    };
    let mut analyzer = Analyzer::new(AnalyzerConfig::default());
    let mut sink: Vec<Event> = Vec::new();
    let mut last_no = 0;
    loop {
        match reader.next_frame() {
            Ok(Some(frame)) => {
                assert!(frame.no.0 > last_no, "frame numbers go up");
                last_no = frame.no.0;
                assert!(frame.data.len() <= MAX_CAPLEN_ANY, "caplen bounded");
                analyzer.handle_frame(&frame, &mut sink);
                // Keep memory flat on long inputs.
                sink.clear();
            }
            Ok(None) => break,
            Err(e) => {
                check_message(&e.to_string());
                break;
            }
        }
    }
    assert!(matches!(reader.next_frame(), Ok(None)), "the end is final");
    for w in reader.warnings() {
        assert!(!w.to_string().contains('\n'), "one-line warning");
    }
    analyzer.handle_end(&mut sink);
}

fn check_message(m: &str) {
    assert!(!m.contains('\n'), "one-line error: {m}");
    assert!(m.starts_with("fuzz: "), "error names the input: {m}");
}
