//! The scenario DSL: TCP conversations written in relative sequence numbers.
//!
//! A [`Script`] holds one timeline of frames and one or more connections (client and
//! server endpoint each). Every call appends frames at the script's current time; time moves
//! only when told ([`Script::at_ms`] absolute from the start, [`Script::after_ms`] relative),
//! as in quinn's deterministic test `Pair`. The vantage point is the client's host: in
//! [`Script::handshake`] the SYN-ACK and the final ACK share a timestamp, one RTT after the SYN.
//!
//! # Relative numbers
//!
//! Sequence numbers are relative to the sender's ISN and acknowledgement numbers (and SACK
//! edges) to the receiver's, exactly as Wireshark's relative sequence numbers: the SYN has
//! relative seq 0, the first data byte relative seq 1. Conversion is modulo 2^32, so an ISN
//! near 2^32 makes the raw numbers wrap while scripts stay readable.
//!
//! # `AUTO`
//!
//! [`SegSpec`] fields set to [`AUTO`] are computed from the connection state:
//! - `seq`: the sender's next sequence number (highest relative seq + len (+SYN/FIN) it sent,
//!   1 before anything was sent), or 0 for a SYN;
//! - `ack`: the peer's next sequence number (everything it sent so far) when ACK is set,
//!   raw 0 when it is not;
//! - `win`: the window the sender currently advertises ([`Script::client_window`]), shifted by
//!   its window scale unless the segment is a SYN.
//!
//! Options come from the connection's [`ScriptConfig`]: SYNs carry MSS, SACK-permitted,
//! timestamps and window scale as configured; other segments carry timestamps when enabled
//! (TSval from a 1 kHz clock per endpoint, TSecr = the last TSval the peer sent) and the SACK
//! blocks given with [`Sent::sack`] or [`SegSpec::sack`].
//!
//! # Example
//!
//! ```
//! use tcpdx_testkit::{Script, SegSpec, S2C_DATA, AUTO, ACK, PSH};
//!
//! let mut t = Script::new();
//! t.handshake(); // frames 1-3
//! t.at_ms(10).server_sends(1, 1448); // 4: lost downstream of the capture point
//! t.server_sends(AUTO, 1448); // 5: relative seq 1449
//! t.at_ms(30).client_acks(1).sack(&[(1449, 2897)]).times(3); // 6-8: duplicate ACKs
//! t.at_ms(31).server(SegSpec { seq: 1, len: 1448, flags: PSH | ACK, ..S2C_DATA }); // 9
//! let frames = t.frames();
//! assert_eq!(frames.len(), 9);
//! ```

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ops::Range;
use std::path::{Path, PathBuf};

use tcpdx_wire::{FrameNo, LinkType, Timestamp};

use crate::builder::{ACK, FIN, FrameSpec, OptionsSpec, PSH, Payload, RST, SYN};
use crate::frame::OwnedFrame;
use crate::pcap_writer;

/// Marks a [`SegSpec`] field as "computed from the connection state" (see the module doc).
pub const AUTO: u32 = u32::MAX;

/// Nanoseconds per millisecond.
const NS_PER_MS: f64 = 1_000_000.0;
/// ISN offset added for each [`Script::new_connection`], so Wireshark sees a new conversation.
const NEW_CONN_ISN_STEP: u32 = 100_000_000;
/// Ethernet address of the client (locally administered).
const CLIENT_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// Ethernet address of the server (locally administered).
const SERVER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
/// Default client IPv4 address.
const CLIENT_V4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// Default server IPv4 address.
const SERVER_V4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// Default client IPv6 address.
const CLIENT_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
/// Default server IPv6 address.
const SERVER_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);

/// Direction of a segment within a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Sent by the client (the side that sent the SYN).
    ClientToServer,
    /// Sent by the server.
    ServerToClient,
}

impl Dir {
    /// Short name for [`Dir::ClientToServer`].
    pub const C2S: Self = Self::ClientToServer;
    /// Short name for [`Dir::ServerToClient`].
    pub const S2C: Self = Self::ServerToClient;

    /// The opposite direction.
    pub const fn rev(self) -> Self {
        match self {
            Self::ClientToServer => Self::ServerToClient,
            Self::ServerToClient => Self::ClientToServer,
        }
    }
}

/// Identifies one connection of a [`Script`] (0 is the one created with the script).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnId(pub usize);

/// The timestamps option of one segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TsOpt {
    /// As configured: TSval from the sender's clock, TSecr the peer's last TSval.
    Auto,
    /// No timestamps option, even if the connection uses them.
    Off,
    /// These raw values `(TSval, TSecr)`.
    Val(u32, u32),
}

/// One segment in relative terms; build it from a template with struct-update syntax.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegSpec {
    /// Relative sequence number, or [`AUTO`].
    pub seq: u32,
    /// Relative acknowledgement number, or [`AUTO`].
    pub ack: u32,
    /// Flag bits ([`crate::SYN`], [`crate::ACK`], ...).
    pub flags: u16,
    /// Payload length (ignored for [`Payload::Bytes`]).
    pub len: u32,
    /// Advertised window in bytes (scaled by the sender's shift), or [`AUTO`].
    pub win: u32,
    /// Raw window field, overriding `win`.
    pub win_raw: Option<u16>,
    /// SACK blocks, relative to the receiver's ISN (like `ack`).
    pub sack: Vec<(u32, u32)>,
    /// Timestamps option.
    pub ts: TsOpt,
    /// Exact raw options instead of the automatic ones (`sack` and `ts` are then ignored).
    pub options: Option<OptionsSpec>,
    /// Payload content.
    pub payload: Payload,
    /// Urgent pointer.
    pub urgent: u16,
    /// Snaplen for this frame, overriding the connection's.
    pub snaplen: Option<u32>,
    /// Write a wrong TCP checksum.
    pub bad_checksum: bool,
}

/// Template: a pure ACK, everything [`AUTO`].
pub const ACK_SEG: SegSpec = SegSpec {
    seq: AUTO,
    ack: AUTO,
    flags: ACK,
    len: 0,
    win: AUTO,
    win_raw: None,
    sack: Vec::new(),
    ts: TsOpt::Auto,
    options: None,
    payload: Payload::Pattern,
    urgent: 0,
    snaplen: None,
    bad_checksum: false,
};
/// Template: a data segment (PSH|ACK), everything [`AUTO`]; set `len`.
pub const DATA_SEG: SegSpec = SegSpec {
    seq: AUTO,
    ack: AUTO,
    flags: PSH | ACK,
    len: 0,
    win: AUTO,
    win_raw: None,
    sack: Vec::new(),
    ts: TsOpt::Auto,
    options: None,
    payload: Payload::Pattern,
    urgent: 0,
    snaplen: None,
    bad_checksum: false,
};
/// Template for server data; same as [`DATA_SEG`], the name documents the intent.
pub const S2C_DATA: SegSpec = DATA_SEG;
/// Template for client data; same as [`DATA_SEG`], the name documents the intent.
pub const C2S_DATA: SegSpec = DATA_SEG;
/// Template for a server ACK; same as [`ACK_SEG`], the name documents the intent.
pub const S2C_ACK: SegSpec = ACK_SEG;
/// Template for a client ACK; same as [`ACK_SEG`], the name documents the intent.
pub const C2S_ACK: SegSpec = ACK_SEG;

/// Parameters of one connection (and, for the first one, of the script's clock).
#[derive(Clone, Debug, PartialEq)]
pub struct ScriptConfig {
    /// Client address; `None` = 10.0.0.1 (or fd00::1 with `ipv6`).
    pub client_ip: Option<IpAddr>,
    /// Server address; `None` = 10.0.0.2 (or fd00::2 with `ipv6`).
    pub server_ip: Option<IpAddr>,
    /// Client port.
    pub client_port: u16,
    /// Server port.
    pub server_port: u16,
    /// Use IPv6 default addresses.
    pub ipv6: bool,
    /// MSS option value in both SYNs (0 = no MSS option).
    pub mss: u16,
    /// Window scale the client offers in its SYN (`None` = no option).
    pub client_wscale: Option<u8>,
    /// Window scale the server offers in its SYN-ACK (`None` = no option).
    pub server_wscale: Option<u8>,
    /// SACK-permitted in both SYNs.
    pub sack: bool,
    /// Timestamps option on every segment.
    pub timestamps: bool,
    /// Client initial sequence number (raw).
    pub isn_client: u32,
    /// Server initial sequence number (raw).
    pub isn_server: u32,
    /// Window the client advertises at first, in bytes.
    pub client_window: u32,
    /// Window the server advertises at first, in bytes.
    pub server_window: u32,
    /// Round-trip time used by [`Script::handshake`] and [`Script::after_rtt`].
    pub rtt_ms: f64,
    /// Capture time of `at_ms(0)` (first connection only).
    pub start: Timestamp,
    /// Link type of the frames.
    pub link: LinkType,
    /// 802.1Q VLAN tag (Ethernet only).
    pub vlan: Option<u16>,
    /// Captured length limit for every frame.
    pub snaplen: Option<u32>,
    /// Client TSval at time 0 (its clock ticks once per ms).
    pub ts_client: u32,
    /// Server TSval at time 0 (its clock ticks once per ms).
    pub ts_server: u32,
}

impl ScriptConfig {
    /// Linux-like defaults: MSS 1460 (1448-byte segments with timestamps), wscale 7 both
    /// ways, SACK and timestamps on, RTT 10 ms, start 2024-01-01T00:00:00Z, Ethernet.
    pub const DEFAULT: Self = Self {
        client_ip: None,
        server_ip: None,
        client_port: 40000,
        server_port: 5201,
        ipv6: false,
        mss: 1460,
        client_wscale: Some(7),
        server_wscale: Some(7),
        sack: true,
        timestamps: true,
        isn_client: 1_000_000,
        isn_server: 2_000_000,
        client_window: 64256,
        server_window: 65280,
        rtt_ms: 10.0,
        start: Timestamp(1_704_067_200_000_000_000),
        link: LinkType::ETHERNET,
        vlan: None,
        snaplen: None,
        ts_client: 100_000,
        ts_server: 500_000,
    };

    /// Client address after applying the defaults.
    pub fn client_addr(&self) -> IpAddr {
        self.client_ip.unwrap_or(if self.ipv6 {
            IpAddr::V6(CLIENT_V6)
        } else {
            IpAddr::V4(CLIENT_V4)
        })
    }

    /// Server address after applying the defaults.
    pub fn server_addr(&self) -> IpAddr {
        self.server_ip.unwrap_or(if self.ipv6 {
            IpAddr::V6(SERVER_V6)
        } else {
            IpAddr::V4(SERVER_V4)
        })
    }
}

impl Default for ScriptConfig {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// One frame of a script with what produced it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptFrame {
    /// Capture time.
    pub ts: Timestamp,
    /// Connection it belongs to.
    pub conn: ConnId,
    /// Direction within the connection.
    pub dir: Dir,
    /// Relative sequence number.
    pub rel_seq: u32,
    /// Relative acknowledgement number (`None` when the ACK field was written as raw 0).
    pub rel_ack: Option<u32>,
    /// The raw frame description the bytes are built from.
    pub spec: FrameSpec,
    /// Whether the timestamps option is automatic (recomputed for repeats).
    ts_auto: bool,
}

/// What one endpoint has sent so far.
#[derive(Clone, Debug)]
struct Endpoint {
    isn: u32,
    /// Relative: highest end (seq + len + SYN + FIN) sent, 1 before anything was sent.
    next_seq: u32,
    /// Window in bytes advertised from now on.
    win_bytes: u32,
    wscale: Option<u8>,
    ts_base: u32,
    last_tsval: Option<u32>,
    ip_id: u16,
}

/// One connection of a script: its configuration and both endpoints.
#[derive(Clone, Debug)]
struct Conn {
    cfg: ScriptConfig,
    client: Endpoint,
    server: Endpoint,
}

impl Conn {
    fn new(cfg: ScriptConfig) -> Self {
        let ep = |isn, win_bytes, wscale, ts_base| Endpoint {
            isn,
            next_seq: 1,
            win_bytes,
            wscale,
            ts_base,
            last_tsval: None,
            ip_id: 1,
        };
        Self {
            client: ep(
                cfg.isn_client,
                cfg.client_window,
                cfg.client_wscale,
                cfg.ts_client,
            ),
            server: ep(
                cfg.isn_server,
                cfg.server_window,
                cfg.server_wscale,
                cfg.ts_server,
            ),
            cfg,
        }
    }

    fn ep(&self, dir: Dir) -> &Endpoint {
        match dir {
            Dir::ClientToServer => &self.client,
            Dir::ServerToClient => &self.server,
        }
    }

    fn ep_mut(&mut self, dir: Dir) -> &mut Endpoint {
        match dir {
            Dir::ClientToServer => &mut self.client,
            Dir::ServerToClient => &mut self.server,
        }
    }

    /// RFC 7323 2.2: scaling is in effect only if both SYNs carried the option.
    fn shift(&self, dir: Dir) -> u8 {
        match (self.cfg.client_wscale, self.cfg.server_wscale) {
            (Some(_), Some(_)) => self.ep(dir).wscale.unwrap_or(0),
            _ => 0,
        }
    }

    /// Raw window field for `bytes` sent in direction `dir`.
    #[track_caller]
    fn raw_window(&self, dir: Dir, bytes: u32, syn: bool) -> u16 {
        if syn {
            return bytes.min(u32::from(u16::MAX)) as u16;
        }
        let shift = self.shift(dir);
        let raw = bytes >> shift;
        u16::try_from(raw).unwrap_or_else(|_| {
            panic!("window {bytes} bytes >> scale {shift} = {raw} does not fit in 16 bits")
        })
    }
}

/// A TCP scenario: connections, a clock, and the frames written so far.
#[derive(Clone, Debug)]
pub struct Script {
    start: Timestamp,
    now: Timestamp,
    conns: Vec<Conn>,
    cur: usize,
    entries: Vec<ScriptFrame>,
}

impl Default for Script {
    fn default() -> Self {
        Self::new()
    }
}

impl Script {
    // ----- construction and connections -----

    /// A script with one connection using [`ScriptConfig::DEFAULT`], at time 0, no frames.
    pub fn new() -> Self {
        Self::with(ScriptConfig::DEFAULT)
    }

    /// A script with one connection using `cfg`.
    pub fn with(cfg: ScriptConfig) -> Self {
        Self {
            start: cfg.start,
            now: cfg.start,
            conns: vec![Conn::new(cfg)],
            cur: 0,
            entries: Vec::new(),
        }
    }

    /// A script using `cfg` whose handshake (frames 1-3) is already written.
    pub fn established(cfg: ScriptConfig) -> Self {
        let mut t = Self::with(cfg);
        t.handshake();
        t
    }

    /// Starts a new connection on the same addresses and ports as the current one (port
    /// reuse), with ISNs moved on, and makes it current.
    pub fn new_connection(&mut self) -> ConnId {
        let mut cfg = self.conns[self.cur].cfg.clone();
        let step = NEW_CONN_ISN_STEP.wrapping_mul(self.conns.len() as u32);
        cfg.isn_client = cfg.isn_client.wrapping_add(step);
        cfg.isn_server = cfg.isn_server.wrapping_add(step);
        self.add_connection(cfg)
    }

    /// Adds a connection with its own configuration (4-tuple, ISNs, options) and makes it
    /// current; its `start` is ignored, the script has one clock.
    pub fn add_connection(&mut self, cfg: ScriptConfig) -> ConnId {
        self.conns.push(Conn::new(cfg));
        self.cur = self.conns.len() - 1;
        ConnId(self.cur)
    }

    /// A connection that transfers 1000 bytes and closes, then another (the next client
    /// port) that sends `segments` 100-byte segments `gap_ms` apart from 200 ms on: a
    /// connection closed long before the capture ends. Returns the script (the second
    /// connection current) and the first connection.
    pub fn closed_then_busy(segments: u32, gap_ms: f64) -> (Script, ConnId) {
        let mut t = Script::new();
        let first = t.conn();
        t.handshake();
        t.at_ms(20).client_sends(AUTO, 1000);
        t.after_ms(10).server_acks(AUTO);
        t.fin(Dir::C2S);
        t.after_ms(1).fin(Dir::S2C);
        t.after_ms(1).client_acks(AUTO);
        let mut cfg = t.config().clone();
        cfg.client_port += 1;
        t.add_connection(cfg);
        t.at_ms(100).handshake();
        for i in 0..segments {
            let seq = t.next_seq(Dir::C2S);
            t.at_ms(200.0 + f64::from(i) * gap_ms)
                .client_sends(seq, 100);
        }
        (t, first)
    }

    /// Makes `id` the connection that later calls write to.
    #[track_caller]
    pub fn on(&mut self, id: ConnId) -> &mut Self {
        assert!(id.0 < self.conns.len(), "no connection {id:?}");
        self.cur = id.0;
        self
    }

    /// The current connection.
    pub fn conn(&self) -> ConnId {
        ConnId(self.cur)
    }

    /// Configuration of the current connection.
    pub fn config(&self) -> &ScriptConfig {
        &self.conns[self.cur].cfg
    }

    // ----- clock -----

    /// Sets the clock to `ms` milliseconds after the start.
    pub fn at_ms(&mut self, ms: impl Into<f64>) -> &mut Self {
        self.now = Timestamp(self.start.0 + ms_to_ns(ms.into()));
        self
    }

    /// Moves the clock `ms` milliseconds on.
    pub fn after_ms(&mut self, ms: impl Into<f64>) -> &mut Self {
        self.now = Timestamp(self.now.0 + ms_to_ns(ms.into()));
        self
    }

    /// Moves the clock one RTT of the current connection on.
    pub fn after_rtt(&mut self) -> &mut Self {
        let rtt = self.conns[self.cur].cfg.rtt_ms;
        self.after_ms(rtt)
    }

    /// Current time.
    pub fn now(&self) -> Timestamp {
        self.now
    }

    /// Current time in milliseconds since the start.
    pub fn now_ms(&self) -> f64 {
        self.now.since(self.start) as f64 / NS_PER_MS
    }

    // ----- endpoint state -----

    /// Sets the window (bytes) the client of the current connection advertises from now on.
    pub fn client_window(&mut self, bytes: u32) -> &mut Self {
        self.window(Dir::ClientToServer, bytes)
    }

    /// Sets the window (bytes) the server of the current connection advertises from now on.
    pub fn server_window(&mut self, bytes: u32) -> &mut Self {
        self.window(Dir::ServerToClient, bytes)
    }

    /// Sets the window (bytes) the sender of `dir` advertises from now on.
    pub fn window(&mut self, dir: Dir, bytes: u32) -> &mut Self {
        self.conns[self.cur].ep_mut(dir).win_bytes = bytes;
        self
    }

    /// Relative next sequence number of the sender of `dir` (what [`AUTO`] `seq` gives).
    pub fn next_seq(&self, dir: Dir) -> u32 {
        self.conns[self.cur].ep(dir).next_seq
    }

    /// Raw ISN of the sender of `dir`.
    pub fn isn(&self, dir: Dir) -> u32 {
        self.conns[self.cur].ep(dir).isn
    }

    // ----- segments: the generic forms -----

    /// Sends `spec` in direction `dir` on the current connection, at the current time.
    #[track_caller]
    pub fn send(&mut self, dir: Dir, spec: SegSpec) -> Sent<'_> {
        let i = self.push(dir, spec);
        self.sent(i..i + 1)
    }

    /// Sends `spec` from the client.
    #[track_caller]
    pub fn client(&mut self, spec: SegSpec) -> Sent<'_> {
        self.send(Dir::ClientToServer, spec)
    }

    /// Sends `spec` from the server.
    #[track_caller]
    pub fn server(&mut self, spec: SegSpec) -> Sent<'_> {
        self.send(Dir::ServerToClient, spec)
    }

    // ----- segments: handshake and close -----

    /// SYN, SYN-ACK (+1 RTT) and ACK (same time as the SYN-ACK); clock ends at +1 RTT.
    pub fn handshake(&mut self) -> Sent<'_> {
        let first = self.entries.len();
        self.syn();
        self.after_rtt();
        self.syn_ack();
        self.handshake_ack();
        self.sent(first..self.entries.len())
    }

    /// The client's SYN (relative seq 0), with the configured options.
    pub fn syn(&mut self) -> Sent<'_> {
        self.client(SegSpec {
            flags: SYN,
            ..ACK_SEG
        })
    }

    /// The server's SYN-ACK, with the configured options.
    pub fn syn_ack(&mut self) -> Sent<'_> {
        self.server(SegSpec {
            flags: SYN | ACK,
            ..ACK_SEG
        })
    }

    /// The client's ACK completing the handshake (seq 1, ack 1).
    pub fn handshake_ack(&mut self) -> Sent<'_> {
        self.client(ACK_SEG)
    }

    /// FIN|ACK from the sender of `dir` at its next sequence number.
    pub fn fin(&mut self, dir: Dir) -> Sent<'_> {
        self.send(
            dir,
            SegSpec {
                flags: FIN | ACK,
                ..ACK_SEG
            },
        )
    }

    /// FIN|ACK from the client.
    pub fn fin_from_client(&mut self) -> Sent<'_> {
        self.fin(Dir::ClientToServer)
    }

    /// FIN|ACK from the server.
    pub fn fin_from_server(&mut self) -> Sent<'_> {
        self.fin(Dir::ServerToClient)
    }

    /// RST|ACK from the sender of `dir` at its next sequence number.
    pub fn rst(&mut self, dir: Dir) -> Sent<'_> {
        self.send(
            dir,
            SegSpec {
                flags: RST | ACK,
                ..ACK_SEG
            },
        )
    }

    /// RST|ACK from the client.
    pub fn rst_from_client(&mut self) -> Sent<'_> {
        self.rst(Dir::ClientToServer)
    }

    /// RST|ACK from the server.
    pub fn rst_from_server(&mut self) -> Sent<'_> {
        self.rst(Dir::ServerToClient)
    }

    /// Orderly close started by the sender of `dir`: FIN, the peer's FIN|ACK, final ACK,
    /// all at the current time.
    pub fn close(&mut self, dir: Dir) -> Sent<'_> {
        let first = self.entries.len();
        self.fin(dir);
        self.fin(dir.rev());
        self.send(dir, ACK_SEG);
        self.sent(first..self.entries.len())
    }

    // ----- segments: data and ACKs -----

    /// `len` bytes at relative `seq` (or [`AUTO`]) from the sender of `dir`, PSH|ACK.
    #[track_caller]
    pub fn sends(&mut self, dir: Dir, seq: u32, len: u32) -> Sent<'_> {
        self.send(
            dir,
            SegSpec {
                seq,
                len,
                ..DATA_SEG
            },
        )
    }

    /// `len` bytes at relative `seq` (or [`AUTO`]) from the client.
    #[track_caller]
    pub fn client_sends(&mut self, seq: u32, len: u32) -> Sent<'_> {
        self.sends(Dir::ClientToServer, seq, len)
    }

    /// `len` bytes at relative `seq` (or [`AUTO`]) from the server.
    #[track_caller]
    pub fn server_sends(&mut self, seq: u32, len: u32) -> Sent<'_> {
        self.sends(Dir::ServerToClient, seq, len)
    }

    /// These exact payload bytes at the client's next sequence number.
    #[track_caller]
    pub fn client_sends_bytes(&mut self, data: &[u8]) -> Sent<'_> {
        self.client(SegSpec {
            payload: Payload::Bytes(data.to_vec()),
            ..DATA_SEG
        })
    }

    /// These exact payload bytes at the server's next sequence number.
    #[track_caller]
    pub fn server_sends_bytes(&mut self, data: &[u8]) -> Sent<'_> {
        self.server(SegSpec {
            payload: Payload::Bytes(data.to_vec()),
            ..DATA_SEG
        })
    }

    /// `count` back-to-back segments of `seg_len` bytes from relative `seq` (or [`AUTO`]),
    /// all at the current time.
    #[track_caller]
    pub fn burst(&mut self, dir: Dir, seq: u32, count: u32, seg_len: u32) -> Sent<'_> {
        let first = self.entries.len();
        let mut seq = if seq == AUTO { self.next_seq(dir) } else { seq };
        for _ in 0..count {
            self.push(
                dir,
                SegSpec {
                    seq,
                    len: seg_len,
                    ..DATA_SEG
                },
            );
            seq = seq.wrapping_add(seg_len);
        }
        self.sent(first..self.entries.len())
    }

    /// `count` segments of `seg_len` bytes from the server starting at relative `seq`.
    #[track_caller]
    pub fn server_burst(&mut self, seq: u32, count: u32, seg_len: u32) -> Sent<'_> {
        self.burst(Dir::ServerToClient, seq, count, seg_len)
    }

    /// `count` segments of `seg_len` bytes from the client starting at relative `seq`.
    #[track_caller]
    pub fn client_burst(&mut self, seq: u32, count: u32, seg_len: u32) -> Sent<'_> {
        self.burst(Dir::ClientToServer, seq, count, seg_len)
    }

    /// Pure ACK with relative `ack` from the sender of `dir`.
    #[track_caller]
    pub fn acks(&mut self, dir: Dir, ack: u32) -> Sent<'_> {
        self.send(dir, SegSpec { ack, ..ACK_SEG })
    }

    /// Pure ACK with relative `ack` from the client.
    #[track_caller]
    pub fn client_acks(&mut self, ack: u32) -> Sent<'_> {
        self.acks(Dir::ClientToServer, ack)
    }

    /// Pure ACK with relative `ack` from the server.
    #[track_caller]
    pub fn server_acks(&mut self, ack: u32) -> Sent<'_> {
        self.acks(Dir::ServerToClient, ack)
    }

    /// Keep-alive from the sender of `dir`: seq = next seq - 1, no payload (Wireshark's
    /// `tcp.analysis.keep_alive`). Repeat with [`Sent::times_every_ms`].
    #[track_caller]
    pub fn keepalive(&mut self, dir: Dir) -> Sent<'_> {
        let seq = self.next_seq(dir).wrapping_sub(1);
        self.send(dir, SegSpec { seq, ..ACK_SEG })
    }

    /// Zero-window probe from the sender of `dir`: 1 byte at its next sequence number, which
    /// stays where it was (the receiver did not take the byte), so repeats with
    /// [`Sent::times_every_ms`] carry the same seq, as Wireshark's `zero_window_probe` expects.
    #[track_caller]
    pub fn zero_window_probe(&mut self, dir: Dir) -> Sent<'_> {
        let seq = self.next_seq(dir);
        let i = self.push(
            dir,
            SegSpec {
                seq,
                len: 1,
                ..DATA_SEG
            },
        );
        self.conns[self.cur].ep_mut(dir).next_seq = seq;
        self.sent(i..i + 1)
    }

    /// Keep-alive from the client.
    #[track_caller]
    pub fn keepalive_from_client(&mut self) -> Sent<'_> {
        self.keepalive(Dir::ClientToServer)
    }

    /// Keep-alive from the server.
    #[track_caller]
    pub fn keepalive_from_server(&mut self) -> Sent<'_> {
        self.keepalive(Dir::ServerToClient)
    }

    // ----- output -----

    /// The frames written so far, numbered from 1.
    #[track_caller]
    pub fn frames(&self) -> Vec<OwnedFrame> {
        self.entries
            .iter()
            .enumerate()
            .map(|(i, e)| e.spec.to_frame(FrameNo(i as u64 + 1), e.ts))
            .collect()
    }

    /// The frames with what produced them (index 0 is frame 1).
    pub fn entries(&self) -> &[ScriptFrame] {
        &self.entries
    }

    /// Number of frames written so far.
    pub fn frame_count(&self) -> usize {
        self.entries.len()
    }

    /// Number of the last frame written (`FrameNo(0)` when there is none).
    pub fn last_frame_no(&self) -> FrameNo {
        FrameNo(self.entries.len() as u64)
    }

    /// The frames as a pcapng file in memory.
    pub fn pcapng_bytes(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        pcap_writer::write_pcapng(&mut buf, &self.frames()).expect("writing to a Vec");
        buf
    }

    /// The frames as a classic pcap file in memory.
    pub fn pcap_bytes(&self, nanos: bool) -> io::Result<Vec<u8>> {
        let mut buf = Vec::new();
        pcap_writer::write_pcap(&mut buf, &self.frames(), nanos)?;
        Ok(buf)
    }

    /// Writes the frames as pcapng to `path`.
    pub fn write_pcapng(&self, path: impl AsRef<Path>) -> io::Result<()> {
        let mut w = BufWriter::new(File::create(path)?);
        pcap_writer::write_pcapng(&mut w, &self.frames())?;
        w.flush()
    }

    /// Writes the frames as classic pcap to `path`.
    pub fn write_pcap(&self, path: impl AsRef<Path>, nanos: bool) -> io::Result<()> {
        let mut w = BufWriter::new(File::create(path)?);
        pcap_writer::write_pcap(&mut w, &self.frames(), nanos)?;
        w.flush()
    }

    /// Writes the frames as pcapng to a fresh file in the temp dir named after `name`.
    pub fn write_temp_pcapng(&self, name: &str) -> io::Result<PathBuf> {
        let path = std::env::temp_dir().join(format!(
            "tcpdx-testkit-{}-{name}.pcapng",
            std::process::id()
        ));
        self.write_pcapng(&path)?;
        Ok(path)
    }

    // ----- internals -----

    fn sent(&mut self, range: Range<usize>) -> Sent<'_> {
        Sent {
            script: self,
            range,
        }
    }

    /// Resolves `spec` against the current connection, updates its state, appends the frame
    /// and returns its index.
    #[track_caller]
    fn push(&mut self, dir: Dir, spec: SegSpec) -> usize {
        let now = self.now;
        let elapsed = now.since(self.start);
        let conn = &mut self.conns[self.cur];
        let cfg = &conn.cfg;
        let syn = spec.flags & SYN != 0;
        let me = conn.ep(dir);
        let peer = conn.ep(dir.rev());

        let rel_seq = match spec.seq {
            AUTO if syn => 0,
            AUTO => me.next_seq,
            s => s,
        };
        let rel_ack = match spec.ack {
            AUTO if spec.flags & ACK != 0 => Some(peer.next_seq),
            AUTO => None,
            a => Some(a),
        };
        let window = spec.win_raw.unwrap_or_else(|| {
            let bytes = if spec.win == AUTO {
                me.win_bytes
            } else {
                spec.win
            };
            conn.raw_window(dir, bytes, syn)
        });

        let ts_auto = spec.options.is_none() && spec.ts == TsOpt::Auto;
        let options = match spec.options {
            Some(o) => o,
            None => {
                let timestamps = match spec.ts {
                    TsOpt::Auto if cfg.timestamps => {
                        Some((tsval(me.ts_base, elapsed), peer.last_tsval.unwrap_or(0)))
                    }
                    TsOpt::Auto | TsOpt::Off => None,
                    TsOpt::Val(v, e) => Some((v, e)),
                };
                let peer_isn = peer.isn;
                OptionsSpec {
                    mss: (syn && cfg.mss > 0).then_some(cfg.mss),
                    wscale: if syn { me.wscale } else { None },
                    sack_perm: syn && cfg.sack,
                    timestamps,
                    sack: spec
                        .sack
                        .iter()
                        .map(|&(l, r)| (peer_isn.wrapping_add(l), peer_isn.wrapping_add(r)))
                        .collect(),
                    raw: None,
                }
            }
        };

        let (src, dst, src_mac, dst_mac, src_port, dst_port) = match dir {
            Dir::ClientToServer => (
                cfg.client_addr(),
                cfg.server_addr(),
                CLIENT_MAC,
                SERVER_MAC,
                cfg.client_port,
                cfg.server_port,
            ),
            Dir::ServerToClient => (
                cfg.server_addr(),
                cfg.client_addr(),
                SERVER_MAC,
                CLIENT_MAC,
                cfg.server_port,
                cfg.client_port,
            ),
        };
        let frame = FrameSpec {
            link: cfg.link,
            src_mac,
            dst_mac,
            vlan: cfg.vlan,
            eth_pad: false,
            src,
            dst,
            ttl: 64,
            ip_id: me.ip_id,
            dont_fragment: true,
            tos: 0,
            src_port,
            dst_port,
            seq: me.isn.wrapping_add(rel_seq),
            ack: rel_ack.map_or(0, |a| peer.isn.wrapping_add(a)),
            flags: spec.flags,
            window,
            urgent: spec.urgent,
            options,
            payload_len: spec.len,
            payload: spec.payload,
            snaplen: spec.snaplen.or(cfg.snaplen),
            bad_checksum: spec.bad_checksum,
        };
        let len = frame.payload_len() as u32;
        let end = rel_seq
            .wrapping_add(len)
            .wrapping_add(u32::from(syn))
            .wrapping_add(u32::from(spec.flags & FIN != 0));

        let me = conn.ep_mut(dir);
        if (end.wrapping_sub(me.next_seq) as i32) > 0 {
            me.next_seq = end;
        }
        if let Some((val, _)) = frame.options.timestamps {
            me.last_tsval = Some(val);
        }
        me.ip_id = me.ip_id.wrapping_add(1);

        self.entries.push(ScriptFrame {
            ts: now,
            conn: ConnId(self.cur),
            dir,
            rel_seq,
            rel_ack,
            spec: frame,
            ts_auto,
        });
        self.entries.len() - 1
    }
}

/// The frames written by one [`Script`] call; methods adjust or repeat them.
///
/// Adjustments (`sack`, `win`, `ts`, ...) apply to every frame of the call and do not change
/// the connection state, except where noted.
pub struct Sent<'a> {
    script: &'a mut Script,
    range: Range<usize>,
}

impl Sent<'_> {
    /// Number of the first frame of this call.
    pub fn frame_no(&self) -> FrameNo {
        FrameNo(self.range.start as u64 + 1)
    }

    /// Numbers of all frames of this call.
    pub fn frame_nos(&self) -> Vec<FrameNo> {
        self.range.clone().map(|i| FrameNo(i as u64 + 1)).collect()
    }

    /// Writes the frames `n` times in all, at the current time (each repeat a new packet:
    /// IP id and automatic TSval move on).
    #[track_caller]
    pub fn times(self, n: usize) -> Self {
        self.times_every_ms(n, 0.0)
    }

    /// Writes the frames `n` times in all, moving the clock `ms` on before each repeat.
    #[track_caller]
    pub fn times_every_ms(mut self, n: usize, ms: impl Into<f64>) -> Self {
        assert!(
            n >= 1,
            "times(0): a frame that was written cannot be unwritten this way"
        );
        let ms = ms.into();
        let group = self.range.clone();
        for _ in 1..n {
            self.script.after_ms(ms);
            for i in group.clone() {
                let copy = self.renew(i);
                self.script.entries.push(copy);
            }
        }
        self.range = group.start..self.script.entries.len();
        self
    }

    /// Adds the same frames again with identical bytes and time: a capture duplicate, not a
    /// retransmission.
    pub fn captured_twice(mut self) -> Self {
        let copies: Vec<_> = self.script.entries[self.range.clone()].to_vec();
        self.script.entries.extend(copies);
        self.range = self.range.start..self.script.entries.len();
        self
    }

    /// Removes the frames from the capture but keeps their effect on the connection state
    /// (sent, then lost before the capture point).
    pub fn not_captured(self) {
        self.script.entries.truncate(self.range.start);
    }

    /// Sets SACK blocks, relative to the receiver's ISN.
    #[track_caller]
    pub fn sack(self, blocks: &[(u32, u32)]) -> Self {
        self.each(|s, e| {
            let isn = s.conns[e.conn.0].ep(e.dir.rev()).isn;
            e.spec.options.sack = blocks
                .iter()
                .map(|&(l, r)| (isn.wrapping_add(l), isn.wrapping_add(r)))
                .collect();
        })
    }

    /// Sets the advertised window in bytes (scaled like [`AUTO`] windows).
    #[track_caller]
    pub fn win(self, bytes: u32) -> Self {
        self.each(|s, e| {
            let syn = e.spec.flags & SYN != 0;
            e.spec.window = s.conns[e.conn.0].raw_window(e.dir, bytes, syn);
        })
    }

    /// Sets the raw window field.
    pub fn win_raw(self, raw: u16) -> Self {
        self.each(|_, e| e.spec.window = raw)
    }

    /// Sets the timestamps option to raw `(TSval, TSecr)`; later TSecr echo this TSval.
    pub fn ts(self, val: u32, ecr: u32) -> Self {
        self.each(|s, e| {
            e.spec.options.timestamps = Some((val, ecr));
            e.ts_auto = false;
            s.conns[e.conn.0].ep_mut(e.dir).last_tsval = Some(val);
        })
    }

    /// Limits the captured length of these frames.
    pub fn snaplen(self, len: u32) -> Self {
        self.each(|_, e| e.spec.snaplen = Some(len))
    }

    /// Gives these frames a wrong TCP checksum.
    pub fn bad_checksum(self) -> Self {
        self.each(|_, e| e.spec.bad_checksum = true)
    }

    /// Adds flag bits (e.g. [`crate::ECE`], [`crate::CWR`], [`crate::URG`]); use
    /// [`SegSpec`] for SYN or FIN, which change sequence space.
    pub fn flags(self, bits: u16) -> Self {
        self.each(|_, e| e.spec.flags |= bits)
    }

    /// Sets the IPv4 TOS / IPv6 traffic class byte (e.g. 0x03 = ECN CE).
    pub fn tos(self, tos: u8) -> Self {
        self.each(|_, e| e.spec.tos = tos)
    }

    /// Edits the raw frame description of each frame (no state change).
    pub fn with(self, mut f: impl FnMut(&mut FrameSpec)) -> Self {
        self.each(|_, e| f(&mut e.spec))
    }

    /// Applies `f` to each frame of the call, with the script for state look-ups.
    fn each(self, mut f: impl FnMut(&mut Script, &mut ScriptFrame)) -> Self {
        for i in self.range.clone() {
            let mut e = self.script.entries[i].clone();
            f(self.script, &mut e);
            self.script.entries[i] = e;
        }
        self
    }

    /// A new packet repeating entry `i` at the current time.
    fn renew(&mut self, i: usize) -> ScriptFrame {
        let s = &mut *self.script;
        let mut e = s.entries[i].clone();
        e.ts = s.now;
        let elapsed = s.now.since(s.start);
        let me = s.conns[e.conn.0].ep_mut(e.dir);
        e.spec.ip_id = me.ip_id;
        me.ip_id = me.ip_id.wrapping_add(1);
        if let (true, Some((val, _))) = (e.ts_auto, &mut e.spec.options.timestamps) {
            *val = tsval(me.ts_base, elapsed);
            me.last_tsval = Some(*val);
        }
        e
    }
}

/// Milliseconds (fractional) to nanoseconds, rounded.
fn ms_to_ns(ms: f64) -> i64 {
    (ms * NS_PER_MS).round() as i64
}

/// TSval of a 1 kHz clock that read `base` at the script's start.
fn tsval(base: u32, elapsed_ns: i64) -> u32 {
    base.wrapping_add((elapsed_ns.max(0) / 1_000_000) as u32)
}

#[cfg(test)]
mod tests;
