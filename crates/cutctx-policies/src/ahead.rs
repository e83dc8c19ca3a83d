//! Digests hashed ahead, on a core that would otherwise wait while a policy decides.
//!
//! A compaction decides on one thread: the analysis of the transcript (its partition, columns
//! and exchanges), then each member of the chain in turn. The masked turns' digests are asked
//! for only once every member has decided, and observation masking masks tool results oldest
//! first. So a second thread hashes tool results from the oldest on while the first decides,
//! and hands what it has over when the first digest is asked for; whatever it did not reach is
//! hashed then, as before. A digest hashed ahead is the digest hashed when asked (the same
//! function computes both), so plans never depend on how far it got. What it hashes for a
//! turn that ends up kept or dropped is work done by a core that had none.
//!
//! [`Ahead`] is the thread and what it hashed; [`WithAhead`] puts it in front of the
//! [`ContentDigests`] a policy asks, which hashes what it did not reach.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::thread::{Scope, ScopedJoinHandle};

use cutctx_model::{CompactionError, Slots};

use crate::ContentDigests;

/// Digests hashed ahead, by position: what [`Ahead::hashed`] hands over.
///
/// Each digest is looked up twice for every masked turn (its length, to share the hashing
/// out, then the digest itself), so a position finds its digest in one step ([`Slots`]).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Hashed {
    slots: Slots,
    digests: Vec<[u8; 32]>,
}

impl Hashed {
    /// The digest hashed ahead for the turn at `position`, if it was.
    #[must_use]
    pub fn get(&self, position: usize) -> Option<[u8; 32]> {
        self.digests.get(self.slots.get(position)?).copied()
    }

    /// How many digests were hashed ahead.
    #[must_use]
    pub fn len(&self) -> usize {
        self.digests.len()
    }

    /// Whether no digest was hashed ahead.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    /// Notes `digest` as the one for `position`, past every position noted so far; a digest
    /// that cannot be noted (see [`Slots::push`]) is left to be hashed when asked.
    fn push(&mut self, position: usize, digest: [u8; 32]) {
        if self.slots.push(position, self.digests.len()) {
            self.digests.push(digest);
        }
    }
}

/// A thread hashing digests ahead of their asking, within a scope, and what it hashed once it
/// is stopped.
///
/// ```
/// use std::sync::atomic::AtomicBool;
/// use cutctx_policies::ahead::Ahead;
/// let stop = AtomicBool::new(false);
/// std::thread::scope(|scope| {
///     // Positions 0, 2, 4, ...; the "digest" of a position is its number in the first byte.
///     let ahead = Ahead::start(scope, &stop, (0..10).map(|p| 2 * p), |p| Some([p as u8; 32]));
///     let hashed = ahead.hashed(); // stops the thread: how far it got varies
///     for p in 0..20 {
///         assert!(hashed.get(p).is_none_or(|d| d == [p as u8; 32] && p % 2 == 0));
///     }
/// });
/// ```
pub struct Ahead<'scope> {
    /// Set when the digests are asked for: the thread stops at its next turn.
    stop: &'scope AtomicBool,
    /// The thread, until it is joined; `None` when none was started.
    thread: Mutex<Option<ScopedJoinHandle<'scope, Hashed>>>,
    /// What the thread hashed, once it is stopped and joined.
    hashed: OnceLock<Hashed>,
}

impl<'scope> Ahead<'scope> {
    /// Nothing hashed ahead: every digest is hashed when asked for.
    #[must_use]
    pub const fn none(stop: &'scope AtomicBool) -> Self {
        Self {
            stop,
            thread: Mutex::new(None),
            hashed: OnceLock::new(),
        }
    }

    /// Starts a thread in `scope` hashing the turns at `positions` (rising) by `hash`, one
    /// after another until `stop` is set; a position `hash` gives no digest for is left to be
    /// hashed when asked (and its error, if any, given then). No thread to be had: nothing is
    /// hashed ahead.
    pub fn start<'env, P, H>(
        scope: &'scope Scope<'scope, 'env>,
        stop: &'scope AtomicBool,
        positions: P,
        hash: H,
    ) -> Self
    where
        P: Iterator<Item = usize> + Send + 'scope,
        H: Fn(usize) -> Option<[u8; 32]> + Send + 'scope,
    {
        let thread = std::thread::Builder::new()
            .spawn_scoped(scope, move || {
                // Room for every digest, reserved, not touched: grown by doubling, the list
                // would be copied onto fresh pages again and again.
                let most = positions.size_hint().1.unwrap_or(0);
                let mut hashed = Hashed {
                    slots: Slots::default(),
                    digests: Vec::with_capacity(most),
                };
                for position in positions {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    if let Some(digest) = hash(position) {
                        hashed.push(position, digest);
                    }
                }
                hashed
            })
            .ok();
        Self {
            stop,
            thread: Mutex::new(thread),
            hashed: OnceLock::new(),
        }
    }

    /// What was hashed ahead: the first call stops the thread and waits for it (one turn's
    /// hashing at most), and every later call reads what it gave.
    pub fn hashed(&self) -> &Hashed {
        self.hashed.get_or_init(|| {
            self.stop.store(true, Ordering::Relaxed);
            let thread = self.thread.lock().ok().and_then(|mut t| t.take());
            // Hashing cannot panic; should the thread be lost anyway, nothing was hashed ahead
            // and every digest is hashed when asked for, as without it.
            thread.and_then(|t| t.join().ok()).unwrap_or_default()
        })
    }

    /// Whether the thread has ended by itself (or none was started): every position hashed,
    /// unless [`Ahead::hashed`] stopped it.
    #[must_use]
    pub fn ran_out(&self) -> bool {
        self.thread.lock().map_or(true, |t| {
            t.as_ref().is_none_or(ScopedJoinHandle::is_finished)
        })
    }
}

/// `digests` with what `ahead` hashed in front: a digest hashed ahead is taken from there,
/// any other hashed by `digests` when asked. What [`crate::CompactionPolicy::decide_with_digests`]
/// is given while a thread hashes ahead.
///
/// ```
/// use std::sync::atomic::AtomicBool;
/// use cutctx_model::CompactionError;
/// use cutctx_policies::ContentDigests;
/// use cutctx_policies::ahead::{Ahead, WithAhead};
/// struct Numbered;
/// impl ContentDigests for Numbered {
///     fn digest(&self, position: usize) -> Result<[u8; 32], CompactionError> {
///         Ok([position as u8; 32])
///     }
///     fn content_len(&self, _: usize) -> usize {
///         1000
///     }
/// }
/// let stop = AtomicBool::new(false);
/// let ahead = Ahead::none(&stop);
/// let digests = WithAhead::new(&Numbered, &ahead);
/// assert_eq!(digests.digest(3)?, [3; 32]);
/// assert_eq!(digests.content_len(3), 1000);
/// # Ok::<(), CompactionError>(())
/// ```
pub struct WithAhead<'a, 'scope, D: ?Sized> {
    digests: &'a D,
    ahead: &'a Ahead<'scope>,
}

impl<'a, 'scope, D: ContentDigests + ?Sized> WithAhead<'a, 'scope, D> {
    /// `digests` behind what `ahead` hashed.
    pub const fn new(digests: &'a D, ahead: &'a Ahead<'scope>) -> Self {
        Self { digests, ahead }
    }
}

/// What writing a stub whose digest was hashed ahead costs, counted as bytes hashed, so that
/// the work left is shared out evenly among threads: about a stub's own length. What
/// [`WithAhead`] gives as the [`ContentDigests::content_len`] of such a turn.
pub const HASHED_AHEAD_BYTES: usize = 128;

impl<D: ContentDigests + ?Sized> ContentDigests for WithAhead<'_, '_, D> {
    fn digest(&self, position: usize) -> Result<[u8; 32], CompactionError> {
        match self.ahead.hashed().get(position) {
            Some(digest) => Ok(digest),
            None => self.digests.digest(position),
        }
    }

    fn content_len(&self, position: usize) -> usize {
        match self.ahead.hashed().get(position) {
            Some(_) => HASHED_AHEAD_BYTES,
            None => self.digests.content_len(position),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::{Ahead, Hashed};

    fn digest_of(position: usize) -> [u8; 32] {
        let mut d = [0u8; 32];
        d[..8].copy_from_slice(&(position as u64).to_le_bytes());
        d
    }

    #[test]
    fn what_is_hashed_ahead_is_found_by_position() {
        let stop = AtomicBool::new(false);
        let positions = [2usize, 5, 8, 30];
        std::thread::scope(|scope| {
            let ahead = Ahead::start(scope, &stop, positions.into_iter(), |p| {
                // A position the hash gives nothing for is left to be hashed when asked.
                (p != 8).then(|| digest_of(p))
            });
            // The thread runs to the end of its positions before it is asked.
            while !ahead.ran_out() {
                std::thread::yield_now();
            }
            let hashed = ahead.hashed();
            assert_eq!(hashed.len(), 3);
            for p in 0..40 {
                let expected = [2, 5, 30].contains(&p).then(|| digest_of(p));
                assert_eq!(hashed.get(p), expected, "position {p}");
            }
            // Asked again, the same.
            assert!(std::ptr::eq(ahead.hashed(), hashed));
        });
    }

    #[test]
    fn asking_stops_the_thread() {
        let stop = AtomicBool::new(false);
        let count = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            let ahead = Ahead::start(scope, &stop, 0.., |p| {
                count.fetch_add(1, Ordering::Relaxed);
                Some(digest_of(p))
            });
            while count.load(Ordering::Relaxed) < 10 {
                std::thread::yield_now();
            }
            let hashed = ahead.hashed();
            // Stopped, and every digest it hashed handed over, in order.
            assert!(stop.load(Ordering::Relaxed));
            assert_eq!(hashed.len(), count.load(Ordering::Relaxed));
            assert!(hashed.len() >= 10);
            assert!((0..hashed.len()).all(|p| hashed.get(p) == Some(digest_of(p))));
        });
        // An unbounded run ended: the scope returned.
    }

    /// A position finds its own digest, a position between or past them none, and a position
    /// that does not rise is not noted (its digest is hashed when asked).
    #[test]
    fn each_position_finds_its_own_digest() {
        let mut hashed = Hashed::default();
        for p in [0usize, 3, 4, 900] {
            hashed.push(p, digest_of(p));
        }
        hashed.push(4, digest_of(7));
        hashed.push(2, digest_of(2));
        assert_eq!(hashed.len(), 4);
        for p in 0..1000 {
            let expected = [0, 3, 4, 900].contains(&p).then(|| digest_of(p));
            assert_eq!(hashed.get(p), expected, "position {p}");
        }
        assert_eq!(hashed.get(usize::MAX), None);
    }

    #[test]
    fn none_hashes_nothing() {
        let stop = AtomicBool::new(false);
        let ahead = Ahead::none(&stop);
        assert_eq!(ahead.hashed(), &Hashed::default());
        assert_eq!(ahead.hashed().get(0), None);
    }
}
