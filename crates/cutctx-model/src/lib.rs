//! `cutctx-model`: the vocabulary of cutctx, with no behaviour beyond validation.
//!
//! This crate owns the data every other layer speaks: transcripts and their turns
//! ([`TranscriptTurn`], [`Transcript`]), budgets ([`CompactionBudget`]), the pieces of a plan
//! ([`TurnAction`], [`TurnReplacement`], [`SummarizationRequest`], [`PlanDraft`]), the report
//! ([`CompactionReport`]), the error type with its stable codes ([`CompactionError`]), and the
//! canonical JSON and hashing that make plans byte-identical to the reference
//! ([`canonical`]).
//!
//! **Architecture invariant:** nothing here does I/O, reads a clock or the environment, or holds
//! randomness. No output depends on hash-map iteration order: maps are `BTreeMap`s.
//!
//! **API boundary:** the serialized forms. Field names and key orders are those of the
//! reference implementation, and [`canonical::canonical_json`] writes them byte for byte.
//!
//! A [`PlanDraft`] is only a proposal. The validated plan type, `CompactionPlan`, lives one
//! layer up in `cutctx-invariants`, because only the rules there can vouch for a plan.
#![forbid(unsafe_code)]
#![warn(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "pure crate: no I/O, clock or random order"
)]

mod action;
pub mod beside;
mod budget;
pub mod canonical;
mod draft;
mod error;
mod exchanges;
mod hash_sink;
mod idmap;
mod parallelism;
mod partition;
mod report;
mod slots;
mod summarization;
mod transcript;
mod turn;
pub mod wire;

pub use action::{Action, ActionView, TurnAction, TurnReplacement};
pub use budget::CompactionBudget;
pub use cutctx_json::py_repr_str;
pub use draft::PlanDraft;
pub use error::{CompactionError, Details, ErrorCode};
pub use exchanges::Exchanges;
pub use idmap::{IdHashMap, IdHasher};
pub use parallelism::Parallelism;
pub use report::{CompactedTranscript, CompactionReport};
pub use slots::Slots;
pub use summarization::SummarizationRequest;
pub use transcript::{DerivedTurn, InPlace, Transcript};
pub use turn::{Metadata, Role, SharedTurnRecord, TranscriptTurn, TurnRecord};

/// The prefix of every summary turn's id: a summary for group `g` is the turn `summary:g`.
pub const SUMMARY_TURN_ID_PREFIX: &str = "summary:";

/// The prefix of every group id the summarizing policy derives: `span-` and 16 hex digits.
pub const GROUP_ID_PREFIX: &str = "span-";

/// The text a masked tool result's stub starts with, unless the policy is given another.
pub const DEFAULT_PLACEHOLDER: &str = "[tool result masked by cutctx]";

/// The version of the reference implementation whose bytes this crate reproduces.
pub const REFERENCE_VERSION: &str = "0.1.0";

/// How many ids an error's `details` lists at most: a long list helps nobody read an error.
pub const ID_SAMPLE_LIMIT: usize = 10;
