//! [`Capture::rounds`]: each sender's round trips, what limited each and its congestion
//! window where the capture shows it (`tcpdx_detect::infer::limit`).

use tcpdx_core::Dir;
use tcpdx_detect::Diagnoser;
use tcpdx_detect::infer::limit::RoundRow;

use crate::drive;
use crate::{Capture, Error, Options};

/// The name of a direction in exports.
pub fn direction_name(d: Dir) -> &'static str {
    match d {
        Dir::ClientToServer => "client_to_server",
        Dir::ServerToClient => "server_to_client",
    }
}

impl Capture {
    /// Every sender's rounds (both directions of every connection), in stream order, one
    /// pass on one thread. Every connection's inference is kept to the end of the pass.
    pub fn rounds(&mut self, o: &Options) -> Result<Vec<RoundRow>, Error> {
        let mut diag = Diagnoser::new().swept_by_caller();
        let (first, _) = self.pass(1, |reader| {
            let out = drive::single(reader, o, &mut diag, |_| false)?;
            Ok((out.summary.first_ts_ns, out))
        })?;
        Ok(rows_of(&diag, first))
    }
}

/// The rounds of every connection `diag` kept, in stream order, times relative to `first`
/// (ns): the rows of [`Capture::rounds`] and of a distributed export.
pub(crate) fn rows_of(diag: &Diagnoser, first: i64) -> Vec<RoundRow> {
    let mut trackers: Vec<_> = diag.trackers().collect();
    trackers.sort_by_key(|c| c.stream);
    let rel = |t: i64| (t - first) as f64 / 1e9;
    let mut rows = Vec::new();
    for c in trackers {
        for dir in [Dir::ClientToServer, Dir::ServerToClient] {
            let vantage = c.vantage(dir);
            rows.extend(c.round_limits_echoed(dir).map(|(r, l)| RoundRow {
                stream: c.stream,
                direction: dir,
                start_s: rel(r.start),
                end_s: rel(r.end),
                start_ns: r.start,
                end_ns: r.end,
                segments: r.pkts,
                retransmissions: r.retx,
                flight_bytes: l.flight_bytes,
                delivered_bytes: r.acked,
                cwnd_est: l.cwnd_est,
                limit: l.limit,
                vantage,
            }));
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcpdx_detect::infer::limit::Limit;

    #[test]
    fn a_lab_timeout_case_has_rounds_with_limits_in_order() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/lab/case000_rto_delack/client.pcap.gz"
        );
        let rows = Capture::open(path).rounds(&Options::default()).unwrap();
        assert!(!rows.is_empty());
        for w in rows.windows(2) {
            assert!(w[0].stream <= w[1].stream);
        }
        assert!(
            rows.iter()
                .all(|r| r.end_s >= r.start_s && r.start_s >= 0.0)
        );
        assert!(rows.iter().any(|r| r.limit == Limit::Timeout));
        assert_eq!(direction_name(Dir::ServerToClient), "server_to_client");
    }

    #[test]
    fn export_writes_the_rounds_table() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/lab/case000_rto_delack/client.pcap.gz"
        );
        let dir = tempfile::tempdir().unwrap();
        let o = Options::default();
        let want = Capture::open(path).rounds(&o).unwrap().len() as u64;
        let counts = Capture::open(path).export(&o, dir.path(), &[]).unwrap();
        let got = counts.iter().find(|(n, _)| *n == "rounds").unwrap().1;
        assert!(want > 0);
        assert_eq!(got, want);
        assert!(dir.path().join("rounds.parquet").is_file());
    }

    #[test]
    fn a_missing_file_is_an_error() {
        assert!(
            Capture::open("/nonexistent.pcap")
                .rounds(&Options::default())
                .is_err()
        );
    }
}
