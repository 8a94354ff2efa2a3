//! Small number formatters shared by renderers.

/// Seconds with nanosecond precision, like tshark's `frame.time_relative` (`0.004439000`).
pub(crate) fn secs9(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs();
    format!("{sign}{}.{:09}", a / 1_000_000_000, a % 1_000_000_000)
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

    #[test]
    fn seconds_like_tshark() {
        assert_eq!(secs9(4_439_000), "0.004439000");
        assert_eq!(secs9(12_000_000_001), "12.000000001");
        assert_eq!(secs9(-5), "-0.000000005");
    }
}
