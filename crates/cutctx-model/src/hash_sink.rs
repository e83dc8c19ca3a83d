//! Sinks that hash what the canonical writers write: SHA-256 streamed through a buffer, or
//! handed in blocks to a second thread for long plans.
//!
//! The writers themselves are `cutctx_json`'s; escaping goes straight into these sinks'
//! buffers with its eight-byte stores.

use cutctx_json::Sink;
use cutctx_json::escape::{escape_words, short_and_plain};
use sha2::{Digest, Sha256};

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
        cutctx_json::hex(&self.finish())
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> HashSink<B> {
    #[inline]
    fn put_bytes(&mut self, bytes: &[u8]) {
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
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> Sink for HashSink<B> {
    #[inline]
    fn put(&mut self, text: &str) {
        self.put_bytes(text.as_bytes());
    }

    fn put_escaped(&mut self, text: &str) {
        let bytes = text.as_bytes();
        if let Some(plain) = short_and_plain(bytes) {
            self.put_bytes(plain);
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
    fn put(&mut self, text: &str) {
        self.buf.put(text);
        self.send_if_full();
    }

    fn put_escaped(&mut self, text: &str) {
        self.buf.put_escaped(text);
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
            cutctx_json::hex(&hasher.finalize())
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
