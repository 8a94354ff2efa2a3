//! A shard's records: one decoded TCP frame each (what the reader thread hands a worker:
//! the header fields and, for the storage parsers, the captured payload), written
//! compactly (frame and time as deltas) and read back identical.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use tcpdx_core::{Endpoint, FrameInput, Segment};
use tcpdx_wire::{FrameNo, SeqNum, TcpFlags, TcpOptions, Timestamp};

const PARTIAL: u8 = 1;
const V6: u8 = 1 << 1;
const MSS: u8 = 1 << 2;
const WSCALE: u8 = 1 << 3;
const SACK_OK: u8 = 1 << 4;
const TSOPT: u8 = 1 << 5;
const MALFORMED: u8 = 1 << 6;

/// Writes records of one shard; frames and times are deltas from the record before.
#[derive(Default)]
pub(crate) struct Encoder {
    frame: u64,
    ts: i64,
    buf: Vec<u8>,
}

impl Encoder {
    /// Appends the record of `input` (a segment or partial segment) with `payload` to
    /// `out`; returns its length in bytes.
    pub(crate) fn write(
        &mut self,
        out: &mut impl Write,
        input: &FrameInput,
        payload: &[u8],
    ) -> io::Result<usize> {
        let (s, partial) = match input {
            FrameInput::Segment(s) => (s, false),
            FrameInput::Partial(s) => (s, true),
            FrameInput::Other { .. } => return Ok(0),
        };
        let b = &mut self.buf;
        b.clear();
        let o = &s.options;
        // Both ends come from one IP header: one family.
        let v6 = matches!(s.src.addr, IpAddr::V6(_));
        let mut flags = 0u8;
        for (on, bit) in [
            (partial, PARTIAL),
            (v6, V6),
            (o.mss.is_some(), MSS),
            (o.window_scale.is_some(), WSCALE),
            (o.sack_permitted, SACK_OK),
            (o.timestamps.is_some(), TSOPT),
            (o.malformed, MALFORMED),
        ] {
            if on {
                flags |= bit;
            }
        }
        b.push(flags);
        put_varint(b, s.frame.0.wrapping_sub(self.frame));
        put_varint(b, zigzag(s.ts.0.wrapping_sub(self.ts)));
        self.frame = s.frame.0;
        self.ts = s.ts.0;
        for a in [s.src.addr, s.dst.addr] {
            match (a, v6) {
                (IpAddr::V4(a), false) => b.extend_from_slice(&a.octets()),
                (IpAddr::V4(a), true) => b.extend_from_slice(&a.to_ipv6_mapped().octets()),
                (IpAddr::V6(a), _) => b.extend_from_slice(&a.octets()),
            }
        }
        b.extend_from_slice(&s.src.port.to_le_bytes());
        b.extend_from_slice(&s.dst.port.to_le_bytes());
        b.extend_from_slice(&s.seq.0.to_le_bytes());
        b.extend_from_slice(&s.ack.0.to_le_bytes());
        b.extend_from_slice(&s.flags.0.to_le_bytes());
        b.extend_from_slice(&s.window.to_le_bytes());
        put_varint(b, u64::from(s.len));
        b.extend_from_slice(&s.ip_id.to_le_bytes());
        b.push(s.ttl);
        put_varint(b, u64::from(s.captured));
        if let Some(m) = o.mss {
            b.extend_from_slice(&m.to_le_bytes());
        }
        if let Some(w) = o.window_scale {
            b.push(w);
        }
        let n = usize::from(o.sack_count).min(o.sack.len());
        b.push(n as u8);
        for (l, r) in &o.sack[..n] {
            b.extend_from_slice(&l.0.to_le_bytes());
            b.extend_from_slice(&r.0.to_le_bytes());
        }
        if let Some((val, ecr)) = o.timestamps {
            b.extend_from_slice(&val.to_le_bytes());
            b.extend_from_slice(&ecr.to_le_bytes());
        }
        put_varint(b, payload.len() as u64);
        out.write_all(b)?;
        out.write_all(payload)?;
        Ok(b.len() + payload.len())
    }
}

/// Reads the records an [`Encoder`] wrote.
pub(crate) struct Decoder<R> {
    r: R,
    frame: u64,
    ts: i64,
}

impl<R: Read> Decoder<R> {
    pub(crate) fn new(r: R) -> Self {
        Self { r, frame: 0, ts: 0 }
    }

    /// The next record: its input (frame number as written) and its payload in `payload`;
    /// `None` at the end. A record cut short is an error.
    pub(crate) fn next(&mut self, payload: &mut Vec<u8>) -> io::Result<Option<FrameInput>> {
        let mut flags = [0u8];
        if self.r.read(&mut flags)? == 0 {
            return Ok(None);
        }
        let flags = flags[0];
        let has = |bit: u8| flags & bit != 0;
        self.frame = self.frame.wrapping_add(self.varint()?);
        self.ts = self.ts.wrapping_add(unzigzag(self.varint()?));
        let addr = |d: &mut Self| -> io::Result<IpAddr> {
            Ok(if has(V6) {
                IpAddr::V6(Ipv6Addr::from(d.array::<16>()?))
            } else {
                IpAddr::V4(Ipv4Addr::from(d.array::<4>()?))
            })
        };
        let (src, dst) = (addr(self)?, addr(self)?);
        let sport = u16::from_le_bytes(self.array()?);
        let dport = u16::from_le_bytes(self.array()?);
        let seq = u32::from_le_bytes(self.array()?);
        let ack = u32::from_le_bytes(self.array()?);
        let tcp_flags = u16::from_le_bytes(self.array()?);
        let window = u16::from_le_bytes(self.array()?);
        let len = self.varint_u32()?;
        let ip_id = u16::from_le_bytes(self.array()?);
        let [ttl] = self.array()?;
        let captured = self.varint_u32()?;
        let mut options = TcpOptions::NONE;
        if has(MSS) {
            options.mss = Some(u16::from_le_bytes(self.array()?));
        }
        if has(WSCALE) {
            options.window_scale = Some(self.array::<1>()?[0]);
        }
        options.sack_permitted = has(SACK_OK);
        options.malformed = has(MALFORMED);
        let [n] = self.array()?;
        if usize::from(n) > options.sack.len() {
            return Err(bad("more SACK blocks than a segment holds"));
        }
        options.sack_count = n;
        for i in 0..usize::from(n) {
            let l = u32::from_le_bytes(self.array()?);
            let r = u32::from_le_bytes(self.array()?);
            options.sack[i] = (SeqNum(l), SeqNum(r));
        }
        if has(TSOPT) {
            let val = u32::from_le_bytes(self.array()?);
            let ecr = u32::from_le_bytes(self.array()?);
            options.timestamps = Some((val, ecr));
        }
        let plen = self.varint_u32()? as usize;
        payload.clear();
        payload.resize(plen, 0);
        self.r.read_exact(payload)?;
        let s = Segment {
            frame: FrameNo(self.frame),
            ts: Timestamp(self.ts),
            src: Endpoint {
                addr: src,
                port: sport,
            },
            dst: Endpoint {
                addr: dst,
                port: dport,
            },
            seq: SeqNum(seq),
            ack: SeqNum(ack),
            flags: TcpFlags(tcp_flags),
            window,
            len,
            ip_id,
            ttl,
            captured,
            options,
        };
        Ok(Some(if has(PARTIAL) {
            FrameInput::Partial(s)
        } else {
            FrameInput::Segment(s)
        }))
    }

    fn array<const N: usize>(&mut self) -> io::Result<[u8; N]> {
        let mut a = [0u8; N];
        self.r.read_exact(&mut a)?;
        Ok(a)
    }

    fn varint(&mut self) -> io::Result<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let [b] = self.array()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad("a number longer than 64 bits"))
    }

    fn varint_u32(&mut self) -> io::Result<u32> {
        u32::try_from(self.varint()?).map_err(|_| bad("a length over 32 bits"))
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

fn put_varint(b: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        b.push((v as u8) | 0x80);
        v >>= 7;
    }
    b.push(v as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(frame: u64, ts: i64, v6: bool, opts: TcpOptions) -> Segment {
        let (a, b) = if v6 {
            (
                IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 1, 2)),
                IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 3, 4)),
            )
        } else {
            (
                IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
                IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            )
        };
        Segment {
            frame: FrameNo(frame),
            ts: Timestamp(ts),
            src: Endpoint {
                addr: a,
                port: 40_000,
            },
            dst: Endpoint {
                addr: b,
                port: 2049,
            },
            seq: SeqNum(u32::MAX - 5),
            ack: SeqNum(77),
            flags: TcpFlags(0x18),
            window: 65_535,
            len: 1448,
            ip_id: 4242,
            ttl: 63,
            captured: 100,
            options: opts,
        }
    }

    #[test]
    fn records_read_back_identical() {
        let mut full = TcpOptions::NONE;
        full.mss = Some(1460);
        full.window_scale = Some(14);
        full.sack_permitted = true;
        full.sack_count = 4;
        for i in 0..4 {
            full.sack[i] = (SeqNum(i as u32 * 10), SeqNum(u32::MAX - i as u32));
        }
        full.timestamps = Some((1, u32::MAX));
        full.malformed = true;
        let inputs = [
            (
                FrameInput::Segment(seg(1, 1_700_000_000_000_000_000, false, full)),
                vec![1u8, 2, 3],
            ),
            // Time going backwards, a frame far on, IPv6, no options, no payload.
            (
                FrameInput::Partial(seg(9_000_000_000, 5, true, TcpOptions::NONE)),
                vec![],
            ),
            (
                FrameInput::Segment(seg(9_000_000_001, -3, false, TcpOptions::NONE)),
                vec![0; 9000],
            ),
        ];
        let (mut enc, mut bytes) = (Encoder::default(), Vec::new());
        let mut total = 0;
        for (i, p) in &inputs {
            total += enc.write(&mut bytes, i, p).unwrap();
        }
        assert_eq!(total, bytes.len());
        // Other frames are not records.
        let other = FrameInput::EMPTY;
        assert_eq!(enc.write(&mut bytes, &other, &[]).unwrap(), 0);
        let mut dec = Decoder::new(&bytes[..]);
        let mut payload = Vec::new();
        for (i, p) in &inputs {
            let got = dec.next(&mut payload).unwrap().unwrap();
            assert_eq!(format!("{got:?}"), format!("{i:?}"));
            assert_eq!(&payload, p);
        }
        assert!(dec.next(&mut payload).unwrap().is_none());
        // Cut anywhere inside a record: an error, not a short record.
        for cut in [1, 5, 30, bytes.len() - 1] {
            let mut dec = Decoder::new(&bytes[..cut]);
            let mut r = Ok(None);
            for _ in 0..3 {
                r = dec.next(&mut payload);
                if r.is_err() {
                    break;
                }
            }
            assert!(r.is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn varints_and_zigzag_round_trip() {
        for v in [0i64, 1, -1, 63, -64, 64, i64::MAX, i64::MIN] {
            assert_eq!(unzigzag(zigzag(v)), v);
            let mut b = Vec::new();
            put_varint(&mut b, zigzag(v));
            let mut d = Decoder::new(&b[..]);
            assert_eq!(unzigzag(d.varint().unwrap()), v);
        }
    }
}
