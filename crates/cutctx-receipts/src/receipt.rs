//! The receipt's life cycle and its row: open over the pre-content, record what was kept,
//! optionally record what the caller claims was dropped, seal.
//!
//! A sealed row holds, in this insertion order (the order arcaeon writes):
//!
//! ```text
//! schema, pre{count,bytes,digest}, post{count,bytes,digest}, dropped{count,bytes,items},
//! introduced{count,bytes}, compactor, method, kind, opened_at, receipt_digest,
//! <extra keys>, ts                                  (the ledger then adds chain)
//! ```
//!
//! `receipt_digest` is the json-c14n digest of the first seven keys (the *core*). Extra keys
//! (such as cutctx's `plan_hash`) sit outside the core but inside the chain, so a receipt can
//! name the plan that produced it without changing what arcaeon's `verify_receipt` checks.

use crate::clock::Clock;
use crate::digest::{ContentDigest, Item, digest_content, digest_item, digest_json};
use crate::error::ReceiptError;
use crate::json::{Int, Object, Text, Value};
use crate::manifest::{self, DropManifest};

/// The schema label minted today.
pub const SCHEMA_V2: &str = "arcaeon-compact:receipt:v2";
/// The legacy schema label: still verified, never minted.
pub const SCHEMA_V1: &str = "arcaeon-compact:receipt:v1";
/// The `kind` of a receipt row.
pub const KIND: &str = "compaction_receipt";
/// The seven keys the `receipt_digest` covers.
pub const CORE_KEYS: [&str; 7] = [
    "schema",
    "pre",
    "post",
    "dropped",
    "introduced",
    "compactor",
    "method",
];
/// Keys an extra may not use: the core, the receipt's own stamps, and the ledger's.
pub const RESERVED_KEYS: [&str; 13] = [
    "schema",
    "pre",
    "post",
    "dropped",
    "introduced",
    "compactor",
    "method",
    "kind",
    "opened_at",
    "receipt_digest",
    "ts",
    "chain",
    "authority",
];

/// A receipt schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schema {
    /// `arcaeon-compact:receipt:v1`: `introduced` has no `bytes`.
    V1,
    /// `arcaeon-compact:receipt:v2`.
    V2,
}

impl Schema {
    /// The full label.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Self::V1 => SCHEMA_V1,
            Self::V2 => SCHEMA_V2,
        }
    }

    /// `"v1"` or `"v2"`, as `verify_receipt` reports it.
    #[must_use]
    pub const fn short(self) -> &'static str {
        match self {
            Self::V1 => "v1",
            Self::V2 => "v2",
        }
    }

    /// The schema a row's `schema` value names, if any.
    #[must_use]
    pub fn of(value: Option<&Value>) -> Option<Self> {
        match value.and_then(Value::as_str) {
            Some(SCHEMA_V1) => Some(Self::V1),
            Some(SCHEMA_V2) => Some(Self::V2),
            _ => None,
        }
    }
}

/// Who compacted, how, and any extra keys for the row.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Labels {
    /// The compactor's identity claim (any string).
    pub compactor: String,
    /// The method label (`llm-summary`, `fifo-truncate`, ...).
    pub method: String,
    /// Extra top-level keys, placed after `receipt_digest` and before `ts`: outside the
    /// `receipt_digest` core, inside the chain.
    pub extra: Vec<(String, Value)>,
}

impl Labels {
    /// Labels with no extra keys.
    #[must_use]
    pub fn new(compactor: impl Into<String>, method: impl Into<String>) -> Self {
        Self {
            compactor: compactor.into(),
            method: method.into(),
            extra: Vec::new(),
        }
    }

    /// The same labels with one more extra key.
    #[must_use]
    pub fn with_extra(mut self, key: impl Into<String>, value: Value) -> Self {
        self.extra.push((key.into(), value));
        self
    }
}

/// One compaction event: opened on the full content, sealed into a row.
///
/// ```
/// use cutctx_receipts::{CompactionReceipt, FixedClock, Item, Labels};
/// let clock = FixedClock::new("2026-08-15T00:00:00Z");
/// let pre = [Item::Str("a".into()), Item::Str("b".into())];
/// let mut r = CompactionReceipt::open(&pre, &clock)?;
/// r.record_kept(&[Item::Str("a".into())])?;
/// let row = r.seal(&Labels::new("me", "fifo-truncate"), &clock)?;
/// assert_eq!(row.get("kind").and_then(|v| v.as_str()), Some("compaction_receipt"));
/// assert!(r.seal(&Labels::new("me", "again"), &clock).is_err());
/// # Ok::<(), cutctx_receipts::ReceiptError>(())
/// ```
#[derive(Clone, Debug)]
pub struct CompactionReceipt {
    pre: ContentDigest,
    opened_at: String,
    post: Option<ContentDigest>,
    claimed: Option<Vec<String>>,
    sealed: bool,
}

impl CompactionReceipt {
    /// Digests every pre item and the whole, and stamps `opened_at`.
    ///
    /// # Errors
    ///
    /// An item that cannot be digested (see [`digest_item`]).
    pub fn open(pre: &[Item], clock: &dyn Clock) -> Result<Self, ReceiptError> {
        Ok(Self::open_digested(digest_content(pre)?, clock))
    }

    /// [`open`](Self::open) over content the caller digested.
    #[must_use]
    pub fn open_digested(pre: ContentDigest, clock: &dyn Clock) -> Self {
        Self {
            pre,
            opened_at: clock.now_utc(),
            post: None,
            claimed: None,
            sealed: false,
        }
    }

    fn require_unsealed(&self) -> Result<(), ReceiptError> {
        if self.sealed {
            Err(ReceiptError::AlreadySealed)
        } else {
            Ok(())
        }
    }

    /// Digests the survivors. Required before sealing; an empty list means everything was
    /// dropped. Calling it again replaces the earlier record.
    ///
    /// # Errors
    ///
    /// [`ReceiptError::AlreadySealed`], or an item that cannot be digested.
    pub fn record_kept(&mut self, post: &[Item]) -> Result<(), ReceiptError> {
        self.require_unsealed()?;
        self.post = Some(digest_content(post)?);
        Ok(())
    }

    /// [`record_kept`](Self::record_kept) over content the caller digested.
    ///
    /// # Errors
    ///
    /// [`ReceiptError::AlreadySealed`].
    pub fn record_kept_digested(&mut self, post: ContentDigest) -> Result<(), ReceiptError> {
        self.require_unsealed()?;
        self.post = Some(post);
        Ok(())
    }

    /// Records what the caller claims was dropped. Optional: [`seal`](Self::seal) refuses
    /// when the claim is not pre minus kept as a multiset (order does not matter).
    ///
    /// # Errors
    ///
    /// [`ReceiptError::AlreadySealed`], or an item that cannot be digested.
    pub fn record_dropped(&mut self, items: &[Item]) -> Result<(), ReceiptError> {
        self.require_unsealed()?;
        let digests = items
            .iter()
            .map(|it| digest_item(it).map(|d| d.digest))
            .collect::<Result<Vec<_>, _>>()?;
        self.claimed = Some(digests);
        Ok(())
    }

    /// The pre-content's digests.
    #[must_use]
    pub fn pre(&self) -> &ContentDigest {
        &self.pre
    }

    /// When the receipt was opened.
    #[must_use]
    pub fn opened_at(&self) -> &str {
        &self.opened_at
    }

    /// Whether the receipt is sealed.
    #[must_use]
    pub fn is_sealed(&self) -> bool {
        self.sealed
    }

    /// Builds the row (without `chain`) and seals the receipt.
    ///
    /// # Errors
    ///
    /// [`ReceiptError::AlreadySealed`], [`ReceiptError::KeptNotRecorded`],
    /// [`ReceiptError::ClaimMismatch`] (nothing is sealed), [`ReceiptError::ReservedKey`],
    /// or labels json-c14n refuses.
    pub fn seal(&mut self, labels: &Labels, clock: &dyn Clock) -> Result<Object, ReceiptError> {
        let row = self.prepare(labels, clock)?;
        self.sealed = true;
        Ok(row)
    }

    /// The row [`seal`](Self::seal) would return, without sealing: for a writer that seals
    /// only once the row is safely stored (then [`mark_sealed`](Self::mark_sealed)).
    ///
    /// # Errors
    ///
    /// As [`seal`](Self::seal).
    pub fn prepare(&self, labels: &Labels, clock: &dyn Clock) -> Result<Object, ReceiptError> {
        self.require_unsealed()?;
        for (key, _) in &labels.extra {
            if RESERVED_KEYS.contains(&key.as_str()) {
                return Err(ReceiptError::ReservedKey { key: key.clone() });
            }
        }
        let post = self.post.as_ref().ok_or(ReceiptError::KeptNotRecorded)?;
        let m = manifest::compute(&self.pre, post);
        if let Some(claimed) = &self.claimed
            && !manifest::same_multiset(claimed, &m.dropped)
        {
            return Err(ReceiptError::ClaimMismatch {
                claimed: claimed.len(),
                inferred: m.dropped.len(),
                unexpected: manifest::multiset_minus(claimed, &m.dropped),
                missing: manifest::multiset_minus(&m.dropped, claimed),
            });
        }
        let body = body(&self.pre, post, &m, labels);
        let receipt_digest = digest_json(&Value::Object(body.clone()))?;
        let mut row = body;
        row.insert("kind", Value::str(KIND));
        row.insert("opened_at", Value::str(&self.opened_at));
        row.insert("receipt_digest", Value::str(&receipt_digest));
        for (key, value) in &labels.extra {
            row.insert(key.as_str(), value.clone());
        }
        row.insert("ts", Value::str(&clock.now_utc()));
        Ok(row)
    }

    /// Marks the receipt sealed once the row [`prepare`](Self::prepare) built is stored.
    pub fn mark_sealed(&mut self) {
        self.sealed = true;
    }
}

fn counts(count: usize, bytes: u64, digest: &str) -> Value {
    let mut o = Object::new();
    o.insert("count", Value::Int(Int::from(count)));
    o.insert("bytes", Value::uint(bytes));
    o.insert("digest", Value::str(digest));
    Value::Object(o)
}

/// The core, in arcaeon's insertion order.
fn body(pre: &ContentDigest, post: &ContentDigest, m: &DropManifest, labels: &Labels) -> Object {
    let mut dropped = Object::new();
    dropped.insert("count", Value::Int(Int::from(m.dropped.len())));
    dropped.insert("bytes", Value::uint(m.dropped_bytes));
    dropped.insert(
        "items",
        Value::Array(m.dropped.iter().map(|d| Value::str(d)).collect()),
    );
    let mut introduced = Object::new();
    introduced.insert("count", Value::uint(m.introduced_count));
    introduced.insert("bytes", Value::uint(m.introduced_bytes));
    let mut o = Object::new();
    o.insert("schema", Value::str(SCHEMA_V2));
    o.insert("pre", counts(pre.count(), pre.total, &pre.whole));
    o.insert("post", counts(post.count(), post.total, &post.whole));
    o.insert("dropped", Value::Object(dropped));
    o.insert("introduced", Value::Object(introduced));
    o.insert("compactor", Value::str(&labels.compactor));
    o.insert("method", Value::str(&labels.method));
    o
}

/// The core a row's `receipt_digest` covers: the seven keys, a missing one as `null`.
#[must_use]
pub fn core_of(row: &Object) -> Value {
    Value::Object(
        CORE_KEYS
            .iter()
            .map(|k| (Text::from(*k), row.get(k).cloned().unwrap_or(Value::Null)))
            .collect(),
    )
}

/// The `receipt_digest` a row's core gives.
///
/// # Errors
///
/// A core json-c14n refuses (NaN, a lone surrogate, too deep): only hostile rows.
pub fn receipt_digest_of(row: &Object) -> Result<String, ReceiptError> {
    // The digest of `core_of(row)`, written from the row itself rather than from a copy.
    let canonical = crate::json::to_c14n_picked(row, &CORE_KEYS)?;
    Ok(crate::digest::digest_canonical(&canonical).digest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    #[test]
    fn the_digest_written_from_the_row_is_the_digest_of_its_core() {
        let rows = [
            // A receipt as sealed, keys in the writer's order.
            r#"{"schema": "arcaeon-compact:receipt:v2", "pre": {"count": 2, "bytes": 9, "digest": "d"}, "post": {"count": 1, "bytes": 4, "digest": "e"}, "dropped": {"count": 1, "bytes": 5, "items": ["x", "y"]}, "introduced": {"count": 0, "bytes": 0}, "compactor": "c", "method": "m", "ts": "t", "chain": "z"}"#,
            // Keys missing (null in the core), reordered, extra ones, text needing escapes,
            // numbers as Python writes them, deep values.
            r#"{"method": "m\u00e9\n", "extra": [1, 2.5, -0.0, 1e300], "pre": null, "compactor": {"a": [{"b": [true, false, null]}]}}"#,
            r#"{}"#,
            r#"{"dropped": {"items": ["\ud83d\ude00", "é", "\u0000"], "count": 3}, "schema": 1}"#,
        ];
        for text in rows {
            let Value::Object(row) = parse(text).expect("JSON").value else {
                panic!("an object: {text}");
            };
            assert_eq!(
                receipt_digest_of(&row).expect("digestible"),
                digest_json(&core_of(&row)).expect("digestible"),
                "{text}"
            );
        }
        // What the core's writer refuses, the row's refuses too.
        let Value::Object(row) = parse(r#"{"pre": NaN}"#).expect("Python's JSON").value else {
            panic!("an object");
        };
        assert!(digest_json(&core_of(&row)).is_err());
        assert!(receipt_digest_of(&row).is_err());
    }
}
