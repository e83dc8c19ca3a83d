//! Messages checked and mapped as the scan of the list reads them, each reading used as it is
//! made rather than held for a second pass over the list.
//!
//! The scan hands the readings over in order, most of them made on another core ([`crate::read_ahead`]);
//! while every message so far was read by hand and passed its format's check, the next is
//! checked and turned into its turn at once, and the reading goes back to whoever made it. From
//! the first message that was not (a reader declined it, or the check did), the readings are
//! kept, for the pass that can fall back to a message's value ([`crate::map_messages`]), which
//! carries on with the same check and turns from there.

use cutctx_policies::TokenEstimator;

use crate::FormatError;
use crate::provider_format::ProviderFormat;

/// A format's check and turns, taking the readings of its hand-written reader (`P`) in order.
pub(crate) trait MapsAsRead<P> {
    /// Message `i`'s reading, checked and mapped after those before it: `None` when the check
    /// declines it (its state is then as it was), else whether its turn was built.
    fn plain(
        &mut self,
        i: usize,
        reading: &P,
        estimator: &dyn TokenEstimator,
    ) -> Option<Result<(), FormatError>>;
}

/// A format's check and turn builder, side by side: what a [`Mapper`] drives.
pub(crate) struct Mapping<F: ProviderFormat> {
    pub(crate) check: F::Check,
    pub(crate) build: F::Build,
}

/// Each reading checked by the format's rules, and mapped when they take it: the one step of
/// every format ([`ProviderFormat::check_plain`], [`ProviderFormat::build_plain`]).
impl<'a, F: ProviderFormat> MapsAsRead<F::Plain<'a>> for Mapping<F> {
    fn plain(
        &mut self,
        i: usize,
        reading: &F::Plain<'a>,
        estimator: &dyn TokenEstimator,
    ) -> Option<Result<(), FormatError>> {
        F::check_plain(&mut self.check, i, reading)?;
        Some(F::build_plain(&mut self.build, i, reading, estimator))
    }
}

/// The messages of a list mapped as the scan reads them (see the module's documentation).
pub(crate) struct Mapper<S, P> {
    state: S,
    /// How many messages were taken.
    taken: usize,
    /// The readings from the first message not mapped as read on, with its index.
    rest: Option<(usize, Vec<Option<P>>)>,
    /// Whether building a turn failed: nothing taken is then of use.
    failed: bool,
}

/// What a [`Mapper`] leaves to the pass over the list: the check and turns so far, the index
/// of the first message not mapped, and the readings from it on.
pub(crate) type Mapped<S, P> = (S, usize, Vec<Option<P>>);

impl<S: MapsAsRead<P>, P> Mapper<S, P> {
    /// A mapper starting from `state`, before the list's first message.
    pub(crate) const fn new(state: S) -> Self {
        Self {
            state,
            taken: 0,
            rest: None,
            failed: false,
        }
    }

    /// The next message's reading (`None`: declined by the reader); the reading back when it
    /// was mapped and is of no further use.
    pub(crate) fn take(&mut self, reading: Option<P>, estimator: &dyn TokenEstimator) -> Option<P> {
        let i = self.taken;
        self.taken += 1;
        if let Some((_, rest)) = &mut self.rest {
            rest.push(reading);
            return None;
        }
        let Some(m) = reading else {
            self.rest = Some((i, vec![None]));
            return None;
        };
        match self.state.plain(i, &m, estimator) {
            Some(built) => {
                self.failed |= built.is_err();
                Some(m)
            }
            None => {
                self.rest = Some((i, vec![Some(m)]));
                None
            }
        }
    }

    /// How many messages were taken.
    pub(crate) const fn taken(&self) -> usize {
        self.taken
    }

    /// What is left to map; `None` when a turn could not be built.
    pub(crate) fn finish(self) -> Option<Mapped<S, P>> {
        if self.failed {
            return None;
        }
        let (from, rest) = self.rest.unwrap_or((self.taken, Vec::new()));
        Some((self.state, from, rest))
    }
}

#[cfg(test)]
mod tests {
    use cutctx_policies::CharRatioEstimator;

    use super::*;

    /// Takes even numbers, declines odd ones, and fails on 13.
    #[derive(Debug, Default, PartialEq)]
    struct Evens(Vec<usize>);

    impl MapsAsRead<usize> for Evens {
        fn plain(
            &mut self,
            _: usize,
            n: &usize,
            _: &dyn TokenEstimator,
        ) -> Option<Result<(), FormatError>> {
            if *n == 13 {
                return Some(Err(crate::not_the_text(crate::Format::OpenAiChat)));
            }
            n.is_multiple_of(2).then(|| self.0.push(*n)).map(Ok)
        }
    }

    #[test]
    fn readings_are_mapped_until_one_is_declined_and_kept_from_there() {
        let e = CharRatioEstimator::default();
        let mut m = Mapper::new(Evens::default());
        assert_eq!(m.take(Some(2), &e), Some(2), "mapped: given back");
        assert_eq!(m.take(Some(4), &e), Some(4));
        assert_eq!(m.take(Some(5), &e), None, "declined: kept");
        assert_eq!(m.take(Some(6), &e), None, "after a declined one: kept");
        assert_eq!(m.take(None, &e), None);
        assert_eq!(m.taken(), 5);
        let (state, from, rest) = m.finish().expect("nothing failed");
        assert_eq!(
            (state, from, rest),
            (Evens(vec![2, 4]), 2, vec![Some(5), Some(6), None])
        );

        let mut m = Mapper::new(Evens::default());
        assert_eq!(m.take(None, &e), None, "declined by the reader");
        assert_eq!(m.take(Some(2), &e), None);
        let (state, from, rest) = m.finish().expect("nothing failed");
        assert_eq!((state, from, rest), (Evens(vec![]), 0, vec![None, Some(2)]));

        let mut m = Mapper::new(Evens::default());
        m.take(Some(2), &e);
        assert_eq!(
            m.finish().map(|(_, from, _)| from),
            Some(1),
            "every one mapped"
        );
    }

    #[test]
    fn a_turn_that_fails_to_build_leaves_nothing() {
        let e = CharRatioEstimator::default();
        let mut m = Mapper::new(Evens::default());
        m.take(Some(2), &e);
        m.take(Some(13), &e);
        m.take(Some(4), &e);
        assert!(m.finish().is_none());
    }
}
