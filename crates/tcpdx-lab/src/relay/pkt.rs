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
