//! The budget a plan is made against.

use serde::{Deserialize, Serialize};

use crate::{CompactionError, details};

/// How many tokens a view may hold, and how many recent turns are untouchable.
///
/// ```
/// use cutctx_model::CompactionBudget;
/// let b = CompactionBudget::new(1200);
/// assert_eq!(b.protected_recent_turns, 4);
/// let b = CompactionBudget::new(100).with_protected_recent_turns(1);
/// assert_eq!((b.max_tokens, b.protected_recent_turns), (100, 1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct CompactionBudget {
    /// The most tokens the view may be estimated at. Zero is legal.
    pub max_tokens: u64,
    /// How many of the most recent turns no policy may touch. The default is 4.
    pub protected_recent_turns: u64,
}

impl CompactionBudget {
    /// The reference's default protected tail.
    pub const DEFAULT_PROTECTED_RECENT_TURNS: u64 = 4;

    /// A budget with the default protected tail of 4 turns.
    #[must_use]
    pub const fn new(max_tokens: u64) -> Self {
        Self {
            max_tokens,
            protected_recent_turns: Self::DEFAULT_PROTECTED_RECENT_TURNS,
        }
    }

    /// The same budget with another protected tail.
    #[must_use]
    pub const fn with_protected_recent_turns(mut self, n: u64) -> Self {
        self.protected_recent_turns = n;
        self
    }

    /// A budget from signed figures, validated as the reference validates them.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` when either figure is negative (details: the figure by name), or
    /// beyond `u64::MAX`.
    pub fn from_signed(
        max_tokens: i128,
        protected_recent_turns: i128,
    ) -> Result<Self, CompactionError> {
        let max = u64::try_from(max_tokens).map_err(|_| {
            CompactionError::validation(
                if max_tokens < 0 {
                    format!(
                        "max_tokens must not be negative; got {max_tokens}. Zero is the smallest \
                         budget, and already means that only an empty view fits."
                    )
                } else {
                    format!("max_tokens is {max_tokens}, beyond the largest supported {}.", u64::MAX)
                },
                details! { "max_tokens" => max_tokens.to_string().parse::<serde_json::Number>().ok() },
            )
        })?;
        let protected = u64::try_from(protected_recent_turns).map_err(|_| {
            CompactionError::validation(
                if protected_recent_turns < 0 {
                    format!("protected_recent_turns must not be negative; got {protected_recent_turns}.")
                } else {
                    format!(
                        "protected_recent_turns is {protected_recent_turns}, beyond the largest supported {}.",
                        u64::MAX
                    )
                },
                details! { "protected_recent_turns" => protected_recent_turns.to_string().parse::<serde_json::Number>().ok() },
            )
        })?;
        Ok(Self {
            max_tokens: max,
            protected_recent_turns: protected,
        })
    }
}

impl<'de> Deserialize<'de> for CompactionBudget {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Wire {
            max_tokens: crate::wire::WireInt,
            #[serde(default = "default_protected")]
            protected_recent_turns: crate::wire::WireInt,
        }
        fn default_protected() -> crate::wire::WireInt {
            crate::wire::WireInt(i128::from(CompactionBudget::DEFAULT_PROTECTED_RECENT_TURNS))
        }
        let w = crate::wire::ObjectOnly::<Wire>::deserialize(d)?.0;
        Self::from_signed(w.max_tokens.0, w.protected_recent_turns.0)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_from_signed_refuses_negatives_by_name() {
        let e = CompactionBudget::from_signed(-1, 0).expect_err("negative max");
        assert_eq!(e.details()["max_tokens"], -1);
        let e = CompactionBudget::from_signed(0, -2).expect_err("negative protected");
        assert_eq!(e.details()["protected_recent_turns"], -2);
        assert_eq!(
            CompactionBudget::from_signed(0, 0)
                .expect("zero is legal")
                .max_tokens,
            0
        );
    }

    #[test]
    fn budget_wire_defaults_protected_to_four() {
        let b: CompactionBudget = serde_json::from_str(r#"{"max_tokens":7}"#).expect("budget");
        assert_eq!(b, CompactionBudget::new(7));
    }
}
