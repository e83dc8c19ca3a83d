//! Choosing a token estimator by name: `chars:4` (the default), `o200k_base`, `cl100k_base`.

use std::fmt;
use std::str::FromStr;

use cutctx_model::{CompactionError, details};
use cutctx_policies::{CharRatioEstimator, TokenEstimator};

use crate::FormatError;

/// An OpenAI BPE vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BpeEncoding {
    /// `o200k_base`: GPT-4o, GPT-4.1, GPT-5, o1, o3, o4-mini.
    O200kBase,
    /// `cl100k_base`: GPT-4, GPT-3.5-turbo, text-embedding-3.
    Cl100kBase,
}

impl BpeEncoding {
    /// The vocabulary's name, for example `"o200k_base"`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::O200kBase => "o200k_base",
            Self::Cl100kBase => "cl100k_base",
        }
    }
}

/// Which estimator turns built from provider messages are counted with.
///
/// Parsed from `chars` or `chars:N` (code points per token, default 4, the cutctx default),
/// `o200k_base` or `cl100k_base` (real BPE counts; the `bpe` feature).
///
/// ```
/// use cutctx_formats::{BpeEncoding, EstimatorSpec};
/// assert_eq!("chars:3.5".parse::<EstimatorSpec>()?, EstimatorSpec::Chars(3.5));
/// assert_eq!("chars".parse::<EstimatorSpec>()?, EstimatorSpec::default());
/// assert_eq!("o200k_base".parse::<EstimatorSpec>()?, EstimatorSpec::Bpe(BpeEncoding::O200kBase));
/// assert!("gpt2".parse::<EstimatorSpec>().is_err());
/// # Ok::<(), cutctx_formats::FormatError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum EstimatorSpec {
    /// `ceil(code points / N)`: cutctx's [`CharRatioEstimator`].
    Chars(f64),
    /// Real BPE token counts (the `bpe` feature).
    Bpe(BpeEncoding),
}

impl Default for EstimatorSpec {
    fn default() -> Self {
        Self::Chars(CharRatioEstimator::DEFAULT_CHARS_PER_TOKEN)
    }
}

impl EstimatorSpec {
    /// Whether this is cutctx's default, `chars:4`: policies then keep their own default
    /// estimator, whose plans record `estimator_ratio: 4.0` as the reference's do.
    #[must_use]
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// The estimator.
    ///
    /// # Errors
    ///
    /// `VALIDATION_ERROR` for a ratio that is not finite and positive; `FORMAT_UNSUPPORTED` for
    /// a BPE vocabulary in a build without the `bpe` feature.
    pub fn estimator(&self) -> Result<Box<dyn TokenEstimator>, FormatError> {
        match *self {
            Self::Chars(ratio) => Ok(Box::new(CharRatioEstimator::new(ratio)?)),
            Self::Bpe(encoding) => bpe_estimator(encoding),
        }
    }
}

#[cfg(feature = "bpe")]
fn bpe_estimator(encoding: BpeEncoding) -> Result<Box<dyn TokenEstimator>, FormatError> {
    Ok(Box::new(crate::bpe::BpeEstimator::new(encoding)?))
}

#[cfg(not(feature = "bpe"))]
fn bpe_estimator(encoding: BpeEncoding) -> Result<Box<dyn TokenEstimator>, FormatError> {
    Err(FormatError::unsupported(
        format!(
            "The {} estimator counts with OpenAI's BPE tables, which this build leaves out: build \
             with the `bpe` feature (the command line: `cargo install --path crates/cutctx-cli \
             --features bpe`), or use `chars:4`, the default, which needs none.",
            encoding.as_str()
        ),
        details! { "estimator" => encoding.as_str(), "feature" => "bpe" },
    ))
}

impl FromStr for EstimatorSpec {
    type Err = FormatError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "o200k_base" => return Ok(Self::Bpe(BpeEncoding::O200kBase)),
            "cl100k_base" => return Ok(Self::Bpe(BpeEncoding::Cl100kBase)),
            "chars" => return Ok(Self::default()),
            _ => {}
        }
        let bad = || {
            FormatError::from(CompactionError::validation(
                format!(
                    "Unknown estimator {s:?}; expected chars, chars:N (code points per token), \
                     o200k_base or cl100k_base."
                ),
                details! { "estimator" => s },
            ))
        };
        let ratio: f64 = s
            .strip_prefix("chars:")
            .ok_or_else(bad)?
            .parse()
            .map_err(|_| bad())?;
        // Checked now, so that a bad ratio fails before any work.
        CharRatioEstimator::new(ratio)?;
        Ok(Self::Chars(ratio))
    }
}

impl fmt::Display for EstimatorSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Chars(r) => write!(f, "chars:{r}"),
            Self::Bpe(e) => f.write_str(e.as_str()),
        }
    }
}

#[cfg(all(test, not(feature = "bpe")))]
mod tests {
    use super::*;

    #[test]
    fn a_bpe_estimator_in_a_build_without_it_says_how_to_get_one() {
        let spec: EstimatorSpec = "o200k_base".parse().expect("a known name");
        let Err(e) = spec.estimator() else {
            panic!("no BPE tables in this build")
        };
        assert_eq!(e.code(), "FORMAT_UNSUPPORTED");
        let message = e.message();
        assert!(message.contains("--features bpe"), "{message}");
        assert!(message.contains("chars:4"), "{message}");
    }
}
