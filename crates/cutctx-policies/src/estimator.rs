//! Token estimation: the trait, and the character-ratio default.

use cutctx_model::{CompactionError, details};

/// Estimates how many tokens a text costs. Used for the stubs the masking policy writes.
pub trait TokenEstimator: Send + Sync {
    /// The estimate for `text`.
    fn estimate_tokens(&self, text: &str) -> u64;

    /// The estimate for any text of `chars` Unicode code points, when the estimate depends on
    /// nothing else. Lets the masking policy decide before computing any digest.
    fn estimate_chars(&self, chars: usize) -> Option<u64> {
        let _ = chars;
        None
    }
}

/// `ceil(code points / chars_per_token)`, and 0 for the empty text: the reference's default.
///
/// Code points, not bytes and not UTF-16 units; the division is IEEE double division, then
/// ceiling, so the estimate is never below the exact ratio.
///
/// ```
/// use cutctx_policies::{CharRatioEstimator, TokenEstimator};
/// let e = CharRatioEstimator::default();
/// assert_eq!(e.estimate_tokens(""), 0);
/// assert_eq!(e.estimate_tokens("abcd"), 1);
/// assert_eq!(e.estimate_tokens("abcde"), 2);
/// let e = CharRatioEstimator::new(1.0)?;
/// assert_eq!(e.estimate_tokens("é€"), 2);
/// # Ok::<(), cutctx_model::CompactionError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CharRatioEstimator {
    chars_per_token: f64,
}

impl CharRatioEstimator {
    /// The reference's default ratio.
    pub const DEFAULT_CHARS_PER_TOKEN: f64 = 4.0;

    /// An estimator with this ratio.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` unless the ratio is finite and positive (details: `chars_per_token`,
    /// as Python's repr).
    pub fn new(chars_per_token: f64) -> Result<Self, CompactionError> {
        if !chars_per_token.is_finite() || chars_per_token <= 0.0 {
            let repr =
                cutctx_model::canonical::py_float_repr(chars_per_token).unwrap_or_else(|| {
                    if chars_per_token.is_nan() {
                        "nan".to_owned()
                    } else if chars_per_token > 0.0 {
                        "inf".to_owned()
                    } else {
                        "-inf".to_owned()
                    }
                });
            return Err(CompactionError::validation(
                format!("chars_per_token must be a finite positive number; got {repr}."),
                details! { "chars_per_token" => repr },
            ));
        }
        Ok(Self { chars_per_token })
    }

    /// The ratio.
    #[must_use]
    pub const fn chars_per_token(&self) -> f64 {
        self.chars_per_token
    }
}

impl Default for CharRatioEstimator {
    fn default() -> Self {
        Self {
            chars_per_token: Self::DEFAULT_CHARS_PER_TOKEN,
        }
    }
}

impl TokenEstimator for CharRatioEstimator {
    fn estimate_tokens(&self, text: &str) -> u64 {
        self.estimate_chars(text.chars().count()).unwrap_or(0)
    }

    // The `as` casts are Python's float division then ceil, reproduced on purpose.
    fn estimate_chars(&self, chars: usize) -> Option<u64> {
        if chars == 0 {
            return Some(0);
        }
        Some((chars as f64 / self.chars_per_token).ceil() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_len_counts_code_points_not_bytes() {
        let e = CharRatioEstimator::default();
        assert_eq!(e.estimate_tokens("a"), 1);
        assert_eq!(e.estimate_tokens(&"a".repeat(8)), 2);
        assert_eq!(e.estimate_tokens("😀😀😀😀"), 1);
        assert_eq!(e.estimate_tokens("😀😀😀😀😀"), 2);
        assert_eq!(
            CharRatioEstimator::new(2.0)
                .expect("valid")
                .estimate_tokens("abcd"),
            2
        );
    }

    #[test]
    fn bad_ratios_are_refused_with_python_repr() {
        for (r, repr) in [
            (0.0, "0.0"),
            (-1.0, "-1.0"),
            (f64::NAN, "nan"),
            (f64::INFINITY, "inf"),
        ] {
            let e = CharRatioEstimator::new(r).expect_err("bad ratio");
            assert_eq!(e.details()["chars_per_token"], repr);
        }
    }
}
