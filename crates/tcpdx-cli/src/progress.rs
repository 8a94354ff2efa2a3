//! The progress bar on stderr: bytes read of the file's size, bytes/s and packets/s.
//!
//! Shown for long runs only: when stderr is a terminal (indicatif draws nothing otherwise,
//! so never into a pipe or a file), the input is a file of known size of at least
//! [`MIN_LEN`] (or `--progress` was given), and not with `--no-progress`.

use std::io::IsTerminal;
use std::time::Instant;

use indicatif::{HumanCount, ProgressBar, ProgressStyle};

/// Smaller inputs are read in a few seconds: no bar unless `--progress` (tcpdx choice).
pub const MIN_LEN: u64 = 64 << 20;

/// Frames between two updates (an update costs an atomic load and a time check).
pub const EVERY_FRAMES: u64 = 4096;

/// A progress bar over the bytes of the input.
pub struct Progress {
    bar: ProgressBar,
    started: Instant,
}

impl Progress {
    /// A bar if one should be shown: `progress`/`no_progress` are the flags, `len` the input
    /// file's size (None for stdin), `label` what the run does ("reading", "writing").
    pub fn new(progress: bool, no_progress: bool, len: Option<u64>, label: &str) -> Option<Self> {
        let want = !no_progress && (progress || std::io::stderr().is_terminal());
        let len = len?;
        if !want || len < MIN_LEN && !progress {
            return None;
        }
        let bar = ProgressBar::new(len);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {prefix} {bytes}/{total_bytes} {wide_bar} {bytes_per_sec} {msg} eta {eta}",
            )
            .ok()?,
        );
        bar.set_prefix(label.to_owned());
        Some(Self {
            bar,
            started: Instant::now(),
        })
    }

    /// Input bytes read so far (of the file's size) and packets handled (for the rate).
    pub fn update(&self, bytes: u64, packets: u64) {
        let secs = self.started.elapsed().as_secs_f64();
        let rate = if secs > 0.0 {
            (packets as f64 / secs) as u64
        } else {
            0
        };
        // Short: the whole line must fit an 80-column terminal or it scrolls.
        self.bar
            .set_message(format!("{} packets/s", HumanCount(rate)));
        self.bar.set_position(bytes);
    }

    /// Removes the bar.
    pub fn finish(self) {
        self.bar.finish_and_clear();
    }
}
