//! A transcript: its turns in order with unique ids, and the per-position columns and
//! exchange layout made from them on first use.

use std::sync::{Arc, OnceLock};

use cutctx_json::{Style, Writer, write_turn};
use serde::{Deserialize, Serialize};

use crate::partition::{DerivedPartition, partition, same_call};
use crate::{
    CompactionError, Exchanges, ID_SAMPLE_LIMIT, Metadata, Role, TranscriptTurn, details,
    py_repr_str,
};

/// An ordered sequence of turns, oldest first, with unique ids. May be empty.
///
/// ```
/// use cutctx_model::{Role, Transcript, TranscriptTurn};
/// let t = Transcript::new(vec![
///     TranscriptTurn::new("s", Role::System, "rules", 10)?,
///     TranscriptTurn::new("u", Role::User, "hi", 5)?,
/// ])?;
/// assert_eq!(t.token_estimate(), 15);
/// assert_eq!(t.turn_ids().collect::<Vec<_>>(), ["s", "u"]);
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "Vec<TranscriptTurn>", into = "Vec<TranscriptTurn>")]
pub struct Transcript {
    turns: Vec<TranscriptTurn>,
    total: u64,
    /// Per position: the index of the turn's exchange, numbered by first appearance.
    exchange_of: Vec<usize>,
    /// How many exchanges there are.
    exchanges: usize,
    /// The partition laid out by exchange, made on first use.
    layout: Layout,
    /// Per position, what most passes read of a turn, kept beside the turns: a pass over
    /// these reads a few bytes a turn where a pass over the turns reads seventy-two. Made on
    /// first use: a compacted view that is only read or sent on never pays for them.
    columns: LazyColumns,
}

/// A transcript's [`Columns`], made when first asked for. Derived from the turns, so it
/// takes no part in equality.
#[derive(Debug, Clone, Default)]
struct LazyColumns(OnceLock<Columns>);

impl PartialEq for LazyColumns {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for LazyColumns {}

/// Per-position copies of the turns' ids, estimates, roles and system-or-pinned flags.
#[derive(Debug, Clone, Default)]
struct Columns {
    ids: Vec<Arc<str>>,
    estimates: Vec<u64>,
    roles: Vec<Role>,
    fixed: Vec<bool>,
}

impl Columns {
    /// The columns of `turns`, filled in one pass: the turns of a large transcript are read
    /// from memory once, not once for each column.
    fn of(turns: &[TranscriptTurn]) -> Self {
        let mut columns = Self {
            ids: Vec::with_capacity(turns.len()),
            estimates: Vec::with_capacity(turns.len()),
            roles: Vec::with_capacity(turns.len()),
            fixed: Vec::with_capacity(turns.len()),
        };
        for t in turns {
            columns.ids.push(Arc::clone(&t.turn_id));
            columns.estimates.push(t.token_estimate);
            columns.roles.push(t.role);
            columns.fixed.push(t.role == Role::System || t.pinned);
        }
        columns
    }
}

/// A transcript's [`Exchanges`], computed when first asked for and shared after. It is derived
/// from the turns, so it takes no part in equality.
#[derive(Debug, Clone, Default)]
struct Layout(OnceLock<Arc<Exchanges>>);

impl PartialEq for Layout {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Layout {}

/// The fewest turns whose ids are hashed for uniqueness on a second thread while their
/// exchanges are found on the first: below it, the thread costs more than it saves.
const PARALLEL_CHECK_TURNS: usize = 20_000;

/// What a transcript of unique ids derives from its turns when made: the sum of their
/// estimates (`None` beyond `u64::MAX`) and their exchange partition.
struct Unique {
    total: Option<u64>,
    exchange_of: Vec<usize>,
    exchanges: usize,
}

impl Unique {
    /// What `turns` derive, when their ids are distinct as far as their hashes tell (see
    /// [`crate::idmap::hashes_distinct`]); `None` when they may not be. With `beside`, the ids
    /// are hashed on a second thread while this one derives, on the chance (an almost certain
    /// one) that they are distinct; without it, the ids are hashed first.
    fn checked(turns: &[TranscriptTurn], beside: bool) -> Option<Self> {
        let distinct = || crate::idmap::hashes_distinct(turns.iter().map(TranscriptTurn::turn_id));
        if !beside {
            return distinct().then(|| Self::of(turns));
        }
        let (layout, hashed) = crate::beside::beside_one(|| Self::of(turns), distinct);
        // Hashing cannot panic; were the job lost anyway, hash here.
        hashed.unwrap_or_else(|_| distinct()).then_some(layout)
    }

    fn of(turns: &[TranscriptTurn]) -> Self {
        let total = turns
            .iter()
            .try_fold(0_u64, |acc, t| acc.checked_add(t.token_estimate));
        let (exchange_of, exchanges) = partition(turns);
        Self {
            total,
            exchange_of,
            exchanges,
        }
    }

    /// The transcript of `turns`, whose ids are unique and of which this was derived.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` when the estimates sum beyond `u64::MAX` (details: `turn_count`).
    fn into_transcript(self, turns: Vec<TranscriptTurn>) -> Result<Transcript, CompactionError> {
        let total = self.total.ok_or_else(|| {
            CompactionError::validation(
                format!(
                    "The transcript's token estimates sum beyond {}; no budget could be \
                     compared with them.",
                    u64::MAX
                ),
                details! { "turn_count" => turns.len() },
            )
        })?;
        Ok(Transcript {
            turns,
            total,
            exchange_of: self.exchange_of,
            exchanges: self.exchanges,
            layout: Layout::default(),
            columns: LazyColumns::default(),
        })
    }
}

impl Transcript {
    /// A transcript of these turns.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` when ids repeat (details: `duplicate_turn_ids`, sorted, at most 10),
    /// or when the estimates sum beyond `u64::MAX` (details: `turn_count`).
    pub fn new(turns: Vec<TranscriptTurn>) -> Result<Self, CompactionError> {
        Self::checked(turns, pack_ids)
    }

    /// As [`Transcript::new`], for turns whose ids the caller made one after another (see
    /// [`Transcript::new`] on why ids sit together): each turn's id and then its
    /// `tool_call_id` allocated in transcript order, apart from any content, a result's
    /// `tool_call_id` shared with its call's. A parser that builds them so saves copying every
    /// id again. Ids made otherwise give the same transcript, only slower to read.
    ///
    /// # Errors
    ///
    /// As [`Transcript::new`].
    ///
    /// ```
    /// use cutctx_model::{Role, Transcript, TranscriptTurn};
    /// let t = Transcript::with_packed_ids(vec![TranscriptTurn::new("u", Role::User, "hi", 5)?])?;
    /// assert_eq!(t, Transcript::new(t.turns().to_vec())?);
    /// # Ok::<(), cutctx_model::CompactionError>(())
    /// ```
    pub fn with_packed_ids(turns: Vec<TranscriptTurn>) -> Result<Self, CompactionError> {
        Self::checked(turns, |turns| turns)
    }

    /// A transcript of copies of these turns, equal to [`Transcript::new`] of their clones.
    ///
    /// For a caller that holds its turns elsewhere and keeps them (a binding whose turn
    /// objects outlive the transcript): each id and `tool_call_id` is copied once into the
    /// packed layout [`Transcript::new`] makes, and the originals' ids are only read, never
    /// shared, so they are not touched again when either side is dropped. Contents and
    /// metadata are shared.
    ///
    /// # Errors
    ///
    /// As [`Transcript::new`].
    ///
    /// ```
    /// use cutctx_model::{Role, Transcript, TranscriptTurn};
    /// let held = vec![
    ///     TranscriptTurn::new("s", Role::System, "rules", 10)?,
    ///     TranscriptTurn::new("u", Role::User, "hi", 5)?,
    /// ];
    /// let refs: Vec<&TranscriptTurn> = held.iter().collect();
    /// assert_eq!(Transcript::from_copies(&refs)?, Transcript::new(held.clone())?);
    /// assert!(Transcript::from_copies(&[&held[0], &held[0]]).is_err());
    /// # Ok::<(), cutctx_model::CompactionError>(())
    /// ```
    pub fn from_copies(turns: &[&TranscriptTurn]) -> Result<Self, CompactionError> {
        let mut last: Option<Arc<str>> = None;
        let copies = turns
            .iter()
            .map(|t| {
                let turn_id = Arc::from(&*t.turn_id);
                let tool_call_id = t.tool_call_id.as_ref().map(|call| {
                    let packed = match &last {
                        Some(prev) if **prev == **call => Arc::clone(prev),
                        _ => Arc::from(&**call),
                    };
                    last = Some(Arc::clone(&packed));
                    packed
                });
                TranscriptTurn {
                    content: Arc::clone(&t.content),
                    metadata: Arc::clone(&t.metadata),
                    pinned: t.pinned,
                    role: t.role,
                    token_estimate: t.token_estimate,
                    tool_call_id,
                    turn_id,
                }
            })
            .collect();
        Self::checked(copies, |turns| turns)
    }

    /// The transcript of `turns` once `pack` has laid their ids out and they are checked
    /// unique.
    fn checked(
        turns: Vec<TranscriptTurn>,
        pack: fn(Vec<TranscriptTurn>) -> Vec<TranscriptTurn>,
    ) -> Result<Self, CompactionError> {
        // Packed first, so that the check below reads the ids one after another instead of
        // one cache miss each wherever they were made; a repeat, rare and an error, has then
        // paid for a packing it does not use.
        let turns = pack(turns);
        // Uniqueness by hashing each id once: sorting a hundred thousand ids that share their
        // prefixes ("t1", "t2", ...) spends most of its time comparing those prefixes. Only a
        // repeat (or two ids of equal hash) pays for the sort that names the repeats in order.
        let beside =
            turns.len() >= PARALLEL_CHECK_TURNS && crate::Parallelism::Automatic.threads() > 1;
        if let Some(layout) = Unique::checked(&turns, beside) {
            return layout.into_transcript(turns);
        }
        let mut ids: Vec<&str> = turns.iter().map(TranscriptTurn::turn_id).collect();
        ids.sort_unstable();
        let mut duplicates: Vec<&str> = ids
            .windows(2)
            .filter(|w| w[0] == w[1])
            .map(|w| w[1])
            .collect();
        if !duplicates.is_empty() {
            // `duplicates` holds each repeat after the first; the message counts those.
            let repeats = duplicates.len();
            // The first repeat in transcript order, as the reference reports it.
            let mut seen = std::collections::BTreeSet::new();
            let first = turns
                .iter()
                .map(TranscriptTurn::turn_id)
                .find(|id| !seen.insert(*id));
            let first = first.expect("a repeat was counted above, so one is found");
            let message = format!(
                "Transcript turn ids must be unique; {repeats} are repeated (first: {}).",
                py_repr_str(first)
            );
            duplicates.dedup();
            duplicates.truncate(ID_SAMPLE_LIMIT);
            return Err(CompactionError::validation(
                message,
                details! { "duplicate_turn_ids" => duplicates },
            ));
        }
        // Two different ids had equal hashes: the ids are unique after all.
        Self::from_unique(turns)
    }

    /// The transcript of `turns`, whose ids are known to be unique and laid out.
    fn from_unique(turns: Vec<TranscriptTurn>) -> Result<Self, CompactionError> {
        Unique::of(&turns).into_transcript(turns)
    }

    /// Empties the content of every turn whose position `keep` refuses, keeping all else:
    /// ids, roles, estimates, tool call ids, pins and metadata, and so everything derived
    /// from them (the total, the exchanges, and a plan's link to them).
    ///
    /// For a caller done with some contents but not with the turns: applying a plan reads
    /// the contents of the turns it keeps and nothing else, and a request rendered from its
    /// own text reads none, so the masked and dropped turns' contents (most of a large
    /// request) can be freed before the view is built. No invariant of a transcript rests on
    /// its contents.
    ///
    /// ```
    /// use cutctx_model::{Role, Transcript, TranscriptTurn};
    /// let mut t = Transcript::new(vec![
    ///     TranscriptTurn::new("u", Role::User, "hello", 5)?,
    ///     TranscriptTurn::new("a", Role::Assistant, "hi", 2)?,
    /// ])?;
    /// t.release_contents(|position| position == 1);
    /// assert_eq!((t.turns()[0].content(), t.turns()[1].content()), ("", "hi"));
    /// assert_eq!((t.turns()[0].turn_id(), t.token_estimate()), ("u", 7));
    /// # Ok::<(), cutctx_model::CompactionError>(())
    /// ```
    pub fn release_contents(&mut self, mut keep: impl FnMut(usize) -> bool) {
        let empty: Arc<str> = Arc::from("");
        for (position, turn) in self.turns.iter_mut().enumerate() {
            if !keep(position) {
                turn.content = Arc::clone(&empty);
            }
        }
    }

    /// Gives the turn at each position of `contents` its content: for a transcript built with
    /// its contents left elsewhere (empty here) and read in later. Ids, estimates and
    /// everything else stay as they are: no invariant of a transcript rests on its contents.
    ///
    /// ```
    /// use cutctx_model::{Role, Transcript, TranscriptTurn};
    /// let mut t = Transcript::new(vec![
    ///     TranscriptTurn::new("u", Role::User, "", 5)?,
    ///     TranscriptTurn::new("a", Role::Assistant, "hi", 2)?,
    /// ])?;
    /// t.set_contents([(0, "hello".into())])?;
    /// assert_eq!((t.turns()[0].content(), t.turns()[1].content()), ("hello", "hi"));
    /// assert!(t.set_contents([(2, "no such turn".into())]).is_err());
    /// # Ok::<(), cutctx_model::CompactionError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` naming the position and the transcript's length when a position is
    /// past its end; the contents before it are set.
    pub fn set_contents(
        &mut self,
        contents: impl IntoIterator<Item = (usize, Arc<str>)>,
    ) -> Result<(), CompactionError> {
        let len = self.turns.len();
        for (position, content) in contents {
            let Some(turn) = self.turns.get_mut(position) else {
                return Err(CompactionError::validation(
                    "A content was given for a position past the transcript's end.",
                    details! { "position" => position, "turns" => len },
                ));
            };
            turn.content = content;
        }
        Ok(())
    }

    /// The turns, oldest first.
    #[must_use]
    pub fn turns(&self) -> &[TranscriptTurn] {
        &self.turns
    }

    /// The number of turns.
    #[must_use]
    pub fn len(&self) -> usize {
        self.turns.len()
    }

    /// Whether the transcript has no turns.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }

    /// The sum of the turns' estimates.
    #[must_use]
    pub const fn token_estimate(&self) -> u64 {
        self.total
    }

    /// Per position, each turn's id, shared with the turn: what plans and reports copy.
    #[must_use]
    pub fn turn_id_arcs(&self) -> &[Arc<str>] {
        &self.columns().ids
    }

    /// Per position, each turn's estimate: the same figures as the turns', laid out together.
    #[must_use]
    pub fn token_estimates(&self) -> &[u64] {
        &self.columns().estimates
    }

    /// Per position, each turn's role.
    #[must_use]
    pub fn roles(&self) -> &[Role] {
        &self.columns().roles
    }

    /// Per position, whether the turn is a system turn or pinned: the turns no policy may
    /// touch wherever they stand.
    #[must_use]
    pub fn system_or_pinned(&self) -> &[bool] {
        &self.columns().fixed
    }

    fn columns(&self) -> &Columns {
        self.columns.0.get_or_init(|| Columns::of(&self.turns))
    }

    /// The ids in order.
    pub fn turn_ids(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.turns.iter().map(TranscriptTurn::turn_id)
    }

    /// A transcript made from some of this one's turns, in order, with new turns between them.
    ///
    /// This is how a compacted view or a projection is built without re-checking every id:
    /// kept turns come from positions of `self` (strictly increasing, so each at most once, and
    /// each keeping its id, though its content may change), and only the new turns' ids are
    /// checked, against each other and against the kept ids. `O(n log k)` for `k` new turns.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` when a position is out of range or not increasing, a kept turn's id
    /// changed, or a new id repeats (details: `duplicate_turn_ids`).
    ///
    /// ```
    /// use cutctx_model::{DerivedTurn, Role, Transcript, TranscriptTurn};
    /// let t = Transcript::new(vec![
    ///     TranscriptTurn::new("a", Role::User, "x", 1)?,
    ///     TranscriptTurn::new("b", Role::User, "y", 1)?,
    /// ])?;
    /// let view = t.derive(vec![
    ///     DerivedTurn::New(TranscriptTurn::new("summary:g", Role::Assistant, "s", 1)?),
    ///     DerivedTurn::Kept(1, t.turns()[1].clone()),
    /// ])?;
    /// assert_eq!(view.turn_ids().collect::<Vec<_>>(), ["summary:g", "b"]);
    /// let clash = t.derive(vec![
    ///     DerivedTurn::Kept(0, t.turns()[0].clone()),
    ///     DerivedTurn::New(TranscriptTurn::new("a", Role::Assistant, "s", 1)?),
    /// ]);
    /// assert!(clash.is_err());
    /// # Ok::<(), cutctx_model::CompactionError>(())
    /// ```
    pub fn derive(
        &self,
        parts: impl IntoIterator<Item = DerivedTurn>,
    ) -> Result<Self, CompactionError> {
        let parts = parts.into_iter();
        // A filtering iterator knows only its upper bound; reserving it avoids regrowing a
        // vector of a hundred thousand turns.
        let (low, high) = parts.size_hint();
        let mut turns: Vec<TranscriptTurn> = Vec::with_capacity(high.unwrap_or(low));
        let mut fresh: Vec<usize> = Vec::new();
        // The partition, derived from the source's as the turns come (see
        // `DerivedPartition`).
        let mut derived = DerivedPartition::new(self.exchanges, turns.capacity());
        let mut next = 0_usize;
        let mut total = 0_u64;
        for part in parts {
            let turn = match part {
                DerivedTurn::Kept(position, turn) => {
                    let same_id = self.turns.get(position).is_some_and(|orig| {
                        Arc::ptr_eq(&orig.turn_id, &turn.turn_id) || orig.turn_id == turn.turn_id
                    });
                    if position < next || !same_id {
                        return Err(CompactionError::validation(
                            format!(
                                "A derived transcript keeps turn {} out of order or under \
                                 another id.",
                                py_repr_str(turn.turn_id())
                            ),
                            details! { "turn_id" => turn.turn_id(), "position" => position },
                        ));
                    }
                    next = position + 1;
                    let orig = &self.turns[position];
                    derived.kept(
                        self.exchange_of[position],
                        same_call(&turn.tool_call_id, &orig.tool_call_id),
                    );
                    turn
                }
                DerivedTurn::New(turn) => {
                    fresh.push(turns.len());
                    derived.new_turn(turn.tool_call_id.is_none());
                    turn
                }
            };
            total = total.checked_add(turn.token_estimate).ok_or_else(|| {
                CompactionError::validation(
                    format!(
                        "The derived transcript's estimates sum beyond {}.",
                        u64::MAX
                    ),
                    details! { "turn_count" => turns.len() + 1 },
                )
            })?;
            turns.push(turn);
        }
        Self::derived(turns, fresh, total, derived)
    }

    /// The transcript derived from this one in place: `decide` says, for each turn in order
    /// (its position and the turn), whether it is kept as it is, kept with another content,
    /// estimate and metadata, replaced by a turn this one does not have, or left out. The
    /// turns are moved, never cloned, and the view is built in this transcript's own list, so
    /// that a large view's list touches no page the transcript's did not. Equal to
    /// [`Transcript::derive`] of the same decisions (a kept turn as
    /// [`DerivedTurn::Kept`] at its position, a new one as [`DerivedTurn::New`]): a kept turn
    /// keeps its id, role, pin and call, and only new turns' ids are checked.
    ///
    /// # Errors
    ///
    /// As [`Transcript::derive`]; this transcript is consumed either way.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use cutctx_model::{InPlace, Role, Transcript, TranscriptTurn};
    /// let t = Transcript::new(vec![
    ///     TranscriptTurn::new("a", Role::User, "x", 1)?,
    ///     TranscriptTurn::new("b", Role::User, "y", 1)?,
    ///     TranscriptTurn::new("c", Role::User, "z", 1)?,
    /// ])?;
    /// let summary = TranscriptTurn::new("summary:g", Role::Assistant, "s", 1)?;
    /// let mut summary = Some(summary);
    /// let view = t.derive_in_place(|position, turn| match position {
    ///     0 => summary.take().map_or(InPlace::Drop, InPlace::New),
    ///     1 => InPlace::Drop,
    ///     _ => InPlace::Replace {
    ///         content: Arc::from("stub"),
    ///         token_estimate: 1,
    ///         metadata: Arc::clone(turn.metadata()),
    ///     },
    /// })?;
    /// assert_eq!(view.turn_ids().collect::<Vec<_>>(), ["summary:g", "c"]);
    /// assert_eq!(view.turns()[1].content(), "stub");
    /// # Ok::<(), cutctx_model::CompactionError>(())
    /// ```
    pub fn derive_in_place(
        self,
        mut decide: impl FnMut(usize, &TranscriptTurn) -> InPlace,
    ) -> Result<Self, CompactionError> {
        let Self {
            turns,
            exchange_of,
            exchanges,
            ..
        } = self;
        let mut fresh: Vec<usize> = Vec::new();
        let mut derived = DerivedPartition::new(exchanges, turns.len());
        // The sum so far, or how many turns it had reached when it passed `u64::MAX`.
        let mut total: Result<u64, usize> = Ok(0);
        let mut count = 0_usize;
        // Collected in place: the standard library reuses the list a `Vec`'s own iterator
        // came from, when the items keep their size, as they do here.
        let turns: Vec<TranscriptTurn> = turns
            .into_iter()
            .enumerate()
            .filter_map(|(position, mut turn)| {
                match decide(position, &turn) {
                    InPlace::Keep => derived.kept(exchange_of[position], true),
                    InPlace::Replace {
                        content,
                        token_estimate,
                        metadata,
                    } => {
                        turn.content = content;
                        turn.token_estimate = token_estimate;
                        turn.metadata = metadata;
                        derived.kept(exchange_of[position], true);
                    }
                    InPlace::New(new) => {
                        fresh.push(count);
                        derived.new_turn(new.tool_call_id.is_none());
                        turn = new;
                    }
                    InPlace::Drop => return None,
                }
                count += 1;
                if let Ok(sum) = total {
                    total = sum.checked_add(turn.token_estimate).ok_or(count);
                }
                Some(turn)
            })
            .collect();
        let total = total.map_err(|count| {
            CompactionError::validation(
                format!(
                    "The derived transcript's estimates sum beyond {}.",
                    u64::MAX
                ),
                details! { "turn_count" => count },
            )
        })?;
        Self::derived(turns, fresh, total, derived)
    }

    /// The transcript of `turns`, derived from another (`fresh` the positions of the turns
    /// it does not have, `derived` its partition as derived from the other's, `total` the sum
    /// of the estimates): the new turns' ids checked against each other and the kept ones.
    fn derived(
        turns: Vec<TranscriptTurn>,
        fresh: Vec<usize>,
        total: u64,
        derived: DerivedPartition,
    ) -> Result<Self, CompactionError> {
        let (exchange_of, exchanges) = derived.finish().unwrap_or_else(|| partition(&turns));
        if !fresh.is_empty() {
            let mut repeated: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
            let mut new_ids: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
            for &i in &fresh {
                if !new_ids.insert(turns[i].turn_id()) {
                    repeated.insert(turns[i].turn_id());
                }
            }
            let mut fresh_iter = fresh.iter().peekable();
            for (i, turn) in turns.iter().enumerate() {
                if fresh_iter.peek() == Some(&&i) {
                    fresh_iter.next();
                } else if new_ids.contains(turn.turn_id()) {
                    repeated.insert(turn.turn_id());
                }
            }
            if let Some(first) = repeated.first() {
                let sample: Vec<&str> = repeated.iter().copied().take(ID_SAMPLE_LIMIT).collect();
                return Err(CompactionError::validation(
                    format!(
                        "Transcript turn ids must be unique; {} are repeated (first: {}).",
                        repeated.len(),
                        py_repr_str(first)
                    ),
                    details! { "duplicate_turn_ids" => sample },
                ));
            }
        }
        Ok(Self {
            turns,
            total,
            exchange_of,
            exchanges,
            layout: Layout::default(),
            columns: LazyColumns::default(),
        })
    }

    /// Per position, the index of the turn's exchange: turns sharing a `tool_call_id` share an
    /// exchange, a turn without one has its own, and exchanges are numbered in order of their
    /// first turn. Computed once, when the transcript is built.
    #[must_use]
    pub fn exchange_assignment(&self) -> &[usize] {
        &self.exchange_of
    }

    /// The number of exchanges.
    #[must_use]
    pub const fn exchange_count(&self) -> usize {
        self.exchanges
    }

    /// The partition laid out by exchange, each with its members in order. Computed on the
    /// first call and shared by every later one: analysing a transcript again costs nothing
    /// here.
    #[must_use]
    pub fn exchanges(&self) -> &Arc<Exchanges> {
        self.layout.0.get_or_init(|| {
            Arc::new(Exchanges::from_assignment(
                self.exchange_of.clone(),
                self.exchanges,
            ))
        })
    }

    /// The transcript's canonical JSON: an array of turns, each with all seven keys.
    #[must_use]
    pub fn canonical_json(&self) -> String {
        let mut out = String::with_capacity(self.canonical_len_hint());
        self.write_canonical_into(&mut out);
        out
    }

    /// About the length of [`Transcript::canonical_json`], to size a buffer once.
    ///
    /// Text is counted with an eighth more for escapes: a buffer a little too large costs
    /// nothing until written, one too small is copied whole when it grows.
    #[must_use]
    pub fn canonical_len_hint(&self) -> usize {
        let text = |s: &str| s.len() + s.len() / 8 + 2;
        self.turns
            .iter()
            .map(|t| {
                128 + text(&t.turn_id)
                    + text(&t.content)
                    + t.tool_call_id.as_deref().map_or(0, text)
                    + t.metadata
                        .iter()
                        .map(|(k, v)| text(k) + text(v) + 2)
                        .sum::<usize>()
            })
            .sum::<usize>()
            + 2
    }

    /// Appends [`Transcript::canonical_json`] to `out`, so that a caller assembling a larger
    /// document writes it in place instead of copying it there.
    pub fn write_canonical_into(&self, out: &mut String) {
        let whole: Result<(), std::convert::Infallible> =
            self.write_canonical_in_parts(out, usize::MAX, |_| Ok(()));
        match whole {
            Ok(()) => {}
            Err(never) => match never {},
        }
    }

    /// Writes [`Transcript::canonical_json`] a part at a time, so that a caller sending it
    /// on never holds it whole: the text is appended to `buf`, and `drain` is handed `buf`
    /// (to send and empty it) after any turn that leaves it holding `part` bytes or more,
    /// and once at the end. The text `drain` is handed, joined, is the canonical JSON.
    ///
    /// # Errors
    ///
    /// The first error `drain` returns; nothing is written after it.
    ///
    /// ```
    /// use cutctx_model::{Role, Transcript, TranscriptTurn};
    /// let t = Transcript::new(vec![
    ///     TranscriptTurn::new("a", Role::User, "x", 1)?,
    ///     TranscriptTurn::new("b", Role::User, "y", 1)?,
    /// ])?;
    /// let (mut buf, mut sent) = (String::new(), Vec::new());
    /// t.write_canonical_in_parts(&mut buf, 1, |b| {
    ///     sent.push(std::mem::take(b));
    ///     Ok::<(), ()>(())
    /// })
    /// .expect("nothing fails");
    /// assert_eq!(sent.len(), 3);
    /// assert_eq!(sent.concat(), t.canonical_json());
    /// # Ok::<(), cutctx_model::CompactionError>(())
    /// ```
    pub fn write_canonical_in_parts<E>(
        &self,
        buf: &mut String,
        part: usize,
        mut drain: impl FnMut(&mut String) -> Result<(), E>,
    ) -> Result<(), E> {
        Writer::new(buf, Style::CANONICAL).raw("[");
        for (i, t) in self.turns.iter().enumerate() {
            let mut w = Writer::new(buf, Style::CANONICAL);
            if i > 0 {
                w.item_separator();
            }
            write_turn(&mut w, t.json_fields());
            if buf.len() >= part {
                drain(buf)?;
            }
        }
        Writer::new(buf, Style::CANONICAL).raw("]");
        drain(buf)
    }

    /// The turns, consuming the transcript.
    #[must_use]
    pub fn into_turns(self) -> Vec<TranscriptTurn> {
        self.turns
    }
}

/// Copies every turn's id and `tool_call_id` into fresh allocations made one after another.
///
/// Ids are read on every pass a policy makes, while content is read by masking alone. Parsed
/// or built turn by turn, each id sits next to its turn's content, one cache miss per id per
/// pass; packed, the ids of a whole transcript share a few megabytes that the hardware reads
/// ahead of a pass. All the new ids are made before any old one is freed, and the ids before
/// the `tool_call_id`s: an allocator hands a freed block to the next request of its size, so
/// freeing as we go would put each new id where an old one was.
fn pack_ids(mut turns: Vec<TranscriptTurn>) -> Vec<TranscriptTurn> {
    let (ids, calls) = packed_ids(turns.iter());
    for ((turn, id), call) in turns.iter_mut().zip(ids).zip(calls) {
        turn.turn_id = id;
        turn.tool_call_id = call;
    }
    turns
}

/// Fresh copies of the turns' ids, then of their `tool_call_id`s, each group allocated one
/// after another (see [`pack_ids`]); a result right after its call shares the call's copy.
fn packed_ids<'a>(
    turns: impl Iterator<Item = &'a TranscriptTurn> + Clone,
) -> (Vec<Arc<str>>, Vec<Option<Arc<str>>>) {
    let ids: Vec<Arc<str>> = turns.clone().map(|t| Arc::from(&*t.turn_id)).collect();
    let mut last: Option<Arc<str>> = None;
    let calls: Vec<Option<Arc<str>>> = turns
        .map(|t| {
            let call = t.tool_call_id.as_ref()?;
            let packed = match &last {
                Some(prev) if Arc::ptr_eq(prev, call) || **prev == **call => Arc::clone(prev),
                _ => Arc::from(&**call),
            };
            last = Some(Arc::clone(&packed));
            Some(packed)
        })
        .collect();
    (ids, calls)
}

impl TryFrom<Vec<TranscriptTurn>> for Transcript {
    type Error = CompactionError;

    fn try_from(turns: Vec<TranscriptTurn>) -> Result<Self, Self::Error> {
        Self::new(turns)
    }
}

impl From<Transcript> for Vec<TranscriptTurn> {
    fn from(t: Transcript) -> Self {
        t.turns
    }
}

/// One turn of a transcript derived from another by [`Transcript::derive`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DerivedTurn {
    /// The turn at this position of the source, possibly with new content, same id.
    Kept(usize, TranscriptTurn),
    /// A turn the source does not have.
    New(TranscriptTurn),
}

/// What becomes of a turn of a transcript derived from it in place by
/// [`Transcript::derive_in_place`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InPlace {
    /// Kept as it is.
    Keep,
    /// Kept with this content, estimate and metadata; its id, role, pin and call unchanged.
    Replace {
        /// The content it shows.
        content: Arc<str>,
        /// Its estimate.
        token_estimate: u64,
        /// Its metadata.
        metadata: Metadata,
    },
    /// Replaced by a turn the source does not have.
    New(TranscriptTurn),
    /// Left out.
    Drop,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    fn turn(id: &str, est: u64) -> TranscriptTurn {
        TranscriptTurn::new(id, Role::User, format!("content of {id}"), est).expect("valid turn")
    }

    #[test]
    fn packing_ids_keeps_every_value_and_shares_a_calls_id_with_its_result() {
        let call: Arc<str> = Arc::from("c1");
        let given = vec![
            TranscriptTurn::new("a", Role::Assistant, "", 1)
                .expect("valid")
                .with_tool_call_id(Arc::clone(&call)),
            TranscriptTurn::new("t", Role::Tool, "out", 2)
                .expect("valid")
                .with_tool_call_id("c1"),
            turn("u", 3),
            TranscriptTurn::new("b", Role::Assistant, "", 1)
                .expect("valid")
                .with_tool_call_id("c2"),
        ];
        let t = Transcript::new(given.clone()).expect("unique ids");
        assert_eq!(t.turns(), &given[..], "packing changes no value");
        let turns = t.turns();
        let (a, r, b) = (&turns[0], &turns[1], &turns[3]);
        assert!(
            !Arc::ptr_eq(a.turn_id_arc(), given[0].turn_id_arc()),
            "ids are copied"
        );
        let (Some(ca), Some(cr), Some(cb)) = (&a.tool_call_id, &r.tool_call_id, &b.tool_call_id)
        else {
            panic!("tool_call_ids are kept");
        };
        assert!(
            Arc::ptr_eq(ca, cr),
            "a result right after its call shares its string"
        );
        assert!(!Arc::ptr_eq(ca, &call), "the shared string is a fresh copy");
        assert!(!Arc::ptr_eq(ca, cb));
    }

    #[test]
    fn copies_equal_new_and_share_no_id_with_the_turns_they_copy() {
        let held = vec![
            TranscriptTurn::new("a", Role::Assistant, "", 1)
                .expect("valid")
                .with_tool_call_id("c1"),
            TranscriptTurn::new("t", Role::Tool, "out", 2)
                .expect("valid")
                .with_tool_call_id("c1"),
            turn("u", 3),
        ];
        let refs: Vec<&TranscriptTurn> = held.iter().collect();
        let t = Transcript::from_copies(&refs).expect("unique ids");
        assert_eq!(t, Transcript::new(held.clone()).expect("unique ids"));
        for (copy, orig) in t.turns().iter().zip(&held) {
            assert!(!Arc::ptr_eq(copy.turn_id_arc(), orig.turn_id_arc()));
            assert!(
                Arc::ptr_eq(&copy.content, &orig.content),
                "contents are shared"
            );
        }
        let (Some(ca), Some(cr)) = (&t.turns()[0].tool_call_id, &t.turns()[1].tool_call_id) else {
            panic!("tool_call_ids are kept");
        };
        assert!(Arc::ptr_eq(ca, cr), "a result shares its call's copy");
        let e = Transcript::from_copies(&[&held[2], &held[0], &held[2]]).expect_err("a repeat");
        assert_eq!(e.details()["duplicate_turn_ids"], serde_json::json!(["u"]));
    }

    #[test]
    fn different_ids_of_equal_hash_are_unique() {
        use std::hash::{BuildHasher, BuildHasherDefault};
        let build = BuildHasherDefault::<crate::idmap::IdHasher>::default();
        // Two 16-byte ids hash alike when their second words make up for their first: the
        // hash of [a, b] mixes b into a function of a alone. Search for a first word whose
        // matching second word is ASCII.
        let word = |s: &[u8]| u64::from_le_bytes(s.try_into().expect("eight bytes"));
        let mixed = |a: u64| a.wrapping_mul(0x51_7c_c1_b7_27_22_0a_95).rotate_left(5);
        let first = "ids-0000:second!";
        let (a, b) = (word(&first.as_bytes()[..8]), word(&first.as_bytes()[8..]));
        let other = (1..1_000_000_u32)
            .find_map(|n| {
                let head = format!("id{n:06}");
                let tail = (b ^ mixed(a) ^ mixed(word(head.as_bytes()))).to_le_bytes();
                let tail = String::from_utf8(tail.to_vec()).ok()?;
                (!tail.contains('\0')).then(|| head + &tail)
            })
            .expect("a colliding id among a million");
        assert_ne!(first, other);
        assert_eq!(build.hash_one(first), build.hash_one(other.as_str()));
        let t = Transcript::new(vec![turn(first, 1), turn(&other, 2)]).expect("unique ids");
        assert_eq!(t.turn_ids().collect::<Vec<_>>(), [first, other.as_str()]);
        assert!(Transcript::new(vec![turn(&other, 1), turn(&other, 2)]).is_err());
    }

    #[test]
    fn ids_already_packed_are_kept_and_checked_alike() {
        let given = vec![turn("a", 1).with_tool_call_id("c"), turn("b", 2)];
        let t = Transcript::with_packed_ids(given.clone()).expect("unique ids");
        assert_eq!(t, Transcript::new(given.clone()).expect("unique ids"));
        assert!(
            Arc::ptr_eq(t.turns()[0].turn_id_arc(), given[0].turn_id_arc()),
            "ids are not copied"
        );
        let e = Transcript::with_packed_ids(vec![turn("a", 1), turn("a", 1)])
            .expect_err("a repeated id");
        assert_eq!(e.details()["duplicate_turn_ids"], serde_json::json!(["a"]));
        assert!(Transcript::with_packed_ids(vec![turn("a", u64::MAX), turn("b", 1)]).is_err());
    }

    #[test]
    fn columns_are_made_on_first_use_and_take_no_part_in_equality() {
        let a = Transcript::new(vec![turn("u", 7), turn("v", 2)]).expect("unique ids");
        let b = a.clone();
        assert!(
            a.columns.0.get().is_none(),
            "a new transcript has no columns yet"
        );
        assert_eq!(a.token_estimates(), [7, 2]);
        assert!(a.columns.0.get().is_some());
        assert!(b.columns.0.get().is_none());
        assert_eq!(a, b);
        let view = a
            .derive([DerivedTurn::Kept(1, a.turns()[1].clone())])
            .expect("valid");
        assert!(view.columns.0.get().is_none(), "nor has a derived one");
        assert_eq!(view.turn_ids().collect::<Vec<_>>(), ["v"]);
    }

    /// One decision of [`Transcript::derive_in_place`], as a test draws it: keep, replace the
    /// content (with a large estimate when `big`), a new turn (its id one of a few, some the
    /// source's own; with a call when `call`), drop.
    #[derive(Debug, Clone)]
    enum Drawn {
        Keep,
        Replace { big: bool },
        New { id: u8, call: bool },
        Drop,
    }

    fn drawn() -> impl proptest::strategy::Strategy<Value = Drawn> {
        use proptest::prelude::*;
        prop_oneof![
            4 => Just(Drawn::Keep),
            2 => any::<bool>().prop_map(|big| Drawn::Replace { big }),
            1 => (0..6_u8, any::<bool>()).prop_map(|(id, call)| Drawn::New { id, call }),
            2 => Just(Drawn::Drop),
        ]
    }

    impl Drawn {
        fn in_place(&self, turn: &TranscriptTurn) -> InPlace {
            match *self {
                Self::Keep => InPlace::Keep,
                Self::Replace { big } => InPlace::Replace {
                    content: Arc::from(format!("stub of {}", turn.turn_id())),
                    token_estimate: if big { u64::MAX / 2 } else { 3 },
                    metadata: Arc::new(std::collections::BTreeMap::from([(
                        "k".to_owned(),
                        "v".to_owned(),
                    )])),
                },
                Self::New { id, call } => {
                    // Ids 0 to 2 are the source's own: a new turn under one of them clashes
                    // unless that turn is left out.
                    let new = TranscriptTurn::new(format!("t{id}"), Role::Assistant, "new", 2)
                        .expect("valid");
                    InPlace::New(if call {
                        new.with_tool_call_id("c0")
                    } else {
                        new
                    })
                }
                Self::Drop => InPlace::Drop,
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 500,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Deriving in place gives what deriving from the same decisions gives: the same
        /// turns, sum and exchanges, or the same error (a repeated id, a sum past `u64::MAX`).
        #[test]
        fn deriving_in_place_is_deriving_from_the_same_decisions(
            decisions in proptest::collection::vec(drawn(), 0..12),
        ) {
            let turns = (0..decisions.len())
                .map(|i| {
                    let (role, call) = match i % 3 {
                        0 => (Role::Assistant, Some(format!("c{}", i / 3))),
                        1 => (Role::Tool, Some(format!("c{}", i / 3))),
                        _ => (Role::User, None),
                    };
                    let turn = TranscriptTurn::new(format!("t{i}"), role, format!("x{i}"), 5)
                        .expect("valid");
                    match call {
                        Some(c) => turn.with_tool_call_id(c),
                        None => turn,
                    }
                })
                .collect();
            let t = Transcript::new(turns).expect("unique ids");
            let parts: Vec<DerivedTurn> = t
                .turns()
                .iter()
                .zip(&decisions)
                .enumerate()
                .filter_map(|(p, (turn, d))| match d.in_place(turn) {
                    InPlace::Keep => Some(DerivedTurn::Kept(p, turn.clone())),
                    InPlace::Replace { content, token_estimate, metadata } => Some(
                        DerivedTurn::Kept(
                            p,
                            turn.with_replaced_content(content, token_estimate)
                                .with_metadata(metadata),
                        ),
                    ),
                    InPlace::New(new) => Some(DerivedTurn::New(new)),
                    InPlace::Drop => None,
                })
                .collect();
            let derived = t.derive(parts);
            let mut asked = Vec::new();
            let in_place = t.clone().derive_in_place(|p, turn| {
                asked.push(p);
                decisions[p].in_place(turn)
            });
            proptest::prop_assert_eq!(asked, (0..decisions.len()).collect::<Vec<_>>());
            match (derived, in_place) {
                (Ok(a), Ok(b)) => {
                    proptest::prop_assert_eq!(a.exchange_assignment(), b.exchange_assignment());
                    proptest::prop_assert_eq!(a.exchange_count(), b.exchange_count());
                    proptest::prop_assert_eq!(a.token_estimate(), b.token_estimate());
                    proptest::prop_assert_eq!(a.canonical_json(), b.canonical_json());
                    proptest::prop_assert_eq!(a, b);
                }
                (Err(a), Err(b)) => proptest::prop_assert_eq!(a, b),
                (a, b) => proptest::prop_assert!(false, "{a:?} against {b:?}"),
            }
        }
    }

    #[test]
    fn a_view_derived_in_place_is_built_in_the_sources_list() {
        let t = Transcript::new((0..1_000).map(|i| turn(&format!("t{i}"), 1)).collect())
            .expect("unique ids");
        let list = t.turns().as_ptr() as usize;
        let view = t
            .derive_in_place(|p, _| {
                if p % 3 == 0 {
                    InPlace::Drop
                } else {
                    InPlace::Keep
                }
            })
            .expect("a valid derivation");
        assert_eq!(view.len(), 666);
        assert_eq!(view.turns().as_ptr() as usize, list, "the same list");
    }

    #[test]
    fn columns_repeat_the_turns_figures_in_new_and_derived_transcripts() {
        let t = Transcript::new(vec![
            TranscriptTurn::new("s", Role::System, "rules", 4).expect("valid"),
            turn("u", 7).with_pinned(true),
            TranscriptTurn::new("t", Role::Tool, "out", 9).expect("valid"),
            turn("v", 2),
        ])
        .expect("unique ids");
        let check = |t: &Transcript| {
            let turns = t.turns();
            let estimates: Vec<u64> = turns.iter().map(TranscriptTurn::token_estimate).collect();
            let roles: Vec<Role> = turns.iter().map(TranscriptTurn::role).collect();
            let fixed: Vec<bool> = turns
                .iter()
                .map(|x| x.role() == Role::System || x.pinned())
                .collect();
            assert_eq!(t.token_estimates(), estimates);
            for (id, turn) in t.turn_id_arcs().iter().zip(turns) {
                assert!(
                    Arc::ptr_eq(id, turn.turn_id_arc()),
                    "the column shares the turn's id"
                );
            }
            assert_eq!(t.roles(), roles);
            assert_eq!(t.system_or_pinned(), fixed);
        };
        check(&t);
        assert_eq!(t.system_or_pinned(), [true, true, false, false]);
        let derived = t
            .derive([
                DerivedTurn::Kept(1, t.turns()[1].with_replaced_content(Arc::from("x"), 1)),
                DerivedTurn::New(turn("n", 5)),
                DerivedTurn::Kept(3, t.turns()[3].clone()),
            ])
            .expect("a valid derivation");
        check(&derived);
        assert_eq!(derived.token_estimates(), [1, 5, 2]);
    }

    #[test]
    fn the_exchange_layout_is_shared_and_takes_no_part_in_equality() {
        let turns = vec![
            turn("a", 1).with_tool_call_id("c"),
            turn("u", 1),
            turn("t", 1).with_tool_call_id("c"),
        ];
        let laid_out = Transcript::new(turns.clone()).expect("unique ids");
        let fresh = Transcript::new(turns).expect("unique ids");
        let first = Arc::clone(laid_out.exchanges());
        assert!(Arc::ptr_eq(&first, laid_out.exchanges()), "computed once");
        assert_eq!(first.members(0), [0, 2]);
        assert_eq!(first.members(1), [1]);
        // One has its layout computed, the other not: still equal.
        assert_eq!(laid_out, fresh);
        assert_eq!(laid_out.exchanges(), fresh.exchanges());
    }

    #[test]
    fn duplicate_ids_are_listed_sorted_and_counted_per_repeat() {
        let e = Transcript::new(vec![
            turn("b", 1),
            turn("a", 1),
            turn("b", 1),
            turn("a", 1),
            turn("b", 1),
        ])
        .expect_err("duplicates");
        assert_eq!(
            e.details()["duplicate_turn_ids"],
            serde_json::json!(["a", "b"])
        );
        assert!(
            e.message().contains("3 are repeated (first: 'b')"),
            "{}",
            e.message()
        );
    }

    #[test]
    fn totals_overflowing_u64_are_refused() {
        let e = Transcript::new(vec![turn("a", u64::MAX), turn("b", 1)]).expect_err("overflow");
        assert_eq!(e.code(), ErrorCode::Validation);
    }

    /// Turns enough for the ids to be hashed on a second thread: calls with their results,
    /// a result whose call came long before, and plain turns.
    fn long_turns() -> Vec<TranscriptTurn> {
        (0..PARALLEL_CHECK_TURNS + 7)
            .map(|i| {
                let t = turn(&format!("t{i}"), 1);
                match i % 3 {
                    0 => t.with_tool_call_id(format!("c{}", i / 3)),
                    1 => t.with_tool_call_id(format!("c{}", (i / 3) % 50)),
                    _ => t,
                }
            })
            .collect()
    }

    #[test]
    fn a_long_transcript_is_checked_as_a_short_one_is() {
        let turns = long_turns();
        let t = Transcript::new(turns.clone()).expect("unique ids");
        let (of, count) = partition(&turns);
        assert_eq!((t.exchange_of.clone(), t.exchanges), (of, count));
        assert_eq!(t.token_estimate(), turns.len() as u64);
        // A repeat far apart is named as in a short transcript; so is a sum beyond u64.
        let mut repeated = turns.clone();
        repeated.push(turn("t5", 1));
        let e = Transcript::new(repeated).expect_err("a repeat");
        assert_eq!(e.details()["duplicate_turn_ids"], serde_json::json!(["t5"]));
        assert!(
            e.message().contains("1 are repeated (first: 't5')"),
            "{}",
            e.message()
        );
        let mut heavy = turns;
        heavy.push(turn("last", u64::MAX));
        let e = Transcript::new(heavy).expect_err("overflow");
        assert!(e.message().contains("sum beyond"), "{}", e.message());
        assert_eq!(e.details()["turn_count"], PARALLEL_CHECK_TURNS + 8);
    }

    #[test]
    fn the_ids_hashed_beside_the_layout_tell_what_they_tell_alone() {
        // Whatever the machine's cores: both ways, called directly.
        let turns = long_turns();
        let mut repeated = turns.clone();
        repeated.push(turn("t9", 1));
        for (turns, unique) in [(&turns, true), (&repeated, false)] {
            for beside in [false, true] {
                let layout = Unique::checked(turns, beside);
                assert_eq!(layout.is_some(), unique, "beside: {beside}");
                if let Some(layout) = layout {
                    assert_eq!((layout.exchange_of, layout.exchanges), partition(turns));
                    assert_eq!(layout.total, Some(turns.len() as u64));
                }
            }
        }
    }
}
