//! A request read as text: its top-level fields as values, its message list as byte spans of
//! the text, and the compacted request written back by copying those spans.
//!
//! Nothing here builds a tree of the whole document: the list is scanned once for where its
//! messages lie, each message is parsed on its own when it is read (and its tree dropped
//! before the next), and a rendered request is the input's bytes around the list, each kept
//! message's bytes, and new or changed messages written as compact JSON. So the output keeps
//! the input's key order and formatting wherever compaction did not change it.

use std::fmt;
use std::ops::Range;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::mapping::{Patch, Piece, Rendered};

/// Where a request's message list and its messages lie in its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Each message (item), in order.
    pub(crate) items: Vec<Range<usize>>,
    /// The text read, to recognise it when it is given back.
    pub(crate) text: TextId,
}

/// A text's identity, to recognise the text a reading or a rendering was made from when a
/// caller gives it back: its length and a 64-bit hash of its bytes, every byte of a text of up
/// to [`TextId::WHOLE`] bytes, and of a longer one its first and last windows and
/// [`TextId::WINDOWS`] evenly spaced between them. It is checked at every hand-back (each
/// rendering, each write of its parts), so it reads a fixed amount whatever the text's size:
/// it tells another request, a truncated or extended copy, and an edited short text from the
/// one read; an edit of a long text that leaves its length and every window alone passes (the
/// rendering stays valid UTF-8 and the output is checked as the format's, but would carry the
/// edit). Not a digest: nothing here defends against a text made to collide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TextId {
    len: usize,
    hash: u64,
}

impl TextId {
    /// A text up to this many bytes is hashed whole.
    pub(crate) const WHOLE: usize = 8 * 1024;
    /// How many windows of a longer text are hashed, the first and last included.
    pub(crate) const WINDOWS: usize = 128;
    /// The bytes of one window.
    const WINDOW: usize = 64;

    /// The identity of `text`.
    pub(crate) fn of(text: &str) -> Self {
        Self {
            len: text.len(),
            hash: Self::hash(text.as_bytes()),
        }
    }

    /// Whether `text` is the text this identifies: the length first, the hash only then.
    pub(crate) fn is(self, text: &str) -> bool {
        self.len == text.len() && self.hash == Self::hash(text.as_bytes())
    }

    fn hash(bytes: &[u8]) -> u64 {
        let n = bytes.len();
        if n <= Self::WHOLE {
            return fold_hash(n as u64, bytes);
        }
        // Window k starts at k/(WINDOWS-1) of the way to the last window's start.
        let last = n - Self::WINDOW;
        (0..Self::WINDOWS).fold(n as u64, |h, k| {
            let start = last / (Self::WINDOWS - 1) * k
                + last % (Self::WINDOWS - 1) * k / (Self::WINDOWS - 1);
            fold_hash(h, &bytes[start..start + Self::WINDOW])
        })
    }
}

/// `seed` with `bytes` folded in, eight bytes at a time (the tail zero-padded, its length
/// folded too): a multiply-rotate mix whose every input bit reaches the result.
fn fold_hash(seed: u64, bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = seed ^ (bytes.len() as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    for c in bytes.chunks(8) {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(K).rotate_left(29);
    }
    h ^ (h >> 32)
}

/// A request read from its text: its fields but the list, and where the list lies.
#[derive(Debug)]
pub(crate) struct Read {
    /// The request without its list (an empty array for a bare list).
    pub(crate) shell: Value,
    pub(crate) layout: Layout,
}

/// Reads `text` as a request whose message list is at `key` (or is the document itself).
///
/// `None` when the text is not JSON, holds no list there, or repeats a top-level key: the
/// caller then reads it as a value, which says what is wrong or handles the rare shape.
pub(crate) fn read(text: &str, key: &str) -> Option<Read> {
    match crate::scan::top(text, key) {
        Some(top) => scanned(text, top),
        None => parsed(text, key),
    }
}

/// [`read`], handing each message's start to `take` as the scan finds it (see
/// [`crate::scan::top_with`]); with whether the scan read the list (`false`: the parser
/// did, and `take` saw messages of a scan that was given up).
pub(crate) fn read_with(
    text: &str,
    key: &str,
    take: &mut dyn FnMut(usize) -> Option<usize>,
) -> Option<(Read, bool)> {
    match crate::scan::top_with(text, key, take) {
        Some(top) => scanned(text, top).map(|read| (read, true)),
        None => parsed(text, key).map(|read| (read, false)),
    }
}

/// [`read`] from what the hand-written scan found: each field parsed as a value (the
/// messages are checked by whoever reads them).
pub(crate) fn scanned(text: &str, top: crate::scan::Top<'_>) -> Option<Read> {
    let layout = |items| Layout {
        items,
        text: TextId::of(text),
    };
    match top {
        crate::scan::Top::List(items) => Some(Read {
            shell: Value::Array(Vec::new()),
            layout: layout(items),
        }),
        crate::scan::Top::Object(fields, items) => {
            let mut shell = Map::new();
            for (name, span) in fields {
                shell.insert(name.to_owned(), serde_json::from_str(text.get(span)?).ok()?);
            }
            Some(Read {
                shell: Value::Object(shell),
                layout: layout(items),
            })
        }
    }
}

/// [`read`] by the parser, for any text.
pub(crate) fn parsed(text: &str, key: &str) -> Option<Read> {
    let mut de = serde_json::Deserializer::from_str(text);
    let top = TopSeed { key: Some(key) }.deserialize(&mut de).ok()?;
    de.end().ok()?;
    match top {
        Top::List(items) => Some(Read {
            shell: Value::Array(Vec::new()),
            layout: layout(text, &items),
        }),
        Top::Object(fields, list) => {
            let mut shell = Map::new();
            for (name, raw) in fields {
                if shell.contains_key(&name) {
                    return None;
                }
                shell.insert(name, serde_json::from_str(raw.get()).ok()?);
            }
            Some(Read {
                shell: Value::Object(shell),
                layout: layout(text, &list?),
            })
        }
    }
}

fn layout(text: &str, items: &[&RawValue]) -> Layout {
    Layout {
        items: items.iter().map(|r| span(text, r.get())).collect(),
        text: TextId::of(text),
    }
}

/// Where `part`, a slice of `text`, lies in it.
fn span(text: &str, part: &str) -> Range<usize> {
    let start = part.as_ptr().addr() - text.as_ptr().addr();
    start..start + part.len()
}

/// A document's top level: a list of raw values, or an object's other fields in order and
/// the raw messages of its list (`None` when it has none, or has it twice).
enum Top<'a> {
    List(Vec<&'a RawValue>),
    Object(Vec<(String, &'a RawValue)>, Option<Vec<&'a RawValue>>),
}

/// Reads a top level, scanning the list at `key` for its messages in the same pass.
struct TopSeed<'k> {
    key: Option<&'k str>,
}

impl<'de> DeserializeSeed<'de> for TopSeed<'_> {
    type Value = Top<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for TopSeed<'_> {
    type Value = Top<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object or an array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<&'de RawValue>()? {
            items.push(item);
        }
        Ok(Top::List(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = Vec::new();
        let mut list: Option<Option<Vec<&'de RawValue>>> = None;
        while let Some(name) = map.next_key::<String>()? {
            if Some(name.as_str()) == self.key {
                // A list, or anything else (a Responses `input` string), which this path
                // leaves to the value path; a repeated list likewise.
                let items = map.next_value::<ListOrOther<'de>>()?.0;
                list = Some(if list.is_some() { None } else { items });
            } else {
                fields.push((name, map.next_value::<&'de RawValue>()?));
            }
        }
        Ok(Top::Object(fields, list.flatten()))
    }
}

/// A list's raw items, or `None` for any other value.
struct ListOrOther<'a>(Option<Vec<&'a RawValue>>);

impl<'de> serde::Deserialize<'de> for ListOrOther<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ListVisitor).map(Self)
    }
}

struct ListVisitor;

impl<'de> Visitor<'de> for ListVisitor {
    type Value = Option<Vec<&'de RawValue>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<&'de RawValue>()? {
            items.push(item);
        }
        Ok(Some(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
}

/// The span, within `message` (an object's text), of the value of its field `key`: the last
/// one, as a parsed value keeps the last of repeated keys.
fn field_span(message: &str, key: &str) -> Option<Range<usize>> {
    match crate::hand_read::field_span(message, key) {
        Some(found) => found,
        None => field_span_parsed(message, key),
    }
}

/// [`field_span`] by the parser, for any message.
pub(crate) fn field_span_parsed(message: &str, key: &str) -> Option<Range<usize>> {
    let mut de = serde_json::Deserializer::from_str(message);
    let fields = match (TopSeed { key: None }).deserialize(&mut de).ok()? {
        Top::Object(fields, _) => fields,
        Top::List(_) => return None,
    };
    fields
        .into_iter()
        .rev()
        .find(|(name, _)| name == key)
        .map(|(_, raw)| span(message, raw.get()))
}

/// A compacted request as text, in parts: ranges of the input's text (the bytes around the
/// list, kept messages and the separators between them) and the text written anew (stubs,
/// summaries, rebuilt messages). Everything that can fail was checked when it was made: writing
/// it only copies bytes, so a caller can stream it without building the whole output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextParts {
    parts: Vec<Part>,
    /// The text the ranges refer to, to recognise it when it is given back.
    text: TextId,
}

/// One part of a [`TextParts`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    /// These bytes of the input's text.
    Input(Range<usize>),
    /// Text written anew.
    New(String),
}

impl TextParts {
    /// The parts of text written whole (a request written from a value).
    pub(crate) fn whole(written: String, text: TextId) -> Self {
        Self {
            parts: vec![Part::New(written)],
            text,
        }
    }

    /// The length of the output, in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.parts
            .iter()
            .map(|p| match p {
                Part::Input(r) => r.len(),
                Part::New(s) => s.len(),
            })
            .sum()
    }

    /// Whether the output is empty (which a rendered request never is).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The output's parts as strings, in order; `None` when `text` is not the text they were
    /// made from, and a `None` part where a range does not lie in `text` on character
    /// boundaries (which only another text of the same identity could cause).
    fn strs<'a>(&'a self, text: &'a str) -> Option<impl Iterator<Item = Option<&'a str>>> {
        // Every range lies inside the text it was made from, on character boundaries: the
        // text the rendering began with, recognised by its identity.
        self.text.is(text).then(|| {
            self.parts.iter().map(move |p| match p {
                Part::Input(r) => text.get(r.clone()),
                Part::New(s) => Some(s.as_str()),
            })
        })
    }

    /// The last byte of the output, to know whether it ends a line.
    #[must_use]
    pub fn last_byte(&self, text: &str) -> Option<u8> {
        let mut last = None;
        for s in self.strs(text)? {
            last = s?.as_bytes().last().copied().or(last);
        }
        last
    }

    /// The output whole, from `text`, the request's text it was rendered from; `None` when
    /// `text` is not that text.
    #[must_use]
    pub fn to_text(&self, text: &str) -> Option<String> {
        let mut out = String::with_capacity(self.len());
        for s in self.strs(text)? {
            out.push_str(s?);
        }
        Some(out)
    }

    /// Writes the output to `out`, from `text`, the request's text it was rendered from: the
    /// bytes of [`TextParts::to_text`], never held whole. `out` is written to in the parts'
    /// sizes: give it a buffered writer.
    ///
    /// # Errors
    ///
    /// The first error of `out`; `InvalidInput` when `text` is not the text rendered from
    /// (found before anything is written when its length differs, else where a range does not
    /// lie in it).
    pub fn write_to(&self, text: &str, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let not_the_text = || {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "the text given is not the text the request was rendered from",
            )
        };
        for s in self.strs(text).ok_or_else(not_the_text)? {
            out.write_all(s.ok_or_else(not_the_text)?.as_bytes())?;
        }
        Ok(())
    }

    /// Appends `part`, joining input ranges that meet.
    fn push(&mut self, part: Part) {
        match part {
            Part::Input(range) => self.input(range),
            Part::New(s) => self.parts.push(Part::New(s)),
        }
    }

    /// Appends the bytes `range` of the input, extending the last part when it ends there.
    fn input(&mut self, range: Range<usize>) {
        if let Some(Part::Input(last)) = self.parts.last_mut()
            && last.end == range.start
        {
            last.end = range.end;
            return;
        }
        if !range.is_empty() {
            self.parts.push(Part::Input(range));
        }
    }

    /// Appends `value` as compact JSON.
    fn value(&mut self, value: &Value) -> Result<(), serde_json::Error> {
        self.parts.push(Part::New(serde_json::to_string(value)?));
        Ok(())
    }
}

/// Writes `rendered` as text parts: the input's bytes before the list, the list's pieces (kept
/// messages copied, changed ones patched or written compactly), the input's bytes after it.
/// `None` when the rendering changed a top-level field, which the caller writes as a value.
pub(crate) fn write(
    rendered: &Rendered,
    shell: &Value,
    layout: &Layout,
    text: &str,
) -> Option<Result<TextParts, serde_json::Error>> {
    if rendered.shell != *shell {
        return None;
    }
    let mut out = TextParts {
        parts: Vec::new(),
        text: layout.text,
    };
    let Some(pieces) = &rendered.list else {
        out.input(0..text.len());
        return Some(Ok(out));
    };
    let items = &layout.items;
    let (first, last) = (items.first()?, items.last()?);
    // Every range below is checked to lie in the text (on character boundaries) before it is
    // recorded, so that writing the parts cannot fail.
    let checked = |r: Range<usize>| text.get(r.clone()).map(|_| r);
    // The separator of a new neighbour: the input's own between its first two messages.
    let default_sep = match items.get(1) {
        Some(second) => Part::Input(checked(first.end..second.start)?),
        None => Part::New(",".to_owned()),
    };
    out.input(checked(0..first.start)?);
    let mut previous: Option<usize> = None;
    for (n, piece) in pieces.iter().enumerate() {
        let origin = match piece {
            Piece::Kept(i) | Piece::Masked { index: i, .. } => Some(*i),
            Piece::New(_) => None,
        };
        if n > 0 {
            let sep = match (previous, origin) {
                (Some(a), Some(b)) if a + 1 == b => {
                    Part::Input(checked(items.get(a)?.end..items.get(b)?.start)?)
                }
                _ => default_sep.clone(),
            };
            out.push(sep);
        }
        previous = origin;
        if let Err(e) = write_piece(&mut out, piece, items, text)? {
            return Some(Err(e));
        }
    }
    out.input(checked(last.end..text.len())?);
    Some(Ok(out))
}

/// Appends one piece of the list: a kept message's bytes, a masked one's bytes with its stubs,
/// or a new message. `None` when a range is not in the text.
fn write_piece(
    out: &mut TextParts,
    piece: &Piece,
    items: &[Range<usize>],
    text: &str,
) -> Option<Result<(), serde_json::Error>> {
    match piece {
        Piece::Kept(i) => {
            let range = items.get(*i)?.clone();
            text.get(range.clone())?;
            out.input(range);
        }
        Piece::Masked { index, patches } => {
            let range = items.get(*index)?.clone();
            let message = text.get(range.clone())?;
            match patch_spans(message, range.start, patches) {
                Some(spans) => {
                    let mut at = 0;
                    for (span, patch) in spans.iter().zip(patches) {
                        message.get(at..span.start)?;
                        out.input(range.start + at..range.start + span.start);
                        // A string is written as its value would be, without the copy.
                        if let Err(e) = serde_json::to_string(&*patch.stub)
                            .map(|stub| out.parts.push(Part::New(stub)))
                        {
                            return Some(Err(e));
                        }
                        at = span.end;
                    }
                    message.get(at..)?;
                    out.input(range.start + at..range.end);
                }
                None => {
                    // A value to replace is missing (a field to add): the message rebuilt.
                    let original: Value = serde_json::from_str(message).ok()?;
                    if let Err(e) = out.value(&crate::mapping::patched(&original, patches)) {
                        return Some(Err(e));
                    }
                }
            }
        }
        Piece::New(v) => {
            if let Err(e) = out.value(v) {
                return Some(Err(e));
            }
        }
    }
    Some(Ok(()))
}

/// Where, within `message` (which starts at `base` in the request), each patch's value lies,
/// in the patches' order; `None` unless every one is found and they come in order without
/// overlapping. A value whose place the reading noted ([`Patch::at`]) is not looked for.
pub(crate) fn patch_spans(
    message: &str,
    base: usize,
    patches: &[Patch],
) -> Option<Vec<Range<usize>>> {
    let mut spans: Vec<Range<usize>> = Vec::with_capacity(patches.len());
    for patch in patches {
        let noted = patch.at.as_ref().and_then(|at| {
            let span = at.start.checked_sub(base)?..at.end.checked_sub(base)?;
            // A string's place: its quotes are there.
            let value = message.get(span.clone())?;
            (value.len() >= 2 && value.starts_with('"') && value.ends_with('"')).then_some(span)
        });
        let span = match (noted, patch.block) {
            (Some(span), _) => span,
            (None, None) => field_span(message, patch.key)?,
            (None, Some(j)) => {
                let content = field_span(message, "content")?;
                let array = message.get(content.clone())?;
                let block = match crate::hand_read::item_span(array, j) {
                    Some(item) => content.start + item.start..content.start + item.end,
                    None => {
                        let blocks: Vec<&RawValue> = serde_json::from_str(array).ok()?;
                        span(message, blocks.get(j)?.get())
                    }
                };
                let inner = field_span(message.get(block.clone())?, patch.key)?;
                block.start + inner.start..block.start + inner.end
            }
        };
        if spans.last().is_some_and(|last| last.end > span.start) {
            return None;
        }
        spans.push(span);
    }
    Some(spans)
}

/// Parses the messages of the list at `key` of the request `text` (or of the bare list), one
/// at a time and in order, and hands each to `f`, which may stop the pass with an error
/// (`Err(Some(e))`); `Err(None)` when the text cannot be read. One parser reads the whole
/// document, as a value would be read (its other fields too, so that nesting limits count
/// exactly as they do there), its buffers reused, each message's tree dropped before the
/// next is read.
pub(crate) fn each_value<E>(
    text: &str,
    key: &str,
    mut f: impl FnMut(usize, Value) -> Result<(), E>,
) -> Result<(), Option<E>> {
    let mut stopped = None;
    let mut de = serde_json::Deserializer::from_str(text);
    let read = de
        .deserialize_any(Doc {
            key,
            each: Each {
                f: &mut f,
                stopped: &mut stopped,
            },
        })
        .and_then(|()| de.end());
    match (read, stopped) {
        (_, Some(e)) => Err(Some(e)),
        (Ok(()), None) => Ok(()),
        (Err(_), None) => Err(None),
    }
}

/// The document visitor of [`each_value`]: the list's messages to `each`, other fields read
/// and dropped.
struct Doc<'k, 'e, F, E> {
    key: &'k str,
    each: Each<'e, F, E>,
}

impl<'de, F, E> Visitor<'de> for Doc<'_, '_, F, E>
where
    F: FnMut(usize, Value) -> Result<(), E>,
{
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object or an array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        self.each.visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        while let Some(name) = map.next_key::<String>()? {
            if name == self.key {
                map.next_value_seed(&mut self.each)?;
            } else {
                map.next_value::<Value>()?;
            }
        }
        Ok(())
    }
}

/// The list visitor of [`each_value`].
struct Each<'e, F, E> {
    f: &'e mut F,
    stopped: &'e mut Option<E>,
}

impl<'de, F, E> DeserializeSeed<'de> for &mut Each<'_, F, E>
where
    F: FnMut(usize, Value) -> Result<(), E>,
{
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(Each {
            f: &mut *self.f,
            stopped: &mut *self.stopped,
        })
    }
}

impl<'de, F, E> Visitor<'de> for Each<'_, F, E>
where
    F: FnMut(usize, Value) -> Result<(), E>,
{
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while let Some(v) = seq.next_element::<Value>()? {
            if let Err(e) = (self.f)(i, v) {
                *self.stopped = Some(e);
                return Err(serde::de::Error::custom("stopped"));
            }
            i += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::TextId;

    #[test]
    fn a_text_is_known_by_its_length_and_its_bytes_whole_or_sampled() {
        let short = "a".repeat(TextId::WHOLE);
        let id = TextId::of(&short);
        assert!(id.is(&short));
        // Every byte of a short text counts, the middle one too.
        let mut edited = short.clone().into_bytes();
        edited[TextId::WHOLE / 2] = b'b';
        assert!(!id.is(std::str::from_utf8(&edited).expect("ASCII")));

        let long: String = (0..200_000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let id = TextId::of(&long);
        assert!(id.is(&long));
        assert!(!id.is(&long[1..]), "a shorter copy");
        // The first byte, the last, and the first of the sixth window.
        let last = long.len() - 64;
        let sixth = last / (TextId::WINDOWS - 1) * 5
            + last % (TextId::WINDOWS - 1) * 5 / (TextId::WINDOWS - 1);
        for at in [0, long.len() - 1, sixth] {
            let mut edited = long.clone().into_bytes();
            edited[at] = b'#';
            let edited = String::from_utf8(edited).expect("ASCII");
            assert!(!id.is(&edited), "an edit at {at}, in a window");
        }
        // Another request of the same length.
        let other: String = (0..200_000)
            .map(|i| char::from(b'a' + (i % 25) as u8))
            .collect();
        assert!(!id.is(&other));
    }
}
