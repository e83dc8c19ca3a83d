//! Real BPE token counts for OpenAI models, with tiktoken-rs (the `bpe` feature).
//!
//! The vocabularies are compiled into tiktoken-rs (`include_str!` of its `assets/`), so
//! counting reads no file and downloads nothing. Each vocabulary is built once per process, on
//! first use, and shared.

use std::sync::OnceLock;

use cutctx_model::details;
use cutctx_policies::{CharRatioEstimator, TokenEstimator};
use tiktoken_rs::CoreBPE;

use crate::{BpeEncoding, FormatError};

/// Counts tokens with an OpenAI BPE vocabulary: the length of tiktoken's ordinary encoding
/// (special-token text such as `<|endoftext|>` is counted as the text it is).
///
/// ```
/// use cutctx_policies::TokenEstimator;
/// use cutctx_formats::{BpeEncoding, BpeEstimator};
/// let e = BpeEstimator::new(BpeEncoding::Cl100kBase)?;
/// assert_eq!(e.estimate_tokens("tiktoken is great!"), 6);
/// # Ok::<(), cutctx_formats::FormatError>(())
/// ```
#[derive(Clone, Copy)]
pub struct BpeEstimator {
    encoding: BpeEncoding,
    bpe: &'static CoreBPE,
}

impl std::fmt::Debug for BpeEstimator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BpeEstimator")
            .field("encoding", &self.encoding)
            .finish_non_exhaustive()
    }
}

static O200K: OnceLock<Option<CoreBPE>> = OnceLock::new();
static CL100K: OnceLock<Option<CoreBPE>> = OnceLock::new();

impl BpeEstimator {
    /// The estimator for `encoding`, building the vocabulary on first use.
    ///
    /// # Errors
    ///
    /// `FORMAT_UNSUPPORTED` if the vocabulary compiled into tiktoken-rs cannot be built (a
    /// broken build, not an input problem).
    pub fn new(encoding: BpeEncoding) -> Result<Self, FormatError> {
        let cell = match encoding {
            BpeEncoding::O200kBase => &O200K,
            BpeEncoding::Cl100kBase => &CL100K,
        };
        let bpe = cell.get_or_init(|| match encoding {
            BpeEncoding::O200kBase => tiktoken_rs::o200k_base().ok(),
            BpeEncoding::Cl100kBase => tiktoken_rs::cl100k_base().ok(),
        });
        match bpe {
            Some(bpe) => Ok(Self { encoding, bpe }),
            None => Err(FormatError::unsupported(
                format!("The {} vocabulary could not be built.", encoding.as_str()),
                details! { "estimator" => encoding.as_str() },
            )),
        }
    }

    /// The vocabulary.
    #[must_use]
    pub const fn encoding(&self) -> BpeEncoding {
        self.encoding
    }
}

impl TokenEstimator for BpeEstimator {
    fn estimate_tokens(&self, text: &str) -> u64 {
        if text.is_empty() {
            return 0;
        }
        // tiktoken-rs unwraps its regex matches; a match can only fail on a backtracking limit.
        // Should it ever, count characters rather than fail the whole compaction.
        let bpe = self.bpe;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            bpe.encode_ordinary(text).len()
        }))
        .map_or_else(
            |_| CharRatioEstimator::default().estimate_tokens(text),
            |n| u64::try_from(n).unwrap_or(u64::MAX),
        )
    }
}
