//! A provider format's errors as the operations' ([`from_format`]): its stable code, message
//! and details, with the hint to repair added to a violation a repair fixes; and the other
//! errors of compacting a provider request (a missing option, text that is not JSON).

use cutctx::formats::{FormatError, is_repairable};
use cutctx::model::details;
use serde_json::Value;

use crate::OpsError;

/// As [`from_format`], adding to a violation that `--repair` fixes the hint to use it.
pub(super) fn invalid_with_hint(e: FormatError) -> OpsError {
    let hint = e
        .violation()
        .filter(|v| e.code() == "FORMAT_INVALID_REQUEST" && is_repairable(v))
        .is_some();
    let mut err = from_format(e);
    if hint {
        err.message
            .push_str(" Run with --repair to drop what breaks the rule.");
        err.details.insert("hint".into(), Value::from("--repair"));
    }
    err
}

/// A [`OpsError`] carrying a [`FormatError`]'s code, message and details.
#[must_use]
pub fn from_format(e: FormatError) -> OpsError {
    OpsError {
        code: e.code(),
        message: e.message(),
        details: e.details(),
    }
}

/// A `USAGE_ERROR` naming the missing `option`.
pub(super) fn usage(message: &str, option: &str) -> OpsError {
    OpsError {
        code: crate::USAGE_ERROR,
        message: message.to_owned(),
        details: details! { "option" => option },
    }
}

/// JSON text: an `INPUT_ERROR` when it is not JSON, a `VALIDATION_ERROR` when it has the wrong
/// shape, naming the position and never the text around it.
pub(super) fn parse_json<T: serde::de::DeserializeOwned>(
    text: &str,
    what: &str,
) -> Result<T, OpsError> {
    crate::error::parse_json(what, text)
}
