//! Registry of named, parameterised, seeded scenarios (recipes). Each recipe says how
//! to impair the path, which workload to run, where to capture and what the verifier
//! must find in the result.

use serde::{Deserialize, Serialize};

/// TCP port of the bulk workload.
pub const BULK_PORT: u16 = 15301;

/// Which packets go through the relay.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum RelayPath {
    /// Both directions.
    #[default]
    Both,
    /// Only packets from the client side (client to server).
    C2s,
    /// Only packets from the server side (server to client).
    S2c,
}

/// Relay impairments of a scenario (see `tcpdx-relay --help`).
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
#[serde(default)]
pub struct RelaySpec {
    /// Which directions are steered through the relay.
    pub path: RelayPath,
    /// One-way delay (ms) in both directions.
    pub delay_ms: f64,
    /// One-way delay client to server (ms), overrides `delay_ms`.
    pub delay_c2s_ms: Option<f64>,
    /// One-way delay server to client (ms), overrides `delay_ms`.
    pub delay_s2c_ms: Option<f64>,
    /// Drop these data segments (e.g. "100,200-230").
    pub drop_nth: String,
    /// Also drop the next R retransmissions of each dropped segment.
    pub drop_repeat: u32,
    /// Random drop probability.
    pub drop_prob: f64,
    /// Start blackouts at these data segments.
    pub blackout_after: String,
    /// Blackout length (ms).
    pub blackout_ms: f64,
    /// Reorder these data segments.
    pub reorder_nth: String,
    /// Random reorder probability.
    pub reorder_prob: f64,
    /// Count-based reordering: packets to wait.
    pub reorder_k: u32,
    /// Time-based reordering: extra delay (ms).
    pub reorder_delay_ms: f64,
    /// GSO mode: GRO on the router's ingress veths, the relay forwards super-packets whole
    /// and cuts them only where an impairment acts (for multi-Gbit/s runs). Incompatible
    /// with router capture points and router-side nft loss, which would see super-packets.
    pub gso: bool,
}

/// Token-bucket bottleneck on the router.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TbfSpec {
    /// On the router interface towards the server (client-to-server data) if true, else towards the client.
    pub to_server: bool,
    /// Rate, tc syntax (e.g. "100mbit").
    pub rate: String,
    /// Bucket size, tc syntax.
    pub burst: String,
    /// Queue limit in bytes, tc syntax.
    pub limit: String,
}

/// Where an nft random-drop rule sits.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum NftHook {
    /// Router forward hook (network loss between the end hosts).
    RouterForward,
    /// Server namespace input hook (loss inside the receiving host, after any capture point).
    ServerInput,
}

/// nftables numgen random loss on data segments (payload-carrying, length > 100).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NftLossSpec {
    /// Where the rule sits.
    pub hook: NftHook,
    /// Loss rate in 1/1000.
    pub per_mille: u32,
    /// Only to this destination port (server port).
    pub dport: u16,
}

/// Route tweaks on the data receiver's default route.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct RouteSpec {
    /// Route `rto_min` in ms (raises the receiver's RTO so quickack mode is not entered).
    pub rto_min_ms: Option<u32>,
    /// Route `quickack 1`: the receiver never delays ACKs.
    pub quickack: bool,
}

/// Capture point.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Point {
    /// Client interface (the bulk sender).
    Client,
    /// Server interface (the bulk receiver).
    Server,
    /// Router interface towards the server (downstream of the relay and tbf for c2s data).
    RouterServerSide,
    /// Router interface towards the client (upstream of the relay for c2s data).
    RouterClientSide,
}

impl Point {
    /// File stem used for this point's capture.
    pub fn stem(self) -> &'static str {
        match self {
            Point::Client => "client",
            Point::Server => "server",
            Point::RouterServerSide => "router_s",
            Point::RouterClientSide => "router_c",
        }
    }
}

/// Storage workloads.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum StorageOp {
    /// SMB3 read of the test file (smbclient get).
    Smb3Read,
    /// SMB3 write (smbclient put).
    Smb3Write,
    /// NFSv3 read (nfs-cp).
    Nfs3Read,
    /// NFSv3 write (nfs-cp).
    Nfs3Write,
    /// NFSv4.0 read (nfs-cp).
    Nfs4Read,
    /// iSCSI read (iscsi-perf).
    IscsiRead,
}

/// The workload of a scenario.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Workload {
    /// Bulk TCP client to server.
    Bulk {
        /// Bytes to send in a full run.
        bytes: u64,
        /// Bytes in a short run (`--short`, used for fixtures and CI).
        short_bytes: u64,
        /// Sender congestion control (per socket).
        cc: String,
        /// Receiver SO_RCVBUF.
        rcvbuf: Option<usize>,
        /// Receiver read size.
        read_size: Option<usize>,
        /// Receiver sleep after each read (ms).
        read_sleep_ms: f64,
        /// Receiver sleep before the first read (ms).
        start_delay_ms: f64,
    },
    /// A storage protocol operation.
    Storage {
        /// Which operation.
        op: StorageOp,
        /// File size in MiB (full run).
        mib: u32,
        /// File size in MiB (short run).
        short_mib: u32,
        /// Stop the server process for this many ms in the middle of the transfer (0 = never).
        server_stall_ms: u32,
        /// Server-side congestion control (netns default; reno or bbr).
        server_cc: String,
        /// Slow server: `(stopped_ms, running_ms)`: the server process is stopped
        /// (SIGSTOP) for the first and runs for the second, over and over, while the client
        /// works (None = never).
        #[serde(default)]
        server_duty_ms: Option<(u32, u32)>,
        /// iSCSI: commands the initiator keeps outstanding (iscsi-perf -m; None = 4).
        #[serde(default)]
        queue_depth: Option<u32>,
    },
    /// Request/response turns: the client writes each request in `parts` small writes and
    /// waits for the server's response (Nagle + delayed ACK unless `nodelay`).
    ReqResp {
        /// Transactions.
        transactions: u32,
        /// Writes per request.
        parts: u32,
        /// Request size (bytes, all parts).
        req_bytes: usize,
        /// Response size (bytes).
        resp_bytes: usize,
        /// TCP_NODELAY on the client (Nagle off).
        nodelay: bool,
        /// Congestion control of both ends (per socket).
        cc: String,
    },
}

/// What `verify` must find, besides the generic checks.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default)]
pub struct Expect {
    /// At least this many RTOs (kernel Loss state entries).
    pub min_rtos: u32,
    /// At least this many delayed-ACK pauses after a lone post-RTO segment.
    pub min_delack_pauses: u32,
    /// No delayed-ACK pause at all (the what-if run).
    pub no_delack_pause: bool,
    /// At least this many burst-loss episodes.
    pub min_burst_losses: u32,
    /// Reno additive increase (+1 segment per RTT) in congestion avoidance.
    pub additive_increase: bool,
    /// No retransmission at all.
    pub no_retransmissions: bool,
    /// At least this many spurious retransmissions (D-SACKed).
    pub min_spurious: u32,
    /// The sender saw a zero window.
    pub zero_window: bool,
    /// Drops happen downstream of the primary capture point (nft in the server).
    pub drops_after_capture: bool,
    /// A server stall of roughly this many ms appears.
    pub stall_ms: u32,
}

/// A named scenario.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Scenario {
    /// Name used on the command line and as fixture directory.
    pub name: String,
    /// One-line description.
    pub description: String,
    /// Link MTU.
    pub mtu: u32,
    /// Seed of every random choice.
    pub seed: u64,
    /// Workload.
    pub workload: Workload,
    /// Relay impairments (None: no relay).
    pub relay: Option<RelaySpec>,
    /// Bottleneck.
    pub tbf: Option<TbfSpec>,
    /// Random loss by nftables.
    pub nft_loss: Option<NftLossSpec>,
    /// Receiver route tweaks.
    pub receiver_route: RouteSpec,
    /// Sender tcp_wmem max (bytes), if raised.
    pub sender_wmem_max: Option<u64>,
    /// Primary capture point (client and server are always captured too).
    pub capture: Point,
    /// Drop this many per mille of the data receiver's pure ACKs in the router (nft; bulk only).
    #[serde(default)]
    pub ack_loss_per_mille: u32,
    /// Window scaling off in both end hosts (`net.ipv4.tcp_window_scaling=0`): windows <= 64 KiB.
    #[serde(default)]
    pub no_window_scaling: bool,
    /// Snapshot length (0 = full packets).
    pub snaplen: u32,
    /// Verification expectations.
    pub expect: Expect,
}

fn bulk(bytes: u64, short_bytes: u64, cc: &str) -> Workload {
    Workload::Bulk {
        bytes,
        short_bytes,
        cc: cc.into(),
        rcvbuf: None,
        read_size: None,
        read_sleep_ms: 0.0,
        start_delay_ms: 0.0,
    }
}

fn base(name: &str, description: &str, workload: Workload) -> Scenario {
    Scenario {
        name: name.into(),
        description: description.into(),
        mtu: 1500,
        seed: 7,
        workload,
        relay: Some(RelaySpec {
            delay_ms: 5.0,
            ..Default::default()
        }),
        tbf: None,
        nft_loss: None,
        receiver_route: RouteSpec::default(),
        sender_wmem_max: None,
        capture: Point::Client,
        ack_loss_per_mille: 0,
        no_window_scaling: false,
        snaplen: 128,
        expect: Expect::default(),
    }
}

fn storage(op: StorageOp) -> Workload {
    Workload::Storage {
        op,
        mib: 8,
        short_mib: 2,
        server_stall_ms: 0,
        server_cc: "reno".into(),
        server_duty_ms: None,
        queue_depth: None,
    }
}

/// Every scenario, in a stable order.
pub fn registry() -> Vec<Scenario> {
    let mut v = Vec::new();
    for cc in ["cubic", "reno"] {
        let mut s = base(
            &format!("clean_bulk_{cc}"),
            &format!(
                "clean bulk transfer, {cc}, RTT 10 ms through the relay: no loss, no retransmission"
            ),
            bulk(24_000_000, 3_000_000, cc),
        );
        s.expect.no_retransmissions = true;
        v.push(s);
    }
    // case000: RTO -> one segment -> delayed ACK
    let delack_recv = |mut w: Workload| {
        if let Workload::Bulk { rcvbuf, .. } = &mut w {
            *rcvbuf = Some(1_048_576);
        }
        w
    };
    let mut s = base(
        "case000_rto_delack",
        "blackouts force RTOs; the receiver (route rto_min 1s, fixed SO_RCVBUF) delays the ACK of the lone post-RTO segment by ~40 ms",
        delack_recv(bulk(12_000_000, 8_000_000, "reno")),
    );
    s.relay = Some(RelaySpec {
        delay_ms: 10.0,
        blackout_after: "1500,4000".into(),
        blackout_ms: 150.0,
        ..Default::default()
    });
    s.receiver_route = RouteSpec {
        rto_min_ms: Some(1000),
        quickack: false,
    };
    s.expect = Expect {
        min_rtos: 2,
        min_delack_pauses: 1,
        ..Default::default()
    };
    v.push(s.clone());
    s.name = "case000_rto_quickack".into();
    s.description = "what-if of case000_rto_delack: same blackouts, receiver route quickack 1 (no delayed ACK): no pause".into();
    s.receiver_route.quickack = true;
    s.expect = Expect {
        min_rtos: 2,
        no_delack_pause: true,
        ..Default::default()
    };
    v.push(s);
    // case001: reordering by time -> spurious retransmissions
    let mut s = base(
        "case001_reorder_time",
        "relay holds 0.5% of data segments 15 ms (> RTT + RACK window): spurious retransmissions, D-SACKs, window cuts",
        bulk(20_000_000, 4_000_000, "reno"),
    );
    if let Workload::Bulk { rcvbuf, .. } = &mut s.workload {
        *rcvbuf = Some(524_288);
    }
    s.relay = Some(RelaySpec {
        delay_ms: 5.0,
        reorder_prob: 0.005,
        reorder_delay_ms: 15.0,
        ..Default::default()
    });
    s.expect = Expect {
        min_spurious: 3,
        ..Default::default()
    };
    v.push(s.clone());
    s.name = "case001_reorder_behind".into();
    s.description =
        "case001_reorder_time captured on the router behind the reordering element (server side)"
            .into();
    s.capture = Point::RouterServerSide;
    v.push(s.clone());
    s.name = "case001_reorder_count".into();
    s.description =
        "relay holds 0.5% of data segments until 10 later packets passed (count-based): mild reordering RACK adapts to"
            .into();
    s.capture = Point::Client;
    if let Some(r) = &mut s.relay {
        r.reorder_delay_ms = 0.0;
        r.reorder_k = 10;
    }
    s.expect = Expect::default();
    v.push(s);
    // case002: receiver cannot keep up
    let mut s = base(
        "case002_slow_reader",
        "receiver with SO_RCVBUF 64 KiB reads 32 KiB every 100 ms after a 0.7 s start delay: zero window",
        Workload::Bulk {
            bytes: 1_500_000,
            short_bytes: 800_000,
            cc: "reno".into(),
            rcvbuf: Some(65536),
            read_size: Some(32768),
            read_sleep_ms: 100.0,
            start_delay_ms: 700.0,
        },
    );
    s.expect = Expect {
        zero_window: true,
        ..Default::default()
    };
    v.push(s);
    let mut s = base(
        "case002_rx_host_drops",
        "1% of data segments dropped by nft in the server's input hook, i.e. after the router capture point",
        bulk(10_000_000, 3_000_000, "reno"),
    );
    s.nft_loss = Some(NftLossSpec {
        hook: NftHook::ServerInput,
        per_mille: 10,
        dport: BULK_PORT,
    });
    s.capture = Point::RouterServerSide;
    s.expect = Expect {
        drops_after_capture: true,
        ..Default::default()
    };
    v.push(s);
    // case004: speed mismatch into a shallow queue
    let mut s = base(
        "case004_tbf_burst",
        "fast sender into a 100 Mbit/s tbf with a 64 KB queue, RTT 15 ms (ACK path delayed), Reno: burst loss then +1 segment/RTT",
        bulk(30_000_000, 12_000_000, "reno"),
    );
    s.relay = Some(RelaySpec {
        path: RelayPath::S2c,
        delay_ms: 15.0,
        ..Default::default()
    });
    s.tbf = Some(TbfSpec {
        to_server: true,
        rate: "100mbit".into(),
        burst: "16kb".into(),
        limit: "64kb".into(),
    });
    s.sender_wmem_max = Some(33_554_432);
    s.expect = Expect {
        min_burst_losses: 1,
        additive_increase: true,
        ..Default::default()
    };
    v.push(s);
    // storage
    for (name, op, desc) in [
        (
            "smb3_read_clean",
            StorageOp::Smb3Read,
            "clean SMB3 read, RTT 10 ms",
        ),
        (
            "nfs3_read_clean",
            StorageOp::Nfs3Read,
            "clean NFSv3 read, RTT 10 ms",
        ),
        (
            "nfs4_read_clean",
            StorageOp::Nfs4Read,
            "clean NFSv4.0 read, RTT 10 ms",
        ),
        (
            "iscsi_read_clean",
            StorageOp::IscsiRead,
            "clean iSCSI read (iscsi-perf 1 s), RTT 10 ms",
        ),
    ] {
        let mut s = base(name, desc, storage(op));
        s.snaplen = 0;
        s.expect.no_retransmissions = true;
        v.push(s);
    }
    // A slow server and a request-limited client, to be told apart by `tcpdx diagnose`.
    let mut slow = storage(StorageOp::IscsiRead);
    if let Workload::Storage { server_duty_ms, .. } = &mut slow {
        *server_duty_ms = Some((20, 5));
    }
    let mut s = base(
        "iscsi_read_slow_server",
        "iSCSI read (iscsi-perf -m 4 -b 128) from a slow target: tgtd stopped 20 ms of every 25 ms, RTT 2 ms",
        slow,
    );
    s.snaplen = 0;
    // A stopped target cannot answer: the initiator's tail-loss probes may retransmit.
    if let Some(r) = &mut s.relay {
        r.delay_ms = 1.0;
    }
    v.push(s);
    let mut qd1 = storage(StorageOp::IscsiRead);
    if let Workload::Storage { queue_depth, .. } = &mut qd1 {
        *queue_depth = Some(1);
    }
    let mut s = base(
        "iscsi_read_qd1",
        "iSCSI read with one command outstanding (iscsi-perf -m 1 -b 128): a request-limited client, RTT 10 ms",
        qd1,
    );
    s.snaplen = 0;
    s.expect.no_retransmissions = true;
    v.push(s);
    for (name, op, port) in [
        ("smb3_write_loss1pct", StorageOp::Smb3Write, 445),
        ("nfs3_write_loss1pct", StorageOp::Nfs3Write, 2049),
    ] {
        let mut s = base(
            name,
            "storage write under 1% random loss (nft numgen on the router), RTT 10 ms",
            storage(op),
        );
        s.snaplen = 0;
        s.nft_loss = Some(NftLossSpec {
            hook: NftHook::RouterForward,
            per_mille: 10,
            dport: port,
        });
        v.push(s);
    }
    // The loss-free run of the NFSv3 write above: the pair `tcpdx compare` is tested on.
    let mut s = base(
        "nfs3_write_clean",
        "clean NFSv3 write, RTT 10 ms (nfs3_write_loss1pct without the loss)",
        storage(StorageOp::Nfs3Write),
    );
    s.snaplen = 0;
    s.expect.no_retransmissions = true;
    v.push(s);
    let mut s = base(
        "case003_nfs_write_stall",
        "NFSv3 WRITE/COMMIT while the server (ganesha) is stopped for 5 s (SIGSTOP/SIGCONT)",
        Workload::Storage {
            op: StorageOp::Nfs3Write,
            mib: 8,
            short_mib: 4,
            server_stall_ms: 5000,
            server_cc: "reno".into(),
            server_duty_ms: None,
            queue_depth: None,
        },
    );
    s.snaplen = 0;
    s.expect.stall_ms = 5000;
    v.push(s);
    v
}

/// Looks a scenario up by name.
pub fn find(name: &str) -> Option<Scenario> {
    registry().into_iter().find(|s| s.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_unique_and_filesystem_safe() {
        let r = registry();
        let mut names: Vec<&str> = r.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(n, names.len());
        assert!(
            names
                .iter()
                .all(|n| n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        );
        for must in [
            "clean_bulk_cubic",
            "clean_bulk_reno",
            "case000_rto_delack",
            "case000_rto_quickack",
            "case001_reorder_time",
            "case002_slow_reader",
            "case002_rx_host_drops",
            "case004_tbf_burst",
        ] {
            assert!(find(must).is_some(), "{must}");
        }
    }

    #[test]
    fn scenarios_roundtrip_json() {
        for s in registry() {
            let j = serde_json::to_string(&s).unwrap();
            assert_eq!(serde_json::from_str::<Scenario>(&j).unwrap(), s);
        }
    }

    #[test]
    fn case000_pair_differs_only_in_quickack() {
        let (a, b) = (
            find("case000_rto_delack").unwrap(),
            find("case000_rto_quickack").unwrap(),
        );
        assert_eq!(a.relay, b.relay);
        assert_eq!(a.workload, b.workload);
        assert!(!a.receiver_route.quickack && b.receiver_route.quickack);
    }
}
