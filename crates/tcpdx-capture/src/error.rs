//! Errors and warnings of the capture reader.
//!
//! Owns [`CaptureError`] (a capture that cannot be read on: which file, at which byte of the
//! decompressed stream, what was wrong) and [`CaptureWarning`] (something odd that did not
//! stop the reading, e.g. a record cut off at the end of the file). Both display on one line.
//! Unlike pcap-parser's `ReadError`, the `io::Error` is kept and is the error's `source()`.

use std::{error, fmt, io};

use crate::sniff::Compression;

/// A capture that cannot be read (any further).
#[derive(Debug)]
pub struct CaptureError {
    /// The file name as given to the reader (`<stdin>` for standard input).
    pub path: String,
    /// Byte offset in the decompressed capture stream where the bad header, record or block
    /// starts (for read errors: how many decompressed bytes had been read).
    pub offset: u64,
    /// What was wrong.
    pub kind: CaptureErrorKind,
}

/// What was wrong with a capture.
#[derive(Debug)]
#[non_exhaustive]
pub enum CaptureErrorKind {
    /// The file could not be opened.
    Open(io::Error),
    /// Reading or decompressing the input failed.
    Io(io::Error),
    /// The input holds no byte at all (after decompression).
    Empty,
    /// The first bytes are no pcap or pcapng magic number.
    NotACapture {
        /// The first (up to 4) bytes of the decompressed stream.
        magic: Vec<u8>,
        /// The compression that was removed before looking at them.
        inside: Compression,
    },
    /// The input ends inside the file header (pcap) or the first section header (pcapng).
    TruncatedHeader {
        /// Which header: `"pcap file header"`, `"pcapng section header"`, ...
        what: &'static str,
        /// Bytes the header needs.
        needed: u32,
        /// Bytes the input had.
        got: u32,
    },
    /// A pcap file header or pcapng section header with a version we cannot read.
    UnsupportedVersion {
        /// `"pcap"` or `"pcapng"`.
        format: &'static str,
        /// Major version in the header.
        major: u16,
        /// Minor version in the header.
        minor: u16,
    },
    /// A pcapng section header block whose byte-order magic is neither byte order.
    BadSectionHeader {
        /// The byte-order magic as read (little-endian).
        byte_order_magic: u32,
    },
    /// A pcapng block whose total length is impossible.
    BadBlockLength {
        /// The block type.
        block_type: u32,
        /// The block total length in the block header.
        length: u32,
        /// Why that length is wrong.
        problem: BlockLengthProblem,
    },
    /// A record whose captured length is larger than any real packet.
    AbsurdCaplen {
        /// Captured length in the record.
        caplen: u32,
        /// Largest captured length accepted for the record's link type.
        max: u32,
    },
    /// A pcapng packet block whose captured length does not fit inside the block.
    CaplenExceedsBlock {
        /// The block type.
        block_type: u32,
        /// Captured length in the block.
        caplen: u32,
        /// Bytes the block has room for.
        room: u32,
    },
    /// A pcapng packet block naming an interface that its section does not describe.
    UnknownInterface {
        /// Interface id in the block.
        interface: u32,
        /// Number of interfaces described so far in the section.
        count: u32,
    },
    /// A pcapng option that runs past the end of its block.
    BadOption {
        /// The block type.
        block_type: u32,
        /// Option code.
        code: u16,
        /// Option length.
        length: u16,
    },
    /// A byte range of the file cannot be read on its own (see `RangeReader`).
    Range {
        /// Why, on one line.
        why: String,
    },
}

/// Why a pcapng block total length is wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BlockLengthProblem {
    /// Not a multiple of 4.
    NotMultipleOf4,
    /// Shorter than the smallest valid block of its type.
    TooShort {
        /// Smallest valid total length for the block type.
        min: u32,
    },
    /// Longer than any valid block.
    TooLong {
        /// Largest total length accepted.
        max: u32,
    },
    /// The copy of the length at the end of the block differs.
    TrailerMismatch {
        /// The trailing copy.
        trailer: u32,
    },
}

/// Something odd in the capture that did not stop the reading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureWarning {
    /// The file name as given to the reader.
    pub path: String,
    /// Byte offset in the decompressed stream of the odd record or block.
    pub offset: u64,
    /// What was odd, on one line.
    pub message: String,
}

impl fmt::Display for CaptureWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

impl fmt::Display for CaptureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            // No offset: nothing was read.
            CaptureErrorKind::Open(e) => write!(f, "{}: cannot open: {e}", self.path),
            kind => write!(f, "{}: byte {}: {kind}", self.path, self.offset),
        }
    }
}

impl error::Error for CaptureError {
    fn source(&self) -> Option<&(dyn error::Error + 'static)> {
        match &self.kind {
            CaptureErrorKind::Open(e) | CaptureErrorKind::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl fmt::Display for CaptureErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Open(e) => write!(f, "cannot open: {e}"),
            Self::Io(e) => write!(f, "read error: {}", one_line(&e.to_string())),
            Self::Empty => f.write_str("empty input, not a capture"),
            Self::NotACapture { magic, inside } => {
                f.write_str("not a pcap or pcapng capture")?;
                if *inside != Compression::None {
                    write!(f, " (inside {inside} compression)")?;
                }
                f.write_str(": starts with")?;
                for b in magic {
                    write!(f, " {b:02x}")?;
                }
                if !magic.is_empty() && magic.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
                    write!(f, " (text {:?})", String::from_utf8_lossy(magic))?;
                }
                Ok(())
            }
            Self::TruncatedHeader { what, needed, got } => {
                write!(f, "input ends inside the {what} ({got} of {needed} bytes)")
            }
            Self::UnsupportedVersion {
                format,
                major,
                minor,
            } => {
                write!(f, "unsupported {format} version {major}.{minor}")
            }
            Self::BadSectionHeader { byte_order_magic } => write!(
                f,
                "pcapng section header has byte-order magic 0x{byte_order_magic:08x}, \
                 not 0x1a2b3c4d in either byte order"
            ),
            Self::BadBlockLength {
                block_type,
                length,
                problem,
            } => {
                write!(
                    f,
                    "pcapng block {} has bad total length {length}: ",
                    BlockName(*block_type)
                )?;
                match problem {
                    BlockLengthProblem::NotMultipleOf4 => f.write_str("not a multiple of 4"),
                    BlockLengthProblem::TooShort { min } => write!(f, "less than {min}"),
                    BlockLengthProblem::TooLong { max } => write!(f, "more than {max}"),
                    BlockLengthProblem::TrailerMismatch { trailer } => {
                        write!(f, "the copy at the end of the block says {trailer}")
                    }
                }
            }
            Self::AbsurdCaplen { caplen, max } => write!(
                f,
                "record has captured length {caplen}, more than the maximum of {max} \
                 (corrupt capture?)"
            ),
            Self::CaplenExceedsBlock {
                block_type,
                caplen,
                room,
            } => write!(
                f,
                "pcapng block {} has captured length {caplen} but room for {room} bytes",
                BlockName(*block_type)
            ),
            Self::UnknownInterface { interface, count } => write!(
                f,
                "pcapng packet block names interface {interface} but its section describes \
                 {count} interface(s)"
            ),
            Self::BadOption {
                block_type,
                code,
                length,
            } => write!(
                f,
                "pcapng block {} has option {code} of length {length} running past the block end",
                BlockName(*block_type)
            ),
            Self::Range { why } => f.write_str(why),
        }
    }
}

/// Replaces line breaks so that a message stays on one line.
fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

/// Displays a pcapng block type with its short name, e.g. `0x00000006 (EPB)`.
pub(crate) struct BlockName(pub u32);

impl fmt::Display for BlockName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.0 {
            0x0A0D_0D0A => "SHB",
            1 => "IDB",
            2 => "OPB",
            3 => "SPB",
            4 => "NRB",
            5 => "ISB",
            6 => "EPB",
            0x0A => "DSB",
            0x0BAD | 0x4000_0BAD => "CB",
            _ => return write!(f, "type 0x{:08x}", self.0),
        };
        write!(f, "{name} (type 0x{:08x})", self.0)
    }
}

/// An error before the file name is attached: offset and kind.
#[derive(Debug)]
pub(crate) struct Bad {
    /// See [`CaptureError::offset`].
    pub offset: u64,
    /// See [`CaptureError::kind`].
    pub kind: CaptureErrorKind,
}

impl Bad {
    /// An error of `kind` at `offset`.
    pub(crate) fn at(offset: u64, kind: CaptureErrorKind) -> Self {
        Self { offset, kind }
    }

    /// Attaches the file name.
    pub(crate) fn with_path(self, path: &str) -> CaptureError {
        CaptureError {
            path: path.to_owned(),
            offset: self.offset,
            kind: self.kind,
        }
    }
}
