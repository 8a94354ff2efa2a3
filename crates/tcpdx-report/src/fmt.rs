//! Small number and address formatters shared by renderers, written without allocating.
//!
//! Fixed-precision floats (`{:.N}`) are formatted here by exact integer arithmetic instead of
//! `core::fmt`, whose exact mode often falls back to big-number (Dragon) arithmetic: with a
//! `format!` per field, `tcpdx flows` spent ~25,000 instructions a table row. No well-kept
//! crate does this job: ryu and dtoa only give the shortest round-trip digits, and rounding
//! those again to N decimals is a double rounding that differs from `format!` near ties
//! (`{:.2}` of 2.675 is `2.67`, the double being 2.67499999...; its shortest digits `2.675`
//! round to `2.68`). The digits here are exactly `format!`'s for every `f64` (tests compare
//! millions of values, edge cases included); values it does not handle (not finite, or
//! `|v| * 10^N` of 2^64 and more) are left to `format!` itself.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::line::{Row, decimal_digits, ipv4_text, width};

/// Where formatted text goes: a table [`Row`], or a `Vec<u8>` for the `String` forms.
pub(crate) trait Sink {
    /// Appends one byte.
    fn byte(&mut self, b: u8);
    /// Appends a byte string.
    fn bytes(&mut self, s: &[u8]);
    /// Appends an unsigned integer in decimal.
    fn u64(&mut self, n: u64) {
        self.bytes(itoa::Buffer::new().format(n).as_bytes());
    }
    /// Appends `n / 10^prec` with `prec` (at most 3) decimals, `digits` digits in all
    /// ([`decimal_digits`]: a hint this default does without).
    fn decimal(&mut self, n: u64, prec: u32, _digits: usize) {
        let pow = POW10.get(prec as usize).copied().unwrap_or(1);
        self.u64(n / pow);
        if prec > 0 {
            self.byte(b'.');
            let f = n % pow;
            for _ in width(f)..prec as usize {
                self.byte(b'0');
            }
            self.u64(f);
        }
    }
    /// Appends the first `n` (at most 8) bytes of `s`.
    fn bytes8(&mut self, s: &[u8; 8], n: usize) {
        self.bytes(s.get(..n).unwrap_or(s));
    }
    /// Appends an IPv4 address.
    fn ipv4(&mut self, a: Ipv4Addr) {
        let mut buf = [0u8; 16];
        let n = ipv4_text(a, &mut buf);
        self.bytes(buf.get(..n).unwrap_or_default());
    }
}

impl Sink for Vec<u8> {
    fn byte(&mut self, b: u8) {
        self.push(b);
    }
    fn bytes(&mut self, s: &[u8]) {
        self.extend_from_slice(s);
    }
}

impl Sink for Row<'_> {
    #[inline]
    fn byte(&mut self, b: u8) {
        Row::byte(self, b);
    }
    #[inline]
    fn bytes(&mut self, s: &[u8]) {
        Row::bytes(self, s);
    }
    #[inline(always)]
    fn u64(&mut self, n: u64) {
        Row::u64(self, n);
    }
    #[inline(always)]
    fn decimal(&mut self, n: u64, prec: u32, digits: usize) {
        Row::decimal(self, n, prec as usize, digits);
    }
    #[inline(always)]
    fn bytes8(&mut self, s: &[u8; 8], n: usize) {
        Row::bytes8(self, s, n);
    }
    #[inline]
    fn ipv4(&mut self, a: Ipv4Addr) {
        // Formatted into a 16-byte buffer and stored at once: fewer instructions than
        // `Row::ipv4`'s byte stores.
        let mut buf = [0u8; 16];
        let n = ipv4_text(a, &mut buf);
        self.bytes16(&buf, n);
    }
}

/// 10^p for the precisions handled here.
const POW10: [u64; 4] = [1, 10, 100, 1000];

/// A float decoded for `{:.prec}`: the sign, and the value rounded to `prec` decimals, in
/// units of 10^-prec.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fixed {
    neg: bool,
    scaled: u64,
    prec: u32,
    /// Digits of the text ([`decimal_digits`]).
    digits: usize,
}

impl Fixed {
    /// `v` rounded as `format!("{v:.prec$}")` rounds it (the exact binary value, ties to
    /// even); `None` if `v` is not finite, `prec` is above 3, or `|v| * 10^prec` is 2^64 or
    /// more (`format!` then does it).
    #[inline(always)]
    pub(crate) fn new(v: f64, prec: u32) -> Option<Fixed> {
        const FRAC_BITS: u32 = 52;
        let pow = *POW10.get(prec as usize)?;
        if !v.is_finite() {
            return None;
        }
        let bits = v.to_bits();
        let biased = ((bits >> FRAC_BITS) & 0x7ff) as i32;
        // |v| = m * 2^e exactly (subnormals have no hidden bit and the smallest exponent).
        let m = (bits & ((1 << FRAC_BITS) - 1)) | u64::from(biased != 0) << FRAC_BITS;
        let e = biased.max(1) - 1075;
        // m < 2^53 and 10^prec < 2^10: no overflow.
        let n = m * pow;
        let scaled = if e >= 0 {
            // An integer: exact while the shift keeps every bit.
            if e >= 64 || n.leading_zeros() < e.unsigned_abs() {
                return None;
            }
            n << e
        } else if e <= -64 {
            // n < 2^63 is below half of 2^-e: rounds to zero.
            0
        } else {
            let s = e.unsigned_abs();
            let q = n >> s;
            let r = n & ((1 << s) - 1);
            let half = 1 << (s - 1);
            q + u64::from(r > half || (r == half && q & 1 == 1))
        };
        Some(Fixed {
            neg: bits >> 63 != 0,
            scaled,
            prec,
            digits: decimal_digits(scaled, prec as usize),
        })
    }
    /// Length of the text.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        usize::from(self.neg) + self.digits + usize::from(self.prec > 0)
    }
    /// Appends the text (as `format!` writes it: `-` also for negative zero).
    #[inline(always)]
    pub(crate) fn write<S: Sink>(&self, s: &mut S) {
        if self.neg {
            s.byte(b'-');
        }
        s.decimal(self.scaled, self.prec, self.digits);
    }
}

/// A unit suffix (` kB`), padded to 8 bytes so that it is written with one store.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Unit {
    text: [u8; 8],
    len: usize,
}

impl Unit {
    /// `s` (at most 8 bytes; longer is cut) as a unit.
    const fn new(s: &str) -> Unit {
        let b = s.as_bytes();
        let mut text = [0u8; 8];
        let mut i = 0;
        while i < b.len() && i < 8 {
            text[i] = b[i];
            i += 1;
        }
        Unit { text, len: i }
    }
    /// The unit's text.
    fn as_str(&self) -> &str {
        std::str::from_utf8(self.text.get(..self.len).unwrap_or_default()).unwrap_or_default()
    }
}

const GBPS: Unit = Unit::new(" Gb/s");
const MBPS: Unit = Unit::new(" Mb/s");
const KBPS: Unit = Unit::new(" kb/s");
const BPS: Unit = Unit::new(" b/s");
const GB: Unit = Unit::new(" GB");
const MB: Unit = Unit::new(" MB");
const KB: Unit = Unit::new(" kB");
const B: Unit = Unit::new(" B");

/// A human-friendly quantity: a number and its unit (`367.7 kb/s`, `12 B`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Human {
    /// A rounded number and its unit.
    Fixed(Fixed, Unit),
    /// A whole number and its unit.
    Int(u64, Unit),
}

impl Human {
    /// Length of the text.
    #[inline(always)]
    pub(crate) fn len(&self) -> usize {
        match self {
            Human::Fixed(f, u) => f.len() + u.len,
            Human::Int(n, u) => width(*n) + u.len,
        }
    }
    /// Appends the text.
    #[inline(always)]
    pub(crate) fn write<S: Sink>(&self, s: &mut S) {
        match *self {
            Human::Fixed(f, u) => {
                f.write(s);
                s.bytes8(&u.text, u.len);
            }
            Human::Int(n, u) => {
                s.u64(n);
                s.bytes8(&u.text, u.len);
            }
        }
    }
}

/// What [`bps`] shows of `v`: the scaled value, its decimals and its unit.
#[inline(always)]
fn bps_parts(v: f64) -> (f64, u32, Unit) {
    if v >= 1e9 {
        (v / 1e9, 2, GBPS)
    } else if v >= 1e6 {
        (v / 1e6, 2, MBPS)
    } else if v >= 1e3 {
        (v / 1e3, 1, KBPS)
    } else {
        (v, 0, BPS)
    }
}

/// What [`bytes`] shows of `v`: the scaled value, its decimals and its unit, or `Err(v)`
/// for a count shown whole (below 1 kB).
#[inline(always)]
fn bytes_parts(v: u64) -> Result<(f64, u32, Unit), u64> {
    let f = v as f64;
    if f >= 1e9 {
        Ok((f / 1e9, 2, GB))
    } else if f >= 1e6 {
        Ok((f / 1e6, 2, MB))
    } else if f >= 1e3 {
        Ok((f / 1e3, 1, KB))
    } else {
        Err(v)
    }
}

/// [`bps`] without allocating, `None` when it needs `format!`.
#[inline(always)]
pub(crate) fn bps_human(v: f64) -> Option<Human> {
    let (x, prec, unit) = bps_parts(v);
    Some(Human::Fixed(Fixed::new(x, prec)?, unit))
}

/// [`bytes`] without allocating, `None` when it needs `format!`.
#[inline(always)]
pub(crate) fn bytes_human(v: u64) -> Option<Human> {
    match bytes_parts(v) {
        Ok((x, prec, unit)) => Some(Human::Fixed(Fixed::new(x, prec)?, unit)),
        Err(n) => Some(Human::Int(n, B)),
    }
}

/// Nanoseconds as milliseconds with 3 decimals ([`ms`]) without allocating.
#[inline(always)]
pub(crate) fn ms_fixed(ns: i64) -> Option<Fixed> {
    Fixed::new(ns as f64 / 1e6, 3)
}

/// `format!("{x:.prec$}{unit}")`, through [`Fixed`] when it can.
fn fixed_string(x: f64, prec: u32, unit: &str) -> String {
    match Fixed::new(x, prec) {
        Some(f) => {
            let mut out = Vec::with_capacity(f.len() + unit.len());
            f.write(&mut out);
            out.extend_from_slice(unit.as_bytes());
            ascii(out)
        }
        None => format!("{x:.p$}{unit}", p = prec as usize),
    }
}

/// Human-friendly bits per second.
pub(crate) fn bps(v: f64) -> String {
    let (x, prec, unit) = bps_parts(v);
    fixed_string(x, prec, unit.as_str())
}

/// Human-friendly byte count.
pub(crate) fn bytes(v: u64) -> String {
    match bytes_parts(v) {
        Ok((x, prec, unit)) => fixed_string(x, prec, unit.as_str()),
        Err(n) => format!("{n} B"),
    }
}

/// Milliseconds with 3 decimals.
pub(crate) fn ms(ns: i64) -> String {
    fixed_string(ns as f64 / 1e6, 3, "")
}

/// `ip:port` as `format!` writes it (`a.b.c.d:p`, `[v6]:p`).
pub(crate) fn endpoint(ip: IpAddr, port: u16) -> String {
    let mut out = Vec::with_capacity(48);
    write_endpoint(&mut out, ip, port);
    ascii(out)
}

/// Text known to be ASCII as a `String`.
fn ascii(v: Vec<u8>) -> String {
    String::from_utf8(v).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Appends `ip:port` as [`endpoint`] writes it: formatted here because the addresses'
/// `Display` goes through `core::fmt` group by group.
#[inline(always)]
pub(crate) fn write_endpoint<S: Sink>(s: &mut S, ip: IpAddr, port: u16) {
    match ip {
        IpAddr::V4(a) => s.ipv4(a),
        IpAddr::V6(a) => {
            s.byte(b'[');
            write_ipv6(s, a);
            s.byte(b']');
        }
    }
    s.byte(b':');
    s.u64(u64::from(port));
}

/// Appends `a` as `Ipv6Addr`'s `Display` writes it: RFC 5952 (lowercase hex without leading
/// zeros, the first longest run of two or more zero groups as `::`), and IPv4-mapped
/// addresses as `::ffff:a.b.c.d`.
fn write_ipv6<S: Sink>(s: &mut S, a: Ipv6Addr) {
    if let Some(v4) = a.to_ipv4_mapped() {
        s.bytes(b"::ffff:");
        s.ipv4(v4);
        return;
    }
    let g = a.segments();
    let (mut best_at, mut best_len, mut run_at, mut run_len) = (0, 0, 0, 0);
    for (i, &x) in g.iter().enumerate() {
        if x != 0 {
            run_len = 0;
            continue;
        }
        if run_len == 0 {
            run_at = i;
        }
        run_len += 1;
        if run_len > best_len {
            (best_at, best_len) = (run_at, run_len);
        }
    }
    if best_len > 1 {
        write_groups(s, g.get(..best_at).unwrap_or_default());
        s.bytes(b"::");
        write_groups(s, g.get(best_at + best_len..).unwrap_or_default());
    } else {
        write_groups(s, &g);
    }
}

/// Appends `groups` as colon-separated lowercase hex.
fn write_groups<S: Sink>(s: &mut S, groups: &[u16]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, &x) in groups.iter().enumerate() {
        if i > 0 {
            s.byte(b':');
        }
        let nibbles = (16 - x.leading_zeros()).div_ceil(4).max(1);
        for k in (0..nibbles).rev() {
            s.byte(HEX[usize::from((x >> (4 * k)) & 0xf)]);
        }
    }
}

/// The formatters as they were, with `format!`: the reference the tests compare with (and
/// the random stream they compare on).
#[cfg(test)]
pub(crate) mod reference {
    /// `bps` with `format!`.
    pub fn bps(v: f64) -> String {
        if v >= 1e9 {
            format!("{:.2} Gb/s", v / 1e9)
        } else if v >= 1e6 {
            format!("{:.2} Mb/s", v / 1e6)
        } else if v >= 1e3 {
            format!("{:.1} kb/s", v / 1e3)
        } else {
            format!("{v:.0} b/s")
        }
    }
    /// `bytes` with `format!`.
    pub fn bytes(v: u64) -> String {
        let f = v as f64;
        if f >= 1e9 {
            format!("{:.2} GB", f / 1e9)
        } else if f >= 1e6 {
            format!("{:.2} MB", f / 1e6)
        } else if f >= 1e3 {
            format!("{:.1} kB", f / 1e3)
        } else {
            format!("{v} B")
        }
    }
    /// `ms` with `format!`.
    pub fn ms(ns: i64) -> String {
        format!("{:.3}", ns as f64 / 1e6)
    }

    /// Deterministic xorshift64 stream, for the randomized comparisons.
    pub struct Rng(pub u64);

    impl Rng {
        /// The next value.
        pub fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        /// True once in `n` draws, on average.
        pub fn one_in(&mut self, n: u64) -> bool {
            self.next().is_multiple_of(n)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::line::Line;

    use super::reference::{self, Rng};

    /// The text of a [`Fixed`] or [`Human`], checking its announced length.
    fn text(len: usize, write: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut out = Vec::new();
        write(&mut out);
        assert_eq!(out.len(), len);
        String::from_utf8(out).unwrap()
    }

    fn human(h: Option<Human>) -> Option<String> {
        h.map(|h| text(h.len(), |o| h.write(o)))
    }

    #[track_caller]
    fn check(v: f64) {
        for p in 0..=3u32 {
            let want = format!("{v:.p$}", p = p as usize);
            if let Some(f) = Fixed::new(v, p) {
                let got = text(f.len(), |o| f.write(o));
                assert_eq!(got, want, "{v:e} ({:#x}) .{p}", v.to_bits());
                // The table's writer too.
                let mut line = Line::default();
                assert!(line.row(|r| f.write(r)));
                assert_eq!(line.as_bytes(), want.as_bytes(), "{v:e} .{p} in a row");
            } else {
                // Only what cannot fit the integer path is left to `format!`.
                assert!(!v.is_finite() || v.abs() * 10f64.powi(p as i32) >= 2f64.powi(63));
            }
            assert_eq!(fixed_string(v, p, " x"), want + " x");
        }
    }

    /// Values around `x`: a few steps of one ulp either side, and both signs.
    fn around(x: f64, steps: u32, mut f: impl FnMut(f64)) {
        let (mut up, mut down) = (x, x);
        for _ in 0..=steps {
            for v in [up, down, -up, -down] {
                f(v);
            }
            up = up.next_up();
            down = down.next_down();
        }
    }

    #[test]
    fn fixed_like_format_on_special_values() {
        let specials = [
            0.0,
            -0.0,
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            f64::MIN_POSITIVE.next_down(),
            f64::from_bits(1),
            f64::MAX,
            f64::MIN,
            f64::EPSILON,
            0.5,
            1.5,
            2.5,
            0.49999999999999994,
            2.675,
            0.05,
            0.005,
            0.0005,
            0.125,
            0.375,
            0.0625,
            9.9995,
            999.95,
            0.9995,
            2f64.powi(52),
            2f64.powi(53),
            2f64.powi(63),
            2f64.powi(64),
            2f64.powi(116),
            2f64.powi(117),
            2f64.powi(117).next_down(),
            2f64.powi(117).next_up(),
            1e20,
            1e35,
            1e300,
        ];
        for x in specials {
            around(x, 3, check);
        }
    }

    #[test]
    fn shortest_digits_would_round_differently() {
        // Why ryu (here through serde_json) cannot be used and rounded again.
        assert_eq!(serde_json::to_string(&2.675).unwrap(), "2.675");
        assert_eq!(format!("{:.2}", 2.675), "2.67");
        check(2.675);
    }

    #[test]
    fn fixed_like_format_on_exact_ties() {
        // i / 2^k for k <= 12 holds every value whose 0-3 decimal rounding is a tie.
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        for k in 0..=12 {
            for i in 0..4096u64 {
                check(i as f64 / f64::from(1u32 << k));
            }
            for _ in 0..4096 {
                let i = rng.next() >> (rng.next() % 64);
                check(i as f64 / f64::from(1u32 << k));
            }
        }
    }

    #[test]
    fn fixed_like_format_near_rounding_boundaries() {
        // The f64 nearest each decimal boundary (n + 1/2) / 10^p, and its neighbours.
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..20_000 {
            let n = rng.next() >> (rng.next() % 64);
            for p in 0..=3 {
                let scale = 10f64.powi(p);
                around((n as f64 + 0.5) / scale, 2, check);
            }
        }
        // Near powers of ten (where the integer part gains a digit).
        for k in -6..=36 {
            around(10f64.powi(k), 40, check);
            for p in 0..=3 {
                around(10f64.powi(k) - 0.5 / 10f64.powi(p), 4, check);
            }
        }
    }

    #[test]
    fn fixed_like_format_on_random_values() {
        let mut rng = Rng(0xD1B5_4A32_D192_ED03);
        // Any bit pattern (NaNs, subnormals, huge values: slow for `format!`)...
        for _ in 0..25_000 {
            check(f64::from_bits(rng.next()));
        }
        // ...and exponents where the digits are (ranges the tables print).
        for _ in 0..400_000 {
            let e = (rng.next() % 160) as i32 - 60;
            check((rng.next() >> 11) as f64 * 2f64.powi(e - 53));
        }
    }

    #[test]
    fn human_units_like_format() {
        let mut rng = Rng(0x0123_4567_89AB_CDEF);
        let mut vals: Vec<u64> = vec![0, 1, 999, 1000, u64::MAX, u64::MAX - 1, 1 << 53];
        for k in 0..20 {
            let p = 10u64.pow(k);
            for d in 0..60 {
                vals.extend([p.wrapping_add(d), p.wrapping_sub(d)]);
                vals.extend([
                    (p / 2).wrapping_mul(1999).wrapping_add(d),
                    p.wrapping_mul(9995).wrapping_sub(d),
                ]);
            }
        }
        vals.extend((0..300_000).map(|_| rng.next() >> (rng.next() % 64)));
        for v in vals {
            assert_eq!(human(bytes_human(v)).unwrap(), reference::bytes(v), "{v}");
            assert_eq!(bytes(v), reference::bytes(v), "{v}");
            for ns in [v as i64, v as i64 / 7] {
                let f = ms_fixed(ns).unwrap();
                assert_eq!(text(f.len(), |o| f.write(o)), reference::ms(ns), "{ns}");
                assert_eq!(ms(ns), reference::ms(ns), "{ns}");
            }
            // Goodput as computed: unique bytes * 8 / seconds.
            let secs = (rng.next() % 10_000_000_000 + 1) as f64 / 1e9;
            for g in [
                v as f64,
                v as f64 * 8.0 / secs,
                f64::from_bits(v),
                -(v as f64),
            ] {
                let fast = human(bps_human(g));
                assert!(fast.is_none_or(|f| f == reference::bps(g)), "{g:e}");
                assert_eq!(bps(g), reference::bps(g), "{g:e}");
            }
        }
        for ns in [
            0,
            1,
            -1,
            499,
            500,
            501,
            -500,
            1500,
            2500,
            i64::MAX,
            i64::MIN,
        ] {
            assert_eq!(ms(ns), reference::ms(ns), "{ns}");
        }
        for g in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 999.5, 0.5] {
            assert_eq!(bps(g), reference::bps(g), "{g}");
        }
        for x in [1e3, 1e6, 1e9] {
            around(x, 100, |g| assert_eq!(bps(g), reference::bps(g), "{g:e}"));
            for p in [0.05, 0.005] {
                around(x * (1000.0 - p), 100, |g| {
                    assert_eq!(bps(g), reference::bps(g), "{g:e}")
                });
            }
        }
    }

    /// Randomised comparison: `TCPDX_FMT_CASES` values per kind (default 200,000, a few
    /// seconds; after changing the formatter run it long, e.g. `TCPDX_FMT_CASES=50000000
    /// cargo test --release -p tcpdx-report fixed_like_format_long`).
    #[test]
    fn fixed_like_format_long() {
        let cases: u64 = std::env::var("TCPDX_FMT_CASES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(200_000);
        let mut rng = Rng(0xA076_1D64_78BD_642F);
        for i in 0..cases {
            // Random bit patterns are mostly huge values, slow for `format!`: fewer of them.
            if i % 16 == 0 {
                check(f64::from_bits(rng.next()));
            }
            let e = (rng.next() % 160) as i32 - 60;
            check((rng.next() >> 11) as f64 * 2f64.powi(e - 53));
            let n = rng.next() >> (rng.next() % 64);
            let ns = n as i64;
            assert_eq!(ms(ns), reference::ms(ns), "{ns}");
            assert_eq!(human(bytes_human(n)).unwrap(), reference::bytes(n), "{n}");
            let g = n as f64 * 8.0 / ((i % 10_000_000 + 1) as f64 / 1e9);
            assert_eq!(bps(g), reference::bps(g), "{g:e}");
            let k = rng.next() % 13;
            check((rng.next() >> (rng.next() % 64)) as f64 / f64::from(1u32 << k));
        }
    }

    #[test]
    fn endpoints_like_display() {
        let mut rng = Rng(0x5851_F42D_4C95_7F2D);
        let mut v6: Vec<Ipv6Addr> = vec![
            Ipv6Addr::UNSPECIFIED,
            Ipv6Addr::LOCALHOST,
            "::ffff:1.2.3.4".parse().unwrap(),
            "::1.2.3.4".parse().unwrap(),
            "64:ff9b::1.2.3.4".parse().unwrap(),
            "fe80::1:0:0:1".parse().unwrap(),
            "1:0:0:2:0:0:0:3".parse().unwrap(),
            "1:0:2:0:3:0:4:0".parse().unwrap(),
            Ipv6Addr::from(u128::MAX),
        ];
        for _ in 0..200_000 {
            // Groups of zeros, small values and full values, in random mixes.
            let g: [u16; 8] = std::array::from_fn(|_| match rng.next() % 4 {
                0 | 1 => 0,
                2 => (rng.next() % 0x100) as u16,
                _ => rng.next() as u16,
            });
            v6.push(Ipv6Addr::from(g));
        }
        for a in v6 {
            let port = rng.next() as u16;
            assert_eq!(endpoint(IpAddr::V6(a), port), format!("[{a}]:{port}"));
            let m = a
                .to_ipv4_mapped()
                .unwrap_or(Ipv4Addr::from(rng.next() as u32));
            assert_eq!(endpoint(IpAddr::V4(m), port), format!("{m}:{port}"));
        }
    }
}
