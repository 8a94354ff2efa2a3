//! Format detection from magic bytes, done once at open.
//!
//! Owns the magic numbers: gzip and zstd (looked at on the raw input), then the three pcap
//! magics in both byte orders and the pcapng section header (looked at on the decompressed
//! stream), and the public [`CaptureFormat`] that says what was found. Detection needs only
//! the first 4 bytes, so it works on pipes: nothing is ever sought back.

use std::fmt;

/// Compression found in front of the capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Compression {
    /// Plain capture.
    None,
    /// gzip (one or more members).
    Gzip,
    /// Zstandard (one or more frames).
    Zstd,
}

/// The capture container found after decompression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Container {
    /// Classic libpcap file.
    Pcap {
        /// Nanosecond timestamps (magic `a1b23c4d`) rather than microseconds.
        nanos: bool,
        /// Header and records are big-endian.
        big_endian: bool,
    },
    /// Alexey Kuznetzov's "modified" pcap (magic `a1b2cd34`): 8 more bytes per record header.
    PcapModified {
        /// Header and records are big-endian.
        big_endian: bool,
    },
    /// pcapng (byte order is per section).
    PcapNg,
}

/// What [`crate::CaptureReader::format`] reports: the container and its compression.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CaptureFormat {
    /// pcap variant or pcapng.
    pub container: Container,
    /// Compression removed in front of it.
    pub compression: Compression,
}

impl Compression {
    /// The compression of the file at `path`, from its first bytes; `None` if it cannot be
    /// read or is standard input (whose bytes cannot be looked at twice). For choices made
    /// before opening a capture (the CLI's default thread count).
    pub fn of_path(path: &std::path::Path) -> Option<Compression> {
        use std::io::Read;
        if path.as_os_str() == "-" {
            return None;
        }
        let mut head = [0; MAGIC_LEN];
        let mut f = std::fs::File::open(path).ok()?;
        let n = f.read(&mut head).ok()?;
        Some(compression(head.get(..n)?))
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::None => "no",
            Self::Gzip => "gzip",
            Self::Zstd => "zstd",
        })
    }
}

impl fmt::Display for Container {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let order = |be: bool| if be { "big-endian" } else { "little-endian" };
        match *self {
            Self::Pcap { nanos, big_endian } => {
                let unit = if nanos { "nanosecond" } else { "microsecond" };
                write!(f, "pcap ({unit}, {})", order(big_endian))
            }
            Self::PcapModified { big_endian } => {
                write!(f, "modified pcap (microsecond, {})", order(big_endian))
            }
            Self::PcapNg => f.write_str("pcapng"),
        }
    }
}

impl fmt::Display for CaptureFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.compression {
            Compression::None => write!(f, "{}", self.container),
            c => write!(f, "{}, {c}-compressed", self.container),
        }
    }
}

/// gzip member magic (RFC 1952 section 2.3.1: ID1 ID2).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// Zstandard frame magic 0xFD2FB528, little-endian (RFC 8878 section 3.1.1).
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// pcap magic, microsecond timestamps.
const PCAP_MAGIC_US: u32 = 0xa1b2_c3d4;
/// pcap magic, nanosecond timestamps.
const PCAP_MAGIC_NS: u32 = 0xa1b2_3c4d;
/// Kuznetzov's modified pcap magic (Wireshark: `PCAP_MODIFIED_MAGIC`).
const PCAP_MAGIC_MODIFIED: u32 = 0xa1b2_cd34;
/// pcapng section header block type: a palindrome, the same in both byte orders.
pub(crate) const PCAPNG_SHB: u32 = 0x0A0D_0D0A;

/// Bytes needed to tell every format apart.
pub(crate) const MAGIC_LEN: usize = 4;

/// Compression of the raw input, from its first bytes.
pub(crate) fn compression(head: &[u8]) -> Compression {
    if head.starts_with(&GZIP_MAGIC) {
        Compression::Gzip
    } else if head.starts_with(&ZSTD_MAGIC) {
        Compression::Zstd
    } else {
        Compression::None
    }
}

/// What the first bytes of the decompressed stream say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sniffed {
    /// A known capture container.
    Capture(Container),
    /// Fewer than 4 bytes, all matching the start of some capture magic.
    TooShort,
    /// Not a capture.
    Unknown,
}

/// The container of the decompressed stream, from its first bytes.
pub(crate) fn container(head: &[u8]) -> Sniffed {
    let Some(magic) = head.first_chunk::<MAGIC_LEN>() else {
        let all = all_magics();
        return if all.iter().any(|m| m.starts_with(head)) {
            Sniffed::TooShort
        } else {
            Sniffed::Unknown
        };
    };
    if u32::from_le_bytes(*magic) == PCAPNG_SHB {
        return Sniffed::Capture(Container::PcapNg);
    }
    for (value, big_endian) in [
        (u32::from_le_bytes(*magic), false),
        (u32::from_be_bytes(*magic), true),
    ] {
        let found = match value {
            PCAP_MAGIC_US => Container::Pcap {
                nanos: false,
                big_endian,
            },
            PCAP_MAGIC_NS => Container::Pcap {
                nanos: true,
                big_endian,
            },
            PCAP_MAGIC_MODIFIED => Container::PcapModified { big_endian },
            _ => continue,
        };
        return Sniffed::Capture(found);
    }
    Sniffed::Unknown
}

/// Every container magic as it appears in a file.
fn all_magics() -> [[u8; 4]; 7] {
    [
        PCAP_MAGIC_US.to_le_bytes(),
        PCAP_MAGIC_US.to_be_bytes(),
        PCAP_MAGIC_NS.to_le_bytes(),
        PCAP_MAGIC_NS.to_be_bytes(),
        PCAP_MAGIC_MODIFIED.to_le_bytes(),
        PCAP_MAGIC_MODIFIED.to_be_bytes(),
        PCAPNG_SHB.to_le_bytes(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressions() {
        assert_eq!(compression(&[0x1f, 0x8b, 8, 0]), Compression::Gzip);
        assert_eq!(compression(&[0x28, 0xb5, 0x2f, 0xfd]), Compression::Zstd);
        assert_eq!(compression(&[0x28, 0xb5, 0x2f]), Compression::None);
        assert_eq!(compression(&[0xd4, 0xc3, 0xb2, 0xa1]), Compression::None);
        assert_eq!(compression(&[]), Compression::None);
    }

    #[test]
    fn compression_of_a_path() {
        let dir = std::env::temp_dir().join(format!("tcpdx-sniff-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes, want) in [
            ("a.gz", &[0x1f, 0x8b, 8, 0, 1][..], Some(Compression::Gzip)),
            (
                "a.zst",
                &[0x28, 0xb5, 0x2f, 0xfd][..],
                Some(Compression::Zstd),
            ),
            (
                "a.pcap",
                &[0xd4, 0xc3, 0xb2, 0xa1, 2][..],
                Some(Compression::None),
            ),
            ("short", &[0x1f][..], Some(Compression::None)),
        ] {
            let p = dir.join(name);
            std::fs::write(&p, bytes).unwrap();
            assert_eq!(Compression::of_path(&p), want, "{name}");
        }
        assert_eq!(Compression::of_path(&dir.join("missing")), None);
        assert_eq!(Compression::of_path(std::path::Path::new("-")), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn containers() {
        let cases: [([u8; 4], Container); 7] = [
            (
                [0xd4, 0xc3, 0xb2, 0xa1],
                Container::Pcap {
                    nanos: false,
                    big_endian: false,
                },
            ),
            (
                [0xa1, 0xb2, 0xc3, 0xd4],
                Container::Pcap {
                    nanos: false,
                    big_endian: true,
                },
            ),
            (
                [0x4d, 0x3c, 0xb2, 0xa1],
                Container::Pcap {
                    nanos: true,
                    big_endian: false,
                },
            ),
            (
                [0xa1, 0xb2, 0x3c, 0x4d],
                Container::Pcap {
                    nanos: true,
                    big_endian: true,
                },
            ),
            (
                [0x34, 0xcd, 0xb2, 0xa1],
                Container::PcapModified { big_endian: false },
            ),
            (
                [0xa1, 0xb2, 0xcd, 0x34],
                Container::PcapModified { big_endian: true },
            ),
            ([0x0a, 0x0d, 0x0d, 0x0a], Container::PcapNg),
        ];
        for (bytes, want) in cases {
            assert_eq!(container(&bytes), Sniffed::Capture(want), "{bytes:02x?}");
        }
        assert_eq!(container(b"Hello"), Sniffed::Unknown);
        assert_eq!(container(&[0xd4, 0xc3]), Sniffed::TooShort);
        assert_eq!(container(&[0x0a]), Sniffed::TooShort);
        assert_eq!(container(&[0x00, 0x01]), Sniffed::Unknown);
    }

    #[test]
    fn display() {
        let f = CaptureFormat {
            container: Container::Pcap {
                nanos: true,
                big_endian: true,
            },
            compression: Compression::Zstd,
        };
        assert_eq!(
            f.to_string(),
            "pcap (nanosecond, big-endian), zstd-compressed"
        );
        let f = CaptureFormat {
            container: Container::PcapNg,
            compression: Compression::None,
        };
        assert_eq!(f.to_string(), "pcapng");
    }
}
