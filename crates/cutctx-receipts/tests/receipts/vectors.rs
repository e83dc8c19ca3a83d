//! arcaeon's digest vectors (`vectors.json`), its self-test goldens and the worked example.

use cutctx_receipts::chain::{self, GENESIS};
use cutctx_receipts::content::decode_base64;
use cutctx_receipts::digest::{Item, digest_content, digest_item, digest_json};
use cutctx_receipts::json::{self, Value};
use cutctx_receipts::{CompactionReceipt, Labels, SteppingClock, verify_receipt};

use crate::support::{conformance, parse, read, unhex};

fn field<'a>(v: &'a Value, key: &str) -> &'a Value {
    v.as_object()
        .and_then(|o| o.get(key))
        .unwrap_or_else(|| panic!("vector field {key} is present"))
}

fn text(v: &Value, key: &str) -> String {
    field(v, key)
        .as_str()
        .unwrap_or_else(|| panic!("{key} is a string"))
        .to_owned()
}

fn int(v: &Value, key: &str) -> u64 {
    match field(v, key) {
        Value::Int(i) => i.as_u64().expect("a u64"),
        other => panic!("{key} is an int, got {other:?}"),
    }
}

/// The item a typed vector stands for, checked against its recorded hashed bytes.
fn item_of(v: &Value) -> Item {
    match text(v, "type").as_str() {
        "str" => {
            let s = text(v, "input");
            if let Some(Value::Str(_)) = v.as_object().and_then(|o| o.get("hashed_bytes_hex")) {
                assert_eq!(s.as_bytes(), unhex(&text(v, "hashed_bytes_hex")));
            }
            Item::Str(s)
        }
        "bytes" => Item::Bytes(decode_base64(&text(v, "input_b64")).expect("base64")),
        "json" => {
            let input = field(v, "input").clone();
            // The value as json.dumps wrote it must read back to the same value.
            let from_text = parse(&text(v, "input_json_text"));
            let canonical = unhex(&text(v, "canonical_hex"));
            for value in [&input, &from_text] {
                assert_eq!(
                    json::to_c14n(value).expect("canonical"),
                    canonical,
                    "canonical bytes"
                );
            }
            assert_eq!(
                String::from_utf8(canonical).expect("utf-8"),
                text(v, "canonical_utf8")
            );
            Item::Json(input)
        }
        other => panic!("unknown vector type {other}"),
    }
}

#[test]
fn every_item_vector_reproduces() {
    let Some(dir) = conformance() else { return };
    let doc = parse(&read(&dir, "vectors.json"));
    let Value::Array(vectors) = field(&doc, "vectors") else {
        panic!("vectors is a list");
    };
    assert_eq!(vectors.len(), 25, "the spec promises 25 item vectors");
    for v in vectors {
        let name = text(v, "name");
        let got = digest_item(&item_of(v)).expect("digestible");
        assert_eq!(got.digest, text(v, "digest"), "{name}: digest");
        assert_eq!(got.size, int(v, "bytes"), "{name}: bytes");
    }
}

#[test]
fn every_whole_content_vector_reproduces() {
    let Some(dir) = conformance() else { return };
    let doc = parse(&read(&dir, "vectors.json"));
    let Value::Array(vectors) = field(&doc, "whole_content") else {
        panic!("whole_content is a list");
    };
    assert_eq!(vectors.len(), 3);
    for v in vectors {
        let name = text(v, "name");
        let Value::Array(items) = field(v, "items") else {
            panic!("items is a list");
        };
        let items: Vec<Item> = items.iter().map(item_of).collect();
        let got = digest_content(&items).expect("digestible");
        let want_digests: Vec<String> = match field(v, "item_digests") {
            Value::Array(a) => a
                .iter()
                .map(|d| d.as_str().expect("str").to_owned())
                .collect(),
            _ => panic!("item_digests is a list"),
        };
        assert_eq!(got.items, want_digests, "{name}: item digests");
        let want_sizes: Vec<u64> = match field(v, "item_bytes") {
            Value::Array(a) => a
                .iter()
                .map(|n| match n {
                    Value::Int(i) => i.as_u64().expect("u64"),
                    _ => panic!("int"),
                })
                .collect(),
            _ => panic!("item_bytes is a list"),
        };
        assert_eq!(got.sizes, want_sizes, "{name}: sizes");
        assert_eq!(got.total, int(v, "total_bytes"), "{name}: total");
        assert_eq!(got.whole, text(v, "whole_digest"), "{name}: whole");
        let whole_canonical = json::to_c14n(&Value::Array(
            got.items.iter().map(|d| Value::str(d)).collect(),
        ))
        .expect("canonical");
        assert_eq!(
            String::from_utf8(whole_canonical).expect("utf-8"),
            text(v, "whole_canonical_utf8"),
            "{name}: whole canonical text"
        );
    }
}

fn selftest_pre() -> Vec<Item> {
    vec![
        Item::Str("the quick brown fox".into()),
        Item::Json(parse(r#"{"role": "user", "text": "hello"}"#)),
        Item::Bytes(b"\x00\x01binary".to_vec()),
    ]
}

fn selftest_post() -> Vec<Item> {
    vec![
        Item::Str("the quick brown fox".into()),
        Item::Str("summary: user said hello".into()),
    ]
}

const GOLDEN_V2: &str =
    "sha256:json-c14n:v1:04f2e0c2b409212325e5aecbda8481119da9a5ffb6f3ede4d99ac8075f11203f";
const GOLDEN_V1: &str =
    "sha256:json-c14n:v1:9a0f4bb37b78f8433f52ae14603d20f1fc2413265e434beb9ad15613fc5947a4";

#[test]
fn compact_selftest_goldens_and_the_worked_example_line() {
    let pre = digest_content(&selftest_pre()).expect("digestible");
    assert_eq!(
        pre.items,
        [
            "sha256:raw-bytes:v1:9ecb36561341d18eb65484e833efea61edc74b84cf5e6ae1b81c63533e25fc8f",
            "sha256:json-c14n:v1:09a32d6caf7737200a34ee38c65c82446831be896aa5d5aa6b858729ee13beb1",
            "sha256:raw-bytes:v1:f8c1ccc7df7243da4740c5b7875f88b70e3f935d99c7b37a5f7239d152d994e6",
        ]
    );
    assert_eq!(
        pre.whole,
        "sha256:json-c14n:v1:0fa1adc5dd156a66d78b1e32a52632ce8b98fabc7dfe9d25813375e75ddc82a7"
    );
    assert_eq!((pre.sizes.as_slice(), pre.total), (&[19, 30, 8][..], 57));

    // opened_at = 2026-08-15T00:00:00Z, ts = ...01Z, as in the spec's worked example.
    let clock = SteppingClock::starting_at_unix(1_786_752_000);
    let mut receipt = CompactionReceipt::open(&selftest_pre(), &clock).expect("opens");
    receipt.record_kept(&selftest_post()).expect("records");
    let row = receipt
        .seal(&Labels::new("golden-fixture", "test:v1"), &clock)
        .expect("seals");
    // The first line of a new ledger.
    let appended =
        chain::chained(chain::stamped(&row, &clock), GENESIS.as_bytes()).expect("writable");
    let want = r#"{"schema": "arcaeon-compact:receipt:v2", "pre": {"count": 3, "bytes": 57, "digest": "sha256:json-c14n:v1:0fa1adc5dd156a66d78b1e32a52632ce8b98fabc7dfe9d25813375e75ddc82a7"}, "post": {"count": 2, "bytes": 43, "digest": "sha256:json-c14n:v1:ba27d6d4e4b19db1e74962ce6ce5c5ba2fc093acb473ae80f4a22792f889a535"}, "dropped": {"count": 2, "bytes": 38, "items": ["sha256:json-c14n:v1:09a32d6caf7737200a34ee38c65c82446831be896aa5d5aa6b858729ee13beb1", "sha256:raw-bytes:v1:f8c1ccc7df7243da4740c5b7875f88b70e3f935d99c7b37a5f7239d152d994e6"]}, "introduced": {"count": 1, "bytes": 24}, "compactor": "golden-fixture", "method": "test:v1", "kind": "compaction_receipt", "opened_at": "2026-08-15T00:00:00Z", "receipt_digest": "sha256:json-c14n:v1:04f2e0c2b409212325e5aecbda8481119da9a5ffb6f3ede4d99ac8075f11203f", "ts": "2026-08-15T00:00:01Z", "chain": "5ce0eced08463aa06f779416be76f4a5"}"#;
    assert_eq!(appended.line, want);
    assert_eq!(appended.chain, "5ce0eced08463aa06f779416be76f4a5");
    assert_eq!(
        appended.row.get("receipt_digest").and_then(Value::as_str),
        Some(GOLDEN_V2)
    );
    // The canonical core of the worked example.
    let core = cutctx_receipts::receipt::core_of(&appended.row);
    assert_eq!(
        String::from_utf8(json::to_c14n(&core).expect("canonical")).expect("utf-8"),
        r#"{"compactor":"golden-fixture","dropped":{"bytes":38,"count":2,"items":["sha256:json-c14n:v1:09a32d6caf7737200a34ee38c65c82446831be896aa5d5aa6b858729ee13beb1","sha256:raw-bytes:v1:f8c1ccc7df7243da4740c5b7875f88b70e3f935d99c7b37a5f7239d152d994e6"]},"introduced":{"bytes":24,"count":1},"method":"test:v1","post":{"bytes":43,"count":2,"digest":"sha256:json-c14n:v1:ba27d6d4e4b19db1e74962ce6ce5c5ba2fc093acb473ae80f4a22792f889a535"},"pre":{"bytes":57,"count":3,"digest":"sha256:json-c14n:v1:0fa1adc5dd156a66d78b1e32a52632ce8b98fabc7dfe9d25813375e75ddc82a7"},"schema":"arcaeon-compact:receipt:v2"}"#
    );
}

#[test]
fn legacy_v1_golden_digest_and_verdict() {
    let row = crate::support::object(&format!(
        r#"{{"schema": "arcaeon-compact:receipt:v1",
            "pre": {{"count": 3, "bytes": 57, "digest": "sha256:json-c14n:v1:0fa1adc5dd156a66d78b1e32a52632ce8b98fabc7dfe9d25813375e75ddc82a7"}},
            "post": {{"count": 2, "bytes": 43, "digest": "sha256:json-c14n:v1:ba27d6d4e4b19db1e74962ce6ce5c5ba2fc093acb473ae80f4a22792f889a535"}},
            "dropped": {{"count": 2, "bytes": 38, "items": ["sha256:json-c14n:v1:09a32d6caf7737200a34ee38c65c82446831be896aa5d5aa6b858729ee13beb1", "sha256:raw-bytes:v1:f8c1ccc7df7243da4740c5b7875f88b70e3f935d99c7b37a5f7239d152d994e6"]}},
            "introduced": {{"count": 1}},
            "compactor": "golden-fixture", "method": "test:v1", "receipt_digest": "{GOLDEN_V1}"}}"#
    ));
    assert_eq!(
        digest_json(&cutctx_receipts::receipt::core_of(&row)).expect("digest"),
        GOLDEN_V1
    );
    let row = Value::Object(row);
    let v = verify_receipt(&row, None, None);
    assert!(v.ok && v.self_consistent, "{:?}", v.notes);
    assert_eq!(v.schema.map(|s| s.short()), Some("v1"));
    assert_eq!(v.understatement_check, Some("truncation-only"));
    assert_eq!(v.verified_scope, "bounded_no_content+v1_lower_bound");
    assert_eq!(v.notes.len(), 2);
    let pre = digest_content(&selftest_pre()).expect("digestible");
    let post = digest_content(&selftest_post()).expect("digestible");
    let full = verify_receipt(&row, Some(&pre), Some(&post));
    assert!(full.ok, "{:?}", full.notes);
    assert_eq!(full.verified_scope, "full");
    assert!(full.notes.is_empty());
}
