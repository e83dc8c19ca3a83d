//! What the three formats share: where each turn came from, and how a compacted view is read
//! back into kept, masked and summary items before a format re-emits them.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::{Arc, OnceLock};

use cutctx_executor::META_KIND;
use cutctx_json::Digits;
use cutctx_model::{Transcript, TranscriptTurn, details};
use serde_json::{Map, Value};

use crate::FormatError;
use crate::hand_read::Written;

/// The text of the user message inserted when compaction would otherwise leave a request
/// without a message, or (Anthropic) starting with an assistant message.
pub const LEAD_IN_TEXT: &str = "[Earlier messages of this conversation were compacted by cutctx.]";

/// Where one turn of a [`ProviderTranscript`](crate::ProviderTranscript) came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TurnSource {
    /// The whole message (or Responses item) at this index of the list.
    Message(usize),
    /// Anthropic: one `tool_result` block of the user message at `message`.
    Block {
        /// The message's index.
        message: usize,
        /// The block's index in the message's content.
        block: usize,
    },
    /// Anthropic: the blocks other than `tool_result` of a user message holding tool results.
    Blocks {
        /// The message's index.
        message: usize,
        /// The blocks' indices in the message's content.
        blocks: Vec<usize>,
    },
    /// Anthropic's top-level `system`, or the Responses request's `instructions`.
    System,
    /// The Responses request's `input` given as one string (a user message).
    InputText,
}

impl TurnSource {
    /// The index of the message or item, when the turn comes from the list.
    #[must_use]
    pub const fn message(&self) -> Option<usize> {
        match self {
            Self::Message(i) | Self::Block { message: i, .. } | Self::Blocks { message: i, .. } => {
                Some(*i)
            }
            Self::System | Self::InputText => None,
        }
    }
}

/// Turns under construction, with their sources.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Built {
    pub(crate) turns: Vec<TranscriptTurn>,
    pub(crate) sources: Vec<TurnSource>,
    /// The turns whose content is left in the request, by increasing position.
    pub(crate) deferred: Vec<LeftContent>,
}

/// A turn whose content is left in the request (its transcript turn shows it empty): the
/// content is the string written at `span`, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeftContent {
    /// The turn's position.
    pub(crate) position: usize,
    /// Where the string lies in the request, between its quotes.
    pub(crate) span: Range<usize>,
    /// Whether it is written as the canonical writer would write it: its digest is then that
    /// of the bytes at `span` between quotes.
    pub(crate) canonical: bool,
    /// The field of its message (or block) whose whole value the string is, if it is one.
    pub(crate) field: Option<&'static str>,
}

impl Built {
    /// Room for `n` turns.
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self {
            turns: Vec::with_capacity(n),
            sources: Vec::with_capacity(n),
            deferred: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, turn: TranscriptTurn, source: TurnSource) {
        self.turns.push(turn);
        self.sources.push(source);
    }

    /// Pins the turn built last: one that compaction must carry as it came.
    pub(crate) fn pin_last(&mut self) {
        if let Some(turn) = self.turns.last_mut() {
            *turn = turn.clone().with_pinned(true);
        }
    }

    /// Puts `turn` before every turn built so far: each content left in the request keeps
    /// its place, its position counted one further.
    pub(crate) fn insert_first(&mut self, turn: TranscriptTurn, source: TurnSource) {
        for d in &mut self.deferred {
            d.position += 1;
        }
        self.turns.insert(0, turn);
        self.sources.insert(0, source);
    }

    /// [`Built::push`], noting where the turn's content lies when it is left in the request.
    pub(crate) fn push_deferring(
        &mut self,
        turn: TranscriptTurn,
        source: TurnSource,
        written: Option<Written<'_>>,
    ) {
        if let Some(w) = written {
            debug_assert!(
                turn.content().is_empty(),
                "a deferred content is left empty"
            );
            self.deferred.push(LeftContent {
                position: self.turns.len(),
                span: w.span(),
                canonical: w.is_canonical(),
                field: w.field(),
            });
        }
        self.push(turn, source);
    }
}

/// The turn ids `m{index}` of a list's messages, made one after another before any turn's
/// content: ids that sit together are read faster by everything that looks turns up by id
/// (see `Transcript::with_packed_ids`), and a call's id is shared by its results' keys.
#[derive(Debug, Default)]
pub(crate) struct MessageIds {
    ids: Vec<Arc<str>>,
    /// How many more ids are made at once when one past those made is asked for (0: each is
    /// made alone).
    chunk: usize,
}

impl MessageIds {
    /// How many ids [`MessageIds::growing`] makes at a time: runs of ids long enough that
    /// passes over them read packed memory, few beside any list worth reading on two threads.
    const CHUNK: usize = 4096;

    /// The ids of `n` messages.
    pub(crate) fn ahead(n: usize) -> Self {
        Self {
            ids: (0..n).map(|i| message_id(i, None)).collect(),
            chunk: 0,
        }
    }

    /// The ids of a list whose length is not known yet, made [`MessageIds::CHUNK`] at a time
    /// as they are asked for (in order).
    pub(crate) fn growing() -> Self {
        Self {
            ids: Vec::new(),
            chunk: Self::CHUNK,
        }
    }

    /// The id of message `i`: the one made ahead, else a new one.
    pub(crate) fn get(&mut self, i: usize) -> Arc<str> {
        if i >= self.ids.len() && self.chunk > 0 {
            let end = i.saturating_add(self.chunk);
            self.ids
                .extend((self.ids.len()..end).map(|j| message_id(j, None)));
        }
        self.ids
            .get(i)
            .map_or_else(|| message_id(i, None), Arc::clone)
    }
}

/// The turn id of message `i` (`m{i}`), or of its block `block` (`m{i}.{block}`): written
/// digit by digit into one allocation, as a large request makes one per turn.
pub(crate) fn message_id(i: usize, block: Option<usize>) -> Arc<str> {
    // "m", two numbers of at most 20 digits, and the dot.
    let mut buf = [0_u8; 42];
    let mut end = 0;
    let mut put = |part: &[u8]| {
        buf[end..end + part.len()].copy_from_slice(part);
        end += part.len();
    };
    let mut digits = Digits::new();
    put(b"m");
    put(digits.of(i as u64).as_bytes());
    if let Some(j) = block {
        put(b".");
        put(digits.of(j as u64).as_bytes());
    }
    // ASCII throughout; the formatted spelling is the same id, should it ever not be.
    std::str::from_utf8(&buf[..end]).map_or_else(
        |_| match block {
            Some(j) => Arc::from(format!("m{i}.{j}")),
            None => Arc::from(format!("m{i}")),
        },
        Arc::from,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_back_as_their_numbers_or_not_at_all() {
        assert_eq!(id_key("system"), Some((0, 0, 0)));
        assert_eq!(id_key("m0"), Some((1, 0, 0)));
        assert_eq!(id_key("m12.3"), Some((1, 12, 4)));
        assert_eq!(id_key("m4294967295"), Some((1, u32::MAX, 0)));
        for id in [
            "m",
            "m+1",
            "m-1",
            "m1.",
            "m.1",
            "m4294967296",
            "m1.4294967295",
            "x1",
            "m1a",
        ] {
            assert_eq!(id_key(id), None, "{id}");
        }
    }

    /// A view read where each turn follows the one before never builds the index; the first
    /// lookup that misses builds it, whether the ids are the formats' own or any others.
    #[test]
    fn positions_are_indexed_only_when_a_lookup_needs_them() {
        use cutctx_model::{Role, TranscriptTurn};
        for ids in [["system", "m0", "m1.0", "m1.1"], ["b", "a", "m9", "system"]] {
            let turns = ids.map(|id| TranscriptTurn::new(id, Role::User, "x", 1).expect("an id"));
            let transcript = Transcript::new(turns.to_vec()).expect("unique ids");
            let positions = Positions::new();
            for (p, turn) in transcript.turns().iter().enumerate() {
                assert_eq!(
                    positions.get_near(&transcript, turn.turn_id_arc(), p),
                    Some(p)
                );
            }
            assert!(!positions.indexed(), "{ids:?}");
            let last = Arc::clone(transcript.turns()[3].turn_id_arc());
            assert_eq!(
                positions.get_near(&transcript, &last, 0),
                Some(3),
                "{ids:?}"
            );
            assert!(positions.indexed(), "{ids:?}");
            assert_eq!(positions.get(&transcript, ids[1]), Some(1), "{ids:?}");
            assert_eq!(positions.get(&transcript, "m7"), None, "{ids:?}");
        }
    }

    #[test]
    fn message_ids_are_spelled_as_formatting_spells_them() {
        for i in [0, 1, 9, 10, 99, 100, 12_345, usize::MAX] {
            assert_eq!(&*message_id(i, None), format!("m{i}"));
            for j in [0, 7, 10, usize::MAX] {
                assert_eq!(&*message_id(i, Some(j)), format!("m{i}.{j}"));
            }
        }
    }
}

/// One turn of a view, read back against the transcript it was derived from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ViewItem {
    /// The turn at `position` of the source transcript; `stub` when it was masked.
    Source {
        position: usize,
        stub: Option<Arc<str>>,
    },
    /// A summary turn, with its text.
    Summary { text: Arc<str> },
}

/// Reads `view` against the source transcript whose turn ids map to positions in `positions`,
/// one turn at a time (a renderer takes each as it comes: the view is not held twice).
///
/// A turn whose metadata says `cutctx.kind = "summary"` is a summary; a turn with
/// `cutctx.kind = "masked"` is its source turn with the stub; any other turn must be a source
/// turn, in source order.
pub(crate) fn view_items<'a>(
    positions: &'a Positions,
    source: &'a Transcript,
    view: &'a Transcript,
) -> impl ExactSizeIterator<Item = Result<ViewItem, FormatError>> + 'a {
    let mut next = 0_usize;
    view.turns().iter().map(move |turn| {
        let kind = turn.metadata().get(META_KIND).map(String::as_str);
        let found = positions.get_near(source, turn.turn_id_arc(), next);
        if kind == Some("summary") && found.is_none() {
            return Ok(ViewItem::Summary {
                text: Arc::clone(turn.content_arc()),
            });
        }
        let Some(position) = found else {
            return Err(FormatError::view(
                format!(
                    "The view holds turn {:?}, which this transcript does not have; render a \
                     view derived from this transcript.",
                    turn.turn_id()
                ),
                details! { "turn_id" => turn.turn_id() },
            ));
        };
        if position < next {
            return Err(FormatError::view(
                format!(
                    "The view holds turn {:?} out of order or twice.",
                    turn.turn_id()
                ),
                details! { "turn_id" => turn.turn_id(), "position" => position },
            ));
        }
        next = position + 1;
        let stub = (kind == Some("masked")).then(|| Arc::clone(turn.content_arc()));
        Ok(ViewItem::Source { position, stub })
    })
}

/// [`view_items`], as a list.
#[cfg(test)]
pub(crate) fn walk(
    positions: &Positions,
    source: &Transcript,
    view: &Transcript,
) -> Result<Vec<ViewItem>, FormatError> {
    view_items(positions, source, view).collect()
}

/// Turn id -> position in a source transcript, indexed on the first lookup that needs it.
///
/// A view rendered from its own source finds each turn where the previous one left off
/// ([`Positions::get_near`]), so a request compacted and rendered once never builds the index,
/// and the reading of a large request does not pay for it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Positions(OnceLock<Index>);

/// The index [`Positions`] builds.
///
/// The ids the formats give (`system` or `instructions` first, then `m{i}` and `m{i}.{j}` in
/// the order of their numbers) are ordered by those numbers, so a lookup parses the id and
/// searches the numbers, then checks the id found; no string is copied or sorted. A
/// transcript whose ids are not so ordered gets a map.
#[derive(Debug, Clone)]
enum Index {
    /// Each turn's numbers, in transcript order, strictly increasing.
    Ordered(Vec<(u8, u32, u32)>),
    /// Any other ids.
    Map(BTreeMap<String, usize>),
}

impl Index {
    /// The index of `transcript`'s turns.
    fn of(transcript: &Transcript) -> Self {
        // Sized ahead: collected through an `Option`, the list would grow by doubling.
        let mut keys = Vec::with_capacity(transcript.len());
        for id in transcript.turn_ids() {
            let Some(key) = id_key(id) else {
                keys = Vec::new();
                break;
            };
            keys.push(key);
        }
        let keys = (keys.len() == transcript.len()).then_some(keys);
        match keys {
            Some(keys) if keys.windows(2).all(|w| w[0] < w[1]) => Self::Ordered(keys),
            _ => Self::Map(
                transcript
                    .turn_ids()
                    .enumerate()
                    .map(|(p, id)| (id.to_owned(), p))
                    .collect(),
            ),
        }
    }
}

impl Positions {
    /// The positions of a transcript's turns: every lookup must give that transcript.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// [`Positions::get`], trying `near` first: a view's turns come in source order, most
    /// often each right after the one before, and share their ids with the source's turns,
    /// so that most are recognised without comparing a byte.
    pub(crate) fn get_near(
        &self,
        transcript: &Transcript,
        id: &Arc<str>,
        near: usize,
    ) -> Option<usize> {
        let hit = transcript
            .turns()
            .get(near)
            .is_some_and(|t| Arc::ptr_eq(t.turn_id_arc(), id) || t.turn_id() == &**id);
        if hit {
            Some(near)
        } else {
            self.get(transcript, id)
        }
    }

    /// The position of `id` in `transcript` (the one these positions are of).
    pub(crate) fn get(&self, transcript: &Transcript, id: &str) -> Option<usize> {
        match self.0.get_or_init(|| Index::of(transcript)) {
            Index::Ordered(keys) => {
                let p = keys.binary_search(&id_key(id)?).ok()?;
                (transcript.turns().get(p)?.turn_id() == id).then_some(p)
            }
            Index::Map(map) => map.get(id).copied(),
        }
    }

    /// Whether the index was built: for the tests of its laziness.
    #[cfg(test)]
    pub(crate) fn indexed(&self) -> bool {
        self.0.get().is_some()
    }
}

/// The numbers of a turn id the formats give: `(0, 0, 0)` for the system turn, `(1, i, 0)`
/// for `m{i}`, `(1, i, j + 1)` for `m{i}.{j}`; `None` for any other id, and for numbers
/// beyond `u32` (half the size of `usize`: the list is held for the whole run).
fn id_key(id: &str) -> Option<(u8, u32, u32)> {
    if id == "system" || id == "instructions" {
        return Some((0, 0, 0));
    }
    let rest = id.strip_prefix('m')?;
    // Digits only (no sign, as `parse` would take), in one pass: every turn id is read back
    // this way when positions are indexed and again when a view is rendered.
    let number = |s: &str| -> Option<u32> {
        if s.is_empty() {
            return None;
        }
        s.bytes().try_fold(0_u32, |n, b| {
            let digit = b.checked_sub(b'0').filter(|d| *d < 10)?;
            n.checked_mul(10)?.checked_add(u32::from(digit))
        })
    };
    match rest.split_once('.') {
        None => Some((1, number(rest)?, 0)),
        Some((i, j)) => Some((1, number(i)?, number(j)?.checked_add(1)?)),
    }
}

/// The message list of a document (the document itself when it is an array, else the value at
/// `key`) and the path naming it.
pub(crate) fn messages_key<'a>(document: &'a Value, key: &str) -> (Option<&'a Value>, String) {
    match document {
        Value::Array(_) => (Some(document), key.to_owned()),
        Value::Object(map) => (map.get(key), key.to_owned()),
        _ => (None, "$".to_owned()),
    }
}

/// How a rendered document is assembled.
pub(crate) struct Emit;

impl Emit {
    /// `document` with its message list replaced by `items`, in the document's own shape.
    pub(crate) fn replace(document: &Value, key: &str, items: Vec<Value>) -> Value {
        match shell(document, key) {
            Value::Object(mut map) => {
                map.insert(key.to_owned(), Value::Array(items));
                Value::Object(map)
            }
            _ => Value::Array(items),
        }
    }
}

/// `document` without the message list at `key`: the request's other fields, cloned. The list
/// is most of a request's bytes and is always replaced, so cloning it would be wasted work.
/// A document that is the list itself gives an empty array; a `key` holding anything but an
/// array (the Responses `input` string) stays.
pub(crate) fn shell(document: &Value, key: &str) -> Value {
    match document {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, v)| !(k.as_str() == key && v.is_array()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ),
        _ => Value::Array(Vec::new()),
    }
}

/// The user message standing for removed messages: see [`LEAD_IN_TEXT`].
pub(crate) fn lead_in_message() -> Value {
    let mut m = Map::new();
    m.insert("role".into(), Value::from("user"));
    m.insert("content".into(), Value::from(LEAD_IN_TEXT));
    Value::Object(m)
}

/// A view item naming a turn whose source this format cannot have.
pub(crate) fn bad_position(position: usize) -> FormatError {
    FormatError::view(
        format!("The view names turn position {position}, which has no source message."),
        details! { "position" => position },
    )
}

/// The message (or item) list a renderer reads kept messages from: borrowed from a
/// [`ProviderTranscript`](crate::ProviderTranscript) that stays usable, whose kept messages are
/// then cloned, or taken out of one that is being consumed, whose kept messages are then moved
/// into the output instead of copied.
pub(crate) enum Messages<'a> {
    Borrowed(&'a [Value]),
    Owned(Vec<Value>),
}

impl<'a> Messages<'a> {
    /// The array at `key` of `document` (or `document` itself when it is an array); `None`
    /// when there is no array there (a Responses `input` string).
    pub(crate) fn borrowed(document: &'a Value, key: &str) -> Option<Self> {
        match messages_key(document, key).0 {
            Some(Value::Array(list)) => Some(Self::Borrowed(list)),
            _ => None,
        }
    }

    /// As [`Messages::borrowed`], taking the array out of `document` (an empty one stays in
    /// its place, which [`shell`] leaves out of the output).
    pub(crate) fn owned(document: &mut Value, key: &str) -> Option<Self> {
        let list = match document {
            Value::Array(list) => list,
            Value::Object(map) => match map.get_mut(key) {
                Some(Value::Array(list)) => list,
                _ => return None,
            },
            _ => return None,
        };
        Some(Self::Owned(std::mem::take(list)))
    }

    /// Message `i`, to read.
    pub(crate) fn get(&self, i: usize) -> Option<&Value> {
        match self {
            Self::Borrowed(list) => list.get(i),
            Self::Owned(list) => list.get(i),
        }
    }

    /// Message `i`, to emit as it is: each renderer takes a message at most once (a view's
    /// turns are in source order and each message is one turn), so moving it out is safe.
    pub(crate) fn take(&mut self, i: usize) -> Option<Value> {
        match self {
            Self::Borrowed(list) => list.get(i).cloned(),
            Self::Owned(list) => list.get_mut(i).map(std::mem::take),
        }
    }
}

/// One message (or item) of a rendered list, before it is written as JSON or as text.
///
/// Renderers say what each output message is; [`crate::ProviderTranscript::render`] resolves
/// the pieces into values, and the text path copies a kept message's bytes from the input.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Piece {
    /// Message `i` of the input, as it was.
    Kept(usize),
    /// Message `index` of the input with stubs in place of some values: its own fields', or
    /// those of blocks of its content.
    Masked { index: usize, patches: Vec<Patch> },
    /// A message written or rebuilt by the renderer.
    New(Value),
}

/// One value of a message replaced by a stub: the message's field `key`, or with `block`, the
/// field `key` of that block of the message's `content` array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Patch {
    pub(crate) block: Option<usize>,
    pub(crate) key: &'static str,
    pub(crate) stub: Arc<str>,
    /// Where the value to replace lies in the request's text, when known from reading it:
    /// the writer then need not look for it.
    pub(crate) at: Option<Range<usize>>,
    /// The position of the turn whose content the stub stands for, when the renderer knows
    /// it: where that content was left in the text is found by it (see `locate_patches`).
    pub(crate) turn: Option<usize>,
}

impl Piece {
    /// Message `index` with its field `key` replaced by `stub`, which stands for the content
    /// of the turn at position `turn`.
    pub(crate) fn masked(index: usize, key: &'static str, stub: &Arc<str>, turn: usize) -> Self {
        Self::Masked {
            index,
            patches: vec![Patch {
                block: None,
                key,
                stub: Arc::clone(stub),
                at: None,
                turn: Some(turn),
            }],
        }
    }
}

/// `original` with `patches` applied.
pub(crate) fn patched(original: &Value, patches: &[Patch]) -> Value {
    let mut out: Option<Value> = None;
    for patch in patches {
        let current = out.as_ref().unwrap_or(original);
        let stub = Value::from(&*patch.stub);
        out = Some(match patch.block {
            None => crate::openai_chat::with_field(current, patch.key, stub),
            Some(j) => {
                let mut message = current.clone();
                if let Some(block) = message.get_mut("content").and_then(|c| c.get_mut(j)) {
                    *block = crate::openai_chat::with_field(block, patch.key, stub);
                }
                message
            }
        });
    }
    out.unwrap_or_else(|| original.clone())
}

/// What a renderer returns: the document without its list (with its top-level fields as the
/// view leaves them), and the list's pieces; `None` when the document is to be emitted as it
/// is (a Responses `input` string kept).
#[derive(Debug)]
pub(crate) struct Rendered {
    pub(crate) shell: Value,
    pub(crate) list: Option<Vec<Piece>>,
}

/// The input messages a renderer reads: values, or spans of the request's text parsed when
/// (rarely) a renderer needs to look inside one.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Source<'a> {
    Values(&'a [Value]),
    Text {
        text: &'a str,
        spans: &'a [std::ops::Range<usize>],
    },
}

impl<'a> Source<'a> {
    /// Message `i`, to read.
    pub(crate) fn get(&self, i: usize) -> Option<std::borrow::Cow<'a, Value>> {
        match *self {
            Self::Values(list) => list.get(i).map(std::borrow::Cow::Borrowed),
            Self::Text { text, spans } => {
                let span = spans.get(i)?;
                serde_json::from_str(text.get(span.clone())?)
                    .ok()
                    .map(std::borrow::Cow::Owned)
            }
        }
    }

    /// Whether message `i` exists.
    pub(crate) fn has(&self, i: usize) -> bool {
        match *self {
            Self::Values(list) => i < list.len(),
            Self::Text { spans, .. } => i < spans.len(),
        }
    }
}

/// Resolves `rendered` into a document, reading kept messages from `list` (moved out of it
/// when it is owned).
pub(crate) fn resolve(
    rendered: Rendered,
    key: &str,
    list: Messages<'_>,
) -> Result<Value, FormatError> {
    resolve_traced(rendered, key, list).map(|(document, _)| document)
}

/// [`resolve`], with the origin of each message of the document's list: the index of the
/// input message it is, unchanged, or `None` for one compaction made or changed.
pub(crate) fn resolve_traced(
    rendered: Rendered,
    key: &str,
    mut list: Messages<'_>,
) -> Result<(Value, Vec<Option<usize>>), FormatError> {
    let Some(pieces) = rendered.list else {
        return Ok((rendered.shell, Vec::new()));
    };
    let mut items = Vec::with_capacity(pieces.len());
    let mut origins = Vec::with_capacity(pieces.len());
    for piece in pieces {
        origins.push(match &piece {
            Piece::Kept(i) => Some(*i),
            _ => None,
        });
        let value = match piece {
            Piece::Kept(i) => list.take(i),
            Piece::Masked { index, patches } => {
                list.get(index).map(|original| patched(original, &patches))
            }
            Piece::New(v) => Some(v),
        };
        items.push(value.ok_or_else(|| bad_position(items.len()))?);
    }
    Ok((Emit::replace(&rendered.shell, key, items), origins))
}
