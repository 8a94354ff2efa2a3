//! How much of a connection's silence is idle time: the one rule the time budget's idle
//! states and `application-limited` both count by.
//!
//! Seen next to a data receiver, "nothing in flight" only means the receiver acknowledged
//! everything: its ACK is still on the way back, and the sender's next data answers it a
//! round trip later. A silence ended by the same sender's new data there is the ACK clock
//! while it lasts no more than a few of the connection's own turnarounds (ACK to the next
//! data, which a loaded path stretches far beyond the handshake's round trip); only the
//! rest of a longer one is the sender's idle time.

use tcpdx_core::Dir;

use super::limit::Vantage;
use super::{ConnTracker, Gap};

/// A silence ended by the same sender's new data, seen next to its receiver, no longer
/// than this many of the connection's turnarounds is the sender waiting for the ACK
/// (tcpdx choice: a receiver acknowledging on a coarse timer grid, or a slow link's
/// serialisation, stays within a few round trips; an idle application holds it longer).
pub const ACK_CLOCK_TURNS: i64 = 4;

/// The typical turnaround of `dir`'s sender as its receiver's side sees it: the median
/// time from the ACK ending one round to the next round's first data, at least `rtt` (a
/// sender that pauses at most of its turns shows its pauses here: next to its receiver
/// they cannot be told from a slow ACK clock).
pub fn turnaround(c: &ConnTracker, rtt: i64, dir: Dir) -> i64 {
    let mut prev_end: Option<i64> = None;
    let mut turns: Vec<i64> = Vec::new();
    for r in c.senders[dir.idx()].rounds.iter() {
        if let Some(e) = prev_end.filter(|&e| r.start > e) {
            turns.push(r.start - e);
        }
        prev_end = Some(r.end);
    }
    if turns.is_empty() {
        return rtt.max(0);
    }
    let mid = turns.len() / 2;
    let (_, m, _) = turns.select_nth_unstable(mid);
    (*m).max(rtt)
}

/// The idle time of one connection's silences (each side's turnaround worked out once,
/// when a silence first needs it).
pub struct IdleTime<'a> {
    conn: &'a ConnTracker,
    rtt: i64,
    turns: [Option<i64>; 2],
}

impl<'a> IdleTime<'a> {
    /// Idle time on `conn` whose path round trip is `rtt` (ns, 0 unknown).
    pub fn new(conn: &'a ConnTracker, rtt: i64) -> Self {
        Self {
            conn,
            rtt,
            turns: [None, None],
        }
    }

    /// Idle ns in `g`: [`Gap::idle_ns`], except that a silence ended by its sender's data
    /// resuming, seen next to that data's receiver, is the ACK clock up to
    /// [`ACK_CLOCK_TURNS`] turnarounds and idle only beyond one turnaround when longer.
    pub fn of(&mut self, g: &Gap) -> i64 {
        let idle = g.idle_ns(self.rtt);
        // The same side's segments on both ends of the silence (its data resuming, or its
        // first data after its own handshake ACK): their spacing here carries the path's
        // delay variation as well as any pause.
        let resumes = g.next_has_data && g.last_data_dir.is_none_or(|d| d == g.next_dir);
        if idle == 0 || !resumes || self.conn.vantage(g.next_dir) != Vantage::Receiver {
            return idle;
        }
        let (conn, rtt) = (self.conn, self.rtt);
        let turn =
            *self.turns[g.next_dir.idx()].get_or_insert_with(|| turnaround(conn, rtt, g.next_dir));
        if g.duration() <= ACK_CLOCK_TURNS * turn {
            0
        } else {
            g.duration() - turn
        }
    }
}
