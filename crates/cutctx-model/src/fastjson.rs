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
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Feeds a SHA-256 hasher through a 64 KiB buffer, so small writes cost little.
pub(crate) struct HashSink {
    hasher: Sha256,
    buf: Vec<u8>,
}

impl HashSink {
    const CAPACITY: usize = 64 * 1024;

    pub(crate) fn new() -> Self {
        Self {
            hasher: Sha256::new(),
            buf: Vec::with_capacity(Self::CAPACITY),
        }
    }

    /// Lower-case hex of the digest of everything put.
    pub(crate) fn finish_hex(mut self) -> String {
        self.hasher.update(&self.buf);
        crate::canonical::hex(&self.hasher.finalize())
    }
}

impl Sink for HashSink {
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
pub(crate) fn put_str<S: Sink>(out: &mut S, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    if !bytes.iter().any(|&b| b < 0x20 || b == b'"' || b == b'\\') {
        out.put(b"\"");
        out.put(bytes);
        out.put(b"\"");
        return;
    }
    out.put(b"\"");
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let named: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0x00..=0x1f => {
                out.put(&bytes[start..i]);
                out.put(&[
                    b'\\',
                    b'u',
                    b'0',
                    b'0',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 0xf)],
                ]);
                start = i + 1;
                continue;
            }
            _ => continue,
        };
        out.put(&bytes[start..i]);
        out.put(named);
        start = i + 1;
    }
    out.put(&bytes[start..]);
    out.put(b"\"");
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
