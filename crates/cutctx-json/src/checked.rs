//! A JSON string checked where it lies, not decoded: for the readers that leave a turn's
//! content in the request's text (the request document's record reader, the provider formats'
//! message reader), one walk, shared, so that both accept exactly what decoding accepts.

use crate::{escaped_char, is_canonical_escape, special_mask};

/// What [`check_string`] learns of a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckedString {
    /// Where the closing quote is.
    pub end: usize,
    /// How many bytes the escapes take beyond one each: an escape stands for one code point,
    /// so the decoded string has this many fewer code points than the written one has chars.
    pub escape_bytes: usize,
    /// Whether every escape is the one the canonical writer uses (see
    /// [`is_canonical_escape`]): the written string is then its own canonical spelling.
    pub canonical: bool,
}

/// Checks the JSON string whose text starts at `start` in `b` (just after its opening quote)
/// as decoding would check it, without decoding it: `None` at an escape that does not decode
/// (see [`escaped_char`]), at a raw control byte, and for a string `b` ends inside. Each word
/// is read once and every quote and backslash in it taken in turn: tool output escapes a
/// quote or a newline every few bytes.
///
/// ```
/// use cutctx_json::{CheckedString, check_string};
/// let b = br#""a \"b\" \/ \u00e9" tail"#;
/// let s = check_string(b, 1).expect("a string");
/// assert_eq!(s, CheckedString { end: 18, escape_bytes: 8, canonical: false }); // `\/`
/// assert!(check_string(br#""a \"b\"""#, 1).expect("a string").canonical);
/// assert_eq!(check_string(br#""\ud800""#, 1), None); // a lone surrogate
/// assert_eq!(check_string(b"\"a\nb\"", 1), None); // a raw newline
/// ```
#[must_use]
pub fn check_string(b: &[u8], start: usize) -> Option<CheckedString> {
    let mut escape_bytes = 0;
    let mut canonical = true;
    let mut escape = |at: usize| -> Option<usize> {
        let (c, end) = escaped_char(b, at + 1)?;
        canonical &= is_canonical_escape(c, b.get(at..end)?);
        escape_bytes += end - at - 1;
        Some(end)
    };
    let mut at = start;
    // The first byte not yet consumed by an escape.
    let mut free = start;
    let end = 'walk: {
        while let Some(chunk) = b.get(at..at + 8) {
            let mut word = [0; 8];
            word.copy_from_slice(chunk);
            let mut found = special_mask(u64::from_le_bytes(word), true);
            while found != 0 {
                let k = at + (found.trailing_zeros() / 8) as usize;
                found &= found - 1;
                if k < free {
                    continue;
                }
                match b[k] {
                    b'"' => break 'walk k,
                    b'\\' => free = escape(k)?,
                    // A raw control byte, which no JSON string holds.
                    _ => return None,
                }
            }
            at = (at + 8).max(free);
        }
        let mut k = at.max(free);
        loop {
            match *b.get(k)? {
                b'"' => break 'walk k,
                b'\\' => k = escape(k)?,
                c if c < 0x20 => return None,
                _ => k += 1,
            }
        }
    };
    Some(CheckedString {
        end,
        escape_bytes,
        canonical,
    })
}
