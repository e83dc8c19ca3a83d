//! The receipt life cycle and arcaeon's self-test outcomes: the planted drop, HIGH-1,
//! multiset drops, claims, and misuse.

use cutctx_receipts::digest::{Item, digest_content, digest_item};
use cutctx_receipts::json::Value;
use cutctx_receipts::{CompactionReceipt, FixedClock, Labels, ReceiptError, verify_receipt};

use crate::support::{object, parse};

fn clock() -> FixedClock {
    FixedClock::new("2026-08-15T00:00:00Z")
}

fn s(text: &str) -> Item {
    Item::Str(text.to_owned())
}

fn seal(pre: &[Item], post: &[Item]) -> Value {
    let mut r = CompactionReceipt::open(pre, &clock()).expect("opens");
    r.record_kept(post).expect("records");
    Value::Object(r.seal(&Labels::new("t", "m"), &clock()).expect("seals"))
}

fn check(row: &Value, pre: &[Item], post: &[Item]) -> cutctx_receipts::ReceiptVerdict {
    let pre = digest_content(pre).expect("digestible");
    let post = digest_content(post).expect("digestible");
    verify_receipt(row, Some(&pre), Some(&post))
}

#[test]
fn the_planted_drop_is_caught_only_with_content() {
    let pre = [s("a"), s("wire the money to X"), s("c")];
    let shipped = [s("a"), s("c")];
    let honest = seal(&pre, &shipped);
    let v = check(&honest, &pre, &shipped);
    assert!(v.ok, "{:?}", v.notes);
    assert_eq!(v.content.as_str(), "match");

    let lie = seal(&pre, &pre); // "kept everything"
    let v = check(&lie, &pre, &shipped);
    assert!(!v.ok);
    assert!(v.self_consistent);
    assert_eq!(v.content.as_str(), "mismatch");
    assert!(v.notes[0].starts_with("post.digest: recomputed 'sha256:json-c14n:v1:"));
    assert!(
        v.notes
            .contains(&"post.count: recomputed 2 != claimed 3".to_owned())
    );
    assert!(v.notes.contains(
        &"drop-manifest disagrees with content: recomputed 1 dropped item(s), manifest claims 0"
            .to_owned()
    ));
    // By design: the lie alone is self-consistent.
    let alone = verify_receipt(&lie, None, None);
    assert!(alone.ok);
    assert_eq!(alone.verified_scope, "bounded_no_content");
}

#[test]
fn high_1_v2_pins_post_bytes() {
    let pre = [s("hello world"), s("bye")];
    let post = [s("sum")];
    let row = seal(&pre, &post);
    let Value::Object(o) = &row else {
        panic!("object")
    };
    let introduced = o
        .get("introduced")
        .and_then(Value::as_object)
        .expect("introduced");
    assert_eq!(introduced.get("bytes"), Some(&Value::uint(3)));
    assert!(check(&row, &pre, &post).ok);

    // Understate dropped.bytes behind the introduction: caught with no content.
    let mut forged = o.clone();
    let mut dropped = forged
        .get("dropped")
        .and_then(Value::as_object)
        .expect("dropped")
        .clone();
    dropped.insert("bytes", Value::uint(1));
    forged.insert("dropped", Value::Object(dropped));
    let v = verify_receipt(&Value::Object(forged), None, None);
    assert!(!v.self_consistent);
    assert_eq!(
        v.notes[0],
        "bytes do not reconcile: pre.bytes - dropped.bytes + introduced.bytes = 16, got post.bytes 3"
    );
}

#[test]
fn duplicates_drop_as_a_multiset_and_the_row_lists_them_in_pre_order() {
    let x = s("x");
    let pre = [
        x.clone(),
        s("y"),
        x.clone(),
        Item::Json(parse(r#"{"k": 1}"#)),
    ];
    let post = [x.clone()];
    let row = seal(&pre, &post);
    let Value::Object(o) = &row else {
        panic!("object")
    };
    let dropped = o
        .get("dropped")
        .and_then(Value::as_object)
        .expect("dropped");
    let want: Vec<Value> = [&pre[1], &pre[2], &pre[3]]
        .iter()
        .map(|it| Value::str(&digest_item(it).expect("digest").digest))
        .collect();
    assert_eq!(dropped.get("items"), Some(&Value::Array(want)));
    assert_eq!(dropped.get("count"), Some(&Value::uint(3)));
    assert!(check(&row, &pre, &post).ok);
    // Everything dropped: an empty survivor is valid.
    let all = seal(&pre, &[]);
    assert!(check(&all, &pre, &[]).ok);
}

#[test]
fn a_claim_must_agree_in_any_order_and_the_row_keeps_the_inferred_order() {
    let pre = [s("a"), s("b"), s("c")];
    let mut r = CompactionReceipt::open(&pre, &clock()).expect("opens");
    r.record_kept(&[s("b")]).expect("records");
    r.record_dropped(&[s("c"), s("a")]).expect("records");
    let row = r.seal(&Labels::new("t", "m"), &clock()).expect("agrees");
    let items = row
        .get("dropped")
        .and_then(Value::as_object)
        .and_then(|d| d.get("items"))
        .expect("items");
    assert_eq!(
        items,
        &Value::Array(vec![
            Value::str(&digest_item(&s("a")).expect("d").digest),
            Value::str(&digest_item(&s("c")).expect("d").digest),
        ])
    );

    let mut r = CompactionReceipt::open(&pre, &clock()).expect("opens");
    r.record_kept(&[s("b")]).expect("records");
    r.record_dropped(&[s("a")]).expect("records");
    let err = r
        .seal(&Labels::new("t", "m"), &clock())
        .expect_err("disagrees");
    assert_eq!(err.code(), "RECEIPT_CLAIM_MISMATCH");
    assert_eq!(
        err.to_string(),
        "record_dropped() claim disagrees with pre-minus-kept (claimed 1 item(s), inferred 2); \
         refusing to seal an inconsistent receipt"
    );
    let ReceiptError::ClaimMismatch {
        missing,
        unexpected,
        ..
    } = &err
    else {
        panic!("a claim mismatch")
    };
    assert_eq!(missing, &[digest_item(&s("c")).expect("d").digest]);
    assert!(unexpected.is_empty());
    // Nothing was sealed: fixing the claim seals.
    assert!(!r.is_sealed());
    r.record_dropped(&[s("c"), s("a")]).expect("records");
    assert!(r.seal(&Labels::new("t", "m"), &clock()).is_ok());
}

#[test]
fn misuse_is_refused() {
    let mut r = CompactionReceipt::open(&[s("a")], &clock()).expect("opens");
    assert_eq!(
        r.seal(&Labels::new("t", "m"), &clock())
            .expect_err("no kept")
            .code(),
        "RECEIPT_KEPT_NOT_RECORDED"
    );
    r.record_kept(&[]).expect("records");
    let bad = Labels::new("t", "m").with_extra("ts", Value::Null);
    assert_eq!(
        r.seal(&bad, &clock()).expect_err("reserved").code(),
        "RECEIPT_RESERVED_KEY"
    );
    r.seal(&Labels::new("t", "m"), &clock()).expect("seals");
    for err in [
        r.record_kept(&[]).expect_err("sealed"),
        r.record_dropped(&[]).expect_err("sealed"),
        r.seal(&Labels::new("t", "m"), &clock())
            .expect_err("sealed"),
    ] {
        assert_eq!(err, ReceiptError::AlreadySealed);
        assert_eq!(err.to_string(), "receipt already sealed; open a new one");
    }
    // Content json-c14n refuses is refused at open.
    let nan = Item::Json(Value::Float(f64::NAN));
    assert_eq!(
        CompactionReceipt::open(&[nan], &clock())
            .expect_err("nan")
            .code(),
        "RECEIPT_JSON_NON_FINITE"
    );
}

#[test]
fn extra_keys_stay_outside_the_core_and_inside_the_chain() {
    let mut r = CompactionReceipt::open(&[s("a")], &clock()).expect("opens");
    r.record_kept(&[]).expect("records");
    let row = r
        .seal(
            &Labels::new("t", "m").with_extra("plan_hash", Value::str("abc")),
            &clock(),
        )
        .expect("seals");
    let keys: Vec<String> = row.iter().map(|(k, _)| k.to_string_lossy()).collect();
    assert_eq!(
        keys,
        [
            "schema",
            "pre",
            "post",
            "dropped",
            "introduced",
            "compactor",
            "method",
            "kind",
            "opened_at",
            "receipt_digest",
            "plan_hash",
            "ts"
        ]
    );
    let mut edited = row.clone();
    edited.insert("plan_hash", Value::str("abd"));
    // arcaeon's verify_receipt does not look at it...
    assert!(verify_receipt(&Value::Object(edited.clone()), None, None).ok);
    // ...but the chain covers it.
    assert_ne!(
        cutctx_receipts::chain::chain("genesis", &row).expect("hashable"),
        cutctx_receipts::chain::chain("genesis", &edited).expect("hashable")
    );
}

#[test]
fn v1_rows_verify_under_the_v1_rule() {
    let base = r#"{"schema": "arcaeon-compact:receipt:v1",
        "pre": {"count": 2, "bytes": 10, "digest": "a:b:c:0"},
        "post": {"count": 1, "bytes": 6, "digest": "a:b:c:1"},
        "dropped": {"count": 1, "bytes": 5, "items": ["a:b:c:2"]},
        "introduced": {"count": 0}, "compactor": "x", "method": "y"}"#;
    let mut row = object(base);
    let digest = cutctx_receipts::receipt::receipt_digest_of(&row).expect("digestible");
    row.insert("receipt_digest", Value::str(&digest));
    let v = verify_receipt(&Value::Object(row.clone()), None, None);
    assert!(!v.self_consistent);
    assert_eq!(
        v.notes[0],
        "bytes do not reconcile: nothing was introduced, so post.bytes must equal \
         pre.bytes - dropped.bytes (5), got 6"
    );
    // With an introduction, post.bytes is only a lower bound.
    let mut intro = row.clone();
    intro.insert("introduced", Value::Object(object(r#"{"count": 1}"#)));
    intro.insert(
        "post",
        Value::Object(object(r#"{"count": 2, "bytes": 4, "digest": "a:b:c:1"}"#)),
    );
    intro.insert(
        "receipt_digest",
        Value::str(&cutctx_receipts::receipt::receipt_digest_of(&intro).expect("digestible")),
    );
    let v = verify_receipt(&Value::Object(intro.clone()), None, None);
    assert_eq!(
        v.notes[0],
        "bytes do not reconcile: post.bytes 4 is below the kept bytes it must contain (5) -- \
         v1 schema: this is only a lower bound, not an exact pin, whenever introduced.count>0 \
         (the HIGH-1 gap; re-seal under v2 to close it)"
    );
    intro.insert(
        "post",
        Value::Object(object(r#"{"count": 2, "bytes": 99, "digest": "a:b:c:1"}"#)),
    );
    intro.insert(
        "receipt_digest",
        Value::str(&cutctx_receipts::receipt::receipt_digest_of(&intro).expect("digestible")),
    );
    let v = verify_receipt(&Value::Object(intro), None, None);
    assert!(v.ok, "{:?}", v.notes);
    assert_eq!(v.verified_scope, "bounded_no_content+v1_lower_bound");
}
