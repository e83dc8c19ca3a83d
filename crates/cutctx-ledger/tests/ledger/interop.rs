//! The ledger `scripts/arcaeon-check.sh` holds to arcaeon's own verifier when the `cutctx`
//! binary has no receipt subcommands yet: written through this crate's API, with the content
//! behind every receipt (bytes as `{"$b64": ...}`) and a head pin.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use cutctx_executor::apply;
use cutctx_ledger::{Ledger, SystemClock};
use cutctx_model::{CompactionBudget, Role, Transcript, TranscriptTurn};
use cutctx_policies::{CompactionPolicy, default_chain};
use cutctx_receipts::content::parse_items;
use cutctx_receipts::digest::Item;
use cutctx_receipts::json::{self, Object, Text, Value};
use cutctx_receipts::transcript::{receipt_for_compaction, transcript_items};
use cutctx_receipts::{CompactionReceipt, Labels};

use crate::support::object;

const PRE: &str = r#"[{"$b64": "AAFiaW5hcnn/"},
 {"price": 19.99, "qty": 3, "big": 1152921504606846976, "huge": 12345678901234567890123,
  "zero": -0.0, "sci": 1e+100, "tiny": 1e-05, "ok": true, "none": null},
 [1, "two", [3.5, {}], []], "", "κείμενο / テキスト / 😀", 42,
 "duplicate", "duplicate", "tab\there \"quoted\" \u0001"]"#;
const POST: &str = r#"[{"price": 19.99, "qty": 3, "big": 1152921504606846976,
  "huge": 12345678901234567890123, "zero": -0.0, "sci": 1e+100, "tiny": 1e-05, "ok": true,
  "none": null}, "κείμενο / テキスト / 😀", "duplicate", "summary ✓"]"#;

/// An item as the content map writes it.
fn encode(item: &Item) -> Value {
    match item {
        Item::Bytes(b) => {
            const ALPHABET: &[u8; 64] =
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            let mut s = String::new();
            for chunk in b.chunks(3) {
                let n = chunk
                    .iter()
                    .enumerate()
                    .fold(0_u32, |n, (i, &x)| n | (u32::from(x) << (16 - 8 * i)));
                for i in 0..4 {
                    if i <= chunk.len() {
                        s.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
                    } else {
                        s.push('=');
                    }
                }
            }
            let mut o = Object::new();
            o.insert("$b64", Value::str(&s));
            Value::Object(o)
        }
        Item::Str(s) => Value::str(s),
        Item::Json(v) => v.clone(),
    }
}

fn side(pre: &[Item], post: &[Item]) -> Value {
    let mut o = Object::new();
    o.insert("pre", Value::Array(pre.iter().map(encode).collect()));
    o.insert("post", Value::Array(post.iter().map(encode).collect()));
    Value::Object(o)
}

fn transcript() -> Transcript {
    let mut turns = vec![TranscriptTurn::new("s1", Role::System, "rules é", 10).expect("an id")];
    for i in 0..4 {
        turns.push(
            TranscriptTurn::new(format!("u{i}"), Role::User, format!("question {i}"), 20)
                .expect("an id"),
        );
        turns.push(
            TranscriptTurn::new(format!("a{i}"), Role::Assistant, "calling", 10)
                .expect("an id")
                .with_tool_call_id(format!("c{i}")),
        );
        turns.push(
            TranscriptTurn::new(format!("t{i}"), Role::Tool, "log line\n".repeat(150), 300)
                .expect("an id")
                .with_tool_call_id(format!("c{i}"))
                .with_metadata(Arc::new(BTreeMap::from([("n".to_owned(), i.to_string())]))),
        );
    }
    turns.push(TranscriptTurn::new("a8", Role::Assistant, "done", 10).expect("an id"));
    turns.push(
        TranscriptTurn::new("u9", Role::User, "thanks", 10)
            .expect("an id")
            .with_pinned(true),
    );
    Transcript::new(turns).expect("unique ids")
}

/// Writes the ledger, its content map and its pin.
pub(crate) fn write(ledger_path: &Path, content_path: &Path, pin_path: &Path) {
    let clock = SystemClock;
    let ledger = Ledger::new(ledger_path);
    let mut content = Object::new();
    let mut line = 0_usize;

    let pre = parse_items(PRE, "pre").expect("items");
    let post = parse_items(POST, "post").expect("items");
    let mut r = CompactionReceipt::open(&pre, &clock).expect("opens");
    r.record_kept(&post).expect("records");
    ledger
        .seal(
            &mut r,
            &Labels::new("fifo+summary ✓", "salience-prune"),
            &clock,
        )
        .expect("appends");
    line += 1;
    content.insert(Text::from(line.to_string()), side(&pre, &post));

    ledger
        .append(
            &object(r#"{"tool": "search", "query": "refund policy", "result_ok": true}"#),
            &clock,
        )
        .expect("appends");
    line += 1;

    let t = transcript();
    let plan = default_chain("p.v1")
        .expect("a prompt id")
        .decide(
            &t,
            &CompactionBudget::new(200).with_protected_recent_turns(2),
        )
        .expect("satisfiable");
    let summaries = plan
        .summarization_requests
        .iter()
        .map(|r| {
            (
                r.group_id().to_owned(),
                "Earlier: four log reads.".to_owned(),
            )
        })
        .collect();
    let out = apply(&t, &plan, &summaries).expect("applies");
    let row = receipt_for_compaction(&t, &out, "cutctx-interop", &clock).expect("seals");
    ledger.append(&row, &clock).expect("appends");
    line += 1;
    content.insert(
        Text::from(line.to_string()),
        side(&transcript_items(&t), &transcript_items(&out.transcript)),
    );

    let all = [Item::Str("a".into()), Item::Str("b".into())];
    let mut r = CompactionReceipt::open(&all, &clock).expect("opens");
    r.record_kept(&[]).expect("records");
    ledger
        .seal(&mut r, &Labels::new("truncator", "fifo-truncate"), &clock)
        .expect("appends");
    line += 1;
    content.insert(Text::from(line.to_string()), side(&all, &[]));

    std::fs::write(
        content_path,
        json::to_line(&Value::Object(content)).expect("writable"),
    )
    .expect("the content map is written");
    let pin = ledger.head(&clock).as_pin().expect("pins");
    std::fs::write(pin_path, pin + "\n").expect("the pin is written");
}
