//! Positions of a transcript mapped to indexes of a list that holds some of them, in one step.
//!
//! A list of things by position (the digests hashed ahead, the contents left in a request's
//! text) is looked up twice for every masked turn; a search of a list of a hundred thousand
//! entries, each step a likely cache miss, cost more than the lookups' use. [`Slots`] holds,
//! for every position up to the last noted, one more than the index noted for it, or 0: four
//! bytes a position.

/// Indexes by position, noted in rising position order.
///
/// ```
/// use cutctx_model::Slots;
/// let mut slots = Slots::default();
/// assert!(slots.push(2, 0) && slots.push(7, 1));
/// assert!(!slots.push(7, 2), "positions rise");
/// assert_eq!((slots.get(2), slots.get(7), slots.get(3), slots.get(99)), (Some(0), Some(1), None, None));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Slots(Vec<u32>);

impl Slots {
    /// Notes `index` for `position`, which must come after every position noted so far;
    /// whether it was noted (not: a position at or before the last noted, or an index past
    /// what four bytes count).
    pub fn push(&mut self, position: usize, index: usize) -> bool {
        let Some(slot) = index.checked_add(1).and_then(|s| u32::try_from(s).ok()) else {
            return false;
        };
        if position < self.0.len() {
            return false;
        }
        self.0.resize(position, 0);
        self.0.push(slot);
        true
    }

    /// The index noted for `position`, if one was.
    #[must_use]
    pub fn get(&self, position: usize) -> Option<usize> {
        let slot = usize::try_from(*self.0.get(position)?).ok()?;
        slot.checked_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::Slots;

    /// Each noted position finds its index; a position between, before or past them none; a
    /// position that does not rise, or an index four bytes cannot count, is not noted.
    #[test]
    fn each_position_finds_its_own_index() {
        let mut slots = Slots::default();
        let noted = [(0usize, 5usize), (3, 0), (4, 9), (900, 1)];
        for (p, k) in noted {
            assert!(slots.push(p, k));
        }
        assert!(!slots.push(4, 3));
        assert!(!slots.push(2, 3));
        assert!(!slots.push(1000, u32::MAX as usize));
        for p in 0..1100 {
            let expected = noted.iter().find(|(q, _)| *q == p).map(|(_, k)| *k);
            assert_eq!(slots.get(p), expected, "position {p}");
        }
        assert_eq!(slots.get(usize::MAX), None);
    }
}
