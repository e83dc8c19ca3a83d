//! The ledger file in one process: appending, healing a torn line, the tail scan, declared
//! breaks, the lock, and head pins.

use std::io::Write;
use std::time::Duration;

use cutctx_ledger::Ledger;
use cutctx_ledger::ledger::{chain_at, verify_file};
use cutctx_receipts::chain::{BreakKind, GENESIS};
use cutctx_receipts::digest::sha256_hex;
use cutctx_receipts::json::Value;
use cutctx_receipts::{FixedClock, Pin, PinStatus, SteppingClock};

use crate::support::{lines_of, object, scratch};

fn clock() -> SteppingClock {
    SteppingClock::starting_at_unix(1_786_752_000)
}

#[test]
fn appends_chain_stamp_ts_and_replace_a_given_chain() {
    let dir = scratch("appends_chain");
    let ledger = Ledger::new(dir.join("deep/er/log.jsonl"));
    let c = clock();
    let a = ledger
        .append(&object(r#"{"tool": "a", "chain": "forged"}"#), &c)
        .expect("appends");
    let b = ledger
        .append(
            &object(r#"{"tool": "b", "ts": "2000-01-01T00:00:00Z"}"#),
            &c,
        )
        .expect("appends");
    assert_eq!(
        a.line,
        format!(
            r#"{{"tool": "a", "ts": "2026-08-15T00:00:00Z", "chain": "{}"}}"#,
            a.chain
        )
    );
    assert!(b.line.contains(r#""ts": "2000-01-01T00:00:00Z""#));
    assert_eq!(
        a.chain,
        cutctx_receipts::chain::chain(
            GENESIS,
            &object(r#"{"tool": "a", "ts": "2026-08-15T00:00:00Z"}"#)
        )
        .expect("hashable")
    );
    let v = verify_file(ledger.path(), true);
    assert_eq!((v.ok, v.rows, v.chained), (Some(true), 2, 2));
    assert_eq!(ledger.last_chain().expect("readable"), b.chain);
    assert_eq!(chain_at(ledger.path(), 1), Some(Value::str(&a.chain)));
    assert_eq!(chain_at(ledger.path(), 3), None);
}

#[test]
fn unwritable_rows_write_nothing() {
    let dir = scratch("unwritable");
    let ledger = Ledger::new(dir.join("log.jsonl"));
    let mut row = object(r#"{"x": 1}"#);
    row.insert("x", Value::Float(f64::NAN));
    let err = ledger.append(&row, &clock()).expect_err("NaN");
    assert_eq!(err.code(), "RECEIPT_JSON_NON_FINITE");
    assert!(!ledger.path().exists());
}

#[test]
fn a_torn_last_line_is_reported_then_healed_without_harming_other_rows() {
    let dir = scratch("torn_in_process");
    let ledger = Ledger::new(dir.join("log.jsonl"));
    let c = clock();
    for i in 0..3 {
        ledger
            .append(&object(&format!(r#"{{"seq": {i}}}"#)), &c)
            .expect("appends");
    }
    let before = lines_of(ledger.path());
    // A crash mid-write: half a row, no newline.
    let half = r#"{"seq": 3, "ts": "2026-08-15T00:00:03Z", "ch"#;
    std::fs::OpenOptions::new()
        .append(true)
        .open(ledger.path())
        .and_then(|mut f| f.write_all(half.as_bytes()))
        .expect("writable");
    let v = verify_file(ledger.path(), false);
    assert_eq!((v.ok, v.rows, v.breaks), (Some(false), 3, 1));
    assert_eq!(v.first_break.as_deref(), Some("line 4: unparseable"));
    assert_eq!(v.all_breaks[0].kind, BreakKind::TornLine);
    let head = ledger.head(&FixedClock::new("t"));
    assert_eq!(
        head.as_pin().expect_err("broken").code(),
        "LEDGER_UNVERIFIED"
    );

    let appended = ledger
        .append(&object(r#"{"seq": 4}"#), &c)
        .expect("appends");
    assert!(appended.healed);
    let after = lines_of(ledger.path());
    assert_eq!(after[..3], before[..]);
    assert_eq!(after[3], half);
    let v = verify_file(ledger.path(), false);
    assert_eq!((v.rows, v.breaks), (4, 1));
    assert_eq!(v.all_breaks[0].kind, BreakKind::Unparseable);
    assert_eq!(v.first_break.as_deref(), Some("line 4: unparseable"));
}

#[test]
fn the_tail_scan_finds_a_row_longer_than_any_window() {
    let dir = scratch("long_row");
    let ledger = Ledger::new(dir.join("log.jsonl"));
    let c = clock();
    let big = "x".repeat(3 << 20);
    ledger
        .append(&object(&format!(r#"{{"blob": "{big}"}}"#)), &c)
        .expect("appends");
    ledger
        .append(&object(r#"{"after": true}"#), &c)
        .expect("appends");
    let v = verify_file(ledger.path(), false);
    assert_eq!((v.ok, v.rows), (Some(true), 2));
}

#[test]
fn crlf_blank_lines_and_a_foreign_writer_s_escapes_verify() {
    let dir = scratch("foreign");
    let path = dir.join("log.jsonl");
    let ledger = Ledger::new(&path);
    let c = clock();
    let a = ledger
        .append(&object(r#"{"note": "é\u2028"}"#), &c)
        .expect("appends");
    // Rewrite as a foreign writer would: CRLF, ASCII escapes, other key order, blank lines.
    let foreign = format!(
        "\r\n{{\"chain\": \"{}\", \"ts\": \"2026-08-15T00:00:00Z\", \"note\": \"\\u00e9\\u2028\"}}\r\n\r\n",
        a.chain
    );
    std::fs::write(&path, foreign).expect("writable");
    let v = verify_file(&path, false);
    assert_eq!((v.ok, v.rows), (Some(true), 1));
    let b = ledger.append(&object(r#"{"n": 2}"#), &c).expect("appends");
    assert!(!b.healed);
    let v = verify_file(&path, false);
    assert_eq!((v.ok, v.rows), (Some(true), 2));
}

#[test]
fn after_an_out_of_band_row_the_chain_restarts_from_genesis_as_arcaeon_s_does() {
    let dir = scratch("damaged_tail");
    let path = dir.join("log.jsonl");
    let ledger = Ledger::new(&path);
    let c = clock();
    ledger.append(&object(r#"{"n": 1}"#), &c).expect("appends");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(b"{\"oob\": true}\n"))
        .expect("writable");
    ledger.append(&object(r#"{"n": 2}"#), &c).expect("appends");
    let v = verify_file(&path, false);
    let messages: Vec<&str> = v.all_breaks.iter().map(|b| b.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "line 2: unchained row after chain began",
            "line 3: chain mismatch"
        ]
    );
}

#[test]
fn declared_breaks_bound_the_verdict_and_strict_mode_ignores_them() {
    let dir = scratch("declared");
    let path = dir.join("log.jsonl");
    let ledger = Ledger::new(&path);
    let c = clock();
    ledger.append(&object(r#"{"n": 1}"#), &c).expect("appends");
    let orphan = r#"{"hand": "written"}"#;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(format!("{orphan}\n").as_bytes()))
        .expect("writable");
    assert_eq!(
        ledger
            .declare_break(9, "x", None, &c)
            .expect_err("no line 9")
            .code(),
        "LEDGER_MALFORMED_INPUT"
    );
    assert!(ledger.declare_break(2, "  ", None, &c).is_err());
    let decl = ledger
        .declare_break(2, " incident 7 ", None, &c)
        .expect("appends");
    assert_eq!(
        decl.row.get("orphan_sha256"),
        Some(&Value::str(&sha256_hex(orphan.as_bytes())))
    );
    let v = verify_file(&path, false);
    assert_eq!(v.ok, None);
    assert_eq!(v.verified_scope, "bounded_declared_break");
    assert_eq!(v.declared, ["line 2: declared break (incident 7)"]);
    let strict = verify_file(&path, true);
    assert_eq!(strict.ok, Some(false));
    assert_eq!(
        strict.declared,
        ["line 2: declaration present, NOT honored (strict mode) (incident 7)"]
    );
    // A bounded head still pins.
    assert!(ledger.head(&FixedClock::new("t")).as_pin().is_ok());
}

#[test]
fn a_held_lock_times_out_and_writes_nothing() {
    let dir = scratch("lock_timeout");
    let ledger = Ledger::new(dir.join("log.jsonl")).with_lock_timeout(Duration::from_millis(200));
    let holder = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(ledger.lock_path())
        .expect("lock file");
    holder.lock().expect("locks");
    let err = ledger
        .append(&object(r#"{"n": 1}"#), &clock())
        .expect_err("locked");
    assert_eq!(err.code(), "LEDGER_LOCK_TIMEOUT");
    assert!(!ledger.path().exists());
    holder.unlock().expect("unlocks");
    ledger
        .append(&object(r#"{"n": 1}"#), &clock())
        .expect("appends");
}

#[test]
fn head_pins_close_the_truncation_gap() {
    let dir = scratch("pins");
    let path = dir.join("log.jsonl");
    let ledger = Ledger::new(&path);
    let empty = ledger.head(&FixedClock::new("2026-08-15T00:00:00Z"));
    assert_eq!(
        empty.as_pin().expect("an absent ledger pins as genesis"),
        "arcaeon-ledger head chain=genesis rows=0 as_of=2026-08-15T00:00:00Z"
    );
    let c = clock();
    for i in 0..3 {
        ledger
            .append(&object(&format!(r#"{{"n": {i}}}"#)), &c)
            .expect("appends");
    }
    let pin =
        Pin::parse(&ledger.head(&FixedClock::new("t")).as_pin().expect("pins")).expect("parses");
    assert_eq!(pin.rows, 3);
    let text = ledger.read_text().expect("readable");
    assert_eq!(
        cutctx_receipts::pin::check_pin(&text, 3, &pin).status,
        PinStatus::Consistent
    );
    let truncated: String = text.split_inclusive('\n').take(2).collect();
    std::fs::write(&path, &truncated).expect("writable");
    assert_eq!(verify_file(&path, true).ok, Some(true));
    let check = cutctx_receipts::pin::check_pin(&truncated, 2, &pin);
    assert_eq!(check.status, PinStatus::Truncated);
    assert_eq!(
        check.detail,
        "log has 2 rows but the pin recorded 3: 1 pinned row(s) are missing (truncation)"
    );
}
