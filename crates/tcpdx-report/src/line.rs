//! A fixed-capacity line builder for per-packet rows.
//!
//! Hand-written rather than `Vec::extend_from_slice` + itoa: every few-byte field then became
//! a libc `memcpy` call, 18% of `tcpdx events` time. Here digits and short strings are
//! written byte by byte into a buffer sized once, and the line leaves in one copy.

/// Longest line a row can make: 16 flag names, two IPv6 addresses and ten numbers fit
/// well inside.
const CAP: usize = 2048;

/// Two ASCII digits for every value 0..100 (the classic itoa table).
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// A line being built; `as_bytes` is what was written since `clear`.
pub struct Line {
    buf: Vec<u8>,
    len: usize,
}

impl Default for Line {
    fn default() -> Self {
        Self {
            buf: vec![0; CAP],
            len: 0,
        }
    }
}

impl Line {
    /// Empties the line (keeps the buffer).
    pub fn clear(&mut self) {
        self.len = 0;
    }
    /// The bytes written so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
    /// Appends one byte. Past the capacity bytes are dropped (rows are far shorter).
    #[inline]
    pub fn byte(&mut self, b: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }
    /// Appends a short byte string.
    #[inline]
    pub fn bytes(&mut self, s: &[u8]) {
        for &b in s {
            self.byte(b);
        }
    }
    /// Appends an unsigned integer in decimal, written in place from its last digit.
    #[inline]
    pub fn u64(&mut self, mut n: u64) {
        let width = n.checked_ilog10().unwrap_or(0) as usize + 1;
        let Some(out) = self.buf.get_mut(self.len..self.len + width) else {
            return;
        };
        let mut i = width;
        while n >= 100 {
            let d = (n % 100) as usize * 2;
            n /= 100;
            i -= 2;
            out[i] = PAIRS[d];
            out[i + 1] = PAIRS[d + 1];
        }
        if n >= 10 {
            let d = n as usize * 2;
            out[0] = PAIRS[d];
            out[1] = PAIRS[d + 1];
        } else {
            out[0] = b'0' + n as u8;
        }
        self.len += width;
    }
    /// Appends nanoseconds as seconds with 9 decimals, like tshark's `frame.time_relative`.
    pub fn secs(&mut self, ns: i64) {
        if ns < 0 {
            self.byte(b'-');
        }
        let a = ns.unsigned_abs();
        self.u64(a / 1_000_000_000);
        self.byte(b'.');
        // Nine digits with leading zeros: 1e9 + frac has exactly ten; drop the leading 1.
        let start = self.len;
        self.u64(1_000_000_000 + a % 1_000_000_000);
        if self.len == start + 10 {
            self.buf.copy_within(start + 1..start + 10, start);
            self.len -= 1;
        }
    }
    /// Appends an IPv4 address (formatted here: `Display` is slow).
    #[inline]
    pub fn ipv4(&mut self, a: std::net::Ipv4Addr) {
        for (i, o) in a.octets().into_iter().enumerate() {
            if i > 0 {
                self.byte(b'.');
            }
            self.u64(u64::from(o));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(f: impl FnOnce(&mut Line)) -> String {
        let mut l = Line::default();
        f(&mut l);
        String::from_utf8(l.as_bytes().to_vec()).unwrap()
    }

    #[test]
    fn integers_like_display() {
        for n in [
            0u64,
            1,
            9,
            10,
            99,
            100,
            101,
            999,
            1000,
            65535,
            1 << 32,
            u64::MAX,
        ] {
            assert_eq!(with(|l| l.u64(n)), n.to_string());
        }
    }

    #[test]
    fn seconds_like_tshark() {
        assert_eq!(with(|l| l.secs(4_439_000)), "0.004439000");
        assert_eq!(with(|l| l.secs(12_000_000_001)), "12.000000001");
        assert_eq!(with(|l| l.secs(-5)), "-0.000000005");
        assert_eq!(with(|l| l.secs(0)), "0.000000000");
    }

    #[test]
    fn addresses_like_display() {
        for a in ["10.0.0.1", "255.255.255.255", "0.0.0.0", "192.168.100.7"] {
            let ip: std::net::Ipv4Addr = a.parse().unwrap();
            assert_eq!(with(|l| l.ipv4(ip)), a);
        }
    }

    #[test]
    fn overflow_drops_bytes_instead_of_panicking() {
        let mut l = Line::default();
        for _ in 0..CAP + 10 {
            l.byte(b'x');
        }
        assert_eq!(l.as_bytes().len(), CAP);
    }
}
