//! [`Text`]: a string as Python holds it, lone surrogates included.

use std::fmt;

use crate::error::ReceiptError;

/// A string as Python holds it: a sequence of code points, lone surrogates included.
///
/// Stored as generalized UTF-8 (see the module docs). Ordering is by code point.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Text(pub(super) Vec<u8>);

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
    pub fn code_points(&self) -> impl Iterator<Item = u32> + Clone + '_ {
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

    pub(super) fn push_code_point(&mut self, c: u32) {
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
#[derive(Clone)]
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
