//! tcpdx-capture: the only reader of capture files.
//!
//! capture -> wire -> core -> detect -> report. This crate opens a file (or stdin), sniffs
//! the format from magic bytes (gzip / zstd in front of pcap in its 4 variants or pcapng),
//! and hands out [`Frame`]s one at a time from a bounded buffer.
//!
//! CONTRACT (used by tcpdx-cli; keep stable):
//! - `CaptureReader::open(path)` ("-" means stdin), `CaptureReader::from_reader(name, reader)`;
//!   `open_read_ahead` and `open_mapped` read the same frames faster (a reading thread; the
//!   file mapped into memory).
//! - `next_frame()` -> `Ok(Some(frame))`, `Ok(None)` at the end, or `Err(CaptureError)`
//!   for a capture that is bad at some byte offset. Frame numbers count every packet record
//!   (EPB, SPB, OPB, pcap records), 1-based, like Wireshark's `frame.number`.
//! - A record cut off at end of file ends the stream with `Ok(None)` and leaves a
//!   [`CaptureWarning`] naming the offset (see `warnings()`).
//! - Memory is bounded: one record at a time, whatever the file size (a mapped file's pages
//!   are let go once read).
//! - `CaptureSet::open(paths, order, open_member)`: several files as one capture (a ring
//!   buffer, or files overlapping in time merged by timestamp), numbered as in the file
//!   `mergecap` writes of them; [`Frames`] is what both hand out.
//! - `next_frame_at()` + `share_buffer()`: the same frames as positions in a buffer that
//!   other threads may hold and read (the multi-core driver's workers read payloads there).
//!
//! ```no_run
//! # fn main() -> Result<(), tcpdx_capture::CaptureError> {
//! let mut reader = tcpdx_capture::CaptureReader::open("trace.pcapng".as_ref())?;
//! while let Some(frame) = reader.next_frame()? {
//!     println!("{} {} {} bytes", frame.no, frame.ts.nanos(), frame.data.len());
//! }
//! for w in reader.warnings() {
//!     eprintln!("warning: {w}");
//! }
//! # Ok(()) }
//! ```
//!
//! Layout: `input` (raw bytes, counting, gzip/zstd), `sniff` (magic numbers, formats),
//! `window` (the bounded buffer frames borrow from), `mapped` (a file mapped into memory, the
//! crate's only unsafe code), `pcap` and `pcapng` (record layouts),
//! `set` (several files read as one capture, merged or concatenated as mergecap does),
//! `error` (errors and warnings), `raw` (records and blocks as stored, for rewriting) and
//! `write` (pcapng output with packet comments, for `tcpdx annotate`).
// Unsafe code only in `mapped` (mapping a file), which allows it.
#![deny(unsafe_code)]
#![warn(missing_docs)]
// Input data must never panic the library: no unwrap/expect/indexing/panic outside tests
// (checked indexing with `get`; the few provably in-bounds cases carry their reason).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]

mod error;
mod field;
mod input;
mod mapped;
mod pcap;
mod pcapng;
mod range;
mod raw;
mod set;
mod sniff;
mod window;
mod write;

use std::fmt;
use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub use error::{BlockLengthProblem, CaptureError, CaptureErrorKind, CaptureWarning};
pub use mapped::{Map, exit_on_sigbus};
pub use range::RangeReader;
pub use raw::{BlockKind, PcapHeader, RawBlock, RawItem, RawReader, RawRecord};
pub use set::{CaptureSet, MAX_RUNS, OpenMember, SetMap, SetOrder, members};
pub use sniff::{CaptureFormat, Compression, Container};
pub use tcpdx_wire::{Frame, FrameNo, LinkType, Timestamp};
pub use window::Buffer;
pub use write::PcapNgWriter;

use error::Bad;
use pcap::{PcapFile, PcapVariant};
use pcapng::PcapNg;
use sniff::Sniffed;
use window::Window;

/// Largest captured length for most link types: Wireshark's `WTAP_MAX_PACKET_SIZE_STANDARD`.
/// A record above it is a corrupt capture, not a packet.
pub const MAX_CAPLEN_STANDARD: u32 = 262_144;

/// Largest captured length accepted for a link type: Wireshark's `wtap_max_snaplen_for_encap`
/// (`wiretap/wtap.c`), which allows more for D-Bus, EBHSCR and USB captures.
pub(crate) fn max_caplen(link: LinkType) -> u32 {
    match link.0 {
        // LINKTYPE_DBUS: WTAP_MAX_PACKET_SIZE_DBUS.
        231 => 128 * 1024 * 1024,
        // LINKTYPE_EBHSCR: WTAP_MAX_PACKET_SIZE_EBHSCR.
        279 => 8 * 1024 * 1024,
        // LINKTYPE_USB_FREEBSD, USB_LINUX, USB_LINUX_MMAPPED, USBPCAP, USB_DARWIN:
        // WTAP_MAX_PACKET_SIZE_USBPCAP.
        186 | 189 | 220 | 249 | 266 => 128 * 1024 * 1024,
        _ => MAX_CAPLEN_STANDARD,
    }
}

/// What a format parser found next in the window.
pub(crate) enum Next {
    /// A packet record, entirely in the window.
    Packet(Packet),
    /// A record that Wireshark numbers but that is not a packet (skipped, but counted).
    OtherRecord,
    /// Clean end of input.
    End,
    /// The input ends inside the record or block starting at `offset`.
    Cut {
        /// Stream offset of the cut record or block.
        offset: u64,
        /// Whether it is (or may be) a packet record, rather than another pcapng block.
        record: bool,
    },
}

/// A packet record at the start of the window.
pub(crate) struct Packet {
    pub ts: Timestamp,
    pub link: LinkType,
    pub orig_len: u32,
    pub interface: u32,
    /// Offset of the data from the start of the record.
    pub data_start: usize,
    /// Captured bytes.
    pub caplen: usize,
    /// Length of the whole record (consumed once the frame is no longer borrowed).
    pub total: usize,
}

/// A frame as [`CaptureReader::next_frame_at`] gives it: the record's fields, and where its
/// captured bytes lie in one of the reader's buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameAt {
    /// Frame number (Wireshark's `frame.number`).
    pub no: FrameNo,
    /// Capture time.
    pub ts: Timestamp,
    /// Link type of the frame's interface.
    pub link: LinkType,
    /// Length on the wire.
    pub orig_len: u32,
    /// Interface index (pcapng; 0 for pcap).
    pub interface: u32,
    /// Index of the first captured byte in the buffer.
    pub start: usize,
    /// Captured length.
    pub len: usize,
    /// Which buffer: changes whenever the reader moves to another one, so a caller knows
    /// when to take [`CaptureReader::share_buffer`] again.
    pub buffer: u64,
}

impl FrameAt {
    /// The captured bytes' range in their buffer.
    #[inline]
    pub fn range(&self) -> std::ops::Range<usize> {
        self.start..self.start + self.len
    }
}

/// The format-specific parser.
#[derive(Debug)]
enum Parser {
    Pcap(PcapFile),
    PcapNg(PcapNg),
}

/// Name used for standard input in errors and warnings.
const STDIN_NAME: &str = "<stdin>";

/// Reads one capture (pcap or pcapng, plain, gzip or zstd) as a stream of [`Frame`]s.
pub struct CaptureReader {
    name: String,
    window: Window,
    parser: Parser,
    format: CaptureFormat,
    raw_bytes: Arc<AtomicU64>,
    input_len: Option<u64>,
    warnings: Vec<CaptureWarning>,
    /// Records numbered so far: the last frame's number (Wireshark's `frame.number`).
    frames: u64,
    /// Length of the record last handed out, still in the window while the frame is borrowed.
    pending: usize,
    /// An end, a cut or an error was reached: every later call returns `Ok(None)`.
    done: bool,
}

impl fmt::Debug for CaptureReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CaptureReader")
            .field("name", &self.name)
            .field("format", &self.format)
            .field("frames", &self.frames)
            .field("offset", &self.window.offset())
            .finish_non_exhaustive()
    }
}

impl CaptureReader {
    /// Opens a file; "-" means stdin. Sniffs gzip/zstd then pcap/pcapng from magic bytes.
    pub fn open(path: &Path) -> Result<CaptureReader, CaptureError> {
        let (name, raw, len) = open_path(path)?;
        Self::build(&name, raw, len, false)
    }

    /// [`Self::open`], with uncompressed input read ahead on a thread of its own (the
    /// kernel's copies then run beside the analysis, on another core; compressed input is
    /// always decompressed on a thread of its own).
    pub fn open_read_ahead(path: &Path) -> Result<CaptureReader, CaptureError> {
        let (name, raw, len) = open_path(path)?;
        Self::build(&name, raw, len, true)
    }

    /// [`Self::open`] for a regular uncompressed file, reading it mapped into memory: frames
    /// are read where the page cache holds them, without the kernel copying every byte
    /// into a buffer, and a thread prefaults the pages ahead (which pays even with every
    /// core busy: -10 to -16% time on full-payload captures with two threads on two cores).
    /// Other inputs (stdin, pipes, compressed files, a system that will not map) are read as
    /// [`Self::open_read_ahead`] reads them with `read_ahead`, else as [`Self::open`].
    ///
    /// A file truncated by another process while it is read mapped makes the system send
    /// the process SIGBUS at the next access past the new end (appending is harmless).
    pub fn open_mapped(path: &Path, read_ahead: bool) -> Result<CaptureReader, CaptureError> {
        if path.as_os_str() == "-" {
            let (name, raw, len) = open_path(path)?;
            return Self::build(&name, raw, len, read_ahead);
        }
        let (name, file, len) = open_file(path)?;
        let map = len.filter(|&l| l > 0).and_then(|_| Map::of(&file, &name));
        let Some(map) = map.filter(|m| {
            sniff::compression(m.bytes().get(..sniff::MAGIC_LEN).unwrap_or(m.bytes()))
                == Compression::None
        }) else {
            return Self::build(&name, Box::new(file), len, read_ahead);
        };
        let window = Window::mapped(map);
        let opened = sniffed(&name, window, Compression::None, Arc::default())?;
        Self::parse_start(&name, opened, len)
    }

    /// Same from any reader; `name` is used in errors/warnings.
    pub fn from_reader(name: &str, r: Box<dyn Read + Send>) -> Result<CaptureReader, CaptureError> {
        Self::build(name, r, None, false)
    }

    fn build(
        name: &str,
        raw: Box<dyn Read + Send>,
        input_len: Option<u64>,
        read_ahead: bool,
    ) -> Result<CaptureReader, CaptureError> {
        let opened = open_stream(name, raw, read_ahead)?;
        Self::parse_start(name, opened, input_len)
    }

    /// Reads the file header (pcap) or the first section's (pcapng).
    fn parse_start(
        name: &str,
        opened: Opened,
        input_len: Option<u64>,
    ) -> Result<CaptureReader, CaptureError> {
        let Opened {
            mut window,
            container,
            compression,
            raw_bytes,
        } = opened;
        let parser = match PcapVariant::of(container) {
            Some(variant) => Parser::Pcap(pcap_header(&mut window, variant, name)?),
            None => Parser::PcapNg(PcapNg::open(&mut window).map_err(|b| b.with_path(name))?),
        };
        Ok(CaptureReader {
            name: name.to_owned(),
            window,
            parser,
            format: CaptureFormat {
                container,
                compression,
            },
            raw_bytes,
            input_len,
            warnings: Vec::new(),
            frames: 0,
            pending: 0,
            done: false,
        })
    }

    /// Next packet record, or Ok(None) at end. Frame borrows the reader's buffer.
    ///
    /// After an error, or the end, every call returns `Ok(None)`.
    // Always inlined, as are `next_frame_at`, the record read and the decode: once a
    // packet, and `#[inline]` left them out of line (inlined: the per-packet loops
    // execute 6-12% fewer instructions; bench/results.md).
    #[inline(always)]
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        let Some(f) = self.next_frame_at()? else {
            return Ok(None);
        };
        Ok(Some(self.frame_of(&f)))
    }

    /// [`Self::next_frame`], telling where the frame's bytes lie instead of borrowing them:
    /// at [`FrameAt::range`] of the reader's current buffer, which [`Self::share_buffer`]
    /// hands out (for threads that decode frames where they lie).
    // Always inlined: see `next_frame`.
    #[inline(always)]
    pub fn next_frame_at(&mut self) -> Result<Option<FrameAt>, CaptureError> {
        self.window.consume(self.pending);
        self.pending = 0;
        if self.done {
            return Ok(None);
        }
        loop {
            let next = match &mut self.parser {
                Parser::Pcap(p) => p.next(&mut self.window),
                Parser::PcapNg(p) => p.next(&mut self.window),
            };
            match next {
                Ok(Next::Packet(p)) => {
                    self.frames += 1;
                    self.pending = p.total;
                    return Ok(Some(FrameAt {
                        no: FrameNo(self.frames),
                        ts: p.ts,
                        link: p.link,
                        orig_len: p.orig_len,
                        interface: p.interface,
                        start: self.window.start() + p.data_start,
                        len: p.caplen,
                        buffer: self.window.generation(),
                    }));
                }
                Ok(Next::OtherRecord) => self.frames += 1,
                Ok(Next::End) => {
                    self.done = true;
                    if self.window.stream_was_cut() {
                        let offset = self.window.offset();
                        let message = format!(
                            "{} stream cut off after byte {offset} (after frame {}): \
                             analysed up to there",
                            self.format.compression, self.frames
                        );
                        self.warn(offset, message);
                    }
                    return Ok(None);
                }
                Ok(Next::Cut { offset, record }) => {
                    self.done = true;
                    let message = if record {
                        format!(
                            "record cut off at byte {offset} (frame {}): analysed up to there",
                            self.frames + 1
                        )
                    } else {
                        format!(
                            "block cut off at byte {offset} (after frame {}): analysed up to there",
                            self.frames
                        )
                    };
                    self.warn(offset, message);
                    return Ok(None);
                }
                Err(bad) => {
                    self.done = true;
                    return Err(bad.with_path(&self.name));
                }
            }
        }
    }

    /// The captured bytes of `f`, the frame last handed out by [`Self::next_frame_at`].
    #[inline]
    pub fn bytes_of(&self, f: &FrameAt) -> &[u8] {
        self.window.buffer().get(f.range()).unwrap_or_default()
    }

    /// `f`, the frame last handed out by [`Self::next_frame_at`], with its bytes borrowed
    /// ([`Self::next_frame`]'s frame).
    #[inline]
    pub fn frame_of(&self, f: &FrameAt) -> Frame<'_> {
        // The parsers check that the record holds its captured bytes.
        Frame {
            no: f.no,
            ts: f.ts,
            link: f.link,
            orig_len: f.orig_len,
            interface: f.interface,
            data: self.bytes_of(f),
        }
    }

    /// The buffer the frame last handed out by [`Self::next_frame_at`] lies in. The reader
    /// never writes into it again while the handle lives (it continues in another buffer),
    /// so the frames' ranges stay valid in it, on any thread. A mapped file's pages from
    /// that frame on are kept mapped while the handle lives.
    pub fn share_buffer(&mut self) -> Arc<Buffer> {
        self.window.share()
    }

    fn warn(&mut self, offset: u64, message: String) {
        self.warnings.push(CaptureWarning {
            path: self.name.clone(),
            offset,
            message,
        });
    }

    /// Warnings so far (e.g. a record cut off at end of file, with its offset).
    pub fn warnings(&self) -> &[CaptureWarning] {
        &self.warnings
    }

    /// Format detected: container (pcap variant or pcapng) and compression.
    pub fn format(&self) -> CaptureFormat {
        self.format
    }

    /// Bytes consumed from the *underlying* (possibly compressed) input so far, for progress bars.
    pub fn input_bytes_read(&self) -> u64 {
        if self.window.is_mapped() {
            return self.window.offset();
        }
        self.raw_bytes.load(Ordering::Relaxed)
    }

    /// Total size of the input file if known (None for stdin), for progress bars.
    pub fn input_len(&self) -> Option<u64> {
        self.input_len
    }

    /// Whether the file is read mapped into memory ([`Self::open_mapped`]).
    pub fn is_mapped(&self) -> bool {
        self.window.is_mapped()
    }

    /// The name used in errors and warnings (the path, or `<stdin>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Records numbered so far, packets or not (the last one's `frame.number`).
    pub fn records(&self) -> u64 {
        self.frames
    }
}

/// What a pass reads frames from: one capture file ([`CaptureReader`]) or several read as
/// one ([`CaptureSet`]). Generic callers pay nothing for the set when reading one file.
pub trait Frames: Send {
    /// See [`CaptureReader::next_frame_at`].
    fn next_frame_at(&mut self) -> Result<Option<FrameAt>, CaptureError>;
    /// See [`CaptureReader::frame_of`].
    fn frame_of(&self, f: &FrameAt) -> Frame<'_>;
    /// See [`CaptureReader::share_buffer`].
    fn share_buffer(&mut self) -> Arc<Buffer>;
    /// See [`CaptureReader::warnings`].
    fn warnings(&self) -> &[CaptureWarning];
    /// See [`CaptureReader::input_bytes_read`].
    fn input_bytes_read(&self) -> u64;
    /// See [`CaptureReader::input_len`].
    fn input_len(&self) -> Option<u64>;
    /// See [`CaptureReader::is_mapped`].
    fn is_mapped(&self) -> bool;
    /// See [`CaptureReader::next_frame`].
    #[inline(always)]
    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        match self.next_frame_at()? {
            Some(f) => Ok(Some(self.frame_of(&f))),
            None => Ok(None),
        }
    }
}

impl Frames for CaptureReader {
    #[inline(always)]
    fn next_frame_at(&mut self) -> Result<Option<FrameAt>, CaptureError> {
        CaptureReader::next_frame_at(self)
    }
    #[inline(always)]
    fn frame_of(&self, f: &FrameAt) -> Frame<'_> {
        CaptureReader::frame_of(self, f)
    }
    fn share_buffer(&mut self) -> Arc<Buffer> {
        CaptureReader::share_buffer(self)
    }
    fn warnings(&self) -> &[CaptureWarning] {
        CaptureReader::warnings(self)
    }
    #[inline]
    fn input_bytes_read(&self) -> u64 {
        CaptureReader::input_bytes_read(self)
    }
    fn input_len(&self) -> Option<u64> {
        CaptureReader::input_len(self)
    }
    fn is_mapped(&self) -> bool {
        CaptureReader::is_mapped(self)
    }
    #[inline(always)]
    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        CaptureReader::next_frame(self)
    }
}

impl Frames for CaptureSet {
    #[inline]
    fn next_frame_at(&mut self) -> Result<Option<FrameAt>, CaptureError> {
        CaptureSet::next_frame_at(self)
    }
    #[inline]
    fn frame_of(&self, f: &FrameAt) -> Frame<'_> {
        CaptureSet::frame_of(self, f)
    }
    fn share_buffer(&mut self) -> Arc<Buffer> {
        CaptureSet::share_buffer(self)
    }
    fn warnings(&self) -> &[CaptureWarning] {
        CaptureSet::warnings(self)
    }
    fn input_bytes_read(&self) -> u64 {
        CaptureSet::input_bytes_read(self)
    }
    fn input_len(&self) -> Option<u64> {
        CaptureSet::input_len(self)
    }
    fn is_mapped(&self) -> bool {
        CaptureSet::is_mapped(self)
    }
}

/// A capture input opened by path: its display name, its bytes and its size if it is a
/// regular file.
type OpenedPath = (String, Box<dyn Read + Send>, Option<u64>);

/// Opens `path` ("-" means stdin).
pub(crate) fn open_path(path: &Path) -> Result<OpenedPath, CaptureError> {
    if path.as_os_str() == "-" {
        return Ok((STDIN_NAME.to_owned(), Box::new(std::io::stdin()), None));
    }
    let (name, file, len) = open_file(path)?;
    Ok((name, Box::new(file), len))
}

/// Opens the file at `path`: its display name, the file and its size if it is a regular file.
fn open_file(path: &Path) -> Result<(String, File, Option<u64>), CaptureError> {
    let name = path.display().to_string();
    let file = File::open(path).map_err(|e| CaptureError {
        path: name.clone(),
        offset: 0,
        kind: CaptureErrorKind::Open(e),
    })?;
    let len = file
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    Ok((name, file, len))
}

/// The decompressed stream with its container sniffed: where every reader starts.
pub(crate) struct Opened {
    pub window: Window,
    pub container: Container,
    pub compression: Compression,
    pub raw_bytes: Arc<AtomicU64>,
}

/// Puts a decompressor in front of `raw` if needed and sniffs the container.
pub(crate) fn open_stream(
    name: &str,
    raw: Box<dyn Read + Send>,
    read_ahead: bool,
) -> Result<Opened, CaptureError> {
    let fail = |offset, kind| Err(Bad::at(offset, kind).with_path(name));
    let input = match input::open(raw, read_ahead) {
        Ok(input) => input,
        Err(e) => return fail(0, CaptureErrorKind::Io(e)),
    };
    let window = Window::over(input.stream, window::DEFAULT_CAPACITY, &input.prefix);
    sniffed(name, window, input.compression, input.raw_bytes)
}

/// Sniffs the container at the start of `window`.
fn sniffed(
    name: &str,
    mut window: Window,
    compression: Compression,
    raw_bytes: Arc<AtomicU64>,
) -> Result<Opened, CaptureError> {
    let fail = |offset, kind| Err(Bad::at(offset, kind).with_path(name));
    if let Err(e) = window.fill(sniff::MAGIC_LEN) {
        return fail(window.received(), CaptureErrorKind::Io(e));
    }
    let head = window.bytes();
    let head = head.get(..sniff::MAGIC_LEN).unwrap_or(head);
    let container = match sniff::container(head) {
        _ if head.is_empty() => return fail(0, CaptureErrorKind::Empty),
        Sniffed::Capture(c) => c,
        Sniffed::TooShort => {
            let (what, needed, got) = ("capture magic number", 4, head.len() as u32);
            return fail(0, CaptureErrorKind::TruncatedHeader { what, needed, got });
        }
        Sniffed::Unknown => {
            let kind = CaptureErrorKind::NotACapture {
                magic: head.to_vec(),
                inside: compression,
            };
            return fail(0, kind);
        }
    };
    Ok(Opened {
        window,
        container,
        compression,
        raw_bytes,
    })
}

/// Reads and consumes the pcap file header at the start of `window`.
pub(crate) fn pcap_header(
    window: &mut Window,
    variant: PcapVariant,
    name: &str,
) -> Result<PcapFile, CaptureError> {
    let len = pcap::FILE_HEADER_LEN;
    match window.fill(len) {
        Err(e) => {
            let kind = CaptureErrorKind::Io(e);
            return Err(Bad::at(window.received(), kind).with_path(name));
        }
        Ok(false) => {
            let got = window.bytes().len() as u32;
            let (what, needed) = ("pcap file header", len as u32);
            let kind = CaptureErrorKind::TruncatedHeader { what, needed, got };
            return Err(Bad::at(0, kind).with_path(name));
        }
        Ok(true) => {}
    }
    let file = PcapFile::parse_header(window.bytes(), variant).map_err(|b| b.with_path(name))?;
    window.consume(len);
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_is_send() {
        fn send<T: Send>() {}
        send::<CaptureReader>();
        send::<CaptureError>();
    }

    #[test]
    fn caplen_limits() {
        assert_eq!(max_caplen(LinkType::ETHERNET), 262_144);
        assert_eq!(max_caplen(LinkType(249)), 128 << 20);
    }
}
