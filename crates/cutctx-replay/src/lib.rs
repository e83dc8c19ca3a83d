//! `cutctx-replay`: the replay lab. It runs one recorded agent loop call by call under several
//! compaction strategies and prices each under the same prefix-cache model, so that a
//! session's firing rule can be measured against the alternatives rather than argued for.
//!
//! * [`replay()`] replays a run under three strategies (none, stateless compaction before
//!   every call, the session of `cutctx-session`); [`replay_extended`] adds the offline
//!   reference of [`hindsight`], the [`peers`] (other frameworks' and providers' published
//!   rules) and external strategies whose requests were made elsewhere. Every strategy's
//!   requests are marked for the cache by the same rule ([`Marking`]), optionally with every
//!   run starting with its tools and system prompt already cached
//!   ([`ReplayOptions::warm_prefix`]).
//! * [`prefix_cache`] is the model of which prefixes a provider holds over the run
//!   ([`PrefixCache`](prefix_cache::PrefixCache)), priced with the session crate's
//!   `PriceTable`; [`bound`] gives the least any strategy that sends each call's untouchable
//!   part could pay under that model; [`retention`] measures what each request still shows of
//!   what the recorded answer uses; [`summaries`] is the one rule by which every strategy's
//!   summaries are sized and charged, and the per-firing report of each summary's cost as a
//!   cached-prefix request against its cost made fresh.
//!
//! **What lives where.** This crate holds the lab alone: everything here is used by the replay
//! and by nothing that compacts a live request. The engine it replays (`step`, `compact_to`,
//! the state, early firing, `call_points`, the summarizing request and its instruction) is
//! `cutctx-session`, which the replay calls as any caller does. The price table stays there
//! too, with the providers' published rules, because the engine's early firing prices with it;
//! the model of which prefixes a provider holds over a run is used by the replay alone, so it
//! is here. What a format calls a message, a model item, a system message or a tool result is
//! asked of `cutctx-formats`' `Descriptor`, never written here.
//!
//! ```
//! use cutctx_formats::{EstimatorSpec, Format, FormatError, policy_named};
//! use cutctx_replay::replay;
//! use cutctx_session::{PriceTable, SessionConfig};
//! use serde_json::json;
//!
//! let config = SessionConfig {
//!     format: Format::OpenAiChat,
//!     window: 400,
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
//! for i in 0..20 {
//!     messages.push(json!({"role": "user", "content": format!("question {i} {}", "x".repeat(80))}));
//!     messages.push(json!({"role": "assistant", "content": "ok"}));
//! }
//! let run = json!({"model": "m", "messages": messages});
//! let r = replay(&config, &PriceTable::openai(), &run)?;
//! let names: Vec<&str> = r.strategies.iter().map(|s| s.name.as_str()).collect();
//! assert_eq!(names, ["none", "stateless", "session"]);
//! assert_eq!(r.strategies[0].calls, 20);
//! assert!(r.strategies.iter().all(|s| s.cost_units >= r.bound_units));
//! # Ok::<(), FormatError>(())
//! ```
//!
//! **Architecture invariant:** pure. No I/O, clock, environment or randomness: a run and its
//! settings in, figures out, as values; the caller reads the run and writes the tables and
//! charts.
#![forbid(unsafe_code)]
#![warn(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "pure crate: no I/O, clock or random order"
)]

pub mod bound;
pub mod hindsight;
pub mod peers;
pub mod prefix_cache;
pub mod replay;
pub mod retention;
pub mod summaries;

pub use replay::{
    External, ExternalCall, Marking, Replay, ReplayExtras, ReplayOptions, StrategyReport,
    SummaryInput, replay, replay_extended, replay_with,
};
