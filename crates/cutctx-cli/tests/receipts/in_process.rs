//! The CLI's receipt and ledger commands in-process, through `src/ledger.rs`.

use serde_json::{Value, json};

use cutctx::receipts::{FixedClock, SteppingClock};

use crate::ledger::{compact_with_ledger, ledger_head, ledger_verify, receipt_seal};
use crate::support::{
    compaction_content, mask_and_summary_request, read, sample_dir, scratch, with_summaries, write,
};

fn verdict(text: &str) -> Value {
    assert!(text.ends_with('\n'));
    serde_json::from_str(text).expect("the verdict is JSON")
}

#[test]
fn compact_with_a_ledger_prints_what_compact_prints_and_appends_a_verifiable_receipt() {
    let dir = scratch("compact_with_ledger");
    let ledger = dir.join("receipts.jsonl");
    let request = with_summaries(mask_and_summary_request());
    let text = request.to_string();
    let clock = SteppingClock::starting_at_unix(1_786_752_000);
    let out = compact_with_ledger(&text, &ledger, None, &clock).expect("compacts");
    assert_eq!(out, cutctx_ops::compact(&text).expect("compacts"));
    let again = compact_with_ledger(&text, &ledger, Some("agent-7 ✓"), &clock).expect("compacts");
    assert_eq!(again, out);

    let rows: Vec<Value> = read(&ledger)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON row"))
        .collect();
    assert_eq!(rows.len(), 2);
    let output: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(rows[0]["plan_hash"], output["report"]["plan_hash"]);
    assert_eq!(
        rows[0]["compactor"],
        json!(format!("cutctx/{}", cutctx::VERSION))
    );
    assert_eq!(rows[1]["compactor"], json!("agent-7 ✓"));
    assert_eq!(
        rows[0]["method"],
        json!(format!(
            "cutctx:{}@{}",
            output["report"]["policy_name"].as_str().expect("a name"),
            output["report"]["policy_version"]
                .as_str()
                .expect("a version")
        ))
    );
    let masked = output["report"]["masked_turn_ids"]
        .as_array()
        .expect("a list")
        .len();
    let summarized = output["report"]["summarized_turn_ids"]
        .as_array()
        .expect("a list")
        .len();
    let summaries = output["report"]["summary_turn_ids"]
        .as_array()
        .expect("a list")
        .len();
    assert!(summaries > 0, "the fixture summarizes");
    assert_eq!(rows[0]["dropped"]["count"], json!(masked + summarized));
    assert_eq!(rows[0]["introduced"]["count"], json!(masked + summaries));

    let content = compaction_content(1, &request, &out);
    let (code, v) = ledger_verify(&ledger, None, Some(&content), true).expect("readable");
    let v = verdict(&v);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["verdict"], "BOUNDED", "row 2 has no content");
    assert_eq!(v["receipts"][0]["verified_scope"], "full");
    assert_eq!(v["receipts"][0]["plan_hash"], output["report"]["plan_hash"]);
    assert_eq!(v["receipts"][1]["verified_scope"], "bounded_no_content");
}

#[test]
fn compact_with_a_ledger_fails_whole() {
    let dir = scratch("compact_fails_whole");
    let ledger = dir.join("receipts.jsonl");
    // A missing summary: compact's own error, and nothing appended.
    let err = compact_with_ledger(
        &mask_and_summary_request().to_string(),
        &ledger,
        None,
        &FixedClock::new("t"),
    )
    .expect_err("the summary is missing");
    assert_eq!(err.code, "COMPACTION_SUMMARY_MISSING");
    assert!(!ledger.exists());
    // An unwritable ledger: nothing printed.
    write(&dir, "file", "x");
    let err = compact_with_ledger(
        &with_summaries(mask_and_summary_request()).to_string(),
        &dir.join("file").join("receipts.jsonl"),
        None,
        &FixedClock::new("t"),
    )
    .expect_err("cannot append");
    assert_eq!(err.code, "LEDGER_IO_ERROR");
    assert_eq!(err.exit_status(), 2);
}

#[test]
fn receipt_seal_receipts_any_compactor_and_refuses_a_false_claim() {
    let Some(sample) = sample_dir() else { return };
    let dir = scratch("receipt_seal");
    let ledger = dir.join("receipts.jsonl");
    let pre = read(&sample.join("pre.json"));
    let post = read(&sample.join("post.json"));
    let clock = FixedClock::new("2026-11-29T12:13:00Z");
    let line = receipt_seal(
        &pre,
        &post,
        None,
        &ledger,
        "fifo+summary ✓",
        "salience-prune",
        &clock,
    )
    .expect("seals");
    let row: Value = serde_json::from_str(&line).expect("JSON");
    // The same content as the sample's receipt B: the same core, so the same receipt_digest.
    let sample_b: Value = serde_json::from_str(
        read(&sample.join("receipts.jsonl"))
            .lines()
            .nth(2)
            .expect("row 3"),
    )
    .expect("JSON");
    assert_eq!(row["receipt_digest"], sample_b["receipt_digest"]);
    assert_eq!(row["dropped"], sample_b["dropped"]);

    // A claim that disagrees is refused, and nothing is written.
    let err =
        receipt_seal(&pre, &post, Some("[42]"), &ledger, "x", "y", &clock).expect_err("disagrees");
    assert_eq!(err.code, "RECEIPT_CLAIM_MISMATCH");
    assert_eq!(read(&ledger).lines().count(), 1);
    // A claim that agrees, in another order, seals.
    let claim = r#"["", {"$b64": "AAFiaW5hcnn/"}, 42, [1, "two", [3.5, {}], []]]"#;
    receipt_seal(&pre, &post, Some(claim), &ledger, "x", "y", &clock).expect("agrees");
    // Input that is not an item array.
    for (bad, code) in [
        ("{", "RECEIPT_JSON_SYNTAX"),
        ("{}", "RECEIPT_CONTENT_INVALID"),
        (r#"[{"$b64": "*"}]"#, "RECEIPT_CONTENT_INVALID"),
        ("[NaN]", "RECEIPT_JSON_NON_FINITE"),
        (r#"[{"a": 1, "a": 2}]"#, "RECEIPT_JSON_DUPLICATE_KEY"),
    ] {
        let err = receipt_seal(bad, &post, None, &ledger, "x", "y", &clock).expect_err(bad);
        assert_eq!(err.code, code, "{bad}");
        assert_eq!(err.details["document"], "the pre content");
    }
    let (code, v) = ledger_verify(&ledger, None, None, true).expect("readable");
    assert_eq!(code, 0, "{v}");
}

#[test]
fn ledger_verify_accepts_the_sample_and_names_what_breaks() {
    let Some(sample) = sample_dir() else { return };
    let ledger = sample.join("receipts.jsonl");
    let pin = read(&sample.join("receipts.head.txt"));
    let content = read(&sample.join("content.json"));
    let (code, v) = ledger_verify(&ledger, Some(&pin), Some(&content), false).expect("readable");
    let v = verdict(&v);
    assert_eq!((code, v["verdict"].as_str()), (0, Some("VERIFIED")), "{v}");
    assert_eq!(v["checked"]["receipts"], 2);
    assert_eq!(v["checked"]["content_lines"], json!([1, 3]));
    assert_eq!(v["pin"]["status"], "consistent");
    assert_eq!(v["failures"], json!([]));
    let (code, v) = ledger_verify(&ledger, None, None, false).expect("readable");
    assert_eq!(
        (code, verdict(&v)["verdict"].as_str()),
        (0, Some("BOUNDED"))
    );

    let dir = scratch("verify_breaks");
    let text = read(&ledger);
    // One field edited on line 2.
    let edited = write(
        &dir,
        "edited.jsonl",
        &text.replace("refund policy", "refund policz"),
    );
    let (code, v) = ledger_verify(&edited, None, None, false).expect("readable");
    let v = verdict(&v);
    assert_eq!((code, v["verdict"].as_str()), (1, Some("BROKEN")));
    assert_eq!(v["first_failure"]["line"], 2);
    assert_eq!(v["first_failure"]["code"], "LEDGER_CHAIN_BROKEN");
    assert_eq!(v["ledger"]["first_break"], "line 2: chain mismatch");
    // A deleted row.
    let lines: Vec<&str> = text.lines().collect();
    let deleted = write(
        &dir,
        "deleted.jsonl",
        &format!("{}\n{}\n", lines[0], lines[2]),
    );
    let (code, v) = ledger_verify(&deleted, None, None, false).expect("readable");
    assert_eq!(
        (code, verdict(&v)["first_failure"]["line"].as_u64()),
        (1, Some(2))
    );
    // Truncated, against the pin.
    let truncated = write(
        &dir,
        "truncated.jsonl",
        &format!("{}\n{}\n", lines[0], lines[1]),
    );
    let (code, _) = ledger_verify(&truncated, None, None, false).expect("readable");
    assert_eq!(code, 0, "the truncation gap: the chain alone cannot see it");
    let (code, v) = ledger_verify(&truncated, Some(&pin), None, false).expect("readable");
    let v = verdict(&v);
    assert_eq!(code, 1);
    assert_eq!(v["pin"]["status"], "truncated");
    assert_eq!(v["failures"][0]["code"], "LEDGER_PIN_TRUNCATED");
    // A re-minted receipt (same chain rule, a lie about what was kept), against content.
    let remint_dir = scratch("verify_remint");
    let reminted = remint_dir.join("receipts.jsonl");
    let pre = read(&sample.join("pre.json"));
    receipt_seal(
        &pre,
        &pre,
        None,
        &reminted,
        "liar",
        "salience-prune",
        &FixedClock::new("t"),
    )
    .expect("seals");
    let lie_content = json!({"1": {
        "pre": serde_json::from_str::<Value>(&pre).expect("JSON"),
        "post": serde_json::from_str::<Value>(&read(&sample.join("post.json"))).expect("JSON"),
    }})
    .to_string();
    let (code, _) = ledger_verify(&reminted, None, None, false).expect("readable");
    assert_eq!(code, 0, "self-consistent without content");
    let (code, v) = ledger_verify(&reminted, None, Some(&lie_content), false).expect("readable");
    let v = verdict(&v);
    assert_eq!(code, 1);
    assert_eq!(v["first_failure"]["code"], "RECEIPT_CONTENT_MISMATCH");
    assert_eq!(v["receipts"][0]["content"], "mismatch");
}

#[test]
fn unreadable_or_malformed_input_is_an_error_with_exit_2() {
    let Some(sample) = sample_dir() else { return };
    let dir = scratch("verify_unreadable");
    let ledger = sample.join("receipts.jsonl");
    let missing =
        ledger_verify(&dir.join("missing.jsonl"), None, None, false).expect_err("missing");
    assert_eq!((missing.code, missing.exit_status()), ("INPUT_ERROR", 2));
    for (pin, content) in [
        (Some("arcaeon-ledger head chain=x"), None),
        (None, Some("{")),
        (None, Some(r#"{"one": {}}"#)),
    ] {
        let err = ledger_verify(&ledger, pin, content, false).expect_err("malformed");
        assert_eq!(err.exit_status(), 2, "{}", err.message);
    }
}

#[test]
fn ledger_head_prints_arcaeon_s_pin() {
    let Some(sample) = sample_dir() else { return };
    let pin = ledger_head(
        &sample.join("receipts.jsonl"),
        &FixedClock::new("2026-11-29T12:13:00Z"),
    )
    .expect("pins");
    assert_eq!(pin, read(&sample.join("receipts.head.txt")));
    let dir = scratch("head");
    assert_eq!(
        ledger_head(
            &dir.join("new.jsonl"),
            &FixedClock::new("2026-01-01T00:00:00Z")
        )
        .expect("pins"),
        "arcaeon-ledger head chain=genesis rows=0 as_of=2026-01-01T00:00:00Z\n"
    );
    let broken = write(&dir, "broken.jsonl", "{\"a\": 1, \"chain\": \"x\"}\n");
    let err = ledger_head(&broken, &FixedClock::new("t")).expect_err("broken");
    assert_eq!(err.code, "LEDGER_UNVERIFIED");
    assert_eq!(
        err.message,
        "refusing to mint a pin over a ledger that does not verify: line 1: chain mismatch"
    );
}
