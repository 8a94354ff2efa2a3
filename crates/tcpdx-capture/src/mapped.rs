//! A capture file mapped into memory: frames are read where the page cache holds them,
//! without the kernel's copy of every byte into a buffer (a fifth to a quarter of the CPU
//! of a headers-only run, and most of a run on full-payload captures).
//!
//! The only unsafe code of the crate: two calls of memmap2 (the crate of the field), mapping
//! the file and letting go of the pages already read so that memory stays flat, and the
//! SIGBUS handler that turns a file truncated under the map into a one-line error.
#![allow(unsafe_code)]

use std::fs::File;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use memmap2::{Advice, Mmap, UncheckedAdvice};

/// Bytes of the map read past before they are let go (a few large calls, not one per
/// frame; the pages already read count in the process' memory until then).
pub(crate) const RELEASE_EVERY: usize = 8 << 20;

/// What released ranges are aligned to: a multiple of every page size, and of the 2 MiB
/// folios the page cache may map a file with (a range ending inside one left it mapped:
/// 240 MB of a 1.5 GB file stayed mapped with 64 KiB).
const ALIGN: usize = 2 << 20;

/// A read-only map of a whole file, as it was when mapped.
#[derive(Clone, Debug)]
pub struct Map {
    map: Arc<Mmap>,
    /// Index up to which the pages were let go. Letting go and prefaulting hold it, so
    /// that no page is prefaulted behind it (it would stay mapped: nothing lets go of a
    /// range twice).
    released: Arc<Mutex<usize>>,
}

impl Map {
    /// Maps `file` (a regular file of at least one byte); `None` when the system will not,
    /// the caller then reads the file.
    pub(crate) fn of(file: &File, name: &str) -> Option<Map> {
        // SAFETY: the map is only read, as bytes (any value is valid). The one way for its
        // contents to change under a borrow is another process writing or truncating the
        // file while it is read: writing shows as changed bytes (which the parsers check
        // like any input), truncating makes the kernel send SIGBUS on the next access of a
        // page past the new end, which `tcpdx` turns into a one-line error (see
        // [`exit_on_sigbus`]). Appending, as a capture still being written does, is
        // harmless: the map keeps the length it had.
        let map = unsafe { Mmap::map(file) }.ok()?;
        note_mapped(name);
        // Read front to back: the kernel then reads ahead further.
        let _ = map.advise(Advice::Sequential);
        Some(Map {
            map: Arc::new(map),
            released: Arc::default(),
        })
    }

    /// The file's bytes.
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Lets go of the pages before about `end` (read past, by every thread) not yet let
    /// go: memory then stays flat whatever the file's size. Best effort.
    pub(crate) fn release(&self, end: usize) {
        let Ok(mut released) = self.released.lock() else {
            return;
        };
        // Whole aligned blocks only (the map starts on a page).
        let end = end / ALIGN * ALIGN;
        if end <= *released {
            return;
        }
        // SAFETY: MADV_DONTNEED on a shared read-only file mapping only drops the page
        // table entries: a later access (a worker still reading a frame there) faults the
        // same bytes back in from the page cache, so no borrowed byte changes.
        let _ = unsafe {
            self.map
                .unchecked_advise_range(UncheckedAdvice::DontNeed, *released, end - *released)
        };
        *released = end;
    }

    /// Prefaults the next `step` bytes from `at` if they are not let go yet; returns where
    /// it got, `None` if the system will not.
    fn prefault(&self, at: usize, step: usize) -> Option<usize> {
        let released = self.released.lock().ok()?;
        let at = at.max(*released);
        let end = at.saturating_add(step).min(self.map.len());
        if at < end {
            self.map
                .advise_range(Advice::PopulateRead, at, end - at)
                .ok()?;
        }
        Some(end)
    }
}

/// Bytes of the map kept prefaulted ahead of the reader.
const AHEAD: usize = 2 * RELEASE_EVERY;
/// Bytes prefaulted at a time (the reader waits at most that long to let go of pages).
const STEP: usize = ALIGN;

/// A thread that prefaults the map ahead of the reader (`MADV_POPULATE_READ`): the page
/// faults then run beside the analysis, on another core, as the kernel's copies do for a
/// file read ahead.
pub(crate) struct Prefault {
    /// How far the reader is.
    read: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: std::thread::Thread,
}

impl Prefault {
    /// Starts prefaulting `map` from its start; `None` if no thread can be had.
    pub(crate) fn spawn(map: Map) -> Option<Prefault> {
        let read = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, s) = (Arc::clone(&read), Arc::clone(&stop));
        let handle = std::thread::Builder::new()
            .name("tcpdx-prefault".into())
            .spawn(move || {
                let len = map.bytes().len();
                let mut at = 0;
                while at < len && !s.load(Ordering::Relaxed) {
                    let until = r.load(Ordering::Relaxed).saturating_add(AHEAD);
                    if at < until {
                        match map.prefault(at, STEP.min(until - at)) {
                            Some(end) => at = end,
                            None => return,
                        }
                    } else {
                        std::thread::park();
                    }
                }
            })
            .ok()?;
        Some(Prefault {
            read,
            stop,
            thread: handle.thread().clone(),
        })
    }

    /// The reader is at `pos`.
    pub(crate) fn advance(&self, pos: usize) {
        self.read.store(pos, Ordering::Relaxed);
        self.thread.unpark();
    }
}

impl Drop for Prefault {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.unpark();
    }
}

/// What the SIGBUS handler of [`exit_on_sigbus`] prints: set once, leaked (a line).
static ON_SIGBUS: AtomicPtr<Vec<u8>> = AtomicPtr::new(std::ptr::null_mut());
/// The start and end of that line, around the name of the file mapped last.
static SIGBUS_TEXT: Mutex<(String, String)> = Mutex::new((String::new(), String::new()));

/// Makes a SIGBUS (a mapped file truncated by another program while it is read, see
/// [`crate::CaptureReader::open_mapped`]) end the process with `prefix`, the file's name,
/// what happened and `hint` on one line of stderr, and exit code 2, instead of the system's
/// "Bus error" crash. For programs, not libraries: it sets the process' SIGBUS handler.
pub fn exit_on_sigbus(prefix: &str, hint: &str) {
    if let Ok(mut t) = SIGBUS_TEXT.lock() {
        *t = (prefix.to_owned(), hint.to_owned());
    }
    note_mapped("the capture");
    // SAFETY: the handler only reads a line prepared beforehand, writes it and exits, all
    // async-signal-safe; the action is a plain handler with an empty mask.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigbus as *const () as usize;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut());
    }
}

/// Prepares the SIGBUS line for the file `name`, just mapped.
fn note_mapped(name: &str) {
    let Ok(t) = SIGBUS_TEXT.lock() else {
        return;
    };
    if t.0.is_empty() && t.1.is_empty() {
        return;
    }
    let line = format!(
        concat!(
            "{}{}: the file could not be read where it is mapped ",
            "(another program truncated it, or its storage failed){}\n"
        ),
        t.0, name, t.1
    );
    // The previous line stays allocated: a handler may be reading it (a line per file).
    ON_SIGBUS.store(
        Box::into_raw(Box::new(line.into_bytes())),
        Ordering::Release,
    );
}

extern "C" fn on_sigbus(_: libc::c_int) {
    let line = ON_SIGBUS.load(Ordering::Acquire);
    // SAFETY: non-null pointers there come from `Box::into_raw` and are never freed;
    // write(2) and _exit(2) are async-signal-safe.
    unsafe {
        if let Some(line) = line.as_ref() {
            libc::write(2, line.as_ptr().cast(), line.len());
        }
        libc::_exit(2);
    }
}
