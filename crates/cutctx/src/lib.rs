//! `cutctx`: fit an LLM transcript into a token budget, deterministically and auditably.
//!
//! Compaction happens in three steps:
//!
//! 1. **plan**: a policy looks at a [`Transcript`] and a [`CompactionBudget`] and returns a
//!    validated [`CompactionPlan`] that keeps, masks, summarizes or drops each turn;
//! 2. **fulfil**: for each [`SummarizationRequest`] in the plan, the caller writes the summary
//!    with its own model (cutctx never calls one);
//! 3. **apply**: [`apply`] produces the compacted view and a [`CompactionReport`] of exactly
//!    what was done.
//!
//! A tool call is never separated from its results; system, pinned and recently protected
//! turns are never touched; a plan either fits, says `budget_unmet`, or the budget is refused
//! as unsatisfiable with both figures. The same input always gives byte-identical plans, equal
//! to those of the CutCtx 0.1.0 reference implementation.
//!
//! This crate only re-exports: it is the one dependency a user needs, and the top library
//! crate of the workspace. The core (the four modules below) is always there; cargo features
//! add the rest:
//!
//! | feature    | adds                                                                   |
//! |------------|------------------------------------------------------------------------|
//! | `formats`  | `formats`: OpenAI Chat, OpenAI Responses and Anthropic request bodies |
//! | `session`  | `session`, with `formats`: cache-aware compaction sessions for agent loops |
//! | `replay`   | `replay`, with `session`: recorded loops replayed and priced under strategies |
//! | `receipts` | `receipts` and `ledger`: arcaeon-compatible receipts and their ledger file |
//! | `bpe`      | `formats`, with real BPE token counts for OpenAI models                |
//!
//! ```toml
//! [dependencies]
//! cutctx = { version = "0.1", features = ["formats", "receipts"] }
//! ```
//!
//! # Quick start
//!
//! ```
//! use std::collections::BTreeMap;
//! use cutctx::{CompactionBudget, CompactionPolicy, DropOldestPolicy, Role, Transcript, TranscriptTurn};
//!
//! let transcript = Transcript::new(vec![
//!     TranscriptTurn::new("s", Role::System, "You are careful.", 12)?,
//!     TranscriptTurn::new("u1", Role::User, "Read the log.", 30)?,
//!     TranscriptTurn::new("a1", Role::Assistant, "Reading it.", 20)?.with_tool_call_id("c1"),
//!     TranscriptTurn::new("t1", Role::Tool, "…a long log…", 900)?.with_tool_call_id("c1"),
//!     TranscriptTurn::new("a2", Role::Assistant, "The cache key changed.", 25)?,
//! ])?;
//! let budget = CompactionBudget::new(100).with_protected_recent_turns(1);
//!
//! let plan = DropOldestPolicy.decide(&transcript, &budget)?;
//! assert_eq!((plan.tokens_before, plan.tokens_after_estimate, plan.budget_unmet), (987, 37, false));
//!
//! let compacted = cutctx::apply(&transcript, &plan, &BTreeMap::new())?;
//! assert_eq!(compacted.transcript.turn_ids().collect::<Vec<_>>(), ["s", "a2"]);
//! assert_eq!(compacted.report.dropped_turn_ids, vec!["u1".into(), "a1".into(), "t1".into()]);
//! // The plan is an audit record: its canonical JSON is stable, and so is its hash.
//! assert_eq!(compacted.report.plan_hash, plan.plan_hash());
//! # Ok::<(), cutctx::CompactionError>(())
//! ```
#![forbid(unsafe_code)]

/// The data types, canonical JSON and hashing (`cutctx-model`).
pub use cutctx_model as model;

/// The rules every plan obeys (`cutctx-invariants`).
pub use cutctx_invariants as invariants;

/// The policies (`cutctx-policies`).
pub use cutctx_policies as policies;

/// The executor (`cutctx-executor`).
pub use cutctx_executor as executor;

/// Provider request formats (`cutctx-formats`); with the `formats` feature.
///
/// ```
/// use cutctx::formats::{Format, ProviderTranscript};
///
/// let request = serde_json::json!({
///     "model": "gpt-4.1",
///     "messages": [{"role": "user", "content": "Hello"}],
/// });
/// let pt = ProviderTranscript::parse(Format::OpenAiChat, &request)?;
/// assert_eq!(pt.transcript().len(), 1);
/// # Ok::<(), cutctx::formats::FormatError>(())
/// ```
#[cfg(feature = "formats")]
pub use cutctx_formats as formats;

/// Cache-aware compaction sessions for agent loops, and the price table they weigh early
/// firing with (`cutctx-session`); with the `session` feature.
///
/// ```
/// use cutctx::formats::Format;
/// use cutctx::session::{PriceTable, SessionState};
///
/// let state = SessionState::new(Format::OpenAiChat);
/// let again = SessionState::from_json(&state.to_json(), Format::OpenAiChat)?;
/// assert_eq!(again, state);
/// assert_eq!(PriceTable::anthropic().cache_read, 0.1);
/// # Ok::<(), cutctx::CompactionError>(())
/// ```
#[cfg(feature = "session")]
pub use cutctx_session as session;

/// The replay lab: a recorded agent loop replayed call by call under several compaction
/// strategies and priced under one prefix-cache model, with a lower bound, an offline
/// reference, peer strategies and retention (`cutctx-replay`); with the `replay` feature.
///
/// ```
/// use cutctx::replay::{Marking, ReplayOptions};
/// use cutctx::replay::peers::{Rule, trigger};
///
/// assert_eq!(ReplayOptions::default().marking, Marking::Shared);
/// assert_eq!(trigger(Rule::ClaudeCode, 200_000), 167_000);
/// ```
#[cfg(feature = "replay")]
pub use cutctx_replay as replay;

/// Compaction receipts and the pure walk over a ledger's text (`cutctx-receipts`); with the
/// `receipts` feature.
///
/// ```
/// use cutctx::receipts::{CompactionReceipt, FixedClock, Item, Labels};
///
/// let clock = FixedClock::new("2026-08-15T00:00:00Z");
/// let mut receipt = CompactionReceipt::open(&[Item::Str("a".into())], &clock)?;
/// receipt.record_kept(&[])?;
/// let row = receipt.seal(&Labels::new("me", "drop-all"), &clock)?;
/// assert_eq!(row.get("kind").and_then(|v| v.as_str()), Some("compaction_receipt"));
/// # Ok::<(), cutctx::receipts::ReceiptError>(())
/// ```
#[cfg(feature = "receipts")]
pub use cutctx_receipts as receipts;

/// The ledger file: appending under a lock with fsync, reading, head pins, and the system
/// clock (`cutctx-ledger`); with the `receipts` feature.
///
/// ```no_run
/// use cutctx::ledger::{Ledger, SystemClock};
///
/// let head = Ledger::new("receipts.jsonl").head(&SystemClock);
/// println!("{}", head.chain);
/// ```
#[cfg(feature = "receipts")]
pub use cutctx_ledger as ledger;

#[doc(inline)]
pub use cutctx_model::{
    Action, ActionView, CompactedTranscript, CompactionBudget, CompactionError, CompactionReport,
    DEFAULT_PLACEHOLDER, Details, ErrorCode, GROUP_ID_PREFIX, Parallelism, PlanDraft, Role,
    SUMMARY_TURN_ID_PREFIX, SummarizationRequest, Transcript, TranscriptTurn, TurnAction,
    TurnReplacement,
};

#[doc(inline)]
pub use cutctx_invariants::{Analysis, CompactionPlan, Decisions, build_plan};

#[doc(inline)]
pub use cutctx_policies::{
    CharRatioEstimator, CompactionPolicy, ContentDigests, DeferredMask, DeferredMasks,
    DropOldestPolicy, ObservationMaskingPolicy, PolicyChain, Reads, Shape, ShapeDecision,
    SummarizingPolicy, TokenEstimator, default_chain,
};

#[doc(inline)]
pub use cutctx_executor::{CompactionExecutor, apply, apply_with};

/// The README's examples, compiled and run as doctests so that they cannot drift.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The version of this crate.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
