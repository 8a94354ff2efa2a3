//! Storage events as values: a [`Recorder`] keeps what a [`Tracker`](crate::Tracker) emits,
//! to replay it into another [`StorageSink`] later, possibly under other stream numbers
//! (the CLI parses connections on worker threads and replays their events in capture
//! order on one).

use tcpdx_core::StreamId;
use tcpdx_wire::{FrameNo, Timestamp};

use crate::TcpLog;
use crate::transaction::{Notice, Request, StorageSink, Transaction};

/// One [`StorageSink`] call.
#[derive(Clone, Debug, PartialEq)]
pub enum Recorded {
    /// [`StorageSink::start`].
    Start(Timestamp),
    /// [`StorageSink::tcp_log`] (boxed: large).
    TcpLog(StreamId, Box<TcpLog>),
    /// [`StorageSink::tcp_last`].
    TcpLast(FrameNo, Timestamp),
    /// [`StorageSink::request`].
    Request(Request),
    /// [`StorageSink::transaction`] (boxed: the largest by far).
    Transaction(Box<Transaction>),
    /// [`StorageSink::notice`].
    Notice(Notice),
}

impl Recorded {
    /// The stream the event is about (`None` for the start).
    pub fn stream(&self) -> Option<StreamId> {
        match self {
            Recorded::Start(_) | Recorded::TcpLast(..) => None,
            Recorded::TcpLog(s, _) => Some(*s),
            Recorded::Request(r) => Some(r.stream),
            Recorded::Transaction(t) => Some(t.stream),
            Recorded::Notice(n) => Some(*notice_stream(&mut { *n })),
        }
    }

    /// Gives the event's stream the number `to(stream)`.
    pub fn renumber(&mut self, to: impl Fn(StreamId) -> StreamId) {
        let s = match self {
            Recorded::Start(_) | Recorded::TcpLast(..) => return,
            Recorded::TcpLog(s, _) => s,
            Recorded::Request(r) => &mut r.stream,
            Recorded::Transaction(t) => &mut t.stream,
            Recorded::Notice(n) => notice_stream(n),
        };
        *s = to(*s);
    }

    /// Makes the call it records on `sink`.
    pub fn replay<S: StorageSink + ?Sized>(&self, sink: &mut S) {
        match self {
            Recorded::Start(ts) => sink.start(*ts),
            Recorded::TcpLog(s, log) => sink.tcp_log(*s, (**log).clone()),
            Recorded::TcpLast(f, ts) => sink.tcp_last(*f, *ts),
            Recorded::Request(r) => sink.request(r),
            Recorded::Transaction(t) => sink.transaction(t),
            Recorded::Notice(n) => sink.notice(n),
        }
    }
}

fn notice_stream(n: &mut Notice) -> &mut StreamId {
    match n {
        Notice::Smb3Encrypted { stream, .. }
        | Notice::Smb3Compressed { stream, .. }
        | Notice::FramingLost { stream, .. }
        | Notice::TooManyOutstanding { stream } => stream,
    }
}

/// A [`StorageSink`] that records every call, in order.
#[derive(Debug, Default)]
pub struct Recorder {
    /// The calls so far (the caller drains them).
    pub events: Vec<Recorded>,
}

impl StorageSink for Recorder {
    fn transaction(&mut self, t: &Transaction) {
        self.events.push(Recorded::Transaction(Box::new(*t)));
    }
    fn notice(&mut self, n: &Notice) {
        self.events.push(Recorded::Notice(*n));
    }
    fn request(&mut self, r: &Request) {
        self.events.push(Recorded::Request(*r));
    }
    fn start(&mut self, ts: Timestamp) {
        self.events.push(Recorded::Start(ts));
    }
    fn tcp_log(&mut self, stream: StreamId, log: TcpLog) {
        self.events.push(Recorded::TcpLog(stream, Box::new(log)));
    }
    fn tcp_last(&mut self, frame: FrameNo, ts: Timestamp) {
        self.events.push(Recorded::TcpLast(frame, ts));
    }
}

impl tcpdx_core::codec::Codec for Recorded {
    fn enc(&self, w: &mut Vec<u8>) {
        match self {
            Recorded::Start(ts) => {
                w.push(0);
                ts.enc(w);
            }
            Recorded::TcpLog(s, log) => {
                w.push(1);
                s.enc(w);
                log.enc(w);
            }
            Recorded::TcpLast(f, ts) => {
                w.push(2);
                f.enc(w);
                ts.enc(w);
            }
            Recorded::Request(q) => {
                w.push(3);
                q.enc(w);
            }
            Recorded::Transaction(t) => {
                w.push(4);
                t.enc(w);
            }
            Recorded::Notice(n) => {
                w.push(5);
                n.enc(w);
            }
        }
    }
    fn dec(r: &mut tcpdx_core::codec::Dec<'_>) -> Result<Self, tcpdx_core::codec::DecodeError> {
        use tcpdx_core::codec::Codec;
        Ok(match r.tag(6, "Recorded")? {
            0 => Recorded::Start(Codec::dec(r)?),
            1 => Recorded::TcpLog(Codec::dec(r)?, Codec::dec(r)?),
            2 => Recorded::TcpLast(Codec::dec(r)?, Codec::dec(r)?),
            3 => Recorded::Request(Codec::dec(r)?),
            4 => Recorded::Transaction(Codec::dec(r)?),
            _ => Recorded::Notice(Codec::dec(r)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use tcpdx_core::Dir;
    use tcpdx_wire::FrameNo;

    use super::*;
    use crate::reassembly::At;
    use crate::transaction::{Collect, Proto};

    #[test]
    fn recorded_calls_replay_in_order_under_new_stream_numbers() {
        let at = At {
            frame: FrameNo(3),
            ts: Timestamp(30),
        };
        let request = Request {
            stream: StreamId(1),
            proto: Proto::Nfs,
            op: "READ",
            at,
            io: None,
            credits: None,
        };
        let notice = Notice::FramingLost {
            stream: StreamId(2),
            dir: Dir::ServerToClient,
            at,
        };
        let mut rec = Recorder::default();
        rec.start(Timestamp(7));
        rec.request(&request);
        rec.notice(&notice);
        rec.notice(&Notice::TooManyOutstanding {
            stream: StreamId(1),
        });
        let mut log = TcpLog::default();
        log.request();
        rec.tcp_log(StreamId(2), log.clone());
        rec.tcp_last(FrameNo(9), Timestamp(90));
        let streams: Vec<_> = rec.events.iter().map(Recorded::stream).collect();
        assert_eq!(
            streams,
            [
                None,
                Some(StreamId(1)),
                Some(StreamId(2)),
                Some(StreamId(1)),
                Some(StreamId(2)),
                None
            ]
        );
        let mut out = Collect::default();
        let mut again = Recorder::default();
        for mut e in rec.events {
            e.renumber(|s| StreamId(s.0 * 10));
            e.replay(&mut out);
            e.replay(&mut again);
        }
        assert_eq!(
            again.events[4..],
            [
                Recorded::TcpLog(StreamId(20), Box::new(log)),
                Recorded::TcpLast(FrameNo(9), Timestamp(90))
            ]
        );
        assert_eq!(
            out.requests,
            [Request {
                stream: StreamId(10),
                ..request
            }]
        );
        assert_eq!(
            out.notices,
            [
                Notice::FramingLost {
                    stream: StreamId(20),
                    dir: Dir::ServerToClient,
                    at,
                },
                Notice::TooManyOutstanding {
                    stream: StreamId(10)
                }
            ]
        );
    }
}
