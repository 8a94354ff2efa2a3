//! PDU boundaries in one direction's byte stream, for length-prefixed protocols.
//!
//! A [`Framer`] reads a PDU's head, asks the protocol ([`PduHandler`]) for the PDU's total
//! length and how many leading bytes it needs, keeps only those (bounded), skips the rest
//! and hands each complete PDU to the handler. Small PDUs wholly inside one delivered chunk
//! are handed over without copying.
//!
//! Gaps ([`ByteSink::gap`]): a gap inside a PDU's body only damages that PDU (its length is
//! known, so the next boundary is too); a gap that covers a head or runs past the end of
//! the PDU loses the framing. The framer then scans the following bytes for a position
//! where [`PduHandler::plausible`] accepts a PDU start, and carries on from there.
//!
//! It gives up after twice [`PduHandler::max_pdu_len`] contiguous bytes without one: a
//! stream of the protocol holds a PDU start in every stretch of that length, so such a
//! direction carries something else (SMB1 on port 445, replies to calls the capture never
//! saw) and its bytes are skipped unread. Scanning them cost up to 1 ns a byte (6x the
//! analysis of a full-payload capture); no plausible start was ever left behind there.

use crate::reassembly::{At, ByteSink};

/// The protocol side of a [`Framer`].
pub trait PduHandler {
    /// Bytes needed to know a PDU's length.
    fn head_len(&self) -> usize;
    /// Total length (head included) of the PDU starting with `head` (exactly `head_len`
    /// bytes), or `None` if these bytes cannot start a PDU.
    fn pdu_len(&mut self, head: &[u8]) -> Option<u64>;
    /// How many leading bytes of this PDU the handler needs (clamped to `head_len..=total`).
    fn keep_len(&self, head: &[u8], total: u64) -> usize;
    /// Bytes [`PduHandler::plausible`] needs.
    fn probe_len(&self) -> usize;
    /// True if a PDU plausibly starts at `bytes[0]` (`bytes.len() >= probe_len()`); used
    /// to find the framing again after a gap, so stricter than `pdu_len`.
    fn plausible(&self, bytes: &[u8]) -> bool;
    /// What every PDU's first byte is, if the protocol fixes it: `plausible` is then only
    /// asked about positions holding such a byte (it must reject every other position).
    fn first_byte(&self) -> Option<FirstByte> {
        None
    }
    /// The longest PDU `pdu_len` accepts, head included (the scan's give-up bound; see
    /// the module doc). Unbounded by default: the scan never gives up.
    fn max_pdu_len(&self) -> u64 {
        u64::MAX
    }
    /// One complete PDU.
    fn pdu(&mut self, pdu: &Pdu<'_>);
    /// The framing was lost at `at` (bytes that cannot start a PDU, or a gap over a head).
    fn lost(&mut self, _at: At) {}
}

/// What every PDU's first byte is ([`PduHandler::first_byte`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirstByte {
    /// This byte (found with `memchr`).
    Is(u8),
    /// A byte whose low seven bits are below this bound (at most 128).
    LowBitsBelow(u8),
}

/// A complete PDU as the framer hands it over.
#[derive(Clone, Copy, Debug)]
pub struct Pdu<'a> {
    /// Its leading bytes (at most the keep length; shorter if a gap fell inside them).
    pub head: &'a [u8],
    /// Total length.
    pub len: u64,
    /// A gap fell inside the PDU.
    pub damaged: bool,
    /// Where its first byte became available.
    pub first: At,
    /// Where its last byte became available (Wireshark dissects the PDU at this frame).
    pub last: At,
    /// Some of its bytes did not arrive in order (see [`ByteSink::data`]).
    pub repaired: bool,
}

#[derive(Clone, Copy, Debug)]
enum State {
    /// At a PDU boundary (or inside a head being collected into `buf`).
    Head { first: Option<At> },
    /// Inside a PDU: `done` bytes of `total` consumed, the first `keep` are kept in `buf`.
    Body {
        total: u64,
        done: u64,
        keep: usize,
        damaged: bool,
        first: At,
        repaired: bool,
    },
    /// Framing lost: scanning for a plausible PDU start; `buf` holds a short carry.
    Lost {
        /// Contiguous bytes scanned so far (a gap starts the count again).
        scanned: u64,
    },
    /// No plausible start in twice the longest PDU: every byte is skipped unread.
    GaveUp,
}

/// Counters of one framer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FramerStats {
    /// PDUs handed over.
    pub pdus: u64,
    /// PDUs with a gap inside.
    pub damaged: u64,
    /// Times the framing was lost.
    pub lost: u64,
    /// Times it was found again.
    pub resynced: u64,
    /// Bytes skipped while the framing was lost.
    pub skipped_bytes: u64,
    /// Times the scan gave up (see the module doc).
    pub gave_up: u64,
}

/// Splits one direction's bytes into PDUs. See the module doc.
#[derive(Debug)]
pub struct Framer {
    state: State,
    buf: Vec<u8>,
    stats: FramerStats,
    /// The chunk being fed arrived out of order.
    input_repaired: bool,
    /// The head being collected (state `Head`) saw out-of-order bytes.
    head_repaired: bool,
}

impl Framer {
    /// A framer at a PDU boundary (`synced`, e.g. after a SYN) or looking for one.
    pub fn new(synced: bool) -> Self {
        Self {
            state: if synced {
                State::Head { first: None }
            } else {
                State::Lost { scanned: 0 }
            },
            buf: Vec::new(),
            stats: FramerStats::default(),
            input_repaired: false,
            head_repaired: false,
        }
    }

    /// Marks the chunks fed from now on as delivered out of order (or not).
    pub fn set_repaired(&mut self, repaired: bool) {
        self.input_repaired = repaired;
    }

    /// Counters so far.
    pub fn stats(&self) -> FramerStats {
        self.stats
    }

    /// The state's name (tests).
    #[cfg(test)]
    fn state_name(&self) -> &'static str {
        match self.state {
            State::Head { .. } => "head",
            State::Body { .. } => "body",
            State::Lost { .. } => "lost",
            State::GaveUp => "gave up",
        }
    }

    /// True while the framing is lost (or given up).
    pub fn is_lost(&self) -> bool {
        matches!(self.state, State::Lost { .. } | State::GaveUp)
    }

    /// The next `len` bytes of the stream, of which only the first `captured.len()` (fewer)
    /// were captured, the rest being a gap: if the framing is lost, nothing is carried and no
    /// PDU can start in the captured bytes, counts them as [`Framer::data`] then
    /// [`Framer::gap`] would (the handler would hear nothing of them) and returns true; else
    /// changes nothing and returns false, and the bytes are fed as usual. On a bulk transfer
    /// whose payloads the snap length cut, this is every segment: it spares them the
    /// reassembly and framing path.
    pub fn skip_cut<H: PduHandler>(&mut self, captured: &[u8], len: u64, h: &H) -> bool {
        let cap = captured.len() as u64;
        if cap >= len || !self.is_lost() || !self.buf.is_empty() {
            return false;
        }
        if matches!(self.state, State::GaveUp) {
            self.stats.skipped_bytes += len;
            return true;
        }
        let limit = (captured.len() + 1).saturating_sub(h.probe_len().max(1));
        if find_start(captured, limit, h).is_some() {
            return false;
        }
        // `scan` skips the positions it judged and carries the rest, which the gap drops.
        self.stats.skipped_bytes += limit.min(captured.len()) as u64 + (len - cap);
        true
    }

    /// Feeds the next bytes of the stream.
    pub fn data<H: PduHandler>(&mut self, bytes: &[u8], at: At, h: &mut H) {
        let mut rest = bytes;
        while !rest.is_empty() {
            let used = match self.state {
                State::Head { first } => self.head(rest, first.unwrap_or(at), at, h),
                State::Body { .. } => self.body(rest, at, h),
                State::Lost { .. } => self.scan(rest, at, h),
                State::GaveUp => {
                    self.stats.skipped_bytes += rest.len() as u64;
                    rest.len()
                }
            };
            // Each step consumes at most what it was given; past the end means done.
            rest = rest.get(used..).unwrap_or_default();
        }
    }

    /// The next `len` bytes of the stream are missing.
    pub fn gap<H: PduHandler>(&mut self, len: u64, at: At, h: &mut H) {
        match self.state {
            State::Head { .. } => self.lose(at, h),
            State::Body {
                total,
                done,
                keep,
                first,
                repaired,
                ..
            } => {
                let remaining = total - done;
                // Bytes after the hole are not contiguous with the kept ones: stop keeping.
                let keep = keep.min(self.buf.len());
                if len < remaining {
                    self.state = State::Body {
                        total,
                        done: done + len,
                        keep,
                        damaged: true,
                        first,
                        repaired,
                    };
                } else {
                    self.finish_pdu(total, true, first, at, repaired, h);
                    if len > remaining {
                        self.lose(at, h);
                    }
                }
            }
            State::Lost { .. } => {
                self.buf.clear();
                self.stats.skipped_bytes += len;
                // What follows is not contiguous with what was scanned.
                self.state = State::Lost { scanned: 0 };
            }
            State::GaveUp => self.stats.skipped_bytes += len,
        }
    }

    fn lose<H: PduHandler>(&mut self, at: At, h: &mut H) {
        self.buf.clear();
        self.state = State::Lost { scanned: 0 };
        self.stats.lost += 1;
        h.lost(at);
    }

    /// At a boundary or inside a head: returns the bytes consumed.
    fn head<H: PduHandler>(&mut self, bytes: &[u8], first: At, at: At, h: &mut H) -> usize {
        let hl = h.head_len().max(1);
        if self.buf.is_empty()
            && let Some(head) = bytes.get(..hl)
        {
            // Fast path: the head is here; maybe the whole PDU too.
            let Some(total) = h.pdu_len(head).filter(|&t| t >= hl as u64) else {
                self.lose(at, h);
                self.stats.skipped_bytes += 1;
                return 1; // scan from the next byte
            };
            let keep = clamp_keep(h.keep_len(head, total), hl, total);
            // keep <= total <= bytes.len(), so the `get` always succeeds here.
            if total <= bytes.len() as u64
                && let Some(kept) = bytes.get(..keep)
            {
                let pdu = Pdu {
                    head: kept,
                    len: total,
                    damaged: false,
                    first: at,
                    last: at,
                    repaired: self.input_repaired,
                };
                self.stats.pdus += 1;
                h.pdu(&pdu);
                return total as usize;
            }
            self.state = State::Body {
                total,
                done: 0,
                keep,
                damaged: false,
                first: at,
                repaired: self.input_repaired,
            };
            return 0;
        }
        // The buffer holds less than a head here; saturating, so a broken invariant costs
        // a rescan, not a panic.
        let need = hl.saturating_sub(self.buf.len());
        let take = bytes.get(..need).unwrap_or(bytes);
        let n = take.len();
        if self.buf.is_empty() {
            self.head_repaired = false;
        }
        self.head_repaired |= self.input_repaired;
        self.buf.extend_from_slice(take);
        if self.buf.len() < hl {
            self.state = State::Head { first: Some(first) };
            return n;
        }
        let head = std::mem::take(&mut self.buf);
        match h.pdu_len(&head).filter(|&t| t >= hl as u64) {
            None => {
                self.lose(at, h);
                // Rescan the collected head from its second byte.
                self.stats.skipped_bytes += 1;
                let rest = head.get(1..).unwrap_or_default().to_vec();
                self.data(&rest, at, h);
            }
            Some(total) => {
                let keep = clamp_keep(h.keep_len(&head, total), hl, total);
                self.buf = head;
                let repaired = self.head_repaired;
                self.state = State::Body {
                    total,
                    done: hl as u64,
                    keep,
                    damaged: false,
                    first,
                    repaired,
                };
                if total == hl as u64 {
                    self.finish_pdu(total, false, first, at, repaired, h);
                }
            }
        }
        n
    }

    /// Inside a PDU body: returns the bytes consumed.
    fn body<H: PduHandler>(&mut self, bytes: &[u8], at: At, h: &mut H) -> usize {
        let State::Body {
            total,
            done,
            keep,
            damaged,
            first,
            repaired,
        } = self.state
        else {
            return 0;
        };
        let repaired = repaired || self.input_repaired;
        let n = (total - done).min(bytes.len() as u64) as usize;
        if (done as usize) < keep && self.buf.len() == done as usize {
            let k = (keep - done as usize).min(n);
            self.buf.extend_from_slice(bytes.get(..k).unwrap_or(bytes));
        }
        let done = done + n as u64;
        if done == total {
            self.finish_pdu(total, damaged, first, at, repaired, h);
        } else {
            self.state = State::Body {
                total,
                done,
                keep,
                damaged,
                first,
                repaired,
            };
        }
        n
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_pdu<H: PduHandler>(
        &mut self,
        total: u64,
        damaged: bool,
        first: At,
        at: At,
        repaired: bool,
        h: &mut H,
    ) {
        let pdu = Pdu {
            head: &self.buf,
            len: total,
            damaged,
            first,
            last: at,
            repaired,
        };
        self.stats.pdus += 1;
        if damaged {
            self.stats.damaged += 1;
        }
        h.pdu(&pdu);
        self.buf.clear();
        self.state = State::Head { first: None };
    }

    /// Framing lost: looks for a plausible PDU start; returns the bytes consumed.
    fn scan<H: PduHandler>(&mut self, bytes: &[u8], at: At, h: &mut H) -> usize {
        let probe = h.probe_len().max(1);
        if !self.buf.is_empty() {
            // Positions starting inside the carry.
            let mut window = std::mem::take(&mut self.buf);
            let carried = window.len();
            window.extend_from_slice(bytes.get(..probe).unwrap_or(bytes));
            for i in 0..carried {
                let tail = window.get(i..).unwrap_or_default();
                if tail.len() < probe {
                    // Not enough bytes yet to judge this position (all of `bytes` is in
                    // the window): keep carrying.
                    self.stats.skipped_bytes += i as u64;
                    window.drain(..i);
                    self.buf = window;
                    self.scanned(bytes.len(), h);
                    return bytes.len();
                }
                if h.plausible(tail) {
                    self.stats.resynced += 1;
                    self.stats.skipped_bytes += i as u64;
                    self.state = State::Head { first: None };
                    let from_carry = window.get(i..carried).unwrap_or_default().to_vec();
                    self.data(&from_carry, at, h);
                    return 0;
                }
            }
            self.stats.skipped_bytes += carried as u64;
            // Keep the allocation for the next carry.
            window.clear();
            self.buf = window;
        }
        // Positions below `limit` can be judged; the bytes from `limit` on are carried.
        let limit = (bytes.len() + 1).saturating_sub(probe);
        if let Some(i) = find_start(bytes, limit, h) {
            self.stats.resynced += 1;
            self.stats.skipped_bytes += i as u64;
            self.state = State::Head { first: None };
            return i;
        }
        if limit < bytes.len() {
            self.stats.skipped_bytes += limit as u64;
            // Into the kept buffer: no allocation per segment while the framing is lost.
            self.buf.clear();
            self.buf
                .extend_from_slice(bytes.get(limit..).unwrap_or_default());
        } else {
            self.stats.skipped_bytes += bytes.len() as u64;
        }
        self.scanned(bytes.len(), h);
        bytes.len()
    }

    /// Counts `n` more bytes scanned without a start; past the bound, gives up (the carry,
    /// never judged, is skipped with the rest).
    fn scanned<H: PduHandler>(&mut self, n: usize, h: &H) {
        let State::Lost { scanned } = self.state else {
            return;
        };
        let scanned = scanned.saturating_add(n as u64);
        let bound = h
            .max_pdu_len()
            .saturating_add(h.probe_len() as u64)
            .saturating_mul(2);
        if scanned > bound {
            self.stats.skipped_bytes += self.buf.len() as u64;
            self.buf.clear();
            self.stats.gave_up += 1;
            self.state = State::GaveUp;
        } else {
            self.state = State::Lost { scanned };
        }
    }
}

/// The first position below `limit` where `h` finds a PDU start plausible.
fn find_start<H: PduHandler>(bytes: &[u8], limit: usize, h: &H) -> Option<usize> {
    // Skip straight to the next position with a byte that can start a PDU (on a snaplen-cut
    // bulk transfer, calling `plausible` at every byte was most of the framer's time). One
    // loop per way of skipping: a loop that chose its way at every byte ran 40% slower.
    match h.first_byte() {
        Some(FirstByte::Is(b)) => find_start_by(bytes, limit, h, |ahead| {
            if may_hold(ahead, b) {
                memchr::memchr(b, ahead)
            } else {
                None
            }
        }),
        Some(FirstByte::LowBitsBelow(n)) => {
            find_start_by(bytes, limit, h, |ahead| find_below(ahead, n))
        }
        None => (0..limit).find(|&i| h.plausible(bytes.get(i..).unwrap_or_default())),
    }
}

/// [`find_start`], with `next` giving the first position in its argument that may start a
/// PDU.
#[inline(always)]
fn find_start_by<H: PduHandler>(
    bytes: &[u8],
    limit: usize,
    h: &H,
    next: impl Fn(&[u8]) -> Option<usize>,
) -> Option<usize> {
    let mut i = 0;
    while i < limit {
        i += next(bytes.get(i..limit).unwrap_or_default())?;
        if h.plausible(bytes.get(i..).unwrap_or_default()) {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// Word tricks of the scan ([`may_hold`], [`find_below`]): 0x01, 0x7f and 0x80 in every
/// byte of a word.
const ONES: u64 = 0x0101_0101_0101_0101;
const LOWS: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// False if `hay` does not hold `b`, read a word at a time when it is short (true: it may,
/// or it is too long to bother). Hand-written in front of `memchr`, whose call cost ~70
/// instructions on the few dozen bytes a snap length leaves of a segment, and which a
/// snaplen-cut bulk transfer paid for every one of them; this costs about 20.
#[inline]
fn may_hold(hay: &[u8], b: u8) -> bool {
    // High bit of a byte set where that byte of `w` equals `b` (the byte of `w ^ splat` is
    // zero), and perhaps above it, never in a word without one.
    let splat = ONES * u64::from(b);
    let hits = |w: &[u8; 8]| {
        let x = u64::from_le_bytes(*w) ^ splat;
        x.wrapping_sub(ONES) & !x
    };
    if hay.len() > 64 {
        return true;
    }
    let Some(last) = hay.last_chunk::<8>() else {
        return hay.contains(&b);
    };
    let (words, _) = hay.as_chunks::<8>();
    let any = words.iter().fold(hits(last), |acc, w| acc | hits(w));
    any & HIGHS != 0
}

/// The first position in `hay` of a byte whose low seven bits are below `n` (at most 128),
/// eight bytes at a time. Hand-written: `memchr` looks for given bytes, not a range; a
/// `plausible` call at every byte made the scan of an RPC stream 1.1 ns a byte.
fn find_below(hay: &[u8], n: u8) -> Option<usize> {
    let n = n.min(128);
    let (words, rest) = hay.as_chunks::<8>();
    for (k, w) in words.iter().enumerate() {
        // Bytes of at most 127: subtracting `n` from each borrows (sets its high bit) where
        // it is below `n`; a borrow can only flag bytes above the first one flagged, so the
        // lowest flag is exact.
        let x = u64::from_le_bytes(*w) & LOWS;
        let hits = x.wrapping_sub(ONES * u64::from(n)) & !x & HIGHS;
        if hits != 0 {
            return Some(k * 8 + (hits.trailing_zeros() / 8) as usize);
        }
    }
    let at = words.len() * 8;
    rest.iter().position(|&b| b & 0x7f < n).map(|i| at + i)
}

fn clamp_keep(keep: usize, head_len: usize, total: u64) -> usize {
    keep.max(head_len)
        .min(usize::try_from(total).unwrap_or(usize::MAX))
}

/// A framer and its handler together, as a [`ByteSink`].
pub struct Framed<'a, H> {
    /// The framer.
    pub framer: &'a mut Framer,
    /// The handler.
    pub handler: &'a mut H,
}

impl<H: PduHandler> ByteSink for Framed<'_, H> {
    fn data(&mut self, bytes: &[u8], at: At, repaired: bool) {
        self.framer.set_repaired(repaired);
        self.framer.data(bytes, at, self.handler);
        self.framer.set_repaired(false);
    }
    fn gap(&mut self, len: u64, at: At) {
        self.framer.gap(len, at, self.handler);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpdx_wire::{FrameNo, Timestamp};

    /// Toy protocol: 0xAB, length (u16 BE, total incl. 3-byte head), payload.
    #[derive(Default)]
    struct Toy {
        pdus: Vec<(Vec<u8>, u64, bool, u64, u64)>,
        lost: usize,
        keep: usize,
        /// Announce the 0xAB first byte to the scan.
        first: bool,
        /// Announce a bound on the first byte's low bits instead (0xAB: 43).
        below: Option<u8>,
        /// Announce the longest PDU (the scan's give-up bound).
        max_pdu: Option<u64>,
    }
    impl PduHandler for Toy {
        fn head_len(&self) -> usize {
            3
        }
        fn pdu_len(&mut self, head: &[u8]) -> Option<u64> {
            (head[0] == 0xAB).then(|| u64::from(u16::from_be_bytes([head[1], head[2]])))
        }
        fn keep_len(&self, _head: &[u8], _total: u64) -> usize {
            self.keep
        }
        fn probe_len(&self) -> usize {
            4
        }
        fn plausible(&self, b: &[u8]) -> bool {
            b[0] == 0xAB && b[1] == 0 && b[3] == 0xCD
        }
        fn first_byte(&self) -> Option<FirstByte> {
            match (self.first, self.below) {
                (true, _) => Some(FirstByte::Is(0xAB)),
                (false, below) => below.map(FirstByte::LowBitsBelow),
            }
        }
        fn max_pdu_len(&self) -> u64 {
            self.max_pdu.unwrap_or(u64::MAX)
        }
        fn pdu(&mut self, p: &Pdu<'_>) {
            self.pdus.push((
                p.head.to_vec(),
                p.len,
                p.damaged,
                p.first.frame.0,
                p.last.frame.0,
            ));
        }
        fn lost(&mut self, _at: At) {
            self.lost += 1;
        }
    }

    fn at(n: u64) -> At {
        At {
            frame: FrameNo(n),
            ts: Timestamp(n as i64),
        }
    }

    fn toy_pdu(len: u16, fill: u8) -> Vec<u8> {
        let mut v = vec![0xAB, (len >> 8) as u8, len as u8];
        v.push(0xCD);
        v.extend(std::iter::repeat_n(fill, usize::from(len) - 4));
        v
    }

    fn toy_stream() -> Vec<u8> {
        let mut s = Vec::new();
        for (i, len) in [4u16, 40, 9, 300, 5].iter().enumerate() {
            s.extend(toy_pdu(*len, i as u8));
        }
        s
    }

    #[test]
    fn split_at_every_boundary_gives_the_same_pdus() {
        let s = toy_stream();
        let mut whole = Toy {
            keep: 8,
            ..Toy::default()
        };
        let mut f = Framer::new(true);
        f.data(&s, at(1), &mut whole);
        assert_eq!(whole.pdus.len(), 5);
        assert_eq!(
            whole.pdus.iter().map(|p| p.1).collect::<Vec<_>>(),
            [4, 40, 9, 300, 5]
        );
        for a in 0..=s.len() {
            for b in a..=s.len() {
                let mut t = Toy {
                    keep: 8,
                    ..Toy::default()
                };
                let mut f = Framer::new(true);
                f.data(&s[..a], at(1), &mut t);
                f.data(&s[a..b], at(2), &mut t);
                f.data(&s[b..], at(3), &mut t);
                let got: Vec<_> = t.pdus.iter().map(|p| (&p.0, p.1, p.2)).collect();
                let want: Vec<_> = whole.pdus.iter().map(|p| (&p.0, p.1, p.2)).collect();
                assert_eq!(got, want, "split at {a},{b}");
            }
        }
    }

    #[test]
    fn scan_by_first_byte_finds_what_plausible_finds() {
        // Junk (with stray 0xAB bytes) before, between and after PDUs, fed in chunks of
        // every size, with a gap: the same PDUs, losses and counters either way.
        let mut s = vec![1, 0xAB, 2, 0xAB, 0, 7, 3];
        s.extend(toy_stream());
        s.extend([0xAB, 0, 0xAB, 9, 9, 0xAB]);
        s.extend(toy_pdu(12, 7));
        s.extend([0xAB, 0]);
        for chunk in 1..=s.len() {
            let run = |first: bool, below: Option<u8>| {
                let mut t = Toy {
                    keep: 8,
                    first,
                    below,
                    ..Toy::default()
                };
                let mut f = Framer::new(false);
                for (n, c) in s.chunks(chunk).enumerate() {
                    f.data(c, at(n as u64), &mut t);
                    if n == 1 {
                        f.gap(5, at(n as u64), &mut t);
                    }
                }
                (t.pdus, t.lost, f.stats(), f.buf.clone())
            };
            let without = run(false, None);
            // 44: the junk's small bytes pass the bound too, and are judged by `plausible`.
            assert_eq!(run(true, None), without, "first byte, chunks of {chunk}");
            assert_eq!(run(false, Some(44)), without, "bound, chunks of {chunk}");
            assert!(without.2.resynced > 0, "chunks of {chunk}");
        }
    }

    #[test]
    fn a_cut_chunk_skipped_counts_as_data_then_gap() {
        // Junk and a gap lost the framing; then cut chunks (4 of 30 bytes captured), the
        // second holding a plausible start (of a PDU the cut damages: lost again).
        let junk = [1u8, 2, 3];
        let cut = [[9u8, 0xAB, 0, 9], [0xAB, 0, 5, 0xCD], [0xAB, 0, 0xAB, 0]];
        let run = |skip: bool| {
            let mut t = Toy {
                keep: 4,
                ..Toy::default()
            };
            let mut f = Framer::new(false);
            f.data(&junk, at(1), &mut t);
            f.gap(7, at(1), &mut t);
            let mut skipped = Vec::new();
            for (n, c) in cut.iter().enumerate() {
                let n = n as u64 + 2;
                let done = skip && f.skip_cut(c, 30, &t);
                if !done {
                    f.data(c, at(n), &mut t);
                    f.gap(26, at(n), &mut t);
                }
                skipped.push(done);
            }
            (t.pdus, t.lost, f.stats(), f.state_name(), skipped)
        };
        let (fed, skipped) = (run(false), run(true));
        assert_eq!(skipped.4, [true, false, true]);
        assert_eq!(fed.2.resynced, 1);
        assert_eq!(
            (&skipped.0, skipped.1, skipped.2, skipped.3),
            (&fed.0, fed.1, fed.2, fed.3)
        );
    }

    #[test]
    fn only_a_lost_framer_with_nothing_carried_skips() {
        let t = Toy::default();
        let mut f = Framer::new(true);
        assert!(!f.skip_cut(&[1, 2], 10, &t), "synced");
        let mut f = Framer::new(false);
        assert!(!f.skip_cut(&[1, 2, 3, 4], 4, &t), "not cut");
        f.data(&[1, 2, 0xAB], at(1), &mut Toy::default());
        assert!(!f.skip_cut(&[1, 2], 10, &t), "a carry to judge");
        assert_eq!(f.stats().skipped_bytes, 0);
    }

    #[test]
    fn may_hold_is_false_only_without_the_byte() {
        let mut x: u32 = 7;
        for len in 0..=70 {
            for _ in 0..50 {
                let hay: Vec<u8> = (0..len)
                    .map(|_| {
                        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                        // Few distinct values, so that both answers come up.
                        [0, 1, 0x7f, 0x80, 0xff][(x >> 16) as usize % 5]
                    })
                    .collect();
                for b in [0, 1, 0x7f, 0x80, 0xfe, 0xff] {
                    let held = hay.contains(&b);
                    assert!(
                        may_hold(&hay, b) || !held,
                        "{b:#x} in {hay:x?} (length {len})"
                    );
                    if len <= 64 {
                        assert_eq!(may_hold(&hay, b), held, "{b:#x} in {hay:x?}");
                    }
                }
            }
        }
    }

    #[test]
    fn pdu_is_dated_by_its_first_and_last_chunk() {
        let s = toy_pdu(100, 1);
        let mut t = Toy {
            keep: 3,
            ..Toy::default()
        };
        let mut f = Framer::new(true);
        f.data(&s[..2], at(5), &mut t);
        f.data(&s[2..50], at(6), &mut t);
        f.data(&s[50..], at(7), &mut t);
        assert_eq!(t.pdus, vec![(s[..3].to_vec(), 100, false, 5, 7)]);
    }

    #[test]
    fn gap_inside_a_body_damages_only_that_pdu() {
        let a = toy_pdu(100, 1);
        let b = toy_pdu(10, 2);
        let mut t = Toy {
            keep: 6,
            ..Toy::default()
        };
        let mut f = Framer::new(true);
        f.data(&a[..20], at(1), &mut t);
        f.gap(30, at(2), &mut t);
        f.data(&a[50..], at(3), &mut t);
        f.data(&b, at(4), &mut t);
        assert_eq!(t.pdus.len(), 2);
        assert!(t.pdus[0].2);
        assert_eq!(t.pdus[0].0, a[..6].to_vec());
        assert!(!t.pdus[1].2);
        assert_eq!(t.lost, 0);
    }

    #[test]
    fn gap_over_a_head_resynchronises() {
        let a = toy_pdu(10, 1);
        let b = toy_pdu(20, 2);
        let c = toy_pdu(30, 3);
        let mut t = Toy {
            keep: 4,
            ..Toy::default()
        };
        let mut f = Framer::new(true);
        f.data(&a, at(1), &mut t);
        f.gap(12, at(2), &mut t); // b's head and part of its body
        f.data(&b[12..], at(3), &mut t);
        f.data(&c[..2], at(3), &mut t); // c's head split: the probe needs the carry
        f.data(&c[2..], at(4), &mut t);
        assert_eq!(t.lost, 1);
        assert_eq!(t.pdus.len(), 2);
        assert_eq!(t.pdus[1].1, 30);
        assert_eq!(f.stats().resynced, 1);
    }

    #[test]
    fn garbage_is_skipped_until_a_plausible_start() {
        let mut s = vec![1, 2, 3, 0xAB, 0, 0];
        s.extend(toy_pdu(12, 9));
        let mut t = Toy {
            keep: 4,
            ..Toy::default()
        };
        let mut f = Framer::new(false);
        f.data(&s, at(1), &mut t);
        assert_eq!(t.pdus.len(), 1);
        assert_eq!(t.pdus[0].1, 12);
    }

    #[test]
    fn any_bytes_never_panic() {
        // A small deterministic pseudo-random stream, in odd-sized chunks with gaps.
        let mut x: u32 = 12345;
        let mut t = Toy {
            keep: 16,
            ..Toy::default()
        };
        let mut f = Framer::new(true);
        for i in 0..2000u64 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let n = (x >> 16) as usize % 37;
            let chunk: Vec<u8> = (0..n)
                .map(|j| {
                    if (x >> (j % 24)) & 3 == 0 {
                        0xAB
                    } else {
                        (x >> 8) as u8 ^ j as u8
                    }
                })
                .collect();
            if i % 97 == 0 {
                f.gap(u64::from(x % 50), at(i), &mut t);
            }
            f.data(&chunk, at(i), &mut t);
        }
    }

    #[test]
    fn find_below_finds_the_first_byte_a_byte_by_byte_search_finds() {
        // Pseudo-random bytes (a fixed LCG), every length and start up to two words.
        let mut x = 0x2545_f491_u32;
        let bytes: Vec<u8> = (0..4096)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (x >> 23) as u8
            })
            .collect();
        for n in [0u8, 1, 5, 44, 127, 128, 200] {
            for start in 0..64 {
                for len in 0..40 {
                    let hay = &bytes[start * 61..start * 61 + len];
                    let want = hay
                        .iter()
                        .position(|&b| u32::from(b & 0x7f) < u32::from(n.min(128)));
                    assert_eq!(find_below(hay, n), want, "n {n} start {start} len {len}");
                }
            }
        }
        // Every byte value, alone at every place in a word of bytes that never match.
        for v in 0..=255u8 {
            for at in 0..9 {
                let mut hay = [0x7fu8; 9];
                hay[at] = v;
                let want = (v & 0x7f < 5).then_some(at);
                assert_eq!(find_below(&hay, 5), want, "value {v} at {at}");
            }
        }
    }

    /// A toy framer that lost its framing, whose longest PDU is 100 bytes (give-up bound:
    /// twice 100 and the 4-byte probe, 208).
    fn bounded() -> (Framer, Toy) {
        let t = Toy {
            keep: 4,
            max_pdu: Some(100),
            ..Toy::default()
        };
        (Framer::new(false), t)
    }

    #[test]
    fn the_scan_gives_up_past_twice_the_longest_pdu() {
        let (mut f, mut t) = bounded();
        let junk = [7u8; 50];
        for n in 0..5 {
            f.data(&junk, at(n), &mut t);
        }
        assert_eq!(f.state_name(), "gave up");
        assert_eq!(f.stats().gave_up, 1);
        assert_eq!(
            f.stats().skipped_bytes,
            250,
            "every byte counted, the carry too"
        );
        // From then on nothing is read: not even a PDU start.
        f.data(&toy_pdu(12, 1), at(6), &mut t);
        f.gap(3, at(7), &mut t);
        assert!(f.skip_cut(&toy_pdu(12, 2)[..4], 12, &t));
        assert!(t.pdus.is_empty());
        assert_eq!(f.stats().skipped_bytes, 250 + 12 + 3 + 12);
        assert_eq!((f.stats().resynced, f.stats().gave_up), (0, 1));
    }

    #[test]
    fn a_start_within_the_bound_is_found_and_a_gap_restarts_the_count() {
        // 200 contiguous junk bytes: within the bound.
        let (mut f, mut t) = bounded();
        f.data(&[7u8; 200], at(1), &mut t);
        f.data(&toy_pdu(12, 1), at(2), &mut t);
        assert_eq!(t.pdus.len(), 1);
        // 300 junk bytes, but a gap in the middle: neither stretch reaches the bound.
        let (mut f, mut t) = bounded();
        f.data(&[7u8; 150], at(1), &mut t);
        f.gap(10, at(1), &mut t);
        f.data(&[7u8; 150], at(2), &mut t);
        assert_eq!(f.state_name(), "lost");
        f.data(&toy_pdu(12, 1), at(3), &mut t);
        assert_eq!((t.pdus.len(), f.stats().gave_up), (1, 0));
    }
}
