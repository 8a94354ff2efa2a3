//! A fixed-capacity line builder for per-packet rows.
//!
//! Hand-written rather than `Vec::extend_from_slice` + itoa: every few-byte field then became
//! a libc `memcpy` call, 18% of `tcpdx events` time. Here every field is written into a
//! fixed-size window of the buffer (a constant-length copy the compiler inlines), after one
//! capacity check per field, and the cursor then moves by the field's real length.

/// Default capacity: 16 flag names, two IPv6 addresses and ten numbers fit well inside.
pub const ROW_CAP: usize = 2048;

/// Widest single field written through a fixed window (`u64::MAX` has 20 digits).
const WINDOW: usize = 20;

/// Two ASCII digits for every value 0..100 (the classic itoa table).
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// Every IPv4 octet as up to three digits followed by a dot, and the digit count.
const OCTETS: [([u8; 4], u8); 256] = octet_table();

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

/// A line (or a batch of lines) being built; `as_bytes` is what was written since `clear`.
pub struct Line {
    buf: Vec<u8>,
    len: usize,
}

impl Default for Line {
    fn default() -> Self {
        Self::with_capacity(ROW_CAP)
    }
}

impl Line {
    /// A builder holding up to `cap` bytes (past it, bytes are dropped).
    pub fn with_capacity(cap: usize) -> Self {
        // The slack lets the last field's fixed window fit even at the very end.
        Self {
            buf: vec![0; cap + WINDOW],
            len: 0,
        }
    }
    /// Empties the line (keeps the buffer).
    pub fn clear(&mut self) {
        self.len = 0;
    }
    /// The bytes written so far.
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True if nothing was written since `clear`.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Bytes that can still be written.
    pub fn room(&self) -> usize {
        self.buf.len() - WINDOW - self.len
    }
    /// The fixed window at the cursor, when a whole window still fits in the capacity:
    /// a field written through it (never longer than the window) then keeps the line
    /// within the capacity. Near the end, whole fields are dropped rather than cut.
    #[inline]
    fn window(&mut self) -> Option<&mut [u8; WINDOW]> {
        if self.room() < WINDOW {
            return None;
        }
        self.buf
            .get_mut(self.len..self.len + WINDOW)?
            .try_into()
            .ok()
    }
    /// Appends one byte. Past the capacity bytes are dropped (rows are far shorter).
    #[inline]
    pub fn byte(&mut self, b: u8) {
        if self.len < self.buf.len() - WINDOW
            && let Some(slot) = self.buf.get_mut(self.len)
        {
            *slot = b;
            self.len += 1;
        }
    }
    /// Appends a byte string (dropped whole if it does not fit).
    #[inline]
    pub fn bytes(&mut self, s: &[u8]) {
        if s.len() > self.room() {
            return;
        }
        if let Some(out) = self.buf.get_mut(self.len..self.len + s.len()) {
            out.copy_from_slice(s);
            self.len += s.len();
        }
    }
    /// Appends an unsigned integer in decimal, written in place from its last digit.
    #[inline]
    pub fn u64(&mut self, n: u64) {
        if let Some(out) = self.window() {
            let w = digits(out, n);
            self.len += w;
        }
    }
    /// Appends nanoseconds as seconds with 9 decimals, like tshark's `frame.time_relative`.
    pub fn secs(&mut self, ns: i64) {
        if ns < 0 {
            self.byte(b'-');
        }
        let a = ns.unsigned_abs();
        self.u64(a / 1_000_000_000);
        if let Some(out) = self.window() {
            out[0] = b'.';
            // Nine digits with leading zeros: a fixed width, no digit count needed.
            let mut f = (a % 1_000_000_000) as u32;
            out[1] = b'0' + (f / 100_000_000) as u8;
            f %= 100_000_000;
            for i in (0..4).rev() {
                let d = (f % 100) as usize * 2;
                f /= 100;
                out[2 + 2 * i] = PAIRS[d];
                out[3 + 2 * i] = PAIRS[d + 1];
            }
            self.len += 10;
        }
    }
    /// Appends an IPv4 address (formatted here: `Display` is slow).
    #[inline]
    pub fn ipv4(&mut self, a: std::net::Ipv4Addr) {
        let Some(out) = self.window() else {
            return;
        };
        let mut at = 0;
        for o in a.octets() {
            let (text, n) = OCTETS[usize::from(o)];
            // Each octet's dot is overwritten by the next octet; the last one's is dropped.
            if let Some(dst) = out.get_mut(at..at + 4) {
                dst.copy_from_slice(&text);
            }
            at += usize::from(n) + 1;
        }
        self.len += at - 1;
    }
}

/// Writes `n` in decimal at the start of `out`; returns the digit count.
#[inline]
fn digits(out: &mut [u8; WINDOW], mut n: u64) -> usize {
    if n < 10 {
        out[0] = b'0' + n as u8;
        return 1;
    }
    if n < 100 {
        let d = n as usize * 2;
        out[0] = PAIRS[d];
        out[1] = PAIRS[d + 1];
        return 2;
    }
    let width = (n.ilog10() as usize + 1).min(WINDOW);
    let mut i = width;
    while n >= 100 && i >= 2 {
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
    width
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
        let mut ns = vec![
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
        ];
        ns.extend((0..20).map(|p| 10u64.pow(p)));
        ns.extend((1..20).map(|p| 10u64.pow(p) - 1));
        for n in ns {
            assert_eq!(with(|l| l.u64(n)), n.to_string());
        }
    }

    #[test]
    fn fields_follow_each_other() {
        let s = with(|l| {
            l.u64(12);
            l.byte(b',');
            l.ipv4([1, 22, 255, 0].into());
            l.byte(b',');
            l.secs(1_500_000_001);
            l.bytes(b",x");
        });
        assert_eq!(s, "12,1.22.255.0,1.500000001,x");
    }

    #[test]
    fn seconds_like_tshark() {
        assert_eq!(with(|l| l.secs(4_439_000)), "0.004439000");
        assert_eq!(with(|l| l.secs(12_000_000_001)), "12.000000001");
        assert_eq!(with(|l| l.secs(-5)), "-0.000000005");
        assert_eq!(with(|l| l.secs(0)), "0.000000000");
        assert_eq!(with(|l| l.secs(i64::MIN)), "-9223372036.854775808");
    }

    #[test]
    fn addresses_like_display() {
        for a in ["10.0.0.1", "255.255.255.255", "0.0.0.0", "192.168.100.7"] {
            let ip: std::net::Ipv4Addr = a.parse().unwrap();
            assert_eq!(with(|l| l.ipv4(ip)), a);
        }
        for n in 0..=255u8 {
            let ip = std::net::Ipv4Addr::new(n, n, n, n);
            assert_eq!(with(|l| l.ipv4(ip)), ip.to_string());
        }
    }

    #[test]
    fn overflow_drops_bytes_instead_of_panicking() {
        let mut l = Line::default();
        for _ in 0..ROW_CAP + 10 {
            l.byte(b'x');
        }
        assert_eq!(l.as_bytes().len(), ROW_CAP);
        // Near the end, whole fields are dropped rather than cut.
        let mut l = Line::with_capacity(25);
        l.bytes(b"0123456789");
        l.u64(u64::MAX);
        l.ipv4([1, 2, 3, 4].into());
        l.secs(1);
        l.bytes(b"abcdefghijklmnop");
        assert_eq!(l.as_bytes(), b"0123456789");
        assert_eq!(l.room(), 15);
    }
}
