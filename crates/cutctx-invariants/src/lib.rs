//! `cutctx-invariants`: the rules every plan obeys, written once.
//!
//! Every policy routes through this crate, so that no policy can get a rule subtly different
//! from another. It owns:
//!
//! * the derived sets of a transcript: its [`Exchanges`] (the tool-call partition), the
//!   untouchable turns and the removable turns ([`Analysis`]);
//! * the budget floor check ([`require_satisfiable_budget`]);
//! * the one computation of the "after" figure ([`estimate_after`]);
//! * [`CompactionPlan`], the validated plan, and the only two ways to get one:
//!   [`build_plan`] (what policies call) and [`CompactionPlan::validate`] (what a stored plan
//!   goes through).
//!
//! # Why no unvalidated plan can exist
//!
//! A [`CompactionPlan`] wraps a [`PlanDraft`] in a private field. The only constructors run
//! every rule of [`validate`](CompactionPlan::validate) against the transcript and budget the
//! plan is for; there is no `Deserialize`, no `From<PlanDraft>`, and no way to get a mutable
//! reference to the draft inside. The executor accepts only a `CompactionPlan`. So a plan
//! that has not passed validation can be serialized, stored and parsed back as a draft, but
//! never applied.
//!
//! The rules are checked against an [`Analysis`], and an analysis cannot lie: its parts are
//! private, it is computed only by [`Analysis::of`], and it is bound to the transcript (by the
//! identity of its partition, which clones share) and the budget it was computed for.
//! [`build_plan`] and [`CompactionPlan::validate_with`] refuse any other analysis, including
//! the analysis of the same transcript under another budget and the unbound analyses a chain
//! computes for projections. A plan remembers what it was validated against, and the executor
//! validates it again before applying it to any other transcript.
//!
//! # The rules
//!
//! 0. The untouchable turns alone fit the budget (else `COMPACTION_BUDGET_UNSATISFIABLE`).
//! 1. The actions name every turn exactly once, in transcript order.
//! 2. Every untouchable turn (system, pinned, or in the protected tail) is `keep`.
//! 3. Within one exchange, every member is retained (`keep`/`mask`, mixed freely) or every
//!    member is removed by one identical action and group.
//! 4. Summary groups and their requests agree exactly, have distinct ids whose summary turn ids
//!    are free, and are ordered by each group's first turn.
//! 5. `tokens_before`, `tokens_after_estimate` and `budget_unmet` equal what the transcript and
//!    the actions produce.
//!
//! All of it is `O(n log n)` or better in the number of turns, error paths included.
#![forbid(unsafe_code)]
#![warn(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "pure crate: no I/O, clock or random order"
)]

mod plan;
mod sets;
mod validate;

pub use plan::{CompactionPlan, Decisions, build_plan, estimate_after};
pub use sets::{Analysis, require_satisfiable_budget};

pub use cutctx_model::Exchanges;

pub use cutctx_model::PlanDraft;
