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
    /// True if `self` comes strictly before `other` (modulo 2^32).
    pub const fn is_before(self, other: SeqNum) -> bool {
        self.diff(other) < 0
    }
    /// True if `self` comes strictly after `other` (modulo 2^32).
    pub const fn is_after(self, other: SeqNum) -> bool {
        self.diff(other) > 0
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
    }
}
