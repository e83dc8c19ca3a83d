//! A whole-ledger audit: the chain, every receipt row, the content behind receipts, and a pin.
//!
//! This is what `cutctx ledger verify` reports. It walks the file as arcaeon's `verify_file`
//! does, runs `verify_receipt` on every receipt row (with that row's content when the content
//! map has its line), and checks the pin, then lists every failure with its line and a stable
//! code. No I/O: the caller supplies the decoded text ([`crate::chain::decode`]).
//!
//! The overall verdict is `BROKEN` when anything failed, `VERIFIED` when nothing failed, the
//! chain was checked in full, and every receipt was recomputed from both sides of its content,
//! and `BOUNDED` otherwise (nothing failed, but something was not or could not be checked:
//! prechain rows, declared breaks, an empty ledger, or receipts without content).

use std::collections::BTreeMap;

use serde_json::json;

use crate::chain::{self, FileVerdict};
use crate::content::SideContent;
use crate::json::{Object, Value};
use crate::pin::{Pin, PinVerdict, check_pin};
use crate::receipt::{KIND, SCHEMA_V1, SCHEMA_V2};
use crate::transcript::PLAN_HASH_KEY;
use crate::verify::{ContentCheck, ReceiptVerdict, verify_receipt};

/// A receipt row was not self-consistent.
pub const RECEIPT_INCONSISTENT: &str = "RECEIPT_INCONSISTENT";
/// A receipt row disagreed with its content.
pub const RECEIPT_CONTENT_MISMATCH: &str = "RECEIPT_CONTENT_MISMATCH";
/// The content given for a receipt row could not be digested.
pub const RECEIPT_CONTENT_UNDIGESTIBLE: &str = "RECEIPT_CONTENT_UNDIGESTIBLE";
/// Content was given for a line that holds no receipt row.
pub const LEDGER_CONTENT_NOT_A_RECEIPT: &str = "LEDGER_CONTENT_NOT_A_RECEIPT";

/// What to check besides the chain.
#[derive(Clone, Copy, Debug, Default)]
pub struct AuditOptions<'a> {
    /// A pin to hold the ledger against.
    pub pin: Option<&'a Pin>,
    /// Content by line, to recompute receipts from.
    pub content: Option<&'a BTreeMap<usize, SideContent>>,
    /// arcaeon's strict mode: unchained rows are breaks and declarations are not honoured.
    pub strict: bool,
}

/// One receipt row's verdict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowAudit {
    /// The row's line.
    pub line: usize,
    /// The verdict.
    pub verdict: ReceiptVerdict,
    /// The row's `plan_hash`, when it names a cutctx plan.
    pub plan_hash: Option<String>,
}

/// One thing that does not hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The line, when the failure has one.
    pub line: Option<usize>,
    /// The stable code.
    pub code: &'static str,
    /// What failed.
    pub message: String,
}

/// The audit of one ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Audit {
    /// The chain walk.
    pub file: FileVerdict,
    /// Every receipt row, in order.
    pub receipts: Vec<RowAudit>,
    /// Lines the content map covered.
    pub content_lines: Vec<usize>,
    /// The pin check, when a pin was given.
    pub pin: Option<PinVerdict>,
    /// Everything that failed, in line order (pin last).
    pub failures: Vec<Failure>,
}

/// Whether a row is a compaction receipt: its `kind` says so, or its `schema` is a receipt
/// schema.
#[must_use]
pub fn is_receipt_row(row: &Object) -> bool {
    row.get("kind").and_then(Value::as_str) == Some(KIND)
        || row.get("schema").and_then(Value::as_str).is_some_and(|s| {
            s == SCHEMA_V1 || s == SCHEMA_V2 || s.starts_with("arcaeon-compact:receipt:")
        })
}

/// Audits decoded ledger text.
#[must_use]
pub fn audit_text(text: &str, options: AuditOptions<'_>) -> Audit {
    let (file, rows) = chain::verify_text(text, options.strict);
    let mut failures: Vec<Failure> = file
        .all_breaks
        .iter()
        .map(|b| Failure {
            line: Some(b.line),
            code: b.kind.code(),
            message: match &b.reason {
                Some(r) => format!("{} ({r})", b.message),
                None => b.message.clone(),
            },
        })
        .collect();
    let empty = BTreeMap::new();
    let content = options.content.unwrap_or(&empty);
    let mut receipts = Vec::new();
    let mut covered = Vec::new();
    for parsed in &rows {
        if !is_receipt_row(&parsed.row) {
            continue;
        }
        let line = parsed.line;
        let (pre, post) = match content.get(&line) {
            Some(side) => {
                covered.push(line);
                match side.digest() {
                    Ok(d) => d,
                    Err(e) => {
                        failures.push(Failure {
                            line: Some(line),
                            code: RECEIPT_CONTENT_UNDIGESTIBLE,
                            message: format!(
                                "line {line}: the content given for this receipt cannot be \
                                 digested: {e}"
                            ),
                        });
                        (None, None)
                    }
                }
            }
            None => (None, None),
        };
        let verdict = verify_receipt(
            &Value::Object(parsed.row.clone()),
            pre.as_ref(),
            post.as_ref(),
        );
        if !verdict.self_consistent {
            failures.push(Failure {
                line: Some(line),
                code: RECEIPT_INCONSISTENT,
                message: format!(
                    "line {line}: receipt is not self-consistent: {}",
                    verdict.notes.first().map_or("", String::as_str)
                ),
            });
        }
        if verdict.content == ContentCheck::Mismatch {
            let first = verdict
                .notes
                .iter()
                .find(|n| n.contains("recomputed") || n.contains("not found in"))
                .map_or("", String::as_str);
            failures.push(Failure {
                line: Some(line),
                code: RECEIPT_CONTENT_MISMATCH,
                message: format!("line {line}: receipt disagrees with its content: {first}"),
            });
        }
        receipts.push(RowAudit {
            line,
            plan_hash: parsed
                .row
                .get(PLAN_HASH_KEY)
                .and_then(Value::as_str)
                .map(str::to_owned),
            verdict,
        });
    }
    for line in content.keys() {
        // `covered` grows in line order: a binary search keeps this linear-logarithmic.
        if covered.binary_search(line).is_err() {
            failures.push(Failure {
                line: Some(*line),
                code: LEDGER_CONTENT_NOT_A_RECEIPT,
                message: format!(
                    "line {line}: content was given for this line, but it holds no receipt row"
                ),
            });
        }
    }
    failures.sort_by_key(|f| f.line);
    let pin = options.pin.map(|p| check_pin(text, file.rows, p));
    if let Some(pv) = &pin
        && let Some(code) = pv.status.code()
    {
        failures.push(Failure {
            line: None,
            code,
            message: format!("pin {}: {}", pv.status.as_str(), pv.detail),
        });
    }
    Audit {
        file,
        receipts,
        content_lines: covered,
        pin,
        failures,
    }
}

impl Audit {
    /// `VERIFIED`, `BOUNDED` or `BROKEN` (see the module docs).
    #[must_use]
    pub fn verdict(&self) -> &'static str {
        if !self.failures.is_empty() {
            "BROKEN"
        } else if self.file.ok == Some(true)
            && self
                .receipts
                .iter()
                .all(|r| r.verdict.verified_scope == "full")
        {
            "VERIFIED"
        } else {
            "BOUNDED"
        }
    }

    /// 0 when nothing failed, 1 otherwise.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        u8::from(!self.failures.is_empty())
    }

    /// The verdict as JSON: what was checked, what failed and where.
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        let full = self
            .receipts
            .iter()
            .filter(|r| r.verdict.verified_scope == "full")
            .count();
        json!({
            "verdict": self.verdict(),
            "ok": self.failures.is_empty(),
            "checked": {
                "chain": {
                    "rows": self.file.rows,
                    "chained": self.file.chained,
                    "prechain": self.file.prechain,
                    "verified_scope": self.file.verified_scope,
                },
                "receipts": self.receipts.len(),
                "receipts_recomputed_in_full": full,
                "content_lines": self.content_lines,
                "pin": self.pin.is_some(),
            },
            "failures": self.failures.iter().map(|f| json!({
                "line": f.line,
                "code": f.code,
                "message": f.message,
            })).collect::<Vec<_>>(),
            "first_failure": self.failures.first().map(|f| json!({
                "line": f.line,
                "code": f.code,
                "message": f.message,
            })),
            "ledger": self.file.to_json(),
            "receipts": self.receipts.iter().map(|r| {
                let mut v = r.verdict.to_json();
                if let Some(obj) = v.as_object_mut() {
                    obj.insert("line".to_owned(), json!(r.line));
                    obj.insert("plan_hash".to_owned(), json!(r.plan_hash));
                }
                v
            }).collect::<Vec<_>>(),
            "pin": self.pin.as_ref().map(PinVerdict::to_json),
        })
    }
}
