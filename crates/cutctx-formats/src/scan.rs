//! A hand-written scan of a request's top level: where its fields and its message list lie,
//! and where each message of the list lies, found by following brackets and strings.
//!
//! It is a shortcut for [`crate::text::read`], never a judge. It checks only the structure it
//! walks (brackets, colons, commas, keys without escapes); what lies inside a field's value or
//! a message is checked later, in full, by whoever reads it (the field parsed as a value, the
//! message by the hand-written reader or parsed as a value), and the path that takes the scan
//! fails when any of that is not JSON. Anything unusual (a key with an escape, a repeated key,
//! a list of anything but objects, no list, a value nesting deeper than a request does) is
//! declined (`None`), and the caller scans with the parser instead, the path that says what
//! is wrong.

use std::ops::Range;

use crate::hand_read::value_end;

/// How deep a field's value or a message may nest for the scan to take it: far more than a
/// message needs, and under the parser's limit, which then has the final word.
const DEPTH: usize = 64;

/// What the scan found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Top<'a> {
    /// A bare list: each message's span.
    List(Vec<Range<usize>>),
    /// An object: its other fields in order (name, value's span), and each message's span.
    Object(Vec<(&'a str, Range<usize>)>, Vec<Range<usize>>),
}

/// Scans `text` for a bare list or an object holding a list at `key`.
pub(crate) fn top<'a>(text: &'a str, key: &str) -> Option<Top<'a>> {
    top_with(text, key, &mut |_| None)
}

/// [`top`], handing the start of each message of the list to `take`, in order, which may
/// read it and say where it ends (`Some`); the scan walks to the end of those it does not
/// take itself. A message is then walked once, by whoever reads it.
pub(crate) fn top_with<'a>(
    text: &'a str,
    key: &str,
    take: &mut dyn FnMut(usize) -> Option<usize>,
) -> Option<Top<'a>> {
    let mut s = Scan {
        b: text.as_bytes(),
        at: 0,
    };
    let top = match s.peek()? {
        b'[' => Top::List(s.list(take)?),
        b'{' => {
            s.at += 1;
            let mut fields: Vec<(&'a str, Range<usize>)> = Vec::new();
            let mut list = None;
            if s.peek()? == b'}' {
                return None;
            }
            loop {
                let name = s.key(text)?;
                if name == key {
                    if list.is_some() || s.peek()? != b'[' {
                        return None;
                    }
                    list = Some(s.list(take)?);
                } else {
                    if fields.iter().any(|(n, _)| *n == name) {
                        return None;
                    }
                    let start = s.at;
                    s.at = value_end(s.b, start, DEPTH)?;
                    fields.push((name, start..s.at));
                }
                match s.peek()? {
                    b',' => s.at += 1,
                    b'}' => {
                        s.at += 1;
                        break;
                    }
                    _ => return None,
                }
            }
            Top::Object(fields, list?)
        }
        _ => return None,
    };
    s.peek().is_none().then_some(top)
}

/// A cursor over the text.
struct Scan<'a> {
    b: &'a [u8],
    at: usize,
}

impl Scan<'_> {
    /// The next byte that is not whitespace, not consumed.
    fn peek(&mut self) -> Option<u8> {
        self.at = cutctx_json::lex::skip_whitespace(self.b, self.at);
        self.b.get(self.at).copied()
    }

    /// A key without escapes or control bytes, and its colon; the next value's first byte
    /// is then at the cursor.
    fn key<'t>(&mut self, text: &'t str) -> Option<&'t str> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.at + 1;
        let n = cutctx_json::first_special(self.b.get(start..)?, true)?;
        if self.b.get(start + n) != Some(&b'"') {
            return None;
        }
        self.at = start + n + 1;
        if self.peek()? != b':' {
            return None;
        }
        self.at += 1;
        self.peek()?;
        text.get(start..start + n)
    }

    /// The list opening at the cursor: each object's span, as `take` reads it or as the
    /// scan walks it.
    fn list(&mut self, take: &mut dyn FnMut(usize) -> Option<usize>) -> Option<Vec<Range<usize>>> {
        self.at += 1;
        let mut items = Vec::new();
        if self.peek()? == b']' {
            self.at += 1;
            return Some(items);
        }
        loop {
            if self.peek()? != b'{' {
                return None;
            }
            let start = self.at;
            self.at = match take(start) {
                Some(end) if end > start && end <= self.b.len() => end,
                _ => value_end(self.b, start, DEPTH)?,
            };
            items.push(start..self.at);
            match self.peek()? {
                b',' => self.at += 1,
                b']' => {
                    self.at += 1;
                    // The spans are held for the whole run: the room doubling left is given
                    // back.
                    items.shrink_to_fit();
                    return Some(items);
                }
                _ => return None,
            }
        }
    }
}
