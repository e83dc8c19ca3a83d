//! How many threads the pure crates may start for work that splits: the digests of masked
//! results, the hash of a large plan.

use std::num::NonZeroUsize;

/// How many threads compaction may start for work that splits, such as hashing masked results
/// or hashing a large plan while its view is built.
///
/// Results never depend on it: only how the work is shared out. Callers that run many
/// compactions at once (a server, a batch over many requests) bound it, or set
/// [`Parallelism::Sequential`], so that compactions do not compete for cores.
///
/// ```
/// use std::num::NonZeroUsize;
/// use cutctx_model::Parallelism;
/// assert_eq!(Parallelism::Sequential.threads(), 1);
/// assert_eq!(Parallelism::AtMost(NonZeroUsize::MIN).threads(), 1);
/// assert!(Parallelism::default().threads() >= 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Parallelism {
    /// As many threads as the machine has cores, up to eight, when the work is large enough
    /// to pay for them (at least a mebibyte to hash).
    #[default]
    Automatic,
    /// At most this many threads, when the work is large enough to pay for them.
    AtMost(NonZeroUsize),
    /// No thread is started: all work runs on the caller's.
    Sequential,
}

impl Parallelism {
    /// The most threads the work may use (one: the caller's own).
    #[must_use]
    pub fn threads(self) -> usize {
        match self {
            Self::Automatic => std::thread::available_parallelism()
                .map_or(1, NonZeroUsize::get)
                .min(8),
            Self::AtMost(n) => n.get(),
            Self::Sequential => 1,
        }
    }
}
