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
        if let Some(plain) = short_and_plain(bytes) {
            self.extend_from_slice(plain);
            return;
        }
        let mut rest = bytes;
        while !rest.is_empty() {
            // Room for the bytes and some escapes; `escape_words` stops where room runs out.
            let start = self.len();
            self.resize(start + rest.len() + rest.len() / 4 + ROOM_PER_WORD, 0);
            let (end, taken) = escape_words(self, start, rest);
            self.truncate(end);
            rest = &rest[taken..];
        }
    }
}

/// Feeds a SHA-256 hasher through a buffer, so small writes cost little: on the heap, up to
/// 64 KiB, for long writers such as plans; on the stack for one string's digest, the common
/// case, which then allocates nothing.
pub(crate) struct HashSink<B = Vec<u8>> {
    hasher: Sha256,
    /// Always at its full length; `used` says how much holds bytes to hash.
    buf: B,
    used: usize,
}

impl HashSink<Vec<u8>> {
    /// A sink with a 64 KiB buffer on the heap, for long writers such as plans.
    pub(crate) fn on_heap() -> Self {
        Self {
            hasher: Sha256::new(),
            buf: vec![0; 64 * 1024],
            used: 0,
        }
    }
}

/// The size of [`HashSink::on_stack`]'s buffer: a tool result of a few KiB takes a few
/// flushes, each a call into the hasher.
const STACK_BUFFER: usize = 1024;

impl HashSink<[u8; STACK_BUFFER]> {
    /// A sink whose buffer lives on the stack.
    pub(crate) fn on_stack() -> Self {
        Self {
            hasher: Sha256::new(),
            buf: [0; STACK_BUFFER],
            used: 0,
        }
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> HashSink<B> {
    fn flush(&mut self) {
        self.hasher.update(&self.buf.as_ref()[..self.used]);
        self.used = 0;
    }

    /// The digest of everything put.
    pub(crate) fn finish(mut self) -> [u8; 32] {
        self.flush();
        self.hasher.finalize().into()
    }

    /// Lower-case hex of the digest of everything put.
    pub(crate) fn finish_hex(self) -> String {
        crate::canonical::hex(&self.finish())
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> Sink for HashSink<B> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        if self.used + bytes.len() > self.buf.as_ref().len() {
            self.flush();
            if bytes.len() > self.buf.as_ref().len() {
                self.hasher.update(bytes);
                return;
            }
        }
        self.buf.as_mut()[self.used..self.used + bytes.len()].copy_from_slice(bytes);
        self.used += bytes.len();
    }

    fn put_escaped(&mut self, bytes: &[u8]) {
        if let Some(plain) = short_and_plain(bytes) {
            self.put(plain);
            return;
        }
        let mut rest = bytes;
        loop {
            let (end, taken) = escape_words(self.buf.as_mut(), self.used, rest);
            self.used = end;
            rest = &rest[taken..];
            if rest.is_empty() {
                return;
            }
            // Out of room: an empty buffer always has room for a word.
            self.flush();
        }
    }
}

/// Hands what is written to another thread in blocks, for [`hash_pipelined`].
struct BlockSink {
    buf: Vec<u8>,
    to_hasher: std::sync::mpsc::SyncSender<Vec<u8>>,
    /// Set when the hashing thread is gone; what is written after that is dropped, and the
    /// caller hashes again on its own.
    lost: bool,
}

impl BlockSink {
    const BLOCK: usize = 64 * 1024;

    fn send_if_full(&mut self) {
        if self.buf.len() >= Self::BLOCK {
            self.send();
        }
    }

    fn send(&mut self) {
        let block = std::mem::replace(&mut self.buf, Vec::with_capacity(Self::BLOCK + 1024));
        if self.to_hasher.send(block).is_err() {
            self.lost = true;
        }
    }
}

impl Sink for BlockSink {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        self.send_if_full();
    }

    fn put_escaped(&mut self, bytes: &[u8]) {
        self.buf.put_escaped(bytes);
        self.send_if_full();
    }
}

/// The SHA-256 hex of what `write` writes, written on this thread and hashed on another as it
/// is written. The result is what [`HashSink`] gives; should the hashing thread be lost, the
/// bytes are written and hashed again here.
pub(crate) fn hash_pipelined<W: WritesCanonical + ?Sized>(value: &W) -> String {
    let (to_hasher, blocks) = std::sync::mpsc::sync_channel::<Vec<u8>>(8);
    let digest = std::thread::scope(|scope| {
        let hasher = scope.spawn(move || {
            let mut hasher = Sha256::new();
            for block in blocks {
                hasher.update(&block);
            }
            crate::canonical::hex(&hasher.finalize())
        });
        let mut sink = BlockSink {
            buf: Vec::with_capacity(BlockSink::BLOCK + 1024),
            to_hasher,
            lost: false,
        };
        value.write_canonical(&mut sink);
        sink.send();
        let lost = sink.lost;
        // Closing the channel ends the hasher's loop.
        drop(sink);
        hasher.join().ok().filter(|_| !lost)
    });
    digest.unwrap_or_else(|| {
        let mut sink = HashSink::on_heap();
        value.write_canonical(&mut sink);
        sink.finish_hex()
    })
}

/// A value the canonical writer can write to any sink.
pub(crate) trait WritesCanonical {
    fn write_canonical<S: Sink>(&self, out: &mut S);
}

/// A JSON string literal with Python's escapes (see [`crate::canonical`]).
pub(crate) fn put_str<S: Sink>(out: &mut S, s: &str) {
    out.put(b"\"");
    out.put_escaped(s.as_bytes());
    out.put(b"\"");
}

/// `bytes` itself when it is short and needs no escape: ids and names, the common case, take
/// one check and one copy.
fn short_and_plain(bytes: &[u8]) -> Option<&[u8]> {
    (bytes.len() <= 32 && !bytes.iter().any(|&b| needs_escape(b))).then_some(bytes)
}

/// The room one word of input may need: eight bytes escaped to six each, and the eight a
/// store writes past the end of what it keeps.
const ROOM_PER_WORD: usize = 6 * 8 + 8;

/// Writes `src` with JSON's escapes into `dst` from `at`, as far as `dst` has room; returns
/// where the output ends and how many bytes of `src` it took.
///
/// Tool output is long and mostly plain, so the text goes eight bytes at a time, and every
/// write is an eight-byte store: a word is stored whole, and when its [`escape_mask`] flags
/// bytes, each escape is stored over the word's rest and the rest stored again after it. A
/// store may write past the output's end; later stores overwrite that, and the caller keeps
/// only `..end`. Cutting `src` anywhere is safe: every byte of a multi-byte UTF-8 sequence is
/// at least 0x80, and no such byte is escaped.
fn escape_words(dst: &mut [u8], mut at: usize, src: &[u8]) -> (usize, usize) {
    let mut taken = 0;
    while taken + 8 <= src.len() && at + ROOM_PER_WORD <= dst.len() {
        let mut word = [0_u8; 8];
        word.copy_from_slice(&src[taken..taken + 8]);
        taken += 8;
        let x = u64::from_le_bytes(word);
        dst[at..at + 8].copy_from_slice(&word);
        let mut mask = escape_mask(x);
        // Bytes of `word` before `from` are written; those from `from` on sit at `at`.
        let mut from = 0;
        while mask != 0 {
            // Little-endian: bit 8k + 7 of the mask flags byte k.
            let i = (mask.trailing_zeros() / 8) as usize;
            at += i - from;
            // Only the low byte is wanted: the cast truncates on purpose.
            let (sequence, len) = ESCAPES[usize::from((x >> (8 * i)) as u8)];
            dst[at..at + 8].copy_from_slice(&sequence.to_le_bytes());
            at += usize::from(len);
            from = i + 1;
            let rest = if from < 8 { x >> (8 * from) } else { 0 };
            dst[at..at + 8].copy_from_slice(&rest.to_le_bytes());
            mask &= mask - 1;
        }
        at += 8 - from;
    }
    if taken + 8 > src.len() {
        // The tail, shorter than a word, byte by byte.
        while taken < src.len() && at + 6 <= dst.len() {
            let b = src[taken];
            taken += 1;
            if needs_escape(b) {
                let (sequence, len) = escape_of(b);
                dst[at..at + len].copy_from_slice(&sequence[..len]);
                at += len;
            } else {
                dst[at] = b;
                at += 1;
            }
        }
    }
    (at, taken)
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

/// [`escape_of`] for every byte, as a little-endian word and a length, so that the loop over
/// escapes reads a table instead of branching on the byte. Bytes needing no escape map to
/// themselves and are never looked up.
static ESCAPES: [(u64, u8); 256] = {
    let mut table = [(0_u64, 1_u8); 256];
    let mut b = 0;
    while b < 256 {
        // `b` is below 256, so the cast cannot truncate.
        let byte = b as u8;
        table[b] = if needs_escape(byte) {
            let (sequence, len) = escape_of(byte);
            // An escape is at most six bytes long.
            (u64::from_le_bytes(sequence), len as u8)
        } else {
            (byte as u64, 1)
        };
        b += 1;
    }
    table
};

/// Whether JSON must escape `b`: a control byte, `"` or `\\`.
const fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// The escape of `b`, one of the bytes [`needs_escape`] names, padded to eight bytes, and its
/// length: by name where Python has one, else `\\u00xx` in lower-case hex.
const fn escape_of(b: u8) -> ([u8; 8], usize) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match b {
        b'"' => ([b'\\', b'"', 0, 0, 0, 0, 0, 0], 2),
        b'\\' => ([b'\\', b'\\', 0, 0, 0, 0, 0, 0], 2),
        b'\n' => ([b'\\', b'n', 0, 0, 0, 0, 0, 0], 2),
        b'\r' => ([b'\\', b'r', 0, 0, 0, 0, 0, 0], 2),
        b'\t' => ([b'\\', b't', 0, 0, 0, 0, 0, 0], 2),
        0x08 => ([b'\\', b'b', 0, 0, 0, 0, 0, 0], 2),
        0x0c => ([b'\\', b'f', 0, 0, 0, 0, 0, 0], 2),
        _ => (
            [
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 0xf) as usize],
                0,
                0,
            ],
            6,
        ),
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
