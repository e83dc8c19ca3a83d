//! Receipts for cutctx's own compactions.
//!
//! The pre-items are the input turns and the post-items the view's turns, each as its turn
//! object, the seven-key shape of [`cutctx_model::Transcript::canonical_json`]:
//!
//! ```text
//! {"content", "metadata", "pinned", "role", "token_estimate", "tool_call_id", "turn_id"}
//! ```
//!
//! A kept turn is the same object on both sides and matches. A masked turn's stub differs from
//! the original, so the original counts as dropped and the stub as introduced; a summary turn
//! is introduced; a dropped or summarized turn is dropped. The row carries the plan's hash as
//! the extra key [`PLAN_HASH_KEY`]: outside the `receipt_digest` core (arcaeon's verifier is
//! unaffected), inside the chain (it cannot be edited unseen).

use cutctx_json::{Style, Writer, write_turn};
use cutctx_model::{CompactedTranscript, Transcript, TranscriptTurn};

use crate::clock::Clock;
use crate::digest::{ContentDigest, Item, ItemDigest, digest_canonical};
use crate::error::ReceiptError;
use crate::json::{Object, Text, Value};
use crate::receipt::{CompactionReceipt, Labels};

/// The extra row key holding the plan's hash.
pub const PLAN_HASH_KEY: &str = "plan_hash";

/// The compactor name cutctx uses when none is given: `cutctx/<version>`.
#[must_use]
pub fn default_compactor() -> String {
    format!("cutctx/{}", env!("CARGO_PKG_VERSION"))
}

/// The method label of a compaction: `cutctx:<policy name>@<policy version>`.
#[must_use]
pub fn compaction_method(compacted: &CompactedTranscript) -> String {
    format!(
        "cutctx:{}@{}",
        compacted.report.policy_name, compacted.report.policy_version
    )
}

/// A turn as its seven-key JSON object.
#[must_use]
pub fn turn_value(turn: &TranscriptTurn) -> Value {
    let metadata: Object = turn
        .metadata()
        .iter()
        .map(|(k, v)| (Text::from(k.as_str()), Value::str(v)))
        .collect();
    let mut o = Object::new();
    o.insert("content", Value::str(turn.content()));
    o.insert("metadata", Value::Object(metadata));
    o.insert("pinned", Value::Bool(turn.pinned()));
    o.insert("role", Value::str(turn.role().as_str()));
    o.insert("token_estimate", Value::uint(turn.token_estimate()));
    o.insert(
        "tool_call_id",
        turn.tool_call_id().map_or(Value::Null, Value::str),
    );
    o.insert("turn_id", Value::str(turn.turn_id()));
    Value::Object(o)
}

/// A turn as a content item.
#[must_use]
pub fn turn_item(turn: &TranscriptTurn) -> Item {
    Item::Json(turn_value(turn))
}

/// Every turn of a transcript as a content item, in order.
#[must_use]
pub fn transcript_items(transcript: &Transcript) -> Vec<Item> {
    transcript.turns().iter().map(turn_item).collect()
}

/// The digest of one turn: json-c14n of its object, written by `cutctx_json`'s turn writer
/// (a turn holds only valid strings, booleans, a `u64` and a string map, so json-c14n cannot
/// refuse it, and the bytes equal [`crate::json::to_c14n`] of [`turn_value`]).
fn digest_turn(turn: &TranscriptTurn) -> ItemDigest {
    let mut out = String::with_capacity(128 + turn.content().len());
    write_turn(&mut Writer::new(&mut out, Style::C14N), turn.json_fields());
    digest_canonical(out.as_bytes())
}

/// The content digest of a transcript's turns.
#[must_use]
pub fn digest_transcript(transcript: &Transcript) -> ContentDigest {
    ContentDigest::from_items(transcript.turns().iter().map(digest_turn).collect())
}

/// The content digests of a compaction's input and view. A view turn equal to the input turn
/// with its id (every kept turn) reuses that turn's digest instead of hashing it again.
#[must_use]
pub fn digest_compaction(input: &Transcript, view: &Transcript) -> (ContentDigest, ContentDigest) {
    let pre: Vec<ItemDigest> = input.turns().iter().map(digest_turn).collect();
    let by_id: std::collections::BTreeMap<&str, usize> = input
        .turns()
        .iter()
        .enumerate()
        .map(|(i, t)| (t.turn_id(), i))
        .collect();
    let post: Vec<ItemDigest> = view
        .turns()
        .iter()
        .map(|turn| {
            by_id
                .get(turn.turn_id())
                .and_then(|&i| {
                    input
                        .turns()
                        .get(i)
                        .filter(|original| *original == turn)
                        .and_then(|_| pre.get(i).cloned())
                })
                .unwrap_or_else(|| digest_turn(turn))
        })
        .collect();
    (
        ContentDigest::from_items(pre),
        ContentDigest::from_items(post),
    )
}

/// The receipt row (without `chain`) of one cutctx compaction: pre = `input`'s turns, post =
/// the view's turns, method = [`compaction_method`], plus the plan's hash under
/// [`PLAN_HASH_KEY`]. `opened_at` and `ts` are two readings of `clock`.
///
/// # Errors
///
/// Only a `compactor` json-c14n refuses, which a Rust string never is; kept for the contract.
pub fn receipt_for_compaction(
    input: &Transcript,
    compacted: &CompactedTranscript,
    compactor: &str,
    clock: &dyn Clock,
) -> Result<Object, ReceiptError> {
    let (pre, post) = digest_compaction(input, &compacted.transcript);
    let mut receipt = CompactionReceipt::open_digested(pre, clock);
    receipt.record_kept_digested(post)?;
    let labels = Labels::new(compactor, compaction_method(compacted))
        .with_extra(PLAN_HASH_KEY, Value::str(&compacted.report.plan_hash));
    receipt.seal(&labels, clock)
}
