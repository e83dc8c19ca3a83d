//! The derived sets of a transcript: exchanges, untouchable and removable turns.

use cutctx_model::{CompactionBudget, CompactionError, Role, Transcript};

/// The tool-call partition of a transcript, by turn position.
///
/// Turns sharing a `tool_call_id` form one exchange, wherever they sit; a turn without one is
/// an exchange of its own. The two key spaces are separate, so a `tool_call_id` equal to some
/// turn's id merges nothing. Exchanges are ordered by their earliest member, and each lists
/// its members in transcript order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchanges {
    /// Per position: the index of its exchange.
    of_turn: Vec<usize>,
    /// Members of every exchange, exchange after exchange; exchange `e` is
    /// `flat[start[e]..start[e + 1]]`. Two flat arrays rather than a `Vec` per exchange: a
    /// transcript of agent turns has about as many exchanges as turns.
    flat: Vec<usize>,
    start: Vec<usize>,
}

impl Exchanges {
    /// The partition of `transcript`.
    #[must_use]
    pub fn of(transcript: &Transcript) -> Self {
        // The transcript partitioned itself when it was built; lay the members out.
        Self::from_assignment(
            transcript.exchange_assignment().to_vec(),
            transcript.exchange_count(),
        )
    }

    /// The partition of a projection, derived from the partition of its source without
    /// comparing a single id: `origin[j]` is the source position projection turn `j` stands
    /// for, or `None` for a turn the source does not have (which must carry no
    /// `tool_call_id`). Masking keeps `tool_call_id`, so exchanges only lose members.
    #[must_use]
    pub fn project(&self, origin: &[Option<usize>]) -> Self {
        let mut renumber: Vec<Option<usize>> = vec![None; self.len()];
        let mut count = 0_usize;
        let mut of_turn = Vec::with_capacity(origin.len());
        for o in origin {
            let exchange = match o {
                Some(p) => *renumber[self.of_turn[*p]].get_or_insert_with(|| {
                    count += 1;
                    count - 1
                }),
                None => {
                    count += 1;
                    count - 1
                }
            };
            of_turn.push(exchange);
        }
        Self::from_assignment(of_turn, count)
    }

    /// Lays out the members of `count` exchanges numbered by first appearance.
    fn from_assignment(of_turn: Vec<usize>, count: usize) -> Self {
        let mut start = vec![0_usize; count + 1];
        for &e in &of_turn {
            start[e + 1] += 1;
        }
        for e in 0..count {
            start[e + 1] += start[e];
        }
        let mut fill = start.clone();
        let mut flat = vec![0_usize; of_turn.len()];
        for (p, &e) in of_turn.iter().enumerate() {
            flat[fill[e]] = p;
            fill[e] += 1;
        }
        Self {
            of_turn,
            flat,
            start,
        }
    }

    /// The exchanges, each as the positions of its members.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[usize]> + '_ {
        self.start.windows(2).map(|w| &self.flat[w[0]..w[1]])
    }

    /// The number of exchanges.
    #[must_use]
    pub fn len(&self) -> usize {
        self.start.len() - 1
    }

    /// Whether there are none (the transcript is empty).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The index of the exchange holding the turn at `position`.
    #[must_use]
    pub fn exchange_of(&self, position: usize) -> usize {
        self.of_turn[position]
    }

    /// The members of exchange `index`.
    #[must_use]
    pub fn members(&self, index: usize) -> &[usize] {
        &self.flat[self.start[index]..self.start[index + 1]]
    }

    /// The number of positions partitioned.
    pub(crate) fn positions(&self) -> usize {
        self.of_turn.len()
    }
}

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
    /// The tool-call partition.
    pub exchanges: Exchanges,
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
        Self::with_exchanges(transcript, budget, Exchanges::of(transcript))
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
        Self::with_exchanges(projection, budget, self.exchanges.project(origin))
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
            self.exchanges.project(origin),
            origin.len(),
            fixed,
            estimate,
        )
    }

    fn with_exchanges(
        transcript: &Transcript,
        budget: &CompactionBudget,
        exchanges: Exchanges,
    ) -> Self {
        let turns = transcript.turns();
        Self::build(
            budget,
            exchanges,
            turns.len(),
            |p| turns[p].role() == Role::System || turns[p].pinned(),
            |p| turns[p].token_estimate(),
        )
    }

    /// The analysis of `len` turns: turn `p` is untouchable when `fixed(p)` (system or
    /// pinned) or when it lies in the protected tail.
    fn build(
        budget: &CompactionBudget,
        exchanges: Exchanges,
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
