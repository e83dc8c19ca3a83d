//! The output's first part, `{"plan":…,`, written into the output a block at a time. The
//! report's `plan_hash` is taken before the output starts, the plan streamed through the hash
//! (`PlanDraft::plan_hash`), and the plan is written again here: neither holds the plan's text
//! whole, which at a 50% budget is a tenth of the request's size. A plan of many actions is
//! written on two threads, a block of actions at a time (see [`crate::two_threads`]).

use std::io::Write;

use cutctx::PlanDraft;
use cutctx_json::Sink;

/// What the output's first part opens with.
const OPEN: &str = "{\"plan\":";

/// How many bytes of the plan's text are gathered before they are written.
const BLOCK: usize = 64 << 10;

/// Appends the output's first part, `{"plan":…,`, to `text`.
pub(crate) fn push_head(plan: &PlanDraft, text: &mut String) {
    text.reserve(OPEN.len() + plan.canonical_len_hint() + 1);
    text.push_str(OPEN);
    plan.write_canonical_into(text);
    text.push(',');
}

/// Writes the output's first part, `{"plan":…,`, to `out`, a block at a time.
///
/// # Errors
///
/// The first error writing to `out`; part of the head may have been written.
pub(crate) fn write_head(plan: &PlanDraft, out: &mut impl Write) -> std::io::Result<()> {
    if plan.actions.len() >= PARALLEL_ACTIONS && cutctx::Parallelism::Automatic.threads() > 1 {
        return write_head_on_two(plan, out);
    }
    let mut sink = Writing {
        block: String::with_capacity(BLOCK + BLOCK / 2),
        out,
        failed: None,
    };
    sink.put(OPEN);
    plan.write_canonical_to(&mut sink);
    sink.put(",");
    sink.write_block();
    sink.failed.map_or(Ok(()), Err)
}

/// The fewest actions in a plan whose writing is shared with a second thread.
const PARALLEL_ACTIONS: usize = 20_000;

/// How many actions each block written on one thread holds.
const BLOCK_ACTIONS: usize = 1_024;

/// [`write_head`] with the actions written in blocks on two threads in turn.
fn write_head_on_two(plan: &PlanDraft, out: &mut impl Write) -> std::io::Result<()> {
    let actions = plan.actions.len();
    let mut buf = String::with_capacity(BLOCK + BLOCK / 2);
    buf.push_str(OPEN);
    plan.write_canonical_opening(&mut buf);
    let mut drain = |buf: &mut String| {
        out.write_all(buf.as_bytes())?;
        buf.clear();
        Ok::<(), std::io::Error>(())
    };
    let block = |k: usize, out: &mut String, _: &mut String| {
        let from = k * BLOCK_ACTIONS;
        plan.write_canonical_actions(from..(from + BLOCK_ACTIONS).min(actions), out);
    };
    crate::two_threads::on_two(
        actions.div_ceil(BLOCK_ACTIONS),
        block,
        &mut buf,
        BLOCK,
        &mut drain,
    )?;
    plan.write_canonical_closing(&mut buf);
    buf.push(',');
    drain(&mut buf)
}

/// Writes what is written to `out`, a block at a time, keeping the first error (after which
/// nothing more is written).
struct Writing<'a, W: Write> {
    block: String,
    out: &'a mut W,
    failed: Option<std::io::Error>,
}

impl<W: Write> Writing<'_, W> {
    fn write_block(&mut self) {
        if self.failed.is_none()
            && let Err(e) = self.out.write_all(self.block.as_bytes())
        {
            self.failed = Some(e);
        }
        self.block.clear();
    }

    fn write_if_full(&mut self) {
        if self.block.len() >= BLOCK {
            self.write_block();
        }
    }
}

impl<W: Write> Sink for Writing<'_, W> {
    #[inline]
    fn put(&mut self, text: &str) {
        self.block.push_str(text);
        self.write_if_full();
    }

    fn put_escaped(&mut self, text: &str) {
        self.block.put_escaped(text);
        self.write_if_full();
    }
}

#[cfg(test)]
mod tests {
    use cutctx::{CompactionBudget, CompactionPolicy, DropOldestPolicy, Role, Transcript};
    use cutctx::{ObservationMaskingPolicy, TranscriptTurn};

    #[test]
    fn the_head_is_the_plans_canonical_json_pushed_or_written_and_a_failed_write_is_an_error() {
        for n in [
            1,
            40,
            3_000,
            super::PARALLEL_ACTIONS + 2 * super::BLOCK_ACTIONS + 7,
        ] {
            let turns = (0..n)
                .map(|i| {
                    let (role, call) = if i % 2 == 0 {
                        (Role::Assistant, None)
                    } else {
                        (Role::Tool, Some(format!("c{}", i - 1)))
                    };
                    let turn = TranscriptTurn::new(format!("t{i}"), role, "x \"y\"\n", 100)
                        .expect("a turn");
                    match call {
                        Some(c) => turn.with_tool_call_id(c),
                        None => turn.with_tool_call_id(format!("c{i}")),
                    }
                })
                .collect();
            let t = Transcript::new(turns).expect("unique ids");
            let budget = CompactionBudget::new(n as u64 * 50 + 1_000);
            for plan in [
                DropOldestPolicy.decide(&t, &budget).expect("a plan"),
                ObservationMaskingPolicy::new(1)
                    .expect("a policy")
                    .decide(&t, &budget)
                    .expect("a plan"),
            ] {
                let expected = format!("{{\"plan\":{},", plan.canonical_json());
                let mut pushed = String::new();
                super::push_head(&plan, &mut pushed);
                assert_eq!(pushed, expected, "{n}");
                // As the command writes it, and on two threads whatever the machine's cores.
                for on_two in [false, true] {
                    let write = |mut out: &mut dyn std::io::Write| {
                        if on_two {
                            super::write_head_on_two(&plan, &mut out)
                        } else {
                            super::write_head(&plan, &mut out)
                        }
                    };
                    let mut written = Vec::new();
                    write(&mut written).expect("a vector takes every write");
                    assert_eq!(String::from_utf8(written).expect("UTF-8"), expected, "{n}");
                    let mut full = [0_u8; 4];
                    let err = write(&mut &mut full[..]).expect_err("four bytes");
                    assert_eq!(err.kind(), std::io::ErrorKind::WriteZero, "{n}");
                }
            }
        }
    }
}
