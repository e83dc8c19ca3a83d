//! A structural scan of a request document: where its `transcript` array opens and where
//! each value ends, found without building anything.
//!
//! The scan is a guide, not a judge: it lexes strings exactly as JSON does (a string opens at
//! a `"` outside a string, `\` escapes the byte after it, the next unescaped `"` closes it) and
//! counts brackets outside strings, but it does not check that the text is JSON. Whoever uses
//! its positions parses what lies between them strictly. Every function answers `None` both
//! for text it cannot follow and for text that ends too early: a reader with more to come
//! reads on and asks again.

/// Where `b`'s top-level `transcript` array opens (its `[`), when `b` opens an object
/// holding, under the key spelled `"transcript"` without escapes, an array. `None` when the
/// scan meets anything else (another shape, an escaped key) or `b` ends first.
pub(super) fn array_start(b: &[u8]) -> Option<usize> {
    let mut i = ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i = ws(b, i + 1);
    loop {
        if b.get(i) != Some(&b'"') {
            return None;
        }
        let key_end = cutctx_json::lex::string_end(b, i)?;
        let is_transcript = &b[i..key_end] == b"\"transcript\"";
        i = ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = ws(b, i + 1);
        if is_transcript {
            // The first such key: a second one is the strict parse's to refuse.
            return (b.get(i) == Some(&b'[')).then_some(i);
        }
        i = ws(b, value_end(b, i)?);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            _ => return None,
        }
    }
}

/// The first position at or after `i` that is not JSON whitespace.
pub(super) fn ws(b: &[u8], i: usize) -> usize {
    cutctx_json::lex::skip_whitespace(b, i)
}

/// Just after the value opening at `i` ([`cutctx_json::lex::value_end_in_piece`]): a scalar
/// that reaches the end of `b` may go on in the next piece.
pub(super) fn value_end(b: &[u8], i: usize) -> Option<usize> {
    cutctx_json::lex::value_end_in_piece(b, i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_array_and_each_value_whatever_strings_hold() {
        let text = r#" { "budget" : {"max_tokens": [1, {"x": "]}"}]}, "transcript" : [ {"a": "},{\"\\"} , {"b":{"c":[]}} ] , "z": 1 } "#;
        let b = text.as_bytes();
        let start = array_start(b).expect("an array");
        assert_eq!(b[start], b'[');
        let first = ws(b, start + 1);
        let end = value_end(b, first).expect("first element");
        assert_eq!(&text[first..end], r#"{"a": "},{\"\\"}"#);
        let second = ws(b, ws(b, end) + 1);
        let end = value_end(b, second).expect("second element");
        assert_eq!(&text[second..end], r#"{"b":{"c":[]}}"#);
        assert_eq!(value_end(b"12 ", 0), Some(2));
        assert_eq!(
            value_end(b"12", 0),
            None,
            "a scalar may go on in the next piece"
        );
    }

    #[test]
    fn long_strings_are_searched_word_by_word() {
        for n in 0..40 {
            let body = "x".repeat(n);
            let text = format!(r#"{{"c":"{body}\"{body}"}},"#);
            assert_eq!(value_end(text.as_bytes(), 0), Some(text.len() - 1), "{n}");
            assert_eq!(
                value_end(&text.as_bytes()[..text.len() - 3], 0),
                None,
                "{n}"
            );
        }
    }

    #[test]
    fn anything_else_has_no_array() {
        for text in [
            "",
            "[]",
            r#"{"transcript":{}}"#,
            r#"{"transcript":1}"#,
            r#"{"transcr\u0069pt":[{"a":1}]}"#,
            r#"{"budget":1 "transcript":[]}"#,
            r#"{"budget":"#,
            r#"{"budget":"[\"transcript\":[]"#,
        ] {
            assert_eq!(array_start(text.as_bytes()), None, "{text}");
        }
    }
}
