//! How a sender's episodes and a connection's silent gaps are written to the spill
//! ([`Record`] for the records of the [`SpillList`](crate::spill::SpillList)s of
//! [`SenderState`](super::SenderState) and [`ConnTracker`](super::ConnTracker)): every
//! field, fixed width, lossless.

use tcpdx_core::Dir;

use super::Gap;
use super::sender::{
    DelackPause, LossEpisode, NaglePause, PROOF_ACKED, PROOF_DSACK, PROOF_EARLY_ACK,
    PROOF_EARLY_SACK, PROOF_ECHO, PROOF_LATE_ORIGINAL, RecoveryKind, RtoStall, Spurious,
    ZeroWindow,
};
use crate::spill::list::{Reader, Record, Writer};

impl Record for LossEpisode {
    fn encode(&self, w: &mut Writer<'_>) {
        let kind = match self.kind {
            RecoveryKind::Fast => 0,
            RecoveryKind::Timeout => 1,
            RecoveryKind::Other => 2,
        };
        w.i64(self.start)
            .u64(self.start_frame)
            .i64(self.end)
            .u64(self.end_frame)
            .u64(self.recovery_point)
            .opt_u64(self.third_dupack_frame)
            .opt_u64(self.first_retx_frame)
            .opt_u64(self.fast_retx_frame)
            .u32(self.dupacks)
            .u32(self.retx)
            .u32(self.spurious)
            .u32(self.retx_unseen)
            .bool(self.timeout)
            .u32(self.window_before)
            .u8(kind)
            .u64(self.next_round as u64);
    }

    fn decode(r: &mut Reader<'_>) -> Option<Self> {
        Some(Self {
            start: r.i64()?,
            start_frame: r.u64()?,
            end: r.i64()?,
            end_frame: r.u64()?,
            recovery_point: r.u64()?,
            third_dupack_frame: r.opt_u64()?,
            first_retx_frame: r.opt_u64()?,
            fast_retx_frame: r.opt_u64()?,
            dupacks: r.u32()?,
            retx: r.u32()?,
            spurious: r.u32()?,
            retx_unseen: r.u32()?,
            timeout: r.bool()?,
            window_before: r.u32()?,
            kind: match r.u8()? {
                0 => RecoveryKind::Fast,
                1 => RecoveryKind::Timeout,
                2 => RecoveryKind::Other,
                _ => return None,
            },
            next_round: usize::try_from(r.u64()?).ok()?,
        })
    }
}

/// `impl Record` for a record of plain fields, each written with the [`Writer`] and read
/// with the [`Reader`] method named after it, in the order given.
macro_rules! plain_record {
    ($t:ty { $($field:ident: $kind:ident),* $(,)? }) => {
        impl Record for $t {
            fn encode(&self, w: &mut Writer<'_>) {
                $( w.$kind(self.$field); )*
            }

            fn decode(r: &mut Reader<'_>) -> Option<Self> {
                Some(Self { $( $field: r.$kind()?, )* })
            }
        }
    };
}

plain_record!(RtoStall {
    start: i64,
    last_ack_frame: u64,
    end: i64,
    retx_frame: u64,
    timeouts: u32,
    seq: u64,
    upstream_loss: bool,
});

plain_record!(DelackPause {
    start: i64,
    end: i64,
    hold: i64,
    lone_frame: u64,
    ack_frame: u64,
    third_dupack_frame: opt_u64,
    fast_retx_frame: opt_u64,
    rto_frame: opt_u64,
});

plain_record!(NaglePause {
    start: i64,
    end: i64,
    hold: i64,
    lone_frame: u64,
    ack_frame: u64,
    tail_frame: u64,
});

plain_record!(ZeroWindow {
    start: i64,
    start_frame: u64,
    end: i64,
    end_frame: u64,
    probes: u32,
});

/// The direction whose [`Dir::idx`] is `code`, a direction's code in the spill (`None`:
/// neither).
fn dir_of(code: u8) -> Option<Dir> {
    [Dir::ClientToServer, Dir::ServerToClient]
        .get(usize::from(code))
        .copied()
}

impl Record for Gap {
    fn encode(&self, w: &mut Writer<'_>) {
        // No direction: 2, one past both codes.
        let last_data_dir = self.last_data_dir.map_or(2, |d| d.idx() as u8);
        w.i64(self.start)
            .i64(self.end)
            .u64(self.frame_before)
            .u64(self.frame_after)
            .bool(self.in_flight)
            .u8(last_data_dir)
            .u8(self.next_dir.idx() as u8)
            .bool(self.next_has_data)
            .bool(self.setup);
    }

    fn decode(r: &mut Reader<'_>) -> Option<Self> {
        Some(Self {
            start: r.i64()?,
            end: r.i64()?,
            frame_before: r.u64()?,
            frame_after: r.u64()?,
            in_flight: r.bool()?,
            last_data_dir: match r.u8()? {
                2 => None,
                code => Some(dir_of(code)?),
            },
            next_dir: dir_of(r.u8()?)?,
            next_has_data: r.bool()?,
            setup: r.bool()?,
        })
    }
}

/// The proofs a [`Spurious`] may name, by their code in the spill.
const PROOFS: [&str; 6] = [
    PROOF_DSACK,
    PROOF_EARLY_ACK,
    PROOF_ACKED,
    PROOF_ECHO,
    PROOF_LATE_ORIGINAL,
    PROOF_EARLY_SACK,
];

impl Record for Spurious {
    fn encode(&self, w: &mut Writer<'_>) {
        // Any other text would not decode (every proof is one of the constants).
        let proof = PROOFS.iter().position(|&p| p == self.proof).unwrap_or(255);
        w.u64(self.retx_frame)
            .u64(self.proof_frame)
            .i64(self.ts)
            .u8(proof as u8);
    }

    fn decode(r: &mut Reader<'_>) -> Option<Self> {
        Some(Self {
            retx_frame: r.u64()?,
            proof_frame: r.u64()?,
            ts: r.i64()?,
            proof: PROOFS.get(usize::from(r.u8()?)).copied()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip<T: Record + PartialEq + std::fmt::Debug>(x: T) {
        let mut buf = Vec::new();
        x.encode(&mut Writer(&mut buf));
        let mut r = Reader(&buf);
        assert_eq!(T::decode(&mut r), Some(x));
        assert!(r.is_empty(), "{x:?}: {} bytes left", r.0.len());
        // Cut off: no record.
        assert_eq!(T::decode(&mut Reader(&buf[..buf.len() - 1])), None);
    }

    #[test]
    fn every_record_round_trips_exactly() {
        for (i, kind) in [
            RecoveryKind::Fast,
            RecoveryKind::Timeout,
            RecoveryKind::Other,
        ]
        .into_iter()
        .enumerate()
        {
            round_trip(LossEpisode {
                start: -5,
                start_frame: u64::MAX,
                end: i64::MAX,
                end_frame: 0,
                recovery_point: 1 << 40,
                third_dupack_frame: (i != 0).then_some(7),
                first_retx_frame: Some(0),
                fast_retx_frame: None,
                dupacks: 3,
                retx: u32::MAX,
                spurious: 1,
                retx_unseen: 2,
                timeout: i == 1,
                window_before: 44,
                kind,
                next_round: 100_000 + i,
            });
        }
        round_trip(RtoStall {
            start: 1,
            last_ack_frame: 2,
            end: 3,
            retx_frame: 4,
            timeouts: 5,
            seq: u64::MAX,
            upstream_loss: true,
        });
        round_trip(DelackPause {
            start: i64::MIN,
            end: 2,
            hold: 40_000_000,
            lone_frame: 4,
            ack_frame: 5,
            third_dupack_frame: None,
            fast_retx_frame: Some(6),
            rto_frame: Some(u64::MAX),
        });
        round_trip(NaglePause {
            start: 1,
            end: 2,
            hold: 3,
            lone_frame: 4,
            ack_frame: 5,
            tail_frame: 6,
        });
        round_trip(ZeroWindow {
            start: 1,
            start_frame: 2,
            end: 3,
            end_frame: 4,
            probes: 5,
        });
        for proof in PROOFS {
            round_trip(Spurious {
                retx_frame: 1,
                proof_frame: 2,
                ts: 3,
                proof,
            });
        }
    }

    #[test]
    fn gaps_round_trip_with_every_direction() {
        let dirs = [None, Some(Dir::ClientToServer), Some(Dir::ServerToClient)];
        for (i, last_data_dir) in dirs.into_iter().enumerate() {
            for next_dir in [Dir::ClientToServer, Dir::ServerToClient] {
                round_trip(Gap {
                    start: -7,
                    end: i64::MAX,
                    frame_before: u64::MAX,
                    frame_after: i as u64,
                    in_flight: i == 0,
                    last_data_dir,
                    next_dir,
                    next_has_data: i == 1,
                    setup: i == 2,
                });
            }
        }
        // A direction code that is none of them does not decode.
        let mut buf = Vec::new();
        Gap {
            start: 0,
            end: 1,
            frame_before: 2,
            frame_after: 3,
            in_flight: false,
            last_data_dir: None,
            next_dir: Dir::ClientToServer,
            next_has_data: false,
            setup: false,
        }
        .encode(&mut Writer(&mut buf));
        let at = buf.len() - 4;
        buf[at] = 3;
        assert_eq!(Gap::decode(&mut Reader(&buf)), None);
    }

    #[test]
    fn an_unknown_proof_does_not_decode() {
        let mut buf = Vec::new();
        Spurious {
            retx_frame: 1,
            proof_frame: 2,
            ts: 3,
            proof: "something else",
        }
        .encode(&mut Writer(&mut buf));
        assert_eq!(Spurious::decode(&mut Reader(&buf)), None);
    }
}
