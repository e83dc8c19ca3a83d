//! What the writers refuse, as Python's `json.dumps` refuses it.

use std::fmt;

/// A value the chosen [`crate::Style`] or [`crate::Sink`] cannot write.
///
/// ```
/// use cutctx_json::{JsonError, Style, Writer};
/// let mut out = String::new();
/// let err = Writer::new(&mut out, Style::C14N).f64(f64::NAN);
/// assert!(matches!(err, Err(JsonError::NonFinite(_))));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum JsonError {
    /// NaN or an infinity, where the style refuses them (`allow_nan=False`).
    NonFinite(f64),
    /// A lone surrogate, which a sink of strict UTF-8 cannot hold.
    LoneSurrogate,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NonFinite(v) => write!(f, "out of range float value {v} is not JSON compliant"),
            Self::LoneSurrogate => f.write_str("a lone surrogate is not valid UTF-8"),
        }
    }
}

impl std::error::Error for JsonError {}
