//! TCP sequence numbers: modulo-2^32 arithmetic with explicit comparisons.

/// A raw 32-bit TCP sequence or acknowledgement number.
///
/// Comparisons are modular (RFC 793 section 3.3), so this type deliberately does not
/// implement `PartialOrd`: modular order is not transitive and `sort`/`max` would misbehave.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct SeqNum(pub u32);

impl SeqNum {
    /// `self - other` as a signed distance in sequence space.
    pub const fn diff(self, other: SeqNum) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }
    /// True if `self` comes strictly before `other` (Wireshark's `LT_SEQ`).
    pub const fn is_before(self, other: SeqNum) -> bool {
        self.diff(other) < 0
    }
    /// True if `self` comes strictly after `other` (Wireshark's `GT_SEQ`).
    ///
    /// Defined as `other - self < 0`, exactly like Wireshark, so that at a distance of
    /// exactly 2^31 both `is_before` and `is_after` hold, as they do in tshark.
    pub const fn is_after(self, other: SeqNum) -> bool {
        other.diff(self) < 0
    }
    /// True if `self` is `other` or comes before it (Wireshark's `LE_SEQ`).
    pub const fn is_at_or_before(self, other: SeqNum) -> bool {
        self.diff(other) <= 0
    }
    /// `self + n` modulo 2^32.
    pub const fn add(self, n: u32) -> SeqNum {
        SeqNum(self.0.wrapping_add(n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordering_wraps() {
        let a = SeqNum(u32::MAX - 10);
        let b = a.add(20);
        assert_eq!(b, SeqNum(9));
        assert!(a.is_before(b));
        assert!(b.is_after(a));
        assert_eq!(b.diff(a), 20);
        assert_eq!(a.diff(b), -20);
        assert!(a.is_at_or_before(a) && !a.is_after(a) && !a.is_before(a));
        // Half-way round: Wireshark's macros call it both before and after.
        let half = SeqNum(a.0.wrapping_add(1 << 31));
        assert!(half.is_after(a) && half.is_before(a));
    }
}
