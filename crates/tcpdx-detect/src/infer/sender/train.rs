//! ACK trains: runs of ACKs that advance `snd_una` close together. The data they
//! acknowledge left the bottleneck back to back, so a train's rate is the path's capacity
//! even when the sender never filled the path (a flight held by its send buffer crosses
//! the bottleneck as one burst, and the ACK clock keeps its spacing round after round).
//!
//! A train ends at an ACK more than [`TRAIN_GAP_RTT_DIVISOR`]th of the path round trip
//! after the previous one, or at an ACK of retransmitted data (a cumulative jump over a
//! repaired hole is no rate). Its rate is the bytes acknowledged after its first ACK over
//! the time from its first ACK to its last.

/// ACKs further apart than the path RTT divided by this end a train (tcpdx choice: RACK's
/// reordering window, a quarter of the RTT; a held flight's trains are separated by most
/// of a round trip).
pub const TRAIN_GAP_RTT_DIVISOR: i64 = 4;
/// Segments a train must acknowledge (after its first ACK) to measure a rate (tcpdx
/// choice: three delayed ACKs of two segments; a 16 KB send buffer's flight of about ten
/// segments still makes a train).
pub const TRAIN_MIN_SEGMENTS: u64 = 6;
/// Trains whose rates are kept per direction (tcpdx choice: the median of the first
/// thousands is the path's; memory stays bounded).
pub const MAX_TRAINS: usize = 4096;

/// The ACK trains of one direction's data.
#[derive(Clone, Debug, Default)]
pub struct AckTrains {
    /// Time of the open train's first and latest ACK (0: none open).
    first: i64,
    last: i64,
    /// Bytes acknowledged after the open train's first ACK.
    bytes: u64,
    /// Rates of the finished trains (bits/s), at most [`MAX_TRAINS`].
    rates: Vec<f32>,
}

impl AckTrains {
    /// An ACK at `ts` that newly acknowledged `acked` bytes (`karn`: of retransmitted
    /// data), on a path of `rtt` ns (0 unknown: no train), with segments of `mss` bytes.
    #[inline]
    pub fn on_ack(&mut self, ts: i64, acked: u64, karn: bool, rtt: i64, mss: u32) {
        if self.first != 0 && !karn && rtt > 0 && ts - self.last <= rtt / TRAIN_GAP_RTT_DIVISOR {
            self.bytes += acked;
            self.last = ts;
            return;
        }
        self.close(mss);
        if karn || rtt <= 0 {
            self.first = 0;
        } else {
            self.first = ts;
            self.last = ts;
        }
    }

    /// Ends the open train, keeping its rate if it was long enough (in segments: the MSS
    /// option is often a little more than a segment's payload).
    fn close(&mut self, mss: u32) {
        let span = self.last - self.first;
        if self.first != 0
            && span > 0
            && self.bytes.div_ceil(u64::from(mss.max(1))) >= TRAIN_MIN_SEGMENTS
            && self.rates.len() < MAX_TRAINS
        {
            self.rates
                .push((self.bytes as f64 * 8e9 / span as f64) as f32);
        }
        self.first = 0;
        self.bytes = 0;
    }

    /// Ends the open train (at the end of the capture).
    pub fn finish(&mut self, mss: u32) {
        self.close(mss);
    }

    /// Trains measured.
    pub fn count(&self) -> usize {
        self.rates.len()
    }

    /// Median train rate (bits/s; 0 with no train): the path's capacity.
    pub fn median_bps(&self) -> f64 {
        if self.rates.is_empty() {
            return 0.0;
        }
        let mut v = self.rates.clone();
        let mid = v.len() / 2;
        let (_, m, _) = v.select_nth_unstable_by(mid, f32::total_cmp);
        f64::from(*m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;
    const US: i64 = 1_000;
    const T0: i64 = 1_000 * MS;

    /// A train of `n` ACKs of 2 segments of 1000 bytes each, `gap` apart, from `t`.
    fn train(t: &mut AckTrains, from: i64, n: i64, gap: i64, rtt: i64) {
        for i in 0..n {
            t.on_ack(from + i * gap, 2000, false, rtt, 1000);
        }
    }

    #[test]
    fn a_train_measures_the_spacing_of_its_acks() {
        let rtt = 20 * MS;
        let mut t = AckTrains::default();
        // 2000 bytes every 100 us = 160 Mbit/s; the next train a round trip later.
        train(&mut t, T0, 11, 100 * US, rtt);
        train(&mut t, T0 + rtt, 11, 100 * US, rtt);
        t.finish(1000);
        assert_eq!(t.count(), 2);
        assert!((t.median_bps() - 160e6).abs() < 1e3, "{}", t.median_bps());
    }

    #[test]
    fn the_gap_that_ends_a_train_is_a_quarter_of_the_rtt() {
        let rtt = 20 * MS;
        let gap = rtt / TRAIN_GAP_RTT_DIVISOR;
        // ACKs exactly a quarter RTT apart: one train of 10 x 2000 bytes over 10 gaps.
        let mut t = AckTrains::default();
        train(&mut t, T0, 11, gap, rtt);
        t.finish(1000);
        assert_eq!(t.count(), 1);
        // One ns more: every ACK its own train, none long enough.
        let mut t = AckTrains::default();
        train(&mut t, T0, 11, gap + 1, rtt);
        t.finish(1000);
        assert_eq!(t.count(), 0);
    }

    #[test]
    fn a_train_needs_its_minimum_segments() {
        let rtt = 20 * MS;
        let acks = (TRAIN_MIN_SEGMENTS / 2) as i64;
        // The first ACK's bytes do not count: acks + 1 ACKs of 2 segments reach the minimum.
        for (n, want) in [(acks, 0), (acks + 1, 1), (acks + 2, 1)] {
            let mut t = AckTrains::default();
            train(&mut t, T0, n, 100 * US, rtt);
            t.finish(1000);
            assert_eq!(t.count(), want, "{n} ACKs");
        }
    }

    #[test]
    fn retransmitted_data_and_an_unknown_rtt_end_trains() {
        let rtt = 20 * MS;
        let mut t = AckTrains::default();
        // Two short trains around a cumulative ACK of a repaired hole, which joins neither
        // (with it, either would be long enough).
        train(&mut t, T0, 3, 100 * US, rtt);
        t.on_ack(T0 + 300 * US, 50_000, true, rtt, 1000);
        train(&mut t, T0 + 400 * US, 3, 100 * US, rtt);
        t.finish(1000);
        assert_eq!(t.count(), 0);
        let mut t = AckTrains::default();
        train(&mut t, T0, 20, 100 * US, 0);
        t.finish(1000);
        assert_eq!((t.count(), t.median_bps()), (0, 0.0));
    }

    #[test]
    fn the_median_ignores_a_compressed_train() {
        let rtt = 20 * MS;
        let mut t = AckTrains::default();
        for k in 0..3 {
            train(&mut t, T0 + k * rtt, 11, 100 * US, rtt);
        }
        // ACKs bunched 1 us apart (compression): a rate far above the path's.
        train(&mut t, T0 + 3 * rtt, 11, US, rtt);
        t.finish(1000);
        assert_eq!(t.count(), 4);
        assert!((t.median_bps() - 160e6).abs() < 1e3, "{}", t.median_bps());
    }

    #[test]
    fn rates_kept_are_bounded() {
        let rtt = 20 * MS;
        let mut t = AckTrains::default();
        for k in 0..(MAX_TRAINS as i64 + 10) {
            train(&mut t, T0 + k * rtt, 11, 100 * US, rtt);
        }
        t.finish(1000);
        assert_eq!(t.count(), MAX_TRAINS);
    }
}
