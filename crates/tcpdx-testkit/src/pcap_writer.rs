//! Writes [`OwnedFrame`]s as pcapng or classic pcap, little-endian, for tcpdx and tshark.
//!
//! pcapng: one Section Header Block, one Interface Description Block per distinct link type
//! (in order of first use, each with `if_tsresol` = 9, nanoseconds), then one Enhanced Packet
//! Block per frame carrying `caplen` and `orig_len`. Classic pcap: one link type per file
//! (mixed link types are an `InvalidInput` error), microsecond or nanosecond magic.
//! Frame numbers in `OwnedFrame::no` are not written: readers number records themselves.

use std::io::{self, Write};

use tcpdx_wire::LinkType;

use crate::frame::OwnedFrame;

/// Snaplen advertised in file headers (Wireshark's default maximum).
const SNAPLEN: u32 = 262_144;
/// pcapng block type: Section Header Block.
const SHB: u32 = 0x0A0D_0D0A;
/// pcapng block type: Interface Description Block.
const IDB: u32 = 0x0000_0001;
/// pcapng block type: Enhanced Packet Block.
const EPB: u32 = 0x0000_0006;
/// pcapng byte-order magic.
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;
/// pcapng option code `shb_userappl`.
const OPT_SHB_USERAPPL: u16 = 4;
/// pcapng option code `if_tsresol`.
const OPT_IF_TSRESOL: u16 = 9;
/// Classic pcap magic, microsecond timestamps.
const PCAP_MAGIC_US: u32 = 0xA1B2_C3D4;
/// Classic pcap magic, nanosecond timestamps.
const PCAP_MAGIC_NS: u32 = 0xA1B2_3C4D;

/// Writes `frames` as a pcapng file (nanosecond timestamps).
pub fn write_pcapng(w: &mut impl Write, frames: &[OwnedFrame]) -> io::Result<()> {
    let mut links: Vec<LinkType> = Vec::new();
    for f in frames {
        if !links.contains(&f.link) {
            links.push(f.link);
        }
    }
    if links.is_empty() {
        links.push(LinkType::ETHERNET);
    }

    let mut shb_opts = Vec::new();
    push_option(&mut shb_opts, OPT_SHB_USERAPPL, b"tcpdx-testkit");
    let mut body = Vec::new();
    body.extend_from_slice(&BYTE_ORDER_MAGIC.to_le_bytes());
    body.extend_from_slice(&1u16.to_le_bytes());
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(&(-1i64).to_le_bytes()); // section length unknown
    body.extend_from_slice(&shb_opts);
    body.extend_from_slice(&[0; 4]); // opt_endofopt
    write_block(w, SHB, &body)?;

    for link in &links {
        let mut body = Vec::new();
        body.extend_from_slice(&link.0.to_le_bytes());
        body.extend_from_slice(&0u16.to_le_bytes());
        body.extend_from_slice(&SNAPLEN.to_le_bytes());
        push_option(&mut body, OPT_IF_TSRESOL, &[9]);
        body.extend_from_slice(&[0; 4]);
        write_block(w, IDB, &body)?;
    }

    for f in frames {
        let ns = u64::try_from(f.ts.nanos()).map_err(|_| {
            invalid(format!(
                "frame {}: negative timestamp {}",
                f.no,
                f.ts.nanos()
            ))
        })?;
        let if_id = links.iter().position(|l| *l == f.link).unwrap_or(0) as u32;
        let mut body = Vec::with_capacity(20 + f.data.len() + 3);
        body.extend_from_slice(&if_id.to_le_bytes());
        body.extend_from_slice(&((ns >> 32) as u32).to_le_bytes());
        body.extend_from_slice(&(ns as u32).to_le_bytes());
        body.extend_from_slice(&caplen(f)?.to_le_bytes());
        body.extend_from_slice(&f.orig_len.to_le_bytes());
        body.extend_from_slice(&f.data);
        pad4(&mut body);
        write_block(w, EPB, &body)?;
    }
    Ok(())
}

/// Writes `frames` as a classic pcap file; `nanos` selects the nanosecond magic.
pub fn write_pcap(w: &mut impl Write, frames: &[OwnedFrame], nanos: bool) -> io::Result<()> {
    let link = frames.first().map_or(LinkType::ETHERNET, |f| f.link);
    if let Some(f) = frames.iter().find(|f| f.link != link) {
        return Err(invalid(format!(
            "frame {} has link type {} but the file has {}: classic pcap holds one link type",
            f.no, f.link.0, link.0
        )));
    }
    let mut hdr = Vec::with_capacity(24);
    hdr.extend_from_slice(&(if nanos { PCAP_MAGIC_NS } else { PCAP_MAGIC_US }).to_le_bytes());
    hdr.extend_from_slice(&2u16.to_le_bytes());
    hdr.extend_from_slice(&4u16.to_le_bytes());
    hdr.extend_from_slice(&0i32.to_le_bytes()); // thiszone
    hdr.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
    hdr.extend_from_slice(&SNAPLEN.to_le_bytes());
    hdr.extend_from_slice(&u32::from(link.0).to_le_bytes());
    w.write_all(&hdr)?;

    for f in frames {
        let ns = f.ts.nanos();
        let secs = u32::try_from(ns.div_euclid(1_000_000_000)).map_err(|_| {
            invalid(format!(
                "frame {}: timestamp {ns} ns does not fit pcap",
                f.no
            ))
        })?;
        let sub = ns.rem_euclid(1_000_000_000) as u32;
        let frac = if nanos { sub } else { sub / 1000 };
        let mut rec = Vec::with_capacity(16);
        rec.extend_from_slice(&secs.to_le_bytes());
        rec.extend_from_slice(&frac.to_le_bytes());
        rec.extend_from_slice(&caplen(f)?.to_le_bytes());
        rec.extend_from_slice(&f.orig_len.to_le_bytes());
        w.write_all(&rec)?;
        w.write_all(&f.data)?;
    }
    Ok(())
}

/// Captured length of `f`, which must not exceed its original length.
fn caplen(f: &OwnedFrame) -> io::Result<u32> {
    let len = u32::try_from(f.data.len()).map_err(|_| invalid("frame over 4 GiB".into()))?;
    if len > f.orig_len {
        return Err(invalid(format!(
            "frame {}: {len} captured bytes exceed orig_len {}",
            f.no, f.orig_len
        )));
    }
    Ok(len)
}

/// Writes one pcapng block: type, total length, body (already padded), total length.
fn write_block(w: &mut impl Write, block_type: u32, body: &[u8]) -> io::Result<()> {
    debug_assert!(body.len().is_multiple_of(4));
    let total = (body.len() + 12) as u32;
    w.write_all(&block_type.to_le_bytes())?;
    w.write_all(&total.to_le_bytes())?;
    w.write_all(body)?;
    w.write_all(&total.to_le_bytes())
}

/// Appends one pcapng option (code, length, value padded to 4 bytes).
fn push_option(out: &mut Vec<u8>, code: u16, value: &[u8]) {
    out.extend_from_slice(&code.to_le_bytes());
    out.extend_from_slice(&(value.len() as u16).to_le_bytes());
    out.extend_from_slice(value);
    pad4(out);
}

/// Pads with zeros to a multiple of 4 bytes.
fn pad4(out: &mut Vec<u8>) {
    while !out.len().is_multiple_of(4) {
        out.push(0);
    }
}

/// An `InvalidInput` I/O error with a message.
fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builder::{FrameSpec, PSH};
    use pcap_parser::pcapng::Block;
    use pcap_parser::{PcapBlockOwned, PcapCapture, PcapNGSlice};
    use tcpdx_wire::{FrameNo, Timestamp};

    fn frames() -> Vec<OwnedFrame> {
        (0..3u32)
            .map(|i| {
                FrameSpec {
                    seq: 1000 + 100 * i,
                    payload_len: 100 + i, // odd lengths exercise EPB padding
                    flags: crate::builder::ACK | PSH,
                    snaplen: (i == 2).then_some(60),
                    ..FrameSpec::TEMPL
                }
                .to_frame(
                    FrameNo(u64::from(i) + 1),
                    Timestamp(1_700_000_000_123_456_789 + i64::from(i) * 1_500),
                )
            })
            .collect()
    }

    #[test]
    fn pcapng_reads_back_with_pcap_parser() {
        let frames = frames();
        let mut buf = Vec::new();
        write_pcapng(&mut buf, &frames).unwrap();
        let mut got = Vec::new();
        let mut resol = 0;
        for block in PcapNGSlice::from_slice(&buf).unwrap() {
            match block.unwrap() {
                PcapBlockOwned::NG(Block::SectionHeader(_)) => {}
                PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                    assert_eq!(idb.linktype.0, 1);
                    resol = idb.ts_resolution().unwrap();
                }
                PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                    let ns = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
                    // pcap-parser's `data` includes the block's padding.
                    let data = epb.data[..epb.caplen as usize].to_vec();
                    got.push((ns as i64, epb.origlen, epb.caplen, data));
                }
                _ => panic!("unexpected block type"),
            }
        }
        assert_eq!(resol, 1_000_000_000);
        let want: Vec<_> = frames
            .iter()
            .map(|f| (f.ts.0, f.orig_len, f.data.len() as u32, f.data.clone()))
            .collect();
        assert_eq!(got, want);
        assert_eq!(got[2].2, 60);
    }

    #[test]
    fn pcap_reads_back_with_pcap_parser() {
        let frames = frames();
        for nanos in [false, true] {
            let mut buf = Vec::new();
            write_pcap(&mut buf, &frames, nanos).unwrap();
            let cap = PcapCapture::from_file(&buf).unwrap();
            assert_eq!(cap.header.is_nanosecond_precision(), nanos);
            assert_eq!(cap.header.network.0, 1);
            assert_eq!(cap.blocks.len(), 3);
            for (b, f) in cap.blocks.iter().zip(&frames) {
                let sub = (f.ts.0 % 1_000_000_000) as u32;
                assert_eq!(b.ts_sec as i64, f.ts.0 / 1_000_000_000);
                assert_eq!(b.ts_usec, if nanos { sub } else { sub / 1000 });
                assert_eq!(b.origlen, f.orig_len);
                assert_eq!(b.data, &f.data[..]);
            }
        }
    }

    #[test]
    fn pcap_refuses_mixed_link_types() {
        let mut frames = frames();
        frames[1].link = LinkType::RAW;
        let err = write_pcap(&mut Vec::new(), &frames, false).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        // pcapng takes them, with a second interface.
        let mut buf = Vec::new();
        write_pcapng(&mut buf, &frames).unwrap();
        let idbs = PcapNGSlice::from_slice(&buf)
            .unwrap()
            .filter(|b| matches!(b, Ok(PcapBlockOwned::NG(Block::InterfaceDescription(_)))))
            .count();
        assert_eq!(idbs, 2);
    }
}
