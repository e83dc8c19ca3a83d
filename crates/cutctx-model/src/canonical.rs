//! Canonical JSON and hashing, byte-compatible with the reference's Python.
//!
//! The reference writes `json.dumps(v, sort_keys=True, ensure_ascii=False,
//! separators=(",", ":"), allow_nan=False)`. That means:
//!
//! * keys sorted by code point (Rust's `String` order is byte order, which for UTF-8 is the
//!   same thing), no whitespace;
//! * non-ASCII written raw as UTF-8;
//! * only `"`, `\` and U+0000..U+001F escaped: `\n`, `\r`, `\t`, `\b`, `\f` by name, the rest as
//!   `\u00xx` in **lower-case** hex; `/`, U+007F and U+2028/U+2029 left alone;
//! * floats as Python's `repr`: `4.0` not `4`, `1e-05`, `1e+16`, and `-0.0` normalised to `0.0`.
//!
//! The bytes come from `cutctx_json`'s writer in its [`Style::CANONICAL`]; this module walks
//! values into it and hashes what it writes.
//!
//! [`sha256_of`] hashes the canonical bytes of a value. For a string that is its JSON literal,
//! quotes included: `sha256_of("L")` is the hash of the three bytes `"L"`.

use cutctx_json::{Sink, Style, Writer};
use serde::Serialize;
use serde_json::{Number, Value};
use sha2::{Digest, Sha256};

use crate::hash_sink::HashSink;
use crate::{CompactionError, details};

pub use cutctx_json::hex;

/// Python's `repr` of a float, with `-0.0` normalised to `0.0` as the reference's canonical
/// form writes it; `None` when not finite.
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
    // Adding zero turns -0.0 into 0.0 and leaves every other value alone.
    cutctx_json::py_float_repr(value + 0.0).ok()
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
    let mut out = String::with_capacity(256);
    write_value(&mut Writer::new(&mut out, Style::CANONICAL), value);
    out
}

fn write_value<S: Sink + ?Sized>(w: &mut Writer<'_, S>, value: &Value) {
    match value {
        Value::Null => w.null(),
        Value::Bool(b) => w.bool(*b),
        Value::Number(n) => write_number(w, n),
        Value::String(s) => w.str(s),
        Value::Array(items) => w.list(items, |w, item| write_value(w, item)),
        Value::Object(map) => {
            // serde_json's map is sorted unless some crate turns on its `preserve_order`.
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            if !entries.is_sorted_by(|a, b| a.0 <= b.0) {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            w.raw("{");
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    w.item_separator();
                }
                w.str(k);
                w.key_separator();
                write_value(w, v);
            }
            w.raw("}");
        }
    }
}

fn write_number<S: Sink + ?Sized>(w: &mut Writer<'_, S>, n: &Number) {
    if let Some(u) = n.as_u64() {
        w.u64(u);
    } else if let Some(i) = n.as_i64() {
        w.i64(i);
    } else if let Some(f) = n.as_f64() {
        // A `Number` is finite by construction (serde_json makes NaN and the infinities
        // `null`), so the canonical style never refuses it; were it to, `null` is what
        // serde_json itself writes for them.
        debug_assert!(f.is_finite(), "serde_json numbers are finite");
        if w.f64(f).is_err() {
            w.null();
        }
    } else {
        // Only with serde_json's `arbitrary_precision`, which this workspace does not use:
        // the number's own literal.
        w.raw(&n.to_string());
    }
}

/// An optional ratio as the model's writers put it: `null` for `None`, and, as serde_json
/// writes one, for a non-finite value, which no policy produces (ratios come from finite
/// figures).
pub(crate) fn write_opt_ratio<S: Sink + ?Sized>(w: &mut Writer<'_, S>, ratio: Option<f64>) {
    match ratio {
        // Finite, so the canonical style cannot refuse it.
        Some(f) if f.is_finite() && w.f64(f).is_ok() => {}
        _ => w.null(),
    }
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
    Writer::new(&mut sink, Style::CANONICAL).str(text);
    sink.finish_hex()
}

/// The SHA-256 of `text`'s canonical JSON string literal, as bytes: the digest
/// [`sha256_of_str`] writes in hex, and a masked turn's stub states.
///
/// ```
/// use cutctx_model::canonical::{sha256_of_str, sha256_of_str_bytes};
/// assert_eq!(cutctx_json::hex(&sha256_of_str_bytes("a\nb")), sha256_of_str("a\nb"));
/// ```
#[must_use]
pub fn sha256_of_str_bytes(text: &str) -> [u8; 32] {
    let mut sink = HashSink::on_stack();
    Writer::new(&mut sink, Style::CANONICAL).str(text);
    sink.finish()
}

/// The SHA-256 of the JSON string literal whose text between its quotes is `written`, as it
/// stands: when `written` is the canonical spelling of a string (every escape the one the
/// canonical writer uses, see `cutctx_json::is_canonical_escape`), this is
/// [`sha256_of_str_bytes`] of that string, hashed without decoding it.
///
/// ```
/// use cutctx_model::canonical::{sha256_of_str_bytes, sha256_of_written};
/// assert_eq!(sha256_of_written(r#"say \"hi\"\n"#), sha256_of_str_bytes("say \"hi\"\n"));
/// ```
#[must_use]
pub fn sha256_of_written(written: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(b"\"");
    hasher.update(written.as_bytes());
    hasher.update(b"\"");
    hasher.finalize().into()
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
    let mut escaped_separator = String::new();
    escaped_separator.put_escaped(separator);
    let mut sink = HashSink::on_heap();
    sink.put("\"");
    for (i, part) in parts.into_iter().enumerate() {
        if i > 0 {
            sink.put(&escaped_separator);
        }
        sink.put_escaped(part.as_ref());
    }
    sink.put("\"");
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
    Writer::new(&mut sink, Style::CANONICAL).str(text);
    cutctx_json::push_hex(out, &sink.finish());
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

    fn has_float(v: &Value) -> bool {
        match v {
            Value::Number(n) => n.is_f64(),
            Value::Array(items) => items.iter().any(has_float),
            Value::Object(map) => map.values().any(has_float),
            _ => false,
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
                let expected = serde_json::to_string(&text).expect("a string serializes");
                assert_eq!(canon(&json!(text)), expected, "{size} of {pattern:?}");
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
        fn without_floats_the_canonical_form_is_serde_jsons_compact_form(v in arb_value()) {
            // serde_json escapes as Python does and its map is sorted; only floats differ.
            if !has_float(&v) {
                prop_assert_eq!(canon(&v), serde_json::to_string(&v).expect("a value serializes"));
            }
        }

        #[test]
        fn streamed_hash_equals_canonical_hash(s in any::<String>()) {
            prop_assert_eq!(sha256_of_str(&s), sha256_of(s.as_str()).expect("string"));
        }
    }
}
