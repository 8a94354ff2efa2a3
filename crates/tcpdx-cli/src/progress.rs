//! The progress bar on stderr: bytes read of the file's size, bytes/s and packets/s.
//!
//! Shown for long runs only: when stderr is a terminal (indicatif draws nothing otherwise,
//! so never into a pipe or a file), the input is a file of known size of at least
//! [`MIN_LEN`] (or `--progress` was given), and not with `--no-progress`.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use indicatif::{HumanCount, ProgressBar, ProgressStyle};

/// Smaller inputs are read in a few seconds: no bar unless `--progress` (tcpdx choice).
pub const MIN_LEN: u64 = 64 << 20;

/// The library's progress callback: a bar per pass over the input.
pub struct Bar {
    /// `--progress`: also for small inputs.
    forced: bool,
    label: &'static str,
    shown: Mutex<Option<Progress>>,
}

impl Bar {
    /// A bar if one may be shown: `progress`/`no_progress` are the flags, `label` what the
    /// run does ("reading", "writing").
    pub fn if_wanted(
        progress: bool,
        no_progress: bool,
        label: &'static str,
    ) -> Option<Arc<dyn tcpdx::Progress>> {
        let want = !no_progress && (progress || std::io::stderr().is_terminal());
        want.then(|| {
            Arc::new(Bar {
                forced: progress,
                label,
                shown: Mutex::new(None),
            }) as Arc<dyn tcpdx::Progress>
        })
    }

    fn shown(&self) -> std::sync::MutexGuard<'_, Option<Progress>> {
        self.shown.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl tcpdx::Progress for Bar {
    fn start(&self, len: Option<u64>) {
        *self.shown() = Progress::new(self.forced, len, self.label);
    }
    fn update(&self, bytes: u64, frames: u64) {
        if let Some(p) = &*self.shown() {
            p.update(bytes, frames);
        }
    }
    fn finish(&self) {
        if let Some(p) = self.shown().take() {
            p.finish();
        }
    }
}

/// A progress bar over the bytes of the input.
pub struct Progress {
    bar: ProgressBar,
    started: Instant,
}

impl Progress {
    /// A bar for an input of `len` bytes (None for stdin: no bar), if it is long enough or
    /// `forced`; `label` says what the run does.
    pub fn new(forced: bool, len: Option<u64>, label: &str) -> Option<Self> {
        let len = len?;
        if len < MIN_LEN && !forced {
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
