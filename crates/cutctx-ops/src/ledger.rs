//! Receipts and the ledger, for every front end: a request document's compaction with its
//! receipt appended ([`compact_with_ledger`]), a session firing's receipt ([`append_firing`]),
//! any compactor's work receipted from its pre and post content ([`receipt_seal`]), and a
//! ledger verified ([`ledger_verify`]) or pinned ([`ledger_head`]).
//!
//! Unlike the other operations these touch one file, the ledger (appending under its lock, or
//! reading it); every other document arrives as text, read by the front end as it reads a
//! request. The format is arcaeon's (`cutctx::receipts`), so ledgers written here verify under
//! arcaeon and ledgers arcaeon wrote verify here.
//!
//! * A compaction's receipt (the binary's `compact REQUEST --ledger FILE [--compactor NAME]`)
//!   comes with exactly what `compact` gives, appended before it is handed over: pre = the
//!   request's turns, post = the view's turns, each as its seven-key object; method
//!   `cutctx:<policy>@<version>`; the plan's hash under `plan_hash`. Nothing is handed over when
//!   the receipt cannot be appended.
//! * A sealed receipt (`receipt seal`) takes PRE, POST and optionally DROPPED (the caller's
//!   claim of what was dropped), JSON arrays of items: a string is hashed as its UTF-8, a
//!   `{"$b64": "..."}` object as the bytes it encodes, anything else as json-c14n; the row as
//!   written comes back.
//! * A verification (`ledger verify`) gives a JSON verdict (what was checked, every failure
//!   with its line and code) and the exit status 0 when nothing failed, 1 when something did;
//!   unreadable input is an error (exit 2). A content map takes a receipt row's line to
//!   `{"pre": [...], "post": [...]}`; for a compaction's receipt those are the request's turns
//!   (with the defaults filled in) and the output's `transcript`.
//! * A pin (`ledger head`) is `arcaeon-ledger head chain=… rows=… as_of=…`, refused for a
//!   ledger that does not verify.

use std::path::Path;

use cutctx::ledger::Ledger;
use cutctx::receipts::content::{parse_content_map, parse_items};
use cutctx::receipts::digest::Item;
use cutctx::receipts::transcript::{default_compactor, receipt_for_compaction};
use cutctx::receipts::{AuditOptions, Clock, CompactionReceipt, Labels, Pin, ReceiptError};

use crate::OpsError;

/// A receipts-crate error as the operations' error: its stable code, message and details.
fn from_receipt(e: &ReceiptError) -> OpsError {
    OpsError {
        code: e.code(),
        message: e.to_string(),
        details: e.details(),
    }
}

/// The same, for an error about one named document.
fn about(what: &str, e: &ReceiptError) -> OpsError {
    let mut err = from_receipt(e);
    err.message = format!("{what}: {}", err.message);
    err.details
        .insert("document".to_owned(), serde_json::Value::from(what));
    err
}

/// `cutctx compact REQUEST --ledger FILE [--compactor NAME]`: `compact`'s output, after the
/// receipt was appended to `ledger`. `compactor` defaults to `cutctx/<version>`.
///
/// # Errors
///
/// As `compact`, and any failure to append (`LEDGER_*`), in which case nothing is printed.
pub fn compact_with_ledger(
    request_text: &str,
    ledger: &Path,
    compactor: Option<&str>,
    clock: &dyn Clock,
) -> Result<String, OpsError> {
    let req = crate::request::parse(request_text)?;
    let plan = req.policy.decide(&req.transcript, &req.budget)?;
    let out = cutctx::apply(&req.transcript, &plan, &req.summaries)?;
    let compactor = compactor.map_or_else(default_compactor, str::to_owned);
    let row = receipt_for_compaction(&req.transcript, &out, &compactor, clock)
        .map_err(|e| from_receipt(&e))?;
    Ledger::new(ledger)
        .append(&row, clock)
        .map_err(|e| from_receipt(&e))?;
    // Byte for byte what `compact` prints.
    Ok(format!(
        "{{\"plan\":{},\"report\":{},\"transcript\":{}}}\n",
        plan.canonical_json(),
        out.report.canonical_json(),
        out.transcript.canonical_json()
    ))
}

/// The clock of the receipts a front end appends as calls happen.
pub use cutctx::ledger::SystemClock;

/// `cutctx session --ledger FILE`: appends the receipt of one firing (pre = the history's
/// turns, post = the compacted view's), as `compact --ledger` does for one compaction.
///
/// # Errors
///
/// Any failure to append (`LEDGER_*`).
pub fn append_firing(
    ledger: &Path,
    compactor: Option<&str>,
    firing: &cutctx::session::Firing,
    clock: &dyn Clock,
) -> Result<(), OpsError> {
    let compactor = compactor.map_or_else(default_compactor, str::to_owned);
    let row = receipt_for_compaction(&firing.input, &firing.compacted, &compactor, clock)
        .map_err(|e| from_receipt(&e))?;
    Ledger::new(ledger)
        .append(&row, clock)
        .map(|_| ())
        .map_err(|e| from_receipt(&e))
}

/// `cutctx receipt seal`: receipts `pre` → `post` into `ledger` and prints the row as written
/// (one line). `dropped_text`, when given, is the caller's claim, checked before anything is
/// written.
///
/// # Errors
///
/// A document that is not a JSON array of items (`RECEIPT_*`), a claim that disagrees
/// (`RECEIPT_CLAIM_MISMATCH`), or a failure to append (`LEDGER_*`).
pub fn receipt_seal(
    pre_text: &str,
    post_text: &str,
    dropped_text: Option<&str>,
    ledger: &Path,
    compactor: &str,
    method: &str,
    clock: &dyn Clock,
) -> Result<String, OpsError> {
    let items = |text: &str, what: &str| -> Result<Vec<Item>, OpsError> {
        parse_items(text, what).map_err(|e| about(what, &e))
    };
    let pre = items(pre_text, "the pre content")?;
    let post = items(post_text, "the post content")?;
    let dropped = dropped_text
        .map(|t| items(t, "the dropped claim"))
        .transpose()?;
    let mut receipt =
        CompactionReceipt::open(&pre, clock).map_err(|e| about("the pre content", &e))?;
    receipt
        .record_kept(&post)
        .map_err(|e| about("the post content", &e))?;
    if let Some(dropped) = dropped {
        receipt
            .record_dropped(&dropped)
            .map_err(|e| about("the dropped claim", &e))?;
    }
    let appended = Ledger::new(ledger)
        .seal(&mut receipt, &Labels::new(compactor, method), clock)
        .map_err(|e| from_receipt(&e))?;
    Ok(appended.line + "\n")
}

/// `cutctx ledger verify`: `(exit status, verdict)`: 0 when nothing failed, 1 otherwise; the
/// verdict is canonical JSON and one newline.
///
/// # Errors
///
/// `INPUT_ERROR` when the ledger cannot be read; the pin's or the content map's own errors
/// when they are malformed (all exit 2).
pub fn ledger_verify(
    ledger: &Path,
    pin_text: Option<&str>,
    content_text: Option<&str>,
    strict: bool,
) -> Result<(u8, String), OpsError> {
    let pin = pin_text
        .map(Pin::parse)
        .transpose()
        .map_err(|e| about("the pin", &e))?;
    let content = content_text
        .map(parse_content_map)
        .transpose()
        .map_err(|e| about("the content map", &e))?;
    let audit = Ledger::new(ledger)
        .audit(AuditOptions {
            pin: pin.as_ref(),
            content: content.as_ref(),
            strict,
        })
        .map_err(|e| {
            OpsError::input(
                format!("cannot read the ledger at {}: {e}", ledger.display()),
                cutctx::model::details! {
                    "path" => ledger.display().to_string(),
                    "document" => "the ledger",
                },
            )
        })?;
    let file = ledger.display().to_string();
    let mut verdict = audit.canonical_json(&[("file", &file)]);
    verdict.push('\n');
    Ok((audit.exit_code(), verdict))
}

/// `cutctx ledger head`: the pin line and one newline.
///
/// # Errors
///
/// `LEDGER_UNVERIFIED` when the ledger does not verify (a pin over a broken chain would be a
/// false claim); `INPUT_ERROR` when the path exists but is not a readable file. A missing or
/// empty ledger pins as `genesis` at 0 rows, as arcaeon's does.
pub fn ledger_head(ledger: &Path, clock: &dyn Clock) -> Result<String, OpsError> {
    // A path that exists but cannot be read as a file is unreadable input, not a verdict.
    if ledger.exists()
        && let Err(e) = std::fs::File::open(ledger).and_then(|f| {
            if f.metadata()?.is_dir() {
                Err(std::io::Error::other("it is a directory"))
            } else {
                Ok(())
            }
        })
    {
        return Err(OpsError::input(
            format!("cannot read the ledger at {}: {e}", ledger.display()),
            cutctx::model::details! { "path" => ledger.display().to_string(), "document" => "the ledger" },
        ));
    }
    Ledger::new(ledger)
        .head(clock)
        .as_pin()
        .map(|pin| pin + "\n")
        .map_err(|e| from_receipt(&e))
}
