//! Flow keys (direction-independent 4-tuples) and directions.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// One end of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    /// IP address.
    pub addr: IpAddr,
    /// TCP port.
    pub port: u16,
}

/// A connection's 4-tuple with the endpoints in canonical (sorted) order, so both
/// directions of a connection map to the same key.
///
/// Stored packed (addresses as integers, ports in one word) rather than as two
/// [`Endpoint`]s: building, hashing and comparing it is on every segment's path, and
/// `IpAddr` enums made each of those a chain of tag matches and byte-array compares.
#[derive(Clone, Copy, Debug)]
pub struct FlowKey {
    /// Addresses of the lower and the higher endpoint (IPv4 in the low 32 bits).
    addrs: [u128; 2],
    /// Lower endpoint's port in the high half, higher endpoint's in the low half.
    ports: u32,
    /// Which of the two addresses are IPv6 (bit 0: lower, bit 1: higher).
    v6: u8,
}

/// Compared as integers: the derived comparison (an array compare) read each address with
/// one 16-byte load just after the key was built by 8-byte stores, which the CPU cannot
/// forward (the stall was half of the flow lookup's time).
impl PartialEq for FlowKey {
    #[inline]
    fn eq(&self, o: &Self) -> bool {
        let ([a0, a1], [b0, b1]) = (self.addrs, o.addrs);
        (a0 ^ b0) | (a1 ^ b1) == 0 && self.ports == o.ports && self.v6 == o.v6
    }
}

impl Eq for FlowKey {}

/// An address as an integer, and whether it is IPv6. Within one family the integer order
/// is the address order.
#[inline]
fn addr_bits(a: IpAddr) -> (u128, bool) {
    match a {
        IpAddr::V4(a) => (u128::from(a.to_bits()), false),
        IpAddr::V6(a) => (a.to_bits(), true),
    }
}

#[inline]
fn endpoint(bits: u128, v6: bool, port: u16) -> Endpoint {
    let addr = if v6 {
        IpAddr::V6(Ipv6Addr::from_bits(bits))
    } else {
        // An IPv4 address was stored from 32 bits, so this never truncates.
        IpAddr::V4(Ipv4Addr::from_bits(bits as u32))
    };
    Endpoint { addr, port }
}

impl FlowKey {
    /// Builds the key of a segment from `src` to `dst`; also returns whether src is `lo`.
    /// Endpoints sort as [`Endpoint`]'s `Ord` does (IPv4 before IPv6, then address, then
    /// port).
    #[inline]
    pub fn new(src: Endpoint, dst: Endpoint) -> (FlowKey, bool) {
        let (sa, s6) = addr_bits(src.addr);
        let (da, d6) = addr_bits(dst.addr);
        let src_lo = (s6, sa, src.port) <= (d6, da, dst.port);
        let key = if src_lo {
            FlowKey {
                addrs: [sa, da],
                ports: u32::from(src.port) << 16 | u32::from(dst.port),
                v6: u8::from(s6) | u8::from(d6) << 1,
            }
        } else {
            FlowKey {
                addrs: [da, sa],
                ports: u32::from(dst.port) << 16 | u32::from(src.port),
                v6: u8::from(d6) | u8::from(s6) << 1,
            }
        };
        (key, src_lo)
    }

    /// The lower endpoint.
    pub fn lo(&self) -> Endpoint {
        let [lo, _] = self.addrs;
        endpoint(lo, self.v6 & 1 != 0, (self.ports >> 16) as u16)
    }

    /// The higher endpoint.
    pub fn hi(&self) -> Endpoint {
        let [_, hi] = self.addrs;
        endpoint(hi, self.v6 & 2 != 0, self.ports as u16)
    }
}

/// An address folded into one word (IPv6 mixed so that IPv4 and IPv6 keys rarely share
/// a word).
#[inline]
fn fold(a: u128) -> u64 {
    (a as u64) ^ ((a >> 64) as u64).rotate_left(29)
}

impl FlowKey {
    /// The key folded into one word (equal keys fold equal; not mixed: the low bits are
    /// the ports, which are what differ most between the connections of one host pair).
    #[inline]
    pub fn word(&self) -> u64 {
        let [lo, hi] = self.addrs;
        let lo = fold(lo).rotate_left(16) ^ u64::from(self.ports >> 16);
        let hi = fold(hi).rotate_left(16) ^ u64::from(self.ports & 0xffff);
        lo ^ hi.rotate_left(32) ^ u64::from(self.v6) << 8
    }

    /// A word equal for both directions of the connection between `a` and `b`, without
    /// building its key (to pick a connection's thread per frame; not mixed, not equal to
    /// [`Self::word`]): the sum of the endpoints' folded words, which needs no sorting.
    #[inline]
    pub fn symmetric_word(a: Endpoint, b: Endpoint) -> u64 {
        let word = |e: Endpoint| fold(addr_bits(e.addr).0).rotate_left(16) ^ u64::from(e.port);
        word(a).wrapping_add(word(b))
    }
}

/// One word per key ([`FlowKey::word`]): Fx multiplies it once, and the bucket index (low
/// bits) sees the ports.
impl std::hash::Hash for FlowKey {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.word());
    }
}

/// Direction of a segment within its connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Sent by the client (the SYN sender, or the first sender seen when the SYN is missing).
    ClientToServer = 0,
    /// Sent by the server.
    ServerToClient = 1,
}

impl Dir {
    /// The other direction.
    pub const fn rev(self) -> Dir {
        match self {
            Dir::ClientToServer => Dir::ServerToClient,
            Dir::ServerToClient => Dir::ClientToServer,
        }
    }
    /// Index for `[T; 2]` per-direction arrays.
    pub const fn idx(self) -> usize {
        self as usize
    }
    /// This direction's element of a per-direction pair (no bounds check to fail).
    #[inline]
    pub fn of<T>(self, pair: &[T; 2]) -> &T {
        let [c2s, s2c] = pair;
        match self {
            Dir::ClientToServer => c2s,
            Dir::ServerToClient => s2c,
        }
    }
    /// Mutable [`Dir::of`].
    #[inline]
    pub fn of_mut<T>(self, pair: &mut [T; 2]) -> &mut T {
        let [c2s, s2c] = pair;
        match self {
            Dir::ClientToServer => c2s,
            Dir::ServerToClient => s2c,
        }
    }
    /// This direction's element and the other one's.
    #[inline]
    pub fn split_mut<T>(self, pair: &mut [T; 2]) -> (&mut T, &mut T) {
        let [c2s, s2c] = pair;
        match self {
            Dir::ClientToServer => (c2s, s2c),
            Dir::ServerToClient => (s2c, c2s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eps() -> Vec<Endpoint> {
        let addrs: Vec<IpAddr> = [
            "10.0.0.1",
            "10.0.0.2",
            "192.168.1.1",
            "0.0.0.0",
            "255.255.255.255",
            "::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            "ffff::ffff",
        ]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
        let mut v = Vec::new();
        for a in addrs {
            for port in [0, 1, 80, 445, 65535] {
                v.push(Endpoint { addr: a, port });
            }
        }
        v
    }

    #[test]
    fn packed_key_sorts_and_round_trips_like_endpoints() {
        let eps = eps();
        for &a in &eps {
            for &b in &eps {
                let (k, a_lo) = FlowKey::new(a, b);
                let (k2, b_lo) = FlowKey::new(b, a);
                assert_eq!(k, k2, "{a:?} {b:?}");
                assert_eq!(a_lo, a <= b, "{a:?} {b:?}");
                assert_eq!(b_lo, b <= a || a == b, "{a:?} {b:?}");
                assert_eq!((k.lo(), k.hi()), (a.min(b), a.max(b)));
            }
        }
    }

    #[test]
    fn the_symmetric_word_is_the_same_both_ways() {
        let eps = eps();
        for &a in &eps {
            for &b in &eps {
                assert_eq!(FlowKey::symmetric_word(a, b), FlowKey::symmetric_word(b, a));
            }
        }
    }

    #[test]
    fn packed_keys_differ_when_tuples_differ() {
        let eps = eps();
        let mut seen = std::collections::HashMap::new();
        for &a in &eps {
            for &b in &eps {
                let (k, _) = FlowKey::new(a, b);
                let pair = (a.min(b), a.max(b));
                assert_eq!(*seen.entry(k).or_insert(pair), pair);
            }
        }
    }
}
