//! A partition's stage 2 result as bytes ([`Partial::write_to`], [`Partial::read_from`]):
//! a stage 2 task in one process, on one machine, and the merge in another.
//!
//! Layout: the magic line, the run's fingerprint (of its shards' metas: a partial is
//! merged only with the shards it was computed from), the partition count and number,
//! the body's length, the body (the worker's whole output, [`tcpdx_core::codec`]), and a
//! 64-bit FNV-1a hash of all that (a damaged file is refused, not merged).

use std::io::Write;
use std::path::Path;

use tcpdx_core::codec::{Codec, Dec, DecodeError};

use super::{Partial, ShardMeta};
use crate::Error;

const MAGIC: &[u8; 16] = b"tcpdx-partial 1\n";

/// 64-bit FNV-1a (a checksum, not a defence against tampering).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The fingerprint of a run's shards: their metas, in index order.
pub(crate) fn fingerprint(metas: &[ShardMeta]) -> u64 {
    let text: String = metas.iter().map(ShardMeta::to_text).collect();
    fnv1a(text.as_bytes())
}

impl Partial {
    /// The partial's bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, Error> {
        self.out.check_portable().map_err(|what| {
            Error::Shard(format!("partition {}: cannot write {what}", self.partition))
        })?;
        let mut body = Vec::new();
        self.out.enc(&mut body);
        let mut w = Vec::with_capacity(body.len() + 48);
        w.extend_from_slice(MAGIC);
        self.run.enc(&mut w);
        self.partitions.enc(&mut w);
        self.partition.enc(&mut w);
        body.len().enc(&mut w);
        w.extend_from_slice(&body);
        let sum = fnv1a(&w);
        sum.enc(&mut w);
        Ok(w)
    }

    /// Writes the partial to `w`; `name` names it in errors.
    pub fn write_to(&self, mut w: impl Write, name: &Path) -> Result<(), Error> {
        let bytes = self.to_bytes()?;
        w.write_all(&bytes)
            .and_then(|()| w.flush())
            .map_err(|e| Error::Shard(format!("{}: {e}", name.display())))
    }

    /// Writes the partial into the file `path` (whole, or not at all: written under
    /// another name, then renamed).
    pub fn write_file(&self, path: &Path) -> Result<(), Error> {
        let bytes = self.to_bytes()?;
        let tmp = path.with_extension("partial.tmp");
        let io = |p: &Path, e: std::io::Error| Error::Shard(format!("{}: {e}", p.display()));
        std::fs::write(&tmp, bytes).map_err(|e| io(&tmp, e))?;
        std::fs::rename(&tmp, path).map_err(|e| io(path, e))
    }

    /// Reads what [`Partial::to_bytes`] wrote; `name` names it in errors (with the offset
    /// and what was wrong).
    pub fn read_from(bytes: &[u8], name: &Path) -> Result<Partial, Error> {
        let bad = |e: DecodeError| {
            Error::Shard(format!(
                "{}: offset {}: {} (not a whole tcpdx partial)",
                name.display(),
                e.offset,
                e.what
            ))
        };
        let mut r = Dec::new(bytes);
        if r.take(MAGIC.len(), "the magic").map_err(bad)? != MAGIC {
            return Err(bad(DecodeError {
                offset: 0,
                what: "not a tcpdx partial (or of another version)".into(),
            }));
        }
        let run = u64::dec(&mut r).map_err(bad)?;
        let partitions = u16::dec(&mut r).map_err(bad)?;
        let partition = u16::dec(&mut r).map_err(bad)?;
        if partition >= partitions {
            return Err(bad(
                r.error(format!("partition {partition} of {partitions}"))
            ));
        }
        let len = r.length().map_err(bad)?;
        let start = r.offset();
        let body = r.take(len, "the body").map_err(bad)?;
        let end = r.offset();
        let sum = u64::dec(&mut r).map_err(bad)?;
        if sum != fnv1a(&bytes[..end as usize]) {
            return Err(bad(DecodeError {
                offset: end,
                what: "the checksum does not match: the file is damaged".into(),
            }));
        }
        if r.remaining() != 0 {
            return Err(bad(
                r.error(format!("{} bytes after the end", r.remaining()))
            ));
        }
        let mut b = Dec::new(body);
        let shift = |e: DecodeError| DecodeError {
            offset: e.offset + start,
            what: e.what,
        };
        let out = Codec::dec(&mut b).map_err(|e| bad(shift(e)))?;
        if b.remaining() != 0 {
            return Err(bad(shift(b.error("bytes left in the body"))));
        }
        Ok(Partial {
            partition,
            partitions,
            run,
            out,
        })
    }

    /// Reads the partial file `path`.
    pub fn read_file(path: &Path) -> Result<Partial, Error> {
        let bytes =
            std::fs::read(path).map_err(|e| Error::Shard(format!("{}: {e}", path.display())))?;
        Self::read_from(&bytes, path)
    }
}
