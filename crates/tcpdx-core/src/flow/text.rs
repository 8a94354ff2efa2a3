//! Endpoints as text, without the formatting machinery: `format!("{ip}:{port}")` took about
//! 1,600 instructions an endpoint (two for every connection a diagnosis sees), a table of
//! octets a few dozen. The event rows and tables format IPv4 addresses the same way.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};

use super::Endpoint;

/// Every IPv4 octet as up to three digits followed by a dot, and the digit count.
const OCTETS: [([u8; 4], u8); 256] = octet_table();

// Evaluated at compile time, with `n < 256`: an index out of range would not compile.
#[allow(clippy::indexing_slicing)]
const fn octet_table() -> [([u8; 4], u8); 256] {
    let mut t = [([0u8; 4], 0u8); 256];
    let mut n = 0;
    while n < 256 {
        let (h, te, o) = ((n / 100) as u8, (n / 10 % 10) as u8, (n % 10) as u8);
        t[n] = if n >= 100 {
            ([b'0' + h, b'0' + te, b'0' + o, b'.'], 3)
        } else if n >= 10 {
            ([b'0' + te, b'0' + o, b'.', 0], 2)
        } else {
            ([b'0' + o, b'.', 0, 0], 1)
        };
        n += 1;
    }
    t
}

/// Writes the text of `a` at the start of `out` (15 bytes at most; 16 are written, the
/// last octet's dot is dropped past the text) and returns its length. No allocation: for
/// rows and tables of formatted addresses.
pub fn ipv4_text(a: Ipv4Addr, out: &mut [u8]) -> usize {
    let mut at = 0;
    for o in a.octets() {
        // Every octet has an entry (the fallback never applies).
        let (text, n) = OCTETS
            .get(usize::from(o))
            .copied()
            .unwrap_or(([b'.'; 4], 0));
        // Each octet's dot is overwritten by the next octet; at most 3 x 4 bytes come
        // before the last one, so 16 bytes of `out` suffice.
        if let Some(dst) = out.get_mut(at..at + 4) {
            dst.copy_from_slice(&text);
        }
        at += usize::from(n) + 1;
    }
    at - 1
}

impl Endpoint {
    /// `address:port`, an IPv6 address in brackets (`[::1]:445`), as `SocketAddr` writes it.
    pub fn text(&self) -> String {
        let mut s = String::with_capacity(22);
        match self.addr {
            IpAddr::V4(a) => {
                let mut buf = [0u8; 16];
                let n = ipv4_text(a, &mut buf);
                // Digits and dots only.
                s.extend(buf.iter().take(n).map(|&b| char::from(b)));
            }
            IpAddr::V6(a) => {
                let _ = write!(s, "[{a}]");
            }
        }
        // An integer's `Display` is quick; the address's was the slow part.
        let _ = write!(s, ":{}", self.port);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv6Addr, SocketAddr};

    #[test]
    fn ipv4_text_like_display() {
        for a in [
            [0, 0, 0, 0],
            [255, 255, 255, 255],
            [10, 1, 2, 3],
            [192, 168, 100, 9],
            [1, 22, 255, 0],
        ] {
            let a = Ipv4Addr::from(a);
            let mut out = [0xAA; 16];
            let n = ipv4_text(a, &mut out);
            assert_eq!(&out[..n], a.to_string().as_bytes());
        }
    }

    #[test]
    fn endpoint_text_like_socket_addr() {
        let addrs = [
            IpAddr::V4(Ipv4Addr::new(10, 1, 4, 1)),
            IpAddr::V4(Ipv4Addr::new(255, 255, 255, 255)),
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
            IpAddr::V6("fe80::1:2".parse().unwrap()),
        ];
        for addr in addrs {
            for port in [0, 7, 10, 99, 445, 2049, 10000, 65535] {
                let e = Endpoint { addr, port };
                assert_eq!(e.text(), SocketAddr::new(addr, port).to_string());
            }
        }
    }
}
