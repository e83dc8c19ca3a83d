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

/// One failure's entry of [`Audit::canonical_json`], in key order.
fn write_failure(w: &mut cutctx_json::Writer<'_, String>, f: &Failure) {
    w.raw("{\"code\":");
    w.str(f.code);
    w.raw(",\"line\":");
    match f.line {
        Some(line) => w.u64(line as u64),
        None => w.null(),
    }
    w.raw(",\"message\":");
    w.str(&f.message);
    w.raw("}");
}

/// One receipt row's entry of [`Audit::canonical_json`]: its verdict's fields with `line`
/// and `plan_hash`, in key order.
fn write_row(w: &mut cutctx_json::Writer<'_, String>, r: &RowAudit) {
    let v = &r.verdict;
    w.raw("{\"content\":");
    w.str(v.content.as_str());
    w.raw(",\"line\":");
    w.u64(r.line as u64);
    w.raw(",\"notes\":");
    w.str_list(v.notes.iter().map(String::as_str));
    w.raw(",\"ok\":");
    w.bool(v.ok);
    w.raw(",\"plan_hash\":");
    w.opt_str(r.plan_hash.as_deref());
    w.raw(",\"schema\":");
    w.opt_str(v.schema.map(crate::receipt::Schema::short));
    w.raw(",\"self_consistent\":");
    w.bool(v.self_consistent);
    w.raw(",\"understatement_check\":");
    w.opt_str(v.understatement_check);
    w.raw(",\"verified_scope\":");
    w.str(&v.verified_scope);
    w.raw("}");
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

/// The audit of the receipt row `parsed`, verified with its content from `content` when the
/// map has its line (noted in `covered`), what fails pushed onto `failures`.
fn audit_row(
    parsed: chain::ParsedRow,
    content: &BTreeMap<usize, SideContent>,
    covered: &mut Vec<usize>,
    failures: &mut Vec<Failure>,
) -> RowAudit {
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
    // The row is taken whole: the verdict reads it as a value, not a copy of it.
    let row = Value::Object(parsed.row);
    let verdict = verify_receipt(&row, pre.as_ref(), post.as_ref());
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
    RowAudit {
        line,
        plan_hash: row
            .as_object()
            .and_then(|o| o.get(PLAN_HASH_KEY))
            .and_then(Value::as_str)
            .map(str::to_owned),
        verdict,
    }
}

/// Audits decoded ledger text.
#[must_use]
pub fn audit_text(text: &str, options: AuditOptions<'_>) -> Audit {
    let empty = BTreeMap::new();
    let content = options.content.unwrap_or(&empty);
    let mut receipts = Vec::new();
    let mut covered = Vec::new();
    // The receipts' failures follow every break of the chain, so they wait for the walk.
    let mut receipt_failures = Vec::new();
    // Each row is verified as the walk hands it over and then dropped: the ledger is never
    // held parsed whole.
    let file = chain::verify_text_with(text, options.strict, |parsed| {
        if is_receipt_row(&parsed.row) {
            receipts.push(audit_row(
                parsed,
                content,
                &mut covered,
                &mut receipt_failures,
            ));
        }
    });
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
    failures.append(&mut receipt_failures);
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

    /// The canonical JSON text (keys sorted, no whitespace, as cutctx's canonical form) of
    /// [`Audit::to_json`] with `extra` fields added at the top (`cutctx ledger verify` adds
    /// the ledger's `file`; a key of the audit's own is replaced, but for `failures` and
    /// `receipts`, which stay the audit's), written straight from the audit: a ledger's
    /// verdict holds one entry per receipt row, and building it as a tree first cost more
    /// than the audit.
    ///
    /// ```
    /// use cutctx_receipts::{AuditOptions, audit_text};
    /// use cutctx_model::canonical::canonical_json_value;
    /// let audit = audit_text("{\"tool\": \"x\"}\n", AuditOptions::default());
    /// let mut tree = audit.to_json();
    /// tree["file"] = "ledger.jsonl".into();
    /// assert_eq!(
    ///     audit.canonical_json(&[("file", "ledger.jsonl")]),
    ///     canonical_json_value(&tree)
    /// );
    /// ```
    #[must_use]
    pub fn canonical_json(&self, extra: &[(&str, &str)]) -> String {
        use cutctx_json::{Style, Writer};
        use cutctx_model::canonical::canonical_json_value;
        let mut fields = self.summary_json();
        for (key, value) in extra {
            fields.insert((*key).to_owned(), serde_json::Value::from(*value));
        }
        // Every field but the two lists that grow with the ledger, written in key order.
        let mut keys: Vec<&str> = fields
            .keys()
            .map(String::as_str)
            .chain(["failures", "receipts"])
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let mut out = String::with_capacity(256 + 320 * self.receipts.len());
        let mut w = Writer::new(&mut out, Style::CANONICAL);
        w.raw("{");
        for (k, key) in keys.into_iter().enumerate() {
            if k > 0 {
                w.item_separator();
            }
            w.str(key);
            w.key_separator();
            match key {
                "failures" => w.list(&self.failures, write_failure),
                "receipts" => w.list(&self.receipts, write_row),
                other => {
                    let value = fields.get(other).map(canonical_json_value);
                    w.raw(value.as_deref().unwrap_or("null"));
                }
            }
        }
        w.raw("}");
        out
    }

    /// The verdict as JSON: what was checked, what failed and where.
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        let mut fields = self.summary_json();
        fields.insert(
            "failures".to_owned(),
            self.failures.iter().map(Failure::to_json).collect(),
        );
        fields.insert(
            "receipts".to_owned(),
            self.receipts.iter().map(RowAudit::to_json).collect(),
        );
        serde_json::Value::Object(fields)
    }

    /// [`Audit::to_json`] but its two lists that grow with the ledger, `failures` and
    /// `receipts`.
    fn summary_json(&self) -> serde_json::Map<String, serde_json::Value> {
        let full = self
            .receipts
            .iter()
            .filter(|r| r.verdict.verified_scope == "full")
            .count();
        let mut fields = serde_json::Map::new();
        fields.insert("verdict".to_owned(), self.verdict().into());
        fields.insert("ok".to_owned(), self.failures.is_empty().into());
        fields.insert(
            "checked".to_owned(),
            json!({
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
            }),
        );
        fields.insert(
            "first_failure".to_owned(),
            self.failures.first().map(Failure::to_json).into(),
        );
        fields.insert("ledger".to_owned(), self.file.to_json());
        fields.insert(
            "pin".to_owned(),
            self.pin.as_ref().map(PinVerdict::to_json).into(),
        );
        fields
    }
}

impl Failure {
    fn to_json(&self) -> serde_json::Value {
        json!({
            "line": self.line,
            "code": self.code,
            "message": self.message,
        })
    }
}

impl RowAudit {
    fn to_json(&self) -> serde_json::Value {
        let mut v = self.verdict.to_json();
        if let Some(obj) = v.as_object_mut() {
            obj.insert("line".to_owned(), json!(self.line));
            obj.insert("plan_hash".to_owned(), json!(self.plan_hash));
        }
        v
    }
}
