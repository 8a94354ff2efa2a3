//! Differential test against tshark 4.0 on the public capture corpus.
//!
//! For every capture in `shared/corpus` that has a reference file
//! (`reference/<id>.tcp.csv.gz`: tshark's per-TCP-packet output), every frame is decoded
//! with its interface's link type and compared with tshark:
//!
//! - the frames where `decode` finds TCP must be the frames listed in the reference;
//! - `TcpHeader::payload_len` must equal the `len` column (`tcp.len`).
//!
//! Rows whose fields hold two comma-separated values (two TCP layers, e.g. TCP quoted in
//! an ICMP error inside a tunnel) are skipped. The corpus is referenced in place (never
//! copied into the repository); when it is absent the test prints a notice and passes.
//!
//! Environment: `TCPDX_CORPUS` overrides the corpus folder, `TCPDX_CORPUS_ONLY=<id>[,<id>]`
//! restricts the run, `TCPDX_CORPUS_VERBOSE=1` prints every disagreeing frame.
//!
//! # Documented differences (Wireshark behaviour we deliberately do not reproduce)
//!
//! Each disagreement is put in one of these classes; the summary prints what each costs.
//!
//! - `ip-fragment`: Wireshark reassembles IP fragments by default and shows TCP on the
//!   frame that completes the datagram (and on a first fragment it could not reassemble).
//!   `decode` flags fragments (`IpInfo::fragment`) and does not analyse them: a per-frame
//!   decoder cannot reassemble.
//! - `icmp-quoted`: Wireshark shows the TCP header quoted inside an ICMP error as a TCP
//!   layer. It is not a segment of the connection; `decode` reports no TCP.
//! - `partial-tcp-header`: the TCP header (options included) was not fully captured, or
//!   the IP length leaves less than a header. Wireshark still shows a TCP layer (with the
//!   length when the IP length allows one); our contract is "no whole header, no tcp".
//! - `bogus-tcp-header`: data offset below 5. Wireshark still computes `tcp.len` with the
//!   impossible header length; `decode` reports `Malformed` and no tcp.
//! - `sflow-sample`: a TCP header inside an sFlow sample (UDP port 6343) is a truncated copy
//!   of someone else's packet, not a segment; Wireshark dissects it.
//! - `ipv6-zero-length`: IPv6 payload length 0 without a jumbo option. `decode` takes the
//!   wire length (TSO / BIG TCP captures); Wireshark 4.0 (IPv6 TSO preference off) shows no
//!   `tcp.len`. None in the corpus today.
//! - `unsupported-link`: link types outside the decoder's list.
//! - `no-len`: both see TCP but tshark printed no `len` (its "short segment" path).
//! - `known`: single frames listed in [`KNOWN`] with the reason.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use pcap_parser::pcapng::Block;
use pcap_parser::traits::PcapNGPacketBlock;
use pcap_parser::{PcapBlockOwned, PcapError, create_reader};
use tcpdx_wire::ip::proto;
use tcpdx_wire::{Layer, LinkType, PacketView, StopKind, decode};

/// Overall agreement below this fails the test.
const MIN_AGREEMENT: f64 = 0.999;

/// Individual frames where tshark and `decode` differ for a documented reason.
const KNOWN: &[(&str, u64, &str)] = &[(
    "SURI-0481",
    8,
    "IPv4 security option with length 2: Wireshark's option dissector throws and the IPv4 \
     layer is abandoned; decode does not validate IP options and finds the TCP header",
)];

/// One reference row: `None` when tshark printed no `len`.
type RefLen = Option<u32>;

/// Why a frame disagrees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Class {
    /// Documented: IP fragment (Wireshark reassembles).
    IpFragment,
    /// Documented: TCP quoted in an ICMP error.
    IcmpQuoted,
    /// Documented: TCP header not fully captured (or cut by the IP length).
    PartialTcpHeader,
    /// Documented: TCP data offset below 5.
    BogusTcpHeader,
    /// Documented: TCP header copied into an sFlow sample.
    SflowSample,
    /// Documented: listed in `KNOWN`.
    Known,
    /// Documented: IPv6 payload length 0 taken as the wire length.
    Ipv6ZeroLength,
    /// Documented: link type the decoder does not support.
    UnsupportedLink,
    /// Documented: tshark gave no `len` though we decoded a full header.
    NoLen,
    /// Undocumented: tshark has TCP, we do not.
    Missing,
    /// Undocumented: we have TCP, tshark does not.
    Extra,
    /// Undocumented: both have TCP, lengths differ.
    Len,
}

impl Class {
    fn name(self) -> &'static str {
        match self {
            Class::IpFragment => "ip-fragment",
            Class::IcmpQuoted => "icmp-quoted",
            Class::PartialTcpHeader => "partial-tcp-header",
            Class::BogusTcpHeader => "bogus-tcp-header",
            Class::SflowSample => "sflow-sample",
            Class::Known => "known",
            Class::Ipv6ZeroLength => "ipv6-zero-length",
            Class::UnsupportedLink => "unsupported-link",
            Class::NoLen => "no-len",
            Class::Missing => "missing-tcp",
            Class::Extra => "extra-tcp",
            Class::Len => "len-mismatch",
        }
    }
    fn documented(self) -> bool {
        !matches!(self, Class::Missing | Class::Extra | Class::Len)
    }
}

#[derive(Default)]
struct FileStats {
    frames: u64,
    ref_frames: u64,
    /// Frames where decode finds TCP and the reference lists none.
    extra: u64,
    skipped_rows: u64,
    tcp_matched: u64,
    len_matched: u64,
    classes: BTreeMap<Class, u64>,
    read_error: Option<String>,
}

impl FileStats {
    fn disagreements(&self) -> u64 {
        self.classes.values().sum()
    }
}

fn corpus_dir() -> PathBuf {
    std::env::var_os("TCPDX_CORPUS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus"),
        PathBuf::from,
    )
}

#[test]
fn corpus_matches_tshark() {
    let dir = corpus_dir();
    let manifest = dir.join("MANIFEST.tsv");
    if !manifest.exists() {
        eprintln!("corpus not found at {}: skipped", dir.display());
        return;
    }
    let only: Option<Vec<String>> = std::env::var("TCPDX_CORPUS_ONLY")
        .ok()
        .map(|s| s.split(',').map(str::to_owned).collect());
    let verbose = std::env::var_os("TCPDX_CORPUS_VERBOSE").is_some();

    let mut per_file: Vec<(String, FileStats)> = Vec::new();
    for (id, local_path) in read_manifest(&manifest) {
        if only.as_ref().is_some_and(|o| !o.contains(&id)) {
            continue;
        }
        let reference = dir.join("reference").join(format!("{id}.tcp.csv.gz"));
        if !reference.exists() {
            continue;
        }
        let stats = compare_file(&id, &dir.join(&local_path), &reference, verbose);
        per_file.push((id, stats));
    }
    assert!(
        !per_file.is_empty(),
        "no capture with a reference file found"
    );

    let mut total = FileStats::default();
    for (_, s) in &per_file {
        total.frames += s.frames;
        total.ref_frames += s.ref_frames;
        total.extra += s.extra;
        total.skipped_rows += s.skipped_rows;
        total.tcp_matched += s.tcp_matched;
        total.len_matched += s.len_matched;
        for (c, n) in &s.classes {
            *total.classes.entry(*c).or_default() += n;
        }
    }

    println!("per-file disagreements (files with any):");
    let mut worst: Vec<&(String, FileStats)> = per_file
        .iter()
        .filter(|(_, s)| s.disagreements() > 0)
        .collect();
    worst.sort_by_key(|(_, s)| std::cmp::Reverse(s.disagreements()));
    for (id, s) in &worst {
        let classes: Vec<String> = s
            .classes
            .iter()
            .map(|(c, n)| format!("{}={n}", c.name()))
            .collect();
        println!(
            "  {id}: {} of {} reference frames; {}{}",
            s.disagreements(),
            s.ref_frames,
            classes.join(" "),
            s.read_error
                .as_ref()
                .map(|e| format!(" (read error: {e})"))
                .unwrap_or_default()
        );
    }
    let extra = total.extra;
    let compared = total.ref_frames + extra;
    let agreement = total.len_matched as f64 / compared.max(1) as f64;
    let undocumented: u64 = total
        .classes
        .iter()
        .filter(|(c, _)| !c.documented())
        .map(|(_, n)| n)
        .sum();
    println!(
        "files {}, frames {}, reference TCP frames {} (+{} two-layer rows skipped), \
         TCP frames matched {}, len matched {}, extra TCP frames {}",
        per_file.len(),
        total.frames,
        total.ref_frames,
        total.skipped_rows,
        total.tcp_matched,
        total.len_matched,
        extra
    );
    for (c, n) in &total.classes {
        let tag = if c.documented() {
            "documented"
        } else {
            "UNDOCUMENTED"
        };
        println!("  {:<20} {n:>7} frames ({tag})", c.name());
    }
    println!(
        "agreement {:.6} (len matched / (reference frames + extra frames)); undocumented \
         disagreements {undocumented}",
        agreement
    );
    let worst_list: Vec<String> = worst
        .iter()
        .take(15)
        .map(|(id, s)| format!("{id} ({})", s.disagreements()))
        .collect();
    assert!(
        agreement >= MIN_AGREEMENT,
        "agreement {agreement:.6} below {MIN_AGREEMENT}; worst files: {}",
        worst_list.join(", ")
    );
}

/// `(id, local_path)` of every manifest row.
fn read_manifest(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).expect("read MANIFEST.tsv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or_default().split('\t').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("MANIFEST.tsv has no {name} column"))
    };
    let (id_col, path_col) = (col("id"), col("local_path"));
    lines
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            Some((f.get(id_col)?.to_string(), f.get(path_col)?.to_string()))
        })
        .collect()
}

/// Reference rows: frame number -> len; plus the number of two-layer rows skipped.
fn read_reference(path: &Path) -> (HashMap<u64, RefLen>, u64) {
    let gz = flate2::read::GzDecoder::new(File::open(path).expect("open reference"));
    let mut rows = HashMap::new();
    let mut skipped = 0;
    for (i, line) in BufReader::new(gz).lines().enumerate() {
        let line = line.expect("read reference");
        if i == 0 {
            assert!(line.starts_with("frame,"), "unexpected header in {path:?}");
            continue;
        }
        let fields = split_csv(&line);
        let Some(frame) = fields.first().and_then(|f| f.parse::<u64>().ok()) else {
            continue;
        };
        if fields.iter().any(|f| f.contains(',')) {
            skipped += 1;
            continue;
        }
        let len = fields.get(5).and_then(|f| f.parse::<u32>().ok());
        rows.insert(frame, len);
    }
    (rows, skipped)
}

/// Splits one CSV line, honouring double quotes.
fn split_csv(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// Decodes every frame of one capture and compares it with the reference.
fn compare_file(id: &str, capture: &Path, reference: &Path, verbose: bool) -> FileStats {
    let (rows, skipped) = read_reference(reference);
    let mut stats = FileStats {
        ref_frames: rows.len() as u64,
        skipped_rows: skipped,
        ..FileStats::default()
    };
    let mut seen = std::collections::HashSet::new();
    let result = for_each_frame(capture, |no, link, data, orig_len| {
        stats.frames += 1;
        let view = decode(link, data, orig_len);
        let ours = view.tcp.map(|t| t.payload_len);
        let theirs = rows.get(&no);
        if theirs.is_some() {
            seen.insert(no);
        }
        let class = match (theirs, ours) {
            (None, None) => None,
            (None, Some(_)) => {
                stats.extra += 1;
                Some(classify_extra(&view, data))
            }
            (Some(_), Some(_)) => {
                stats.tcp_matched += 1;
                match theirs {
                    Some(Some(len)) if Some(*len) == ours => {
                        stats.len_matched += 1;
                        None
                    }
                    Some(None) => Some(Class::NoLen),
                    _ => Some(Class::Len),
                }
            }
            (Some(_), None) => Some(classify_missing(&view, data)),
        };
        let class = class.map(|c| {
            if KNOWN.iter().any(|(k, n, _)| *k == id && *n == no) {
                Class::Known
            } else {
                c
            }
        });
        if let Some(class) = class {
            *stats.classes.entry(class).or_default() += 1;
            if verbose {
                println!(
                    "{id} frame {no}: {} link {} caplen {} origlen {orig_len}: tshark len {:?}, \
                     ours {ours:?}, ip {:?}, stop {:?}",
                    class.name(),
                    link.0,
                    data.len(),
                    theirs,
                    view.ip,
                    view.stop
                );
            }
        }
    });
    if let Err(e) = result {
        stats.read_error = Some(e);
    }
    // Reference frames the reader never produced (it stopped earlier than tshark).
    let unread = rows.keys().filter(|no| !seen.contains(no)).count() as u64;
    if unread > 0 {
        *stats.classes.entry(Class::Missing).or_default() += unread;
        if verbose {
            println!("{id}: {unread} reference frames never read");
        }
    }
    stats
}

/// Puts a frame where `decode` finds TCP and tshark does not into a class.
fn classify_extra(view: &PacketView<'_>, data: &[u8]) -> Class {
    if let Some(ip) = view.ip.filter(|ip| ip.src.is_ipv6()) {
        let at = usize::from(ip.offset) + 4;
        if data.get(at..at + 2) == Some(&[0, 0][..]) {
            return Class::Ipv6ZeroLength;
        }
    }
    Class::Extra
}

/// sFlow's UDP port.
const SFLOW_PORT: u16 = 6343;

/// Puts a frame that tshark shows as TCP and `decode` does not into a class.
fn classify_missing(view: &PacketView<'_>, data: &[u8]) -> Class {
    if let Some(ip) = view.ip {
        if ip.fragment {
            return Class::IpFragment;
        }
        if matches!(ip.proto, proto::ICMP | proto::ICMPV6) {
            return Class::IcmpQuoted;
        }
    }
    let Some(stop) = view.stop else {
        return Class::Missing;
    };
    match (stop.layer, stop.kind) {
        (_, StopKind::UnsupportedLinkType(_)) => Class::UnsupportedLink,
        (Layer::Tcp, StopKind::Truncated { .. }) => Class::PartialTcpHeader,
        (Layer::Tcp, StopKind::Malformed(_)) => Class::BogusTcpHeader,
        (Layer::Udp, StopKind::NotTcp { .. }) => {
            let at = usize::from(stop.offset);
            let port = |i: usize| {
                data.get(at + i..at + i + 2)
                    .map(|b| u16::from_be_bytes([b[0], b[1]]))
            };
            if port(0) == Some(SFLOW_PORT) || port(2) == Some(SFLOW_PORT) {
                Class::SflowSample
            } else {
                Class::Missing
            }
        }
        _ => Class::Missing,
    }
}

/// Calls `f(frame number, link type, captured bytes, original length)` for every packet
/// record, numbered like Wireshark's `frame.number`.
fn for_each_frame(path: &Path, mut f: impl FnMut(u64, LinkType, &[u8], u32)) -> Result<(), String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    let mut reader = create_reader(1 << 20, file).map_err(|e| format!("{e:?}"))?;
    let mut legacy_link = LinkType(0);
    let mut interfaces: Vec<LinkType> = Vec::new();
    let mut no = 0u64;
    loop {
        match reader.next() {
            Ok((offset, block)) => {
                match block {
                    PcapBlockOwned::LegacyHeader(h) => legacy_link = link_of(h.network.0),
                    PcapBlockOwned::Legacy(b) => {
                        no += 1;
                        let data = &b.data[..(b.caplen as usize).min(b.data.len())];
                        f(no, legacy_link, data, b.origlen);
                    }
                    PcapBlockOwned::NG(Block::SectionHeader(_)) => interfaces.clear(),
                    PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                        interfaces.push(link_of(idb.linktype.0));
                    }
                    PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                        no += 1;
                        let link = interfaces
                            .get(epb.if_id as usize)
                            .copied()
                            .unwrap_or(LinkType(u16::MAX));
                        f(no, link, epb.packet_data(), epb.origlen);
                    }
                    PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                        no += 1;
                        let link = interfaces.first().copied().unwrap_or(LinkType(u16::MAX));
                        f(no, link, spb.packet_data(), spb.origlen);
                    }
                    PcapBlockOwned::NG(Block::Unknown(u))
                        if is_obsolete_packet_block(u.block_type) =>
                    {
                        no += 1;
                        obsolete_packet_block(u.block_type, u.data, &interfaces, no, &mut f);
                    }
                    PcapBlockOwned::NG(_) => {}
                }
                reader.consume(offset);
            }
            Err(PcapError::Eof) => return Ok(()),
            Err(PcapError::Incomplete(_)) => {
                if reader.reader_exhausted() {
                    return Err("truncated last record".into());
                }
                reader.refill().map_err(|e| format!("{e:?}"))?;
            }
            Err(PcapError::BufferTooSmall) => {
                let size = reader.data().len().max(1 << 20) * 2;
                if size > 1 << 28 || !reader.grow(size) {
                    return Err("record larger than 256 MiB".into());
                }
                reader.refill().map_err(|e| format!("{e:?}"))?;
            }
            Err(e) => return Err(format!("{e:?}")),
        }
    }
}

/// pcapng block type 2, the obsolete Packet Block.
fn is_obsolete_packet_block(block_type: u32) -> bool {
    block_type == 2 || block_type == 2u32.swap_bytes()
}

/// Obsolete Packet Block body: interface id (2), drops (2), timestamp (8), caplen (4),
/// origlen (4), data.
fn obsolete_packet_block(
    block_type: u32,
    body: &[u8],
    interfaces: &[LinkType],
    no: u64,
    f: &mut impl FnMut(u64, LinkType, &[u8], u32),
) {
    let big = block_type != 2;
    let rd16 = |b: &[u8]| {
        let a = [b[0], b[1]];
        if big {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        }
    };
    let rd32 = |b: &[u8]| {
        let a = [b[0], b[1], b[2], b[3]];
        if big {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        }
    };
    if body.len() < 20 {
        return;
    }
    let link = interfaces
        .get(usize::from(rd16(&body[0..2])))
        .copied()
        .unwrap_or(LinkType(u16::MAX));
    let caplen = rd32(&body[12..16]) as usize;
    let origlen = rd32(&body[16..20]);
    let data = &body[20..];
    f(no, link, &data[..caplen.min(data.len())], origlen);
}

/// LINKTYPE value from a file header field (the upper bits carry FCS information).
fn link_of(raw: i32) -> LinkType {
    LinkType((raw as u32 & 0x03ff_ffff) as u16)
}
