//! Canonical JSON and hashing, byte-compatible with the reference's Python.
//!
//! The reference writes `json.dumps(v, sort_keys=True, ensure_ascii=False,
//! separators=(",", ":"), allow_nan=False)`. That means, and this module reproduces:
//!
//! * keys sorted by code point (Rust's `String` order is byte order, which for UTF-8 is the
//!   same thing), no whitespace;
//! * non-ASCII written raw as UTF-8;
//! * only `"`, `\` and U+0000..U+001F escaped: `\n`, `\r`, `\t`, `\b`, `\f` by name, the rest as
//!   `\u00xx` in **lower-case** hex; `/`, U+007F and U+2028/U+2029 left alone;
//! * floats as Python's `repr`: `4.0` not `4`, `1e-05`, `1e+16`, and `-0.0` normalised to `0.0`.
//!
//! `serde_json`'s string escaping already matches Python's byte for byte, so only the float
//! form needs a custom [`PythonFormatter`].
//!
//! [`sha256_of`] hashes the canonical bytes of a value. For a string that is its JSON literal,
//! quotes included: `sha256_of("L")` is the hash of the three bytes `"L"`.

use std::io;

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::fastjson::{HashSink, Sink, put_str};
use crate::{CompactionError, details};

/// A `serde_json` formatter that writes floats as Python's `repr` does.
///
/// Everything else is `serde_json`'s compact format, which already equals Python's.
#[derive(Debug, Clone, Copy, Default)]
pub struct PythonFormatter;

impl serde_json::ser::Formatter for PythonFormatter {
    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        // serde_json never calls this with a non-finite value (it writes `null` instead);
        // the model's types refuse non-finite floats at construction, so none reach here.
        let text = py_float_repr(value).unwrap_or_else(|| "null".to_owned());
        writer.write_all(text.as_bytes())
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        self.write_f64(writer, f64::from(value))
    }
}

/// Python's `repr` of a float, with `-0.0` normalised to `0.0`; `None` when not finite.
///
/// Python prints the shortest digits that round-trip, in positional form when the decimal
/// exponent lies in `-4 <= e < 16`, and in scientific form with a signed, at least two-digit
/// exponent otherwise.
///
/// ```
/// use cutctx_model::canonical::py_float_repr;
/// assert_eq!(py_float_repr(4.0).as_deref(), Some("4.0"));
/// assert_eq!(py_float_repr(1e-5).as_deref(), Some("1e-05"));
/// assert_eq!(py_float_repr(1e16).as_deref(), Some("1e+16"));
/// assert_eq!(py_float_repr(-0.0).as_deref(), Some("0.0"));
/// assert_eq!(py_float_repr(f64::NAN), None);
/// ```
#[must_use]
pub fn py_float_repr(value: f64) -> Option<String> {
    if !value.is_finite() {
        return None;
    }
    if value == 0.0 {
        return Some("0.0".to_owned());
    }
    // Rust's `{:e}` gives the shortest digits that round-trip, as `d.ddddde<exp>`. When two
    // such strings are equally close to the exact value, Rust takes the upper one and Python
    // the even one; formatting again at that length rounds exactly, half to even.
    let shortest = format!("{value:e}");
    let digits_len = shortest
        .split_once('e')
        .map_or(1, |(m, _)| m.chars().filter(char::is_ascii_digit).count());
    let exact = format!("{value:.*e}", digits_len.saturating_sub(1));
    let sci = if exact.parse::<f64>().ok() == Some(value) {
        exact
    } else {
        shortest
    };
    let (mantissa, exp) = sci.split_once('e')?;
    let exp: i32 = exp.parse().ok()?;
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    let ndigits = i32::try_from(digits.len()).ok()?;
    // `decpt`: the value is 0.DIGITS × 10^decpt, Python's own convention.
    let decpt = exp + 1;
    let mut out = String::with_capacity(digits.len() + 8);
    if negative {
        out.push('-');
    }
    if -4 < decpt && decpt <= 16 {
        if decpt <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', usize::try_from(-decpt).ok()?));
            out.push_str(&digits);
        } else if decpt >= ndigits {
            out.push_str(&digits);
            out.extend(std::iter::repeat_n(
                '0',
                usize::try_from(decpt - ndigits).ok()?,
            ));
            out.push_str(".0");
        } else {
            let split = usize::try_from(decpt).ok()?;
            out.push_str(&digits[..split]);
            out.push('.');
            out.push_str(&digits[split..]);
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let e = decpt - 1;
        out.push('e');
        out.push(if e < 0 { '-' } else { '+' });
        let abs = e.unsigned_abs();
        if abs < 10 {
            out.push('0');
        }
        out.push_str(&abs.to_string());
    }
    Some(out)
}

/// The canonical JSON of any serializable value, as a `String` without a trailing newline.
///
/// The value goes through [`serde_json::Value`] first, so keys are sorted whatever order a
/// struct declares its fields in.
///
/// # Errors
///
/// `VALIDATION_ERROR` when the value cannot be represented (a map with non-string keys).
/// Note that `serde_json` turns a non-finite float into `null`; the model's own types never
/// hold one.
///
/// ```
/// use cutctx_model::canonical::canonical_json;
/// let v = serde_json::json!({"b": [1, 2.0, "é\n"], "a": null});
/// assert_eq!(canonical_json(&v).unwrap(), "{\"a\":null,\"b\":[1,2.0,\"é\\n\"]}");
/// ```
pub fn canonical_json<T: Serialize + ?Sized>(value: &T) -> Result<String, CompactionError> {
    let value = serde_json::to_value(value).map_err(|e| {
        CompactionError::validation(
            format!("value has no canonical JSON form: {e}"),
            details! { "error" => e.to_string() },
        )
    })?;
    Ok(canonical_json_value(&value))
}

/// The canonical JSON of a [`serde_json::Value`]. Cannot fail: a `Value` is already sorted
/// and finite.
#[must_use]
pub fn canonical_json_value(value: &Value) -> String {
    let mut out = Vec::with_capacity(256);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PythonFormatter);
    // A `Value` has string keys and finite numbers, and a Vec cannot fail to grow: this
    // cannot fail.
    if value.serialize(&mut ser).is_err() {
        out.clear();
    }
    // serde_json writes valid UTF-8 from valid UTF-8 input.
    String::from_utf8(out).unwrap_or_default()
}

/// Lower-case hex of a SHA-256 digest of `bytes`.
#[must_use]
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The reference's `sha256_of`: the SHA-256 hex of a value's canonical JSON.
///
/// # Errors
///
/// As [`canonical_json`].
///
/// ```
/// use cutctx_model::canonical::sha256_of;
/// // A string is hashed as its JSON literal, quotes included.
/// assert_eq!(
///     sha256_of("L".repeat(1200).as_str()).unwrap(),
///     "d1fd6a834c71465d6eeb3623b9c5a2ac60c49d069ffc469bc131b4ff506e55a2",
/// );
/// ```
pub fn sha256_of<T: Serialize + ?Sized>(value: &T) -> Result<String, CompactionError> {
    Ok(sha256_hex(canonical_json(value)?.as_bytes()))
}

/// `sha256_of(text)` for a string, streamed: hashes the JSON literal of `text` without
/// building it.
///
/// The hasher is fed the runs between bytes that need escaping, and the escapes themselves,
/// so the cost is one pass over the text.
///
/// ```
/// use cutctx_model::canonical::{sha256_of, sha256_of_str};
/// let s = "tab\there \"quoted\" \u{1} é";
/// assert_eq!(sha256_of_str(s), sha256_of(s).unwrap());
/// ```
#[must_use]
pub fn sha256_of_str(text: &str) -> String {
    let mut sink = HashSink::on_stack();
    put_str(&mut sink, text);
    sink.finish_hex()
}

/// [`sha256_of_str`] of `parts` joined by `separator`, streamed: the joined text is never
/// built.
///
/// ```
/// use cutctx_model::canonical::{sha256_of_joined, sha256_of_str};
/// assert_eq!(
///     sha256_of_joined(["a", "b", "c"], "\u{0}"),
///     sha256_of_str("a\u{0}b\u{0}c"),
/// );
/// ```
#[must_use]
pub fn sha256_of_joined<S: AsRef<str>>(
    parts: impl IntoIterator<Item = S>,
    separator: &str,
) -> String {
    let mut escaped_separator: Vec<u8> = Vec::new();
    escaped_separator.put_escaped(separator.as_bytes());
    let mut sink = HashSink::on_heap();
    sink.put(b"\"");
    for (i, part) in parts.into_iter().enumerate() {
        if i > 0 {
            sink.put(&escaped_separator);
        }
        sink.put_escaped(part.as_ref().as_bytes());
    }
    sink.put(b"\"");
    sink.finish_hex()
}

/// Appends [`sha256_of_str`]`(text)` to `out`, for callers building a larger string around
/// the digest without a second allocation.
///
/// ```
/// use cutctx_model::canonical::{push_sha256_of_str, sha256_of_str};
/// let mut stub = String::from("sha256:");
/// push_sha256_of_str(&mut stub, "text");
/// assert_eq!(stub, format!("sha256:{}", sha256_of_str("text")));
/// ```
pub fn push_sha256_of_str(out: &mut String, text: &str) {
    let mut sink = HashSink::on_stack();
    put_str(&mut sink, text);
    push_hex(out, &sink.finish());
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_hex(&mut out, bytes);
    out
}

fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    out.reserve(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn canon(v: &Value) -> String {
        canonical_json_value(v)
    }

    #[test]
    fn python_escapes_named_controls_by_name() {
        assert_eq!(canon(&json!("\n\r\t\u{8}\u{c}")), r#""\n\r\t\b\f""#);
    }

    #[test]
    fn python_escapes_quote_and_backslash() {
        assert_eq!(canon(&json!("a\"b\\c")), r#""a\"b\\c""#);
    }

    #[test]
    fn python_escapes_other_controls_as_lowercase_u00xx() {
        assert_eq!(canon(&json!("\u{0}")), r#""\u0000""#);
        assert_eq!(canon(&json!("\u{1f}")), r#""\u001f""#);
        assert_eq!(canon(&json!("\u{1b}")), r#""\u001b""#);
        assert_eq!(canon(&json!("\u{b}")), r#""\u000b""#);
    }

    #[test]
    fn python_leaves_slash_del_and_line_separators_raw() {
        assert_eq!(
            canon(&json!("/\u{7f}\u{2028}\u{2029}")),
            "\"/\u{7f}\u{2028}\u{2029}\""
        );
    }

    #[test]
    fn python_writes_non_ascii_raw_ensure_ascii_false() {
        assert_eq!(canon(&json!("é中😀")), "\"é中😀\"");
    }

    #[test]
    fn python_sorts_keys_by_code_point() {
        let v = json!({"b": 1, "a": 2, "é": 3, "Z": 4, "aa": 5});
        assert_eq!(canon(&v), r#"{"Z":4,"a":2,"aa":5,"b":1,"é":3}"#);
    }

    #[test]
    fn python_float_repr_forms() {
        let cases: &[(f64, &str)] = &[
            (4.0, "4.0"),
            (0.2, "0.2"),
            (-1.5, "-1.5"),
            (1e-5, "1e-05"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1e15, "1000000000000000.0"),
            (123456789012345680.0, "1.2345678901234568e+17"),
            (1e300, "1e+300"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (0.1 + 0.2, "0.30000000000000004"),
            // A tie between two shortest forms: Python takes the even digit.
            (-607_389_985_795_745.0 / 8.0, "-75923748224468.12"),
            (-0.0, "0.0"),
            (0.0, "0.0"),
            (100.0, "100.0"),
            (1234.5678, "1234.5678"),
        ];
        for (v, want) in cases {
            assert_eq!(py_float_repr(*v).as_deref(), Some(*want), "repr of {v:?}");
        }
    }

    #[test]
    fn python_float_repr_in_documents() {
        assert_eq!(
            canon(&json!({"r": 4.0, "n": 4, "z": -0.0})),
            r#"{"n":4,"r":4.0,"z":0.0}"#
        );
    }

    #[test]
    fn python_sha256_of_string_hashes_the_json_literal() {
        let s = "L".repeat(1200);
        assert_eq!(
            sha256_of(s.as_str()).expect("strings are serializable"),
            "d1fd6a834c71465d6eeb3623b9c5a2ac60c49d069ffc469bc131b4ff506e55a2"
        );
        assert!(!sha256_hex(s.as_bytes()).starts_with("d1fd6a"));
    }

    #[test]
    fn streamed_string_hash_matches_canonical_for_every_escape_class() {
        for s in [
            "",
            "plain",
            "\"",
            "\\",
            "\n\r\t\u{8}\u{c}",
            "\u{0}\u{1}\u{1f}",
            "é\u{7f}/\u{2028}",
        ] {
            assert_eq!(sha256_of_str(s), sha256_of(s).expect("string"), "{s:?}");
        }
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            any::<u64>().prop_map(|i| json!(i)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            any::<String>().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::btree_map(any::<String>(), inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// The writer's escaping as bytes, for comparison with `serde_json`'s (Python's).
    fn literal(text: &str) -> String {
        let mut out = Vec::new();
        put_str(&mut out, text);
        String::from_utf8(out).unwrap_or_default()
    }

    #[test]
    fn word_scan_escapes_every_byte_class_at_every_offset() {
        // Offsets 0..17 put the byte in the first word, the second, and the tail.
        for c in (0_u8..0x80).map(char::from).chain(['é', '\u{2028}', '€']) {
            for at in 0..17 {
                let mut text: Vec<char> = vec!['a'; 17];
                text[at] = c;
                let text: String = text.into_iter().collect();
                let expected = serde_json::to_string(&text).unwrap_or_default();
                assert_eq!(literal(&text), expected, "{c:?} at {at}");
            }
        }
    }

    #[test]
    fn joined_hash_equals_the_hash_of_the_joined_text() {
        let long = "x\"y".repeat(30_000);
        let cases: [&[&str]; 5] = [
            &[],
            &[""],
            &["", ""],
            &["a\"b", "\n", "é"],
            &[&long, "t", &long],
        ];
        for parts in cases {
            for separator in ["\u{0}", ", ", ""] {
                assert_eq!(
                    sha256_of_joined(parts.iter().copied(), separator),
                    sha256_of_str(&parts.join(separator)),
                    "{separator:?}"
                );
            }
        }
    }

    #[test]
    fn long_and_escape_dense_strings_write_and_hash_like_serde_json() {
        // Sizes around a word, the short-string path and the hasher's buffer; densities from
        // none to every byte escaped to six.
        let patterns: [&str; 5] = [
            "plain text ",
            "\"q\"\n",
            "\u{1}",
            "é\\€\t",
            "ab\u{1f}cdefgh\"",
        ];
        for size in [0, 1, 7, 8, 9, 31, 32, 33, 100, 4095, 70_000, 200_000] {
            for pattern in patterns {
                let text: String = pattern.chars().cycle().take(size).collect();
                let expected = serde_json::to_string(&text).unwrap_or_default();
                assert_eq!(literal(&text), expected, "{size} of {pattern:?}");
                assert_eq!(
                    sha256_of_str(&text),
                    sha256_hex(expected.as_bytes()),
                    "{size} of {pattern:?}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn canonical_form_parses_back_and_recanonicalises_identically(v in arb_value()) {
            let first = canon(&v);
            let parsed: Value = serde_json::from_str(&first).expect("canonical JSON parses");
            prop_assert_eq!(canon(&parsed), first);
        }

        #[test]
        fn float_repr_round_trips(f in any::<f64>().prop_filter("finite", |f| f.is_finite())) {
            let text = py_float_repr(f).expect("finite");
            let back: f64 = text.parse().expect("python repr parses");
            prop_assert_eq!(back, if f == 0.0 { 0.0 } else { f });
            prop_assert!(text.contains('.') || text.contains('e'));
        }

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
            prop_assert_eq!(literal(&text), serde_json::to_string(&text).unwrap_or_default());
        }

        #[test]
        fn streamed_hash_equals_canonical_hash(s in any::<String>()) {
            prop_assert_eq!(sha256_of_str(&s), sha256_of(s.as_str()).expect("string"));
        }
    }
}
