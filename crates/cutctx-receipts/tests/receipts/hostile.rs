//! Hostile rows and lines: every verdict is a verdict, never a panic, with arcaeon's words.

use cutctx_receipts::chain::verify_text;
use cutctx_receipts::json::{self, Value};
use cutctx_receipts::verify_receipt;
use proptest::prelude::*;

use crate::support::{object, parse};

const VALID: &str = r#"{"schema": "arcaeon-compact:receipt:v2", "pre": {"count": 3, "bytes": 57, "digest": "sha256:json-c14n:v1:0fa1adc5dd156a66d78b1e32a52632ce8b98fabc7dfe9d25813375e75ddc82a7"}, "post": {"count": 2, "bytes": 43, "digest": "sha256:json-c14n:v1:ba27d6d4e4b19db1e74962ce6ce5c5ba2fc093acb473ae80f4a22792f889a535"}, "dropped": {"count": 2, "bytes": 38, "items": ["sha256:json-c14n:v1:09a32d6caf7737200a34ee38c65c82446831be896aa5d5aa6b858729ee13beb1", "sha256:raw-bytes:v1:f8c1ccc7df7243da4740c5b7875f88b70e3f935d99c7b37a5f7239d152d994e6"]}, "introduced": {"count": 1, "bytes": 24}, "compactor": "golden-fixture", "method": "test:v1", "kind": "compaction_receipt", "opened_at": "2026-08-15T00:00:00Z", "receipt_digest": "sha256:json-c14n:v1:04f2e0c2b409212325e5aecbda8481119da9a5ffb6f3ede4d99ac8075f11203f", "ts": "2026-08-15T00:00:01Z", "chain": "5ce0eced08463aa06f779416be76f4a5"}"#;

fn first_note(row: &str) -> String {
    let v = verify_receipt(&parse(row), None, None);
    assert!(!v.ok);
    v.notes.first().cloned().unwrap_or_default()
}

#[test]
fn the_valid_row_verifies() {
    let v = verify_receipt(&parse(VALID), None, None);
    assert!(v.ok, "{:?}", v.notes);
}

#[test]
fn unreadable_rows_get_arcaeon_s_notes_and_scope_none() {
    for (row, note) in [
        (
            "[1]",
            "malformed receipt row: expected a JSON object, got list",
        ),
        (
            "\"x\"",
            "malformed receipt row: expected a JSON object, got str",
        ),
        (
            "7",
            "malformed receipt row: expected a JSON object, got int",
        ),
        (
            "null",
            "malformed receipt row: expected a JSON object, got NoneType",
        ),
        ("{}", "unknown schema None \u{2014} cannot verify"),
        (
            r#"{"schema": "x"}"#,
            "unknown schema 'x' \u{2014} cannot verify",
        ),
        (
            r#"{"schema": 2}"#,
            "unknown schema 2 \u{2014} cannot verify",
        ),
        (
            r#"{"schema": "arcaeon-compact:receipt:v2"}"#,
            "malformed receipt row: missing 'pre'",
        ),
        (
            r#"{"schema": "arcaeon-compact:receipt:v2", "pre": [], "post": {}, "dropped": {}, "introduced": {}}"#,
            "malformed receipt row: missing list indices must be integers or slices, not str",
        ),
        (
            r#"{"schema": "arcaeon-compact:receipt:v2", "pre": "s", "post": {}, "dropped": {}, "introduced": {}}"#,
            "malformed receipt row: missing string indices must be integers, not 'str'",
        ),
        (
            r#"{"schema": "arcaeon-compact:receipt:v2", "pre": null, "post": {}, "dropped": {}, "introduced": {}}"#,
            "malformed receipt row: missing 'NoneType' object is not subscriptable",
        ),
        (
            r#"{"schema": "arcaeon-compact:receipt:v2", "pre": {"count": 1}, "post": {"count": 1}, "dropped": {"count": 1}, "introduced": {"count": 1}}"#,
            "malformed receipt row: missing 'bytes'",
        ),
        (
            r#"{"schema": "arcaeon-compact:receipt:v2", "pre": {"count": 1, "bytes": 1}, "post": {"count": 1, "bytes": 1}, "dropped": {"count": 1, "bytes": 1}, "introduced": {"count": 1}}"#,
            "malformed receipt row: missing 'items'",
        ),
        (
            r#"{"schema": "arcaeon-compact:receipt:v2", "pre": {"count": 1, "bytes": 1}, "post": {"count": 1, "bytes": 1}, "dropped": {"count": 1, "bytes": 1, "items": []}, "introduced": {"count": 1}}"#,
            "malformed receipt row: missing 'bytes'",
        ),
    ] {
        let v = verify_receipt(&parse(row), None, None);
        assert!(!v.ok && !v.self_consistent, "{row}");
        assert_eq!(v.verified_scope, "none", "{row}");
        assert_eq!(v.notes, [note], "{row}");
    }
}

#[test]
fn counts_must_be_non_negative_ints_and_items_strings() {
    let base = object(VALID);
    for (path, bad) in [
        ("pre.count", "1.0"),
        ("pre.count", "true"),
        ("post.bytes", "-1"),
        ("introduced.bytes", "\"3\""),
        ("dropped.count", "null"),
    ] {
        let (outer, inner) = path.split_once('.').expect("a path");
        let mut row = base.clone();
        let mut part = row
            .get(outer)
            .and_then(Value::as_object)
            .expect("object")
            .clone();
        part.insert(inner, parse(bad));
        row.insert(outer, Value::Object(part));
        let v = verify_receipt(&Value::Object(row), None, None);
        assert_eq!(
            v.notes,
            ["malformed receipt row: counts/bytes must be non-negative integers"],
            "{path} = {bad}"
        );
    }
    let mut row = base.clone();
    let mut dropped = row
        .get("dropped")
        .and_then(Value::as_object)
        .expect("object")
        .clone();
    dropped.insert("items", parse("[1]"));
    row.insert("dropped", Value::Object(dropped));
    assert_eq!(
        verify_receipt(&Value::Object(row), None, None).notes,
        ["malformed receipt row: dropped.items must be a list of digest strings"]
    );
}

#[test]
fn huge_numbers_are_compared_exactly() {
    let row = VALID.replace(
        r#""pre": {"count": 3, "bytes": 57"#,
        r#""pre": {"count": 3, "bytes": 100000000000000000000000000000057"#,
    );
    let v = verify_receipt(&parse(&row), None, None);
    assert_eq!(
        v.notes[0],
        "bytes do not reconcile: pre.bytes - dropped.bytes + introduced.bytes = \
         100000000000000000000000000000043, got post.bytes 43"
    );
    let row = VALID.replace(
        r#""dropped": {"count": 2, "bytes": 38"#,
        r#""dropped": {"count": 2, "bytes": 99999999999999999999999999999"#,
    );
    assert_eq!(
        first_note(&row),
        "dropped.bytes 99999999999999999999999999999 exceeds pre.bytes 57 \u{2014} impossible, \
         drops come out of pre"
    );
    let row = VALID.replace(r#""count": 2, "bytes": 38"#, r#""count": 5, "bytes": 38"#);
    let v = verify_receipt(&parse(&row), None, None);
    assert_eq!(
        v.notes[..3],
        [
            "manifest length 2 != dropped.count 5",
            "dropped.count exceeds pre.count",
            "receipt_digest does not reproduce from the row's core \u{2014} the row was altered",
        ]
    );
}

#[test]
fn bad_digests_are_named() {
    let row = VALID
        .replace(
            "\"digest\": \"sha256:json-c14n:v1:0fa1",
            "\"digest\": \"sha256:json-c14n:v1:0FA1",
        )
        .replace("\"sha256:raw-bytes:v1:f8c1", "\"sha256:raw-bytes:f8c1");
    let v = verify_receipt(&parse(&row), None, None);
    assert_eq!(
        v.notes[..3],
        [
            "pre.digest is not a well-formed self-describing digest",
            "dropped.items[1] is not a well-formed self-describing digest",
            "receipt_digest does not reproduce from the row's core \u{2014} the row was altered",
        ]
    );
}

#[test]
fn a_core_arcaeon_cannot_hash_is_a_note_not_a_crash() {
    for hostile in [
        r#""compactor": NaN"#,
        r#""compactor": "\ud800""#,
        r#""compactor": 1e400"#,
    ] {
        let row = VALID.replace(r#""compactor": "golden-fixture""#, hostile);
        let v = verify_receipt(&parse(&row), None, None);
        assert!(!v.self_consistent, "{hostile}");
        assert!(
            v.notes
                .iter()
                .any(|n| n.starts_with("receipt_digest cannot be computed")),
            "{hostile}: {:?}",
            v.notes
        );
    }
}

#[test]
fn hostile_lines_are_breaks() {
    let deep = "[".repeat(100_000);
    let text = format!(
        "{VALID}\n{deep}\n[1,2]\n{{\"a\": 1, \"a\": 2, \"chain\": \"x\"}}\n{{\"chain\": 5}}\n\
         {{\"chain\": null}}\n\u{feff}{{}}\n{{\"n\": {big}}}\n",
        big = "9".repeat(5000)
    );
    let (v, rows) = verify_text(&text, false);
    assert_eq!(v.ok, Some(false));
    let messages: Vec<&str> = v.all_breaks.iter().map(|b| b.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "line 2: unparseable",
            "line 3: not a JSON object",
            "line 4: duplicate key 'a'",
            "line 4: chain mismatch",
            "line 5: non-string chain value",
            "line 6: unchained row after chain began",
            "line 7: unparseable",
            "line 8: unparseable",
        ]
    );
    assert_eq!(v.rows, 4);
    assert_eq!(rows.len(), 4);
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| Value::Int(i.into())),
        "-?[1-9][0-9]{0,39}".prop_map(|d| parse(&d)),
        any::<f64>().prop_map(Value::Float),
        any::<String>().prop_map(|s| Value::str(&s)),
        Just(Value::str("sha256:raw-bytes:v1:00")),
        Just(Value::str("arcaeon-compact:receipt:v2")),
        Just(Value::str("arcaeon-compact:receipt:v1")),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(
                (
                    prop_oneof![
                        Just("schema".to_owned()),
                        Just("pre".to_owned()),
                        Just("post".to_owned()),
                        Just("dropped".to_owned()),
                        Just("introduced".to_owned()),
                        Just("count".to_owned()),
                        Just("bytes".to_owned()),
                        Just("items".to_owned()),
                        Just("digest".to_owned()),
                        Just("chain".to_owned()),
                        any::<String>(),
                    ],
                    inner
                ),
                0..6
            )
            .prop_map(|kv| Value::Object(
                kv.into_iter()
                    .map(|(k, v)| (k.as_str().into(), v))
                    .collect()
            )),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn verify_receipt_never_panics_and_ok_implies_self_consistent(row in arb_value()) {
        let v = verify_receipt(&row, None, None);
        prop_assert!(!v.ok || v.self_consistent);
        let empty = cutctx_receipts::digest::digest_content(&[]).expect("empty");
        let w = verify_receipt(&row, Some(&empty), Some(&empty));
        prop_assert!(!w.ok || w.self_consistent);
    }

    #[test]
    fn mutating_a_valid_row_never_panics(
        key in prop_oneof![Just("pre"), Just("post"), Just("dropped"), Just("introduced"), Just("schema"), Just("receipt_digest")],
        value in arb_value(),
    ) {
        let mut row = object(VALID);
        row.insert(key, value);
        let v = verify_receipt(&Value::Object(row.clone()), None, None);
        prop_assert!(!v.ok || v.self_consistent);
        let text = json::to_line(&Value::Object(row)).unwrap_or_default();
        let _ = verify_text(&format!("{VALID}\n{text}\n"), false);
    }

    #[test]
    fn any_text_is_a_verdict(text in any::<String>()) {
        let (v, _) = verify_text(&text, false);
        prop_assert!(v.ok != Some(true) || v.breaks == 0);
    }

    #[test]
    fn lines_round_trip(v in arb_value()) {
        if let Ok(line) = json::to_line(&v) {
            let back = json::parse(&line).expect("our own line parses").value;
            prop_assert_eq!(json::to_line(&back).expect("writable"), line);
            prop_assert_eq!(
                json::to_c14n(&back).expect("canonical"),
                json::to_c14n(&v).expect("canonical")
            );
        }
    }
}
