//! Stage 2's plan: the files in capture order with their first global frame number, and
//! the sweeps a single analyzer and diagnoser would make, at their global frames.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use tcpdx_core::InputStats;
use tcpdx_detect::CLOSED_SWEEP_EVERY;
use tcpdx_wire::Timestamp;

use super::{Piece, ShardMeta, TIMELINE_ENTRY, io_err, timeline_path};
use crate::Error;

/// A sweep every worker makes after the frame `frame`, at time `ts`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sweep {
    pub(crate) frame: u64,
    pub(crate) ts: Timestamp,
    /// A diagnoser's look for closed connections (else the analyzer's expiry sweep).
    pub(crate) diagnoser: bool,
}

/// What stage 2 needs to replay the shards as one capture.
pub(crate) struct Plan {
    pub(crate) partitions: u16,
    /// The files in capture order, each with the global number of its frame 0 (its frame
    /// n is global frame `offset + n`).
    pub(crate) files: Vec<(ShardMeta, u64)>,
    pub(crate) first_ts: Option<Timestamp>,
    /// In frame order; at one frame the diagnoser's before the analyzer's.
    pub(crate) sweeps: Vec<Sweep>,
    /// Counters of the frames no worker sees.
    pub(crate) other: InputStats,
}

/// Orders `metas` by the time of their first frame and checks that each file starts no
/// earlier than the one before it ends (a ring buffer, or files cut from one capture):
/// files overlapping in time are an error naming both (their frames would have to be
/// interleaved, which a distributed run does not do). The pieces of one file
/// ([`super::shard_range`]) stay together in file order, and must make up the whole file
/// ([`joined`]).
pub fn check_consecutive(metas: Vec<ShardMeta>) -> Result<Vec<ShardMeta>, Error> {
    let mut files = joined(metas)?;
    // Files without frames add nothing: anywhere is fine, last here.
    let first = |f: &[ShardMeta]| f.iter().find_map(|m| m.first_ts_ns);
    let last = |f: &[ShardMeta]| f.iter().filter_map(|m| m.last_ts_ns).max();
    files.sort_by_key(|f| (first(f).is_none(), first(f), f[0].index));
    for w in files.windows(2) {
        let (a, b) = (&w[0][0], &w[1][0]);
        if let (Some(end), Some(start)) = (last(&w[0]), first(&w[1]))
            && start < end
        {
            return Err(Error::Shard(format!(
                "{} starts {:.6} s before {} ends: files that overlap in time are not read \
                 as one capture here (merge them first: mergecap -w merged.pcapng {} {})",
                b.file.display(),
                (end - start) as f64 / 1e9,
                a.file.display(),
                a.file.display(),
                b.file.display(),
            )));
        }
    }
    Ok(files.into_iter().flatten().collect())
}

/// The metas as files: a whole file alone, or the pieces of one file in file order, checked
/// to read each of its records once: their ranges tile the file from byte 0 to its end,
/// and each piece began at the record where the one before stopped.
fn joined(metas: Vec<ShardMeta>) -> Result<Vec<Vec<ShardMeta>>, Error> {
    let mut files = Vec::new();
    let mut pieces: BTreeMap<PathBuf, Vec<ShardMeta>> = BTreeMap::new();
    for m in metas {
        if m.range.is_some() {
            pieces.entry(m.file.clone()).or_default().push(m);
        } else {
            files.push(vec![m]);
        }
    }
    for (file, mut p) in pieces {
        p.sort_by_key(|m| m.range.map(|r| r.start));
        let bad = |what: String| Err(Error::Shard(format!("{}: {what}", file.display())));
        let r: Vec<Piece> = p.iter().filter_map(|m| m.range).collect();
        let (first, last) = (r[0], r[r.len() - 1]);
        if first.start != 0 {
            return bad(format!(
                "its first byte range starts at byte {}: bytes before it not sharded",
                first.start
            ));
        }
        for w in r.windows(2) {
            let (a, b) = (w[0], w[1]);
            if a.file_len != b.file_len {
                return bad(format!(
                    "{} bytes long for one byte range, {} for another (changed while sharded)",
                    a.file_len, b.file_len
                ));
            }
            if a.end != b.start {
                return bad(format!(
                    "byte ranges {}:{} and {}:{} do not meet (bytes not sharded, or sharded \
                     twice)",
                    a.start, a.end, b.start, b.end
                ));
            }
            if a.stopped != b.began {
                return bad(format!(
                    "the byte range {}:{} stopped before the record at byte {}, the next \
                     began at byte {}: the record boundary its resync found is wrong \
                     (shard this file whole, or cut it elsewhere)",
                    a.start, a.end, a.stopped, b.began
                ));
            }
        }
        if last.stopped != last.file_len {
            return bad(format!(
                "its last byte range {}:{} stops at byte {}, before its end ({} bytes)",
                last.start, last.end, last.stopped, last.file_len
            ));
        }
        files.push(p);
    }
    Ok(files)
}

impl Plan {
    /// The plan of the files sharded into `dir` (`metas`), for an analyzer sweeping every
    /// `sweep_every` frames.
    pub(crate) fn new(dir: &Path, metas: Vec<ShardMeta>, sweep_every: u64) -> Result<Plan, Error> {
        let partitions = metas[0].partitions;
        if let Some(m) = metas.iter().find(|m| m.partitions != partitions) {
            return Err(Error::Shard(format!(
                "{}: sharded into {} partitions, {} into {partitions}: shard every file alike",
                m.file.display(),
                m.partitions,
                metas[0].file.display()
            )));
        }
        let metas = check_consecutive(metas)?;
        let mut files = Vec::with_capacity(metas.len());
        let mut other = InputStats::default();
        let mut offset = 0u64;
        for m in metas {
            other.frames += m.other_frames;
            other.fragments += m.fragments;
            other.undecodable += m.undecodable;
            let frames = m.frames;
            files.push((m, offset));
            offset += frames;
        }
        let first_ts = files
            .first()
            .and_then(|(m, _)| m.first_ts_ns)
            .map(Timestamp);
        let sweeps = sweeps(dir, &files, sweep_every)?;
        Ok(Plan {
            partitions,
            files,
            first_ts,
            sweeps,
            other,
        })
    }
}

/// The sweeps of the multi-core driver's reader, from the files' timelines: the analyzer's
/// after every `sweep_every` frames, a diagnoser's after every [`CLOSED_SWEEP_EVERY`]
/// segments it is fed (those its port filter passes), each at its frame's time.
fn sweeps(dir: &Path, files: &[(ShardMeta, u64)], sweep_every: u64) -> Result<Vec<Sweep>, Error> {
    let mut out = Vec::new();
    let (mut since_sweep, mut since_diag) = (0u64, 0u32);
    let mut chunk = vec![0u8; TIMELINE_ENTRY * 8192];
    for (m, offset) in files {
        let path = timeline_path(dir, m.index);
        let f = File::open(&path).map_err(|e| io_err(&path, e))?;
        let len = f.metadata().map_err(|e| io_err(&path, e))?.len();
        if len != m.frames * TIMELINE_ENTRY as u64 {
            return Err(Error::Shard(format!(
                "{}: {len} bytes for {} frames (damaged or from another run)",
                path.display(),
                m.frames
            )));
        }
        let mut r = BufReader::new(f);
        let mut frame = *offset;
        let mut left = m.frames as usize;
        while left > 0 {
            let n = left.min(8192);
            let bytes = &mut chunk[..n * TIMELINE_ENTRY];
            r.read_exact(bytes).map_err(|e| io_err(&path, e))?;
            for e in bytes.chunks_exact(TIMELINE_ENTRY) {
                frame += 1;
                let mut ts = [0u8; 8];
                ts.copy_from_slice(&e[..8]);
                let ts = Timestamp(i64::from_le_bytes(ts));
                if e[8] != 0 {
                    since_diag += 1;
                    if since_diag >= CLOSED_SWEEP_EVERY {
                        since_diag = 0;
                        out.push(Sweep {
                            frame,
                            ts,
                            diagnoser: true,
                        });
                    }
                }
                since_sweep += 1;
                if since_sweep >= sweep_every {
                    since_sweep = 0;
                    out.push(Sweep {
                        frame,
                        ts,
                        diagnoser: false,
                    });
                }
            }
            left -= n;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(index: u32, frames: u64, first: Option<i64>, last: Option<i64>) -> ShardMeta {
        ShardMeta {
            file: PathBuf::from(format!("part{index}.pcap")),
            index,
            partitions: 2,
            frames,
            first_ts_ns: first,
            last_ts_ns: last,
            other_frames: 1,
            fragments: 0,
            undecodable: 1,
            records: frames.saturating_sub(1),
            shard_bytes: 0,
            timeline_bytes: frames * TIMELINE_ENTRY as u64,
            warnings: Vec::new(),
            range: None,
        }
    }

    /// Piece `index` of `big.pcap`: bytes `start..end`, records from `began` to `stopped`.
    fn piece(index: u32, (start, end): (u64, u64), (began, stopped): (u64, u64)) -> ShardMeta {
        ShardMeta {
            file: PathBuf::from("big.pcap"),
            range: Some(Piece {
                start,
                end,
                began,
                stopped,
                file_len: 300,
            }),
            ..meta(index, 5, Some(i64::from(index) * 100), Some(0))
        }
    }

    #[test]
    fn the_pieces_of_a_file_stay_together_and_must_make_it_up() {
        // Times going back inside the file (piece 1 ends after piece 2 begins, as frames
        // out of order do): in file order still, after a file before it in time.
        let mut p = vec![
            piece(3, (200, 300), (210, 300)),
            piece(1, (0, 100), (24, 120)),
            piece(2, (100, 200), (120, 210)),
        ];
        p[1].last_ts_ns = Some(250);
        p[2].first_ts_ns = Some(200);
        let before = meta(7, 5, Some(10), Some(20));
        let mut all = p.clone();
        all.push(before);
        let got = check_consecutive(all).unwrap();
        let order: Vec<u32> = got.iter().map(|m| m.index).collect();
        assert_eq!(order, [7, 1, 2, 3]);
        // A boundary one off, a gap, a missing start or end: errors naming the file.
        let cases: Vec<(Vec<ShardMeta>, &str)> = vec![
            (
                vec![
                    piece(1, (0, 100), (24, 120)),
                    piece(2, (100, 300), (121, 300)),
                ],
                "resync",
            ),
            (
                vec![
                    piece(1, (0, 100), (24, 120)),
                    piece(2, (101, 300), (120, 300)),
                ],
                "do not meet",
            ),
            (vec![piece(2, (100, 300), (120, 300))], "bytes before it"),
            (vec![piece(1, (0, 100), (24, 120))], "before its end"),
        ];
        for (metas, what) in cases {
            let e = check_consecutive(metas).unwrap_err().to_string();
            assert!(e.starts_with("big.pcap: ") && e.contains(what), "{e}");
        }
    }

    fn timeline(dir: &Path, index: u32, entries: &[(i64, bool)]) {
        let mut b = Vec::new();
        for &(ts, d) in entries {
            b.extend_from_slice(&ts.to_le_bytes());
            b.push(u8::from(d));
        }
        std::fs::write(timeline_path(dir, index), b).unwrap();
    }

    #[test]
    fn files_are_ordered_by_time_and_overlaps_refused() {
        // Given out of order (as a shell glob sorts file_10 before file_2): put in order.
        let got = check_consecutive(vec![
            meta(0, 5, Some(300), Some(400)),
            meta(1, 5, Some(100), Some(200)),
            meta(2, 0, None, None),
            meta(3, 5, Some(200), Some(300)),
        ])
        .unwrap();
        let order: Vec<u32> = got.iter().map(|m| m.index).collect();
        assert_eq!(order, [1, 3, 0, 2]);
        // One nanosecond of overlap: refused, naming both files.
        let e = check_consecutive(vec![
            meta(0, 5, Some(100), Some(200)),
            meta(1, 5, Some(199), Some(300)),
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("part1.pcap") && e.contains("part0.pcap"), "{e}");
        assert!(e.contains("mergecap"), "{e}");
    }

    #[test]
    fn sweeps_fall_at_global_frames_across_files() {
        let dir = tempfile::tempdir().unwrap();
        // File 1 comes first in time; every frame counted by the diagnoser but the odd ones.
        let a: Vec<(i64, bool)> = (0..5).map(|i| (100 + i, i % 2 == 0)).collect();
        let b: Vec<(i64, bool)> = (0..4).map(|i| (10 + i, i % 2 == 0)).collect();
        timeline(dir.path(), 0, &a);
        timeline(dir.path(), 1, &b);
        let metas = vec![
            meta(0, 5, Some(100), Some(104)),
            meta(1, 4, Some(10), Some(13)),
        ];
        let plan = Plan::new(dir.path(), metas, 3).unwrap();
        let offsets: Vec<(u32, u64)> = plan.files.iter().map(|(m, o)| (m.index, *o)).collect();
        assert_eq!(offsets, [(1, 0), (0, 4)]);
        assert_eq!(plan.first_ts, Some(Timestamp(10)));
        assert_eq!(plan.other.frames, 2);
        assert_eq!(plan.other.undecodable, 2);
        // The analyzer's sweeps after global frames 3, 6 and 9 (just below, at and above a
        // file's end), with those frames' times.
        let analyzer: Vec<(u64, i64)> = plan
            .sweeps
            .iter()
            .filter(|s| !s.diagnoser)
            .map(|s| (s.frame, s.ts.0))
            .collect();
        assert_eq!(analyzer, [(3, 12), (6, 101), (9, 104)]);
        // Too few segments for a diagnoser's sweep.
        assert!(plan.sweeps.iter().all(|s| !s.diagnoser));
        // A timeline cut short is an error naming it.
        timeline(dir.path(), 1, &b[..3]);
        let metas = vec![
            meta(0, 5, Some(100), Some(104)),
            meta(1, 4, Some(10), Some(13)),
        ];
        let e = Plan::new(dir.path(), metas, 3).err().unwrap().to_string();
        assert!(e.contains("f00001.timeline"), "{e}");
    }

    #[test]
    fn diagnoser_sweeps_every_closed_sweep_segments() {
        let dir = tempfile::tempdir().unwrap();
        let n = CLOSED_SWEEP_EVERY as i64 * 2 + 3;
        // Two files; every frame but the first of each is a diagnosed segment.
        let half = n / 2;
        let a: Vec<(i64, bool)> = (0..half).map(|i| (i, i != 0)).collect();
        let b: Vec<(i64, bool)> = (half..n).map(|i| (i, i != half)).collect();
        timeline(dir.path(), 0, &a);
        timeline(dir.path(), 1, &b);
        let metas = vec![
            meta(0, a.len() as u64, Some(0), Some(half - 1)),
            meta(1, b.len() as u64, Some(half), Some(n - 1)),
        ];
        let plan = Plan::new(dir.path(), metas, u64::MAX).unwrap();
        let diag: Vec<u64> = plan.sweeps.iter().map(|s| s.frame).collect();
        // The C-th diagnosed segment is frame C+1 (frame 1 is not one); the 2C-th is frame
        // 2C+2 (the second file's first frame is not one either).
        let c = u64::from(CLOSED_SWEEP_EVERY);
        assert_eq!(diag, [c + 1, 2 * c + 2]);
        assert!(plan.sweeps.iter().all(|s| s.diagnoser));
        assert_eq!(plan.sweeps[0].ts, Timestamp(c as i64));
    }
}
