//! Zero-window periods: the receiver advertised a window of 0 and the sender waited.
//!
//! States: `Open` (no zero window, `zw` is `None`) and `Closed` (`zw` holds the period since
//! the first zero advertisement). Transitions: a zero window from the receiver closes it; the
//! first non-zero window after it, or the end of the capture, records the period. SYNs and
//! RSTs carry no window worth reading. Probes the sender sends meanwhile are counted.

use super::{MAX_EPISODES, SenderState, take_some};
use tcpdx_core::{AnalysisFlags as F, SegmentAnalysis};

/// A period during which the receiver advertised a zero window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZeroWindow {
    /// First zero-window advertisement.
    pub start: i64,
    /// Its frame.
    pub start_frame: u64,
    /// First non-zero window after it (or the last frame seen).
    pub end: i64,
    /// Frame of the window update (0 if the capture ended first).
    pub end_frame: u64,
    /// Zero-window probes the sender sent meanwhile.
    pub probes: u32,
}

/// TCP flags whose segments' windows are not the receiver's buffer: SYN (unscaled) and RST.
const SYN_RST: u16 = 0x02 | 0x04;

impl SenderState {
    /// The receiver's window in `a` (a segment of the peer): opens or closes a period.
    pub(super) fn track_zero_window(&mut self, a: &SegmentAnalysis) {
        if a.tcp_flags & SYN_RST != 0 {
            return;
        }
        if a.window == 0 {
            if self.zw.is_none() {
                self.zw = Some(Box::new(ZeroWindow {
                    start: a.ts.0,
                    start_frame: a.frame.0,
                    end: a.ts.0,
                    end_frame: 0,
                    probes: 0,
                }));
            }
        } else if let Some(mut z) = take_some(&mut self.zw) {
            z.end = a.ts.0;
            z.end_frame = a.frame.0;
            self.zero_windows.push_capped(*z, MAX_EPISODES);
        }
    }

    /// A data segment `a` of this side: a probe of the closed window is counted.
    #[inline]
    pub(super) fn count_window_probe(&mut self, a: &SegmentAnalysis) {
        if a.flags.has(F::ZERO_WINDOW_PROBE)
            && let Some(z) = &mut self.zw
        {
            z.probes += 1;
        }
    }

    /// End of input at `last_ts`: a window still closed is recorded as closed until then.
    pub(super) fn finish_zero_window(&mut self, last_ts: i64) {
        if let Some(mut z) = self.zw.take() {
            z.end = last_ts;
            self.zero_windows.push_capped(*z, MAX_EPISODES);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::infer::sender::script::{Feed, MS, MSS, T0, ack_row};

    fn window(f: &mut Feed, t: i64, window: u64, tcp_flags: u16) -> u64 {
        let mut a = ack_row(t, 1);
        a.window = window;
        a.tcp_flags |= tcp_flags;
        f.receive(a, &[])
    }

    #[test]
    fn a_zero_window_lasts_until_the_first_window_above_zero() {
        for (next, closed) in [(0, false), (1, true), (2, true)] {
            let mut f = Feed::new(10 * MS);
            f.data(T0, 1, MSS, 0);
            let start = window(&mut f, T0 + 10 * MS, 0, 0);
            f.data(T0 + 20 * MS, 1001, 1, F::ZERO_WINDOW_PROBE);
            let update = window(&mut f, T0 + 30 * MS, next, 0);
            assert_eq!(
                f.s.zero_windows.len(),
                usize::from(closed),
                "next window {next}"
            );
            f.s.finish(T0 + 40 * MS);
            let z = f.s.zero_windows.get(0).unwrap();
            assert_eq!((z.start, z.start_frame, z.probes), (T0 + 10 * MS, start, 1));
            let end = if closed {
                (T0 + 30 * MS, update)
            } else {
                (T0 + 40 * MS, 0)
            };
            assert_eq!((z.end, z.end_frame), end, "next window {next}");
        }
    }

    #[test]
    fn syn_and_rst_windows_neither_open_nor_close_a_period() {
        for flag in [0x02, 0x04] {
            let mut f = Feed::new(10 * MS);
            window(&mut f, T0, 0, flag);
            f.s.finish(T0 + MS);
            assert!(f.s.zero_windows.is_empty(), "flags {flag:#x}");
            window(&mut f, T0, 0, 0);
            window(&mut f, T0 + MS, 100, flag);
            f.s.finish(T0 + 2 * MS);
            assert_eq!(
                f.s.zero_windows.get(0).unwrap().end_frame,
                0,
                "flags {flag:#x}"
            );
        }
    }
}
