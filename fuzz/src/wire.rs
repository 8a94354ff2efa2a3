//! Target `wire`: any bytes as one frame of any supported link type.
//!
//! Input: a selector byte (index into [`LINKS`], modulo its length), the on-the-wire length
//! as 4 little-endian bytes, then the frame's captured bytes.
//!
//! Checked: no panic; the TCP payload lies inside the frame and is no longer than `tcp.len`;
//! header lengths are possible ones; offsets (IP header, stop) lie inside the frame.

use tcpdx_core::Segment;
use tcpdx_wire::{FrameNo, LinkType, Timestamp, decode};

/// Link types the decoder walks, plus one it does not (147, a user DLT).
pub const LINKS: &[u16] = &[
    0, 1, 9, 10, 12, 14, 50, 101, 104, 105, 108, 113, 127, 129, 192, 228, 229, 239, 276, 147,
];

/// Header of a `wire` input: selector byte and on-the-wire length.
pub const HEADER_LEN: usize = 5;

/// Input encoding for a frame of `link` (None if the decoder does not walk it).
pub fn encode(link: u16, orig_len: u32, frame: &[u8]) -> Option<Vec<u8>> {
    let sel = LINKS.iter().position(|&l| l == link)?;
    let mut v = Vec::with_capacity(frame.len() + HEADER_LEN);
    v.push(u8::try_from(sel).ok()?);
    v.extend_from_slice(&orig_len.to_le_bytes());
    v.extend_from_slice(frame);
    Some(v)
}

/// Runs one input.
pub fn run(data: &[u8]) {
    let Some((head, frame)) = data.split_first_chunk::<HEADER_LEN>() else {
        return;
    };
    let link = LINKS[usize::from(head[0]) % LINKS.len()];
    let orig_len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]);
    let view = decode(LinkType(link), frame, orig_len);
    let range = frame.as_ptr_range();
    if let Some(ip) = view.ip {
        assert!(usize::from(ip.offset) <= frame.len(), "ip offset inside");
    }
    if let Some(stop) = view.stop
        && frame.len() <= usize::from(u16::MAX)
    {
        assert!(
            usize::from(stop.offset) <= frame.len(),
            "stop inside: {stop}"
        );
    }
    if let Some(tcp) = view.tcp {
        assert!(view.ip.is_some(), "tcp without ip");
        assert!((20..=60).contains(&tcp.header_len), "tcp header length");
        assert!(tcp.payload.len() as u64 <= u64::from(tcp.payload_len));
        let p = tcp.payload.as_ptr_range();
        assert!(
            tcp.payload.is_empty() || (range.start <= p.start && p.end <= range.end),
            "payload inside the frame"
        );
        assert!(usize::from(tcp.options.sack_count) <= tcp.options.sack.len());
        assert!(view.partial_tcp.is_none(), "either full or partial TCP");
    }
    let _ = Segment::from_view(FrameNo(1), Timestamp(0), &view);
}
