//! The one error type of the pure layers, with the reference's stable codes and `details`.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

/// Structured facts about an error: ids and figures, never turn content.
///
/// A `BTreeMap`, so the keys serialize in a fixed order.
pub type Details = BTreeMap<String, Value>;

/// The stable, machine-readable code of a [`CompactionError`].
///
/// The string forms are part of the public contract: callers match on them across languages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// Malformed input or a broken invariant: `VALIDATION_ERROR`.
    Validation,
    /// The untouchable turns alone exceed the budget: `COMPACTION_BUDGET_UNSATISFIABLE`.
    BudgetUnsatisfiable,
    /// A summarization request has no supplied summary: `COMPACTION_SUMMARY_MISSING`.
    SummaryMissing,
    /// A plan does not name a transcript's turns exactly, in order: `COMPACTION_PLAN_MISMATCH`.
    PlanMismatch,
}

impl ErrorCode {
    /// The code as the reference spells it, for example `"VALIDATION_ERROR"`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Validation => "VALIDATION_ERROR",
            Self::BudgetUnsatisfiable => "COMPACTION_BUDGET_UNSATISFIABLE",
            Self::SummaryMissing => "COMPACTION_SUMMARY_MISSING",
            Self::PlanMismatch => "COMPACTION_PLAN_MISMATCH",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything that can go wrong while building, validating or applying a plan.
///
/// Each variant carries a one-line human message and [`Details`] naming the ids and figures
/// involved, as the reference does. Match on [`CompactionError::code`] for a stable identity.
///
/// ```
/// use cutctx_model::{CompactionBudget, ErrorCode};
/// let err = CompactionBudget::from_signed(-1, 0).unwrap_err();
/// assert_eq!(err.code(), ErrorCode::Validation);
/// assert_eq!(err.details()["max_tokens"], -1);
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CompactionError {
    /// Malformed input or a broken invariant.
    #[error("{message}")]
    Validation {
        /// What is wrong, in one line.
        message: String,
        /// The ids and figures involved.
        details: Details,
    },
    /// The untouchable turns alone exceed `max_tokens`; no plan can exist.
    #[error("{message}")]
    BudgetUnsatisfiable {
        /// What is wrong, with both figures.
        message: String,
        /// `untouchable_tokens`, `max_tokens`, `untouchable_turn_count`, `protected_recent_turns`.
        details: Details,
    },
    /// A plan asks for a summary the caller did not supply.
    #[error("{message}")]
    SummaryMissing {
        /// Which group lacks its summary.
        message: String,
        /// `group_id`, `turn_ids`, `target_tokens`, `prompt_id`.
        details: Details,
    },
    /// A plan was built for another transcript.
    #[error("{message}")]
    PlanMismatch {
        /// How the plan and the transcript differ.
        message: String,
        /// `unknown_turn_ids`, `unplanned_turn_ids`, `reordered`.
        details: Details,
    },
}

impl CompactionError {
    /// A [`CompactionError::Validation`] from a message and details.
    pub fn validation(message: impl Into<String>, details: Details) -> Self {
        Self::Validation {
            message: message.into(),
            details,
        }
    }

    /// The stable code of this error.
    #[must_use]
    pub const fn code(&self) -> ErrorCode {
        match self {
            Self::Validation { .. } => ErrorCode::Validation,
            Self::BudgetUnsatisfiable { .. } => ErrorCode::BudgetUnsatisfiable,
            Self::SummaryMissing { .. } => ErrorCode::SummaryMissing,
            Self::PlanMismatch { .. } => ErrorCode::PlanMismatch,
        }
    }

    /// The human message (also the `Display` form).
    #[must_use]
    pub fn message(&self) -> &str {
        match self {
            Self::Validation { message, .. }
            | Self::BudgetUnsatisfiable { message, .. }
            | Self::SummaryMissing { message, .. }
            | Self::PlanMismatch { message, .. } => message,
        }
    }

    /// The structured details.
    #[must_use]
    pub fn details(&self) -> &Details {
        match self {
            Self::Validation { details, .. }
            | Self::BudgetUnsatisfiable { details, .. }
            | Self::SummaryMissing { details, .. }
            | Self::PlanMismatch { details, .. } => details,
        }
    }
}

/// Builds [`Details`] from `key => value` pairs.
///
/// ```
/// let d = cutctx_model::details! { "turn_id" => "a1", "token_estimate" => 3 };
/// assert_eq!(d.len(), 2);
/// ```
#[macro_export]
macro_rules! details {
    () => { $crate::Details::new() };
    ($($key:expr => $value:expr),+ $(,)?) => {{
        let mut d = $crate::Details::new();
        $( d.insert(::std::string::String::from($key), ::serde_json::json!($value)); )+
        d
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_the_reference_strings() {
        assert_eq!(ErrorCode::Validation.as_str(), "VALIDATION_ERROR");
        assert_eq!(
            ErrorCode::BudgetUnsatisfiable.as_str(),
            "COMPACTION_BUDGET_UNSATISFIABLE"
        );
        assert_eq!(
            ErrorCode::SummaryMissing.as_str(),
            "COMPACTION_SUMMARY_MISSING"
        );
        assert_eq!(ErrorCode::PlanMismatch.as_str(), "COMPACTION_PLAN_MISMATCH");
    }

    #[test]
    fn display_is_the_message() {
        let e = CompactionError::validation("bad thing", details! { "x" => 1 });
        assert_eq!(e.to_string(), "bad thing");
        assert_eq!(e.message(), "bad thing");
        assert_eq!(e.details()["x"], 1);
        assert_eq!(e.code(), ErrorCode::Validation);
    }
}
