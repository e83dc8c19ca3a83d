//! The derived sets of a transcript: exchanges, untouchable and removable turns.

use std::sync::Arc;

use cutctx_model::{CompactionBudget, CompactionError, Exchanges, Transcript};

/// Everything a policy needs to know about a transcript under a budget, computed once.
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
/// let a = Analysis::of(&t, &CompactionBudget::new(100).with_protected_recent_turns(1));
/// assert_eq!(a.untouchable, [true, false, false, true]);
/// // The call is locked by its protected result: protection spreads through an exchange.
/// assert_eq!(a.removable, [false, false, true, false]);
/// assert_eq!(a.untouchable_tokens, 10);
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Analysis {
    /// The tool-call partition, shared with the transcript it was computed for.
    pub exchanges: Arc<Exchanges>,
    /// Per position: system, pinned, or in the protected tail. No policy may act on these.
    pub untouchable: Vec<bool>,
    /// Per position: the whole exchange is free of untouchable turns, so the turn may be
    /// removed (dropped or summarized). Masking is bounded by `untouchable` instead.
    pub removable: Vec<bool>,
    /// The sum of the untouchable turns' estimates: the floor no plan goes below.
    pub untouchable_tokens: u64,
    /// How many turns are untouchable.
    pub untouchable_count: usize,
}

impl Analysis {
    /// The analysis of `transcript` under `budget`.
    #[must_use]
    pub fn of(transcript: &Transcript, budget: &CompactionBudget) -> Self {
        Self::with_exchanges(transcript, budget, Arc::clone(transcript.exchanges()))
    }

    /// The analysis of a projection of the transcript `self` analysed: see
    /// [`Exchanges::project`] for `origin`. `O(n)`, no id compared.
    #[must_use]
    pub fn project(
        &self,
        projection: &Transcript,
        budget: &CompactionBudget,
        origin: &[Option<usize>],
    ) -> Self {
        Self::with_exchanges(projection, budget, Arc::new(self.exchanges.project(origin)))
    }

    /// The analysis of a projection given by its shape alone, for callers that never build
    /// the projection as a transcript: `origin` as for [`Exchanges::project`], `fixed(j)`
    /// whether projection turn `j` is a system or pinned turn, `estimate(j)` its estimate.
    #[doc(hidden)]
    #[must_use]
    pub fn project_shape(
        &self,
        budget: &CompactionBudget,
        origin: &[Option<usize>],
        fixed: impl Fn(usize) -> bool,
        estimate: impl Fn(usize) -> u64,
    ) -> Self {
        Self::build(
            budget,
            Arc::new(self.exchanges.project(origin)),
            origin.len(),
            fixed,
            estimate,
        )
    }

    fn with_exchanges(
        transcript: &Transcript,
        budget: &CompactionBudget,
        exchanges: Arc<Exchanges>,
    ) -> Self {
        let fixed = transcript.system_or_pinned();
        let estimates = transcript.token_estimates();
        Self::build(
            budget,
            exchanges,
            transcript.len(),
            |p| fixed[p],
            |p| estimates[p],
        )
    }

    /// The analysis of `len` turns: turn `p` is untouchable when `fixed(p)` (system or
    /// pinned) or when it lies in the protected tail.
    fn build(
        budget: &CompactionBudget,
        exchanges: Arc<Exchanges>,
        len: usize,
        fixed: impl Fn(usize) -> bool,
        estimate: impl Fn(usize) -> u64,
    ) -> Self {
        let protected = usize::try_from(budget.protected_recent_turns).unwrap_or(usize::MAX);
        let protected_from = len.saturating_sub(protected);
        let untouchable: Vec<bool> = (0..len).map(|p| p >= protected_from || fixed(p)).collect();
        let mut untouchable_tokens = 0_u64;
        let mut untouchable_count = 0_usize;
        for (p, _) in untouchable.iter().enumerate().filter(|(_, u)| **u) {
            untouchable_tokens += estimate(p);
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
        }
    }

    /// Whether this analysis can describe `transcript`: the same number of turns. A cheap
    /// guard against passing the analysis of another transcript.
    #[must_use]
    pub fn fits(&self, transcript: &Transcript) -> bool {
        self.untouchable.len() == transcript.len() && self.exchanges.positions() == transcript.len()
    }

    /// Refuses a budget below the untouchable floor (equality is fine).
    ///
    /// # Errors
    ///
    /// `COMPACTION_BUDGET_UNSATISFIABLE` with `untouchable_tokens`, `max_tokens`,
    /// `untouchable_turn_count` and `protected_recent_turns` in its details.
    pub fn require_satisfiable(&self, budget: &CompactionBudget) -> Result<(), CompactionError> {
        if self.untouchable_tokens <= budget.max_tokens {
            return Ok(());
        }
        let floor = self.untouchable_tokens;
        Err(CompactionError::BudgetUnsatisfiable {
            message: format!(
                "The untouchable turns alone are estimated at {floor} tokens, over the budget of \
                 {max}. {n} turns are untouchable (every system turn, every pinned turn, and the \
                 last {p}); raise max_tokens, unpin turns or shorten the protected tail, since \
                 no compaction can fit this budget without breaking an invariant.",
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
    Analysis::of(transcript, budget).require_satisfiable(budget)
}
