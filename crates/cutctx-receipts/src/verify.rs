//! `verify_receipt`: a row's self-consistency, and recomputation from content when given.
//!
//! This reproduces arcaeon's checks, their order, their early returns and their notes, so a
//! verdict reads the same from either implementation. Every number is compared at any size
//! (a hostile row may carry `10**40`), and nothing here panics or fails: a row that cannot
//! even be read is a verdict with `verified_scope = "none"`.
//!
//! One deliberate difference: arcaeon raises (crashes) when the row's core cannot be
//! canonicalized (NaN in `compactor`, a lone surrogate, nesting too deep); here that is a note,
//! and the row is not self-consistent.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde_json::json;

use crate::digest::{ContentDigest, is_well_formed};
use crate::json::{Object, Text, Value, cmp_decimal};
use crate::manifest;
use crate::pyrepr::{repr_text, repr_value};
use crate::receipt::{Schema, receipt_digest_of};

/// What content recomputation found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentCheck {
    /// No content was given.
    Skipped,
    /// Everything recomputed agreed.
    Match,
    /// Something recomputed disagreed.
    Mismatch,
}

impl ContentCheck {
    /// `"skipped"`, `"match"` or `"mismatch"`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Skipped => "skipped",
            Self::Match => "match",
            Self::Mismatch => "mismatch",
        }
    }
}

/// The verdict on one receipt row, field for field as arcaeon's `verify_receipt` returns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceiptVerdict {
    /// `self_consistent` and no content mismatch.
    pub ok: bool,
    /// Every self-consistency check held.
    pub self_consistent: bool,
    /// What content recomputation found.
    pub content: ContentCheck,
    /// The row's schema, once known.
    pub schema: Option<Schema>,
    /// `"full"` (v2) or `"truncation-only"` (v1), once the schema is known.
    pub understatement_check: Option<&'static str>,
    /// `full`, `bounded_pre_only`, `bounded_post_only`, `bounded_no_content` (each bounded
    /// value possibly with `+v1_lower_bound`), or `none` when the row could not be read.
    pub verified_scope: String,
    /// Every discrepancy, then what was not checked.
    pub notes: Vec<String>,
}

impl ReceiptVerdict {
    /// The verdict as arcaeon's dict, as JSON.
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        json!({
            "ok": self.ok,
            "self_consistent": self.self_consistent,
            "content": self.content.as_str(),
            "schema": self.schema.map(Schema::short),
            "understatement_check": self.understatement_check,
            "verified_scope": self.verified_scope,
            "notes": self.notes,
        })
    }

    fn unreadable(note: String) -> Self {
        Self {
            ok: false,
            self_consistent: false,
            content: ContentCheck::Skipped,
            schema: None,
            understatement_check: None,
            verified_scope: "none".to_owned(),
            notes: vec![note],
        }
    }
}

/// Python's `container[key]`, failing with the text of the KeyError or TypeError it raises.
fn index<'a>(container: &'a Value, key: &str) -> Result<&'a Value, String> {
    match container {
        Value::Object(o) => o.get(key).ok_or_else(|| repr_text(&Text::from(key))),
        Value::Array(_) => Err("list indices must be integers or slices, not str".to_owned()),
        Value::Str(_) => Err("string indices must be integers, not 'str'".to_owned()),
        other => Err(format!(
            "'{}' object is not subscriptable",
            other.py_type_name()
        )),
    }
}

/// The decimal text of a non-negative integer that is not a bool.
fn count(v: &Value) -> Option<&str> {
    match v {
        Value::Int(i) if !i.is_negative() => Some(i.as_str()),
        _ => None,
    }
}

fn dec_add(a: &str, b: &str) -> String {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut out = Vec::with_capacity(a.len().max(b.len()) + 1);
    let (mut i, mut j, mut carry) = (a.len(), b.len(), 0_u8);
    while i > 0 || j > 0 || carry > 0 {
        let x = if i > 0 {
            i -= 1;
            a.get(i).map_or(0, |d| d - b'0')
        } else {
            0
        };
        let y = if j > 0 {
            j -= 1;
            b.get(j).map_or(0, |d| d - b'0')
        } else {
            0
        };
        let s = x + y + carry;
        out.push(b'0' + s % 10);
        carry = s / 10;
    }
    normalize(out)
}

/// `a - b` for `a >= b`.
fn dec_sub(a: &str, b: &str) -> String {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut out = Vec::with_capacity(a.len());
    let (mut i, mut j, mut borrow) = (a.len(), b.len(), 0_i8);
    while i > 0 {
        i -= 1;
        let x = a.get(i).map_or(0, |d| (d - b'0') as i8);
        let y = if j > 0 {
            j -= 1;
            b.get(j).map_or(0, |d| (d - b'0') as i8)
        } else {
            0
        };
        let mut s = x - y - borrow;
        borrow = 0;
        if s < 0 {
            s += 10;
            borrow = 1;
        }
        out.push(b'0' + s as u8);
    }
    normalize(out)
}

fn normalize(mut reversed: Vec<u8>) -> String {
    while reversed.len() > 1 && reversed.last() == Some(&b'0') {
        reversed.pop();
    }
    if reversed.is_empty() {
        reversed.push(b'0');
    }
    reversed.reverse();
    String::from_utf8(reversed).unwrap_or_else(|_| "0".to_owned())
}

/// The first `n` code points of `t`, as Python's `t[:n]`.
fn prefix(t: &Text, n: usize) -> String {
    t.code_points()
        .take(n)
        .map(|c| char::from_u32(c).unwrap_or('\u{FFFD}'))
        .collect()
}

/// The numbers of a row that passed the shape gate.
struct Numbers<'a> {
    pre_count: &'a str,
    post_count: &'a str,
    dropped_count: &'a str,
    introduced_count: &'a str,
    pre_bytes: &'a str,
    post_bytes: &'a str,
    dropped_bytes: &'a str,
    introduced_bytes: Option<&'a str>,
}

/// A row that passed the shape gate: its `pre` and `post` objects, its numbers and its drop
/// manifest.
struct Shape<'a> {
    pre: &'a Value,
    post: &'a Value,
    n: Numbers<'a>,
    manifest: Vec<&'a Text>,
}

/// Verifies a receipt row: self-consistency always; with `pre` and/or `post` (the digests of
/// content the caller holds), recomputation and comparison.
///
/// The steps, in arcaeon's order: the row is an object with a known schema; it has the
/// receipt's shape; its digests are well formed; its counts, then its bytes, reconcile; its
/// `receipt_digest` reproduces; then, with content, each side is recomputed and the drop set
/// compared; last, the scope says what was not checked.
#[must_use]
pub fn verify_receipt(
    row: &Value,
    pre_content: Option<&ContentDigest>,
    post_content: Option<&ContentDigest>,
) -> ReceiptVerdict {
    let Value::Object(obj) = row else {
        return ReceiptVerdict::unreadable(format!(
            "malformed receipt row: expected a JSON object, got {}",
            row.py_type_name()
        ));
    };
    let Some(schema) = Schema::of(obj.get("schema")) else {
        return ReceiptVerdict::unreadable(format!(
            "unknown schema {} \u{2014} cannot verify",
            repr_value(obj.get("schema").unwrap_or(&Value::Null))
        ));
    };
    let mut out = ReceiptVerdict {
        schema: Some(schema),
        understatement_check: Some(match schema {
            Schema::V1 => "truncation-only",
            Schema::V2 => "full",
        }),
        notes: Vec::new(),
        ..ReceiptVerdict::unreadable(String::new())
    };
    let shape = match read_shape(row, schema) {
        Ok(shape) => shape,
        Err(note) => {
            out.notes.push(note);
            return out;
        }
    };

    let mut notes = Vec::new();
    let pre_digest = field(shape.pre, "digest");
    let post_digest = field(shape.post, "digest");
    let receipt_digest = obj.get("receipt_digest").cloned().unwrap_or(Value::Null);
    // `&=` evaluates every check, so every discrepancy is noted, in order.
    let mut sc = check_digests_well_formed(
        &pre_digest,
        &post_digest,
        &receipt_digest,
        &shape.manifest,
        &mut notes,
    );
    sc &= check_counts(&shape.n, shape.manifest.len(), &mut notes);
    sc &= check_bytes(&shape.n, &mut notes);
    sc &= check_receipt_digest(obj, &receipt_digest, &mut notes);

    let mut mismatch = false;
    if let Some(c) = pre_content {
        mismatch |= compare_pre(c, &pre_digest, &shape, &mut notes);
    }
    if let Some(c) = post_content {
        mismatch |= compare_post(c, &post_digest, &shape.n, &mut notes);
    }
    if let (Some(pre_c), Some(post_c)) = (pre_content, post_content) {
        mismatch |= compare_drop_set(pre_c, post_c, &shape, &mut notes);
    }

    out.self_consistent = sc;
    out.content = if mismatch {
        ContentCheck::Mismatch
    } else if pre_content.is_some() || post_content.is_some() {
        ContentCheck::Match
    } else {
        ContentCheck::Skipped
    };
    out.ok = sc && !mismatch;
    out.verified_scope = scope(
        schema,
        &shape.n,
        pre_content.is_some(),
        post_content.is_some(),
        &mut notes,
    );
    out.notes = notes;
    out
}

/// The shape gate: every key read in Python's evaluation order (so the first missing key is
/// the one named), then every number a non-negative integer, then the manifest a list of
/// strings. The error is the verdict's only note.
fn read_shape(row: &Value, schema: Schema) -> Result<Shape<'_>, String> {
    let missing = |e: String| format!("malformed receipt row: missing {e}");
    let at = |container, key| index(container, key).map_err(missing);
    let pre = at(row, "pre")?;
    let post = at(row, "post")?;
    let dropped = at(row, "dropped")?;
    let introduced = at(row, "introduced")?;
    let pre_count = at(pre, "count")?;
    let post_count = at(post, "count")?;
    let dropped_count = at(dropped, "count")?;
    let introduced_count = at(introduced, "count")?;
    let pre_bytes = at(pre, "bytes")?;
    let post_bytes = at(post, "bytes")?;
    let dropped_bytes = at(dropped, "bytes")?;
    let items = at(dropped, "items")?;
    let introduced_bytes = match schema {
        Schema::V1 => None,
        Schema::V2 => Some(at(introduced, "bytes")?),
    };

    let number = |v| {
        count(v).ok_or_else(|| {
            "malformed receipt row: counts/bytes must be non-negative integers".to_owned()
        })
    };
    let n = Numbers {
        pre_count: number(pre_count)?,
        post_count: number(post_count)?,
        dropped_count: number(dropped_count)?,
        introduced_count: number(introduced_count)?,
        pre_bytes: number(pre_bytes)?,
        post_bytes: number(post_bytes)?,
        dropped_bytes: number(dropped_bytes)?,
        introduced_bytes: introduced_bytes.map(number).transpose()?,
    };

    let manifest = match items {
        Value::Array(items) => items
            .iter()
            .map(|v| match v {
                Value::Str(t) => Some(t),
                _ => None,
            })
            .collect::<Option<Vec<&Text>>>(),
        _ => None,
    }
    .ok_or_else(|| {
        "malformed receipt row: dropped.items must be a list of digest strings".to_owned()
    })?;
    Ok(Shape {
        pre,
        post,
        n,
        manifest,
    })
}

/// Python's `v.get(key)` on a dict, `None` on anything else.
fn field(v: &Value, key: &str) -> Value {
    v.as_object()
        .and_then(|o| o.get(key))
        .cloned()
        .unwrap_or(Value::Null)
}

/// Every digest the row carries is a well-formed self-describing digest.
fn check_digests_well_formed(
    pre_digest: &Value,
    post_digest: &Value,
    receipt_digest: &Value,
    manifest: &[&Text],
    notes: &mut Vec<String>,
) -> bool {
    let mut labelled: Vec<(String, Value)> = vec![
        ("pre.digest".to_owned(), pre_digest.clone()),
        ("post.digest".to_owned(), post_digest.clone()),
        ("receipt_digest".to_owned(), receipt_digest.clone()),
    ];
    labelled.extend(
        manifest
            .iter()
            .enumerate()
            .map(|(i, d)| (format!("dropped.items[{i}]"), Value::Str((*d).clone()))),
    );
    let mut held = true;
    for (label, d) in &labelled {
        if !is_well_formed(d) {
            held = false;
            notes.push(format!(
                "{label} is not a well-formed self-describing digest"
            ));
        }
    }
    held
}

/// The manifest lists `dropped.count` items, and the counts reconcile:
/// `post - introduced == pre - dropped`.
fn check_counts(n: &Numbers<'_>, manifest_len: usize, notes: &mut Vec<String>) -> bool {
    let mut held = true;
    if cmp_decimal(&manifest_len.to_string(), n.dropped_count) != Ordering::Equal {
        held = false;
        notes.push(format!(
            "manifest length {manifest_len} != dropped.count {}",
            n.dropped_count
        ));
    }
    if cmp_decimal(n.dropped_count, n.pre_count) == Ordering::Greater {
        held = false;
        notes.push("dropped.count exceeds pre.count".to_owned());
    } else {
        let kept = dec_sub(n.pre_count, n.dropped_count);
        if dec_add(&kept, n.introduced_count) != n.post_count {
            held = false;
            notes.push("counts do not reconcile: post - introduced != pre - dropped".to_owned());
        }
    }
    held
}

/// The bytes reconcile: exactly under v2, as a lower bound under v1 (the HIGH-1 gap).
fn check_bytes(n: &Numbers<'_>, notes: &mut Vec<String>) -> bool {
    if cmp_decimal(n.dropped_bytes, n.pre_bytes) == Ordering::Greater {
        notes.push(format!(
            "dropped.bytes {} exceeds pre.bytes {} \u{2014} impossible, drops come out of pre",
            n.dropped_bytes, n.pre_bytes
        ));
        return false;
    }
    if n.dropped_count == "0" && n.dropped_bytes != "0" {
        notes.push(format!(
            "dropped.count is 0 but dropped.bytes is {}",
            n.dropped_bytes
        ));
        return false;
    }
    if let Some(introduced_bytes) = n.introduced_bytes {
        let want = dec_add(&dec_sub(n.pre_bytes, n.dropped_bytes), introduced_bytes);
        if n.post_bytes != want {
            notes.push(format!(
                "bytes do not reconcile: pre.bytes - dropped.bytes + introduced.bytes = {want}, \
                 got post.bytes {}",
                n.post_bytes
            ));
            return false;
        }
        return true;
    }
    let kept_bytes = dec_sub(n.pre_bytes, n.dropped_bytes);
    if n.introduced_count == "0" && n.post_bytes != kept_bytes {
        notes.push(format!(
            "bytes do not reconcile: nothing was introduced, so post.bytes must equal \
             pre.bytes - dropped.bytes ({kept_bytes}), got {}",
            n.post_bytes
        ));
        return false;
    }
    if cmp_decimal(n.post_bytes, &kept_bytes) == Ordering::Less {
        notes.push(format!(
            "bytes do not reconcile: post.bytes {} is below the kept bytes it must contain \
             ({kept_bytes}) -- v1 schema: this is only a lower bound, not an exact pin, \
             whenever introduced.count>0 (the HIGH-1 gap; re-seal under v2 to close it)",
            n.post_bytes
        ));
        return false;
    }
    true
}

/// `receipt_digest` reproduces from the row's core.
fn check_receipt_digest(obj: &Object, receipt_digest: &Value, notes: &mut Vec<String>) -> bool {
    match receipt_digest_of(obj) {
        Ok(want) if receipt_digest.as_str() == Some(want.as_str()) => true,
        Ok(_) => {
            notes.push(
                "receipt_digest does not reproduce from the row's core \u{2014} the row was \
                 altered"
                    .to_owned(),
            );
            false
        }
        Err(e) => {
            notes.push(format!(
                "receipt_digest cannot be computed from the row's core ({e}) \u{2014} the row \
                 is not a receipt arcaeon can verify"
            ));
            false
        }
    }
}

/// Notes a recomputed value that differs from the claimed one; true when it differs.
fn differs(notes: &mut Vec<String>, label: &str, got: String, want: String) -> bool {
    if got == want {
        return false;
    }
    notes.push(format!("{label}: recomputed {got} != claimed {want}"));
    true
}

/// The pre side recomputed: digest, count, bytes, and every manifest digest found in the
/// pre-content (as a multiset). True when anything disagrees.
fn compare_pre(
    c: &ContentDigest,
    pre_digest: &Value,
    shape: &Shape<'_>,
    notes: &mut Vec<String>,
) -> bool {
    let n = &shape.n;
    let mut mismatch = differs(
        notes,
        "pre.digest",
        repr_text(&Text::from(c.whole.as_str())),
        repr_value(pre_digest),
    );
    mismatch |= differs(
        notes,
        "pre.count",
        c.count().to_string(),
        n.pre_count.to_owned(),
    );
    mismatch |= differs(
        notes,
        "pre.bytes",
        c.total.to_string(),
        n.pre_bytes.to_owned(),
    );
    let mut avail: BTreeMap<&[u8], usize> = BTreeMap::new();
    for d in &c.items {
        *avail.entry(d.as_bytes()).or_insert(0) += 1;
    }
    for d in &shape.manifest {
        match avail.get_mut(d.as_bytes()) {
            Some(k) if *k > 0 => *k -= 1,
            _ => {
                mismatch = true;
                notes.push(format!(
                    "manifest digest {}\u{2026} not found in pre_content \u{2014} receipt \
                     claims a drop of an item the pre-content never contained",
                    prefix(d, 40)
                ));
            }
        }
    }
    mismatch
}

/// The post side recomputed: digest, count, bytes. True when anything disagrees.
fn compare_post(
    c: &ContentDigest,
    post_digest: &Value,
    n: &Numbers<'_>,
    notes: &mut Vec<String>,
) -> bool {
    let mut mismatch = differs(
        notes,
        "post.digest",
        repr_text(&Text::from(c.whole.as_str())),
        repr_value(post_digest),
    );
    mismatch |= differs(
        notes,
        "post.count",
        c.count().to_string(),
        n.post_count.to_owned(),
    );
    mismatch |= differs(
        notes,
        "post.bytes",
        c.total.to_string(),
        n.post_bytes.to_owned(),
    );
    mismatch
}

/// With both sides: the drop set and what was introduced, recomputed. True when anything
/// disagrees.
fn compare_drop_set(
    pre_c: &ContentDigest,
    post_c: &ContentDigest,
    shape: &Shape<'_>,
    notes: &mut Vec<String>,
) -> bool {
    let (n, manifest) = (&shape.n, &shape.manifest);
    let mut mismatch = false;
    let actual = manifest::compute(pre_c, post_c);
    let actual_set: Vec<&[u8]> = actual.dropped.iter().map(|d| d.as_bytes()).collect();
    let claimed_set: Vec<&[u8]> = manifest.iter().map(|d| d.as_bytes()).collect();
    if !manifest::same_multiset(&actual_set, &claimed_set) {
        mismatch = true;
        notes.push(format!(
            "drop-manifest disagrees with content: recomputed {} dropped item(s), manifest \
             claims {}",
            actual.dropped.len(),
            manifest.len()
        ));
    } else if actual.dropped_bytes.to_string() != n.dropped_bytes {
        mismatch = true;
        notes.push(format!(
            "dropped.bytes: recomputed {} != claimed {}",
            actual.dropped_bytes, n.dropped_bytes
        ));
    }
    if actual.introduced_count.to_string() != n.introduced_count {
        mismatch = true;
        notes.push(format!(
            "introduced.count: recomputed {} != claimed {}",
            actual.introduced_count, n.introduced_count
        ));
    } else if let Some(introduced_bytes) = n.introduced_bytes
        && actual.introduced_bytes.to_string() != introduced_bytes
    {
        mismatch = true;
        notes.push(format!(
            "introduced.bytes: recomputed {} != claimed {}",
            actual.introduced_bytes, introduced_bytes
        ));
    }
    mismatch
}

/// The verified scope, noting what was not checked: one side of content, none, or a v1 row
/// whose claimed introduction leaves `dropped.bytes` a lower bound.
fn scope(
    schema: Schema,
    n: &Numbers<'_>,
    has_pre: bool,
    has_post: bool,
    notes: &mut Vec<String>,
) -> String {
    let mut scope = match (has_pre, has_post) {
        (true, true) => "full",
        (true, false) => "bounded_pre_only",
        (false, true) => "bounded_post_only",
        (false, false) => "bounded_no_content",
    }
    .to_owned();
    let v1_gap = schema == Schema::V1 && scope != "full" && n.introduced_count != "0";
    if v1_gap {
        scope.push_str("+v1_lower_bound");
    }
    if scope != "full" {
        if scope.starts_with("bounded_no_content") {
            notes.push(format!(
                "bounded scan: no content supplied, so nothing was recomputed -- this is \
                 self-consistency only, not proof that pre/post/dropped are true \
                 (verified_scope={scope})"
            ));
        } else {
            notes.push(format!(
                "bounded scan: only one side of the content was supplied, so the drop set was \
                 not recomputed (verified_scope={scope})"
            ));
        }
    }
    if v1_gap {
        notes.push(
            "bounded scan: v1 row claiming an introduction -- post.bytes is only a lower bound, \
             so dropped.bytes could be understated behind the claimed introduction (HIGH-1). \
             Supply content or re-seal under v2 to pin it."
                .to_owned(),
        );
    }
    scope
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_arithmetic() {
        assert_eq!(dec_add("0", "0"), "0");
        assert_eq!(dec_add("999", "1"), "1000");
        assert_eq!(
            dec_add("18446744073709551615", "18446744073709551615"),
            "36893488147419103230"
        );
        assert_eq!(dec_sub("1000", "1"), "999");
        assert_eq!(dec_sub("1000", "1000"), "0");
        assert_eq!(
            dec_sub("100000000000000000000000", "1"),
            "99999999999999999999999"
        );
    }
}
