//! The parser: one JSON document read as Python's `json.loads` reads it.

use std::collections::BTreeMap;

use super::{Int, MAX_DEPTH, MAX_INT_DIGITS, Object, Text, Value};
use crate::error::ReceiptError;

/// What [`parse`] found: the value (duplicate keys resolved last-wins, at the first key's
/// position) and the first duplicate key, in the order Python's `object_pairs_hook` meets it.
#[derive(Clone, Debug, PartialEq)]
pub struct Parsed {
    /// The value.
    pub value: Value,
    /// The first duplicate key: the first object to *close* that repeats a key, and within it
    /// the first repeated key in order.
    pub duplicate: Option<Text>,
}

/// Parses one JSON document as Python's `json.loads` does (see the module docs).
///
/// # Errors
///
/// [`ReceiptError::JsonSyntax`], [`ReceiptError::JsonTooDeep`] or
/// [`ReceiptError::JsonIntTooLarge`].
pub fn parse(text: &str) -> Result<Parsed, ReceiptError> {
    Parser {
        text,
        bytes: text.as_bytes(),
        pos: 0,
        duplicate: None,
    }
    .document()
}

/// Parses as [`parse`] does, and refuses a duplicate key anywhere (arcaeon's `loads_strict`).
///
/// # Errors
///
/// As [`parse`], and [`ReceiptError::JsonDuplicateKey`].
pub fn parse_strict(text: &str) -> Result<Value, ReceiptError> {
    let parsed = parse(text)?;
    match parsed.duplicate {
        Some(key) => Err(ReceiptError::JsonDuplicateKey {
            key_chars: key
                .as_str()
                .map_or(key.as_bytes().len(), |k| k.chars().count()),
        }),
        None => Ok(parsed.value),
    }
}

enum Frame {
    Array(Vec<Value>),
    Object {
        entries: Vec<(Text, Value)>,
        index: BTreeMap<Text, usize>,
        key: Text,
        duplicate: Option<Text>,
    },
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    duplicate: Option<Text>,
}

impl Parser<'_> {
    fn error(&self, message: &str) -> ReceiptError {
        let before = self.text.get(..self.pos).unwrap_or(self.text);
        let line = before.matches('\n').count() + 1;
        let column = before.rfind('\n').map_or(before.chars().count(), |i| {
            before.get(i + 1..).unwrap_or("").chars().count()
        }) + 1;
        ReceiptError::JsonSyntax {
            message: message.to_owned(),
            line,
            column,
            offset: self.pos,
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        self.pos = cutctx_json::lex::skip_whitespace(self.bytes, self.pos);
    }

    fn eat(&mut self, literal: &str) -> bool {
        if self
            .bytes
            .get(self.pos..)
            .is_some_and(|rest| rest.starts_with(literal.as_bytes()))
        {
            self.pos += literal.len();
            true
        } else {
            false
        }
    }

    fn document(mut self) -> Result<Parsed, ReceiptError> {
        let mut stack: Vec<Frame> = Vec::new();
        'value: loop {
            self.skip_ws();
            let mut value = match self.peek() {
                Some(b'{') => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(ReceiptError::JsonTooDeep { limit: MAX_DEPTH });
                    }
                    self.pos += 1;
                    self.skip_ws();
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        Value::Object(Object::new())
                    } else {
                        let key = self.key()?;
                        stack.push(Frame::Object {
                            entries: Vec::new(),
                            index: BTreeMap::new(),
                            key,
                            duplicate: None,
                        });
                        continue 'value;
                    }
                }
                Some(b'[') => {
                    if stack.len() >= MAX_DEPTH {
                        return Err(ReceiptError::JsonTooDeep { limit: MAX_DEPTH });
                    }
                    self.pos += 1;
                    self.skip_ws();
                    if self.peek() == Some(b']') {
                        self.pos += 1;
                        Value::Array(Vec::new())
                    } else {
                        stack.push(Frame::Array(Vec::new()));
                        continue 'value;
                    }
                }
                Some(b'"') => Value::Str(self.string()?),
                Some(b'-' | b'0'..=b'9') => self.number()?,
                _ if self.eat("null") => Value::Null,
                _ if self.eat("true") => Value::Bool(true),
                _ if self.eat("false") => Value::Bool(false),
                _ if self.eat("NaN") => Value::Float(f64::NAN),
                _ if self.eat("Infinity") => Value::Float(f64::INFINITY),
                _ => return Err(self.error("Expecting value")),
            };
            // Attach the value to the open containers, closing those that end here.
            loop {
                match stack.last_mut() {
                    None => {
                        self.skip_ws();
                        if self.pos != self.bytes.len() {
                            return Err(self.error("Extra data"));
                        }
                        return Ok(Parsed {
                            value,
                            duplicate: self.duplicate,
                        });
                    }
                    Some(Frame::Array(items)) => {
                        items.push(value);
                        self.skip_ws();
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                continue 'value;
                            }
                            Some(b']') => {
                                self.pos += 1;
                                let Some(Frame::Array(items)) = stack.pop() else {
                                    return Err(self.error("internal: array frame expected"));
                                };
                                value = Value::Array(items);
                            }
                            _ => return Err(self.error("Expecting ',' delimiter")),
                        }
                    }
                    Some(Frame::Object {
                        entries,
                        index,
                        key,
                        duplicate,
                    }) => {
                        let k = std::mem::take(key);
                        match index.get(&k) {
                            Some(&i) => {
                                if duplicate.is_none() {
                                    *duplicate = Some(k.clone());
                                }
                                if let Some(slot) = entries.get_mut(i) {
                                    slot.1 = value;
                                }
                            }
                            None => {
                                index.insert(k.clone(), entries.len());
                                entries.push((k, value));
                            }
                        }
                        self.skip_ws();
                        match self.peek() {
                            Some(b',') => {
                                self.pos += 1;
                                self.skip_ws();
                                let next = self.key()?;
                                if let Some(Frame::Object { key, .. }) = stack.last_mut() {
                                    *key = next;
                                }
                                continue 'value;
                            }
                            Some(b'}') => {
                                self.pos += 1;
                                let Some(Frame::Object {
                                    entries, duplicate, ..
                                }) = stack.pop()
                                else {
                                    return Err(self.error("internal: object frame expected"));
                                };
                                if self.duplicate.is_none() {
                                    self.duplicate = duplicate;
                                }
                                value = Value::Object(Object(entries));
                            }
                            _ => return Err(self.error("Expecting ',' delimiter")),
                        }
                    }
                }
            }
        }
    }

    /// A key and its colon.
    fn key(&mut self) -> Result<Text, ReceiptError> {
        if self.peek() != Some(b'"') {
            return Err(self.error("Expecting property name enclosed in double quotes"));
        }
        let key = self.string()?;
        self.skip_ws();
        if self.peek() != Some(b':') {
            return Err(self.error("Expecting ':' delimiter"));
        }
        self.pos += 1;
        Ok(key)
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let digits = self.bytes.get(at..at + 4)?;
        let s = std::str::from_utf8(digits).ok()?;
        if !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(s, 16).ok()
    }

    /// A string, from its opening quote; leaves `pos` after the closing quote.
    fn string(&mut self) -> Result<Text, ReceiptError> {
        self.pos += 1;
        let mut out = Text::default();
        loop {
            let start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            if let Some(run) = self.bytes.get(start..self.pos) {
                out.0.extend_from_slice(run);
            }
            match self.peek() {
                None => return Err(self.error("Unterminated string starting at")),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    let Some(esc) = self.bytes.get(self.pos + 1).copied() else {
                        return Err(self.error("Unterminated string starting at"));
                    };
                    let simple = match esc {
                        b'"' => Some(b'"'),
                        b'\\' => Some(b'\\'),
                        b'/' => Some(b'/'),
                        b'b' => Some(0x08),
                        b'f' => Some(0x0C),
                        b'n' => Some(b'\n'),
                        b'r' => Some(b'\r'),
                        b't' => Some(b'\t'),
                        b'u' => None,
                        _ => return Err(self.error("Invalid \\escape")),
                    };
                    if let Some(b) = simple {
                        out.0.push(b);
                        self.pos += 2;
                        continue;
                    }
                    let Some(mut c) = self.hex4(self.pos + 2) else {
                        return Err(self.error("Invalid \\uXXXX escape"));
                    };
                    self.pos += 6;
                    // A high surrogate followed by an escaped low surrogate is one code point;
                    // anything else leaves the surrogate alone, as Python's scanner does.
                    if (0xD800..=0xDBFF).contains(&c)
                        && self.bytes.get(self.pos) == Some(&b'\\')
                        && self.bytes.get(self.pos + 1) == Some(&b'u')
                    {
                        let Some(c2) = self.hex4(self.pos + 2) else {
                            return Err(self.error("Invalid \\uXXXX escape"));
                        };
                        if (0xDC00..=0xDFFF).contains(&c2) {
                            c = 0x10000 + ((c - 0xD800) << 10) + (c2 - 0xDC00);
                            self.pos += 6;
                        }
                    }
                    out.push_code_point(c);
                }
                Some(_) => return Err(self.error("Invalid control character at")),
            }
        }
    }

    /// A number, or `-Infinity`.
    fn number(&mut self) -> Result<Value, ReceiptError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            if self.bytes.get(self.pos + 1) == Some(&b'I') {
                self.pos += 1;
                if self.eat("Infinity") {
                    return Ok(Value::Float(f64::NEG_INFINITY));
                }
                self.pos = start;
                return Err(self.error("Expecting value"));
            }
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                while let Some(b'0'..=b'9') = self.peek() {
                    self.pos += 1;
                }
            }
            _ => {
                self.pos = start;
                return Err(self.error("Expecting value"));
            }
        }
        let mut is_float = false;
        if self.peek() == Some(b'.') && matches!(self.bytes.get(self.pos + 1), Some(b'0'..=b'9')) {
            is_float = true;
            self.pos += 2;
            while let Some(b'0'..=b'9') = self.peek() {
                self.pos += 1;
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            let e_start = self.pos;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            let digits_start = self.pos;
            while let Some(b'0'..=b'9') = self.peek() {
                self.pos += 1;
            }
            if self.pos > digits_start {
                is_float = true;
            } else {
                self.pos = e_start;
            }
        }
        let literal = self.text.get(start..self.pos).unwrap_or("");
        if is_float {
            // Rust's parser rounds correctly, as Python's `float()` does; an overflowing
            // literal reads as infinity in both.
            return literal
                .parse::<f64>()
                .map(Value::Float)
                .map_err(|_| self.error("Expecting value"));
        }
        let digits = literal.trim_start_matches('-').len();
        if digits > MAX_INT_DIGITS {
            return Err(ReceiptError::JsonIntTooLarge {
                digits,
                limit: MAX_INT_DIGITS,
            });
        }
        Int::parse(literal)
            .map(Value::Int)
            .ok_or_else(|| self.error("Expecting value"))
    }
}
