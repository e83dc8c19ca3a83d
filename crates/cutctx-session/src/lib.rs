//! `cutctx-session`: cache-aware compaction for agent loops, the engine alone.
//!
//! A provider bills the part of a prompt it has cached at a fraction of the price, and caches
//! by prefix: rewriting one early message makes everything after it a miss. Compacting before
//! every call therefore saves tokens and loses money. A session compacts rarely and deeply:
//!
//! * [`step`] takes the whole history (as a provider client sends it) and the state of the
//!   previous call. While the request fits under `trigger × window`, it sends the previous
//!   request with the new messages appended: the earlier compaction's prefix is rebuilt from
//!   the state byte for byte, never recomputed.
//! * When it would not, it fires once, compacting the whole history down to `target × window`
//!   with any policy ([`compact_to`]), and remembers the result as a [`SessionState`]: kept
//!   messages by reference, written ones (summaries, stubs) as they are, and a chained digest
//!   of the history, so that a rewound, edited or foreign history starts a new session.
//! * [`push`] is the in-memory path for new messages alone: its cost grows with them, not
//!   with the history.
//! * [`EarlyFiring`] (opt-in) fires below the trigger where the cache prices of a
//!   [`PriceTable`] say a firing pays; [`cached_summary_request`] is the summarizing request
//!   that reads the cache, ending with [`SUMMARY_INSTRUCTION`] ([`with_instruction`]).
//!
//! What a format calls a message, a model item or a tool result is asked of
//! `cutctx-formats` ([`cutctx_formats::Descriptor`]), never known here. The price table
//! ([`cache`]) stays in this crate because the engine prices with it (early firing); the
//! replay that runs recorded loops under several strategies and prices them with the
//! prefix-cache model is the crate above, `cutctx-replay`, and uses this crate's
//! [`step`], [`compact_to`] and [`call_points`] as any caller does.
//!
//! ```
//! use cutctx_formats::{EstimatorSpec, Format, FormatError, policy_named};
//! use cutctx_session::{SessionConfig, step};
//! use serde_json::json;
//!
//! let config = SessionConfig {
//!     format: Format::OpenAiChat,
//!     window: 500,
//!     reserve_output: 0,
//!     trigger: SessionConfig::DEFAULT_TRIGGER,
//!     target: SessionConfig::DEFAULT_TARGET,
//!     protected_recent: 2,
//!     policy: policy_named("drop_oldest", "p", &EstimatorSpec::default())?.expect("known"),
//!     estimator: EstimatorSpec::default().estimator()?,
//!     cache_breakpoints: false,
//!     reasoning: cutctx_formats::ReasoningMode::Strip,
//!     pinned_results: Default::default(), early: None,
//! };
//! let mut messages = vec![json!({"role": "system", "content": "Be brief."})];
//! let mut state = None;
//! for i in 0..40 {
//!     messages.push(json!({"role": "user", "content": format!("question {i} {}", "x".repeat(80))}));
//!     let request = json!({"model": "m", "messages": messages});
//!     let mut no_summaries = |_: &_, _: &_| -> Result<String, FormatError> { unreachable!() };
//!     let sent = step(&config, state.as_ref(), &request, &mut no_summaries)?;
//!     assert!(sent.prompt_tokens <= 500 || sent.firing.is_some());
//!     state = Some(sent.state);
//!     messages.push(json!({"role": "assistant", "content": "ok"}));
//! }
//! assert!(state.expect("ran").firings() >= 1);
//! # Ok::<(), FormatError>(())
//! ```
//!
//! **Architecture invariant:** pure. No I/O, clock, environment or randomness: state in,
//! state out, as values; the caller reads and writes the state file and runs the summarizer.
#![forbid(unsafe_code)]
#![warn(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "pure crate: no I/O, clock or random order"
)]

pub mod ahead;
pub mod cache;
mod calls;
mod count;
mod early;
mod known;
pub mod mentions;
mod session;
mod state;

pub use cache::PriceTable;
pub use calls::call_points;
pub use count::prompt_tokens;
pub use cutctx_formats::{fixed_tokens, list_key, message_list as history, message_tokens};
pub use early::EarlyFiring;
pub use known::{Known, LastCall};
pub use session::{
    Decision, Firing, Fitted, KnownStep, Restart, SUMMARY_INSTRUCTION, SessionConfig, Step,
    Summarize, Swapped, cached_summary_request, compact_to, fraction, push, step, step_known,
    with_instruction,
};
pub use state::{
    PrefixItem, Ready, STATE_VERSION, SessionState, history_digests, history_digests_after,
    message_digest,
};
