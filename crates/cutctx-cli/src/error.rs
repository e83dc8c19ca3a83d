//! The CLI's failures: a stable code, an exit status, a message and details.

use cutctx::{CompactionError, Details, ErrorCode};
use serde_json::Value;

/// A failure of one command: a stable code, a message and details.
#[derive(Debug, Clone, PartialEq)]
pub struct CliError {
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

impl CliError {
    /// An [`INPUT_ERROR`].
    pub fn input(message: impl Into<String>, details: Details) -> Self {
        Self {
            code: INPUT_ERROR,
            message: message.into(),
            details,
        }
    }

    /// A `VALIDATION_ERROR`.
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

impl From<CompactionError> for CliError {
    fn from(e: CompactionError) -> Self {
        Self {
            code: e.code().as_str(),
            message: e.message().to_owned(),
            details: e.details().clone(),
        }
    }
}

/// A JSON parse failure on the document at `what`: syntax is an input error, shape is a
/// validation error. The message names the position, never the text around it.
pub(crate) fn from_json(what: &str, e: &serde_json::Error) -> CliError {
    use serde_json::error::Category;
    let details =
        cutctx::model::details! { "document" => what, "line" => e.line(), "column" => e.column() };
    let text = strip_position(&e.to_string());
    match e.classify() {
        Category::Io | Category::Syntax | Category::Eof => {
            CliError::input(format!("{what} is not valid JSON: {text}"), details)
        }
        Category::Data => CliError::validation(format!("{what} is malformed: {text}"), details),
    }
}

/// serde_json appends " at line L column C"; the details carry those already.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}
