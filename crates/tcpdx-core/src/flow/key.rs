//! Flow keys (direction-independent 4-tuples) and directions.

use std::net::IpAddr;

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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowKey {
    /// The lower endpoint.
    pub lo: Endpoint,
    /// The higher endpoint.
    pub hi: Endpoint,
}

impl FlowKey {
    /// Builds the key of a segment from `src` to `dst`; also returns whether src is `lo`.
    pub fn new(src: Endpoint, dst: Endpoint) -> (FlowKey, bool) {
        if src <= dst {
            (FlowKey { lo: src, hi: dst }, true)
        } else {
            (FlowKey { lo: dst, hi: src }, false)
        }
    }
}

impl Endpoint {
    /// The address and port folded into one word (equal endpoints fold equal).
    #[inline]
    fn fold(&self) -> u64 {
        let a = match self.addr {
            IpAddr::V4(a) => u64::from(a.to_bits()),
            IpAddr::V6(a) => {
                let b = a.to_bits();
                // Mixed so that IPv4 and IPv6 keys rarely share a word.
                (b as u64) ^ ((b >> 64) as u64).rotate_left(29) ^ 0x9e37_79b9_7f4a_7c15
            }
        };
        a.rotate_left(16) ^ u64::from(self.port)
    }
}

/// One word per key instead of the derived field-by-field hash (an enum tag, a length-
/// prefixed byte array and a port per endpoint): flow lookup is on every segment's path.
impl std::hash::Hash for FlowKey {
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.lo.fold() ^ self.hi.fold().rotate_left(32));
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
