//! `cutctx-session`: cache-aware compaction for agent loops, and the replay that prices it.
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
//!   with any policy, and remembers the result as a [`SessionState`]: kept messages by
//!   reference, written ones (summaries, stubs) as they are, and a chained digest of the
//!   history, so that a rewound, edited or foreign history starts a new session.
//! * [`push`] is the in-memory path for new messages alone: its cost grows with them, not
//!   with the history.
//!
//! [`replay()`] runs one recorded agent loop call by call under three strategies (none,
//! stateless compaction before every call, the session; [`replay_extended`] adds the offline
//! reference of [`hindsight`], the [`peers`] and external strategies) and prices each with a
//! [`PriceTable`] and the prefix-cache model of [`cache`], every strategy's requests marked
//! for the cache by the same rule ([`Marking`]), optionally with every run starting with its
//! tools and system prompt already cached ([`ReplayOptions::warm_prefix`]). [`bound`] gives
//! the least any strategy that sends each call's untouchable part could pay for the same
//! run, so the replay says how far each strategy is from what the cache model allows.
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

pub mod bound;
pub mod cache;
mod count;
mod early;
pub mod hindsight;
pub mod peers;
pub mod replay;
pub mod retention;
mod session;
mod state;

pub use cache::PriceTable;
pub use count::prompt_tokens;
pub use cutctx_formats::{fixed_tokens, list_key, message_list as history, message_tokens};
pub use early::EarlyFiring;
pub use replay::{
    External, ExternalCall, Marking, Replay, ReplayExtras, ReplayOptions, StrategyReport,
    SummaryInput, call_points, replay, replay_extended, replay_with,
};
pub use session::{
    Decision, Firing, Restart, SUMMARY_INSTRUCTION, SessionConfig, Step, Summarize,
    cached_summary_request, push, step,
};
pub use state::{PrefixItem, STATE_VERSION, SessionState, history_digests};
