//! Minimal IPv4/TCP header view used by the relay's hot path (no allocation).

/// Fields of an IPv4 TCP packet the relay decides on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpView {
    /// Source address (host order).
    pub src: u32,
    /// Destination address (host order).
    pub dst: u32,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgement number.
    pub ack: u32,
    /// TCP flags byte.
    pub flags: u8,
    /// Payload length (from the IP total length).
    pub payload: u32,
}

/// Parses an IPv4 packet carrying TCP; None for anything else or truncated input.
pub fn parse(p: &[u8]) -> Option<TcpView> {
    if p.len() < 40 || p[0] >> 4 != 4 || p[9] != 6 {
        return None;
    }
    let ihl = usize::from(p[0] & 15) * 4;
    let tot = usize::from(u16::from_be_bytes([p[2], p[3]]));
    if ihl < 20 || p.len() < ihl + 20 || tot < ihl + 20 {
        return None;
    }
    let t = &p[ihl..];
    let thl = usize::from(t[12] >> 4) * 4;
    let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    Some(TcpView {
        src: be32(&p[12..16]),
        dst: be32(&p[16..20]),
        sport: u16::from_be_bytes([t[0], t[1]]),
        dport: u16::from_be_bytes([t[2], t[3]]),
        seq: be32(&t[4..8]),
        ack: be32(&t[8..12]),
        flags: t[13],
        payload: tot.saturating_sub(ihl + thl) as u32,
    })
}

/// Length of the `virtio_net_hdr` before every packet on a TUN opened with IFF_VNET_HDR.
pub const VNET_HDR_LEN: usize = 10;
/// `virtio_net_hdr.gso_type` of a TCP over IPv4 super-packet (ECN bit masked off).
pub const VNET_GSO_TCPV4: u8 = 1;

/// The fields of a `virtio_net_hdr` the relay needs (little endian on the wire, as the
/// kernel's TUN uses on little-endian hosts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Vnet {
    /// Flags (1 = checksum needs completing from `csum_start`).
    pub flags: u8,
    /// GSO type (0 = none, 1 = TCPv4, 4 = TCPv6, 0x80 = ECN bit).
    pub gso_type: u8,
    /// Payload bytes per segment of a GSO super-packet.
    pub gso_size: u16,
}

/// Reads the `virtio_net_hdr` at the start of `h` (None if `h` is too short).
pub fn vnet(h: &[u8]) -> Option<Vnet> {
    (h.len() >= VNET_HDR_LEN).then(|| Vnet {
        flags: h[0],
        gso_type: h[1],
        gso_size: u16::from_le_bytes([h[4], h[5]]),
    })
}

/// Number of MTU-sized wire segments a packet stands for: 1 unless it is a TCPv4 GSO
/// super-packet carrying more than one `gso_size` of payload.
pub fn wire_segments(v: Vnet, t: Option<&TcpView>) -> u32 {
    match t {
        Some(t) if v.gso_type & 0x7f == VNET_GSO_TCPV4 && v.gso_size > 0 && t.payload > 0 => {
            t.payload.div_ceil(u32::from(v.gso_size))
        }
        _ => 1,
    }
}

/// One's-complement sum of `b` (big-endian 16-bit words) added to `acc`, not folded.
fn csum_add(mut acc: u64, b: &[u8]) -> u64 {
    let mut it = b.chunks_exact(2);
    for w in &mut it {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [x] = it.remainder() {
        acc += u64::from(*x) << 8;
    }
    acc
}

fn csum_fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// Writes segment `i` of the TCPv4 GSO super-packet `p` (no vnet header) into `out` as a
/// plain packet with complete IP and TCP checksums, exactly as the kernel's software GSO
/// would cut it (IP id + i, seq + i * gso_size, CWR only on the first segment, FIN/PSH
/// only on the last). Returns its length, or None if `i` is out of range or `p` is not a
/// TCPv4 packet. `out` must hold the headers plus `gso_size` bytes.
pub fn gso_segment(p: &[u8], gso_size: usize, i: usize, out: &mut [u8]) -> Option<usize> {
    let t = parse(p)?;
    let ihl = usize::from(p[0] & 15) * 4;
    let hdr = ihl + usize::from(p[ihl + 12] >> 4) * 4;
    if gso_size == 0 || hdr > p.len() {
        return None;
    }
    let payload = p.len() - hdr;
    let start = i.checked_mul(gso_size).filter(|&s| s < payload)?;
    let len = gso_size.min(payload - start);
    let last = start + len == payload;
    let seg = out.get_mut(..hdr + len)?;
    seg[..hdr].copy_from_slice(&p[..hdr]);
    seg[hdr..].copy_from_slice(&p[hdr + start..hdr + start + len]);
    let tot = (hdr + len) as u16;
    seg[2..4].copy_from_slice(&tot.to_be_bytes());
    let id = u16::from_be_bytes([p[4], p[5]]).wrapping_add(i as u16);
    seg[4..6].copy_from_slice(&id.to_be_bytes());
    seg[10..12].fill(0);
    let ipc = csum_fold(csum_add(0, &seg[..ihl]));
    seg[10..12].copy_from_slice(&ipc.to_be_bytes());
    let tcp = &mut seg[ihl..];
    tcp[4..8].copy_from_slice(&t.seq.wrapping_add(start as u32).to_be_bytes());
    if i > 0 {
        tcp[13] &= !0x80; // CWR
    }
    if !last {
        tcp[13] &= !0x09; // FIN, PSH
    }
    tcp[16..18].fill(0);
    let tcp_len = (hdr - ihl + len) as u64;
    let pseudo = csum_add(0, &p[12..20]) + 6 + tcp_len;
    let c = csum_fold(csum_add(pseudo, tcp));
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
    Some(hdr + len)
}

/// Whether the IP header checksum and the TCP checksum of plain packet `p` are correct.
#[cfg(test)]
pub(crate) fn checksums_ok(p: &[u8]) -> bool {
    let ihl = usize::from(p[0] & 15) * 4;
    let tot = usize::from(u16::from_be_bytes([p[2], p[3]]));
    let pseudo = csum_add(0, &p[12..20]) + 6 + (tot - ihl) as u64;
    csum_fold(csum_add(0, &p[..ihl])) == 0 && csum_fold(csum_add(pseudo, &p[ihl..tot])) == 0
}

/// Destination address of any IPv4 packet (host order), if it is one.
pub fn ipv4_dst(p: &[u8]) -> Option<u32> {
    (p.len() >= 20 && p[0] >> 4 == 4).then(|| u32::from_be_bytes([p[16], p[17], p[18], p[19]]))
}

#[cfg(test)]
pub(crate) fn build_tcp(
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    seq: u32,
    payload: usize,
) -> Vec<u8> {
    let tot = 20 + 32 + payload;
    let mut p = vec![0u8; tot];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(tot as u16).to_be_bytes());
    p[8] = 64;
    p[9] = 6;
    p[12..16].copy_from_slice(&src);
    p[16..20].copy_from_slice(&dst);
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&dport.to_be_bytes());
    p[24..28].copy_from_slice(&seq.to_be_bytes());
    p[32] = 8 << 4;
    p[33] = 0x10;
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gso_super_packet_is_cut_like_the_kernel() {
        let mut p = build_tcp([10, 1, 1, 2], [10, 1, 2, 2], 40000, 5001, 1000, 3000);
        p[4..6].copy_from_slice(&0xfffeu16.to_be_bytes());
        p[33] = 0x10 | 0x80 | 0x08 | 0x01; // ACK CWR PSH FIN
        for (i, b) in p[52..].iter_mut().enumerate() {
            *b = i as u8;
        }
        let t = parse(&p).unwrap();
        let v = Vnet {
            flags: 1,
            gso_type: VNET_GSO_TCPV4,
            gso_size: 1448,
        };
        assert_eq!(wire_segments(v, Some(&t)), 3);
        assert_eq!(wire_segments(Vnet::default(), Some(&t)), 1);
        let mut out = [0u8; 1600];
        let mut payload = Vec::new();
        for i in 0..3 {
            let n = gso_segment(&p, 1448, i, &mut out).unwrap();
            let s = &out[..n];
            assert!(checksums_ok(s), "segment {i}");
            let st = parse(s).unwrap();
            assert_eq!(st.seq, 1000 + 1448 * i as u32);
            assert_eq!(st.payload, [1448, 1448, 104][i]);
            assert_eq!(
                u16::from_be_bytes([s[4], s[5]]),
                0xfffeu16.wrapping_add(i as u16)
            );
            assert_eq!(st.flags, [0x90, 0x10, 0x19][i], "segment {i}");
            payload.extend_from_slice(&s[52..]);
        }
        assert_eq!(payload, &p[52..]);
        assert!(gso_segment(&p, 1448, 3, &mut out).is_none());
        assert!(gso_segment(&p, 1448, 0, &mut out[..100]).is_none());
    }

    #[test]
    fn parses_data_segment() {
        let p = build_tcp([10, 1, 1, 2], [10, 1, 2, 2], 40000, 5001, 77, 1448);
        let v = parse(&p).unwrap();
        assert_eq!(
            (v.sport, v.dport, v.seq, v.payload),
            (40000, 5001, 77, 1448)
        );
        assert_eq!(v.dst, u32::from_be_bytes([10, 1, 2, 2]));
        assert!(parse(&p[..30]).is_none());
    }
}
