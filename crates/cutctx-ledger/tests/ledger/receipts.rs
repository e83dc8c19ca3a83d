//! Receipts through the file: sealing into a ledger (a failed append leaves the receipt open),
//! and arcaeon's sample ledger read, pinned and appended to on disk.

use std::path::Path;

use cutctx_ledger::Ledger;
use cutctx_ledger::ledger::verify_file;
use cutctx_receipts::content::parse_content_map;
use cutctx_receipts::digest::Item;
use cutctx_receipts::{AuditOptions, CompactionReceipt, FixedClock, Labels, Pin};

use crate::support::{conformance, read, scratch};

fn clock() -> FixedClock {
    FixedClock::new("2026-08-15T00:00:00Z")
}

fn s(text: &str) -> Item {
    Item::Str(text.into())
}

#[test]
fn a_failed_append_leaves_the_receipt_open() {
    let dir = scratch("failed_append");
    std::fs::write(dir.join("not-a-dir"), b"x").expect("writable");
    let ledger = Ledger::new(dir.join("not-a-dir").join("receipts.jsonl"));
    let mut r = CompactionReceipt::open(&[s("a")], &clock()).expect("opens");
    r.record_kept(&[s("a")]).expect("records");
    let err = ledger
        .seal(&mut r, &Labels::new("t", "m"), &clock())
        .expect_err("cannot create");
    assert_eq!(err.code(), "LEDGER_IO_ERROR");
    assert!(!r.is_sealed());
    let good = Ledger::new(dir.join("receipts.jsonl"));
    good.seal(&mut r, &Labels::new("t", "m"), &clock())
        .expect("seals");
    assert!(r.is_sealed());
}

#[test]
fn arcaeon_s_sample_verifies_and_pins_from_its_file() {
    let Some(dir) = conformance() else { return };
    let dir = dir.join("sample");
    let v = verify_file(&dir.join("receipts.jsonl"), false);
    assert_eq!(v.ok, Some(true));
    assert_eq!((v.rows, v.chained, v.prechain, v.breaks), (3, 3, 0, 0));
    assert_eq!(v.verified_scope, "full");
    assert_eq!(v.first_break, None);

    let head =
        Ledger::new(dir.join("receipts.jsonl")).head(&FixedClock::new("2026-11-29T12:13:00Z"));
    assert_eq!(head.chain, "f1169c094c7a99b2afbb9a283da4535b");
    assert_eq!(head.rows, 3);
    assert_eq!(
        head.as_pin().expect("pins"),
        read(&dir, "receipts.head.txt").trim_end()
    );
}

#[test]
fn appending_to_a_copy_of_the_sample_continues_its_chain() {
    let Some(sample) = conformance() else { return };
    let sample = sample.join("sample");
    let text = read(&sample, "receipts.jsonl");
    let content =
        parse_content_map(&read(&sample, "content.json")).expect("the content map parses");
    let pin = Pin::parse(&read(&sample, "receipts.head.txt")).expect("the pin parses");
    let dir = scratch("append_to_sample");
    let path = dir.join("receipts.jsonl");
    std::fs::write(&path, &text).expect("writable");
    let ledger = Ledger::new(&path);
    let clock = FixedClock::new("2026-11-29T12:14:00Z");
    let row = crate::support::object(r#"{"tool": "note", "ok": true}"#);
    let appended = ledger.append(&row, &clock).expect("appends");
    assert!(!appended.healed);
    let v = verify_file(Path::new(&path), false);
    assert_eq!((v.ok, v.rows), (Some(true), 4));
    let a = ledger
        .audit(AuditOptions {
            pin: Some(&pin),
            content: Some(&content),
            strict: true,
        })
        .expect("readable");
    assert_eq!(a.verdict(), "VERIFIED");
    assert!(
        a.pin
            .as_ref()
            .is_some_and(|p| p.detail.contains("grown 1 row"))
    );
}
