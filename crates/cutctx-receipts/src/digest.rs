//! Self-describing digests: per item, and over a whole content list.
//!
//! ```text
//! sha256:raw-bytes:v1:<hex>   bytes as they are; a string as its UTF-8
//! sha256:json-c14n:v1:<hex>   any other JSON value, over its json-c14n v1 bytes
//! ```
//!
//! An item's byte size is the length of what was hashed. The whole-content digest is the
//! json-c14n digest of the ordered list of per-item digests: a digest of digests.

use cutctx_json::{Style, Writer};
use sha2::{Digest, Sha256};

use crate::error::ReceiptError;
use crate::json::{Value, to_c14n};

/// The prefix of a json-c14n v1 digest.
pub const JSON_C14N_PREFIX: &str = "sha256:json-c14n:v1:";
/// The prefix of a raw-bytes v1 digest.
pub const RAW_BYTES_PREFIX: &str = "sha256:raw-bytes:v1:";

/// One content item, typed as arcaeon types it.
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// Opaque bytes (Python `bytes`): hashed raw.
    Bytes(Vec<u8>),
    /// A string (Python `str`): hashed raw as UTF-8, never JSON-canonicalized.
    Str(String),
    /// Any other JSON value: hashed as json-c14n v1. A [`Value::Str`] here is still hashed as
    /// a string, since Python cannot tell the two apart.
    Json(Value),
}

impl Item {
    /// The item a JSON value read from a content file stands for: a string is a [`Item::Str`],
    /// everything else a [`Item::Json`].
    ///
    /// # Errors
    ///
    /// [`ReceiptError::LoneSurrogate`] for a string holding one (Python cannot encode it).
    pub fn from_json(value: Value) -> Result<Self, ReceiptError> {
        match value {
            Value::Str(t) => Ok(Self::Str(t.to_utf8()?.to_owned())),
            other => Ok(Self::Json(other)),
        }
    }
}

/// An item's digest and the byte size counted for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItemDigest {
    /// `sha256:<recipe>:v1:<hex>`.
    pub digest: String,
    /// The length of the hashed bytes.
    pub size: u64,
}

/// A content list's digests.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ContentDigest {
    /// Per-item digests, in order, duplicates kept.
    pub items: Vec<String>,
    /// Per-item byte sizes, in the same order.
    pub sizes: Vec<u64>,
    /// The whole-content digest.
    pub whole: String,
    /// The sum of the sizes.
    pub total: u64,
}

impl ContentDigest {
    /// Builds the whole from per-item digests (for callers that digest items themselves, as
    /// [`crate::transcript`] does turn by turn).
    #[must_use]
    pub fn from_items(items: Vec<ItemDigest>) -> Self {
        let (digests, sizes): (Vec<String>, Vec<u64>) =
            items.into_iter().map(|d| (d.digest, d.size)).unzip();
        let whole = whole_digest(&digests);
        let total = sizes.iter().fold(0_u64, |a, &b| a.saturating_add(b));
        Self {
            items: digests,
            sizes,
            whole,
            total,
        }
    }

    /// The number of items.
    #[must_use]
    pub fn count(&self) -> usize {
        self.items.len()
    }
}

pub(crate) use cutctx_json::hex;

/// Lower-case hex SHA-256.
#[must_use]
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// `sha256:raw-bytes:v1:` over `bytes`.
#[must_use]
pub fn digest_bytes(bytes: &[u8]) -> String {
    format!("{RAW_BYTES_PREFIX}{}", sha256_hex(bytes))
}

/// json-c14n v1 bytes of a value (see [`crate::json::to_c14n`]).
///
/// # Errors
///
/// NaN or infinity, a lone surrogate, or nesting beyond the limit.
pub fn canon_json(value: &Value) -> Result<Vec<u8>, ReceiptError> {
    to_c14n(value)
}

/// `sha256:json-c14n:v1:` over the value's canonical bytes.
///
/// # Errors
///
/// As [`canon_json`].
pub fn digest_json(value: &Value) -> Result<String, ReceiptError> {
    Ok(digest_canonical(&canon_json(value)?).digest)
}

/// The digest and byte size of one item (arcaeon's `_digest_item`).
///
/// # Errors
///
/// A JSON item that json-c14n refuses, or a string with a lone surrogate.
pub fn digest_item(item: &Item) -> Result<ItemDigest, ReceiptError> {
    let raw = |b: &[u8]| ItemDigest {
        digest: digest_bytes(b),
        size: b.len() as u64,
    };
    match item {
        Item::Bytes(b) => Ok(raw(b)),
        Item::Str(s) => Ok(raw(s.as_bytes())),
        Item::Json(Value::Str(t)) => Ok(raw(t.to_utf8()?.as_bytes())),
        Item::Json(v) => Ok(digest_canonical(&canon_json(v)?)),
    }
}

/// The json-c14n digest of bytes already in canonical form.
pub(crate) fn digest_canonical(canonical: &[u8]) -> ItemDigest {
    ItemDigest {
        digest: format!("{JSON_C14N_PREFIX}{}", sha256_hex(canonical)),
        size: canonical.len() as u64,
    }
}

/// The digests of a content list (arcaeon's `_digest_content`).
///
/// # Errors
///
/// The first item [`digest_item`] refuses.
pub fn digest_content(items: &[Item]) -> Result<ContentDigest, ReceiptError> {
    let digests = items
        .iter()
        .map(digest_item)
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ContentDigest::from_items(digests))
}

/// The json-c14n digest of a list of digest strings, written directly.
fn whole_digest(digests: &[String]) -> String {
    let mut canonical =
        String::with_capacity(2 + digests.iter().map(|d| d.len() + 3).sum::<usize>());
    Writer::new(&mut canonical, Style::C14N).str_list(digests.iter().map(String::as_str));
    digest_canonical(canonical.as_bytes()).digest
}

/// Whether `digest` is well-formed as `verify_receipt` tests it: a string of exactly four
/// non-empty `:`-separated parts whose last is lower-case hex. The algorithm, the recipe and
/// the hex length are not checked (`a:b:c:0` passes).
#[must_use]
pub fn is_well_formed(digest: &Value) -> bool {
    let Value::Str(t) = digest else {
        return false;
    };
    // Taken part by part, not gathered: a ledger's audit asks this of every digest it holds.
    let mut parts = t.as_bytes().split(|&b| b == b':');
    let four = [parts.next(), parts.next(), parts.next(), parts.next()];
    let [Some(_), Some(_), Some(_), Some(tail)] = four else {
        return false;
    };
    parts.next().is_none()
        && four.iter().flatten().all(|p| !p.is_empty())
        && tail.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    fn json(text: &str) -> Value {
        parse(text).expect("parses").value
    }

    #[test]
    fn ledger_selftest_vectors() {
        assert_eq!(
            digest_json(&json(r#"{"b": 2, "a": 1}"#)).expect("digest"),
            "sha256:json-c14n:v1:43258cff783fe7036d8a43033f830adfc60ec037382473548ac742b888292777"
        );
        assert_eq!(
            digest_json(&json(r#"{"claim": "X said Y", "unicode": "éü—🔒"}"#)).expect("digest"),
            "sha256:json-c14n:v1:03b6bc1350e72d1da527a6c729dd8bb3be1b0f8dd3e82000da68d32e21cc2cf6"
        );
        assert_eq!(
            digest_json(&json(r#"[1, "two", null, true, {"k": [3.5]}]"#)).expect("digest"),
            "sha256:json-c14n:v1:bc0d62567f92e63b16aa724fb3d17141713d486780f41458197d8f7d539f33d5"
        );
        assert_eq!(
            digest_bytes(b"arcaeon selftest vector 1"),
            "sha256:raw-bytes:v1:45050994979709443a05e8a31cac09bbbae7074cd6887b6c31f83b775a2b8651"
        );
        assert_eq!(
            digest_bytes(b""),
            "sha256:raw-bytes:v1:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert!(matches!(
            digest_json(&json(r#"{"bad": NaN}"#)),
            Err(ReceiptError::NonFinite { .. })
        ));
    }

    #[test]
    fn empty_content_digest() {
        let c = digest_content(&[]).expect("empty");
        assert_eq!(
            c.whole,
            "sha256:json-c14n:v1:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"
        );
        assert_eq!(c.total, 0);
    }

    #[test]
    fn strings_are_hashed_raw_and_json_strings_too() {
        let s = r#"{"b": 2, "a": 1}"#;
        let a = digest_item(&Item::Str(s.to_owned())).expect("str");
        let b = digest_item(&Item::Json(Value::str(s))).expect("json str");
        assert_eq!(a, b);
        assert!(a.digest.starts_with(RAW_BYTES_PREFIX));
        assert_eq!(a.size, 16);
        assert_eq!(digest_item(&Item::Json(json("42"))).expect("int").size, 2);
        assert_eq!(digest_item(&Item::Json(Value::Null)).expect("null").size, 4);
    }

    #[test]
    fn well_formedness_is_loose_as_arcaeon_s() {
        for ok in ["a:b:c:0", "sha256:raw-bytes:v1:00ff"] {
            assert!(is_well_formed(&Value::str(ok)), "{ok}");
        }
        for bad in [
            "a:b:c:0A",
            "a:b:c",
            "a:b:c:d:e",
            ":b:c:0",
            "a:b:c:",
            "a:b:c:0x1f",
            "a::c:0",
            "a:b::0",
        ] {
            assert!(!is_well_formed(&Value::str(bad)), "{bad}");
        }
        assert!(!is_well_formed(&Value::Null));
        assert!(!is_well_formed(&Value::uint(1)));
    }
}
