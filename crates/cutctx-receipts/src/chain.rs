//! The chain rule and the verification walk over a ledger's text, with no I/O.
//!
//! ```text
//! body  = json.dumps(row minus "chain", ensure_ascii=False, sort_keys=True)   ", " and ": "
//! chain = sha256((prev + body).encode("utf-8", "surrogatepass")).hexdigest()[:32]
//! prev  = "genesis" for the first chained row, else the previous row's CLAIMED chain
//! ```
//!
//! Reading follows arcaeon: the bytes are decoded as UTF-8 with U+FFFD for invalid sequences,
//! `\r\n` and a lone `\r` become `\n`, the text is split on `\n` only, each line is stripped of
//! Python whitespace, and blank lines are skipped (but counted: line numbers are 1-based over
//! every split line). [`verify_text`] walks the lines exactly as arcaeon's `verify_file` does,
//! message for message, and additionally lists *every* break with a stable code.

use sha2::{Digest, Sha256};

use crate::clock::Clock;
use crate::digest::{hex, sha256_hex};
use crate::error::ReceiptError;
use crate::json::{self, Object, Value};
use crate::pyrepr::str_value;

/// The `prev` of the first chained row.
pub const GENESIS: &str = "genesis";
/// The number of hex characters a chain value keeps.
pub const CHAIN_LEN: usize = 32;
/// The `op` of a break declaration row.
pub const DECLARE_OP: &str = "chain_break_declared";

/// The chain value of `row` (its `chain` key ignored) after `prev`.
///
/// # Errors
///
/// Only [`ReceiptError::JsonTooDeep`], for a row nested beyond the limit.
pub fn chain(prev: &str, row: &Object) -> Result<String, ReceiptError> {
    chain_raw(prev.as_bytes(), row)
}

/// [`chain`] with `prev` as generalized UTF-8 (a claimed chain may hold a lone surrogate).
///
/// # Errors
///
/// As [`chain`].
///
/// ```
/// use cutctx_receipts::chain::{GENESIS, chain, chain_raw};
/// use cutctx_receipts::json::Object;
/// let row = Object::new();
/// assert_eq!(chain_raw(GENESIS.as_bytes(), &row)?, chain(GENESIS, &row)?);
/// # Ok::<(), cutctx_receipts::ReceiptError>(())
/// ```
pub fn chain_raw(prev: &[u8], row: &Object) -> Result<String, ReceiptError> {
    let body = json::to_chain_body_without(row, "chain")?;
    let mut h = Sha256::new();
    h.update(prev);
    h.update(&body);
    let mut full = hex(&h.finalize());
    full.truncate(CHAIN_LEN);
    Ok(full)
}

/// A ledger's bytes as the verifier reads them: lossy UTF-8, universal newlines.
#[must_use]
pub fn decode(bytes: &[u8]) -> String {
    newlines(String::from_utf8_lossy(bytes).into_owned())
}

/// As [`decode`], taking the bytes: a ledger that is UTF-8 already (as every ledger this
/// crate writes is) becomes its text without a copy.
///
/// ```
/// use cutctx_receipts::chain::{decode, decode_owned};
/// let bytes = b"{\"a\": 1}\r\n\xff\n".to_vec();
/// assert_eq!(decode_owned(bytes.clone()), decode(&bytes));
/// assert_eq!(decode_owned(b"{}\n".to_vec()), "{}\n");
/// ```
#[must_use]
pub fn decode_owned(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(text) => newlines(text),
        Err(e) => decode(e.as_bytes()),
    }
}

/// `text` with universal newlines: `\r\n` and a lone `\r` read as `\n`.
fn newlines(text: String) -> String {
    if !text.contains('\r') {
        return text;
    }
    text.replace("\r\n", "\n").replace('\r', "\n")
}

/// Python's `str.isspace`.
fn py_space(c: char) -> bool {
    matches!(
        c,
        '\t'..='\r'
            | '\u{1c}'..='\u{20}'
            | '\u{85}'
            | '\u{a0}'
            | '\u{1680}'
            | '\u{2000}'..='\u{200a}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202f}'
            | '\u{205f}'
            | '\u{3000}'
    )
}

/// Python's `str.strip()`.
#[must_use]
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(py_space)
}

/// The 1-based numbered, stripped, non-blank lines of decoded ledger text.
pub fn lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.split('\n')
        .enumerate()
        .map(|(i, raw)| (i + 1, py_strip(raw)))
        .filter(|(_, line)| !line.is_empty())
}

/// What kind of break a line is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BreakKind {
    /// The last line is not newline-terminated and does not parse: a torn write.
    TornLine,
    /// A line that is not JSON (or nests too deep, or has an oversized integer).
    Unparseable,
    /// A line giving one key twice.
    DuplicateKey,
    /// A line that is JSON but not an object.
    NotObject,
    /// A row without `chain` after the chain began (or any, in strict mode).
    Unchained,
    /// A `chain` that is not a string.
    NonStringChain,
    /// A row the chain rule cannot hash.
    Unhashable,
    /// A claimed chain that does not recompute.
    ChainMismatch,
}

impl BreakKind {
    /// The stable code.
    #[must_use]
    pub const fn code(self) -> &'static str {
        match self {
            Self::TornLine => "LEDGER_TORN_LINE",
            Self::Unparseable => "LEDGER_UNPARSEABLE_LINE",
            Self::DuplicateKey => "LEDGER_DUPLICATE_KEY",
            Self::NotObject => "LEDGER_NOT_AN_OBJECT",
            Self::Unchained => "LEDGER_UNCHAINED_ROW",
            Self::NonStringChain => "LEDGER_NON_STRING_CHAIN",
            Self::Unhashable => "LEDGER_UNHASHABLE_ROW",
            Self::ChainMismatch => "LEDGER_CHAIN_BROKEN",
        }
    }
}

/// One break: where, what, and arcaeon's words for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Break {
    /// The 1-based line.
    pub line: usize,
    /// The kind.
    pub kind: BreakKind,
    /// arcaeon's message, `line N: ...`.
    pub message: String,
    /// Why, in more detail, when there is more to say.
    pub reason: Option<String>,
}

/// The verdict of a walk over a whole ledger, field for field as arcaeon's `VerifyResult`,
/// plus every break.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct FileVerdict {
    /// `Some(true)`: every row checked and the chain holds. `None`: no break, but the scan was
    /// bounded (prechain rows skipped, declared breaks, or no rows). `Some(false)`: a break.
    pub ok: Option<bool>,
    /// Lines that parse as JSON objects.
    pub rows: usize,
    /// Rows with a chain value checked.
    pub chained: usize,
    /// Unchained rows before the chain began.
    pub prechain: usize,
    /// The first break, in arcaeon's words.
    pub first_break: Option<String>,
    /// The number of breaks.
    pub breaks: usize,
    /// `full`, `empty`, `bounded_prechain_skipped`, `bounded_declared_break`, or
    /// `bounded_prechain_skipped+declared_break`.
    pub verified_scope: String,
    /// Breaks excused by a matching declaration.
    pub declared_breaks: usize,
    /// One line per excused (or, in strict mode, ignored) declaration.
    pub declared: Vec<String>,
    /// Every break, in order.
    pub all_breaks: Vec<Break>,
}

impl FileVerdict {
    /// The verdict as arcaeon's `VerifyResult` fields, plus `all_breaks`, as JSON.
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "ok": self.ok,
            "rows": self.rows,
            "chained": self.chained,
            "prechain": self.prechain,
            "first_break": self.first_break,
            "breaks": self.breaks,
            "verified_scope": self.verified_scope,
            "declared_breaks": self.declared_breaks,
            "declared": self.declared,
            "all_breaks": self.all_breaks.iter().map(|b| serde_json::json!({
                "line": b.line,
                "code": b.kind.code(),
                "message": b.message,
                "reason": b.reason,
            })).collect::<Vec<_>>(),
        })
    }

    fn brk(&mut self, line: usize, kind: BreakKind, message: String, reason: Option<String>) {
        self.ok = Some(false);
        self.breaks += 1;
        if self.first_break.is_none() {
            self.first_break = Some(message.clone());
        }
        self.all_breaks.push(Break {
            line,
            kind,
            message,
            reason,
        });
    }
}

/// A row the walk parsed: its line and value (duplicate keys resolved last-wins).
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedRow {
    /// The 1-based line.
    pub line: usize,
    /// The row, `chain` included.
    pub row: Object,
}

struct Declaration {
    sha: String,
    why: String,
    resume_prev: Option<Value>,
}

/// arcaeon's `_scan_declarations`: well-formed, chained declaration rows, last one per line
/// winning.
fn scan_declarations(text: &str) -> std::collections::BTreeMap<usize, Declaration> {
    let mut found = std::collections::BTreeMap::new();
    for (_, line) in lines(text) {
        if !line.contains(DECLARE_OP) {
            continue;
        }
        let Ok(parsed) = json::parse(line) else {
            continue;
        };
        let Value::Object(d) = parsed.value else {
            continue;
        };
        if d.get("op").and_then(Value::as_str) != Some(DECLARE_OP) {
            continue;
        }
        let orphan = match d.get("orphan_line") {
            Some(Value::Int(i)) => i.as_str().parse::<usize>().ok(),
            _ => None,
        };
        let sha = match d.get("orphan_sha256") {
            Some(Value::Str(t)) if t.len_code_points() == 64 => Some(t.to_string_lossy()),
            _ => None,
        };
        let why = match d.get("why") {
            Some(Value::Str(t)) if !py_strip(&t.to_string_lossy()).is_empty() => {
                Some(t.to_string_lossy())
            }
            _ => None,
        };
        let chained = matches!(d.get("chain"), Some(Value::Str(_)));
        if let (Some(orphan), Some(sha), Some(why), true) = (orphan, sha, why, chained) {
            found.insert(
                orphan,
                Declaration {
                    sha,
                    why,
                    resume_prev: d.get("resume_prev").cloned(),
                },
            );
        }
    }
    found
}

/// Walks decoded ledger text as arcaeon's `verify_file(path, strict)` does, returning the
/// verdict and every row that parsed as an object.
#[must_use]
pub fn verify_text(text: &str, strict: bool) -> (FileVerdict, Vec<ParsedRow>) {
    let mut rows = Vec::new();
    let verdict = verify_text_with(text, strict, |row| rows.push(row));
    (verdict, rows)
}

/// As [`verify_text`], handing each row that parsed as an object to `each_row` as soon as the
/// chain rule has been applied to it, in order, rather than holding them all: a caller that
/// reads each row once (the audit) holds one row at a time, not the whole ledger parsed.
///
/// ```
/// use cutctx_receipts::chain::{verify_text, verify_text_with};
/// let text = "{\"tool\": \"a\"}\nnot json\n{\"tool\": \"b\"}\n";
/// let mut lines = Vec::new();
/// let verdict = verify_text_with(text, false, |row| lines.push(row.line));
/// assert_eq!(lines, [1, 3]);
/// assert_eq!(verdict, verify_text(text, false).0);
/// ```
pub fn verify_text_with(
    text: &str,
    strict: bool,
    mut each_row: impl FnMut(ParsedRow),
) -> FileVerdict {
    let mut res = FileVerdict {
        ok: Some(true),
        verified_scope: "full".to_owned(),
        ..FileVerdict::default()
    };
    let declared = scan_declarations(text);
    let last_line = text.split('\n').count();
    let unterminated = !text.ends_with('\n');
    let mut prev: Vec<u8> = GENESIS.as_bytes().to_vec();
    for (i, raw) in lines(text) {
        let row = match json::parse(raw) {
            Ok(parsed) => {
                if let Some(key) = parsed.duplicate {
                    res.brk(
                        i,
                        BreakKind::DuplicateKey,
                        format!("line {i}: duplicate key {}", crate::pyrepr::repr_text(&key)),
                        None,
                    );
                }
                parsed.value
            }
            Err(e) => {
                let torn = unterminated && i == last_line;
                res.brk(
                    i,
                    if torn {
                        BreakKind::TornLine
                    } else {
                        BreakKind::Unparseable
                    },
                    format!("line {i}: unparseable"),
                    Some(if torn {
                        format!(
                            "the last line is unterminated and does not parse ({e}): a torn write"
                        )
                    } else {
                        e.to_string()
                    }),
                );
                continue;
            }
        };
        let Value::Object(obj) = row else {
            res.brk(
                i,
                BreakKind::NotObject,
                format!("line {i}: not a JSON object"),
                None,
            );
            continue;
        };
        res.rows += 1;
        // The chain rule skips the `chain` key itself, so the row is hashed as parsed.
        chain_step(&mut res, &mut prev, (i, raw, &obj), strict, &declared);
        each_row(ParsedRow { line: i, row: obj });
    }
    if !strict && (res.prechain > 0 || res.declared_breaks > 0) {
        res.verified_scope = match (res.prechain > 0, res.declared_breaks > 0) {
            (true, true) => "bounded_prechain_skipped+declared_break",
            (true, false) => "bounded_prechain_skipped",
            _ => "bounded_declared_break",
        }
        .to_owned();
        if res.ok == Some(true) {
            res.ok = None;
        }
    } else if res.rows == 0 && res.ok == Some(true) {
        res.ok = None;
        res.verified_scope = "empty".to_owned();
    }
    if strict && !declared.is_empty() {
        res.declared.extend(declared.iter().map(|(n, d)| {
            format!(
                "line {n}: declaration present, NOT honored (strict mode) ({})",
                d.why
            )
        }));
    }
    res
}

/// The chain rule applied to the row `obj` read from line `i` (its text `raw`), after the
/// chain `prev`: the verdict `res` and `prev` updated as arcaeon's walk updates them.
fn chain_step(
    res: &mut FileVerdict,
    prev: &mut Vec<u8>,
    (i, raw, obj): (usize, &str, &Object),
    strict: bool,
    declared: &std::collections::BTreeMap<usize, Declaration>,
) {
    let excused = |i: usize, raw: &str| -> Option<&Declaration> {
        declared
            .get(&i)
            .filter(|d| d.sha == sha256_hex(raw.as_bytes()))
    };
    let claimed = obj.get("chain").cloned().unwrap_or(Value::Null);
    let claimed = match claimed {
        Value::Null => {
            if res.chained > 0 {
                let d = if strict { None } else { excused(i, raw) };
                if let Some(d) = d {
                    res.declared_breaks += 1;
                    res.declared
                        .push(format!("line {i}: declared break ({})", d.why));
                    *prev = match &d.resume_prev {
                        Some(Value::Str(t)) if !t.is_empty() => t.as_bytes().to_vec(),
                        _ => GENESIS.as_bytes().to_vec(),
                    };
                    return;
                }
                let message = if !strict && declared.contains_key(&i) {
                    format!(
                        "line {i}: unchained row after chain began; a declaration exists but \
                         its orphan_sha256 does not match these bytes"
                    )
                } else {
                    format!("line {i}: unchained row after chain began")
                };
                res.brk(i, BreakKind::Unchained, message, None);
            } else if strict {
                res.prechain += 1;
                res.brk(
                    i,
                    BreakKind::Unchained,
                    format!("line {i}: unchained (prechain) row rejected in strict mode"),
                    None,
                );
            } else {
                res.prechain += 1;
            }
            return;
        }
        Value::Str(t) => t,
        _ => {
            res.brk(
                i,
                BreakKind::NonStringChain,
                format!("line {i}: non-string chain value"),
                None,
            );
            *prev = Vec::new();
            res.chained += 1;
            return;
        }
    };
    let want = match chain_raw(prev, obj) {
        Ok(w) => w,
        Err(e) => {
            res.brk(
                i,
                BreakKind::Unhashable,
                format!("line {i}: unhashable row (RecursionError)"),
                Some(e.to_string()),
            );
            *prev = claimed.as_bytes().to_vec();
            res.chained += 1;
            return;
        }
    };
    if claimed.as_bytes() != want.as_bytes() {
        let d = if strict { None } else { excused(i, raw) };
        if let Some(d) = d {
            res.declared_breaks += 1;
            res.declared
                .push(format!("line {i}: declared break ({})", d.why));
        } else {
            let message = if !strict && declared.contains_key(&i) {
                format!(
                    "line {i}: chain mismatch; a declaration exists but its orphan_sha256 \
                     does not match these bytes"
                )
            } else {
                format!("line {i}: chain mismatch")
            };
            res.brk(
                i,
                BreakKind::ChainMismatch,
                message,
                Some(format!(
                    "the row claims chain {} but recomputes to {want} from the previous \
                     chain {}",
                    crate::pyrepr::repr_text(&claimed),
                    String::from_utf8_lossy(prev)
                )),
            );
        }
    }
    *prev = claimed.as_bytes().to_vec();
    res.chained += 1;
}

/// The chain of the `n`-th row (1-based, counting lines that parse as objects, as
/// [`FileVerdict::rows`] does), as arcaeon's `chain_at`: `"genesis"` for `n <= 0`, `None` when
/// there are fewer rows or that row has no chain (or a `null` one).
#[must_use]
pub fn chain_at(text: &str, n: usize) -> Option<Value> {
    if n == 0 {
        return Some(Value::str(GENESIS));
    }
    let mut count = 0;
    for (_, line) in lines(text) {
        let Ok(parsed) = json::parse(line) else {
            continue;
        };
        let Value::Object(obj) = parsed.value else {
            continue;
        };
        count += 1;
        if count == n {
            return match obj.get("chain") {
                None | Some(Value::Null) => None,
                Some(v) => Some(v.clone()),
            };
        }
    }
    None
}

/// A row ready to append: stamped, chained, and written as its line.
#[derive(Clone, Debug, PartialEq)]
pub struct Chained {
    /// The row's chain value.
    pub chain: String,
    /// The row, `ts` and `chain` included.
    pub row: Object,
    /// The row as one line of strict JSON, without its newline.
    pub line: String,
}

/// The first half of arcaeon's `Ledger.append`, before the previous chain is known: `ts` is
/// stamped when absent and any `chain` is removed (the writer sets it).
#[must_use]
pub fn stamped(record: &Object, clock: &dyn Clock) -> Object {
    let mut row = record.clone();
    if !row.contains_key("ts") {
        row.insert("ts", Value::str(&clock.now_utc()));
    }
    row.remove("chain");
    row
}

/// The second half of arcaeon's `Ledger.append`: chains a [`stamped`] row after `prev` (see
/// [`prev_after`]) and writes its line.
///
/// # Errors
///
/// A row that cannot be written as strict JSON (NaN, a lone surrogate, too deep): the writer
/// learns it before writing any byte.
///
/// ```
/// use cutctx_receipts::chain::{GENESIS, chained, stamped};
/// use cutctx_receipts::{FixedClock, json::Object};
/// let row = stamped(&Object::new(), &FixedClock::new("2026-08-15T00:00:00Z"));
/// let c = chained(row, GENESIS.as_bytes())?;
/// assert_eq!(c.line, format!(r#"{{"ts": "2026-08-15T00:00:00Z", "chain": "{}"}}"#, c.chain));
/// # Ok::<(), cutctx_receipts::ReceiptError>(())
/// ```
pub fn chained(mut row: Object, prev: &[u8]) -> Result<Chained, ReceiptError> {
    let chain = chain_raw(prev, &row)?;
    row.insert("chain", Value::str(&chain));
    let line = json::object_to_line(&row)?;
    Ok(Chained { chain, row, line })
}

/// The `prev` the next appended row hashes, given the last line of the ledger that parses as
/// an object (`None` for a ledger without one): arcaeon's `_last_chain`, as the chain rule
/// hashes it (generalized UTF-8, so a claimed chain holding a lone surrogate hashes as in
/// Python).
#[must_use]
pub fn prev_after(last: Option<&Object>) -> Vec<u8> {
    match last.and_then(|obj| obj.get("chain")) {
        Some(Value::Str(t)) if !t.is_empty() => t.as_bytes().to_vec(),
        Some(v) if v.is_truthy() => str_value(v).into_bytes(),
        _ => GENESIS.as_bytes().to_vec(),
    }
}

/// arcaeon's `_last_chain` of the last line that parses as an object: Python's `str()` of
/// `obj.get("chain") or "genesis"`.
///
/// ```
/// use cutctx_receipts::chain::{GENESIS, last_chain};
/// assert_eq!(last_chain(None), GENESIS);
/// ```
#[must_use]
pub fn last_chain(last: Option<&Object>) -> String {
    match last.and_then(|obj| obj.get("chain")) {
        Some(v) if v.is_truthy() => str_value(v),
        _ => GENESIS.to_owned(),
    }
}

/// The `why` of a break declaration, stripped; refused when blank.
///
/// # Errors
///
/// [`ReceiptError::Malformed`] for a blank `why`.
pub fn declaration_why(why: &str) -> Result<&str, ReceiptError> {
    let why = py_strip(why);
    if why.is_empty() {
        return Err(ReceiptError::Malformed {
            message: "declare_break needs a non-empty why: an unexplained declaration is a mute \
                      exemption"
                .to_owned(),
        });
    }
    Ok(why)
}

/// The row of arcaeon's `declare_break` over the ledger `text` (named `source` in messages):
/// `{"op": "chain_break_declared", "orphan_line", "orphan_sha256", "why"[, "resume_prev"]}`,
/// pinning the orphan line's exact (stripped) bytes.
///
/// # Errors
///
/// [`ReceiptError::Malformed`] for a blank `why`, a line outside the text or a blank line.
pub fn break_declaration(
    text: &str,
    source: &str,
    orphan_line: usize,
    why: &str,
    resume_prev: Option<&str>,
) -> Result<Object, ReceiptError> {
    let malformed = |message: String| ReceiptError::Malformed { message };
    let why = declaration_why(why)?;
    let raw = orphan_line
        .checked_sub(1)
        .and_then(|i| text.split('\n').nth(i))
        .ok_or_else(|| malformed(format!("line {orphan_line} is not in {source}")))?;
    let raw = py_strip(raw);
    if raw.is_empty() {
        return Err(malformed(format!(
            "line {orphan_line} of {source} is blank; nothing to pin"
        )));
    }
    let mut row = Object::new();
    row.insert("op", Value::str(DECLARE_OP));
    row.insert("orphan_line", Value::Int(orphan_line.into()));
    row.insert("orphan_sha256", Value::str(&sha256_hex(raw.as_bytes())));
    row.insert("why", Value::str(why));
    if let Some(prev) = resume_prev {
        row.insert("resume_prev", Value::str(prev));
    }
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worked_example_chain() {
        let line = r#"{"schema": "arcaeon-compact:receipt:v2", "pre": {"count": 3, "bytes": 57, "digest": "sha256:json-c14n:v1:0fa1adc5dd156a66d78b1e32a52632ce8b98fabc7dfe9d25813375e75ddc82a7"}, "post": {"count": 2, "bytes": 43, "digest": "sha256:json-c14n:v1:ba27d6d4e4b19db1e74962ce6ce5c5ba2fc093acb473ae80f4a22792f889a535"}, "dropped": {"count": 2, "bytes": 38, "items": ["sha256:json-c14n:v1:09a32d6caf7737200a34ee38c65c82446831be896aa5d5aa6b858729ee13beb1", "sha256:raw-bytes:v1:f8c1ccc7df7243da4740c5b7875f88b70e3f935d99c7b37a5f7239d152d994e6"]}, "introduced": {"count": 1, "bytes": 24}, "compactor": "golden-fixture", "method": "test:v1", "kind": "compaction_receipt", "opened_at": "2026-08-15T00:00:00Z", "receipt_digest": "sha256:json-c14n:v1:04f2e0c2b409212325e5aecbda8481119da9a5ffb6f3ede4d99ac8075f11203f", "ts": "2026-08-15T00:00:01Z", "chain": "5ce0eced08463aa06f779416be76f4a5"}"#;
        let Value::Object(row) = json::parse(line).expect("parses").value else {
            panic!("an object");
        };
        assert_eq!(
            chain(GENESIS, &row).expect("hashable"),
            "5ce0eced08463aa06f779416be76f4a5"
        );
        let (v, rows) = verify_text(&format!("{line}\n"), false);
        assert_eq!(v.ok, Some(true));
        assert_eq!(rows.len(), 1);
    }

    #[test]
    fn reading_follows_python() {
        assert_eq!(decode(b"a\r\nb\rc\n"), "a\nb\nc\n");
        assert_eq!(py_strip("\u{1c}\u{85} x\u{3000}"), "x");
        let got: Vec<_> = lines("a\n\n  \nb\u{2028}c\n").collect();
        assert_eq!(got, [(1, "a"), (4, "b\u{2028}c")]);
    }

    #[test]
    fn empty_and_prechain_are_bounded() {
        let (v, _) = verify_text("", false);
        assert_eq!((v.ok, v.verified_scope.as_str()), (None, "empty"));
        let (v, _) = verify_text("{\"a\": 1}\n", false);
        assert_eq!((v.ok, v.prechain), (None, 1));
        assert_eq!(v.verified_scope, "bounded_prechain_skipped");
        let (v, _) = verify_text("{\"a\": 1}\n", true);
        assert_eq!(v.ok, Some(false));
        assert_eq!(
            v.first_break.as_deref(),
            Some("line 1: unchained (prechain) row rejected in strict mode")
        );
    }
}
