//! Damaged captures never panic: every truncation and many deterministic byte flips of
//! valid captures end in frames, a warning or a one-line error.

mod common;

use common::*;

fn captures() -> Vec<Vec<u8>> {
    let mut ng = PcapNg::new(false);
    ng.idb(1, 0, Some(9), Some(3));
    ng.epb(0, 1, 60, &payload(60, 0));
    ng.block(ISB, &[0; 12]);
    ng.shb(true);
    ng.idb(101, 50, Some(0x90), None);
    ng.spb(70, &payload(72, 1));
    ng.opb(0, 9, 30, &payload(30, 2));
    ng.epb(0, 2, 20, &payload(20, 3));
    let mut p = Pcap::new(MAGIC_US, true, 1);
    p.record(1, 2, 60, &payload(60, 0));
    p.record(3, 4, 10, &payload(10, 1));
    let mut m = Pcap::new(MAGIC_MODIFIED, false, 113);
    m.record(1, 2, 60, &payload(60, 0));
    m.record(3, 4, 10, &payload(10, 1));
    vec![ng.bytes, p.bytes, m.bytes]
}

/// Reads a damaged capture (`len` bytes once decompressed); checks the invariants that hold
/// whatever the damage.
fn check(bytes: Vec<u8>, len: usize) {
    let len = len as u64;
    let out = read_all(bytes);
    if let Some(e) = &out.error {
        let shown = e.to_string();
        assert!(!shown.contains('\n'), "{shown}");
        assert!(e.offset <= len, "{shown}");
    }
    for w in &out.warnings {
        assert!(w.offset <= len && !w.to_string().contains('\n'), "{w}");
    }
    for (i, f) in out.frames.iter().enumerate() {
        assert!(f.no > i as u64);
    }
}

#[test]
fn every_truncation() {
    for full in captures() {
        let whole = read_all(full.clone());
        assert!(whole.error.is_none() && whole.warnings.is_empty());
        for n in 0..full.len() {
            let out = read_all(full[..n].to_vec());
            // A cut file gives a prefix of the frames, and a warning unless the cut falls
            // between records (or an error if the header itself is cut).
            assert!(whole.frames.starts_with(&out.frames), "cut at {n}");
            assert!(out.warnings.len() <= 1);
            check(full[..n].to_vec(), n);
        }
    }
}

#[test]
fn byte_flips() {
    // xorshift: deterministic, no dependency.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for full in captures() {
        for _ in 0..3000 {
            let mut bytes = full.clone();
            for _ in 0..1 + next() % 3 {
                let at = (next() % bytes.len() as u64) as usize;
                bytes[at] ^= 1 << (next() % 8);
            }
            check(gzip(&bytes), bytes.len());
            check(bytes.clone(), bytes.len());
        }
    }
}
