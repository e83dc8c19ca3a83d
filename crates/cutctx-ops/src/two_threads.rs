//! An output written in blocks on two threads in turn, in order, never held whole.
//!
//! Writing a large output (a view of a hundred thousand turns, a plan of as many actions) is
//! mostly formatting and waiting on memory, one block much like the next: a second thread
//! writes every other block beside the first. This thread writes the even blocks and drains
//! them; the other writes the odd ones into buffers it hands over in order, two at most
//! waiting, and gets them back emptied, so the output is held a few blocks at a time.

use std::sync::mpsc;

/// Writes blocks `0..blocks` onto `buf` in order, each by `write_block(k, out, scratch)`
/// (`scratch` a buffer of the writing thread's own, for whatever a block needs decoded),
/// handing `buf` to `drain` each time it holds `part` bytes or more. The last block's bytes
/// stay in `buf`, undrained, for the caller to finish the output and drain it.
///
/// The odd blocks are written on a thread started for them; should it not start or stop
/// early, this thread writes them itself. The bytes never depend on which thread wrote what.
///
/// # Errors
///
/// The first error of `drain`; the helper then stops at its next block.
pub(crate) fn on_two<E>(
    blocks: usize,
    write_block: impl Fn(usize, &mut String, &mut String) + Sync,
    buf: &mut String,
    part: usize,
    mut drain: impl FnMut(&mut String) -> Result<(), E>,
) -> Result<(), E> {
    let write_block = &write_block;
    std::thread::scope(|scope| {
        let (to_main, from_helper) = mpsc::sync_channel::<String>(2);
        let (to_helper, from_main) = mpsc::channel::<String>();
        // Not started (no thread to be had): every block is written here.
        let _helper = std::thread::Builder::new().spawn_scoped(scope, move || {
            let mut scratch = String::new();
            for k in (1..blocks).step_by(2) {
                // A buffer handed back to be used again, or a new one when none is back yet.
                let mut out = from_main.try_recv().unwrap_or_default();
                write_block(k, &mut out, &mut scratch);
                if to_main.send(out).is_err() {
                    return;
                }
            }
        });
        let mut scratch = String::new();
        for k in 0..blocks {
            if k % 2 == 0 {
                write_block(k, buf, &mut scratch);
                if buf.len() >= part {
                    drain(buf)?;
                }
                continue;
            }
            let Ok(mut block) = from_helper.recv() else {
                // The helper is gone: write its block here.
                write_block(k, buf, &mut scratch);
                continue;
            };
            if !buf.is_empty() {
                drain(buf)?;
            }
            // A drained buffer is empty, and the block takes its place uncopied; a drain that
            // keeps what it is given (a text made whole) takes it appended.
            if buf.is_empty() {
                std::mem::swap(buf, &mut block);
            } else {
                buf.push_str(&block);
                block.clear();
            }
            let _ = to_helper.send(block);
            if buf.len() >= part {
                drain(buf)?;
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::on_two;

    /// Block `k`: its number and a run of letters of a length that varies from block to block.
    fn block(k: usize, out: &mut String, scratch: &mut String) {
        scratch.clear();
        scratch.push_str(&"ab".repeat(k % 7));
        out.push_str(&format!("<{k}:{scratch}>"));
    }

    fn expected(blocks: usize) -> String {
        let mut all = String::new();
        let mut scratch = String::new();
        for k in 0..blocks {
            block(k, &mut all, &mut scratch);
        }
        all
    }

    #[test]
    fn the_blocks_come_out_in_order_drained_in_parts_or_kept_whole() {
        for blocks in [0, 1, 2, 3, 10, 101] {
            for part in [1, 7, 64, usize::MAX] {
                let (mut drained, mut buf) = (String::new(), String::new());
                let done: Result<(), ()> = on_two(blocks, block, &mut buf, part, |b| {
                    drained.push_str(b);
                    b.clear();
                    Ok(())
                });
                assert_eq!(done, Ok(()));
                drained.push_str(&buf);
                assert_eq!(
                    drained,
                    expected(blocks),
                    "{blocks} blocks, parts of {part}"
                );
            }
            // A drain that keeps what it is given: the output whole in the buffer.
            let mut whole = String::new();
            let done: Result<(), ()> = on_two(blocks, block, &mut whole, 16, |_| Ok(()));
            assert_eq!((done, whole), (Ok(()), expected(blocks)));
        }
    }

    #[test]
    fn a_drain_that_fails_ends_the_writing_with_its_error() {
        for fail_at in [0, 1, 5] {
            let mut calls = 0;
            let mut buf = String::new();
            let done = on_two(40, block, &mut buf, 1, |b| {
                if calls == fail_at {
                    return Err(calls);
                }
                calls += 1;
                b.clear();
                Ok(())
            });
            assert_eq!(done, Err(fail_at));
        }
    }
}
