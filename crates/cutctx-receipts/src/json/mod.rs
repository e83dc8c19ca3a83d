//! A JSON value model that reads and writes exactly as Python's `json` module does.
//!
//! arcaeon hashes what Python's `json.loads` makes of a line, so a verifier must parse the
//! way Python parses, and hash the way Python writes. `serde_json::Value` cannot: it turns
//! integers beyond 64 bits into floats, keeps the last of two duplicate keys silently, refuses
//! `NaN`, `Infinity` and lone-surrogate escapes (all of which Python accepts), and writes
//! floats in another form. This module is the small, exact alternative:
//!
//! * [`Int`] keeps an integer's decimal text, so `12345678901234567890123` and
//!   `-18446744073709551616` survive any round trip. Like Python 3.11 and later, a literal of
//!   more than [`MAX_INT_DIGITS`] digits is refused.
//! * [`Value::Float`] is an `f64` parsed with correct rounding (as Python's `float()`), so
//!   `1e400` reads as infinity and `-0.0` stays negative zero.
//! * [`Text`] holds a string as *generalized* UTF-8: valid UTF-8, except that a lone surrogate
//!   (from an escape such as `\ud800`) is kept as its three-byte form. Those bytes are what
//!   Python's `encode("utf-8", "surrogatepass")` produces, which is how the chain rule hashes
//!   such a row; the strict writers refuse them, as Python's strict encoder does.
//! * [`Object`] keeps insertion order (on-disk rows are written in insertion order). A key
//!   given twice keeps its first position and its last value, as Python's `dict` does, and
//!   [`parse`] reports the first duplicate the way arcaeon's strict reader finds it.
//! * Nesting is bounded by [`MAX_DEPTH`], in the parser and in every writer, so hostile input
//!   can never overflow the stack; the parser itself keeps an explicit stack.
//!
//! Three writers, each `cutctx_json`'s one writer in one of its styles (escaping as Python's
//! `ensure_ascii=False`: only `"`, `\` and U+0000–U+001F are escaped, the latter in lower-case
//! hex; everything else is raw UTF-8):
//!
//! | writer | keys | separators | NaN/Infinity | lone surrogate |
//! |---|---|---|---|---|
//! | [`to_c14n`] (json-c14n v1) | sorted by code point | `,` `:` | refused | refused |
//! | [`to_chain_body`] (the chain rule) | sorted by code point | `, ` `: ` | `NaN`, `Infinity` | kept (surrogatepass) |
//! | [`to_line`] (a ledger line) | insertion order | `, ` `: ` | refused | refused |
//!
//! Sorting by code point equals sorting the generalized UTF-8 bytes, which is what
//! [`Text`]'s ordering does.
//!
//! The files: [`Text`] in `text.rs`, [`Int`], [`Object`] and [`Value`] in `value.rs`, the
//! parser in `parse.rs`, the writers in `write.rs`, and numbers as Python prints and compares
//! them in `number.rs`.

mod number;
mod parse;
mod text;
mod value;
mod write;

pub(crate) use number::cmp_decimal;
pub use number::{py_float_json, py_float_repr};
pub use parse::{Parsed, parse, parse_strict};
pub use text::Text;
pub use value::{Int, Object, Value};
pub use write::{
    object_to_line, to_c14n, to_c14n_picked, to_chain_body, to_chain_body_without, to_line,
};

/// The deepest nesting of arrays and objects accepted anywhere.
///
/// Python 3.11's parser gives up at about 995 levels (its recursion limit); this stays below
/// that, so anything accepted here is also accepted, and hashable, by arcaeon.
pub const MAX_DEPTH: usize = 900;

/// The most digits an integer literal may have: Python's default `int` conversion limit
/// (`sys.get_int_max_str_digits()`, 4300 since Python 3.11), beyond which `json.loads` fails.
pub const MAX_INT_DIGITS: usize = 4300;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ReceiptError;

    fn c14n(text: &str) -> String {
        let v = parse(text).expect("parses").value;
        String::from_utf8(to_c14n(&v).expect("canonical")).expect("utf-8")
    }

    #[test]
    fn exact_ties_round_half_even_as_python_does() {
        for (f, want) in [
            // Exact ties (each sum is exact): written here as sums, since a literal with these
            // digits is what the shortest form disagrees about.
            (-75_923_748_224_468.0 - 0.125, "-75923748224468.12"),
            (603_329_982_351_490.0 + 0.25, "603329982351490.2"),
            (27_078_007_198_020.0 + 0.8125, "27078007198020.812"),
            (0.5, "0.5"),
            (2.5, "2.5"),
            (9_007_199_254_740_993.0, "9007199254740992.0"),
            (1e23, "1e+23"),
            (0.1 + 0.2, "0.30000000000000004"),
            (123_456_789_012_345_680.0, "1.2345678901234568e+17"),
        ] {
            assert_eq!(py_float_repr(f), want, "{f:e}");
        }
    }

    #[test]
    fn a_turn_digest_is_the_c14n_of_its_value() {
        let turn =
            cutctx_model::TranscriptTurn::new("t\"1", cutctx_model::Role::Tool, "out\n\u{1}é", 9)
                .expect("valid")
                .with_tool_call_id("c")
                .with_metadata(std::collections::BTreeMap::from([
                    ("b".to_owned(), "2".to_owned()),
                    ("a".to_owned(), "\t".to_owned()),
                ]));
        let via_value = to_c14n(&crate::transcript::turn_value(&turn)).expect("canonical");
        let digest = crate::digest::digest_canonical(&via_value);
        let transcript = cutctx_model::Transcript::new(vec![turn]).expect("one turn");
        let whole = crate::transcript::digest_transcript(&transcript);
        assert_eq!(whole.items.first(), Some(&digest.digest));
    }

    #[test]
    fn big_integers_survive() {
        assert_eq!(
            c14n("[9007199254740993,-18446744073709551616,12345678901234567890123,-0]"),
            "[9007199254740993,-18446744073709551616,12345678901234567890123,0]"
        );
    }

    #[test]
    fn floats_follow_python_repr() {
        assert_eq!(
            c14n("[1.0,1e100,-0.0,1e16,1E15,1e-5,0.0001,5e-324,1.5e-7,123456789.0,1e22]"),
            "[1.0,1e+100,-0.0,1e+16,1000000000000000.0,1e-05,0.0001,5e-324,1.5e-07,123456789.0,1e+22]"
        );
    }

    #[test]
    fn keys_sort_by_code_point_recursively() {
        assert_eq!(
            c14n(r#"{"b":{"z":1,"a":2},"\ufb00":7,"\ud83d\ude00":6,"A":3,"":4}"#),
            "{\"\":4,\"A\":3,\"b\":{\"a\":2,\"z\":1},\"\u{fb00}\":7,\"\u{1f600}\":6}"
        );
    }

    #[test]
    fn strings_escape_as_python() {
        assert_eq!(
            c14n(r#""\u0000\u0001\b\t\n\f\r\u001f\"\\\/\u007f\u2028é""#),
            "\"\\u0000\\u0001\\b\\t\\n\\f\\r\\u001f\\\"\\\\/\u{7f}\u{2028}é\""
        );
    }

    #[test]
    fn duplicates_resolve_last_wins_at_first_position_and_are_reported_inner_first() {
        let p = parse(r#"{"a":1,"b":2,"a":3,"c":{"x":1,"x":2}}"#).expect("parses");
        assert_eq!(
            p.duplicate.as_ref().map(Text::to_string_lossy).as_deref(),
            Some("x")
        );
        let line = to_line(&p.value).expect("line");
        assert_eq!(line, r#"{"a": 3, "b": 2, "c": {"x": 2}}"#);
        assert!(matches!(
            parse_strict(r#"{"a":1,"a":2}"#),
            Err(ReceiptError::JsonDuplicateKey { .. })
        ));
    }

    #[test]
    fn python_extensions_parse() {
        let v = parse("[NaN,Infinity,-Infinity,1e400,-1e400]")
            .expect("parses")
            .value;
        let body = String::from_utf8(to_chain_body(&v).expect("body")).expect("utf-8");
        assert_eq!(body, "[NaN, Infinity, -Infinity, Infinity, -Infinity]");
        assert!(matches!(to_c14n(&v), Err(ReceiptError::NonFinite { .. })));
    }

    #[test]
    fn lone_surrogates_are_kept_for_the_chain_and_refused_by_strict_writers() {
        let v = parse(r#"["\ud800","\udc00x","\ud83d\u0041"]"#)
            .expect("parses")
            .value;
        let body = to_chain_body(&v).expect("body");
        assert_eq!(
            body,
            b"[\"\xed\xa0\x80\", \"\xed\xb0\x80x\", \"\xed\xa0\xbdA\"]".to_vec()
        );
        assert!(matches!(
            to_c14n(&v),
            Err(ReceiptError::LoneSurrogate { code: 0xD800 })
        ));
        assert!(to_line(&v).is_err());
    }

    #[test]
    fn syntax_errors_are_errors_not_panics() {
        for bad in [
            "",
            " ",
            "[",
            "]",
            "{",
            "{\"a\"",
            "{\"a\":",
            "{\"a\":1,",
            "[1,]",
            "01",
            "1.",
            ".5",
            "-",
            "--1",
            "1e",
            "\"abc",
            "\"\\x\"",
            "\"\\u12\"",
            "\"\\ud800\\u12\"",
            "nul",
            "[1 2]",
            "{1:2}",
            "\"\u{1}\"",
            "-Inf",
            "tru",
            "\u{feff}1",
            "1 1",
            "{\"a\" 1}",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} must not parse");
        }
        assert_eq!(c14n(" 1e5 "), "100000.0");
        assert_eq!(c14n("1E+2"), "100.0");
    }

    #[test]
    fn depth_is_bounded_without_recursion() {
        let ok = "[".repeat(MAX_DEPTH) + &"]".repeat(MAX_DEPTH);
        let v = parse(&ok).expect("at the limit").value;
        assert!(to_c14n(&v).is_ok());
        let deep = "[".repeat(MAX_DEPTH + 1) + &"]".repeat(MAX_DEPTH + 1);
        assert!(matches!(
            parse(&deep),
            Err(ReceiptError::JsonTooDeep { .. })
        ));
        let hostile = "[".repeat(1_000_000);
        assert!(matches!(
            parse(&hostile),
            Err(ReceiptError::JsonTooDeep { .. })
        ));
        let mut built = Value::Null;
        for _ in 0..=MAX_DEPTH {
            built = Value::Array(vec![built]);
        }
        assert!(matches!(
            to_c14n(&built),
            Err(ReceiptError::JsonTooDeep { .. })
        ));
        // Dropping a deep value must not overflow either; keep it modest for the test thread.
    }

    #[test]
    fn integer_digit_limit_matches_python() {
        let ok = "9".repeat(MAX_INT_DIGITS);
        assert!(parse(&ok).is_ok());
        let too_many = "9".repeat(MAX_INT_DIGITS + 1);
        assert!(matches!(
            parse(&too_many),
            Err(ReceiptError::JsonIntTooLarge { .. })
        ));
    }

    #[test]
    fn line_writer_keeps_insertion_order() {
        let v = parse(r#"{"z":1,"a":[true,null,"é"],"m":{"y":1.5,"b":-0.0}}"#)
            .expect("parses")
            .value;
        assert_eq!(
            to_line(&v).expect("line"),
            r#"{"z": 1, "a": [true, null, "é"], "m": {"y": 1.5, "b": -0.0}}"#
        );
    }
}
