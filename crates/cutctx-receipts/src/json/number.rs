//! Numbers as Python prints and compares them.

use std::cmp::Ordering;

/// A float as Python's `json.dumps` writes it: `float.__repr__` for finite values (`-0.0`
/// kept), and `NaN`, `Infinity`, `-Infinity` otherwise.
#[must_use]
pub fn py_float_json(f: f64) -> String {
    if f.is_nan() {
        "NaN".to_owned()
    } else if f == f64::INFINITY {
        "Infinity".to_owned()
    } else if f == f64::NEG_INFINITY {
        "-Infinity".to_owned()
    } else {
        py_float_repr(f)
    }
}

/// Python's `repr(float)`, `-0.0` included (cutctx's own canonical form normalises it to
/// `0.0`; arcaeon's does not), and `nan`, `inf`, `-inf` for the non-finite values.
#[must_use]
pub fn py_float_repr(f: f64) -> String {
    match cutctx_json::py_float_repr(f) {
        Ok(text) => text,
        Err(_) if f.is_nan() => "nan".to_owned(),
        Err(_) if f > 0.0 => "inf".to_owned(),
        Err(_) => "-inf".to_owned(),
    }
}

/// Compares two non-negative canonical decimal integers.
pub(crate) fn cmp_decimal(a: &str, b: &str) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}
