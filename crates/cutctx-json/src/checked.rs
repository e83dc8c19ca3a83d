//! A JSON string checked where it lies, not decoded: for the readers that leave a turn's
//! content in the request's text (the request document's record reader, the provider formats'
//! message reader), one walk, shared, so that both accept exactly what decoding accepts.

use crate::special::special_in_first_block;
use crate::{escaped_char, first_control, is_canonical_escape};

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
/// (see [`escaped_char`]), at a raw control byte, and for a string `b` ends inside. The walk
/// goes from one quote or backslash to the next (see [`crate::first_special`]), then looks for
/// controls in the whole string at once.
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
    // A short string (a key, an id, a role) mostly closes, unescaped, in its first block.
    match special_in_first_block(b.get(start..)?, true).map(|k| (start + k, b[start + k])) {
        Some((end, b'"')) => {
            return Some(CheckedString {
                end,
                escape_bytes: 0,
                canonical: true,
            });
        }
        Some((_, c)) if c < 0x20 => return None,
        _ => {}
    }
    let mut escape_bytes = 0;
    let mut canonical = true;
    let mut at = start;
    let end = loop {
        let k = at + memchr::memchr2(b'"', b'\\', b.get(at..)?)?;
        if b[k] == b'"' {
            break k;
        }
        // The escapes tool output is full of (a quote, a newline) decode to one character
        // each and are the canonical writer's own: taken without decoding them.
        if let Some(b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't') = b.get(k + 1) {
            escape_bytes += 1;
            at = k + 2;
            continue;
        }
        let (c, end) = escaped_char(b, k + 1)?;
        canonical &= is_canonical_escape(c, b.get(k..end)?);
        escape_bytes += end - k - 1;
        at = end;
    };
    // A raw control byte, which no JSON string holds (an escape holds none either, or it
    // would not have decoded).
    if first_control(b.get(start..end)?).is_some() {
        return None;
    }
    Some(CheckedString {
        end,
        escape_bytes,
        canonical,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The byte-at-a-time check of the string starting at `start`.
    fn naive(b: &[u8], start: usize) -> Option<CheckedString> {
        let (mut k, mut escape_bytes, mut canonical) = (start, 0, true);
        loop {
            match *b.get(k)? {
                b'"' => {
                    return Some(CheckedString {
                        end: k,
                        escape_bytes,
                        canonical,
                    });
                }
                b'\\' => {
                    let (c, end) = escaped_char(b, k + 1)?;
                    canonical &= is_canonical_escape(c, &b[k..end]);
                    escape_bytes += end - k - 1;
                    k = end;
                }
                c if c < 0x20 => return None,
                _ => k += 1,
            }
        }
    }

    /// Pieces of string text: plain runs of every length (controls are looked for 32 bytes at
    /// a time), escapes canonical or not, broken ones, raw controls, quotes and any byte.
    fn piece() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => (0..80_usize).prop_map(|n| vec![b'a'; n]),
            2 => Just(b"\\n".to_vec()),
            1 => Just(b"\\\"".to_vec()),
            1 => Just(b"\\/".to_vec()),
            1 => Just(b"\\u00e9".to_vec()),
            1 => Just(b"\\u0041".to_vec()),
            1 => Just(b"\\ud83d\\ude00".to_vec()),
            1 => Just(b"\\ud800".to_vec()),
            1 => Just(b"\\x".to_vec()),
            1 => Just("é".as_bytes().to_vec()),
            1 => Just(b"\"".to_vec()),
            1 => any::<u8>().prop_map(|c| vec![c]),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        #[test]
        fn the_walk_agrees_with_one_byte_at_a_time(
            pieces in proptest::collection::vec(piece(), 0..12),
            start in 0..3_usize,
        ) {
            let mut b = vec![b'"'; start];
            b.extend(pieces.concat());
            prop_assert_eq!(check_string(&b, start), naive(&b, start));
        }
    }
}
