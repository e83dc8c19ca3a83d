//! The one JSON lexer every hand-written reader in the workspace uses: whitespace, the end of a
//! string, and the end of any value, each found without building anything.
//!
//! The functions are guides, not judges: they lex strings exactly as JSON does (a string opens
//! at a `"` outside a string, `\` escapes the byte after it, the next unescaped `"` closes it)
//! and count brackets outside strings, but they do not check that the text is JSON. Whoever
//! uses their positions parses what lies between them strictly (or declines to). String ends
//! are searched a word at a time ([`string_end`]), since string contents are most of a
//! request's bytes.

pub use crate::special::string_end;

/// Whether `b` is JSON whitespace: space, tab, line feed or carriage return.
///
/// ```
/// use cutctx_json::lex::is_whitespace;
/// assert!(is_whitespace(b'\r'));
/// assert!(!is_whitespace(0x0c), "a form feed is not JSON whitespace");
/// ```
#[inline]
#[must_use]
pub const fn is_whitespace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The first position at or after `at` that is not JSON whitespace (`b.len()` when only
/// whitespace is left).
///
/// ```
/// use cutctx_json::lex::skip_whitespace;
/// assert_eq!(skip_whitespace(b" \t\n [1]", 0), 4);
/// assert_eq!(skip_whitespace(b"  ", 1), 2);
/// ```
#[inline]
#[must_use]
pub fn skip_whitespace(b: &[u8], mut at: usize) -> usize {
    while b.get(at).copied().is_some_and(is_whitespace) {
        at += 1;
    }
    at
}

/// Just past the value starting at `start` in `b` (not whitespace): a string, an array or
/// object (to its matching bracket, by depth alone), or a scalar (up to the next delimiter or
/// the end of `b`), skipped without being checked; `None` when it nests deeper than
/// `max_depth` or a string or bracket is not closed.
///
/// ```
/// use cutctx_json::lex::value_end;
/// let b = br#"{"a": "}", "b": [1, {"c": []}]}, 7"#;
/// assert_eq!(value_end(b, 0, 64), Some(31));
/// assert_eq!(value_end(b, 0, 1), None, "deeper than one level");
/// assert_eq!(value_end(b"12", 0, 64), Some(2), "a scalar ends with the text");
/// ```
#[must_use]
pub fn value_end(b: &[u8], start: usize, max_depth: usize) -> Option<usize> {
    match *b.get(start)? {
        b'"' => string_end(b, start),
        b'[' | b'{' => {
            let mut depth = 0_usize;
            let mut at = start;
            loop {
                match *b.get(at)? {
                    b'"' => {
                        at = string_end(b, at)?;
                        continue;
                    }
                    b'[' | b'{' => {
                        depth += 1;
                        if depth > max_depth {
                            return None;
                        }
                    }
                    b']' | b'}' => {
                        depth = depth.checked_sub(1)?;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
        }
        _ => Some(scalar_end(b, start)),
    }
}

/// As [`value_end`], for a piece of a text read in pieces, with no limit on depth: a scalar
/// that reaches the end of `b` is `None` too, since it may go on in the next piece.
///
/// ```
/// use cutctx_json::lex::value_end_in_piece;
/// assert_eq!(value_end_in_piece(b"12 ", 0), Some(2));
/// assert_eq!(value_end_in_piece(b"12", 0), None, "a scalar may go on in the next piece");
/// ```
#[must_use]
pub fn value_end_in_piece(b: &[u8], start: usize) -> Option<usize> {
    let end = value_end(b, start, usize::MAX)?;
    let scalar = !matches!(b[start], b'"' | b'[' | b'{');
    (!scalar || end < b.len()).then_some(end)
}

/// Just past the scalar starting at `start`: the next `,`, `}`, `]` or whitespace, or the end.
fn scalar_end(b: &[u8], start: usize) -> usize {
    b[start..]
        .iter()
        .position(|&c| matches!(c, b',' | b'}' | b']') || is_whitespace(c))
        .map_or(b.len(), |len| start + len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The byte-at-a-time end of the value at `start`, with no depth limit.
    fn naive_end(b: &[u8], start: usize) -> Option<usize> {
        let (mut depth, mut at, mut in_string) = (0_i64, start, false);
        let first = *b.get(start)?;
        if !matches!(first, b'"' | b'[' | b'{') {
            return Some(scalar_end(b, start));
        }
        while let Some(&c) = b.get(at) {
            if in_string {
                match c {
                    b'\\' => at += 1,
                    b'"' => {
                        in_string = false;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
            } else {
                match c {
                    b'"' => in_string = true,
                    b'[' | b'{' => depth += 1,
                    b']' | b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
            }
            at += 1;
        }
        None
    }

    proptest! {
        #[test]
        fn value_end_is_the_byte_at_a_time_end(
            text in proptest::collection::vec(
                prop_oneof![Just(b'"'), Just(b'\\'), Just(b'['), Just(b']'), Just(b'{'),
                            Just(b'}'), Just(b','), Just(b' '), Just(b'a'), Just(b'1')],
                0..40,
            ),
        ) {
            for start in 0..text.len() {
                prop_assert_eq!(value_end(&text, start, usize::MAX), naive_end(&text, start));
            }
        }
    }

    #[test]
    fn whitespace_is_the_four_bytes_json_names() {
        let ws: Vec<u8> = (0..=255_u8).filter(|&b| is_whitespace(b)).collect();
        assert_eq!(ws, b"\t\n\r ");
    }

    #[test]
    fn depth_is_counted_to_the_limit_and_no_further() {
        assert_eq!(value_end(b"[[[]]]", 0, 3), Some(6));
        assert_eq!(value_end(b"[[[]]]", 0, 2), None);
        assert_eq!(
            value_end(b"[\"]\"]", 0, 1),
            Some(5),
            "a bracket in a string is text"
        );
    }
}
