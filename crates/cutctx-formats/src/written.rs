//! A request written back as it came: [`to_string_as_written`].
//!
//! A value parsed with serde_json holds numbers as `u64`, `i64` or `f64` and objects with
//! sorted keys, so writing it back turns `12345678901234567890123` into
//! `1.2345678901234568e22`, `1e2` into `100.0`, `-0` into `0`, and reorders keys. A compactor
//! must never change what it keeps: this writes a compacted request from the text of the
//! request it came from, each top-level member and each kept message copied as the bytes it
//! was written with, in the order it was written, and only what compaction made (a summary, a
//! masked result, a merged message, a field it changed) written anew.

use std::ops::Range;

use serde_json::{Map, Value};

use crate::Format;

/// How deep a value may nest for the walk to step over it: far more than a request needs, and
/// under the parser's limit, which has already read the text.
const DEPTH: usize = 128;

/// `sent`, a request made from the request `text` of `format` (compacted, continued or
/// repaired), as JSON. `origins` says, for each message of `sent`'s list, the index of the
/// message of `text`'s list it is, unchanged (`None` for one compaction made or changed), as
/// [`ProviderTranscript::render_traced`](crate::ProviderTranscript::render_traced) and a
/// session's state say it; those messages are copied from `text` byte for byte. Without
/// origins (`None`), a message equal as a value to the next unused one of `text` is copied,
/// which is exact unless two messages are equal as values but written differently. Each
/// top-level member whose value `sent` keeps is copied too (its key as written, its value, the
/// space around its colon), in `text`'s order; members `sent` adds come last. Everything else is
/// written by serde_json (indented when `pretty`). A text whose top level repeats a key is
/// written by serde_json whole.
///
/// ```
/// use cutctx_formats::{Format, to_string_as_written};
/// let text = r#"{"model": "m", "messages": [{"role": "user", "content": "x", "n": 1e2}]}"#;
/// let mut sent: serde_json::Value = serde_json::from_str(text).unwrap();
/// sent["messages"].as_array_mut().unwrap().push(serde_json::json!({"role": "assistant", "content": "y"}));
/// let out = to_string_as_written(Format::Anthropic, &sent, text, Some(&[Some(0), None]), false).unwrap();
/// // The kept message as it was written; the new one as serde_json writes it.
/// assert_eq!(
///     out,
///     r#"{"model": "m","messages":[{"role": "user", "content": "x", "n": 1e2},{"content":"y","role":"assistant"}]}"#
/// );
/// ```
///
/// # Errors
///
/// serde_json's, when a value cannot be written (never for a parsed value).
pub fn to_string_as_written(
    format: Format,
    sent: &Value,
    text: &str,
    origins: Option<&[Option<usize>]>,
    pretty: bool,
) -> Result<String, serde_json::Error> {
    let key = crate::list_key(format);
    let mut w = Writer {
        text,
        pretty,
        out: String::with_capacity(text.len()),
    };
    match (layout(text, key), sent) {
        (Some(Layout::List(items)), Value::Array(list)) => w.list(list, &items, origins, 0)?,
        (Some(Layout::Object(members, items)), Value::Object(map)) => {
            w.object(map, &members, key, &items, origins)?;
        }
        _ => {
            return if pretty {
                serde_json::to_string_pretty(sent)
            } else {
                serde_json::to_string(sent)
            };
        }
    }
    Ok(w.out)
}

/// Where a request's top level lies in its text.
enum Layout {
    /// A bare list: each message's span.
    List(Vec<Range<usize>>),
    /// An object: its members in order, and the spans of the messages of its list.
    Object(Vec<Member>, Vec<Range<usize>>),
}

/// A top-level member: its name (decoded), its key as written, its whole text (key, colon
/// and value) and its value.
struct Member {
    name: String,
    key: Range<usize>,
    whole: Range<usize>,
    value: Range<usize>,
}

/// Walks the top level of `text` (which the parser has read): a bare list, or an object whose
/// list sits at `key`. `None` when a key repeats (the value holds the last one only).
fn layout(text: &str, key: &str) -> Option<Layout> {
    let b = text.as_bytes();
    let at = skip(b, 0);
    match b.get(at)? {
        b'[' => Some(Layout::List(elements(b, at)?)),
        b'{' => {
            let members = members(text, at)?;
            let mut names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
            names.sort_unstable();
            if names.windows(2).any(|w| w[0] == w[1]) {
                return None;
            }
            let items = match members.iter().find(|m| m.name == key) {
                Some(m) if b.get(m.value.start) == Some(&b'[') => elements(b, m.value.start)?,
                _ => Vec::new(),
            };
            Some(Layout::Object(members, items))
        }
        _ => None,
    }
}

fn skip(b: &[u8], at: usize) -> usize {
    cutctx_json::lex::skip_whitespace(b, at)
}

/// The spans of the elements of the array opening at `open`.
fn elements(b: &[u8], open: usize) -> Option<Vec<Range<usize>>> {
    let mut out = Vec::new();
    let mut at = skip(b, open + 1);
    if b.get(at) == Some(&b']') {
        return Some(out);
    }
    loop {
        let end = cutctx_json::lex::value_end(b, at, DEPTH)?;
        out.push(at..end);
        at = skip(b, end);
        match b.get(at)? {
            b',' => at = skip(b, at + 1),
            b']' => return Some(out),
            _ => return None,
        }
    }
}

/// The members of the object opening at `open`.
fn members(text: &str, open: usize) -> Option<Vec<Member>> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut at = skip(b, open + 1);
    if b.get(at) == Some(&b'}') {
        return Some(out);
    }
    loop {
        let key_end = cutctx_json::string_end(b, at)?;
        let name: String = serde_json::from_str(text.get(at..key_end)?).ok()?;
        let colon = skip(b, key_end);
        (b.get(colon) == Some(&b':')).then_some(())?;
        let start = skip(b, colon + 1);
        let end = cutctx_json::lex::value_end(b, start, DEPTH)?;
        out.push(Member {
            name,
            key: at..key_end,
            whole: at..end,
            value: start..end,
        });
        at = skip(b, end);
        match b.get(at)? {
            b',' => at = skip(b, at + 1),
            b'}' => return Some(out),
            _ => return None,
        }
    }
}

/// The output being written, and the text it copies from.
struct Writer<'t> {
    text: &'t str,
    pretty: bool,
    out: String,
}

impl Writer<'_> {
    /// The request object: `text`'s members in their order (the list where it was), those
    /// `sent` adds after them.
    fn object(
        &mut self,
        map: &Map<String, Value>,
        members: &[Member],
        key: &str,
        items: &[Range<usize>],
        origins: Option<&[Option<usize>]>,
    ) -> Result<(), serde_json::Error> {
        self.out.push('{');
        let mut first = true;
        for m in members {
            let Some(value) = map.get(&m.name) else {
                continue;
            };
            self.separator(&mut first, 1);
            match value {
                Value::Array(list) if m.name == key => {
                    self.copy(m.key.clone());
                    self.colon();
                    self.list(list, items, origins, 1)?;
                }
                _ if self.holds(m.value.clone(), value) => self.copy(m.whole.clone()),
                _ => {
                    self.copy(m.key.clone());
                    self.colon();
                    self.write(value, 1)?;
                }
            }
        }
        for (name, value) in map {
            if members.iter().any(|m| m.name == *name) {
                continue;
            }
            self.separator(&mut first, 1);
            self.out.push_str(&serde_json::to_string(name)?);
            self.colon();
            self.write(value, 1)?;
        }
        self.close(first, 0, '}');
        Ok(())
    }

    /// The message list: each message whose origin is known copied from its span, the others
    /// written (without origins, each one equal to the next unused message of `text` copied).
    fn list(
        &mut self,
        list: &[Value],
        items: &[Range<usize>],
        origins: Option<&[Option<usize>]>,
        depth: usize,
    ) -> Result<(), serde_json::Error> {
        self.out.push('[');
        let mut first = true;
        let mut next = 0;
        for (k, m) in list.iter().enumerate() {
            self.separator(&mut first, depth + 1);
            let span = match origins {
                // An origin names the message by construction: checked in builds with debug
                // assertions, not parsed again on every call.
                Some(origins) => {
                    let span = origins
                        .get(k)
                        .copied()
                        .flatten()
                        .and_then(|i| items.get(i).cloned());
                    debug_assert!(
                        span.as_ref().is_none_or(|s| self.holds(s.clone(), m)),
                        "the origin of message {k} names another message"
                    );
                    span
                }
                None => {
                    let found = (next..items.len()).find(|&j| self.holds(items[j].clone(), m));
                    if let Some(j) = found {
                        next = j + 1;
                    }
                    found.map(|j| items[j].clone())
                }
            };
            match span {
                Some(span) => self.copy(span),
                None => self.write(m, depth + 1)?,
            }
        }
        self.close(first, depth, ']');
        Ok(())
    }

    /// Whether the text at `span` is `value`.
    fn holds(&self, span: Range<usize>, value: &Value) -> bool {
        self.text
            .get(span)
            .and_then(|t| serde_json::from_str::<Value>(t).ok())
            .is_some_and(|v| v == *value)
    }

    fn copy(&mut self, span: Range<usize>) {
        self.out.push_str(&self.text[span]);
    }

    fn colon(&mut self) {
        self.out.push_str(if self.pretty { ": " } else { ":" });
    }

    /// `value` written anew, at nesting `depth`.
    fn write(&mut self, value: &Value, depth: usize) -> Result<(), serde_json::Error> {
        let text = if self.pretty {
            indent(&serde_json::to_string_pretty(value)?, depth)
        } else {
            serde_json::to_string(value)?
        };
        self.out.push_str(&text);
        Ok(())
    }

    /// The comma before an element (none before the first) and, when pretty, its new line.
    fn separator(&mut self, first: &mut bool, depth: usize) {
        if !*first {
            self.out.push(',');
        }
        *first = false;
        if self.pretty {
            self.out.push('\n');
            self.out.push_str(&"  ".repeat(depth));
        }
    }

    /// The closing bracket, on its own line when pretty and something came before it.
    fn close(&mut self, empty: bool, depth: usize, bracket: char) {
        if self.pretty && !empty {
            self.out.push('\n');
            self.out.push_str(&"  ".repeat(depth));
        }
        self.out.push(bracket);
    }
}

/// `text`, written at nesting `depth`: every line but the first indented by it.
fn indent(text: &str, depth: usize) -> String {
    text.replace('\n', &format!("\n{}", "  ".repeat(depth)))
}
