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
    /// Writes one row through a fixed window at the cursor with `f`: false (nothing
    /// written) if fewer than [`ROW`] bytes of room remain or the row came out longer.
    #[inline]
    pub fn row(&mut self, f: impl FnOnce(&mut Row<'_>)) -> bool {
        self.row_if(|r| {
            f(r);
            true
        })
    }
    /// [`Line::row`] for a writer that can give up: the row is kept only if `f` returns
    /// true (and it fits).
    #[inline]
    pub fn row_if(&mut self, f: impl FnOnce(&mut Row<'_>) -> bool) -> bool {
        if self.room() < ROW {
            return false;
        }
        let Some(w) = self
            .buf
            .get_mut(self.len..self.len + ROW)
            .and_then(|w| <&mut [u8; ROW]>::try_from(w).ok())
        else {
            return false;
        };
        let mut r = Row { w, pos: 0 };
        if !f(&mut r) || r.pos > ROW {
            return false;
        }
        self.len += r.pos;
        true
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
        if let Some(out) = self.window() {
            self.len += ipv4_text(a, out);
        }
    }
}

pub(crate) use tcpdx_core::flow::ipv4_text;

/// Bytes one [`Row`] may take. A power of two: positions are masked into the window, so a
/// write needs no bounds check and can never panic.
pub const ROW: usize = 512;
const MASK: usize = ROW - 1;

/// One row written through a fixed window of a [`Line`] (see [`Line::row`]). Hand-written
/// for speed: the checked per-field writes of [`Line`] were ~40% of a CSV row's cost.
/// A row longer than [`ROW`] wraps around inside the window; [`Line::row`] then rejects it.
pub struct Row<'a> {
    w: &'a mut [u8; ROW],
    pos: usize,
}

impl Row<'_> {
    /// Appends one byte.
    #[inline]
    pub fn byte(&mut self, b: u8) {
        self.w[self.pos & MASK] = b;
        self.pos += 1;
    }
    /// Appends a byte string.
    #[inline]
    pub fn bytes(&mut self, s: &[u8]) {
        for &b in s {
            self.byte(b);
        }
    }
    /// Appends the first `n` (at most 16) bytes of `s`: all 16 are stored, the cursor
    /// moves by `n` (a fixed-size copy, no loop).
    #[inline(always)]
    pub fn bytes16(&mut self, s: &[u8; 16], n: usize) {
        let at = self.pos & MASK;
        match self.w.get_mut(at..at + 16) {
            Some(dst) => dst.copy_from_slice(s),
            None => self.wrap(s),
        }
        self.pos += n.min(16);
    }
    /// Stores `s` at the cursor byte by byte, wrapping around the window (the rare case
    /// of the fixed-size stores, out of line so that they stay small enough to inline).
    #[cold]
    #[inline(never)]
    fn wrap(&mut self, s: &[u8]) {
        for (j, &b) in s.iter().enumerate() {
            self.w[(self.pos + j) & MASK] = b;
        }
    }
    /// Appends the first `n` (at most 8) bytes of `s` with one 8-byte store.
    #[inline]
    pub fn bytes8(&mut self, s: &[u8; 8], n: usize) {
        self.put8(u64::from_le_bytes(*s), n.min(8));
    }
    /// Appends `n` spaces (16 at a time, fixed-size copies; up to 16 without a branch).
    #[inline(always)]
    pub fn spaces(&mut self, mut n: usize) {
        loop {
            let k = n.min(16);
            self.bytes16(&[b' '; 16], k);
            n -= k;
            if n == 0 {
                break;
            }
        }
    }
    /// Bytes written so far.
    #[inline]
    pub fn len(&self) -> usize {
        self.pos
    }
    /// True if nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.pos == 0
    }
    /// Stores the 8 bytes of `v` (in memory order) and moves the cursor by `n`.
    #[inline(always)]
    fn put8(&mut self, v: u64, n: usize) {
        let at = self.pos & MASK;
        match self.w.get_mut(at..at + 8) {
            Some(dst) => dst.copy_from_slice(&v.to_le_bytes()),
            None => self.wrap(&v.to_le_bytes()),
        }
        self.pos += n;
    }
    /// Appends `n < 10^8` in decimal without leading zeros.
    #[inline(always)]
    fn below_1e8(&mut self, n: u64) {
        let w = width(n);
        self.put8(eight(n) >> ((8 - w) * 8), w);
    }
    /// Appends an unsigned integer in decimal.
    #[inline(always)]
    pub fn u64(&mut self, n: u64) {
        if n < 10 {
            self.byte(b'0' + n as u8);
        } else if n < E8 {
            self.below_1e8(n);
        } else {
            self.above_1e8(n);
        }
    }
    /// [`Row::u64`] of `n >= 10^8` (out of line: the inlined common case stays small).
    #[inline(never)]
    fn above_1e8(&mut self, n: u64) {
        if n < E8 * E8 {
            self.below_1e8(n / E8);
            self.put8(eight(n % E8), 8);
        } else {
            self.below_1e8(n / (E8 * E8));
            self.put8(eight(n / E8 % E8), 8);
            self.put8(eight(n % E8), 8);
        }
    }
    /// Appends `n / 10^prec` with `prec` (at most 19) decimals: `1234, 3` gives `1.234`,
    /// `5, 2` gives `0.05`. `digits` is the number of digits that takes,
    /// [`decimal_digits`]`(n, prec)` (its caller usually needed it already, to pad).
    #[inline(always)]
    pub fn decimal(&mut self, n: u64, prec: usize, digits: usize) {
        if prec == 0 {
            return self.u64(n);
        }
        if n < E8 && prec < digits && digits <= 8 {
            // All digits from one SWAR conversion: the integer part, then the point and
            // the decimals in one store.
            let v = eight(n);
            self.put8(v >> ((8 - digits) * 8), digits - prec);
            self.put8((v >> ((8 - prec) * 8)) << 8 | u64::from(b'.'), prec + 1);
        } else {
            let pow = POW10[prec.min(19)];
            self.u64(n / pow);
            self.byte(b'.');
            let f = n % pow;
            for _ in width(f)..prec {
                self.byte(b'0');
            }
            self.u64(f);
        }
    }
    /// Appends nanoseconds as seconds with 9 decimals, like tshark's `frame.time_relative`.
    // Always inlined: once an `events` row (see `AddrCache::put_row`).
    #[inline(always)]
    pub fn secs(&mut self, ns: i64) {
        if ns < 0 {
            self.byte(b'-');
        }
        let a = ns.unsigned_abs();
        self.u64(a / 1_000_000_000);
        self.byte(b'.');
        // Nine digits with leading zeros: a fixed width, no digit count needed.
        let f = a % 1_000_000_000;
        self.byte(b'0' + (f / E8) as u8);
        self.put8(eight(f % E8), 8);
    }
    /// Appends an IPv4 address.
    #[inline]
    pub fn ipv4(&mut self, a: std::net::Ipv4Addr) {
        let mut text = [0u8; 16];
        let n = ipv4_text(a, &mut text);
        self.bytes16(&text, n);
    }
}

/// 10^k for every k a `u64` holds.
const POW10: [u64; 20] = {
    let mut t = [1u64; 20];
    let mut k = 1;
    while k < 20 {
        t[k] = t[k - 1] * 10;
        k += 1;
    }
    t
};

const E8: u64 = 100_000_000;

/// The eight decimal digits of `n < 10^8`, leading zeros included, as ASCII bytes in memory
/// order (little-endian): SWAR, splitting into 4-, then 2-, then 1-digit lanes with
/// multiply-shift divisions exact in these ranges (x/100 = x*10486>>20 for x < 10^4,
/// x/10 = x*103>>10 for x < 100). ~15 instructions instead of four divisions by 100.
#[inline]
fn eight(n: u64) -> u64 {
    let v = (n / 10_000) | ((n % 10_000) << 32);
    let q = ((v * 10_486) >> 20) & 0x0000_007F_0000_007F;
    let v = ((v - q * 100) << 16) | q;
    let q = ((v * 103) >> 10) & 0x000F_000F_000F_000F;
    let v = ((v - q * 10) << 8) | q;
    v | 0x3030_3030_3030_3030
}

/// Decimal digits of `n` (1 for 0): the bit length times log10(2) (1233/4096), corrected by
/// one comparison (`ilog10` took ~20 instructions, this ~6).
#[inline]
pub(crate) fn width(n: u64) -> usize {
    // `n | 1`: 0 has one digit too (no power of ten lies between an even n and n | 1).
    let m = n | 1;
    let bits = 64 - m.leading_zeros() as usize;
    let t = (bits * 1233) >> 12;
    t + usize::from(m >= POW10[t.min(19)])
}

/// Digits of `n / 10^prec` written with `prec` decimals ([`Row::decimal`]): at least one
/// before the point.
#[inline(always)]
pub fn decimal_digits(n: u64, prec: usize) -> usize {
    width(n).max(prec + 1)
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
    fn eight_digits_with_leading_zeros() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let ns = (0..100_000).chain((0..100_000).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % E8
        }));
        for n in ns.chain([E8 - 1]) {
            assert_eq!(eight(n).to_le_bytes(), *format!("{n:08}").as_bytes(), "{n}");
        }
    }

    #[test]
    fn width_counts_digits() {
        let mut ns = vec![0u64, 1, 9, 10, 11, 99, 100, u64::MAX];
        ns.extend((0..20).map(|p| 10u64.pow(p)));
        ns.extend((1..20).map(|p| 10u64.pow(p) - 1));
        ns.extend((0..64).map(|b| 1u64 << b));
        for n in ns {
            assert_eq!(width(n), n.to_string().len(), "{n}");
            let mut l = Line::default();
            assert!(l.row(|r| r.u64(n)));
            assert_eq!(l.as_bytes(), n.to_string().as_bytes());
        }
    }

    #[test]
    fn rows_match_the_checked_writer() {
        let fields = |l: &mut Line| {
            l.u64(12);
            l.byte(b',');
            l.ipv4([1, 22, 255, 0].into());
            l.byte(b',');
            l.secs(-1_500_000_001);
            l.bytes(b",x");
        };
        let mut a = Line::default();
        fields(&mut a);
        let mut b = Line::default();
        assert!(b.row(|r| {
            r.u64(12);
            r.byte(b',');
            r.ipv4([1, 22, 255, 0].into());
            r.byte(b',');
            r.secs(-1_500_000_001);
            r.bytes(b",x");
        }));
        assert_eq!(a.as_bytes(), b.as_bytes());
        // Too long for a window: rejected whole, the line unchanged.
        assert!(!b.row(|r| r.bytes(&[b'y'; ROW + 1])));
        assert_eq!(a.as_bytes(), b.as_bytes());
        // Not enough room left for a window.
        let mut c = Line::with_capacity(ROW - 1);
        assert!(!c.row(|r| r.byte(b'z')));
        assert!(c.is_empty());
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
    fn decimals_like_format() {
        let mut ns: Vec<u64> = vec![0, 1, 9, 10, 99, 100, 999, 1000, 1001, E8 - 1, E8, u64::MAX];
        ns.extend((0..20).flat_map(|p| [10u64.pow(p), 10u64.pow(p) - 1, 10u64.pow(p) + 1]));
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        ns.extend((0..20_000).map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x >> (x % 64)
        }));
        for n in ns {
            for p in 0..=19usize {
                let pow = 10u64.pow(p as u32);
                let want = if p == 0 {
                    n.to_string()
                } else {
                    format!("{}.{:0p$}", n / pow, n % pow)
                };
                let mut l = Line::default();
                assert!(l.row(|r| r.decimal(n, p, decimal_digits(n, p))));
                assert_eq!(l.as_bytes(), want.as_bytes(), "{n} {p}");
            }
        }
    }

    #[test]
    fn spaces_and_row_if() {
        let mut l = Line::default();
        for n in [0, 1, 15, 16, 17, 45] {
            assert!(l.row(|r| {
                r.spaces(n);
                r.byte(b'|');
            }));
        }
        let want: String = [0, 1, 15, 16, 17, 45]
            .map(|n| format!("{:>w$}", "|", w = n + 1))
            .concat();
        assert_eq!(l.as_bytes(), want.as_bytes());
        // A writer that gives up leaves the line as it was.
        assert!(!l.row_if(|r| {
            r.bytes(b"dropped");
            false
        }));
        assert_eq!(l.as_bytes(), want.as_bytes());
        assert!(l.row_if(|r| {
            assert_eq!(r.len(), 0);
            r.bytes(b"kept");
            r.len() == 4
        }));
        assert!(l.as_bytes().ends_with(b"|kept"));
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
