//! Python's `repr` of a `str`, for messages that quote text exactly as CPython does.

/// Ranges of code points CPython does not print, sorted: categories Cc, Cf, Cs, Co, Zl, Zp,
/// Zs other than the space, and the unassigned (Cn) ranges that stay unassigned across the
/// Unicode versions of Python 3.8 to 3.13. Scattered unassigned code points inside assigned
/// blocks are not listed, so they print raw where CPython escapes them; [`py_printable`] says
/// so where it is documented.
const NON_PRINTABLE: &[(u32, u32)] = &[
    (0x0000, 0x001F),
    (0x007F, 0x00A0),
    (0x00AD, 0x00AD),
    (0x0378, 0x0379),
    (0x0380, 0x0383),
    (0x038B, 0x038B),
    (0x038D, 0x038D),
    (0x03A2, 0x03A2),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x1680, 0x1680),
    (0x180E, 0x180E),
    (0x2000, 0x200F),
    (0x2028, 0x202F),
    (0x205F, 0x2064),
    (0x2065, 0x2065),
    (0x2066, 0x206F),
    (0x3000, 0x3000),
    (0xD800, 0xF8FF),
    (0xFDD0, 0xFDEF),
    (0xFEFF, 0xFEFF),
    (0xFFF0, 0xFFFB),
    (0xFFFE, 0xFFFF),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE00FF),
    (0xE01F0, 0x10FFFF),
];

/// Whether CPython's `str.isprintable` holds for the code point `c` (surrogates included), up
/// to the unassigned code points scattered inside assigned blocks, which count as printable
/// here.
///
/// ```
/// use cutctx_json::py_printable;
/// assert!(py_printable(u32::from('a')) && py_printable(u32::from(' ')) && py_printable(0xe9));
/// assert!(!py_printable(0xa0) && !py_printable(0x2028) && !py_printable(0xd800));
/// ```
#[must_use]
pub fn py_printable(c: u32) -> bool {
    if c == 0x20 {
        return true;
    }
    // Noncharacters at the end of every plane, and the wholly unassigned planes 4 to 13.
    if c & 0xFFFE == 0xFFFE || (0x40000..=0xDFFFF).contains(&c) {
        return false;
    }
    let i = NON_PRINTABLE.partition_point(|&(_, hi)| hi < c);
    NON_PRINTABLE.get(i).is_none_or(|&(lo, _)| lo > c)
}

/// Python's `repr(s)` for a `str`: `'a1'`, or `"it's"` when only double quotes avoid an
/// escape; `\\`, `\n`, `\r`, `\t` and the chosen quote escaped, other non-printable code
/// points as `\xhh`, `\uhhhh` or `\Uhhhhhhhh`.
///
/// ```
/// use cutctx_json::py_repr_str;
/// assert_eq!(py_repr_str("a1"), "'a1'");
/// assert_eq!(py_repr_str("it's"), "\"it's\"");
/// assert_eq!(py_repr_str("a\nb\u{a0}"), "'a\\nb\\xa0'");
/// ```
#[must_use]
pub fn py_repr_str(s: &str) -> String {
    py_repr(s.chars().map(u32::from))
}

/// [`py_repr_str`] of a Python string given as code points, lone surrogates included (they
/// are not printable, so they come out as `\udxxx`, as in CPython).
///
/// ```
/// use cutctx_json::py_repr;
/// assert_eq!(py_repr([0x61, 0xd800].into_iter()), "'a\\ud800'");
/// ```
#[must_use]
pub fn py_repr(code_points: impl Iterator<Item = u32> + Clone) -> String {
    let (mut has_single, mut has_double) = (false, false);
    for c in code_points.clone() {
        has_single |= c == u32::from('\'');
        has_double |= c == u32::from('"');
    }
    let quote = if has_single && !has_double { '"' } else { '\'' };
    let mut out = String::new();
    out.push(quote);
    for c in code_points {
        match c {
            0x5C => out.push_str("\\\\"),
            0x0A => out.push_str("\\n"),
            0x0D => out.push_str("\\r"),
            0x09 => out.push_str("\\t"),
            c if c == u32::from(quote) => {
                out.push('\\');
                out.push(quote);
            }
            c => match char::from_u32(c).filter(|_| py_printable(c)) {
                Some(printable) => out.push(printable),
                None if c < 0x100 => out.push_str(&format!("\\x{c:02x}")),
                None if c < 0x10000 => out.push_str(&format!("\\u{c:04x}")),
                None => out.push_str(&format!("\\U{c:08x}")),
            },
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_choice_and_short_escapes_match_python() {
        assert_eq!(py_repr_str(""), "''");
        assert_eq!(py_repr_str("x"), "'x'");
        assert_eq!(py_repr_str("it's"), "\"it's\"");
        assert_eq!(py_repr_str("both ' and \""), "'both \\' and \"'");
        assert_eq!(py_repr_str("\""), "'\"'");
        assert_eq!(py_repr_str("a\n\t\r\\"), "'a\\n\\t\\r\\\\'");
        assert_eq!(py_repr_str("é😀中"), "'é😀中'");
    }

    /// `repr(chr(c))` from CPython (the same in 3.8 through 3.13), for code points on both
    /// sides of every kind of boundary the table draws.
    const CPYTHON: &[(u32, &str)] = &[
        (0x00, r"'\x00'"),
        (0x01, r"'\x01'"),
        (0x1F, r"'\x1f'"),
        (0x20, "' '"),
        (0x7E, "'~'"),
        (0x7F, r"'\x7f'"),
        (0x80, r"'\x80'"),
        (0x85, r"'\x85'"),
        (0x9F, r"'\x9f'"),
        (0xA0, r"'\xa0'"),
        (0xA1, "'\u{a1}'"),
        (0xAC, "'\u{ac}'"),
        (0xAD, r"'\xad'"),
        (0xAE, "'\u{ae}'"),
        (0xE9, "'\u{e9}'"),
        (0xFF, "'\u{ff}'"),
        (0x0377, "'\u{377}'"),
        (0x0378, r"'\u0378'"),
        (0x0600, r"'\u0600'"),
        (0x061C, r"'\u061c'"),
        (0x1680, r"'\u1680'"),
        (0x180E, r"'\u180e'"),
        (0x2000, r"'\u2000'"),
        (0x200B, r"'\u200b'"),
        (0x2010, "'\u{2010}'"),
        (0x2028, r"'\u2028'"),
        (0x2029, r"'\u2029'"),
        (0x202F, r"'\u202f'"),
        (0x2030, "'\u{2030}'"),
        (0x205F, r"'\u205f'"),
        (0x2060, r"'\u2060'"),
        (0x3000, r"'\u3000'"),
        (0x3001, "'\u{3001}'"),
        (0xD7A3, "'\u{d7a3}'"),
        (0xD800, r"'\ud800'"),
        (0xDFFF, r"'\udfff'"),
        (0xE000, r"'\ue000'"),
        (0xF8FF, r"'\uf8ff'"),
        (0xF900, "'\u{f900}'"),
        (0xFDD0, r"'\ufdd0'"),
        (0xFEFF, r"'\ufeff'"),
        (0xFFFD, "'\u{fffd}'"),
        (0xFFFE, r"'\ufffe'"),
        (0xFFFF, r"'\uffff'"),
        (0x1F600, "'\u{1f600}'"),
        (0x1FFFE, r"'\U0001fffe'"),
        (0x40000, r"'\U00040000'"),
        (0xE0001, r"'\U000e0001'"),
        (0xF0000, r"'\U000f0000'"),
        (0x10FFFF, r"'\U0010ffff'"),
    ];

    #[test]
    fn printability_matches_cpython_at_every_boundary() {
        for &(c, want) in CPYTHON {
            assert_eq!(py_repr([c].into_iter()), want, "U+{c:04X}");
            if let Some(ch) = char::from_u32(c) {
                assert_eq!(py_repr_str(&ch.to_string()), want, "U+{c:04X} as a str");
            }
        }
    }
}
