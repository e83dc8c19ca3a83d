//! The output's first part, `{"plan":…,`, and the report's `plan_hash`: the plan's canonical
//! JSON written once, for both, and for a large plan hashed on a second thread as it is
//! written.
//!
//! The report's `plan_hash` is the SHA-256 of the plan's canonical JSON, the bytes the output
//! carries, so the hash is taken of those very bytes rather than of the plan written again.

use std::sync::mpsc::{SyncSender, sync_channel};

use cutctx::PlanDraft;
use cutctx_json::Sink;
use sha2::{Digest, Sha256};

/// What the output's first part opens with.
const OPEN: &str = "{\"plan\":";

/// How many bytes of the plan's text go to the hashing thread at a time.
const BLOCK: usize = 64 << 10;

/// The output's first part, `{"plan":…,`, and the SHA-256 hex of the plan's canonical JSON
/// in it. With `pipelined`, the text is hashed on a second thread as it is written; the
/// result is the same.
pub(crate) fn plan_head(plan: &PlanDraft, pipelined: bool) -> (String, String) {
    let mut head = String::with_capacity(OPEN.len() + plan.canonical_len_hint() + 1);
    head.push_str(OPEN);
    let hash = if pipelined {
        std::thread::scope(|scope| {
            let (to_hasher, blocks) = sync_channel::<Vec<u8>>(8);
            let hasher = scope.spawn(move || {
                let mut hasher = Sha256::new();
                for block in blocks {
                    hasher.update(&block);
                }
                cutctx_json::hex(&hasher.finalize())
            });
            let mut sink = Forward {
                head: &mut head,
                sent: OPEN.len(),
                to_hasher,
                lost: false,
            };
            plan.write_canonical_to(&mut sink);
            sink.forward();
            let lost = sink.lost;
            // Closing the channel ends the hasher's loop.
            drop(sink);
            hasher.join().ok().filter(|_| !lost)
        })
    } else {
        plan.write_canonical_into(&mut head);
        None
    };
    // Without the second thread, or were it lost, the text is hashed here.
    let hash =
        hash.unwrap_or_else(|| cutctx_json::hex(&Sha256::digest(&head.as_bytes()[OPEN.len()..])));
    head.push(',');
    (head, hash)
}

/// Appends what is written to the head and hands each new block of it to the hashing thread.
struct Forward<'a> {
    head: &'a mut String,
    /// How much of the head the hasher has been sent.
    sent: usize,
    to_hasher: SyncSender<Vec<u8>>,
    /// Set when the hashing thread is gone: the caller hashes the head on its own.
    lost: bool,
}

impl Forward<'_> {
    /// Sends what the hasher has not been sent yet.
    fn forward(&mut self) {
        let block = self.head.as_bytes()[self.sent..].to_vec();
        self.sent = self.head.len();
        if !self.lost && self.to_hasher.send(block).is_err() {
            self.lost = true;
        }
    }

    fn forward_if_full(&mut self) {
        if self.head.len() - self.sent >= BLOCK {
            self.forward();
        }
    }
}

impl Sink for Forward<'_> {
    #[inline]
    fn put(&mut self, text: &str) {
        self.head.push_str(text);
        self.forward_if_full();
    }

    fn put_escaped(&mut self, text: &str) {
        self.head.put_escaped(text);
        self.forward_if_full();
    }
}

#[cfg(test)]
mod tests {
    use cutctx::{CompactionBudget, CompactionPolicy, DropOldestPolicy, Role, Transcript};
    use cutctx::{ObservationMaskingPolicy, TranscriptTurn};

    #[test]
    fn the_head_holds_the_plan_and_its_hash_either_way() {
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
                for pipelined in [false, true] {
                    let (head, hash) = super::plan_head(&plan, pipelined);
                    assert_eq!(head, expected, "{n} {pipelined}");
                    assert_eq!(hash, plan.plan_hash(), "{n} {pipelined}");
                }
            }
        }
    }
}
