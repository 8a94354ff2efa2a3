//! A mapped file's pages are let go once read, by the reader and by the threads it shared
//! the map with, so that memory stays flat whatever the file's size. One test in its own
//! process: it measures the process' mapped file pages.

mod common;

use std::collections::VecDeque;

use common::*;
use tcpdx_capture::CaptureReader;

/// File pages mapped by this process, in KiB.
fn rss_file_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("RssFile:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn mapped_pages_are_let_go_once_read() {
    let dir = std::env::temp_dir().join(format!("tcpdx-mapped-mem-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("big.pcap");
    // 96 MB of 9000-byte frames.
    let mut p = Pcap::new(MAGIC_NS, false, 1);
    let data = payload(9000, 7);
    for i in 0..10_600u32 {
        p.record(i, 0, 9000, &data);
    }
    std::fs::write(&path, &p.bytes).unwrap();
    drop(p);
    let file_kib = 96 * 1024;

    // The reader alone, its pages prefaulted ahead on another thread.
    let before = rss_file_kib();
    let mut peak = before;
    let mut r = CaptureReader::open_mapped(&path, true).unwrap();
    assert!(r.is_mapped());
    let mut sum = 0u64;
    while let Some(f) = r.next_frame().unwrap() {
        sum += u64::from(f.data[f.data.len() / 2]);
        peak = peak.max(rss_file_kib());
    }
    drop(r);
    assert_eq!(sum, 10_600 * u64::from(data[4500]));
    let grew = peak - before;
    assert!(grew < file_kib / 3, "read alone: {grew} KiB mapped at once");

    // Other threads read frames well after the reader passed them (a parallel run's
    // workers): their pages are let go only after they are done with them.
    let before = rss_file_kib();
    let mut peak = before;
    let mut r = CaptureReader::open_mapped(&path, false).unwrap();
    let mut held = VecDeque::new();
    let mut sum = 0u64;
    while let Some(at) = r.next_frame_at().unwrap() {
        held.push_back((r.share_buffer(), at.range()));
        // 2,000 frames (18 MB) behind.
        if held.len() > 2000 {
            let (buf, range) = held.pop_front().unwrap();
            sum += u64::from(buf[range][4500]);
        }
        peak = peak.max(rss_file_kib());
    }
    for (buf, range) in held.drain(..) {
        sum += u64::from(buf[range][4500]);
    }
    drop(r);
    assert_eq!(sum, 10_600 * u64::from(data[4500]));
    let grew = peak - before;
    assert!(
        grew < file_kib / 2,
        "read behind: {grew} KiB mapped at once"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
