#!/usr/bin/env python3
"""Writes the malformed captures of this directory (each a few bytes to a few hundred).

Each NAME has a NAME.expected sidecar: the one line tcpdx prints on stderr, without the
"tcpdx: PATH: " prefix (errors: exit code 2; lines starting with "warning: ": exit code 0).
The sidecars were written from tcpdx's output once and reviewed (not by this script);
crates/tcpdx-cli/tests/malformed.rs checks every file against its sidecar (events, flows
and diagnose). Rerun: python3 generate.py
"""
import gzip
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

# A TCP SYN over Ethernet/IPv4 (54 bytes), checksums not verified by tcpdx.
FRAME = bytes.fromhex(
    "020000000002" "020000000001" "0800"
    "45000028000040004006" "0000" "0a000001" "0a000002"
    "9c401451" "00000000" "00000000" "5002ffff" "00000000"
)


def pcap_header(magic=0xA1B2C3D4, major=2, minor=4, snaplen=65535, link=1):
    return struct.pack("<IHHiIII", magic, major, minor, 0, 0, snaplen, link)


def pcap_record(data, caplen=None, orig=None, ts=0):
    caplen = len(data) if caplen is None else caplen
    orig = len(data) if orig is None else orig
    return struct.pack("<IIII", ts, 0, caplen, orig) + data


def shb(major=1, minor=0, magic=0x1A2B3C4D, length=28):
    return struct.pack("<IIIHHqI", 0x0A0D0D0A, length, magic, major, minor, -1, length)


def idb(link=1, snaplen=0, options=b""):
    total = 20 + len(options)
    return struct.pack("<IIHHI", 1, total, link, 0, snaplen) + options + struct.pack("<I", total)


def epb(data, interface=0, caplen=None, total=None, trailer=None):
    pad = (4 - len(data) % 4) % 4
    t = 32 + len(data) + pad if total is None else total
    c = len(data) if caplen is None else caplen
    return (
        struct.pack("<IIIIIII", 6, t, interface, 0, 0, c, len(data))
        + data
        + b"\0" * pad
        + struct.pack("<I", t if trailer is None else trailer)
    )


FILES = {
    "empty.pcap": b"",
    "text-notes.pcap": b"these are notes, not packets\n",
    "magic-only-2-bytes.pcap": b"\xd4\xc3",
    "pcap-header-cut.pcap": pcap_header()[:10],
    "pcap-version-1.pcap": pcap_header(major=1, minor=0),
    "pcap-caplen-2gb.pcap": pcap_header() + pcap_record(FRAME) + pcap_record(b"", caplen=0x7FFFFFFF),
    "pcap-record-cut.pcap": pcap_header() + pcap_record(FRAME) + pcap_record(FRAME)[:30],
    "pcapng-shb-cut.pcapng": shb()[:20],
    "pcapng-byte-order-magic.pcapng": shb(magic=0x11223344),
    "pcapng-version-2.pcapng": shb(major=2),
    "pcapng-length-not-multiple-of-4.pcapng": shb() + idb() + epb(FRAME, total=90),
    "pcapng-epb-length-16.pcapng": shb() + idb() + struct.pack("<IIII", 6, 16, 0, 16),
    "pcapng-block-length-4gb.pcapng": shb() + idb() + struct.pack("<II", 6, 0xFFFFFFFC) + b"\0" * 40,
    "pcapng-trailer-mismatch.pcapng": shb() + idb() + epb(FRAME, trailer=4096),
    "pcapng-caplen-beyond-block.pcapng": shb() + idb() + epb(FRAME, caplen=1000),
    "pcapng-epb-before-idb.pcapng": shb() + epb(FRAME) + idb(),
    "pcapng-interface-7-of-1.pcapng": shb() + idb() + epb(FRAME) + epb(FRAME, interface=7),
    "pcapng-idb-option-overrun.pcapng": shb() + idb(options=struct.pack("<HH", 9, 200) + b"\x06\0\0\0"),
    "pcapng-block-cut.pcapng": shb() + idb() + epb(FRAME) + epb(FRAME)[:40],
    "gzip-of-text.pcap.gz": gzip.compress(b"GET / HTTP/1.1\r\nHost: example\r\n\r\n", mtime=0),
    "gzip-cut.pcap.gz": gzip.compress(pcap_header() + pcap_record(FRAME) * 50, mtime=0)[:60],
}

for name, data in FILES.items():
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
print(f"{len(FILES)} files written to {HERE}")
