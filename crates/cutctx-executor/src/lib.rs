//! `cutctx-executor`: applies a validated plan to its transcript.
//!
//! [`apply`] walks the transcript once and produces the compacted view and the
//! [`CompactionReport`] of what was done. It computes nothing the plan did not already decide:
//! every figure in the report is copied from the plan, and summary texts are never estimated.
//!
//! **Architecture invariant:** pure. A borrowed input transcript is never modified, and kept
//! turns in the view share their content with the input rather than copying it; an input given
//! up ([`apply_unhashed_in_place`]) has its view built in its own list, its kept turns moved.
#![forbid(unsafe_code)]
#![warn(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "pure crate: no I/O, clock or random order"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cutctx_invariants::CompactionPlan;
use cutctx_model::{
    ActionView, CompactedTranscript, CompactionError, CompactionReport, DerivedTurn,
    ID_SAMPLE_LIMIT, InPlace, Metadata, Parallelism, Role, SUMMARY_TURN_ID_PREFIX,
    SummarizationRequest, Transcript, TranscriptTurn, TurnAction, details, py_repr_str,
};

/// Metadata key every turn the executor writes carries: `"masked"` or `"summary"`.
pub const META_KIND: &str = "cutctx.kind";
/// Metadata key of a summary turn: its group id.
pub const META_SUMMARY_GROUP: &str = "cutctx.summary_group";
/// Metadata key of a summary turn: how many turns it replaces, as a decimal string.
pub const META_REPLACED_TURN_COUNT: &str = "cutctx.replaced_turn_count";

/// The executor, as a value: the reference's `CompactionExecutor().apply(...)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactionExecutor;

impl CompactionExecutor {
    /// See [`apply`].
    ///
    /// # Errors
    ///
    /// As [`apply`].
    pub fn apply(
        &self,
        transcript: &Transcript,
        plan: &CompactionPlan,
        summaries: &BTreeMap<String, String>,
    ) -> Result<CompactedTranscript, CompactionError> {
        apply(transcript, plan, summaries)
    }
}

/// Applies `plan` to `transcript`, with `summaries` fulfilling its summarization requests.
///
/// * `keep`: the turn, unchanged (sharing its content);
/// * `mask`: the turn with the stub's content and estimate, and `cutctx.kind = "masked"` added
///   to its metadata;
/// * `summarize`: at the group's first turn, one assistant turn `summary:<group>` with the
///   supplied text at the request's target estimate;
/// * `drop`: nothing.
///
/// Summaries for groups the plan does not contain are ignored.
///
/// # Errors
///
/// * `COMPACTION_PLAN_MISMATCH` when the plan's actions do not name the transcript's turns, in
///   order (details: `unknown_turn_ids`, `unplanned_turn_ids`, `reordered`);
/// * `COMPACTION_SUMMARY_MISSING` for the first request without a summary (details:
///   `group_id`, `turn_ids`, `target_tokens`, `prompt_id`).
///
/// ```
/// use std::collections::BTreeMap;
/// use cutctx_model::{CompactionBudget, Role, Transcript, TranscriptTurn};
/// use cutctx_policies::{CompactionPolicy, DropOldestPolicy};
/// let t = Transcript::new(vec![
///     TranscriptTurn::new("s", Role::System, "rules", 10)?,
///     TranscriptTurn::new("a", Role::User, "old question", 40)?,
///     TranscriptTurn::new("b", Role::Assistant, "old answer", 40)?,
/// ])?;
/// let plan = DropOldestPolicy.decide(&t, &CompactionBudget::new(60).with_protected_recent_turns(1))?;
/// let out = cutctx_executor::apply(&t, &plan, &BTreeMap::new())?;
/// assert_eq!(out.transcript.turn_ids().collect::<Vec<_>>(), ["s", "b"]);
/// assert_eq!(out.report.dropped_turn_ids, vec!["a".into()]);
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
pub fn apply(
    transcript: &Transcript,
    plan: &CompactionPlan,
    summaries: &BTreeMap<String, String>,
) -> Result<CompactedTranscript, CompactionError> {
    apply_with(transcript, plan, summaries, Parallelism::Automatic)
}

/// As [`apply`], starting no more threads than `parallelism` allows: with
/// [`Parallelism::Sequential`], a large plan is hashed on the caller's thread after the walk
/// instead of beside it. The result is the same.
///
/// # Errors
///
/// As [`apply`].
///
/// ```
/// use std::collections::BTreeMap;
/// use cutctx_model::{CompactionBudget, Parallelism, Role, Transcript, TranscriptTurn};
/// use cutctx_policies::{CompactionPolicy, DropOldestPolicy};
/// let t = Transcript::new(vec![TranscriptTurn::new("u", Role::User, "hi", 5)?])?;
/// let plan = DropOldestPolicy.decide(&t, &CompactionBudget::new(10))?;
/// let one = cutctx_executor::apply_with(&t, &plan, &BTreeMap::new(), Parallelism::Sequential)?;
/// assert_eq!(one, cutctx_executor::apply(&t, &plan, &BTreeMap::new())?);
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
pub fn apply_with(
    transcript: &Transcript,
    plan: &CompactionPlan,
    summaries: &BTreeMap<String, String>,
    parallelism: Parallelism,
) -> Result<CompactedTranscript, CompactionError> {
    applied(
        Input::Borrowed(transcript),
        plan,
        summaries,
        Some(parallelism),
    )
}

/// As [`apply`], except that the report's `plan_hash` is left empty: for a caller that keeps
/// `plan` and fills the hash in from [`PlanDraft::plan_hash`](cutctx_model::PlanDraft::plan_hash) only if it is read. Hashing
/// a large plan is the costliest step of applying it, and a caller sending the view on may
/// never read the report. Runs on the caller's thread alone.
///
/// # Errors
///
/// As [`apply`].
///
/// ```
/// use std::collections::BTreeMap;
/// use cutctx_model::{CompactionBudget, Role, Transcript, TranscriptTurn};
/// use cutctx_policies::{CompactionPolicy, DropOldestPolicy};
/// let t = Transcript::new(vec![TranscriptTurn::new("u", Role::User, "hi", 5)?])?;
/// let plan = DropOldestPolicy.decide(&t, &CompactionBudget::new(10))?;
/// let mut out = cutctx_executor::apply_unhashed(&t, &plan, &BTreeMap::new())?;
/// assert_eq!(out.report.plan_hash, "");
/// out.report.plan_hash = plan.plan_hash();
/// assert_eq!(out, cutctx_executor::apply(&t, &plan, &BTreeMap::new())?);
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
pub fn apply_unhashed(
    transcript: &Transcript,
    plan: &CompactionPlan,
    summaries: &BTreeMap<String, String>,
) -> Result<CompactedTranscript, CompactionError> {
    applied(Input::Borrowed(transcript), plan, summaries, None)
}

/// As [`apply_unhashed`], consuming `transcript`: the view is built in the transcript's own
/// list, each kept turn moved there rather than shared with an input that lives on. For a
/// caller that has no use for the input once it is applied: a large view then touches no
/// memory the input did not, and its turns are not copied. The result is the same.
///
/// # Errors
///
/// As [`apply`]; the transcript is consumed either way.
///
/// ```
/// use std::collections::BTreeMap;
/// use cutctx_model::{CompactionBudget, Role, Transcript, TranscriptTurn};
/// use cutctx_policies::{CompactionPolicy, DropOldestPolicy};
/// let t = Transcript::new(vec![
///     TranscriptTurn::new("a", Role::User, "old", 40)?,
///     TranscriptTurn::new("b", Role::User, "new", 5)?,
/// ])?;
/// let plan = DropOldestPolicy.decide(&t, &CompactionBudget::new(10).with_protected_recent_turns(1))?;
/// let shared = cutctx_executor::apply_unhashed(&t, &plan, &BTreeMap::new())?;
/// let moved = cutctx_executor::apply_unhashed_in_place(t, &plan, &BTreeMap::new())?;
/// assert_eq!(moved, shared);
/// assert_eq!(moved.transcript.turn_ids().collect::<Vec<_>>(), ["b"]);
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
pub fn apply_unhashed_in_place(
    transcript: Transcript,
    plan: &CompactionPlan,
    summaries: &BTreeMap<String, String>,
) -> Result<CompactedTranscript, CompactionError> {
    applied(Input::Owned(transcript), plan, summaries, None)
}

/// The transcript a plan is applied to: borrowed, its view sharing its turns, or owned, its
/// view built in its list.
enum Input<'t> {
    Borrowed(&'t Transcript),
    Owned(Transcript),
}

impl Input<'_> {
    fn transcript(&self) -> &Transcript {
        match self {
            Self::Borrowed(t) => t,
            Self::Owned(t) => t,
        }
    }
}

/// [`apply_with`] when `hashing` is given, else [`apply_unhashed`] (or, for an owned input,
/// [`apply_unhashed_in_place`]).
fn applied(
    input: Input<'_>,
    plan: &CompactionPlan,
    summaries: &BTreeMap<String, String>,
    hashing: Option<Parallelism>,
) -> Result<CompactedTranscript, CompactionError> {
    let transcript = input.transcript();
    check_match(transcript, &plan.actions)?;
    // A plan validated against another transcript with the same ids may still break a rule
    // here (a turn pinned here and not there): it is validated again, under its own budget.
    let revalidated;
    let plan = if plan.is_for(transcript) {
        plan
    } else {
        revalidated = plan.revalidated_for(transcript)?;
        &revalidated
    };
    for request in &plan.summarization_requests {
        if !summaries.contains_key(request.group_id()) {
            return Err(summary_missing(request));
        }
    }
    let requests: BTreeMap<&str, &SummarizationRequest> = plan
        .summarization_requests
        .iter()
        .map(|r| (r.group_id(), r))
        .collect();
    let n = transcript.len();

    // Hashing a large plan is the one long sequential step; it overlaps the walk and the
    // building of the view.
    const PARALLEL_ACTIONS: usize = 20_000;
    let (walk, plan_hash) = match hashing {
        None => (walk(input, plan, summaries, &requests), String::new()),
        Some(parallelism)
            if plan.actions.len() >= PARALLEL_ACTIONS && parallelism.threads() > 1 =>
        {
            // The hashing job may pipeline its own writing only with a third thread to spare.
            let inner = if parallelism.threads() > 2 {
                parallelism
            } else {
                Parallelism::Sequential
            };
            let (walk, hashed) = cutctx_model::beside::beside_one(
                || walk(input, plan, summaries, &requests),
                || plan.plan_hash_with(inner),
            );
            // Hashing cannot panic; were the job lost anyway, hash here.
            (
                walk,
                hashed.unwrap_or_else(|_| plan.plan_hash_with(Parallelism::Sequential)),
            )
        }
        Some(parallelism) => (
            walk(input, plan, summaries, &requests),
            plan.plan_hash_with(parallelism),
        ),
    };
    let Walk {
        view,
        kept,
        masked,
        summarized,
        dropped,
        summary_turn_ids,
    } = walk?;
    let report = CompactionReport {
        budget_unmet: plan.budget_unmet,
        dropped_turn_ids: dropped,
        estimator_ratio: plan.estimator_ratio,
        kept_turn_ids: kept,
        masked_turn_ids: masked,
        plan_hash,
        policy_name: plan.policy_name.clone(),
        policy_version: plan.policy_version.clone(),
        summarized_turn_ids: summarized,
        summary_turn_ids,
        tokens_after_estimate: plan.tokens_after_estimate,
        tokens_before: plan.tokens_before,
        turns_after: view.len() as u64,
        turns_before: n as u64,
    };
    Ok(CompactedTranscript {
        transcript: view,
        report,
    })
}

/// What one pass over the turns produces.
struct Walk {
    view: Transcript,
    kept: Vec<Arc<str>>,
    masked: Vec<Arc<str>>,
    summarized: Vec<Arc<str>>,
    dropped: Vec<Arc<str>>,
    summary_turn_ids: Vec<String>,
}

/// Walks the turns once, building the view (as a transcript, so that this work too overlaps
/// the plan's hash) and the id lists of the report: from a borrowed input, the view's turns
/// stream straight into [`Transcript::derive`], no list of parts built first; from an owned
/// one, the view is derived in place ([`Transcript::derive_in_place`]). Both ask the same
/// [`Walker`] what becomes of each turn.
fn walk(
    input: Input<'_>,
    plan: &CompactionPlan,
    summaries: &BTreeMap<String, String>,
    requests: &BTreeMap<&str, &SummarizationRequest>,
) -> Result<Walk, CompactionError> {
    let mut walker = Walker::new(input.transcript().len(), plan, summaries, requests);
    let view = match input {
        Input::Borrowed(transcript) => {
            let parts = transcript
                .turns()
                .iter()
                .enumerate()
                .filter_map(|(position, turn)| match walker.decide(position, turn) {
                    InPlace::Keep => Some(DerivedTurn::Kept(position, turn.clone())),
                    InPlace::Replace {
                        content,
                        token_estimate,
                        metadata,
                    } => Some(DerivedTurn::Kept(
                        position,
                        turn.with_replaced_content(content, token_estimate)
                            .with_metadata(metadata),
                    )),
                    InPlace::New(turn) => Some(DerivedTurn::New(turn)),
                    InPlace::Drop => None,
                });
            transcript.derive(parts)
        }
        Input::Owned(transcript) => {
            transcript.derive_in_place(|position, turn| walker.decide(position, turn))
        }
    };
    if let Some(e) = walker.failure {
        return Err(e);
    }
    Ok(Walk {
        view: view?,
        kept: walker.kept,
        masked: walker.masked,
        summarized: walker.summarized,
        dropped: walker.dropped,
        summary_turn_ids: walker.summary_turn_ids,
    })
}

/// What becomes of each turn as the plan says, decided in order, and the report's lists of
/// ids filled as it goes.
struct Walker<'p> {
    plan: &'p CompactionPlan,
    summaries: &'p BTreeMap<String, String>,
    requests: &'p BTreeMap<&'p str, &'p SummarizationRequest>,
    kept: Vec<Arc<str>>,
    masked: Vec<Arc<str>>,
    summarized: Vec<Arc<str>>,
    dropped: Vec<Arc<str>>,
    summary_turn_ids: Vec<String>,
    /// The groups whose summary turn is written: the first of a group's turns stands in for
    /// all of them.
    emitted: BTreeSet<&'p Arc<str>>,
    /// The last metadata map marked as masked, and its marked copy: turns often share one map
    /// (all turns without metadata share the empty one), so one copy serves a run of them.
    marked: Option<(Metadata, Metadata)>,
    /// The first failure, which the walk ends in: the turn that failed is left out.
    failure: Option<CompactionError>,
}

impl<'p> Walker<'p> {
    fn new(
        turns: usize,
        plan: &'p CompactionPlan,
        summaries: &'p BTreeMap<String, String>,
        requests: &'p BTreeMap<&'p str, &'p SummarizationRequest>,
    ) -> Self {
        // Room for every turn in each list, reserved, not touched: grown from nothing by
        // doubling, a list of a hundred thousand ids would be copied some seventeen times.
        Self {
            plan,
            summaries,
            requests,
            kept: Vec::with_capacity(turns),
            masked: Vec::with_capacity(turns),
            summarized: Vec::with_capacity(turns),
            dropped: Vec::with_capacity(turns),
            summary_turn_ids: Vec::with_capacity(requests.len()),
            emitted: BTreeSet::new(),
            marked: None,
            failure: None,
        }
    }

    /// What becomes of `turn`, at `position`, as the plan's action for it says.
    fn decide(&mut self, position: usize, turn: &TranscriptTurn) -> InPlace {
        // `check_match` found an action for every turn.
        let Some(action) = self.plan.actions.get(position) else {
            debug_assert!(false, "an action for every turn");
            self.failure.get_or_insert_with(|| {
                CompactionError::validation(
                    "The plan has no action for a turn.",
                    details! { "position" => position },
                )
            });
            return InPlace::Drop;
        };
        let id = turn.turn_id_arc().clone();
        match action.view() {
            ActionView::Keep => {
                self.kept.push(id);
                InPlace::Keep
            }
            ActionView::Mask(r) => {
                self.masked.push(id);
                let metadata = match &self.marked {
                    Some((source, copy)) if Arc::ptr_eq(source, turn.metadata()) => {
                        Arc::clone(copy)
                    }
                    _ => {
                        let mut metadata = (**turn.metadata()).clone();
                        metadata.insert(META_KIND.to_owned(), "masked".to_owned());
                        let copy = Arc::new(metadata);
                        self.marked = Some((Arc::clone(turn.metadata()), Arc::clone(&copy)));
                        copy
                    }
                };
                InPlace::Replace {
                    content: r.content.clone(),
                    token_estimate: r.token_estimate,
                    metadata,
                }
            }
            ActionView::Summarize(group) => {
                self.summarized.push(id);
                if !self.emitted.insert(group) {
                    return InPlace::Drop;
                }
                match summary_turn(group, self.requests, self.summaries) {
                    Ok(summary) => {
                        self.summary_turn_ids.push(summary.turn_id().to_owned());
                        InPlace::New(summary)
                    }
                    Err(e) => {
                        self.failure.get_or_insert(e);
                        InPlace::Drop
                    }
                }
            }
            ActionView::Drop => {
                self.dropped.push(id);
                InPlace::Drop
            }
        }
    }
}

/// The summary turn of `group`: the caller's text at the request's target estimate, marked
/// in its metadata.
///
/// A validated plan has a request for every group it names, and [`apply`] has checked that
/// every request has a summary; a missing one is still an error here, never a turn left out.
fn summary_turn(
    group: &str,
    requests: &BTreeMap<&str, &SummarizationRequest>,
    summaries: &BTreeMap<String, String>,
) -> Result<TranscriptTurn, CompactionError> {
    let Some(request) = requests.get(group) else {
        debug_assert!(false, "a validated plan has a request for every group");
        return Err(CompactionError::validation(
            format!(
                "The plan names summary group {} but has no request for it.",
                py_repr_str(group)
            ),
            details! { "group_id" => group },
        ));
    };
    let Some(text) = summaries.get(group) else {
        return Err(summary_missing(request));
    };
    let metadata = BTreeMap::from([
        (META_KIND.to_owned(), "summary".to_owned()),
        (META_SUMMARY_GROUP.to_owned(), group.to_owned()),
        (
            META_REPLACED_TURN_COUNT.to_owned(),
            request.turn_ids().len().to_string(),
        ),
    ]);
    let turn = TranscriptTurn::new(
        format!("{SUMMARY_TURN_ID_PREFIX}{group}"),
        Role::Assistant,
        text.as_str(),
        request.target_tokens(),
    )?;
    Ok(turn.with_metadata(Arc::new(metadata)))
}

/// Checks that `actions` name the turns of `transcript` exactly, in order.
///
/// A plan is positional: run this before trusting a stored plan with another transcript.
///
/// # Errors
///
/// `COMPACTION_PLAN_MISMATCH` with `unknown_turn_ids` (planned, absent from the transcript),
/// `unplanned_turn_ids` (in the transcript, not planned), each sorted and at most 10, and
/// `reordered` (the ids match as sets).
pub fn check_match(transcript: &Transcript, actions: &[TurnAction]) -> Result<(), CompactionError> {
    if actions.len() == transcript.len()
        && actions
            .iter()
            .zip(transcript.turn_id_arcs())
            .all(|(a, id)| a.names_id(id))
    {
        return Ok(());
    }
    let planned: BTreeSet<&str> = actions.iter().map(|a| a.turn_id()).collect();
    let actual: BTreeSet<&str> = transcript.turn_ids().collect();
    let unknown: Vec<&str> = planned.difference(&actual).copied().collect();
    let unplanned: Vec<&str> = actual.difference(&planned).copied().collect();
    let reordered = unknown.is_empty() && unplanned.is_empty();
    let why = if reordered {
        "the ids match but their order differs, and a plan's actions are positional: both \
         'oldest' and the protected tail depend on it."
            .to_owned()
    } else {
        format!(
            "{} planned turns are absent from it and {} of its turns are unplanned.",
            unknown.len(),
            unplanned.len()
        )
    };
    Err(CompactionError::PlanMismatch {
        message: format!(
            "This plan was built for {} turns and the transcript has {}; {why}",
            actions.len(),
            transcript.len()
        ),
        details: details! {
            "unknown_turn_ids" => unknown.iter().take(ID_SAMPLE_LIMIT).collect::<Vec<_>>(),
            "unplanned_turn_ids" => unplanned.iter().take(ID_SAMPLE_LIMIT).collect::<Vec<_>>(),
            "reordered" => reordered,
        },
    })
}

fn summary_missing(request: &SummarizationRequest) -> CompactionError {
    let turn_ids: Vec<&str> = request
        .turn_ids()
        .iter()
        .take(ID_SAMPLE_LIMIT)
        .map(|s| &**s)
        .collect();
    CompactionError::SummaryMissing {
        message: format!(
            "Summarization group {} has no supplied summary. cutctx plans a summarization and \
             never performs it: fulfil the request with your own model and pass the text back \
             in `summaries`.",
            py_repr_str(request.group_id())
        ),
        details: details! {
            "group_id" => request.group_id(),
            "turn_ids" => turn_ids,
            "target_tokens" => request.target_tokens(),
            "prompt_id" => request.prompt_id(),
        },
    }
}
