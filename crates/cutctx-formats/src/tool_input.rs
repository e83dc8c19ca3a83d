//! A tool call's JSON input as a turn's text holds it, written straight from the request.
//!
//! A turn's text holds a JSON value the model reads verbatim (an Anthropic `tool_use` block's
//! `input`) as `serde_json` writes the parsed value: compact, an object's keys in order. Most
//! inputs are small objects of strings, numbers and booleans whose keys are in order already.
//! For those, [`plain_object`] writes that text from the request's own, without building the
//! value (a map, a string for each key and value, then the writing, most of what a turn that
//! calls a tool cost). Anything else is declined, and the caller parses it as before.

use std::borrow::Cow;

/// The most digits of an integer taken as it is written: every such integer fits a `u64`, which
/// `serde_json` writes back digit for digit.
const MAX_DIGITS: usize = 18;

/// The text `serde_json::Value`'s `Display` gives for the JSON value `text` (a value as the
/// request spells it, with or without whitespace around its tokens), when that text is an
/// object whose keys strictly increase and whose members are strings, integers of at most 18
/// digits without a sign, booleans or null, no key or string holding a backslash or a control
/// character. Each token then stands for itself, and the text is the request's without its
/// whitespace: `{"a": "x", "b": 7}` gives `{"a":"x","b":7}`, and `{"b": 1, "a": 2}` (which
/// the value path writes with its keys sorted) gives `None`, as does anything else, any text
/// that is not JSON included.
pub(crate) fn plain_object(text: &str) -> Option<Cow<'_, str>> {
    let b = text.as_bytes();
    let mut at = whitespace(b, 0);
    if b.get(at) != Some(&b'{') {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    out.push('{');
    at = whitespace(b, at + 1);
    if b.get(at) == Some(&b'}') {
        at += 1;
    } else {
        let mut previous: Option<&str> = None;
        loop {
            let (key, next) = plain_string(text, at)?;
            // The contents compared, not the literals: a closing quote sorts after a space.
            let inner = &key[1..key.len() - 1];
            if previous.is_some_and(|p| p >= inner) {
                return None;
            }
            previous = Some(inner);
            out.push_str(key);
            at = whitespace(b, next);
            if b.get(at) != Some(&b':') {
                return None;
            }
            out.push(':');
            at = whitespace(b, at + 1);
            let (value, next) = plain_scalar(text, at)?;
            out.push_str(value);
            at = whitespace(b, next);
            match b.get(at) {
                Some(b',') => {
                    out.push(',');
                    at = whitespace(b, at + 1);
                }
                Some(b'}') => {
                    at += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    out.push('}');
    if whitespace(b, at) != b.len() {
        return None;
    }
    // Nothing was left out: the text was compact already.
    Some(if out.len() == text.len() {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(out)
    })
}

/// Past the JSON whitespace from `at`.
fn whitespace(b: &[u8], at: usize) -> usize {
    cutctx_json::lex::skip_whitespace(b, at)
}

/// The string literal at `at`, quotes included, and where it ends, when it holds neither a
/// backslash nor a control character (its text is then its value).
fn plain_string(text: &str, at: usize) -> Option<(&str, usize)> {
    let b = text.as_bytes();
    if b.get(at) != Some(&b'"') {
        return None;
    }
    let mut end = at + 1;
    loop {
        match *b.get(end)? {
            b'"' => break,
            b'\\' | 0..=0x1f => return None,
            _ => end += 1,
        }
    }
    // Both cuts are at ASCII quotes, so on character boundaries.
    Some((text.get(at..=end)?, end + 1))
}

/// The scalar at `at` that is written as it is read (see [`plain_object`]), and where it ends.
fn plain_scalar(text: &str, at: usize) -> Option<(&str, usize)> {
    let b = text.as_bytes();
    let end = match *b.get(at)? {
        b'"' => return plain_string(text, at),
        b't' if b[at..].starts_with(b"true") => at + 4,
        b'f' if b[at..].starts_with(b"false") => at + 5,
        b'n' if b[at..].starts_with(b"null") => at + 4,
        b'0' => at + 1,
        b'1'..=b'9' => {
            let digits = b[at..].iter().take_while(|d| d.is_ascii_digit()).count();
            if digits > MAX_DIGITS {
                return None;
            }
            at + digits
        }
        _ => return None,
    };
    // Whatever follows must end the member (`1.5`, `01`, `truex` are not taken): the caller
    // accepts only whitespace, a comma or the closing brace there.
    Some((text.get(at..end)?, end))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::Value;

    use super::plain_object;

    /// What the value path writes for `text`: parsed, then written by `Display`.
    fn written(text: &str) -> Option<String> {
        serde_json::from_str::<Value>(text)
            .ok()
            .map(|v| v.to_string())
    }

    #[test]
    fn plain_objects_are_written_as_the_value_path_writes_them() {
        for text in [
            "{}",
            " { } ",
            r#"{"path":"logs/build-7.txt"}"#,
            r#"{"path": "logs/build-7.txt", "recursive": true}"#,
            "{\n  \"a\": 0,\n\t\"b\": 123456789012345678,\r\n \"c\": null, \"d\": false\n}",
            r#"{"": "empty key", "a": "é 😀 \u{2028}", "b": "/\u007f"}"#,
            r#"{"a": "x", "a ": "y", "a!": "z"}"#,
        ] {
            let ours = plain_object(text).map(|t| t.into_owned());
            assert_eq!(ours, written(text), "{text}");
        }
    }

    #[test]
    fn a_compact_object_is_borrowed() {
        let text = r#"{"a":"x","b":1}"#;
        assert!(matches!(plain_object(text), Some(std::borrow::Cow::Borrowed(t)) if t == text));
    }

    #[test]
    fn anything_else_is_declined() {
        for text in [
            r#"{"b": 1, "a": 2}"#,           // keys out of order: the value path sorts them
            r#"{"a": 1, "a": 2}"#,           // a repeated key: the value path keeps the last
            r#"{"a": "line\nbreak"}"#,       // an escape: the value path may write it otherwise
            r#"{"a\u0062": 1}"#,             // an escaped key
            r#"{"a": 1.5}"#,                 // a float
            r#"{"a": -1}"#,                  // a sign
            r#"{"a": 1e3}"#,                 // an exponent
            r#"{"a": 1234567890123456789}"#, // 19 digits
            r#"{"a": 01}"#,                  // a leading zero: not JSON
            r#"{"a": [1]}"#,                 // nested
            r#"{"a": {"b": 1}}"#,            // nested
            r#"{"a": truex}"#,               // not JSON
            r#"{"a": 1,}"#,                  // a trailing comma
            r#"{"a" 1}"#,                    // no colon
            r#"{"a": 1} x"#,                 // text after the object
            r#"{"a": 1"#,                    // cut short
            "\"a string\"",                  // not an object
            "[1, 2]",
            "null",
            "{\"a\": \"tab\there\"}", // a raw control character: not JSON
        ] {
            assert_eq!(plain_object(text), None, "{text}");
        }
    }

    /// A member's value as a request may spell it, plain or not.
    fn value() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z /é😀.-]{0,12}".prop_map(|s| format!("\"{s}\"")),
            "[a-z\\\\\"\n]{0,6}".prop_map(|s| serde_json::to_string(&s).unwrap_or_default()),
            (0_u64..u64::MAX).prop_map(|n| n.to_string()),
            (-1000_i64..1000).prop_map(|n| n.to_string()),
            Just("1.5".to_owned()),
            Just("true".to_owned()),
            Just("false".to_owned()),
            Just("null".to_owned()),
            Just("[1,\"a\"]".to_owned()),
            Just("{\"x\":1}".to_owned()),
        ]
    }

    fn space() -> impl Strategy<Value = &'static str> {
        prop_oneof![Just(""), Just(" "), Just("\n  "), Just("\t")]
    }

    proptest! {
        /// Whatever it takes, it writes as the value path does; and it takes every object of
        /// plain members in order.
        #[test]
        fn it_agrees_with_the_value_path(
            members in prop::collection::vec(("[a-c ]{0,3}", value(), space()), 0..6),
        ) {
            let body: Vec<String> = members
                .iter()
                .map(|(k, v, s)| format!("{s}\"{k}\"{s}:{s}{v}{s}"))
                .collect();
            let text = format!("{{{}}}", body.join(","));
            let ours = plain_object(&text).map(|t| t.into_owned());
            if let Some(ours) = &ours {
                prop_assert_eq!(Some(ours.clone()), written(&text));
            }
            let keys: Vec<&str> = members.iter().map(|(k, _, _)| k.as_str()).collect();
            let in_order = keys.windows(2).all(|w| w[0] < w[1]);
            let plain = members.iter().all(|(_, v, _)| {
                let b = v.as_bytes();
                (b.first() == Some(&b'"') && !v.contains('\\'))
                    || matches!(v.as_str(), "true" | "false" | "null")
                    || (b.iter().all(u8::is_ascii_digit) && b.len() <= 18)
            });
            prop_assert_eq!(ours.is_some(), in_order && plain, "{}", text);
        }
    }
}
