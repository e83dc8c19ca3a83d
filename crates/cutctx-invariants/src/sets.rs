//! The derived sets of a transcript: exchanges, untouchable and removable turns.

use std::sync::Arc;

use cutctx_model::{CompactionBudget, CompactionError, Exchanges, Transcript};

/// Everything a policy needs to know about a transcript under a budget, computed once.
///
/// An analysis is opaque: it is computed, never assembled, and it remembers what it was
/// computed for. One made by [`Analysis::of`] is *bound* to that transcript (and its clones)
/// and that budget, and only a bound analysis is accepted where a plan is made or checked
/// ([`crate::build_plan`], [`crate::CompactionPlan::validate_with`]): the analysis of another
/// transcript, or of the same transcript under another budget, is refused there, so it cannot
/// vouch for a plan that acts on protected turns.
///
/// ```
/// use cutctx_model::{CompactionBudget, Role, Transcript, TranscriptTurn};
/// use cutctx_invariants::Analysis;
/// let t = Transcript::new(vec![
///     TranscriptTurn::new("s", Role::System, "", 5)?,
///     TranscriptTurn::new("a", Role::Assistant, "", 5)?.with_tool_call_id("c"),
///     TranscriptTurn::new("u", Role::User, "", 5)?,
///     TranscriptTurn::new("t", Role::Tool, "", 5)?.with_tool_call_id("c"),
/// ])?;
/// let budget = CompactionBudget::new(100).with_protected_recent_turns(1);
/// let a = Analysis::of(&t, &budget);
/// assert_eq!(a.untouchable(), [true, false, false, true]);
/// // The call is locked by its protected result: protection spreads through an exchange.
/// assert_eq!(a.removable(), [false, false, true, false]);
/// assert_eq!(a.untouchable_tokens(), 10);
/// assert!(a.is_for(&t, &budget));
/// assert!(!a.is_for(&t, &CompactionBudget::new(100).with_protected_recent_turns(0)));
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
///
/// Its parts cannot be set from outside, so no analysis can be assembled to claim that a
/// protected turn is removable:
///
/// ```compile_fail
/// # use cutctx_invariants::Analysis;
/// # fn forge(a: &mut Analysis) {
/// a.removable[0] = true; // private field
/// # }
/// ```
///
/// ```compile_fail
/// # use std::sync::Arc;
/// # use cutctx_invariants::Analysis;
/// # use cutctx_model::{CompactionBudget, Transcript};
/// let t = Transcript::default();
/// let forged = Analysis {
///     exchanges: Arc::clone(t.exchanges()),
///     untouchable: vec![],
///     removable: vec![],
///     untouchable_tokens: 0,
///     untouchable_count: 0,
/// };
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Analysis {
    /// The tool-call partition. For a bound analysis, the very `Arc` of the transcript it was
    /// computed for: pointer equality with a transcript's partition is what binds them.
    pub(crate) exchanges: Arc<Exchanges>,
    /// Per position: system, pinned, or in the protected tail. No policy may act on these.
    pub(crate) untouchable: Vec<bool>,
    /// Per position: the whole exchange is free of untouchable turns, so the turn may be
    /// removed (dropped or summarized). Masking is bounded by `untouchable` instead.
    pub(crate) removable: Vec<bool>,
    /// The sum of the untouchable turns' estimates: the floor no plan goes below.
    pub(crate) untouchable_tokens: u64,
    /// How many turns are untouchable.
    pub(crate) untouchable_count: usize,
    /// The budget the analysis was computed under.
    pub(crate) budget: CompactionBudget,
    /// Whether `exchanges` is the partition of a real transcript (made by [`Analysis::of`]),
    /// rather than of a shape no transcript has.
    pub(crate) bound: bool,
}

impl Analysis {
    /// The analysis of `transcript` under `budget`, bound to both.
    #[must_use]
    pub fn of(transcript: &Transcript, budget: &CompactionBudget) -> Self {
        let fixed = transcript.system_or_pinned();
        let estimates = transcript.token_estimates();
        let mut analysis = Self::build(
            budget,
            Arc::clone(transcript.exchanges()),
            transcript.len(),
            |p| fixed[p],
            |p| estimates[p],
        );
        analysis.bound = true;
        analysis
    }

    /// The analysis of a projection given by its shape alone, for callers that never build
    /// the projection as a transcript (a chain deciding for a member that reads only the
    /// shape): `origin` as for [`Exchanges::project`], `fixed(j)` whether projection turn `j`
    /// is a system or pinned turn, `estimate(j)` its estimate.
    ///
    /// The result is bound to no transcript, so it informs decisions but can never vouch for
    /// a plan.
    ///
    /// ```
    /// use cutctx_model::{CompactionBudget, Role, Transcript, TranscriptTurn};
    /// use cutctx_invariants::Analysis;
    /// let t = Transcript::new(vec![
    ///     TranscriptTurn::new("u", Role::User, "", 5)?,
    ///     TranscriptTurn::new("v", Role::User, "", 7)?,
    /// ])?;
    /// let b = CompactionBudget::new(100).with_protected_recent_turns(1);
    /// // A projection without the first turn: one turn, protected.
    /// let shape = Analysis::of(&t, &b).project_shape(&[Some(1)], |_| false, |_| 7);
    /// assert_eq!((shape.untouchable(), shape.untouchable_tokens()), (&[true][..], 7));
    /// assert!(!shape.is_for(&t, &b));
    /// # Ok::<(), cutctx_model::CompactionError>(())
    /// ```
    #[must_use]
    pub fn project_shape(
        &self,
        origin: &[Option<usize>],
        fixed: impl Fn(usize) -> bool,
        estimate: impl Fn(usize) -> u64,
    ) -> Self {
        Self::build(
            &self.budget,
            Arc::new(self.exchanges.project(origin)),
            origin.len(),
            fixed,
            estimate,
        )
    }

    /// The same turns in the same places with other estimates (a projection in which only
    /// masks were decided): the same exchanges, untouchable and removable turns, with the
    /// floor summed again over `estimates`. Bound to no transcript, as
    /// [`Analysis::project_shape`].
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` when `estimates` has another length than the analysis, or the
    /// untouchable estimates sum beyond `u64::MAX`.
    pub fn with_estimates(&self, estimates: &[u64]) -> Result<Self, CompactionError> {
        if estimates.len() != self.untouchable.len() {
            return Err(CompactionError::validation(
                format!(
                    "An analysis of {} turns cannot take the estimates of {}.",
                    self.untouchable.len(),
                    estimates.len()
                ),
                cutctx_model::details! {
                    "turn_count" => self.untouchable.len(),
                    "estimate_count" => estimates.len(),
                },
            ));
        }
        let mut floor = 0_u64;
        for (_, &e) in self.untouchable.iter().zip(estimates).filter(|(u, _)| **u) {
            floor = floor.checked_add(e).ok_or_else(|| {
                CompactionError::validation(
                    format!("The untouchable estimates sum beyond {}.", u64::MAX),
                    cutctx_model::details! { "turn_count" => estimates.len() },
                )
            })?;
        }
        Ok(Self {
            exchanges: Arc::clone(&self.exchanges),
            untouchable: self.untouchable.clone(),
            removable: self.removable.clone(),
            untouchable_tokens: floor,
            untouchable_count: self.untouchable_count,
            budget: self.budget,
            bound: false,
        })
    }

    /// The analysis of `len` turns: turn `p` is untouchable when `fixed(p)` (system or
    /// pinned) or when it lies in the protected tail. Bound to nothing yet.
    fn build(
        budget: &CompactionBudget,
        exchanges: Arc<Exchanges>,
        len: usize,
        fixed: impl Fn(usize) -> bool,
        estimate: impl Fn(usize) -> u64,
    ) -> Self {
        debug_assert_eq!(exchanges.positions(), len, "a partition of every turn");
        // A tail longer than any transcript protects every turn; `usize` is at least as wide
        // as any length, so the saturation changes no answer.
        let protected = usize::try_from(budget.protected_recent_turns).unwrap_or(usize::MAX);
        let protected_from = len.saturating_sub(protected);
        let untouchable: Vec<bool> = (0..len).map(|p| p >= protected_from || fixed(p)).collect();
        let mut untouchable_tokens = 0_u64;
        let mut untouchable_count = 0_usize;
        for (p, _) in untouchable.iter().enumerate().filter(|(_, u)| **u) {
            // Estimates of one transcript sum within `u64` (it refuses more), so this never
            // saturates for a real transcript; a shape's may, and is then over any budget.
            untouchable_tokens = untouchable_tokens.saturating_add(estimate(p));
            untouchable_count += 1;
        }
        let mut removable = vec![false; len];
        for members in exchanges.iter() {
            if members.iter().all(|&p| !untouchable[p]) {
                for &p in members {
                    removable[p] = true;
                }
            }
        }
        Self {
            exchanges,
            untouchable,
            removable,
            untouchable_tokens,
            untouchable_count,
            budget: *budget,
            bound: false,
        }
    }

    /// Whether this analysis was computed by [`Analysis::of`] for `transcript` (or a clone of
    /// it) under `budget`. `O(1)`.
    #[must_use]
    pub fn is_for(&self, transcript: &Transcript, budget: &CompactionBudget) -> bool {
        self.bound
            && self.budget == *budget
            && Arc::ptr_eq(&self.exchanges, transcript.exchanges())
            && self.untouchable.len() == transcript.len()
    }

    /// Refuses an analysis not computed for `transcript` under `budget`: the guard every
    /// function that accepts a caller's analysis runs first.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` with `turn_count`, `analysis_turn_count`, `max_tokens`,
    /// `analysis_max_tokens`, `protected_recent_turns` and `analysis_protected_recent_turns`.
    pub fn require_for(
        &self,
        transcript: &Transcript,
        budget: &CompactionBudget,
    ) -> Result<(), CompactionError> {
        if self.is_for(transcript, budget) {
            return Ok(());
        }
        Err(CompactionError::validation(
            format!(
                "The analysis given was not computed for this transcript ({} turns) under this                  budget (max_tokens {}, protected_recent_turns {}); compute it with                  Analysis::of for the transcript and budget the plan is for.",
                transcript.len(),
                budget.max_tokens,
                budget.protected_recent_turns
            ),
            cutctx_model::details! {
                "turn_count" => transcript.len(),
                "analysis_turn_count" => self.untouchable.len(),
                "max_tokens" => budget.max_tokens,
                "analysis_max_tokens" => self.budget.max_tokens,
                "protected_recent_turns" => budget.protected_recent_turns,
                "analysis_protected_recent_turns" => self.budget.protected_recent_turns,
            },
        ))
    }

    /// The tool-call partition.
    #[must_use]
    pub const fn exchanges(&self) -> &Arc<Exchanges> {
        &self.exchanges
    }

    /// Per position: system, pinned, or in the protected tail. No policy may act on these.
    #[must_use]
    pub fn untouchable(&self) -> &[bool] {
        &self.untouchable
    }

    /// Per position: the whole exchange is free of untouchable turns, so the turn may be
    /// removed (dropped or summarized). Masking is bounded by [`Analysis::untouchable`].
    #[must_use]
    pub fn removable(&self) -> &[bool] {
        &self.removable
    }

    /// The sum of the untouchable turns' estimates: the floor no plan goes below.
    #[must_use]
    pub const fn untouchable_tokens(&self) -> u64 {
        self.untouchable_tokens
    }

    /// How many turns are untouchable.
    #[must_use]
    pub const fn untouchable_count(&self) -> usize {
        self.untouchable_count
    }

    /// The budget the analysis was computed under.
    #[must_use]
    pub const fn budget(&self) -> &CompactionBudget {
        &self.budget
    }

    /// How many turns the analysis describes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.untouchable.len()
    }

    /// Whether the analysis describes no turn.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.untouchable.is_empty()
    }

    /// Refuses a budget below the untouchable floor (equality is fine).
    ///
    /// # Errors
    ///
    /// `COMPACTION_BUDGET_UNSATISFIABLE` with `untouchable_tokens`, `max_tokens`,
    /// `untouchable_turn_count` and `protected_recent_turns` in its details.
    pub fn require_satisfiable(&self) -> Result<(), CompactionError> {
        let budget = &self.budget;
        if self.untouchable_tokens <= budget.max_tokens {
            return Ok(());
        }
        let floor = self.untouchable_tokens;
        Err(CompactionError::BudgetUnsatisfiable {
            message: format!(
                "The untouchable turns alone are estimated at {floor} tokens, which exceeds the \
                 budget of {max}. {n} turns are untouchable: every SYSTEM turn, every pinned \
                 turn, and the last {p}. Raise max_tokens, unpin turns, or shorten the protected \
                 tail \u{2014} no compaction can fit this budget without violating an invariant.",
                max = budget.max_tokens,
                n = self.untouchable_count,
                p = budget.protected_recent_turns,
            ),
            details: cutctx_model::details! {
                "untouchable_tokens" => floor,
                "max_tokens" => budget.max_tokens,
                "untouchable_turn_count" => self.untouchable_count,
                "protected_recent_turns" => budget.protected_recent_turns,
            },
        })
    }
}

/// Refuses a budget below the untouchable floor of `transcript`.
///
/// # Errors
///
/// As [`Analysis::require_satisfiable`].
pub fn require_satisfiable_budget(
    transcript: &Transcript,
    budget: &CompactionBudget,
) -> Result<(), CompactionError> {
    Analysis::of(transcript, budget).require_satisfiable()
}
