//! The operations' one error type: a stable code, an exit status, a message and details, as
//! every front end reports them (the binary's exit status and standard error, Python's
//! exceptions).

use cutctx::{CompactionError, Details, ErrorCode};
use serde_json::Value;

/// A failure of one command: a stable code, a message and details.
#[derive(Debug, Clone, PartialEq)]
pub struct OpsError {
    /// The stable code, for example `INPUT_ERROR` or `VALIDATION_ERROR`.
    pub code: &'static str,
    /// One line for people.
    pub message: String,
    /// Ids and figures, never turn content.
    pub details: Details,
}

/// A file that cannot be read, or text that is not UTF-8 or not JSON.
pub const INPUT_ERROR: &str = "INPUT_ERROR";
/// The command line itself is wrong.
pub const USAGE_ERROR: &str = "USAGE_ERROR";
/// An output could not be written: standard output, or a file such as `--report`.
pub const OUTPUT_ERROR: &str = "OUTPUT_ERROR";
/// A defect of cutctx itself (an internal check failed), never of the input: reported, for
/// the one line of a batch it touched, instead of stopping the run.
pub const INTERNAL_ERROR: &str = "INTERNAL_ERROR";

impl OpsError {
    /// An [`INPUT_ERROR`].
    pub fn input(message: impl Into<String>, details: Details) -> Self {
        Self {
            code: INPUT_ERROR,
            message: message.into(),
            details,
        }
    }

    /// An [`INTERNAL_ERROR`]: a check of cutctx's own failed, a defect of cutctx, not of the
    /// input; `message` says which.
    #[must_use]
    pub fn internal(message: impl Into<String>, details: Details) -> Self {
        Self {
            code: INTERNAL_ERROR,
            message: message.into(),
            details,
        }
    }

    /// A `VALIDATION_ERROR`.
    #[must_use]
    pub fn validation(message: impl Into<String>, details: Details) -> Self {
        Self {
            code: ErrorCode::Validation.as_str(),
            message: message.into(),
            details,
        }
    }

    /// The process exit status for this error's code.
    #[must_use]
    pub fn exit_status(&self) -> u8 {
        match self.code {
            "COMPACTION_BUDGET_UNSATISFIABLE" => 3,
            "COMPACTION_SUMMARY_MISSING" => 4,
            "COMPACTION_PLAN_MISMATCH" => 5,
            // The ledger was read and found wanting: a verdict, not unreadable input.
            "LEDGER_UNVERIFIED" => 1,
            // Its own status: the command worked, and only its result was lost, which a caller
            // may retry with another destination.
            OUTPUT_ERROR => 6,
            // Not the caller's doing: distinct from every status a bad input can cause.
            INTERNAL_ERROR => 70,
            _ => 2,
        }
    }

    /// The one-line JSON form: `{"code", "details", "message"}`, canonical.
    #[must_use]
    pub fn to_json_line(&self) -> String {
        let v = serde_json::json!({
            "code": self.code,
            "message": self.message,
            "details": Value::Object(self.details.clone().into_iter().collect()),
        });
        cutctx::model::canonical::canonical_json_value(&v)
    }
}

impl std::fmt::Display for OpsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// Carried inside an `std::io::Error` by a writer that fails on its input rather than on its
/// output (see `output::deliver_with`).
impl std::error::Error for OpsError {}

impl From<CompactionError> for OpsError {
    fn from(e: CompactionError) -> Self {
        Self {
            code: e.code().as_str(),
            message: e.message().to_owned(),
            details: e.details().clone(),
        }
    }
}

/// Parses `text` as a `T`, telling text that is not JSON (an input error) from JSON of the
/// wrong shape (a validation error) even when a shape error comes first in the text. `what`
/// names the document in the message ("the request").
///
/// # Errors
///
/// `INPUT_ERROR` for text that is not JSON; `VALIDATION_ERROR` for JSON of another shape.
///
/// ```
/// let e = cutctx_ops::parse_json::<serde_json::Value>("the request", "{").expect_err("torn");
/// assert_eq!(e.code, "INPUT_ERROR");
/// ```
pub fn parse_json<'a, T: serde::Deserialize<'a>>(what: &str, text: &'a str) -> Result<T, OpsError> {
    serde_json::from_str(text).map_err(|e| {
        // Nesting deeper than the parser allows is reported as such: it is the limit that
        // refused the text, whatever lies deeper.
        if e.to_string().starts_with("recursion limit exceeded") {
            return from_json(what, &e);
        }
        // A shape error stops the parser before it sees the rest: check the syntax of the
        // whole text once, so a torn document is still called one.
        match serde_json::from_str::<serde::de::IgnoredAny>(text) {
            Err(syntax) if is_syntax(&syntax) => from_json(what, &syntax),
            _ => from_json(what, &e),
        }
    })
}

/// Whether a serde_json error means the text is not JSON. A number too large for a float is
/// valid JSON that no field here accepts: a shape error.
fn is_syntax(e: &serde_json::Error) -> bool {
    use serde_json::error::Category;
    matches!(
        e.classify(),
        Category::Io | Category::Syntax | Category::Eof
    ) && !e.to_string().starts_with("number out of range")
}

/// A JSON parse failure on the document at `what`: syntax is an input error, shape is a
/// validation error. The message names the position, and never repeats a string value of the
/// document, which could be turn content.
pub(crate) fn from_json(what: &str, e: &serde_json::Error) -> OpsError {
    let details =
        cutctx::model::details! { "document" => what, "line" => e.line(), "column" => e.column() };
    let text = redact(&strip_position(&e.to_string()));
    if is_syntax(e) {
        OpsError::input(format!("{what} is not valid JSON: {text}"), details)
    } else {
        OpsError::validation(format!("{what} is malformed: {text}"), details)
    }
}

/// serde's messages quote the offending value (`invalid type: string "…", expected …`); keep
/// the kind of value and drop the text.
fn redact(message: &str) -> String {
    for kind in ["invalid type: string \"", "invalid value: string \""] {
        if let Some(start) = message.find(kind) {
            let head = &message[..start + kind.len() - 2];
            // The value ends at the last `", expected`; a value may itself hold that text.
            let tail = message
                .rfind("\", expected")
                .map_or("", |end| &message[end + 1..]);
            return format!("{head}{tail}");
        }
    }
    message.to_owned()
}

/// serde_json appends " at line L column C"; the details carry those already.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn string_values_never_reach_the_message() {
        assert_eq!(
            redact("invalid type: string \"SECRET, expected x\", expected a sequence"),
            "invalid type: string, expected a sequence"
        );
        assert_eq!(
            redact("unknown field `x`, expected `y`"),
            "unknown field `x`, expected `y`"
        );
    }
}
