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

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::mapping::{Piece, Rendered};

/// Where a request's message list and its messages lie in its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Each message (item), in order.
    pub(crate) items: Vec<Range<usize>>,
    /// The length of the text read, to recognise it when it is given back.
    pub(crate) text_len: usize,
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
    let top: Top<'_> = serde_json::from_str(text).ok()?;
    match top {
        Top::List(items) => Some(Read {
            shell: Value::Array(Vec::new()),
            layout: layout(text, &items),
        }),
        Top::Object(fields) => {
            let mut shell = Map::new();
            let mut list = None;
            for (name, raw) in fields {
                if shell.contains_key(&name) || (name == key && list.is_some()) {
                    return None;
                }
                if name == key && raw.get().starts_with('[') {
                    list = Some(raw);
                } else {
                    shell.insert(name, serde_json::from_str(raw.get()).ok()?);
                }
            }
            let raw = list?;
            let items: Vec<&RawValue> = serde_json::from_str(raw.get()).ok()?;
            Some(Read {
                shell: Value::Object(shell),
                layout: layout(text, &items),
            })
        }
    }
}

fn layout(text: &str, items: &[&RawValue]) -> Layout {
    Layout {
        items: items.iter().map(|r| span(text, r.get())).collect(),
        text_len: text.len(),
    }
}

/// Where `part`, a slice of `text`, lies in it.
fn span(text: &str, part: &str) -> Range<usize> {
    let start = part.as_ptr().addr() - text.as_ptr().addr();
    start..start + part.len()
}

/// A document's top level: a list of raw values, or an object's fields in order.
enum Top<'a> {
    List(Vec<&'a RawValue>),
    Object(Vec<(String, &'a RawValue)>),
}

impl<'de> serde::Deserialize<'de> for Top<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TopVisitor)
    }
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
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
        while let Some(name) = map.next_key::<String>()? {
            fields.push((name, map.next_value::<&'de RawValue>()?));
        }
        Ok(Top::Object(fields))
    }
}

/// The span, within `message` (an object's text), of the value of its field `key`: the last
/// one, as a parsed value keeps the last of repeated keys.
fn field_span(message: &str, key: &str) -> Option<Range<usize>> {
    let fields: Vec<(String, &RawValue)> = match serde_json::from_str(message).ok()? {
        Top::Object(fields) => fields,
        Top::List(_) => return None,
    };
    fields
        .into_iter()
        .rev()
        .find(|(name, _)| name == key)
        .map(|(_, raw)| span(message, raw.get()))
}

/// Writes `rendered` as text: the input's bytes before the list, the list's pieces (kept
/// messages copied, changed ones patched or written compactly), the input's bytes after it.
/// `None` when the rendering changed a top-level field, which the caller writes as a value.
pub(crate) fn write(
    rendered: &Rendered,
    shell: &Value,
    layout: &Layout,
    text: &str,
) -> Option<Result<String, serde_json::Error>> {
    if rendered.shell != *shell {
        return None;
    }
    let Some(pieces) = &rendered.list else {
        return Some(Ok(text.to_owned()));
    };
    let items = &layout.items;
    let (first, last) = (items.first()?, items.last()?);
    // The separator of a new neighbour: the input's own between its first two messages.
    let default_sep = match items.get(1) {
        Some(second) => text.get(first.end..second.start)?,
        None => ",",
    };
    let mut out = String::with_capacity(text.len() + 1);
    out.push_str(text.get(..first.start)?);
    let mut previous: Option<usize> = None;
    for (n, piece) in pieces.iter().enumerate() {
        let origin = match piece {
            Piece::Kept(i) | Piece::Masked { index: i, .. } => Some(*i),
            Piece::New(_) => None,
        };
        if n > 0 {
            let sep = match (previous, origin) {
                (Some(a), Some(b)) if a + 1 == b => {
                    text.get(items.get(a)?.end..items.get(b)?.start)?
                }
                _ => default_sep,
            };
            out.push_str(sep);
        }
        previous = origin;
        match piece {
            Piece::Kept(i) => out.push_str(text.get(items.get(*i)?.clone())?),
            Piece::Masked { index, key, stub } => {
                let message = text.get(items.get(*index)?.clone())?;
                match field_span(message, key) {
                    Some(at) => {
                        out.push_str(message.get(..at.start)?);
                        if let Err(e) = write_value(&mut out, &Value::from(&**stub)) {
                            return Some(Err(e));
                        }
                        out.push_str(message.get(at.end..)?);
                    }
                    None => {
                        // No such field to replace: the message rebuilt with it.
                        let original: Value = serde_json::from_str(message).ok()?;
                        let value = crate::openai_chat::with_field(
                            &original,
                            key,
                            Value::from(&**stub),
                        );
                        if let Err(e) = write_value(&mut out, &value) {
                            return Some(Err(e));
                        }
                    }
                }
            }
            Piece::New(v) => {
                if let Err(e) = write_value(&mut out, v) {
                    return Some(Err(e));
                }
            }
        }
    }
    out.push_str(text.get(last.end..)?);
    Some(Ok(out))
}

/// Appends `value` as compact JSON.
fn write_value(out: &mut String, value: &Value) -> Result<(), serde_json::Error> {
    let s = serde_json::to_string(value)?;
    out.push_str(&s);
    Ok(())
}
