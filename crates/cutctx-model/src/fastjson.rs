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
}

impl Sink for Vec<u8> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
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
            self.hasher.update(&self.buf);
            self.buf.clear();
            if bytes.len() >= Self::CAPACITY {
                self.hasher.update(bytes);
                return;
            }
        }
        self.buf.extend_from_slice(bytes);
    }
}

/// A JSON string literal with Python's escapes (see [`crate::canonical`]).
///
/// Tool output is long and mostly plain, so the text is scanned eight bytes at a time: each
/// word yields a mask with the high bit set in exactly the bytes to escape, and only those
/// bytes are visited. The runs between escapes go out whole.
pub(crate) fn put_str<S: Sink>(out: &mut S, s: &str) {
    let bytes = s.as_bytes();
    out.put(b"\"");
    // The start of the run not yet written.
    let mut run = 0;
    let mut chunks = bytes.chunks_exact(8);
    let mut at = 0;
    for chunk in &mut chunks {
        let mut word = [0_u8; 8];
        word.copy_from_slice(chunk);
        let mut mask = escape_mask(u64::from_le_bytes(word));
        while mask != 0 {
            // Little-endian: bit 8k + 7 is byte k.
            let i = at + (mask.trailing_zeros() / 8) as usize;
            out.put(&bytes[run..i]);
            put_escape(out, bytes[i]);
            run = i + 1;
            mask &= mask - 1;
        }
        at += 8;
    }
    for (i, &b) in chunks.remainder().iter().enumerate() {
        if needs_escape(b) {
            out.put(&bytes[run..at + i]);
            put_escape(out, b);
            run = at + i + 1;
        }
    }
    out.put(&bytes[run..]);
    out.put(b"\"");
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
fn put_escape<S: Sink>(out: &mut S, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match b {
        b'"' => out.put(b"\\\""),
        b'\\' => out.put(b"\\\\"),
        b'\n' => out.put(b"\\n"),
        b'\r' => out.put(b"\\r"),
        b'\t' => out.put(b"\\t"),
        0x08 => out.put(b"\\b"),
        0x0c => out.put(b"\\f"),
        _ => out.put(&[
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
