//! A lossless binary encoding of analysis results, so that a diagnosis partition computed in
//! one process (a distributed run's stage 2 task) can be merged in another.
//!
//! Not serde: the types' `Serialize` impls are the JSON output format (fields skipped or
//! flattened), which cannot be read back. Each type lists its fields once
//! ([`codec_struct!`]); the struct literal the macro builds makes a field left out a
//! compile error. Fixed-width little-endian fields, lengths as `u64`; reading never
//! panics and names the offset of what it could not read.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{BuildHasher, Hash};
use std::sync::{Mutex, OnceLock};

use tcpdx_wire::{FrameNo, Timestamp};

use crate::{Dir, InputStats, StreamId, Warning};

/// What could not be read, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// Byte offset in the encoding.
    pub offset: u64,
    /// What was wrong.
    pub what: String,
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "offset {}: {}", self.offset, self.what)
    }
}

impl std::error::Error for DecodeError {}

/// Reads an encoding front to back.
pub struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Dec<'a> {
    /// Reading `buf` from its start.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }
    /// Bytes read so far.
    pub fn offset(&self) -> u64 {
        self.pos as u64
    }
    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }
    /// An error at the current offset.
    pub fn error(&self, what: impl Into<String>) -> DecodeError {
        DecodeError {
            offset: self.offset(),
            what: what.into(),
        }
    }
    /// The next `n` bytes.
    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], DecodeError> {
        let Some(s) = self.buf.get(self.pos..self.pos.saturating_add(n)) else {
            return Err(self.error(format!(
                "cut short: {what} needs {n} bytes, {} left",
                self.remaining()
            )));
        };
        self.pos += n;
        Ok(s)
    }
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], DecodeError> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    /// A length, checked against what is left (every element takes a byte at least, so a
    /// garbled length cannot make the reader allocate more than the input's size).
    pub fn length(&mut self) -> Result<usize, DecodeError> {
        let at = self.offset();
        let n = u64::from_le_bytes(self.array("a length")?);
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= self.remaining())
            .ok_or_else(|| DecodeError {
                offset: at,
                what: format!(
                    "length {n} is past the end ({} bytes left)",
                    self.remaining()
                ),
            })
    }
    /// A variant tag below `n` of type `what`.
    pub fn tag(&mut self, n: u8, what: &str) -> Result<u8, DecodeError> {
        let at = self.offset();
        let [t] = self.array::<1>(what)?;
        if t >= n {
            return Err(DecodeError {
                offset: at,
                what: format!("{what}: variant {t} unknown ({n} known)"),
            });
        }
        Ok(t)
    }
}

/// A value that encodes losslessly (see the module doc).
pub trait Codec: Sized {
    /// Appends the encoding of `self`.
    fn enc(&self, w: &mut Vec<u8>);
    /// Reads one value.
    fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError>;
}

/// Encodes `v` into a new buffer.
pub fn to_bytes<T: Codec>(v: &T) -> Vec<u8> {
    let mut w = Vec::new();
    v.enc(&mut w);
    w
}

/// [`Codec`] for a struct with named fields, every one listed (a field left out does not
/// compile).
#[macro_export]
macro_rules! codec_struct {
    ($t:ty { $($f:ident),* $(,)? }) => {
        impl $crate::codec::Codec for $t {
            fn enc(&self, w: &mut Vec<u8>) {
                $( $crate::codec::Codec::enc(&self.$f, w); )*
            }
            fn dec(r: &mut $crate::codec::Dec<'_>) -> Result<Self, $crate::codec::DecodeError> {
                Ok(Self { $( $f: $crate::codec::Codec::dec(r)?, )* })
            }
        }
    };
}

/// [`Codec`] for an enum of unit variants, every one listed (a byte: its place here).
#[macro_export]
macro_rules! codec_unit_enum {
    ($t:ident { $($v:ident),* $(,)? }) => {
        impl $crate::codec::Codec for $t {
            fn enc(&self, w: &mut Vec<u8>) {
                const ALL: &[$t] = &[$($t::$v),*];
                // Exhaustive: a variant added and not listed does not compile.
                match self { $( $t::$v => {} )* }
                let i = ALL.iter().position(|v| v == self).unwrap_or(0);
                w.push(i as u8);
            }
            fn dec(r: &mut $crate::codec::Dec<'_>) -> Result<Self, $crate::codec::DecodeError> {
                const ALL: &[$t] = &[$($t::$v),*];
                let t = r.tag(ALL.len() as u8, stringify!($t))?;
                ALL.get(usize::from(t))
                    .copied()
                    .ok_or_else(|| r.error(stringify!($t)))
            }
        }
    };
}

macro_rules! le {
    ($($t:ty),*) => {$(
        impl Codec for $t {
            fn enc(&self, w: &mut Vec<u8>) {
                w.extend_from_slice(&self.to_le_bytes());
            }
            fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
                Ok(<$t>::from_le_bytes(r.array(stringify!($t))?))
            }
        }
    )*};
}
le!(u8, u16, u32, u64, i64, i128, f64);

impl Codec for usize {
    fn enc(&self, w: &mut Vec<u8>) {
        (*self as u64).enc(w);
    }
    fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
        let at = r.offset();
        let v = u64::dec(r)?;
        usize::try_from(v).map_err(|_| DecodeError {
            offset: at,
            what: format!("{v} is over this machine's word"),
        })
    }
}

impl Codec for bool {
    fn enc(&self, w: &mut Vec<u8>) {
        w.push(u8::from(*self));
    }
    fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(r.tag(2, "bool")? == 1)
    }
}

impl<T: Codec> Codec for Option<T> {
    fn enc(&self, w: &mut Vec<u8>) {
        match self {
            None => w.push(0),
            Some(v) => {
                w.push(1);
                v.enc(w);
            }
        }
    }
    fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(match r.tag(2, "Option")? {
            0 => None,
            _ => Some(T::dec(r)?),
        })
    }
}

impl<T: Codec> Codec for Box<T> {
    fn enc(&self, w: &mut Vec<u8>) {
        (**self).enc(w);
    }
    fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
        T::dec(r).map(Box::new)
    }
}

impl<T: Codec> Codec for Vec<T> {
    fn enc(&self, w: &mut Vec<u8>) {
        self.len().enc(w);
        for v in self {
            v.enc(w);
        }
    }
    fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
        let n = r.length()?;
        // Grown as read: a large element type must not multiply a garbled length.
        let mut v = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            v.push(T::dec(r)?);
        }
        Ok(v)
    }
}

impl<T: Codec, const N: usize> Codec for [T; N] {
    fn enc(&self, w: &mut Vec<u8>) {
        for v in self {
            v.enc(w);
        }
    }
    fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
        let mut v = Vec::with_capacity(N);
        for _ in 0..N {
            v.push(T::dec(r)?);
        }
        v.try_into()
            .map_err(|_| r.error("array of the wrong length"))
    }
}

impl<A: Codec, B: Codec> Codec for (A, B) {
    fn enc(&self, w: &mut Vec<u8>) {
        self.0.enc(w);
        self.1.enc(w);
    }
    fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok((A::dec(r)?, B::dec(r)?))
    }
}

impl<A: Codec, B: Codec, C: Codec> Codec for (A, B, C) {
    fn enc(&self, w: &mut Vec<u8>) {
        self.0.enc(w);
        self.1.enc(w);
        self.2.enc(w);
    }
    fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok((A::dec(r)?, B::dec(r)?, C::dec(r)?))
    }
}

/// A map's entries: their count, then each key and value.
fn enc_entries<'a, K: Codec + 'a, V: Codec + 'a>(
    len: usize,
    entries: impl IntoIterator<Item = (&'a K, &'a V)>,
    w: &mut Vec<u8>,
) {
    len.enc(w);
    for (k, v) in entries {
        k.enc(w);
        v.enc(w);
    }
}

impl<K: Codec + Ord, V: Codec> Codec for BTreeMap<K, V> {
    fn enc(&self, w: &mut Vec<u8>) {
        enc_entries(self.len(), self, w);
    }
    fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
        let n = r.length()?;
        let mut m = BTreeMap::new();
        for _ in 0..n {
            let (k, v) = <(K, V)>::dec(r)?;
            m.insert(k, v);
        }
        Ok(m)
    }
}

impl<K: Codec + Eq + Hash, V: Codec, S: BuildHasher + Default> Codec for HashMap<K, V, S> {
    fn enc(&self, w: &mut Vec<u8>) {
        enc_entries(self.len(), self, w);
    }
    fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
        let n = r.length()?;
        let mut m = HashMap::with_capacity_and_hasher(n.min(1024), S::default());
        for _ in 0..n {
            let (k, v) = <(K, V)>::dec(r)?;
            m.insert(k, v);
        }
        Ok(m)
    }
}

impl Codec for String {
    fn enc(&self, w: &mut Vec<u8>) {
        self.len().enc(w);
        w.extend_from_slice(self.as_bytes());
    }
    fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
        let n = r.length()?;
        let at = r.offset();
        let b = r.take(n, "a text")?;
        String::from_utf8(b.to_vec()).map_err(|_| DecodeError {
            offset: at,
            what: "a text that is not UTF-8".into(),
        })
    }
}

/// Distinct texts [`intern`] keeps at most: the program's own (roles, operation names) are
/// a few hundred; more means the input is not a partial tcpdx wrote.
const MAX_INTERNED: usize = 4096;

/// The `'static` copy of a text the program holds as `&'static str` (a finding's fixed
/// role, an operation's name): each distinct text is leaked once, and there are few.
fn intern(s: String, r: &Dec<'_>) -> Result<&'static str, DecodeError> {
    static TEXTS: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut texts = TEXTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(&t) = texts.get(s.as_str()) {
        return Ok(t);
    }
    if texts.len() >= MAX_INTERNED {
        return Err(r.error(format!(
            "over {MAX_INTERNED} distinct fixed texts: not a tcpdx encoding"
        )));
    }
    let t: &'static str = Box::leak(s.into_boxed_str());
    texts.insert(t);
    Ok(t)
}

impl Codec for &'static str {
    fn enc(&self, w: &mut Vec<u8>) {
        self.len().enc(w);
        w.extend_from_slice(self.as_bytes());
    }
    fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
        let s = String::dec(r)?;
        intern(s, r)
    }
}

/// Borrowed or owned as it was: a listing's memory budget counts owned texts only.
impl Codec for Cow<'static, str> {
    fn enc(&self, w: &mut Vec<u8>) {
        match self {
            Cow::Borrowed(s) => {
                w.push(0);
                s.enc(w);
            }
            Cow::Owned(s) => {
                w.push(1);
                s.enc(w);
            }
        }
    }
    fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
        Ok(match r.tag(2, "text")? {
            0 => Cow::Borrowed(<&'static str>::dec(r)?),
            _ => Cow::Owned(String::dec(r)?),
        })
    }
}

macro_rules! newtype {
    ($($t:ident($inner:ty)),*) => {$(
        impl Codec for $t {
            fn enc(&self, w: &mut Vec<u8>) {
                self.0.enc(w);
            }
            fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
                <$inner>::dec(r).map($t)
            }
        }
    )*};
}
newtype!(StreamId(u32), FrameNo(u64), Timestamp(i64));

codec_unit_enum!(Dir {
    ClientToServer,
    ServerToClient
});

codec_struct!(InputStats {
    frames,
    tcp_segments,
    fragments,
    undecodable,
    expired,
    capped_segments,
    partial_tcp,
    evicted_flows,
    resumed_flows,
    forgotten_flows,
});

impl Codec for Warning {
    fn enc(&self, w: &mut Vec<u8>) {
        match self {
            Warning::StateCapReached { stream, what } => {
                w.push(0);
                stream.enc(w);
                what.enc(w);
            }
        }
    }
    fn dec(r: &mut Dec<'_>) -> Result<Self, DecodeError> {
        r.tag(1, "Warning")?;
        Ok(Warning::StateCapReached {
            stream: Codec::dec(r)?,
            what: Codec::dec(r)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round<T: Codec + PartialEq + std::fmt::Debug>(v: T) {
        let b = to_bytes(&v);
        let mut r = Dec::new(&b);
        assert_eq!(T::dec(&mut r).unwrap(), v);
        assert_eq!(r.remaining(), 0);
        // Every cut is an error, never a panic.
        for cut in 0..b.len() {
            assert!(T::dec(&mut Dec::new(&b[..cut])).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn values_read_back_as_written() {
        round(-0.0f64);
        round(f64::NAN.to_bits());
        round(i128::MIN);
        round(Some((StreamId(7), FrameNo(u64::MAX), Timestamp(-1))));
        round(vec![String::from("é"), String::new()]);
        round([1.5f64, 2.0, -3.25]);
        round(BTreeMap::from([(3u8, (1u64, true)), (0, (2, false))]));
        round(Warning::StateCapReached {
            stream: StreamId(3),
            what: "unacked list",
        });
        round(InputStats {
            frames: 1,
            forgotten_flows: 9,
            ..InputStats::default()
        });
        let cows: Vec<Cow<'static, str>> = vec![Cow::Borrowed("fixed"), Cow::Owned("made".into())];
        let back = Vec::<Cow<'static, str>>::dec(&mut Dec::new(&to_bytes(&cows))).unwrap();
        assert!(matches!(back[0], Cow::Borrowed("fixed")));
        assert!(matches!(&back[1], Cow::Owned(s) if s == "made"));
    }

    #[test]
    fn garbled_input_is_an_error_at_its_offset() {
        // A length past the end: named at the length's offset, nothing allocated.
        let mut b = to_bytes(&7u32);
        b.extend_from_slice(&u64::MAX.to_le_bytes());
        let mut r = Dec::new(&b);
        u32::dec(&mut r).unwrap();
        let e = Vec::<u8>::dec(&mut r).unwrap_err();
        assert_eq!(e.offset, 4);
        assert!(e.what.contains("past the end"), "{e}");
        // A bool that is neither 0 nor 1, an unknown variant, bad UTF-8.
        assert!(bool::dec(&mut Dec::new(&[2])).is_err());
        assert_eq!(Dir::dec(&mut Dec::new(&[2])).unwrap_err().offset, 0);
        let mut bad = to_bytes(&2usize);
        bad.extend_from_slice(&[0xff, 0xfe]);
        assert!(
            String::dec(&mut Dec::new(&bad))
                .unwrap_err()
                .what
                .contains("UTF-8")
        );
    }
}
