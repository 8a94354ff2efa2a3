//! Property tests of `decode`: no input panics, the captured payload never exceeds the
//! segment length, and the snaplen never changes the segment length.

use proptest::prelude::*;
use tcpdx_wire::{LinkType, decode};

/// Every link type the decoder knows, plus a few it does not.
const LINKS: &[u16] = &[
    0, 1, 9, 10, 12, 14, 50, 101, 104, 105, 108, 113, 127, 129, 192, 228, 229, 239, 276, 7, 147,
];

/// Seed frames (Ethernet) that reach TCP through different paths; mutations of these
/// explore far more of the decoder than uniform random bytes.
fn seeds() -> Vec<Vec<u8>> {
    let tcp = |payload: usize| {
        let mut t = vec![
            0x30, 0x39, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 2, 0x80, 0x18, 0x02, 0x00, 0, 0, 0, 0,
            0x01, 0x01, 0x05, 0x0a, 0, 0, 0, 1, 0, 0, 0, 2, 0x02, 0x04, 0x05, 0xb4,
        ];
        t.resize(t.len() + payload, 0x61);
        t
    };
    let ipv4 = |proto: u8, p: &[u8]| {
        let mut h = vec![
            0x45, 0, 0, 0, 0, 1, 0, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        h[2..4].copy_from_slice(&(20 + p.len() as u16).to_be_bytes());
        h.extend_from_slice(p);
        h
    };
    let ipv6 = |next: u8, p: &[u8]| {
        let mut h = vec![0x60, 0, 0, 0, 0, 0, next, 64];
        h[4..6].copy_from_slice(&(p.len() as u16).to_be_bytes());
        h.extend_from_slice(&[0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        h.extend_from_slice(&[0x20, 1, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        h.extend_from_slice(p);
        h
    };
    let eth = |etype: u16, p: &[u8]| {
        let mut f = vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
        f.extend_from_slice(&etype.to_be_bytes());
        f.extend_from_slice(p);
        f
    };
    let udp = |port: u16, p: &[u8]| {
        let mut u = vec![0xc0, 0x00];
        u.extend_from_slice(&port.to_be_bytes());
        u.extend_from_slice(&(8 + p.len() as u16).to_be_bytes());
        u.extend_from_slice(&[0, 0]);
        u.extend_from_slice(p);
        u
    };
    let inner = eth(0x0800, &ipv4(6, &tcp(30)));
    let ext = [
        [60u8, 0, 1, 4, 0, 0, 0, 0],
        [44, 0, 0, 0, 0, 0, 0, 1],
        [6, 0, 0, 0, 0, 0, 0, 0],
    ]
    .concat();
    let hop_ext = [&[0u8, 0, 1, 4, 0, 0, 0, 0][..], &ext].concat();
    vec![
        inner.clone(),
        eth(0x86dd, &ipv6(0, &[&hop_ext[..], &tcp(5)].concat())),
        eth(
            0x8100,
            &[&[0, 1, 0x88, 0xa8, 0, 2, 0x08, 0x00][..], &ipv4(6, &tcp(0))].concat(),
        ),
        eth(
            0x0800,
            &ipv4(
                17,
                &udp(4789, &[&[8, 0, 0, 0, 0, 0, 1, 0][..], &inner].concat()),
            ),
        ),
        eth(
            0x0800,
            &ipv4(
                17,
                &udp(
                    6081,
                    &[&[1, 0, 0x65, 0x58, 0, 0, 1, 0, 0, 0, 0, 0][..], &inner].concat(),
                ),
            ),
        ),
        eth(
            0x0800,
            &ipv4(
                17,
                &udp(
                    2152,
                    &[
                        &[0x34, 0xff, 0, 67, 0, 0, 0, 1, 0, 0, 0, 0x85, 1, 0, 1, 0][..], // length 8 + 59
                        &ipv4(6, &tcp(3)),
                    ]
                    .concat(),
                ),
            ),
        ),
        eth(
            0x0800,
            &ipv4(
                47,
                &[
                    &[0xb0, 0, 0x65, 0x58, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2][..],
                    &inner,
                ]
                .concat(),
            ),
        ),
        eth(0x8847, &[&[0, 1, 1, 64][..], &ipv6(6, &tcp(7))].concat()),
        eth(
            0x8864,
            &[&[0x11, 0, 0, 1, 0, 0x58, 0x00, 0x21][..], &ipv4(6, &tcp(2))].concat(),
        ),
        eth(0x0800, &ipv4(41, &ipv6(6, &tcp(1)))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Uniformly random bytes under every link type.
    #[test]
    fn random_bytes_never_panic(
        link in prop::sample::select(LINKS),
        data in prop::collection::vec(any::<u8>(), 0..400),
        extra in 0u32..3000,
    ) {
        let orig_len = data.len() as u32 + extra;
        let v = decode(LinkType(link), &data, orig_len);
        if let Some(t) = v.tcp {
            prop_assert!(t.payload.len() as u64 <= u64::from(t.payload_len));
            prop_assert!((20..=60).contains(&t.header_len));
            prop_assert!(t.payload_len <= orig_len);
            prop_assert!(v.ip.is_some());
        }
    }

    /// Mutated real-looking frames, cut at a random snaplen: never a panic, and when the
    /// full and the cut frame both have TCP, the segment length is the same.
    #[test]
    fn mutated_frames_and_snaplen(
        seed in prop::sample::select(seeds()),
        flips in prop::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        as_link in prop::sample::select(&[1u16, 101, 113, 276][..]),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut f = seed;
        for (at, value) in flips {
            let i = at % f.len();
            f[i] = value;
        }
        // Re-frame for other links: raw IP drops the Ethernet header, SLL/SLL2 replace it.
        let link = LinkType(as_link);
        let frame: Vec<u8> = match as_link {
            101 => f[14..].to_vec(),
            113 => [&[0, 0, 0, 1, 0, 6, 0, 1, 2, 3, 4, 5, 0, 0][..], &f[12..]].concat(),
            276 => [&f[12..14], &[0, 0, 0, 0, 0, 1, 0, 1, 0, 6, 0, 1, 2, 3, 4, 5, 0, 0][..], &f[14..]].concat(),
            _ => f,
        };
        let orig_len = frame.len() as u32;
        let whole = decode(link, &frame, orig_len);
        let snap = cut.index(frame.len() + 1);
        let part = decode(link, &frame[..snap], orig_len);
        for v in [&whole, &part] {
            if let Some(t) = v.tcp {
                prop_assert!(t.payload.len() as u64 <= u64::from(t.payload_len));
            }
        }
        if let (Some(a), Some(b)) = (whole.tcp, part.tcp) {
            prop_assert_eq!(a.payload_len, b.payload_len);
            prop_assert!(a.payload.starts_with(b.payload));
        }
        if part.tcp.is_some() {
            prop_assert!(whole.tcp.is_some(), "a cut frame found TCP the whole one did not");
        }
    }

    /// A well-formed Ethernet/IPv4/TCP frame with random sizes, padding and snaplen: the
    /// segment length is always the one the IP header implies.
    #[test]
    fn segment_length_comes_from_ip(
        payload_len in 0usize..3000,
        option_words in 0usize..=10,
        padding in 0usize..64,
        snap in 0usize..4000,
        tso in any::<bool>(),
    ) {
        let hlen = 20 + option_words * 4;
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&[0x08, 0x00]);
        let total = 20 + hlen + payload_len;
        let total_field = if tso { 0 } else { total as u16 };
        f.extend_from_slice(&[0x45, 0]);
        f.extend_from_slice(&total_field.to_be_bytes());
        f.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
        f.extend_from_slice(&[0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, (hlen as u8 / 4) << 4, 0x10, 1, 0, 0, 0, 0, 0]);
        f.resize(f.len() + option_words * 4, 1); // NOPs
        f.resize(f.len() + payload_len, 0x55);
        if !tso {
            f.resize(f.len() + padding, 0);
        }
        let orig_len = f.len() as u32;
        let cut = snap.min(f.len());
        let v = decode(LinkType::ETHERNET, &f[..cut], orig_len);
        if cut >= 34 + hlen {
            let t = v.tcp.expect("tcp when the header was captured");
            prop_assert_eq!(t.payload_len as usize, payload_len);
            prop_assert_eq!(t.payload.len(), (cut - 34 - hlen).min(payload_len));
            prop_assert!(!t.options.malformed);
        } else {
            prop_assert!(v.tcp.is_none());
            prop_assert!(v.stop.is_some());
        }
    }
}

#[test]
fn seeds_reach_tcp() {
    for (i, f) in seeds().iter().enumerate() {
        let v = decode(LinkType::ETHERNET, f, f.len() as u32);
        assert!(v.tcp.is_some(), "seed {i}: {:?}", v.stop);
    }
}
