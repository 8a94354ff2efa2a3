//! Test helpers: build pcap and pcapng captures in memory, byte by byte.
//!
//! Shared by the integration tests (`mod common;`) and the crate's unit tests. Every builder
//! writes exactly the layout of the format documents (libpcap savefile format,
//! draft-ietf-opsawg-pcapng) and returns the offsets of what it wrote, so that tests can
//! assert error offsets exactly.
#![allow(dead_code)]

use std::io::{self, Read};

/// pcap magic numbers.
pub const MAGIC_US: u32 = 0xa1b2_c3d4;
/// Nanosecond pcap.
pub const MAGIC_NS: u32 = 0xa1b2_3c4d;
/// Kuznetzov's modified pcap.
pub const MAGIC_MODIFIED: u32 = 0xa1b2_cd34;

fn put16(out: &mut Vec<u8>, v: u16, be: bool) {
    out.extend(if be { v.to_be_bytes() } else { v.to_le_bytes() });
}

fn put32(out: &mut Vec<u8>, v: u32, be: bool) {
    out.extend(if be { v.to_be_bytes() } else { v.to_le_bytes() });
}

/// A pcap file under construction.
pub struct Pcap {
    pub bytes: Vec<u8>,
    be: bool,
    modified: bool,
}

impl Pcap {
    /// File header with `magic`, version 2.4, snaplen 65535 and `linktype`.
    pub fn new(magic: u32, be: bool, linktype: u32) -> Self {
        Self::with_version(magic, be, linktype, 2, 4)
    }

    /// File header with an explicit version.
    pub fn with_version(magic: u32, be: bool, linktype: u32, major: u16, minor: u16) -> Self {
        let mut bytes = Vec::new();
        put32(&mut bytes, magic, be);
        put16(&mut bytes, major, be);
        put16(&mut bytes, minor, be);
        put32(&mut bytes, 0, be); // thiszone
        put32(&mut bytes, 0, be); // sigfigs
        put32(&mut bytes, 65535, be); // snaplen
        put32(&mut bytes, linktype, be);
        Self {
            bytes,
            be,
            modified: magic == MAGIC_MODIFIED,
        }
    }

    /// Appends a record whose caplen is `data.len()`; returns its offset.
    pub fn record(&mut self, sec: u32, frac: u32, orig_len: u32, data: &[u8]) -> usize {
        self.record_raw(sec, frac, data.len() as u32, orig_len, data)
    }

    /// Appends a record with an explicit (possibly lying) caplen; returns its offset.
    pub fn record_raw(
        &mut self,
        sec: u32,
        frac: u32,
        caplen: u32,
        orig_len: u32,
        data: &[u8],
    ) -> usize {
        let at = self.bytes.len();
        let be = self.be;
        put32(&mut self.bytes, sec, be);
        put32(&mut self.bytes, frac, be);
        put32(&mut self.bytes, caplen, be);
        put32(&mut self.bytes, orig_len, be);
        if self.modified {
            put32(&mut self.bytes, 7, be); // ifindex
            put16(&mut self.bytes, 0x0800, be); // protocol
            self.bytes.extend([0, 0]); // pkt_type, pad
        }
        self.bytes.extend(data);
        at
    }
}

/// pcapng block types.
pub const SHB: u32 = 0x0A0D_0D0A;
pub const IDB: u32 = 1;
pub const OPB: u32 = 2;
pub const SPB: u32 = 3;
pub const NRB: u32 = 4;
pub const ISB: u32 = 5;
pub const EPB: u32 = 6;

/// A pcapng file under construction (byte order can change at each section).
pub struct PcapNg {
    pub bytes: Vec<u8>,
    be: bool,
}

fn pad4(v: &mut Vec<u8>) {
    while v.len() & 3 != 0 {
        v.push(0);
    }
}

impl PcapNg {
    /// Nothing yet: the first block written should be a section header.
    pub fn empty(be: bool) -> Self {
        Self {
            bytes: Vec::new(),
            be,
        }
    }

    /// A file starting with a section header in the given byte order.
    pub fn new(be: bool) -> Self {
        let mut ng = Self {
            bytes: Vec::new(),
            be,
        };
        ng.shb(be);
        ng
    }

    /// Appends a block with a correct total length (body padded to 4); returns its offset.
    pub fn block(&mut self, block_type: u32, body: &[u8]) -> usize {
        let mut body = body.to_vec();
        pad4(&mut body);
        let len = 12 + body.len() as u32;
        self.block_with_lengths(block_type, len, &body, len)
    }

    /// Appends a block with explicit header and trailer lengths; returns its offset.
    pub fn block_with_lengths(
        &mut self,
        block_type: u32,
        len: u32,
        body: &[u8],
        trailer: u32,
    ) -> usize {
        let at = self.bytes.len();
        let be = self.be;
        put32(&mut self.bytes, block_type, be);
        put32(&mut self.bytes, len, be);
        self.bytes.extend(body);
        put32(&mut self.bytes, trailer, be);
        at
    }

    /// Appends a section header block (version 1.0) in a byte order; returns its offset.
    pub fn shb(&mut self, be: bool) -> usize {
        self.shb_version(be, 1, 0)
    }

    /// Appends a section header block with a version; returns its offset.
    pub fn shb_version(&mut self, be: bool, major: u16, minor: u16) -> usize {
        self.be = be;
        let mut body = Vec::new();
        put32(&mut body, 0x1A2B_3C4D, be);
        put16(&mut body, major, be);
        put16(&mut body, minor, be);
        body.extend(if be {
            (-1i64).to_be_bytes()
        } else {
            (-1i64).to_le_bytes()
        });
        // shb_userappl option, to have something to skip.
        self.option(&mut body, 4, b"tcpdx test");
        self.option(&mut body, 0, &[]);
        self.block(SHB, &body)
    }

    fn option(&self, body: &mut Vec<u8>, code: u16, value: &[u8]) {
        put16(body, code, self.be);
        put16(body, value.len() as u16, self.be);
        body.extend(value);
        pad4(body);
    }

    /// Appends an interface description block; returns its offset.
    pub fn idb(
        &mut self,
        linktype: u16,
        snaplen: u32,
        tsresol: Option<u8>,
        tsoffset: Option<i64>,
    ) -> usize {
        let be = self.be;
        let mut body = Vec::new();
        put16(&mut body, linktype, be);
        put16(&mut body, 0, be);
        put32(&mut body, snaplen, be);
        self.option(&mut body, 2, b"eth0"); // if_name
        if let Some(r) = tsresol {
            self.option(&mut body, 9, &[r]);
        }
        if let Some(o) = tsoffset {
            self.option(
                &mut body,
                14,
                &if be { o.to_be_bytes() } else { o.to_le_bytes() },
            );
        }
        if tsresol.is_some() || tsoffset.is_some() {
            self.option(&mut body, 0, &[]);
        }
        self.block(IDB, &body)
    }

    /// Appends an enhanced packet block (with an epb_flags option); returns its offset.
    pub fn epb(&mut self, interface: u32, ts: u64, orig_len: u32, data: &[u8]) -> usize {
        let be = self.be;
        let mut body = Vec::new();
        put32(&mut body, interface, be);
        put32(&mut body, (ts >> 32) as u32, be);
        put32(&mut body, ts as u32, be);
        put32(&mut body, data.len() as u32, be);
        put32(&mut body, orig_len, be);
        body.extend(data);
        pad4(&mut body);
        self.option(&mut body, 2, &[0, 0, 0, 1]); // epb_flags
        self.option(&mut body, 0, &[]);
        self.block(EPB, &body)
    }

    /// Appends an EPB whose caplen field is `caplen` whatever the data; returns its offset.
    pub fn epb_raw(
        &mut self,
        interface: u32,
        ts: u64,
        caplen: u32,
        orig_len: u32,
        data: &[u8],
    ) -> usize {
        let be = self.be;
        let mut body = Vec::new();
        put32(&mut body, interface, be);
        put32(&mut body, (ts >> 32) as u32, be);
        put32(&mut body, ts as u32, be);
        put32(&mut body, caplen, be);
        put32(&mut body, orig_len, be);
        body.extend(data);
        self.block(EPB, &body)
    }

    /// Appends a simple packet block; returns its offset.
    pub fn spb(&mut self, orig_len: u32, data: &[u8]) -> usize {
        let mut body = Vec::new();
        put32(&mut body, orig_len, self.be);
        body.extend(data);
        self.block(SPB, &body)
    }

    /// Appends an obsolete packet block; returns its offset.
    pub fn opb(&mut self, interface: u16, ts: u64, orig_len: u32, data: &[u8]) -> usize {
        let be = self.be;
        let mut body = Vec::new();
        put16(&mut body, interface, be);
        put16(&mut body, 0, be); // drops
        put32(&mut body, (ts >> 32) as u32, be);
        put32(&mut body, ts as u32, be);
        put32(&mut body, data.len() as u32, be);
        put32(&mut body, orig_len, be);
        body.extend(data);
        self.block(OPB, &body)
    }
}

/// `n` bytes of recognisable packet data.
pub fn payload(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| seed.wrapping_add(i as u8)).collect()
}

/// A reader that hands out at most `step` bytes per call (like a slow pipe).
pub struct Trickle {
    data: Vec<u8>,
    pos: usize,
    step: usize,
}

impl Trickle {
    /// Reads `data` `step` bytes at a time.
    pub fn new(data: Vec<u8>, step: usize) -> Self {
        Self { data, pos: 0, step }
    }
}

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.step.min(buf.len()).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// gzip-compresses `data` as one member.
pub fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(data).unwrap();
    enc.finish().unwrap()
}

/// zstd-compresses `data`.
pub fn zstd(data: &[u8]) -> Vec<u8> {
    zstd::encode_all(data, 3).unwrap()
}

/// A frame copied out of the reader, for assertions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owned {
    pub no: u64,
    pub ts: i64,
    pub link: u16,
    pub orig_len: u32,
    pub interface: u32,
    pub data: Vec<u8>,
}

/// Everything a reader produced: frames, warnings, the error that ended it (if any).
#[derive(Debug)]
pub struct Outcome {
    pub frames: Vec<Owned>,
    pub warnings: Vec<tcpdx_capture::CaptureWarning>,
    pub error: Option<tcpdx_capture::CaptureError>,
    pub format: Option<tcpdx_capture::CaptureFormat>,
}

/// Opens `bytes` as a capture named "test" and reads it to the end.
pub fn read_all(bytes: Vec<u8>) -> Outcome {
    read_from(Box::new(io::Cursor::new(bytes)))
}

/// Same as [`read_all`] from any reader.
pub fn read_from(r: Box<dyn Read + Send>) -> Outcome {
    let mut reader = match tcpdx_capture::CaptureReader::from_reader("test", r) {
        Ok(reader) => reader,
        Err(e) => {
            return Outcome {
                frames: Vec::new(),
                warnings: Vec::new(),
                error: Some(e),
                format: None,
            };
        }
    };
    let mut frames = Vec::new();
    let error = loop {
        match reader.next_frame() {
            Ok(Some(f)) => frames.push(Owned {
                no: f.no.0,
                ts: f.ts.0,
                link: f.link.0,
                orig_len: f.orig_len,
                interface: f.interface,
                data: f.data.to_vec(),
            }),
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    // Reading on after the end (or an error) stays at the end.
    assert!(matches!(reader.next_frame(), Ok(None)));
    Outcome {
        frames,
        warnings: reader.warnings().to_vec(),
        error,
        format: Some(reader.format()),
    }
}

impl Outcome {
    /// The error, which must be there; checks its one-line display.
    #[track_caller]
    pub fn err(&self) -> &tcpdx_capture::CaptureError {
        let e = self.error.as_ref().expect("an error");
        let shown = e.to_string();
        assert!(!shown.contains('\n'), "one line: {shown}");
        assert!(
            shown.starts_with(&format!("test: byte {}: ", e.offset)),
            "{shown}"
        );
        e
    }

    /// Frame numbers read.
    pub fn numbers(&self) -> Vec<u64> {
        self.frames.iter().map(|f| f.no).collect()
    }
}

/// `n` pseudo-random bytes (xorshift), which do not compress.
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s as u8
        })
        .collect()
}
