//! A hand-written canonical writer for the model's own types: plans, reports and turns.
//!
//! It writes exactly what [`crate::canonical::canonical_json`] writes for these types (tests
//! hold the two equal), several times faster, straight into a buffer or into a hasher. Field
//! orders here are the code point orders of the keys.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::canonical::py_float_repr;

/// Where canonical bytes go.
pub(crate) trait Sink {
    fn put(&mut self, bytes: &[u8]);

    /// `bytes` with JSON's escapes applied, no quotes.
    fn put_escaped(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }

    fn put_escaped(&mut self, bytes: &[u8]) {
        escape_into(self, bytes);
    }
}

/// Feeds a SHA-256 hasher through a buffer of up to 64 KiB, so small writes cost little.
pub(crate) struct HashSink {
    hasher: Sha256,
    buf: Vec<u8>,
}

impl HashSink {
    const CAPACITY: usize = 64 * 1024;

    /// A sink for about `expected` bytes: a short string's hash does not pay for a large buffer.
    pub(crate) fn with_expected(expected: usize) -> Self {
        Self {
            hasher: Sha256::new(),
            buf: Vec::with_capacity(expected.min(Self::CAPACITY)),
        }
    }

    /// The digest of everything put.
    pub(crate) fn finish(mut self) -> [u8; 32] {
        self.hasher.update(&self.buf);
        self.hasher.finalize().into()
    }

    /// Lower-case hex of the digest of everything put.
    pub(crate) fn finish_hex(self) -> String {
        crate::canonical::hex(&self.finish())
    }
}

impl Sink for HashSink {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        if self.buf.len() + bytes.len() > Self::CAPACITY {
            self.flush();
            if bytes.len() >= Self::CAPACITY {
                self.hasher.update(bytes);
                return;
            }
        }
        self.buf.extend_from_slice(bytes);
    }

    fn put_escaped(&mut self, bytes: &[u8]) {
        // A byte escapes to at most six; pieces of an eighth of the buffer always fit once
        // it is flushed.
        for piece in bytes.chunks(Self::CAPACITY / 8) {
            if self.buf.len() + 6 * piece.len() > Self::CAPACITY {
                self.flush();
            }
            escape_into(&mut self.buf, piece);
        }
    }
}

impl HashSink {
    fn flush(&mut self) {
        self.hasher.update(&self.buf);
        self.buf.clear();
    }
}

/// A JSON string literal with Python's escapes (see [`crate::canonical`]).
pub(crate) fn put_str<S: Sink>(out: &mut S, s: &str) {
    out.put(b"\"");
    out.put_escaped(s.as_bytes());
    out.put(b"\"");
}

/// Appends `bytes` to `out` with JSON's escapes applied.
///
/// Tool output is long and mostly plain, so the text goes eight bytes at a time: a word's
/// [`escape_mask`] names the bytes to escape, and the runs between them are copied whole. Cutting `bytes` anywhere is safe: every byte of a multi-byte UTF-8
/// sequence is at least 0x80, and no such byte is escaped.
fn escape_into(out: &mut Vec<u8>, bytes: &[u8]) {
    // Ids and names are short and plain: one check, one copy.
    if bytes.len() <= 32 && !bytes.iter().any(|&b| needs_escape(b)) {
        out.extend_from_slice(bytes);
        return;
    }
    out.reserve(bytes.len() + bytes.len() / 8);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0_u8; 8];
        word.copy_from_slice(chunk);
        let mut mask = escape_mask(u64::from_le_bytes(word));
        // The bytes of `word` not yet written.
        let mut from = 0;
        while mask != 0 {
            // Little-endian: bit 8k + 7 of the mask flags byte k.
            let i = (mask.trailing_zeros() / 8) as usize;
            out.extend_from_slice(&word[from..i]);
            put_escape(out, word[i]);
            from = i + 1;
            mask &= mask - 1;
        }
        out.extend_from_slice(&word[from..]);
    }
    escape_bytes(out, chunks.remainder());
}

/// Appends `bytes` with escapes, one at a time.
fn escape_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    for &b in bytes {
        if needs_escape(b) {
            put_escape(out, b);
        } else {
            out.push(b);
        }
    }
}

/// For eight bytes read as a little-endian word: 0x80 in each byte JSON must escape (below
/// 0x20, `"` or `\\`), 0 in the others.
const fn escape_mask(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    /// 0x80 in each zero byte of `v`, exactly: the sum of two 7-bit halves cannot carry
    /// into the next byte.
    const fn zero_bytes(v: u64) -> u64 {
        !(((v & LOW7) + LOW7) | v | LOW7)
    }
    zero_bytes(x & (ONES * 0xe0))
        | zero_bytes(x ^ (ONES * b'"' as u64))
        | zero_bytes(x ^ (ONES * b'\\' as u64))
}

/// Whether JSON must escape `b`: a control byte, `"` or `\\`.
const fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// The escape of `b`, one of the bytes [`needs_escape`] names: by name where Python has one,
/// else `\\u00xx` in lower-case hex.
fn put_escape(out: &mut Vec<u8>, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match b {
        b'"' => out.extend_from_slice(b"\\\""),
        b'\\' => out.extend_from_slice(b"\\\\"),
        b'\n' => out.extend_from_slice(b"\\n"),
        b'\r' => out.extend_from_slice(b"\\r"),
        b'\t' => out.extend_from_slice(b"\\t"),
        0x08 => out.extend_from_slice(b"\\b"),
        0x0c => out.extend_from_slice(b"\\f"),
        _ => out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(b >> 4)],
            HEX[usize::from(b & 0xf)],
        ]),
    }
}

pub(crate) fn put_u64<S: Sink>(out: &mut S, n: u64) {
    let mut buf = [0_u8; 20];
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        // `n % 10` is below 10, so the cast cannot truncate.
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.put(&buf[i..]);
}

pub(crate) fn put_bool<S: Sink>(out: &mut S, b: bool) {
    out.put(if b { b"true" } else { b"false" });
}

pub(crate) fn put_opt_str<S: Sink>(out: &mut S, s: Option<&str>) {
    match s {
        Some(s) => put_str(out, s),
        None => out.put(b"null"),
    }
}

pub(crate) fn put_opt_f64<S: Sink>(out: &mut S, f: Option<f64>) {
    match f.and_then(py_float_repr) {
        Some(text) => out.put(text.as_bytes()),
        None => out.put(b"null"),
    }
}

pub(crate) fn put_str_list<'a, S: Sink>(out: &mut S, items: impl IntoIterator<Item = &'a str>) {
    out.put(b"[");
    for (i, s) in items.into_iter().enumerate() {
        if i > 0 {
            out.put(b",");
        }
        put_str(out, s);
    }
    out.put(b"]");
}

pub(crate) fn put_str_map<S: Sink>(out: &mut S, map: &BTreeMap<String, String>) {
    out.put(b"{");
    for (i, (k, v)) in map.iter().enumerate() {
        if i > 0 {
            out.put(b",");
        }
        put_str(out, k);
        out.put(b":");
        put_str(out, v);
    }
    out.put(b"}");
}
