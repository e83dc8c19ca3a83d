//! A compacted transcript's canonical JSON written to an output by several threads at once,
//! in order.
//!
//! Escaping the kept turns' contents is most of the cost of writing a large output, and one
//! turn's text does not depend on another's. So the turns are cut into blocks of about a part's
//! bytes; the calling thread writes every `threads`-th block itself and each other thread the
//! blocks between, into buffers that go back and forth between it and the caller, so that at
//! any moment only a few parts are held. The caller sends the blocks on in their order: the
//! bytes are those of [`cutctx::Transcript::write_canonical_in_parts`]. The buffers are bytes,
//! not `String`s: a byte buffer escapes text eight bytes at a time in place
//! ([`cutctx_json::escape::escape_into_vec`]) rather than a piece at a time.

use std::io::Write;
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};

use cutctx::TranscriptTurn;
use cutctx_json::{Style, Writer, write_turn};

/// A block's text, or room for one.
type Block = Vec<u8>;

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
    let threads = threads.clamp(1, blocks.len().max(1));
    out.write_all(b"[")?;
    std::thread::scope(|scope| {
        // For each other thread: the blocks it wrote, and the buffers the caller gives back.
        let mut helpers: Vec<(Receiver<Block>, Sender<Block>)> = Vec::new();
        for k in 1..threads {
            let (full_tx, full_rx) = sync_channel::<Block>(2);
            let (empty_tx, empty_rx) = channel::<Block>();
            let blocks = &blocks;
            scope.spawn(move || helper(turns, blocks, k, threads, part, &full_tx, &empty_rx));
            helpers.push((full_rx, empty_tx));
        }
        let mut own = Vec::with_capacity(2 * part);
        for (b, range) in blocks.iter().enumerate() {
            let k = b % threads;
            if k == 0 {
                own.clear();
                write_block(&mut own, turns, range.clone());
                out.write_all(&own)?;
                continue;
            }
            let (full, empty) = &helpers[k - 1];
            match full.recv() {
                Ok(text) => {
                    out.write_all(&text)?;
                    // A helper that has ended no longer needs its buffer back.
                    let _ = empty.send(text);
                }
                // The helper is lost (it cannot panic, but were it so): write the block here.
                Err(_) => {
                    own.clear();
                    write_block(&mut own, turns, range.clone());
                    out.write_all(&own)?;
                }
            }
        }
        // Returning drops the receivers, which ends any helper still sending.
        Ok::<(), std::io::Error>(())
    })?;
    out.write_all(b"]")
}

/// The `k`-th of `threads` threads: writes blocks `k`, `k + threads`, … in order and sends
/// each, until every one is sent or the caller stops receiving.
fn helper(
    turns: &[TranscriptTurn],
    blocks: &[std::ops::Range<usize>],
    k: usize,
    threads: usize,
    part: usize,
    full: &SyncSender<Block>,
    empty: &Receiver<Block>,
) {
    for range in blocks.iter().skip(k).step_by(threads) {
        let mut text = empty
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(2 * part));
        text.clear();
        write_block(&mut text, turns, range.clone());
        if full.send(text).is_err() {
            return;
        }
    }
}

/// Appends the turns of `range` to `text`, each after a `,` but the transcript's first.
fn write_block(text: &mut Vec<u8>, turns: &[TranscriptTurn], range: std::ops::Range<usize>) {
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
fn blocks(turns: &[TranscriptTurn], part: usize) -> Vec<std::ops::Range<usize>> {
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
