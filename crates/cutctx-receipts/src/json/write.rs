//! The writers: json-c14n v1, the chain body and a ledger line, each `cutctx_json`'s writer
//! in one of its styles, with the nesting bound of [`MAX_DEPTH`].

use cutctx_json::{JsonError, Sink, Style, Writer};

use super::{MAX_DEPTH, Object, Text, Value, py_float_json};
use crate::error::ReceiptError;

/// json-c14n v1: `json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
/// allow_nan=False).encode("utf-8")`.
///
/// # Errors
///
/// [`ReceiptError::NonFinite`] for NaN or an infinity, [`ReceiptError::LoneSurrogate`], or
/// [`ReceiptError::JsonTooDeep`].
pub fn to_c14n(value: &Value) -> Result<Vec<u8>, ReceiptError> {
    let mut out = Vec::with_capacity(128);
    write(&mut Writer::new(&mut out, Style::C14N), value, 1)?;
    Ok(out)
}

/// The chain rule's body: `json.dumps(v, ensure_ascii=False, sort_keys=True)` with the
/// default `", "`/`": "` separators, encoded with `surrogatepass`. NaN and infinities are
/// written `NaN`, `Infinity`, `-Infinity`, as Python writes them.
///
/// # Errors
///
/// [`ReceiptError::JsonTooDeep`] only.
pub fn to_chain_body(value: &Value) -> Result<Vec<u8>, ReceiptError> {
    let mut out = Vec::with_capacity(256);
    write(&mut Writer::new(&mut out, Style::CHAIN_BODY), value, 1)?;
    Ok(out)
}

/// [`to_chain_body`] of an object without one top-level key (the chain rule's
/// `{k: v for k, v in row.items() if k != "chain"}`), written without copying the object.
///
/// # Errors
///
/// [`ReceiptError::JsonTooDeep`] only.
pub fn to_chain_body_without(object: &Object, skip: &str) -> Result<Vec<u8>, ReceiptError> {
    let mut out = Vec::with_capacity(256);
    let w = &mut Writer::new(&mut out, Style::CHAIN_BODY);
    let entries = object
        .sorted()
        .into_iter()
        .filter(|(k, _)| k.as_bytes() != skip.as_bytes());
    write_entries(w, entries, 1)?;
    Ok(out)
}

/// [`to_c14n`] of the object made of `keys` (distinct), each with its value in `object` or
/// `null` where it has none, written without copying the values: a receipt's digest covers
/// seven of its keys, and a row holds its dropped items' digests among them.
///
/// ```
/// use cutctx_receipts::json::{parse, to_c14n, to_c14n_picked};
/// let row = parse(r#"{"b": [1], "c": 2, "a": "x"}"#)?.value;
/// let picked = parse(r#"{"b": [1], "a": "x", "z": null}"#)?.value;
/// let row = row.as_object().expect("an object");
/// assert_eq!(to_c14n_picked(row, &["b", "a", "z"])?, to_c14n(&picked)?);
/// # Ok::<(), cutctx_receipts::ReceiptError>(())
/// ```
///
/// # Errors
///
/// As [`to_c14n`].
pub fn to_c14n_picked(object: &Object, keys: &[&str]) -> Result<Vec<u8>, ReceiptError> {
    let null = Value::Null;
    let names: Vec<Text> = keys.iter().map(|k| Text::from(*k)).collect();
    let mut entries: Vec<(&Text, &Value)> = names
        .iter()
        .zip(keys)
        .map(|(name, key)| (name, object.get(key).unwrap_or(&null)))
        .collect();
    // As `Object::sorted`: code point order, which the C14N style asks for.
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = Vec::with_capacity(256);
    write_entries(
        &mut Writer::new(&mut out, Style::C14N),
        entries.into_iter(),
        1,
    )?;
    Ok(out)
}

/// A ledger line without its newline: `json.dumps(v, ensure_ascii=False)`, insertion order,
/// `", "`/`": "` separators. NaN, infinities and lone surrogates are refused (Python would
/// write the first two as invalid JSON, and refuses the last).
///
/// # Errors
///
/// As [`to_c14n`].
pub fn to_line(value: &Value) -> Result<String, ReceiptError> {
    let mut out = String::with_capacity(256);
    write(&mut Writer::new(&mut out, Style::LINE), value, 1)?;
    Ok(out)
}

/// [`to_line`] of an object.
///
/// # Errors
///
/// As [`to_line`].
pub fn object_to_line(object: &Object) -> Result<String, ReceiptError> {
    let mut out = String::with_capacity(256);
    write_object(&mut Writer::new(&mut out, Style::LINE), object, 1)?;
    Ok(out)
}

fn write<S: Sink + ?Sized>(
    w: &mut Writer<'_, S>,
    value: &Value,
    depth: usize,
) -> Result<(), ReceiptError> {
    match value {
        Value::Null => w.null(),
        Value::Bool(b) => w.bool(*b),
        Value::Int(i) => w.raw(i.as_str()),
        Value::Float(f) => w.f64(*f).map_err(|e| refused(e, None))?,
        Value::Str(t) => write_text(w, t)?,
        Value::Array(items) => {
            if depth > MAX_DEPTH {
                return Err(ReceiptError::JsonTooDeep { limit: MAX_DEPTH });
            }
            w.raw("[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    w.item_separator();
                }
                write(w, item, depth + 1)?;
            }
            w.raw("]");
        }
        Value::Object(o) => write_object(w, o, depth)?,
    }
    Ok(())
}

fn write_object<S: Sink + ?Sized>(
    w: &mut Writer<'_, S>,
    o: &Object,
    depth: usize,
) -> Result<(), ReceiptError> {
    if w.style().sort_keys {
        write_entries(w, o.sorted().into_iter(), depth)
    } else {
        write_entries(w, o.iter(), depth)
    }
}

/// An object of `entries`, in the order given.
fn write_entries<'a, S: Sink + ?Sized>(
    w: &mut Writer<'_, S>,
    entries: impl Iterator<Item = (&'a Text, &'a Value)>,
    depth: usize,
) -> Result<(), ReceiptError> {
    if depth > MAX_DEPTH {
        return Err(ReceiptError::JsonTooDeep { limit: MAX_DEPTH });
    }
    w.raw("{");
    for (i, (k, v)) in entries.enumerate() {
        if i > 0 {
            w.item_separator();
        }
        write_text(w, k)?;
        w.key_separator();
        write(w, v, depth + 1)?;
    }
    w.raw("}");
    Ok(())
}

fn write_text<S: Sink + ?Sized>(w: &mut Writer<'_, S>, t: &Text) -> Result<(), ReceiptError> {
    w.str_generalized(t.as_bytes())
        .map_err(|e| refused(e, Some(t)))
}

/// The receipt error for what the writer refused.
fn refused(e: JsonError, text: Option<&Text>) -> ReceiptError {
    match e {
        JsonError::NonFinite(f) => ReceiptError::NonFinite {
            value: py_float_json(f),
        },
        JsonError::LoneSurrogate => match text.map(Text::to_utf8) {
            Some(Err(e)) => e,
            // The writer refuses only text holding a surrogate; name the first of the range
            // should that ever change.
            _ => ReceiptError::LoneSurrogate { code: 0xD800 },
        },
    }
}
