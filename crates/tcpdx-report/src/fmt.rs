//! Small number formatters shared by renderers.

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
