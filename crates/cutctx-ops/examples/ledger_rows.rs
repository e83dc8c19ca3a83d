//! Writes one deterministic receipts ledger for `cutctx ledger verify` on standard output.
//!
//! `cargo run --release -p cutctx-ops --example ledger_rows -- ROWS [ITEMS]` writes a ledger of
//! `ROWS` chained rows: compaction receipts, each of `ITEMS` items before (default 8) of which
//! half are dropped and one summary introduced, with a tool-call row after every tenth receipt,
//! as an agent's ledger holds them. The clock steps a second a row from a fixed start, so the
//! same arguments always give the same bytes and runs of `scripts/ledger-bench.py` compare.

use std::io::Write as _;

use cutctx::receipts::chain::{GENESIS, chained, stamped};
use cutctx::receipts::json::{Object, Value};
use cutctx::receipts::{CompactionReceipt, Item, Labels, ReceiptError, SteppingClock};

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = (
        args.first().map(|s| s.parse::<usize>()),
        args.get(1).map_or(Ok(8), |s| s.parse::<usize>()),
    );
    let (Some(Ok(rows)), Ok(items)) = parsed else {
        eprintln!("usage: ledger_rows ROWS [ITEMS]");
        return std::process::ExitCode::from(2);
    };
    let text = match ledger(rows, items.max(2)) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("cannot make the ledger: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cannot write the ledger: {e}");
            std::process::ExitCode::from(1)
        }
    }
}

/// The ledger's text: `rows` rows, each chained after the one before.
pub(crate) fn ledger(rows: usize, items: usize) -> Result<String, ReceiptError> {
    let clock = SteppingClock::starting_at_unix(1_796_000_000);
    let labels = Labels::new("cutctx/bench", "summary");
    let mut text = String::new();
    let mut prev = GENESIS.as_bytes().to_vec();
    for r in 0..rows {
        let record = if r % 11 == 10 {
            let mut tool = Object::new();
            tool.insert("tool", Value::str("search"));
            tool.insert("query", Value::str(&format!("step {r}")));
            tool
        } else {
            receipt(r, items, &labels, &clock)?
        };
        let row = chained(stamped(&record, &clock), &prev)?;
        text.push_str(&row.line);
        text.push('\n');
        prev = row.chain.into_bytes();
    }
    Ok(text)
}

/// Receipt `r`: `items` log lines before; the first half kept, a summary of the rest after.
fn receipt(
    r: usize,
    items: usize,
    labels: &Labels,
    clock: &SteppingClock,
) -> Result<Object, ReceiptError> {
    let pre: Vec<Item> = (0..items)
        .map(|k| {
            Item::Str(format!(
                "row {r} item {k}: a tool's output, a line or two long"
            ))
        })
        .collect();
    let mut post: Vec<Item> = pre[..items / 2].to_vec();
    post.push(Item::Str(format!("summary of row {r}")));
    let mut receipt = CompactionReceipt::open(&pre, clock)?;
    receipt.record_kept(&post)?;
    receipt.record_dropped(&pre[items / 2..])?;
    receipt.seal(labels, clock)
}
