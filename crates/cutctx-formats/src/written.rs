//! A request written back as it came: [`to_string_as_written`].
//!
//! A value parsed with serde_json holds numbers as `u64`, `i64` or `f64` and objects with
//! sorted keys, so writing it back turns `12345678901234567890123` into
//! `1.2345678901234568e22`, `1e2` into `100.0`, `-0` into `0`, and reorders keys. A compactor
//! must never change what it keeps: this writes a compacted request from the text of the
//! request it came from, each top-level field and each message that is unchanged copied as
//! the bytes it was written with, in the order it was written, and only what compaction made
//! (a summary, a masked result, a merged message, a field it changed) written anew.

use std::ops::Range;

use serde_json::Value;

use crate::Format;
use crate::scan::{Top, top};

/// `sent`, a request made from the request `text` of `format` (compacted, repaired or
/// continued), as JSON: each top-level field and each message equal to one of `text`'s copied
/// from `text` byte for byte, in `text`'s order; everything else written by serde_json
/// (indented when `pretty`). A request whose text the scan does not take (a repeated key, a
/// key with an escape) is written by serde_json whole.
///
/// ```
/// use cutctx_formats::{Format, to_string_as_written};
/// let text = r#"{"model": "m", "messages": [{"role": "user", "content": "x", "n": 1e2}]}"#;
/// let mut sent: serde_json::Value = serde_json::from_str(text).unwrap();
/// sent["messages"].as_array_mut().unwrap().push(serde_json::json!({"role": "assistant", "content": "y"}));
/// let out = to_string_as_written(Format::Anthropic, &sent, text, false).unwrap();
/// // The kept message as it was written; the new one as serde_json writes it.
/// assert_eq!(
///     out,
///     r#"{"model":"m","messages":[{"role": "user", "content": "x", "n": 1e2},{"content":"y","role":"assistant"}]}"#
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
    pretty: bool,
) -> Result<String, serde_json::Error> {
    let key = crate::list_key(format);
    let mut w = Writer {
        text,
        pretty,
        out: String::with_capacity(text.len()),
    };
    match (top(text, key), sent) {
        (Some(Top::List(items)), Value::Array(list)) => w.list(list, &items, 0)?,
        (Some(Top::Object(fields, items)), Value::Object(map)) => {
            w.object(map, &fields, key, &items)?;
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

/// The output being written, and the text it copies from.
struct Writer<'t> {
    text: &'t str,
    pretty: bool,
    out: String,
}

impl Writer<'_> {
    /// The request object: `text`'s fields in their order (the list where it was), those of
    /// `map` that `text` lacks after them.
    fn object(
        &mut self,
        map: &serde_json::Map<String, Value>,
        fields: &[(&str, Range<usize>)],
        key: &str,
        items: &[Range<usize>],
    ) -> Result<(), serde_json::Error> {
        // The list sat after the fields written before its first message.
        let list_at = items.first().map_or(fields.len(), |first| {
            fields.iter().filter(|(_, s)| s.start < first.start).count()
        });
        let mut order: Vec<(&str, Option<Range<usize>>)> =
            fields.iter().map(|(n, s)| (*n, Some(s.clone()))).collect();
        order.insert(list_at, (key, None));
        for (name, _) in map.iter() {
            if !order.iter().any(|(n, _)| *n == name) {
                order.push((name, None));
            }
        }
        self.out.push('{');
        let mut first = true;
        for (name, span) in order {
            let Some(value) = map.get(name) else {
                continue;
            };
            self.separator(&mut first, 1);
            self.out.push_str(&serde_json::to_string(name)?);
            self.out.push_str(if self.pretty { ": " } else { ":" });
            match (name == key, value) {
                (true, Value::Array(list)) => self.list(list, items, 1)?,
                _ => self.value(value, span, 1)?,
            }
        }
        self.close(first, 0, '}');
        Ok(())
    }

    /// The message list: each message equal to one of `items` (searched from the last one
    /// copied on, since compaction keeps the order) copied, the others written.
    fn list(
        &mut self,
        list: &[Value],
        items: &[Range<usize>],
        depth: usize,
    ) -> Result<(), serde_json::Error> {
        // Each message of the text read once, to be compared with those sent.
        let written: Vec<Option<Value>> = items
            .iter()
            .map(|span| {
                self.text
                    .get(span.clone())
                    .and_then(|t| serde_json::from_str(t).ok())
            })
            .collect();
        let mut next = 0;
        self.out.push('[');
        let mut first = true;
        for m in list {
            self.separator(&mut first, depth + 1);
            let found = (next..items.len()).find(|&j| written[j].as_ref() == Some(m));
            match found {
                Some(j) => {
                    next = j + 1;
                    self.out.push_str(&self.text[items[j].clone()]);
                }
                None => self.value(m, None, depth + 1)?,
            }
        }
        self.close(first, depth, ']');
        Ok(())
    }

    /// `value`, copied from `span` when the text there is that value, else written.
    fn value(
        &mut self,
        value: &Value,
        span: Option<Range<usize>>,
        depth: usize,
    ) -> Result<(), serde_json::Error> {
        if let Some(written) = span.and_then(|s| self.text.get(s))
            && serde_json::from_str::<Value>(written).is_ok_and(|v| v == *value)
        {
            self.out.push_str(written);
            return Ok(());
        }
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
