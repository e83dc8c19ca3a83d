//! The ledger arcaeon wrote (`sample/`): accepted as arcaeon accepts it, with and without
//! content and pin; rejected after any single edit, a deletion, a re-mint checked against
//! content, and a truncation checked against the pin.

use std::collections::BTreeMap;

use cutctx_receipts::chain::{self, GENESIS};
use cutctx_receipts::content::{SideContent, parse_content_map};
use cutctx_receipts::json::{self, Int, Object, Text, Value};
use cutctx_receipts::{
    AuditOptions, CompactionReceipt, FixedClock, Labels, Pin, PinStatus, audit_text, verify_receipt,
};

use crate::support::{conformance, read};

struct Sample {
    text: String,
    content: BTreeMap<usize, SideContent>,
    pin: Pin,
}

/// The audit's canonical text, written straight from it, is its tree's, with the file named
/// as `cutctx ledger verify` names it.
fn written_as_its_tree(a: &cutctx_receipts::Audit) {
    let mut tree = a.to_json();
    tree["file"] = "ledger.jsonl".into();
    assert_eq!(
        a.canonical_json(&[("file", "ledger.jsonl")]),
        cutctx_model::canonical::canonical_json_value(&tree)
    );
}

fn sample() -> Option<Sample> {
    let dir = conformance()?.join("sample");
    Some(Sample {
        text: read(&dir, "receipts.jsonl"),
        content: parse_content_map(&read(&dir, "content.json")).expect("the content map parses"),
        pin: Pin::parse(&read(&dir, "receipts.head.txt")).expect("the pin parses"),
    })
}

fn audit(text: &str, s: &Sample, content: bool, pin: bool) -> cutctx_receipts::Audit {
    audit_text(
        text,
        AuditOptions {
            pin: pin.then_some(&s.pin),
            content: content.then_some(&s.content),
            strict: false,
        },
    )
}

#[test]
fn arcaeon_s_own_verdicts_reproduce() {
    let Some(s) = sample() else { return };
    let v = chain::verify_text(&s.text, false).0;
    assert_eq!(v.ok, Some(true));
    assert_eq!((v.rows, v.chained, v.prechain, v.breaks), (3, 3, 0, 0));
    assert_eq!(v.verified_scope, "full");
    assert_eq!(v.first_break, None);

    assert_eq!(
        chain::chain_at(&s.text, 3).and_then(|c| c.as_str().map(str::to_owned)),
        Some(s.pin.chain.clone())
    );

    let rows = chain::verify_text(&s.text, false).1;
    for line in [1, 3] {
        let row = Value::Object(
            rows.iter()
                .find(|r| r.line == line)
                .expect("the receipt row")
                .row
                .clone(),
        );
        let (pre, post) = s
            .content
            .get(&line)
            .expect("content")
            .digest()
            .expect("digests");
        let full = verify_receipt(&row, pre.as_ref(), post.as_ref());
        assert!(
            full.ok && full.self_consistent,
            "line {line}: {:?}",
            full.notes
        );
        assert_eq!(full.content.as_str(), "match");
        assert_eq!(full.schema.map(|s| s.short()), Some("v2"));
        assert_eq!(full.understatement_check, Some("full"));
        assert_eq!(full.verified_scope, "full");
        assert!(full.notes.is_empty());
        let bare = verify_receipt(&row, None, None);
        assert!(bare.ok);
        assert_eq!(bare.content.as_str(), "skipped");
        assert_eq!(bare.verified_scope, "bounded_no_content");
        assert_eq!(
            bare.notes,
            [
                "bounded scan: no content supplied, so nothing was recomputed -- this is \
              self-consistency only, not proof that pre/post/dropped are true \
              (verified_scope=bounded_no_content)"
            ]
        );
    }
}

#[test]
fn the_sample_is_accepted_with_and_without_content_and_pin() {
    let Some(s) = sample() else { return };
    for (content, pin, verdict) in [
        (true, true, "VERIFIED"),
        (true, false, "VERIFIED"),
        (false, true, "BOUNDED"),
        (false, false, "BOUNDED"),
    ] {
        let a = audit(&s.text, &s, content, pin);
        written_as_its_tree(&a);
        assert_eq!(a.failures, [], "content={content} pin={pin}");
        assert_eq!(a.exit_code(), 0);
        assert_eq!(a.verdict(), verdict, "content={content} pin={pin}");
        assert_eq!(a.receipts.len(), 2);
        if pin {
            assert_eq!(
                a.pin.as_ref().map(|p| p.status),
                Some(PinStatus::Consistent)
            );
        }
    }
}

/// Every way to change one field of a value: each leaf altered, each object key removed or
/// renamed, one key added to each object.
fn single_edits(v: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    match v {
        Value::Null => out.push(Value::Bool(false)),
        Value::Bool(b) => out.push(Value::Bool(!b)),
        Value::Int(i) => {
            let n = i.as_i64().expect("sample ints are small");
            out.push(Value::Int(Int::from(n + 1)));
            out.push(Value::Float(n as f64));
        }
        Value::Float(f) => out.push(Value::Float(f + 1.0)),
        Value::Str(t) => {
            let s = t.to_string_lossy();
            out.push(Value::str(&format!("{s}x")));
            if let Some(c) = s.chars().last() {
                let mut changed = s.clone();
                changed.pop();
                changed.push(if c == '0' { '1' } else { '0' });
                out.push(Value::str(&changed));
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                for edit in single_edits(item) {
                    let mut copy = items.clone();
                    copy[i] = edit;
                    out.push(Value::Array(copy));
                }
                let mut removed = items.clone();
                removed.remove(i);
                out.push(Value::Array(removed));
            }
            let mut grown = items.clone();
            grown.push(Value::Null);
            out.push(Value::Array(grown));
        }
        Value::Object(o) => {
            for (k, item) in o.iter() {
                for edit in single_edits(item) {
                    let mut copy = o.clone();
                    copy.insert(k.clone(), edit);
                    out.push(Value::Object(copy));
                }
                let mut removed = o.clone();
                removed.remove(&k.to_string_lossy());
                out.push(Value::Object(removed));
            }
            let mut grown = o.clone();
            grown.insert("extra", Value::Bool(true));
            out.push(Value::Object(grown));
        }
    }
    out
}

fn replace_line(text: &str, line: usize, new: Option<&str>) -> String {
    let mut lines: Vec<&str> = text.split('\n').collect();
    match new {
        Some(n) => lines[line - 1] = n,
        None => {
            lines.remove(line - 1);
        }
    }
    lines.join("\n")
}

#[test]
fn any_single_edit_of_any_row_is_rejected_naming_its_line() {
    let Some(s) = sample() else { return };
    let rows = chain::verify_text(&s.text, false).1;
    let mut checked = 0;
    for parsed in &rows {
        for edit in single_edits(&Value::Object(parsed.row.clone())) {
            let line = json::to_line(&edit).expect("writable");
            let text = replace_line(&s.text, parsed.line, Some(&line));
            // Without its chain the first row is "prechain" (tolerated legacy history) and
            // the break shows on the next line, as in arcaeon; strict mode names it at once.
            let unchained_first =
                parsed.line == 1 && edit.as_object().is_some_and(|o| !o.contains_key("chain"));
            for (content, pin, strict) in [
                (false, false, false),
                (true, true, false),
                (false, false, true),
            ] {
                let a = audit_text(
                    &text,
                    AuditOptions {
                        pin: pin.then_some(&s.pin),
                        content: content.then_some(&s.content),
                        strict,
                    },
                );
                assert_eq!(a.verdict(), "BROKEN", "line {}: {line}", parsed.line);
                written_as_its_tree(&a);
                assert_eq!(a.exit_code(), 1);
                let want = if unchained_first && !strict {
                    2
                } else {
                    parsed.line
                };
                assert_eq!(
                    a.failures.first().and_then(|f| f.line),
                    Some(want),
                    "the first failure names the edited line: {line}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 150, "{checked} edits");
}

#[test]
fn deleted_rows_are_rejected() {
    let Some(s) = sample() else { return };
    for line in [1, 2] {
        let text = replace_line(&s.text, line, None);
        let a = audit(&text, &s, false, false);
        assert_eq!(a.verdict(), "BROKEN", "row {line} deleted");
        assert_eq!(
            a.file.first_break.as_deref(),
            Some(format!("line {line}: chain mismatch").as_str())
        );
    }
    // Deleting the last row is a truncation: the chain alone cannot see it; the pin does.
    let text = replace_line(&s.text, 3, None);
    assert_eq!(audit(&text, &s, false, false).verdict(), "BOUNDED");
    let a = audit(&text, &s, false, true);
    assert_eq!(a.verdict(), "BROKEN");
    assert_eq!(a.pin.as_ref().map(|p| p.status), Some(PinStatus::Truncated));
}

#[test]
fn a_truncated_ledger_fails_its_pin() {
    let Some(s) = sample() else { return };
    let two: String = s.text.split_inclusive('\n').take(2).collect();
    assert_eq!(audit(&two, &s, false, false).failures, []);
    let a = audit(&two, &s, false, true);
    assert_eq!(a.exit_code(), 1);
    assert_eq!(a.failures.len(), 1);
    assert_eq!(a.failures[0].code, "LEDGER_PIN_TRUNCATED");
    let empty = audit("", &s, false, true);
    assert_eq!(empty.failures[0].code, "LEDGER_PIN_TRUNCATED");
}

/// Rewrites the ledger from genesis with receipt B replaced by a self-consistent lie: the
/// compactor claims it kept everything.
fn re_mint(s: &Sample) -> String {
    let rows = chain::verify_text(&s.text, false).1;
    let side = s.content.get(&3).expect("content for row 3");
    let clock = FixedClock::new("2026-11-29T12:13:00Z");
    let mut liar =
        CompactionReceipt::open(side.pre.as_deref().expect("pre"), &clock).expect("opens");
    liar.record_kept(side.pre.as_deref().expect("pre"))
        .expect("records");
    let lie = liar
        .seal(&Labels::new("fifo+summary ✓", "salience-prune"), &clock)
        .expect("seals");
    let mut prev = GENESIS.to_owned();
    let mut out = String::new();
    for parsed in rows {
        let mut row: Object = if parsed.line == 3 {
            lie.clone()
        } else {
            parsed.row
        };
        row.remove("chain");
        let c = chain::chain(&prev, &row).expect("hashable");
        row.insert(Text::from("chain"), Value::str(&c));
        out.push_str(&json::to_line(&Value::Object(row)).expect("writable"));
        out.push('\n');
        prev = c;
    }
    out
}

#[test]
fn a_re_minted_ledger_fails_against_content_and_against_the_pin() {
    let Some(s) = sample() else { return };
    let text = re_mint(&s);
    // The chain and the receipts alone cannot tell.
    let bare = audit(&text, &s, false, false);
    assert_eq!(bare.failures, []);
    // Content exposes the lie...
    let a = audit(&text, &s, true, false);
    assert_eq!(a.verdict(), "BROKEN");
    assert!(
        a.failures
            .iter()
            .all(|f| f.line == Some(3) && f.code == "RECEIPT_CONTENT_MISMATCH"),
        "{:?}",
        a.failures
    );
    let notes = &a
        .receipts
        .iter()
        .find(|r| r.line == 3)
        .expect("row 3")
        .verdict
        .notes;
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("post.digest: recomputed")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("drop-manifest disagrees with content"))
    );
    // ...and so does the pin.
    let p = audit(&text, &s, false, true);
    assert_eq!(p.pin.as_ref().map(|p| p.status), Some(PinStatus::Rewritten));
    assert_eq!(p.exit_code(), 1);
}

#[test]
fn content_for_a_plain_row_is_a_failure() {
    let Some(s) = sample() else { return };
    let mut content = s.content.clone();
    content.insert(2, SideContent::default());
    let a = audit_text(
        &s.text,
        AuditOptions {
            content: Some(&content),
            ..AuditOptions::default()
        },
    );
    assert_eq!(a.failures.len(), 1);
    assert_eq!(a.failures[0].code, "LEDGER_CONTENT_NOT_A_RECEIPT");
}
