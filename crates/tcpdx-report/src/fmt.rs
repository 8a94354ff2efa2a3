//! Small number formatters shared by renderers.

/// Appends an integer (itoa: no allocation, much faster than `write!`).
pub(crate) fn push_num(line: &mut Vec<u8>, n: impl itoa::Integer) {
    line.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Appends nanoseconds as seconds with 9 decimals, like tshark's `frame.time_relative`.
pub(crate) fn push_secs(line: &mut Vec<u8>, ns: i64) {
    if ns < 0 {
        line.push(b'-');
    }
    let a = ns.unsigned_abs();
    push_num(line, a / 1_000_000_000);
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(a % 1_000_000_000).as_bytes();
    line.push(b'.');
    line.extend(std::iter::repeat_n(b'0', 9 - digits.len()));
    line.extend_from_slice(digits);
}

/// Human-friendly bits per second.
pub(crate) fn bps(v: f64) -> String {
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

/// Human-friendly byte count.
pub(crate) fn bytes(v: u64) -> String {
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

/// Milliseconds with 3 decimals.
pub(crate) fn ms(ns: i64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(ns: i64) -> String {
        let mut v = Vec::new();
        push_secs(&mut v, ns);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn seconds_like_tshark() {
        assert_eq!(secs(4_439_000), "0.004439000");
        assert_eq!(secs(12_000_000_001), "12.000000001");
        assert_eq!(secs(-5), "-0.000000005");
        assert_eq!(secs(0), "0.000000000");
    }
}
