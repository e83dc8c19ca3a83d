//! Python's `repr` of a string, for error messages that quote ids as the reference does.

/// Python's `repr(s)` for a `str`: `'a1'`, or `"it's"` when only double quotes avoid escaping.
///
/// Used only in human messages, so that an id prints exactly as the reference prints it.
///
/// ```
/// assert_eq!(cutctx_model::py_repr_str("a1"), "'a1'");
/// assert_eq!(cutctx_model::py_repr_str("it's"), "\"it's\"");
/// assert_eq!(cutctx_model::py_repr_str("a\nb"), "'a\\nb'");
/// ```
#[must_use]
pub fn py_repr_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    use super::py_repr_str;

    #[test]
    fn python_repr_quote_choice_and_escapes() {
        assert_eq!(py_repr_str(""), "''");
        assert_eq!(py_repr_str("both ' and \""), "'both \\' and \"'");
        assert_eq!(py_repr_str("\u{1}"), "'\\x01'");
        assert_eq!(py_repr_str("é"), "'é'");
    }
}
