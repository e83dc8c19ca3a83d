//! Content documents: a JSON array of items, and a map from ledger line to `{pre, post}`.
//!
//! JSON has no bytes type, so a bytes item is written `{"$b64": "<standard base64>"}`, the
//! convention of arcaeon's conformance sample (not of arcaeon itself). An item that is an
//! object with exactly that one key and a string value is read as bytes; one whose value is not
//! valid base64 is refused rather than silently hashed as a dict. Everything else is read as
//! Python's `json.loads` reads it: a string is a string item (hashed raw), any other value a
//! JSON item (hashed as json-c14n), with big integers and `-0.0` kept exactly.

use std::collections::BTreeMap;

use crate::digest::{ContentDigest, Item, digest_content};
use crate::error::ReceiptError;
use crate::json::{self, Value};

/// The key of a bytes item.
pub const B64_KEY: &str = "$b64";

fn invalid(message: impl Into<String>) -> ReceiptError {
    ReceiptError::ContentInvalid {
        message: message.into(),
    }
}

/// Decodes standard base64 (`A-Z a-z 0-9 + /`, `=` padding required when the length is not a
/// multiple of four; no whitespace).
///
/// # Errors
///
/// Anything else.
pub fn decode_base64(text: &str) -> Result<Vec<u8>, ReceiptError> {
    fn sextet(b: u8) -> Option<u32> {
        Some(u32::from(match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        }))
    }
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return Err(invalid("a $b64 value's length is not a multiple of 4"));
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let chunks = bytes.chunks(4);
    let last = chunks.len().saturating_sub(1);
    for (i, chunk) in chunks.enumerate() {
        let pad = chunk.iter().rev().take_while(|&&b| b == b'=').count();
        if pad > 2 || (pad > 0 && i != last) {
            return Err(invalid("a $b64 value has misplaced '=' padding"));
        }
        let mut n = 0_u32;
        for (j, &b) in chunk.iter().enumerate() {
            let v = if j >= 4 - pad {
                0
            } else {
                sextet(b).ok_or_else(|| invalid("a $b64 value holds a non-base64 character"))?
            };
            n = (n << 6) | v;
        }
        let [_, a, b, c] = n.to_be_bytes();
        out.push(a);
        if pad < 2 {
            out.push(b);
        }
        if pad < 1 {
            out.push(c);
        }
    }
    Ok(out)
}

/// The item one JSON value of a content array stands for.
///
/// # Errors
///
/// A `$b64` object that is not valid base64, or a string with a lone surrogate.
pub fn item_from_json(value: Value) -> Result<Item, ReceiptError> {
    if let Value::Object(o) = &value
        && o.len() == 1
        && let Some(Value::Str(t)) = o.get(B64_KEY)
    {
        return decode_base64(t.to_utf8()?).map(Item::Bytes);
    }
    Item::from_json(value)
}

/// The items of a JSON array value.
///
/// # Errors
///
/// A value that is not an array, or an item [`item_from_json`] refuses.
pub fn items_from_json(value: Value, what: &str) -> Result<Vec<Item>, ReceiptError> {
    let Value::Array(values) = value else {
        return Err(invalid(format!(
            "{what} must be a JSON array of items, not a {}",
            value.py_type_name()
        )));
    };
    values.into_iter().map(item_from_json).collect()
}

/// Parses a JSON array of items.
///
/// # Errors
///
/// Text that is not JSON, or as [`items_from_json`].
pub fn parse_items(text: &str, what: &str) -> Result<Vec<Item>, ReceiptError> {
    items_from_json(json::parse_strict(text)?, what)
}

/// The content behind one receipt row: either side may be absent.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SideContent {
    /// The pre items, when given.
    pub pre: Option<Vec<Item>>,
    /// The post items, when given.
    pub post: Option<Vec<Item>>,
}

impl SideContent {
    /// The digests of both sides.
    ///
    /// # Errors
    ///
    /// An item that cannot be digested.
    pub fn digest(&self) -> Result<(Option<ContentDigest>, Option<ContentDigest>), ReceiptError> {
        let pre = self.pre.as_deref().map(digest_content).transpose()?;
        let post = self.post.as_deref().map(digest_content).transpose()?;
        Ok((pre, post))
    }
}

/// Parses a content map: `{"<line>": {"pre": [...], "post": [...]}, ...}`, where each line is a
/// 1-based ledger line number, and each side is optional.
///
/// # Errors
///
/// Text that is not JSON, a key that is not a positive line number, an entry that is not an
/// object or has other keys, or an item that is refused.
pub fn parse_content_map(text: &str) -> Result<BTreeMap<usize, SideContent>, ReceiptError> {
    let Value::Object(map) = json::parse_strict(text)? else {
        return Err(invalid(
            "the content map must be a JSON object from line number to {\"pre\", \"post\"}",
        ));
    };
    let mut out = BTreeMap::new();
    for (key, entry) in map.iter() {
        let key_text = key.to_string_lossy();
        let line = key_text
            .parse::<usize>()
            .ok()
            .filter(|n| *n > 0 && n.to_string() == key_text)
            .ok_or_else(|| {
                invalid(format!(
                    "content map key {key_text:?} is not a positive line number"
                ))
            })?;
        let Value::Object(sides) = entry else {
            return Err(invalid(format!(
                "content for line {line} must be an object with \"pre\" and/or \"post\""
            )));
        };
        let mut side = SideContent::default();
        for (k, v) in sides.iter() {
            match k.as_str() {
                Some("pre") => side.pre = Some(items_from_json(v.clone(), "pre")?),
                Some("post") => side.post = Some(items_from_json(v.clone(), "post")?),
                _ => {
                    return Err(invalid(format!(
                        "content for line {line} has the key {:?}; only \"pre\" and \"post\" \
                         are allowed",
                        k.to_string_lossy()
                    )));
                }
            }
        }
        out.insert(line, side);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_round_trips_known_values() {
        assert_eq!(
            decode_base64("AAFiaW5hcnn/").expect("valid"),
            b"\x00\x01binary\xff"
        );
        assert_eq!(decode_base64("").expect("valid"), b"");
        assert_eq!(decode_base64("Y2Fmw6k=").expect("valid"), "café".as_bytes());
        assert_eq!(decode_base64("YQ==").expect("valid"), b"a");
        for bad in ["YQ=", "Y===", "YQ==YQ==", "Y!==", "====", "YQ= "] {
            assert!(decode_base64(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn content_map_shapes() {
        let m = parse_content_map(r#"{"3": {"pre": ["a", {"$b64": "YQ=="}, 1.0], "post": []}}"#)
            .expect("valid");
        let side = m.get(&3).expect("line 3");
        assert_eq!(
            side.pre.as_deref(),
            Some(
                &[
                    Item::Str("a".into()),
                    Item::Bytes(b"a".to_vec()),
                    Item::Json(Value::Float(1.0))
                ][..]
            )
        );
        for bad in [
            "[]",
            r#"{"0": {}}"#,
            r#"{"01": {}}"#,
            r#"{"x": {}}"#,
            r#"{"1": []}"#,
            r#"{"1": {"pre": {}}}"#,
            r#"{"1": {"other": []}}"#,
            r#"{"1": {"pre": [{"$b64": "!"}]}}"#,
        ] {
            assert!(parse_content_map(bad).is_err(), "{bad}");
        }
    }
}
