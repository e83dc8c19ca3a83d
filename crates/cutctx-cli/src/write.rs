//! A compacted transcript's canonical JSON written to an output by several threads at once,
//! in order.
//!
//! Escaping the kept turns' contents is most of the cost of writing a large output, and one
//! turn's text does not depend on another's. So the turns are cut into blocks of about a part's
//! bytes, and each block is taken by whichever thread comes free first: the caller takes the
//! next block to send whenever no other thread has taken it yet (so it never waits for a block
//! nobody has started, however busy the machine), and the other threads take blocks ahead of
//! it, at most [`AHEAD`] blocks ahead, so that only a few parts are held at any moment. The
//! caller sends the blocks on in their order: the bytes are those of
//! [`cutctx::Transcript::write_canonical_in_parts`]. The buffers are bytes, not `String`s: a
//! byte buffer escapes text eight bytes at a time in place
//! ([`cutctx_json::escape::escape_into_vec`]) rather than a piece at a time.

use std::io::Write;
use std::ops::Range;
use std::sync::{Condvar, Mutex, MutexGuard};

use cutctx::TranscriptTurn;
use cutctx_json::{Style, Writer, write_turn};

/// How many blocks past the one the caller sends next the other threads may have written.
const AHEAD: usize = 4;

/// What the threads share: which blocks are taken and which are written.
struct Shared {
    state: Mutex<State>,
    /// Signalled when a block is written, when the caller moves on, and when it stops.
    changed: Condvar,
}

struct State {
    /// The first block no thread has taken.
    next: usize,
    /// The block the caller sends next.
    sending: usize,
    /// The blocks written by the other threads and not yet sent, at `block % AHEAD`.
    written: [Option<Vec<u8>>; AHEAD],
    /// Buffers sent on, to be written into again.
    spare: Vec<Vec<u8>>,
    /// The blocks whose threads were lost while writing them (writing cannot panic, but were
    /// it so): the caller writes them itself.
    lost: Vec<usize>,
    /// Set when the caller stops early (a failed write): the other threads end.
    stop: bool,
}

impl Shared {
    /// The state; a thread that panicked holding it left nothing half-done that matters
    /// here (every change is one assignment), so a poisoned lock is taken as it is.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn wait<'a>(&self, state: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        self.changed
            .wait(state)
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Tells the other threads to end when the caller leaves, whether it is done or failed.
struct StopOnDrop<'a>(&'a Shared);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.lock().stop = true;
        self.0.changed.notify_all();
    }
}

/// Writes `[turn,turn,…]` of `turns` to `out`, the blocks of about `part` bytes shared among
/// `threads` threads (the caller's among them).
///
/// # Errors
///
/// The first error writing to `out`; part of the text may have been written.
pub(crate) fn turns_on_threads(
    out: &mut impl Write,
    turns: &[TranscriptTurn],
    part: usize,
    threads: usize,
) -> std::io::Result<()> {
    let blocks = blocks(turns, part);
    out.write_all(b"[")?;
    let shared = Shared {
        state: Mutex::new(State {
            next: 0,
            sending: 0,
            written: Default::default(),
            spare: Vec::new(),
            lost: Vec::new(),
            stop: false,
        }),
        changed: Condvar::new(),
    };
    std::thread::scope(|scope| {
        for _ in 1..threads.clamp(1, blocks.len().max(1)) {
            scope.spawn(|| helper(turns, &blocks, part, &shared));
        }
        // Dropped before the scope waits for the other threads, even on an error.
        let _stop = StopOnDrop(&shared);
        let mut own = Vec::with_capacity(2 * part);
        for (b, range) in blocks.iter().enumerate() {
            let mut state = shared.lock();
            if state.next == b {
                // Nobody has taken it: written here, while the others write ahead.
                state.next = b + 1;
                drop(state);
                own.clear();
                write_block(&mut own, turns, range.clone());
                out.write_all(&own)?;
            } else {
                // Taken by another thread: sent once written.
                let text = loop {
                    if let Some(text) = state.written[b % AHEAD].take() {
                        break Some(text);
                    }
                    if state.lost.contains(&b) {
                        break None;
                    }
                    state = shared.wait(state);
                };
                drop(state);
                if let Some(text) = text {
                    out.write_all(&text)?;
                    shared.lock().spare.push(text);
                } else {
                    own.clear();
                    write_block(&mut own, turns, range.clone());
                    out.write_all(&own)?;
                }
            }
            shared.lock().sending = b + 1;
            shared.changed.notify_all();
        }
        Ok::<(), std::io::Error>(())
    })?;
    out.write_all(b"]")
}

/// Another thread: takes the first block nobody has taken, while it is at most [`AHEAD`]
/// blocks past the one the caller sends next, writes it and leaves it for the caller; until
/// every block is taken or the caller stops.
fn helper(turns: &[TranscriptTurn], blocks: &[Range<usize>], part: usize, shared: &Shared) {
    let mut state = shared.lock();
    loop {
        if state.stop || state.next >= blocks.len() {
            return;
        }
        if state.next >= state.sending + AHEAD {
            state = shared.wait(state);
            continue;
        }
        let b = state.next;
        state.next = b + 1;
        let mut text = state
            .spare
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(2 * part));
        drop(state);
        let claim = Claim { shared, block: b };
        text.clear();
        write_block(&mut text, turns, blocks[b].clone());
        drop(claim);
        state = shared.lock();
        state.written[b % AHEAD] = Some(text);
        shared.changed.notify_all();
    }
}

/// A block a thread is writing: should the thread be lost on the way (a panic unwinding
/// past it), the caller is told to write the block itself.
struct Claim<'a> {
    shared: &'a Shared,
    block: usize,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.shared.lock().lost.push(self.block);
            self.shared.changed.notify_all();
        }
    }
}

/// Appends the turns of `range` to `text`, each after a `,` but the transcript's first.
fn write_block(text: &mut Vec<u8>, turns: &[TranscriptTurn], range: Range<usize>) {
    let start = range.start;
    let mut w = Writer::new(text, Style::CANONICAL);
    for (i, turn) in turns[range].iter().enumerate() {
        if start + i > 0 {
            w.item_separator();
        }
        write_turn(&mut w, turn.json_fields());
    }
}

/// The turns cut into runs of about `part` bytes of text or more (a run ends after the turn
/// that reaches it), in order; none when there are no turns.
fn blocks(turns: &[TranscriptTurn], part: usize) -> Vec<Range<usize>> {
    let mut blocks = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, t) in turns.iter().enumerate() {
        // The keys and small values of a turn, and its texts (escapes aside).
        bytes += 128
            + t.content().len()
            + t.turn_id().len()
            + t.tool_call_id().map_or(0, str::len)
            + t.metadata()
                .iter()
                .map(|(k, v)| k.len() + v.len() + 6)
                .sum::<usize>();
        if bytes >= part {
            blocks.push(start..i + 1);
            start = i + 1;
            bytes = 0;
        }
    }
    if start < turns.len() {
        blocks.push(start..turns.len());
    }
    blocks
}

#[cfg(test)]
mod tests {
    use cutctx::{Role, Transcript, TranscriptTurn};

    fn transcript(n: usize) -> Transcript {
        let turns = (0..n)
            .map(|i| {
                let content = format!("{i} \"q\"\n{}", "é".repeat(i % 50));
                TranscriptTurn::new(format!("t{i}"), Role::User, content, 1).expect("a turn")
            })
            .collect();
        Transcript::new(turns).expect("unique ids")
    }

    #[test]
    fn any_threads_and_parts_write_the_canonical_json() {
        for n in [0, 1, 2, 7, 300] {
            let t = transcript(n);
            let expected = t.canonical_json();
            for part in [1, 100, 1_000, 1 << 20] {
                for threads in [1, 2, 3, 8] {
                    let mut out = Vec::new();
                    super::turns_on_threads(&mut out, t.turns(), part, threads)
                        .expect("a vector takes every write");
                    assert_eq!(
                        String::from_utf8(out).expect("UTF-8"),
                        expected,
                        "{n} {part} {threads}"
                    );
                }
            }
        }
    }

    #[test]
    fn blocks_cover_the_turns_in_order() {
        let t = transcript(300);
        for part in [1, 500, 10_000, usize::MAX] {
            let blocks = super::blocks(t.turns(), part);
            let mut next = 0;
            for b in &blocks {
                assert_eq!(b.start, next, "{part}");
                assert!(b.end > b.start, "{part}");
                next = b.end;
            }
            assert_eq!(next, 300, "{part}");
        }
        assert!(super::blocks(&[], 1).is_empty());
    }

    #[test]
    fn a_failed_write_stops_every_thread_and_is_the_error() {
        /// Takes `room` bytes, then fails.
        struct Full(usize);
        impl std::io::Write for Full {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                if self.0 == 0 {
                    return Err(std::io::ErrorKind::StorageFull.into());
                }
                let n = buf.len().min(self.0);
                self.0 -= n;
                Ok(n)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let t = transcript(3_000);
        for room in [0, 1, 5_000, 60_000] {
            let e = super::turns_on_threads(&mut Full(room), t.turns(), 1_000, 3)
                .expect_err("the writer fills");
            assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{room}");
        }
    }
}
