//! Hand-built NFSv3 messages in RPC record marking, for storage-layer scenarios.

/// Big-endian XDR words.
fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_be_bytes()).collect()
}

/// `m` as one last-fragment RPC record.
fn record(m: Vec<u8>) -> Vec<u8> {
    let mut r = (0x8000_0000u32 | m.len() as u32).to_be_bytes().to_vec();
    r.extend(m);
    r
}

/// Record-marked NFSv3 READ call: `xid`, an 8-byte handle, offset 0, `count` bytes.
pub fn read_call(xid: u32, count: u32) -> Vec<u8> {
    let mut m = words(&[xid, 0, 2, 100_003, 3, 6, 1, 8, 0, 0, 0, 0, 8, 1, 2]);
    m.extend(0u64.to_be_bytes());
    m.extend(words(&[count]));
    record(m)
}

/// Record-marked successful reply to READ `xid` carrying `count` bytes (0x42) and EOF.
pub fn read_reply(xid: u32, count: u32) -> Vec<u8> {
    let mut m = words(&[xid, 1, 0, 0, 0, 0, 0, 0, count, 1, count]);
    m.extend(vec![0x42; count as usize]);
    record(m)
}

/// Record-marked NFSv3 WRITE call: `xid`, an 8-byte handle, offset 0, `count` bytes (0x57),
/// FILE_SYNC.
pub fn write_call(xid: u32, count: u32) -> Vec<u8> {
    let mut m = words(&[xid, 0, 2, 100_003, 3, 7, 1, 8, 0, 0, 0, 0, 8, 1, 2]);
    m.extend(0u64.to_be_bytes());
    m.extend(words(&[count, 2, count]));
    m.extend(vec![0x57; count as usize]);
    // XDR opaque data is padded to a multiple of four bytes.
    m.resize(m.len().next_multiple_of(4), 0);
    record(m)
}

/// Record-marked successful reply to WRITE `xid` of `count` bytes, FILE_SYNC, no attributes.
pub fn write_reply(xid: u32, count: u32) -> Vec<u8> {
    record(words(&[xid, 1, 0, 0, 0, 0, 0, 0, 0, count, 2, 0, 0]))
}
