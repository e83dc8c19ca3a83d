//! The output's first part, `{"plan":…,`, written into the output a block at a time. The
//! report's `plan_hash` is taken before the output starts, the plan streamed through the hash
//! (`PlanDraft::plan_hash`), and the plan is written again here: neither holds the plan's text
//! whole, which at a 50% budget is a tenth of the request's size.

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
        for n in [1, 40, 3_000] {
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
                let mut written = Vec::new();
                super::write_head(&plan, &mut written).expect("a vector takes every write");
                assert_eq!(String::from_utf8(written).expect("UTF-8"), expected, "{n}");
                let mut full = [0_u8; 4];
                let err = super::write_head(&plan, &mut &mut full[..]).expect_err("four bytes");
                assert_eq!(err.kind(), std::io::ErrorKind::WriteZero, "{n}");
            }
        }
    }
}
