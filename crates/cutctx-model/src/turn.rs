//! Transcripts, their turns, and the budget a plan is made against.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use cutctx_json::{Style, TurnFields, Writer, write_turn};
use serde::{Deserialize, Serialize};

use crate::{CompactionError, Exchanges, ID_SAMPLE_LIMIT, details, py_repr_str};

/// A turn's metadata: string to string, opaque to every policy, never in plan or report bytes.
///
/// Shared behind an `Arc`, so a view that keeps a turn does not copy its metadata.
pub type Metadata = Arc<BTreeMap<String, String>>;

fn empty_metadata() -> Metadata {
    static EMPTY: OnceLock<Metadata> = OnceLock::new();
    Arc::clone(EMPTY.get_or_init(|| Arc::new(BTreeMap::new())))
}

/// Who spoke a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions. Every system turn is untouchable.
    System,
    /// The user.
    User,
    /// The model, possibly issuing tool calls.
    Assistant,
    /// A tool's result. Only tool turns are ever masked.
    Tool,
}

impl Role {
    /// The role's wire value: `"system"`, `"user"`, `"assistant"` or `"tool"`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
        }
    }
}

impl<'de> Deserialize<'de> for Role {
    /// Only the four strings: a derived enum would also take `{"user": null}`.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = crate::wire::WireStr::deserialize(d)?.0;
        match s.as_str() {
            "system" => Ok(Self::System),
            "user" => Ok(Self::User),
            "assistant" => Ok(Self::Assistant),
            "tool" => Ok(Self::Tool),
            _ => Err(serde::de::Error::custom(
                "role must be one of \"system\", \"user\", \"assistant\", \"tool\"",
            )),
        }
    }
}

/// One turn of a transcript. Immutable once built; equality is by value.
///
/// `content` and `metadata` are reference-counted, so cloning a turn (as a view that keeps it
/// does) shares them rather than copying what may be megabytes of tool output.
///
/// ```
/// use cutctx_model::{Role, TranscriptTurn};
/// let t = TranscriptTurn::new("t1", Role::Tool, "result text", 3)?
///     .with_tool_call_id("c1")
///     .with_pinned(false);
/// assert_eq!(t.tool_call_id(), Some("c1"));
/// assert!(TranscriptTurn::new("", Role::User, "x", 1).is_err());
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "crate::wire::ObjectOnly<TurnRecord>")]
pub struct TranscriptTurn {
    // Fields in code point order: the canonical writer relies on it.
    content: Arc<str>,
    metadata: Metadata,
    pinned: bool,
    role: Role,
    token_estimate: u64,
    tool_call_id: Option<Arc<str>>,
    turn_id: Arc<str>,
}

impl TranscriptTurn {
    /// A turn with no `tool_call_id`, unpinned, with empty metadata.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` when `turn_id` is empty (details: `role`).
    pub fn new(
        turn_id: impl Into<Arc<str>>,
        role: Role,
        content: impl Into<Arc<str>>,
        token_estimate: u64,
    ) -> Result<Self, CompactionError> {
        let turn_id = turn_id.into();
        if turn_id.is_empty() {
            return Err(CompactionError::validation(
                "A turn needs a non-empty turn_id: plans name turns by id, and two empty ids \
                 could not be told apart.",
                details! { "role" => role.as_str() },
            ));
        }
        Ok(Self {
            content: content.into(),
            metadata: empty_metadata(),
            pinned: false,
            role,
            token_estimate,
            tool_call_id: None,
            turn_id,
        })
    }

    /// The same turn with this exchange correlation id.
    #[must_use]
    pub fn with_tool_call_id(mut self, tool_call_id: impl Into<Arc<str>>) -> Self {
        self.tool_call_id = Some(tool_call_id.into());
        self
    }

    /// The same turn with `tool_call_id` set or cleared.
    #[must_use]
    pub fn with_tool_call_id_opt(mut self, tool_call_id: Option<Arc<str>>) -> Self {
        self.tool_call_id = tool_call_id;
        self
    }

    /// The same turn, pinned or not.
    #[must_use]
    pub fn with_pinned(mut self, pinned: bool) -> Self {
        self.pinned = pinned;
        self
    }

    /// The same turn with this metadata.
    #[must_use]
    pub fn with_metadata(mut self, metadata: impl Into<Metadata>) -> Self {
        self.metadata = metadata.into();
        self
    }

    /// The same turn with its content and estimate replaced (used for masks and stand-ins).
    #[must_use]
    pub fn with_content(mut self, content: Arc<str>, token_estimate: u64) -> Self {
        self.content = content;
        self.token_estimate = token_estimate;
        self
    }

    /// A copy of this turn with other content and estimate, built without touching this
    /// turn's content (whose reference count sits next to the text, far from the turn).
    #[must_use]
    pub fn with_replaced_content(&self, content: Arc<str>, token_estimate: u64) -> Self {
        Self {
            content,
            metadata: Arc::clone(&self.metadata),
            pinned: self.pinned,
            role: self.role,
            token_estimate,
            tool_call_id: self.tool_call_id.clone(),
            turn_id: Arc::clone(&self.turn_id),
        }
    }

    /// The turn's id, unique within its transcript.
    #[must_use]
    pub fn turn_id(&self) -> &str {
        &self.turn_id
    }

    /// The id as a shared string, for cheap copies into plans and views.
    #[must_use]
    pub fn turn_id_arc(&self) -> &Arc<str> {
        &self.turn_id
    }

    /// Who spoke.
    #[must_use]
    pub const fn role(&self) -> Role {
        self.role
    }

    /// The content. Opaque: only masking reads it, to hash it.
    #[must_use]
    pub fn content(&self) -> &str {
        &self.content
    }

    /// The content as a shared string.
    #[must_use]
    pub fn content_arc(&self) -> &Arc<str> {
        &self.content
    }

    /// The caller's token estimate. Never re-estimated.
    #[must_use]
    pub const fn token_estimate(&self) -> u64 {
        self.token_estimate
    }

    /// The exchange correlation id: every turn sharing it belongs to one exchange.
    #[must_use]
    pub fn tool_call_id(&self) -> Option<&str> {
        self.tool_call_id.as_deref()
    }

    /// Whether the turn is pinned (untouchable).
    #[must_use]
    pub const fn pinned(&self) -> bool {
        self.pinned
    }

    /// The turn's fields as `cutctx_json` writes its seven-key object.
    ///
    /// ```
    /// use cutctx_json::{Style, Writer, write_turn};
    /// use cutctx_model::{Role, TranscriptTurn};
    /// let turn = TranscriptTurn::new("u1", Role::User, "hi", 1)?;
    /// let mut out = String::new();
    /// write_turn(&mut Writer::new(&mut out, Style::CANONICAL), turn.json_fields());
    /// assert_eq!(out, cutctx_model::canonical::canonical_json(&turn)?);
    /// # Ok::<(), cutctx_model::CompactionError>(())
    /// ```
    #[must_use]
    pub fn json_fields(&self) -> TurnFields<'_, impl Iterator<Item = (&str, &str)> + Clone> {
        TurnFields {
            content: &self.content,
            metadata: self.metadata.iter().map(|(k, v)| (k.as_str(), v.as_str())),
            pinned: self.pinned,
            role: self.role.as_str(),
            token_estimate: self.token_estimate,
            tool_call_id: self.tool_call_id.as_deref(),
            turn_id: &self.turn_id,
        }
    }

    /// The metadata.
    #[must_use]
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }
}

/// The wire form of a turn, as a request document spells it.
///
/// Missing keys take the defaults of the CLI contract; unknown keys are refused. Integers are
/// read wide so that a negative or oversized estimate gets a precise error rather than a
/// generic type error.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnRecord {
    /// Must be non-empty.
    pub turn_id: String,
    /// One of the four roles.
    pub role: Role,
    /// Defaults to `""`.
    #[serde(default)]
    pub content: String,
    /// Must be an integer `>= 0`.
    pub token_estimate: crate::wire::WireInt,
    /// Defaults to `null`.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// Defaults to `false`.
    #[serde(default)]
    pub pinned: bool,
    /// Defaults to `{}`. A repeated key is refused.
    #[serde(default, deserialize_with = "crate::wire::unique_string_map")]
    pub metadata: BTreeMap<String, String>,
}

impl TryFrom<crate::wire::ObjectOnly<TurnRecord>> for TranscriptTurn {
    type Error = CompactionError;

    fn try_from(r: crate::wire::ObjectOnly<TurnRecord>) -> Result<Self, Self::Error> {
        Self::try_from(r.0)
    }
}

impl TryFrom<TurnRecord> for TranscriptTurn {
    type Error = CompactionError;

    fn try_from(r: TurnRecord) -> Result<Self, Self::Error> {
        if r.turn_id.is_empty() {
            return Self::new("", r.role, "", 0);
        }
        let estimate = u64::try_from(r.token_estimate.0).map_err(|_| {
            let message = if r.token_estimate.0 < 0 {
                format!(
                    "token_estimate must not be negative; turn {} declares {}. A negative \
                     estimate would let a total fall below its untouchable floor.",
                    py_repr_str(&r.turn_id),
                    r.token_estimate.0
                )
            } else {
                format!(
                    "token_estimate of turn {} is {}, beyond the largest supported estimate {}.",
                    py_repr_str(&r.turn_id),
                    r.token_estimate.0,
                    u64::MAX
                )
            };
            CompactionError::validation(
                message,
                details! { "turn_id" => r.turn_id.as_str(), "token_estimate" => r.token_estimate.0.to_string().parse::<serde_json::Number>().ok() },
            )
        })?;
        let metadata = if r.metadata.is_empty() {
            empty_metadata()
        } else {
            Arc::new(r.metadata)
        };
        Ok(Self::new(r.turn_id, r.role, r.content, estimate)?
            .with_tool_call_id_opt(r.tool_call_id.map(Arc::from))
            .with_pinned(r.pinned)
            .with_metadata(metadata))
    }
}

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
    fn of(turns: &[TranscriptTurn]) -> Self {
        Self {
            ids: turns.iter().map(|t| Arc::clone(&t.turn_id)).collect(),
            estimates: turns.iter().map(|t| t.token_estimate).collect(),
            roles: turns.iter().map(|t| t.role).collect(),
            fixed: turns
                .iter()
                .map(|t| t.role == Role::System || t.pinned)
                .collect(),
        }
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

impl Transcript {
    /// A transcript of these turns.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` when ids repeat (details: `duplicate_turn_ids`, sorted, at most 10),
    /// or when the estimates sum beyond `u64::MAX` (details: `turn_count`).
    pub fn new(turns: Vec<TranscriptTurn>) -> Result<Self, CompactionError> {
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
                .find(|id| !seen.insert(*id))
                .unwrap_or_default();
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
        let total = turns
            .iter()
            .try_fold(0_u64, |acc, t| acc.checked_add(t.token_estimate))
            .ok_or_else(|| {
                CompactionError::validation(
                    format!(
                        "The transcript's token estimates sum beyond {}; no budget could be \
                         compared with them.",
                        u64::MAX
                    ),
                    details! { "turn_count" => turns.len() },
                )
            })?;
        let turns = pack_ids(turns);
        let (exchange_of, exchanges) = partition(&turns);
        Ok(Self {
            turns,
            total,
            exchange_of,
            exchanges,
            layout: Layout::default(),
            columns: LazyColumns::default(),
        })
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
        let size: usize = self
            .turns
            .iter()
            .map(|t| 128 + t.turn_id.len() + t.content.len())
            .sum();
        let mut out = String::with_capacity(size + 2);
        let mut w = Writer::new(&mut out, Style::CANONICAL);
        w.raw("[");
        for (i, t) in self.turns.iter().enumerate() {
            if i > 0 {
                w.item_separator();
            }
            write_turn(&mut w, t.json_fields());
        }
        w.raw("]");
        out
    }

    /// The turns, consuming the transcript.
    #[must_use]
    pub fn into_turns(self) -> Vec<TranscriptTurn> {
        self.turns
    }
}

/// The exchange of each turn, numbered by first appearance, and the number of exchanges.
///
/// The `tool_call_id` key space is separate from turn ids, so a `tool_call_id` equal to some
/// turn's id merges nothing.
fn partition(turns: &[TranscriptTurn]) -> (Vec<usize>, usize) {
    let mut by_call: crate::idmap::IdMap<'_, usize> = crate::idmap::with_capacity(turns.len() / 2);
    let mut count = 0_usize;
    let mut of = Vec::with_capacity(turns.len());
    // Results usually follow their call: remember the last call seen and skip the lookup.
    let mut last: Option<(&Arc<str>, usize)> = None;
    for turn in turns {
        let exchange = match &turn.tool_call_id {
            Some(call) => match last {
                Some((prev, e)) if Arc::ptr_eq(prev, call) || prev == call => e,
                _ => {
                    let e = *by_call.entry(call).or_insert_with(|| {
                        count += 1;
                        count - 1
                    });
                    last = Some((call, e));
                    e
                }
            },
            None => {
                count += 1;
                count - 1
            }
        };
        of.push(exchange);
    }
    (of, count)
}

/// Whether two `tool_call_id`s are the same, by pointer first.
fn same_call(a: &Option<Arc<str>>, b: &Option<Arc<str>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
        _ => false,
    }
}

/// The exchange partition of a derived transcript, built from its source's while the turns
/// are taken in.
///
/// Kept turns with their source's `tool_call_id` stay in their source exchange (which only
/// loses members), renumbered by first appearance; new turns without one are exchanges of
/// their own. Anything else (a new turn with a `tool_call_id`, a kept turn whose
/// `tool_call_id` changed) breaks the derivation, and the caller partitions afresh.
struct DerivedPartition {
    /// Per source exchange, its number in the derived transcript; `usize::MAX` until seen.
    renumber: Vec<usize>,
    of: Vec<usize>,
    count: usize,
    broken: bool,
}

impl DerivedPartition {
    fn new(source_exchanges: usize, turns: usize) -> Self {
        Self {
            renumber: vec![usize::MAX; source_exchanges],
            of: Vec::with_capacity(turns),
            count: 0,
            broken: false,
        }
    }

    /// A kept turn from source exchange `exchange`, its `tool_call_id` unchanged or not.
    fn kept(&mut self, exchange: usize, unchanged: bool) {
        if self.broken || !unchanged {
            self.broken = true;
            return;
        }
        let slot = &mut self.renumber[exchange];
        if *slot == usize::MAX {
            *slot = self.count;
            self.count += 1;
        }
        self.of.push(*slot);
    }

    /// A new turn, with no `tool_call_id` or with one.
    fn new_turn(&mut self, without_call: bool) {
        if self.broken || !without_call {
            self.broken = true;
            return;
        }
        self.of.push(self.count);
        self.count += 1;
    }

    /// The assignment and the number of exchanges, unless the derivation broke.
    fn finish(self) -> Option<(Vec<usize>, usize)> {
        (!self.broken).then_some((self.of, self.count))
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
    let ids: Vec<Arc<str>> = turns.iter().map(|t| Arc::from(&*t.turn_id)).collect();
    let mut last: Option<Arc<str>> = None;
    let calls: Vec<Option<Arc<str>>> = turns
        .iter()
        .map(|t| {
            let call = t.tool_call_id.as_ref()?;
            // A result right after its call shares the call's string.
            let packed = match &last {
                Some(prev) if **prev == **call => Arc::clone(prev),
                _ => Arc::from(&**call),
            };
            last = Some(Arc::clone(&packed));
            Some(packed)
        })
        .collect();
    for ((turn, id), call) in turns.iter_mut().zip(ids).zip(calls) {
        turn.turn_id = id;
        turn.tool_call_id = call;
    }
    turns
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

/// How many tokens a view may hold, and how many recent turns are untouchable.
///
/// ```
/// use cutctx_model::CompactionBudget;
/// let b = CompactionBudget::new(1200);
/// assert_eq!(b.protected_recent_turns, 4);
/// let b = CompactionBudget::new(100).with_protected_recent_turns(1);
/// assert_eq!((b.max_tokens, b.protected_recent_turns), (100, 1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct CompactionBudget {
    /// The most tokens the view may be estimated at. Zero is legal.
    pub max_tokens: u64,
    /// How many of the most recent turns no policy may touch. The default is 4.
    pub protected_recent_turns: u64,
}

impl CompactionBudget {
    /// The reference's default protected tail.
    pub const DEFAULT_PROTECTED_RECENT_TURNS: u64 = 4;

    /// A budget with the default protected tail of 4 turns.
    #[must_use]
    pub const fn new(max_tokens: u64) -> Self {
        Self {
            max_tokens,
            protected_recent_turns: Self::DEFAULT_PROTECTED_RECENT_TURNS,
        }
    }

    /// The same budget with another protected tail.
    #[must_use]
    pub const fn with_protected_recent_turns(mut self, n: u64) -> Self {
        self.protected_recent_turns = n;
        self
    }

    /// A budget from signed figures, validated as the reference validates them.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` when either figure is negative (details: the figure by name), or
    /// beyond `u64::MAX`.
    pub fn from_signed(
        max_tokens: i128,
        protected_recent_turns: i128,
    ) -> Result<Self, CompactionError> {
        let max = u64::try_from(max_tokens).map_err(|_| {
            CompactionError::validation(
                if max_tokens < 0 {
                    format!(
                        "max_tokens must not be negative; got {max_tokens}. Zero is the smallest \
                         budget, and already means that only an empty view fits."
                    )
                } else {
                    format!("max_tokens is {max_tokens}, beyond the largest supported {}.", u64::MAX)
                },
                details! { "max_tokens" => max_tokens.to_string().parse::<serde_json::Number>().ok() },
            )
        })?;
        let protected = u64::try_from(protected_recent_turns).map_err(|_| {
            CompactionError::validation(
                if protected_recent_turns < 0 {
                    format!("protected_recent_turns must not be negative; got {protected_recent_turns}.")
                } else {
                    format!(
                        "protected_recent_turns is {protected_recent_turns}, beyond the largest supported {}.",
                        u64::MAX
                    )
                },
                details! { "protected_recent_turns" => protected_recent_turns.to_string().parse::<serde_json::Number>().ok() },
            )
        })?;
        Ok(Self {
            max_tokens: max,
            protected_recent_turns: protected,
        })
    }
}

impl<'de> Deserialize<'de> for CompactionBudget {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Wire {
            max_tokens: crate::wire::WireInt,
            #[serde(default = "default_protected")]
            protected_recent_turns: crate::wire::WireInt,
        }
        fn default_protected() -> crate::wire::WireInt {
            crate::wire::WireInt(i128::from(CompactionBudget::DEFAULT_PROTECTED_RECENT_TURNS))
        }
        let w = crate::wire::ObjectOnly::<Wire>::deserialize(d)?.0;
        Self::from_signed(w.max_tokens.0, w.protected_recent_turns.0)
            .map_err(serde::de::Error::custom)
    }
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

    proptest::proptest! {
        /// A derived transcript's partition, derived from its source's or made afresh when
        /// the derivation breaks, is the one a transcript of the same turns would have.
        #[test]
        fn a_derived_partition_equals_a_fresh_one(
            calls in proptest::collection::vec(proptest::option::of(0_u8..4), 1..14),
            plan in proptest::collection::vec(0_u8..6, 14),
        ) {
            let turns: Vec<TranscriptTurn> = calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let t = turn(&format!("t{i}"), 1);
                    match c {
                        Some(c) => t.with_tool_call_id(format!("c{c}")),
                        None => t,
                    }
                })
                .collect();
            let source = Transcript::new(turns).expect("unique ids");
            let mut parts = Vec::new();
            for (p, (t, action)) in source.turns().iter().zip(&plan).enumerate() {
                match action {
                    // Dropped.
                    0 => {}
                    // Kept with another tool_call_id: the derivation breaks.
                    1 => parts.push(DerivedTurn::Kept(p, t.clone().with_tool_call_id("other"))),
                    // A new turn before this one, with a tool_call_id or without.
                    2 => {
                        parts.push(DerivedTurn::New(turn(&format!("n{p}"), 1)));
                        parts.push(DerivedTurn::Kept(p, t.clone()));
                    }
                    3 => {
                        parts.push(DerivedTurn::New(
                            turn(&format!("n{p}"), 1).with_tool_call_id("c0"),
                        ));
                        parts.push(DerivedTurn::Kept(p, t.clone()));
                    }
                    _ => parts.push(DerivedTurn::Kept(p, t.clone())),
                }
            }
            let derived = source.derive(parts).expect("valid derivation");
            let fresh = Transcript::new(derived.turns().to_vec()).expect("unique ids");
            proptest::prop_assert_eq!(derived.exchange_assignment(), fresh.exchange_assignment());
            proptest::prop_assert_eq!(derived.exchange_count(), fresh.exchange_count());
        }
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
    fn empty_turn_id_is_refused_with_role_in_details() {
        let e = TranscriptTurn::new("", Role::Tool, "x", 1).expect_err("empty id");
        assert_eq!(e.code(), ErrorCode::Validation);
        assert_eq!(e.details()["role"], "tool");
    }

    #[test]
    fn negative_estimate_from_the_wire_is_refused_with_id_and_figure() {
        let r: TurnRecord =
            serde_json::from_str(r#"{"turn_id":"a","role":"user","token_estimate":-3}"#)
                .expect("wire parses");
        let e = TranscriptTurn::try_from(r).expect_err("negative");
        assert_eq!(e.details()["turn_id"], "a");
        assert_eq!(e.details()["token_estimate"], -3);
        assert!(e.message().contains("'a'"));
    }

    #[test]
    fn wire_defaults_and_unknown_keys() {
        let t: TranscriptTurn =
            serde_json::from_str(r#"{"turn_id":"a","role":"tool","token_estimate":2}"#)
                .expect("defaults");
        assert_eq!(
            (t.content(), t.tool_call_id(), t.pinned()),
            ("", None, false)
        );
        assert!(t.metadata().is_empty());
        assert!(
            serde_json::from_str::<TranscriptTurn>(
                r#"{"turn_id":"a","role":"tool","token_estimate":2,"pin":true}"#
            )
            .is_err()
        );
        assert!(
            serde_json::from_str::<TranscriptTurn>(
                r#"{"turn_id":"a","role":"tool","token_estimate":2.0}"#
            )
            .is_err()
        );
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

    #[test]
    fn budget_from_signed_refuses_negatives_by_name() {
        let e = CompactionBudget::from_signed(-1, 0).expect_err("negative max");
        assert_eq!(e.details()["max_tokens"], -1);
        let e = CompactionBudget::from_signed(0, -2).expect_err("negative protected");
        assert_eq!(e.details()["protected_recent_turns"], -2);
        assert_eq!(
            CompactionBudget::from_signed(0, 0)
                .expect("zero is legal")
                .max_tokens,
            0
        );
    }

    #[test]
    fn budget_wire_defaults_protected_to_four() {
        let b: CompactionBudget = serde_json::from_str(r#"{"max_tokens":7}"#).expect("budget");
        assert_eq!(b, CompactionBudget::new(7));
    }

    #[test]
    fn turn_serializes_all_seven_keys_in_order() {
        let t = turn("a", 3);
        let s = crate::canonical::canonical_json(&t).expect("turn");
        assert_eq!(
            s,
            r#"{"content":"content of a","metadata":{},"pinned":false,"role":"user","token_estimate":3,"tool_call_id":null,"turn_id":"a"}"#
        );
        let one = Transcript::new(vec![t]).expect("valid");
        assert_eq!(one.canonical_json(), format!("[{s}]"));
    }

    #[test]
    fn clones_share_content() {
        let t = turn("a", 3);
        let c = t.clone();
        assert!(Arc::ptr_eq(t.content_arc(), c.content_arc()));
    }
}
