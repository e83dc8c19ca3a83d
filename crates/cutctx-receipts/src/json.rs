//! A JSON value model that reads and writes exactly as Python's `json` module does.
//!
//! arcaeon hashes what Python's `json.loads` makes of a line, so a verifier must parse the
//! way Python parses, and hash the way Python writes. `serde_json::Value` cannot: it turns
//! integers beyond 64 bits into floats, keeps the last of two duplicate keys silently, refuses
//! `NaN`, `Infinity` and lone-surrogate escapes (all of which Python accepts), and writes
//! floats in another form. This module is the small, exact alternative:
//!
//! * [`Int`] keeps an integer's decimal text, so `12345678901234567890123` and
//!   `-18446744073709551616` survive any round trip. Like Python 3.11 and later, a literal of
//!   more than [`MAX_INT_DIGITS`] digits is refused.
//! * [`Value::Float`] is an `f64` parsed with correct rounding (as Python's `float()`), so
//!   `1e400` reads as infinity and `-0.0` stays negative zero.
//! * [`Text`] holds a string as *generalized* UTF-8: valid UTF-8, except that a lone surrogate
//!   (from an escape such as `\ud800`) is kept as its three-byte form. Those bytes are what
//!   Python's `encode("utf-8", "surrogatepass")` produces, which is how the chain rule hashes
//!   such a row; the strict writers refuse them, as Python's strict encoder does.
//! * [`Object`] keeps insertion order (on-disk rows are written in insertion order). A key
//!   given twice keeps its first position and its last value, as Python's `dict` does, and
//!   [`parse`] reports the first duplicate the way arcaeon's strict reader finds it.
//! * Nesting is bounded by [`MAX_DEPTH`], in the parser and in every writer, so hostile input
//!   can never overflow the stack; the parser itself keeps an explicit stack.
//!
//! Three writers share one escaping routine (Python's `ensure_ascii=False`: only `"`, `\` and
//! U+0000–U+001F are escaped, the latter in lower-case hex; everything else is raw UTF-8):
//!
//! | writer | keys | separators | NaN/Infinity | lone surrogate |
//! |---|---|---|---|---|
//! | [`to_c14n`] (json-c14n v1) | sorted by code point | `,` `:` | refused | refused |
//! | [`to_chain_body`] (the chain rule) | sorted by code point | `, ` `: ` | `NaN`, `Infinity` | kept (surrogatepass) |
//! | [`to_line`] (a ledger line) | insertion order | `, ` `: ` | refused | refused |
//!
//! Sorting by code point equals sorting the generalized UTF-8 bytes, which is what
//! [`Text`]'s ordering does.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use crate::error::ReceiptError;

/// The deepest nesting of arrays and objects accepted anywhere.
///
/// Python 3.11's parser gives up at about 995 levels (its recursion limit); this stays below
/// that, so anything accepted here is also accepted, and hashable, by arcaeon.
pub const MAX_DEPTH: usize = 900;

/// The most digits an integer literal may have: Python's default `int` conversion limit
/// (`sys.get_int_max_str_digits()`, 4300 since Python 3.11), beyond which `json.loads` fails.
pub const MAX_INT_DIGITS: usize = 4300;

/// A string as Python holds it: a sequence of code points, lone surrogates included.
///
/// Stored as generalized UTF-8 (see the module docs). Ordering is by code point.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Text(Vec<u8>);

impl Text {
    /// The text as a `&str`, or `None` when it holds a lone surrogate.
    #[must_use]
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    /// The generalized UTF-8 bytes: what `encode("utf-8", "surrogatepass")` gives.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The first lone surrogate, if any.
    #[must_use]
    pub fn lone_surrogate(&self) -> Option<u32> {
        if self.as_str().is_some() {
            return None;
        }
        self.code_points().find(|c| (0xD800..=0xDFFF).contains(c))
    }

    /// The strict UTF-8 form, or [`ReceiptError::LoneSurrogate`].
    ///
    /// # Errors
    ///
    /// When the text holds a lone surrogate, as Python's strict encoder refuses it.
    pub fn to_utf8(&self) -> Result<&str, ReceiptError> {
        self.as_str().ok_or_else(|| ReceiptError::LoneSurrogate {
            code: self.lone_surrogate().unwrap_or(0xD800),
        })
    }

    /// The code points, in order.
    pub fn code_points(&self) -> impl Iterator<Item = u32> + '_ {
        CodePoints {
            bytes: &self.0,
            pos: 0,
        }
    }

    /// The number of code points (Python's `len`).
    #[must_use]
    pub fn len_code_points(&self) -> usize {
        self.code_points().count()
    }

    /// Whether the text is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The text with U+FFFD standing in for lone surrogates.
    #[must_use]
    pub fn to_string_lossy(&self) -> String {
        self.code_points()
            .map(|c| char::from_u32(c).unwrap_or('\u{FFFD}'))
            .collect()
    }

    fn push_code_point(&mut self, c: u32) {
        match char::from_u32(c) {
            Some(ch) => {
                let mut buf = [0_u8; 4];
                self.0
                    .extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
            }
            None => {
                // A surrogate: the three-byte form surrogatepass writes.
                self.0.push(0xE0 | ((c >> 12) & 0x0F) as u8);
                self.0.push(0x80 | ((c >> 6) & 0x3F) as u8);
                self.0.push(0x80 | (c & 0x3F) as u8);
            }
        }
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Self {
        Self(s.as_bytes().to_vec())
    }
}

impl From<String> for Text {
    fn from(s: String) -> Self {
        Self(s.into_bytes())
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.0 == other.as_bytes()
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::pyrepr::repr_text(self))
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_string_lossy())
    }
}

/// Decodes generalized UTF-8. The bytes always come from a `&str` or from
/// [`Text::push_code_point`], so every sequence is complete; a malformed byte (impossible
/// by construction) decodes as U+FFFD rather than panicking.
struct CodePoints<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Iterator for CodePoints<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        let b0 = *self.bytes.get(self.pos)?;
        let (len, init) = match b0 {
            0x00..=0x7F => (1, u32::from(b0)),
            0xC0..=0xDF => (2, u32::from(b0 & 0x1F)),
            0xE0..=0xEF => (3, u32::from(b0 & 0x0F)),
            0xF0..=0xF7 => (4, u32::from(b0 & 0x07)),
            _ => {
                self.pos += 1;
                return Some(0xFFFD);
            }
        };
        let mut c = init;
        for i in 1..len {
            match self.bytes.get(self.pos + i) {
                Some(&b) if b & 0xC0 == 0x80 => c = (c << 6) | u32::from(b & 0x3F),
                _ => {
                    self.pos += i;
                    return Some(0xFFFD);
                }
            }
        }
        self.pos += len;
        Some(c)
    }
}

/// An integer of any size, kept as its canonical decimal text (`-0` reads as `0`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Int(Box<str>);

impl Int {
    /// Parses `-?digits` without leading zeros (or `-0`), or `None`.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let digits = text.strip_prefix('-').unwrap_or(text);
        if digits.is_empty()
            || !digits.bytes().all(|b| b.is_ascii_digit())
            || (digits.len() > 1 && digits.starts_with('0'))
        {
            return None;
        }
        if digits == "0" {
            return Some(Self("0".into()));
        }
        Some(Self(text.into()))
    }

    /// The decimal text, as Python's `repr(int)` writes it.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the integer is below zero.
    #[must_use]
    pub fn is_negative(&self) -> bool {
        self.0.starts_with('-')
    }

    /// The value as a `u64`, when it is one.
    #[must_use]
    pub fn as_u64(&self) -> Option<u64> {
        self.0.parse().ok()
    }

    /// The value as an `i64`, when it is one.
    #[must_use]
    pub fn as_i64(&self) -> Option<i64> {
        self.0.parse().ok()
    }
}

impl From<u64> for Int {
    fn from(v: u64) -> Self {
        Self(v.to_string().into())
    }
}

impl From<usize> for Int {
    fn from(v: usize) -> Self {
        Self(v.to_string().into())
    }
}

impl From<i64> for Int {
    fn from(v: i64) -> Self {
        Self(v.to_string().into())
    }
}

impl fmt::Debug for Int {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Display for Int {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A JSON object in insertion order, with unique keys.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Object(Vec<(Text, Value)>);

impl Object {
    /// An empty object.
    #[must_use]
    pub fn new() -> Self {
        Self(Vec::new())
    }

    /// The value at `key`.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0
            .iter()
            .find(|(k, _)| k.as_bytes() == key.as_bytes())
            .map(|(_, v)| v)
    }

    /// Whether `key` is present.
    #[must_use]
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key` to `value`: in place when present (Python's `dict` keeps the position),
    /// otherwise at the end.
    pub fn insert(&mut self, key: impl Into<Text>, value: Value) {
        let key = key.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<Value> {
        let i = self
            .0
            .iter()
            .position(|(k, _)| k.as_bytes() == key.as_bytes())?;
        Some(self.0.remove(i).1)
    }

    /// The entries, in insertion order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&Text, &Value)> {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// The number of keys.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no keys.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The entries sorted by key (code point order), as the sorted writers see them.
    fn sorted(&self) -> Vec<(&Text, &Value)> {
        let mut entries: Vec<(&Text, &Value)> = self.iter().collect();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        entries
    }
}

impl FromIterator<(Text, Value)> for Object {
    fn from_iter<I: IntoIterator<Item = (Text, Value)>>(iter: I) -> Self {
        let mut o = Self::new();
        for (k, v) in iter {
            o.insert(k, v);
        }
        o
    }
}

/// A JSON value as Python's `json.loads` gives it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `null` (Python `None`).
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// An integer of any size.
    Int(Int),
    /// A float; may be non-finite when read from `NaN`, `Infinity` or an overflowing literal.
    Float(f64),
    /// A string.
    Str(Text),
    /// An array.
    Array(Vec<Value>),
    /// An object.
    Object(Object),
}

impl Value {
    /// A string value.
    #[must_use]
    pub fn str(s: &str) -> Self {
        Self::Str(Text::from(s))
    }

    /// An integer value.
    #[must_use]
    pub fn uint(v: u64) -> Self {
        Self::Int(Int::from(v))
    }

    /// The string, when this is a valid-UTF-8 string.
    #[must_use]
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Self::Str(t) => t.as_str(),
            _ => None,
        }
    }

    /// The object, when this is one.
    #[must_use]
    pub fn as_object(&self) -> Option<&Object> {
        match self {
            Self::Object(o) => Some(o),
            _ => None,
        }
    }

    /// Python's type name for the value: `dict`, `list`, `str`, `int`, `float`, `bool`,
    /// `NoneType`.
    #[must_use]
    pub fn py_type_name(&self) -> &'static str {
        match self {
            Self::Null => "NoneType",
            Self::Bool(_) => "bool",
            Self::Int(_) => "int",
            Self::Float(_) => "float",
            Self::Str(_) => "str",
            Self::Array(_) => "list",
            Self::Object(_) => "dict",
        }
    }

    /// Python truthiness: `None`, `false`, `0`, `0.0`, `""`, `[]` and `{}` are false.
    #[must_use]
    pub fn is_truthy(&self) -> bool {
        match self {
            Self::Null => false,
            Self::Bool(b) => *b,
            Self::Int(i) => i.as_str() != "0",
            Self::Float(f) => *f != 0.0,
            Self::Str(t) => !t.is_empty(),
            Self::Array(a) => !a.is_empty(),
            Self::Object(o) => !o.is_empty(),
        }
    }

    /// Converts a `serde_json::Value` (which cannot hold big integers, lone surrogates or
    /// non-finite floats, so every such value converts exactly).
    #[must_use]
    pub fn from_serde(v: &serde_json::Value) -> Self {
        match v {
            serde_json::Value::Null => Self::Null,
            serde_json::Value::Bool(b) => Self::Bool(*b),
            serde_json::Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Self::Int(Int::from(i))
                } else if let Some(u) = n.as_u64() {
                    Self::Int(Int::from(u))
                } else {
                    Self::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            serde_json::Value::String(s) => Self::str(s),
            serde_json::Value::Array(a) => Self::Array(a.iter().map(Self::from_serde).collect()),
            serde_json::Value::Object(o) => Self::Object(
                o.iter()
                    .map(|(k, v)| (Text::from(k.as_str()), Self::from_serde(v)))
                    .collect(),
            ),
        }
    }
}

impl From<Object> for Value {
    fn from(o: Object) -> Self {
        Self::Object(o)
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

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
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
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

// ---------------------------------------------------------------------------------------------
// Writing
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy)]
struct Style {
    sorted: bool,
    item_sep: &'static [u8],
    key_sep: &'static [u8],
    allow_nan: bool,
    allow_surrogates: bool,
}

const C14N: Style = Style {
    sorted: true,
    item_sep: b",",
    key_sep: b":",
    allow_nan: false,
    allow_surrogates: false,
};

const CHAIN_BODY: Style = Style {
    sorted: true,
    item_sep: b", ",
    key_sep: b": ",
    allow_nan: true,
    allow_surrogates: true,
};

const LINE: Style = Style {
    sorted: false,
    item_sep: b", ",
    key_sep: b": ",
    allow_nan: false,
    allow_surrogates: false,
};

/// json-c14n v1: `json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
/// allow_nan=False).encode("utf-8")`.
///
/// # Errors
///
/// [`ReceiptError::NonFinite`] for NaN or an infinity, [`ReceiptError::LoneSurrogate`], or
/// [`ReceiptError::JsonTooDeep`].
pub fn to_c14n(value: &Value) -> Result<Vec<u8>, ReceiptError> {
    let mut out = Vec::with_capacity(128);
    write(&mut out, value, C14N, 1)?;
    Ok(out)
}

/// The chain rule's body: `json.dumps(v, ensure_ascii=False, sort_keys=True)` with the
/// default `", "`/`": "` separators, encoded with `surrogatepass`. NaN and infinities are
/// written `NaN`, `Infinity`, `-Infinity`, as Python writes them.
///
/// # Errors
///
/// [`ReceiptError::JsonTooDeep`] only.
pub fn to_chain_body(value: &Value) -> Result<Vec<u8>, ReceiptError> {
    let mut out = Vec::with_capacity(256);
    write(&mut out, value, CHAIN_BODY, 1)?;
    Ok(out)
}

/// [`to_chain_body`] of an object without one top-level key (the chain rule's
/// `{k: v for k, v in row.items() if k != "chain"}`), written without copying the object.
///
/// # Errors
///
/// [`ReceiptError::JsonTooDeep`] only.
pub fn to_chain_body_without(object: &Object, skip: &str) -> Result<Vec<u8>, ReceiptError> {
    let mut out = Vec::with_capacity(256);
    out.push(b'{');
    let mut first = true;
    for (k, v) in object.sorted() {
        if k.as_bytes() == skip.as_bytes() {
            continue;
        }
        if !first {
            out.extend_from_slice(CHAIN_BODY.item_sep);
        }
        first = false;
        write_text(&mut out, k, CHAIN_BODY)?;
        out.extend_from_slice(CHAIN_BODY.key_sep);
        write(&mut out, v, CHAIN_BODY, 2)?;
    }
    out.push(b'}');
    Ok(out)
}

/// A ledger line without its newline: `json.dumps(v, ensure_ascii=False)`, insertion order,
/// `", "`/`": "` separators. NaN, infinities and lone surrogates are refused (Python would
/// write the first two as invalid JSON, and refuses the last).
///
/// # Errors
///
/// As [`to_c14n`].
pub fn to_line(value: &Value) -> Result<String, ReceiptError> {
    let mut out = Vec::with_capacity(256);
    write(&mut out, value, LINE, 1)?;
    // Strict output is valid UTF-8 by construction: surrogates were refused.
    String::from_utf8(out).map_err(|_| ReceiptError::LoneSurrogate { code: 0xD800 })
}

/// [`to_line`] of an object.
///
/// # Errors
///
/// As [`to_line`].
pub fn object_to_line(object: &Object) -> Result<String, ReceiptError> {
    let mut out = Vec::with_capacity(256);
    write_object(&mut out, object, LINE, 1)?;
    String::from_utf8(out).map_err(|_| ReceiptError::LoneSurrogate { code: 0xD800 })
}

fn write(out: &mut Vec<u8>, value: &Value, style: Style, depth: usize) -> Result<(), ReceiptError> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Int(i) => out.extend_from_slice(i.as_str().as_bytes()),
        Value::Float(f) => {
            if !f.is_finite() && !style.allow_nan {
                return Err(ReceiptError::NonFinite {
                    value: py_float_json(*f),
                });
            }
            out.extend_from_slice(py_float_json(*f).as_bytes());
        }
        Value::Str(t) => write_text(out, t, style)?,
        Value::Array(items) => {
            if depth > MAX_DEPTH {
                return Err(ReceiptError::JsonTooDeep { limit: MAX_DEPTH });
            }
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(style.item_sep);
                }
                write(out, item, style, depth + 1)?;
            }
            out.push(b']');
        }
        Value::Object(o) => write_object(out, o, style, depth)?,
    }
    Ok(())
}

fn write_object(
    out: &mut Vec<u8>,
    o: &Object,
    style: Style,
    depth: usize,
) -> Result<(), ReceiptError> {
    if depth > MAX_DEPTH {
        return Err(ReceiptError::JsonTooDeep { limit: MAX_DEPTH });
    }
    out.push(b'{');
    let mut first = true;
    let mut put = |out: &mut Vec<u8>, k: &Text, v: &Value| {
        if !first {
            out.extend_from_slice(style.item_sep);
        }
        first = false;
        write_text(out, k, style)?;
        out.extend_from_slice(style.key_sep);
        write(out, v, style, depth + 1)
    };
    if style.sorted {
        for (k, v) in o.sorted() {
            put(out, k, v)?;
        }
    } else {
        for (k, v) in o.iter() {
            put(out, k, v)?;
        }
    }
    out.push(b'}');
    Ok(())
}

fn write_text(out: &mut Vec<u8>, t: &Text, style: Style) -> Result<(), ReceiptError> {
    if !style.allow_surrogates {
        t.to_utf8()?;
    }
    escape_into(out, t.as_bytes());
    Ok(())
}

/// Writes `bytes` as a JSON string literal with Python's `ensure_ascii=False` escaping.
pub(crate) fn escape_into(out: &mut Vec<u8>, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x08 => b"\\b",
            0x0C => b"\\f",
            0x00..=0x1F => b"",
            _ => continue,
        };
        out.extend_from_slice(bytes.get(start..i).unwrap_or_default());
        if short.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0x0F)]);
        } else {
            out.extend_from_slice(short);
        }
        start = i + 1;
    }
    out.extend_from_slice(bytes.get(start..).unwrap_or_default());
    out.push(b'"');
}

/// A float as Python's `json.dumps` writes it: `float.__repr__` for finite values (`-0.0`
/// kept), and `NaN`, `Infinity`, `-Infinity` otherwise.
#[must_use]
pub fn py_float_json(f: f64) -> String {
    if f.is_nan() {
        "NaN".to_owned()
    } else if f == f64::INFINITY {
        "Infinity".to_owned()
    } else if f == f64::NEG_INFINITY {
        "-Infinity".to_owned()
    } else {
        py_float_repr(f)
    }
}

/// Python's `repr(float)`, `-0.0` included (cutctx's own canonical form normalises it to
/// `0.0`; arcaeon's does not). Non-finite values give `nan`, `inf`, `-inf`. The digits come
/// from `cutctx_model::canonical::py_float_repr`, which breaks exact ties as Python does.
#[must_use]
pub fn py_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    if f == 0.0 && f.is_sign_negative() {
        return "-0.0".to_owned();
    }
    cutctx_model::canonical::py_float_repr(f).unwrap_or_default()
}

/// Compares two non-negative canonical decimal integers.
pub(crate) fn cmp_decimal(a: &str, b: &str) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c14n(text: &str) -> String {
        let v = parse(text).expect("parses").value;
        String::from_utf8(to_c14n(&v).expect("canonical")).expect("utf-8")
    }

    #[test]
    fn exact_ties_round_half_even_as_python_does() {
        for (f, want) in [
            // Exact ties (each sum is exact): written here as sums, since a literal with these
            // digits is what the shortest form disagrees about.
            (-75_923_748_224_468.0 - 0.125, "-75923748224468.12"),
            (603_329_982_351_490.0 + 0.25, "603329982351490.2"),
            (27_078_007_198_020.0 + 0.8125, "27078007198020.812"),
            (0.5, "0.5"),
            (2.5, "2.5"),
            (9_007_199_254_740_993.0, "9007199254740992.0"),
            (1e23, "1e+23"),
            (0.1 + 0.2, "0.30000000000000004"),
            (123_456_789_012_345_680.0, "1.2345678901234568e+17"),
        ] {
            assert_eq!(py_float_repr(f), want, "{f:e}");
        }
    }

    #[test]
    fn big_integers_survive() {
        assert_eq!(
            c14n("[9007199254740993,-18446744073709551616,12345678901234567890123,-0]"),
            "[9007199254740993,-18446744073709551616,12345678901234567890123,0]"
        );
    }

    #[test]
    fn floats_follow_python_repr() {
        assert_eq!(
            c14n("[1.0,1e100,-0.0,1e16,1E15,1e-5,0.0001,5e-324,1.5e-7,123456789.0,1e22]"),
            "[1.0,1e+100,-0.0,1e+16,1000000000000000.0,1e-05,0.0001,5e-324,1.5e-07,123456789.0,1e+22]"
        );
    }

    #[test]
    fn keys_sort_by_code_point_recursively() {
        assert_eq!(
            c14n(r#"{"b":{"z":1,"a":2},"\ufb00":7,"\ud83d\ude00":6,"A":3,"":4}"#),
            "{\"\":4,\"A\":3,\"b\":{\"a\":2,\"z\":1},\"\u{fb00}\":7,\"\u{1f600}\":6}"
        );
    }

    #[test]
    fn strings_escape_as_python() {
        assert_eq!(
            c14n(r#""\u0000\u0001\b\t\n\f\r\u001f\"\\\/\u007f\u2028é""#),
            "\"\\u0000\\u0001\\b\\t\\n\\f\\r\\u001f\\\"\\\\/\u{7f}\u{2028}é\""
        );
    }

    #[test]
    fn duplicates_resolve_last_wins_at_first_position_and_are_reported_inner_first() {
        let p = parse(r#"{"a":1,"b":2,"a":3,"c":{"x":1,"x":2}}"#).expect("parses");
        assert_eq!(
            p.duplicate.as_ref().map(Text::to_string_lossy).as_deref(),
            Some("x")
        );
        let line = to_line(&p.value).expect("line");
        assert_eq!(line, r#"{"a": 3, "b": 2, "c": {"x": 2}}"#);
        assert!(matches!(
            parse_strict(r#"{"a":1,"a":2}"#),
            Err(ReceiptError::JsonDuplicateKey { .. })
        ));
    }

    #[test]
    fn python_extensions_parse() {
        let v = parse("[NaN,Infinity,-Infinity,1e400,-1e400]")
            .expect("parses")
            .value;
        let body = String::from_utf8(to_chain_body(&v).expect("body")).expect("utf-8");
        assert_eq!(body, "[NaN, Infinity, -Infinity, Infinity, -Infinity]");
        assert!(matches!(to_c14n(&v), Err(ReceiptError::NonFinite { .. })));
    }

    #[test]
    fn lone_surrogates_are_kept_for_the_chain_and_refused_by_strict_writers() {
        let v = parse(r#"["\ud800","\udc00x","\ud83d\u0041"]"#)
            .expect("parses")
            .value;
        let body = to_chain_body(&v).expect("body");
        assert_eq!(
            body,
            b"[\"\xed\xa0\x80\", \"\xed\xb0\x80x\", \"\xed\xa0\xbdA\"]".to_vec()
        );
        assert!(matches!(
            to_c14n(&v),
            Err(ReceiptError::LoneSurrogate { code: 0xD800 })
        ));
        assert!(to_line(&v).is_err());
    }

    #[test]
    fn syntax_errors_are_errors_not_panics() {
        for bad in [
            "",
            " ",
            "[",
            "]",
            "{",
            "{\"a\"",
            "{\"a\":",
            "{\"a\":1,",
            "[1,]",
            "01",
            "1.",
            ".5",
            "-",
            "--1",
            "1e",
            "\"abc",
            "\"\\x\"",
            "\"\\u12\"",
            "\"\\ud800\\u12\"",
            "nul",
            "[1 2]",
            "{1:2}",
            "\"\u{1}\"",
            "-Inf",
            "tru",
            "\u{feff}1",
            "1 1",
            "{\"a\" 1}",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} must not parse");
        }
        assert_eq!(c14n(" 1e5 "), "100000.0");
        assert_eq!(c14n("1E+2"), "100.0");
    }

    #[test]
    fn depth_is_bounded_without_recursion() {
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        let v = parse(&ok).expect("at the limit").value;
        assert!(to_c14n(&v).is_ok());
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert!(matches!(
            parse(&deep),
            Err(ReceiptError::JsonTooDeep { .. })
        ));
        let hostile = "[".repeat(1_000_000);
        assert!(matches!(
            parse(&hostile),
            Err(ReceiptError::JsonTooDeep { .. })
        ));
        let mut built = Value::Null;
        for _ in 0..=MAX_DEPTH {
            built = Value::Array(vec![built]);
        }
        assert!(matches!(
            to_c14n(&built),
            Err(ReceiptError::JsonTooDeep { .. })
        ));
        // Dropping a deep value must not overflow either; keep it modest for the test thread.
    }

    #[test]
    fn integer_digit_limit_matches_python() {
        let ok = "9".repeat(MAX_INT_DIGITS);
        assert!(parse(&ok).is_ok());
        let too_many = "9".repeat(MAX_INT_DIGITS + 1);
        assert!(matches!(
            parse(&too_many),
            Err(ReceiptError::JsonIntTooLarge { .. })
        ));
    }

    #[test]
    fn line_writer_keeps_insertion_order() {
        let v = parse(r#"{"z":1,"a":[true,null,"é"],"m":{"y":1.5,"b":-0.0}}"#)
            .expect("parses")
            .value;
        assert_eq!(
            to_line(&v).expect("line"),
            r#"{"z": 1, "a": [true, null, "é"], "m": {"y": 1.5, "b": -0.0}}"#
        );
    }
}
