//! [`Value`]: a JSON value as Python's `json.loads` gives it, with [`Int`] and [`Object`].

use std::fmt;

use super::Text;

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
pub struct Object(pub(super) Vec<(Text, Value)>);

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
    pub(super) fn sorted(&self) -> Vec<(&Text, &Value)> {
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
