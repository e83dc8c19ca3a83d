//! String escaping as Python's `json.dumps(..., ensure_ascii=False)` writes it.
//!
//! Only `"`, `\` and U+0000..U+001F are escaped: `\n`, `\r`, `\t`, `\b`, `\f` by name, the rest
//! as `\u00xx` in **lower-case** hex. Everything else, `/`, U+007F, U+2028 and all non-ASCII
//! included, is written as it is. Every byte that needs an escape is ASCII, so the escapes
//! never split a UTF-8 sequence: text may be cut at any escape, and before or after any byte of
//! a run, without harm.
//!
//! Tool output is long and mostly plain, so both routines here look at eight bytes at a time:
//! [`escape_mask`] flags the bytes of a word that need an escape, and a 256-entry table gives
//! each escape. [`for_each_piece`] hands out runs and escapes as `&str`s, for any sink;
//! [`escape_words`] writes straight into a byte buffer with eight-byte stores, for sinks that
//! own one (a `Vec<u8>`, a hasher's buffer).

/// Calls `put` with the pieces of `text` escaped, in order: the runs that need no escape and
/// each escape. Writes no quotes.
///
/// ```
/// let mut out = String::new();
/// cutctx_json::escape::for_each_piece("a\"b\u{1}é", |piece| out.push_str(piece));
/// assert_eq!(out, "a\\\"b\\u0001é");
/// ```
#[inline]
pub fn for_each_piece(text: &str, mut put: impl FnMut(&str)) {
    let bytes = text.as_bytes();
    let mut start = 0;
    let mut at = 0;
    while at + 8 <= bytes.len() {
        let mut word = [0_u8; 8];
        word.copy_from_slice(&bytes[at..at + 8]);
        let mut mask = escape_mask(u64::from_le_bytes(word));
        while mask != 0 {
            // Little-endian: bit 8k + 7 of the mask flags byte k.
            let i = at + (mask.trailing_zeros() / 8) as usize;
            // `i` holds an ASCII byte, so both cuts fall on char boundaries.
            put(&text[start..i]);
            put(escape_str(bytes[i]));
            start = i + 1;
            mask &= mask - 1;
        }
        at += 8;
    }
    for (i, &b) in bytes.iter().enumerate().skip(at) {
        if needs_escape(b) {
            put(&text[start..i]);
            put(escape_str(b));
            start = i + 1;
        }
    }
    put(&text[start..]);
}

/// Appends `bytes` escaped to `out`, no quotes. `bytes` need not be valid UTF-8: no byte of a
/// multi-byte sequence is escaped, so generalized UTF-8 (lone surrogates in their three-byte
/// form) passes through as it is.
///
/// ```
/// let mut out = Vec::new();
/// cutctx_json::escape::escape_into_vec(&mut out, b"\xed\xa0\x80\n");
/// assert_eq!(out, b"\xed\xa0\x80\\n");
/// ```
#[inline]
pub fn escape_into_vec(out: &mut Vec<u8>, bytes: &[u8]) {
    if let Some(plain) = short_and_plain(bytes) {
        out.extend_from_slice(plain);
        return;
    }
    let mut rest = bytes;
    while !rest.is_empty() {
        // Room for the bytes and some escapes; `escape_words` stops where room runs out.
        let start = out.len();
        out.resize(start + rest.len() + rest.len() / 4 + ROOM_PER_WORD, 0);
        let (end, taken) = escape_words(out, start, rest);
        out.truncate(end);
        rest = &rest[taken..];
    }
}

/// `bytes` itself when it is short and needs no escape: ids and names, the common case, take
/// one check and one copy.
///
/// ```
/// use cutctx_json::escape::short_and_plain;
/// assert_eq!(short_and_plain(b"turn-7"), Some(&b"turn-7"[..]));
/// assert_eq!(short_and_plain(b"a\nb"), None);
/// ```
#[inline]
#[must_use]
pub fn short_and_plain(bytes: &[u8]) -> Option<&[u8]> {
    (bytes.len() <= 32 && !bytes.iter().any(|&b| needs_escape(b))).then_some(bytes)
}

/// The room [`escape_words`] needs past `at` to take one more word: eight bytes escaped to six
/// each, and the eight a store writes past the end of what it keeps.
pub const ROOM_PER_WORD: usize = 6 * 8 + 8;

/// Writes `src` escaped into `dst` from `at`, as far as `dst` has room; returns where the
/// output ends and how many bytes of `src` it took. An empty `dst` (from `at`) of at least
/// [`ROOM_PER_WORD`] bytes always takes something.
///
/// The text goes eight bytes at a time, and every write is an eight-byte store: a word is
/// stored whole, and when its [`escape_mask`] flags bytes, each escape is stored over the
/// word's rest and the rest stored again after it. A store may write past the output's end;
/// later stores overwrite that, and the caller keeps only `..end`. Cutting `src` anywhere is
/// safe: every byte of a multi-byte UTF-8 sequence is at least 0x80, and no such byte is
/// escaped.
///
/// ```
/// use cutctx_json::escape::{ROOM_PER_WORD, escape_words};
/// let mut buf = vec![0; 64 + ROOM_PER_WORD];
/// let (end, taken) = escape_words(&mut buf, 0, b"tab\there");
/// assert_eq!((&buf[..end], taken), (&b"tab\\there"[..], 8));
/// ```
#[inline]
#[must_use]
pub fn escape_words(dst: &mut [u8], mut at: usize, src: &[u8]) -> (usize, usize) {
    let mut taken = 0;
    while taken + 8 <= src.len() && at + ROOM_PER_WORD <= dst.len() {
        let mut word = [0_u8; 8];
        word.copy_from_slice(&src[taken..taken + 8]);
        taken += 8;
        let x = u64::from_le_bytes(word);
        dst[at..at + 8].copy_from_slice(&word);
        let mut mask = escape_mask(x);
        // Bytes of `word` before `from` are written; those from `from` on sit at `at`.
        let mut from = 0;
        while mask != 0 {
            // Little-endian: bit 8k + 7 of the mask flags byte k.
            let i = (mask.trailing_zeros() / 8) as usize;
            at += i - from;
            // Only the low byte is wanted: the cast truncates on purpose.
            let (sequence, len) = ESCAPES[usize::from((x >> (8 * i)) as u8)];
            dst[at..at + 8].copy_from_slice(&sequence.to_le_bytes());
            at += usize::from(len);
            from = i + 1;
            let rest = if from < 8 { x >> (8 * from) } else { 0 };
            dst[at..at + 8].copy_from_slice(&rest.to_le_bytes());
            mask &= mask - 1;
        }
        at += 8 - from;
    }
    if taken + 8 > src.len() {
        // The tail, shorter than a word, byte by byte.
        while taken < src.len() && at + 6 <= dst.len() {
            let b = src[taken];
            taken += 1;
            if needs_escape(b) {
                let escape = escape_str(b).as_bytes();
                dst[at..at + escape.len()].copy_from_slice(escape);
                at += escape.len();
            } else {
                dst[at] = b;
                at += 1;
            }
        }
    }
    (at, taken)
}

/// For eight bytes read as a little-endian word: 0x80 in each byte JSON must escape (below
/// 0x20, `"` or `\\`), 0 in the others.
///
/// ```
/// let word = u64::from_le_bytes(*b"ab\"cdef\n");
/// assert_eq!(cutctx_json::escape::escape_mask(word), 0x8000_0000_0080_0000);
/// ```
#[inline]
#[must_use]
pub const fn escape_mask(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    /// 0x80 in each zero byte of `v`, exactly: the sum of two 7-bit halves cannot carry
    /// into the next byte.
    const fn zero_bytes(v: u64) -> u64 {
        !(((v & LOW7) + LOW7) | v | LOW7)
    }
    zero_bytes(x & (ONES * 0xe0))
        | zero_bytes(x ^ (ONES * b'"' as u64))
        | zero_bytes(x ^ (ONES * b'\\' as u64))
}

/// Whether JSON must escape `b`: a control byte, `"` or `\\`.
///
/// ```
/// use cutctx_json::escape::needs_escape;
/// assert!(needs_escape(b'"') && needs_escape(0x1f));
/// assert!(!needs_escape(b'/') && !needs_escape(0x7f) && !needs_escape(0xc3));
/// ```
#[inline]
#[must_use]
pub const fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// The escape of `b`, one of the bytes [`needs_escape`] names: by name where Python has
/// one, else `\u00xx` in lower-case hex.
fn escape_str(b: u8) -> &'static str {
    debug_assert!(needs_escape(b), "only escaped bytes are looked up");
    match b {
        b'"' => "\\\"",
        b'\\' => "\\\\",
        // The other escaped bytes are the controls, below 0x20: the mask keeps them as they are.
        _ => CONTROLS[usize::from(b & 0x1f)],
    }
}

/// The escapes of U+0000..U+001F, as Python writes them.
const CONTROLS: [&str; 32] = [
    "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007", "\\b",
    "\\t", "\\n", "\\u000b", "\\f", "\\r", "\\u000e", "\\u000f", "\\u0010", "\\u0011", "\\u0012",
    "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017", "\\u0018", "\\u0019", "\\u001a",
    "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f",
];

/// [`escape_str`] for every byte, as a little-endian word and a length, so that the loop over
/// escapes reads a table instead of branching on the byte. Bytes needing no escape map to
/// themselves and are never looked up.
static ESCAPES: [(u64, u8); 256] = {
    let mut table = [(0_u64, 1_u8); 256];
    let mut b = 0;
    while b < 256 {
        // `b` is below 256, so the cast cannot truncate.
        let byte = b as u8;
        table[b] = if needs_escape(byte) {
            let escape = match byte {
                b'"' => "\\\"".as_bytes(),
                b'\\' => "\\\\".as_bytes(),
                _ => CONTROLS[b].as_bytes(),
            };
            let mut sequence = [0_u8; 8];
            let mut i = 0;
            while i < escape.len() {
                sequence[i] = escape[i];
                i += 1;
            }
            // An escape is at most six bytes long.
            (u64::from_le_bytes(sequence), escape.len() as u8)
        } else {
            (byte as u64, 1)
        };
        b += 1;
    }
    table
};

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Both routines' output for `text`, checked equal to each other.
    fn escaped(text: &str) -> String {
        let mut pieces = String::new();
        for_each_piece(text, |p| pieces.push_str(p));
        let mut bytes = Vec::new();
        escape_into_vec(&mut bytes, text.as_bytes());
        assert_eq!(pieces.as_bytes(), bytes.as_slice(), "{text:?}");
        pieces
    }

    /// `serde_json`'s escaping, which equals Python's byte for byte, without the quotes.
    fn expected(text: &str) -> String {
        let quoted = serde_json::to_string(text).expect("a string serializes");
        quoted[1..quoted.len() - 1].to_owned()
    }

    #[test]
    fn python_escapes_named_controls_by_name_and_others_in_lower_case() {
        assert_eq!(escaped("\n\r\t\u{8}\u{c}"), r"\n\r\t\b\f");
        assert_eq!(escaped("a\"b\\c"), r#"a\"b\\c"#);
        assert_eq!(
            escaped("\u{0}\u{1f}\u{1b}\u{b}"),
            r"\u0000\u001f\u001b\u000b"
        );
        assert_eq!(
            escaped("/\u{7f}\u{2028}\u{2029}é中😀"),
            "/\u{7f}\u{2028}\u{2029}é中😀"
        );
    }

    #[test]
    fn the_tables_agree_with_each_other_for_every_byte() {
        for b in (0_u8..=255).filter(|&b| needs_escape(b)) {
            let (sequence, len) = ESCAPES[usize::from(b)];
            let from_table = &sequence.to_le_bytes()[..usize::from(len)];
            assert_eq!(from_table, escape_str(b).as_bytes(), "{b:#04x}");
        }
    }

    #[test]
    fn word_scan_escapes_every_byte_class_at_every_offset() {
        // Offsets 0..17 put the byte in the first word, the second, and the tail.
        for c in (0_u8..0x80).map(char::from).chain(['é', '\u{2028}', '€']) {
            for at in 0..17 {
                let mut text: Vec<char> = vec!['a'; 17];
                text[at] = c;
                let text: String = text.into_iter().collect();
                assert_eq!(escaped(&text), expected(&text), "{c:?} at {at}");
            }
        }
    }

    #[test]
    fn long_and_escape_dense_strings_escape_like_serde_json() {
        let patterns: [&str; 5] = [
            "plain text ",
            "\"q\"\n",
            "\u{1}",
            "é\\€\t",
            "ab\u{1f}cdefgh\"",
        ];
        for size in [0, 1, 7, 8, 9, 31, 32, 33, 100, 4095, 70_000] {
            for pattern in patterns {
                let text: String = pattern.chars().cycle().take(size).collect();
                assert_eq!(escaped(&text), expected(&text), "{size} of {pattern:?}");
            }
        }
    }

    #[test]
    fn lone_surrogate_bytes_pass_through_unchanged() {
        let mut out = Vec::new();
        escape_into_vec(&mut out, b"\xed\xb0\x80x\"\xed\xa0\xbd");
        assert_eq!(out, b"\xed\xb0\x80x\\\"\xed\xa0\xbd");
    }

    proptest! {
        #[test]
        fn word_scan_escapes_like_serde_json(
            chars in proptest::collection::vec(
                prop_oneof![
                    4 => (0x20_u8..0x7f).prop_map(char::from),
                    1 => Just('"'),
                    1 => Just('\\'),
                    1 => (0_u8..0x20).prop_map(char::from),
                    1 => Just('é'),
                ],
                0..48,
            )
        ) {
            let text: String = chars.into_iter().collect();
            prop_assert_eq!(escaped(&text), expected(&text));
        }

        #[test]
        fn any_string_escapes_like_serde_json(text in any::<String>()) {
            prop_assert_eq!(escaped(&text), expected(&text));
        }
    }
}
