//! Decoding one escape of a JSON string, for the readers that walk strings by hand (the
//! request document's record reader, the provider formats' message reader): one strict
//! decoder, shared, so that both accept and refuse exactly the same escapes.

/// Decodes the escape whose letter (the byte after the backslash) is at `at` in `b`, pushing
/// the character onto `out`; returns where the string goes on after it.
///
/// Strict: `None` for an unknown letter, a `\u` without four hex digits, and a lone surrogate
/// (a high one not followed by `\u` and a low one, or a low one alone). A reader that gets
/// `None` leaves the string to a full parser, which says what is wrong.
///
/// ```
/// use cutctx_json::decode_escape;
/// let mut out = String::new();
/// assert_eq!(decode_escape(br#"\n"#, 1, &mut out), Some(2));
/// assert_eq!(decode_escape(br#"\ud83d\ude00!"#, 1, &mut out), Some(12));
/// assert_eq!(out, "\n\u{1F600}");
/// assert_eq!(decode_escape(br#"\ud83d!"#, 1, &mut out), None); // a lone high surrogate
/// ```
#[inline]
#[must_use]
pub fn decode_escape(b: &[u8], at: usize, out: &mut String) -> Option<usize> {
    let (c, end) = escaped_char(b, at)?;
    out.push(c);
    Some(end)
}

/// Decodes `written` (a string's text between its quotes, as a JSON text writes it) onto
/// `out`: `None` at an escape that does not decode (see [`decode_escape`]) and at a quote or
/// control byte standing raw, which no JSON string holds.
///
/// ```
/// use cutctx_json::decode_written;
/// let mut out = String::new();
/// assert_eq!(decode_written(r#"a\"b\u00e9\/"#, &mut out), Some(()));
/// assert_eq!(out, "a\"bé/");
/// assert_eq!(decode_written("a\"b", &mut out), None);
/// ```
#[must_use]
pub fn decode_written(written: &str, out: &mut String) -> Option<()> {
    let b = written.as_bytes();
    let mut at = 0;
    loop {
        let n = crate::first_special(b.get(at..)?, true).unwrap_or(b.len() - at);
        out.push_str(written.get(at..at + n)?);
        at += n;
        match b.get(at) {
            None => return Some(()),
            Some(b'\\') => at = decode_escape(b, at + 1, out)?,
            Some(_) => return None,
        }
    }
}

/// Whether `escape` (the backslash to the end of the escape, as written), standing for `c`, is
/// how the canonical writer escapes `c`: by name where JSON has one (`\"`, `\\`, `\n`, `\r`,
/// `\t`, `\b`, `\f`), as `\u00xx` in lower-case hex for the other control characters, and not
/// at all for anything else (`\/` included). A string whose every escape is canonical is
/// already its own canonical literal, and can be copied or hashed as written.
///
/// ```
/// use cutctx_json::is_canonical_escape;
/// assert!(is_canonical_escape('\n', br"\n"));
/// assert!(is_canonical_escape('\u{1f}', br"\u001f"));
/// assert!(!is_canonical_escape('\u{1f}', br"\u001F")); // upper-case hex
/// assert!(!is_canonical_escape('A', br"\u0041")); // needs no escape
/// assert!(!is_canonical_escape('/', br"\/"));
/// ```
#[must_use]
pub fn is_canonical_escape(c: char, escape: &[u8]) -> bool {
    match escape.get(1) {
        Some(b'/') => false,
        Some(b'u') => {
            c < ' '
                && !matches!(c, '\u{8}' | '\t' | '\n' | '\u{c}' | '\r')
                && !escape.iter().any(u8::is_ascii_uppercase)
        }
        _ => true,
    }
}

/// As [`decode_escape`], the character returned instead of pushed: for a reader that checks
/// and counts a string's characters without writing them out.
///
/// ```
/// use cutctx_json::escaped_char;
/// assert_eq!(escaped_char(br#"\u00e9"#, 1), Some(('é', 6)));
/// assert_eq!(escaped_char(br#"\ude00"#, 1), None); // a lone low surrogate
/// ```
#[inline]
#[must_use]
pub fn escaped_char(b: &[u8], at: usize) -> Option<(char, usize)> {
    let c = match *b.get(at)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let unit = hex4(b, at + 1)?;
            if (0xD800..0xDC00).contains(&unit) {
                // A high surrogate: a low one must follow, as `\uXXXX`.
                if b.get(at + 5..at + 7) != Some(b"\\u") {
                    return None;
                }
                let low = hex4(b, at + 7)?;
                if !(0xDC00..0xE000).contains(&low) {
                    return None;
                }
                let c = char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))?;
                return Some((c, at + 11));
            }
            // A lone low surrogate is no `char`: refused here.
            return Some((char::from_u32(unit)?, at + 5));
        }
        _ => return None,
    };
    Some((c, at + 1))
}

/// The four hex digits at `at`, as a number.
fn hex4(b: &[u8], at: usize) -> Option<u32> {
    b.get(at..at + 4)?.iter().try_fold(0_u32, |n, &c| {
        let d = char::from(c).to_digit(16)?;
        Some(n * 16 + d)
    })
}

#[cfg(test)]
mod tests {
    use super::decode_escape;

    fn decoded(escaped: &str) -> Option<(String, usize)> {
        let mut out = String::new();
        decode_escape(escaped.as_bytes(), 1, &mut out).map(|end| (out, end))
    }

    #[test]
    fn every_escape_decodes_as_serde_json_reads_it() {
        for escaped in [
            r#"\""#,
            r"\\",
            r"\/",
            r"\b",
            r"\f",
            r"\n",
            r"\r",
            r"\t",
            r"\u0041",
            r"\u00e9",
            r"\uFFFF",
            r"\u0000",
            r"\ud83d\ude00",
            r"\uD83D\uDE00",
        ] {
            let (out, end) = decoded(escaped).unwrap_or_else(|| panic!("{escaped} decodes"));
            let expected: String =
                serde_json::from_str(&format!("\"{escaped}\"")).expect("valid JSON");
            assert_eq!((out, end), (expected, escaped.len()), "{escaped}");
        }
    }

    #[test]
    fn what_a_strict_parser_refuses_is_refused() {
        for escaped in [
            r"\x",
            r"\u12",
            r"\u12G4",
            r"\ud83d",
            r"\ud83d\n",
            r"\ud83d\u0041",
            r"\ude00",
            r"\ud83d\ud83d",
            "\\",
        ] {
            assert_eq!(decoded(escaped), None, "{escaped}");
        }
    }
}
