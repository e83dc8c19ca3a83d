//! A message's call ids, kept in order with a membership test that costs no allocation per id
//! for the few ids a message usually has.
//!
//! The checks ask, message after message, whether an id was seen before in the same message
//! and whether a result answers a call of the message before. A set of one or two entries costs
//! an allocation per entry and a search through its nodes; a scan of a short list costs
//! neither. A message of many calls would make a scan grow with the square of their number, so
//! past [`SCAN_UP_TO`] ids the list also keeps a set, and answers from it.

use std::borrow::Borrow;
use std::collections::BTreeSet;

/// How many ids are searched by a scan of the list; from one more on, by a set.
const SCAN_UP_TO: usize = 16;

/// Distinct ids in the order they came: a list, with a set beside it once the list is long.
///
/// `T` is the id's owner: `String` for ids kept past the message they were read from, `&str`
/// for ids borrowed from it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ids<T> {
    list: Vec<T>,
    /// The same ids as `list`, once it holds more than [`SCAN_UP_TO`].
    set: Option<BTreeSet<T>>,
}

impl<T: Borrow<str> + Ord + Clone> Ids<T> {
    /// Whether `id` is one of the ids.
    pub(crate) fn contains(&self, id: &str) -> bool {
        match &self.set {
            Some(set) => set.contains(id),
            None => self.list.iter().any(|k| k.borrow() == id),
        }
    }

    /// Adds `id` when it is not one of the ids yet; whether it was added.
    pub(crate) fn insert(&mut self, id: T) -> bool {
        if self.contains(id.borrow()) {
            return false;
        }
        match &mut self.set {
            Some(set) => {
                set.insert(id.clone());
            }
            None if self.list.len() == SCAN_UP_TO => {
                self.set = Some(self.list.iter().cloned().chain([id.clone()]).collect());
            }
            None => {}
        }
        self.list.push(id);
        true
    }

    /// The ids, in the order they came.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.list.iter()
    }

    /// The first id, when there is one.
    pub(crate) fn first(&self) -> Option<&T> {
        self.list.first()
    }

    /// Whether there is no id.
    pub(crate) const fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Held to a `BTreeSet` beside a list, the structure it replaces, over runs of ids with
    /// repeats, short and long enough to go past the scan.
    #[test]
    fn answers_as_a_set_would() {
        for n in [
            0_usize,
            1,
            2,
            SCAN_UP_TO - 1,
            SCAN_UP_TO,
            SCAN_UP_TO + 1,
            100,
        ] {
            let mut ids: Ids<String> = Ids::default();
            let mut set = BTreeSet::new();
            let mut order = Vec::new();
            for k in 0..3 * n {
                // Every third id repeats one seen before.
                let id = if k % 3 == 2 {
                    format!("i{}", k / 3)
                } else {
                    format!("i{k}")
                };
                let fresh = set.insert(id.clone());
                if fresh {
                    order.push(id.clone());
                }
                assert_eq!(ids.insert(id.clone()), fresh, "{n} {k}");
                assert!(ids.contains(&id));
                assert!(!ids.contains(&format!("{id}x")));
            }
            assert_eq!(ids.iter().cloned().collect::<Vec<_>>(), order, "{n}");
            assert_eq!(ids.first(), order.first());
            assert_eq!(ids.is_empty(), order.is_empty());
            assert_eq!(ids.set.is_some(), order.len() > SCAN_UP_TO, "{n}");
        }
    }

    /// Borrowed ids answer as owned ones.
    #[test]
    fn borrowed_ids() {
        let owned: Vec<String> = (0..40).map(|k| format!("t{}", k % 30)).collect();
        let mut ids: Ids<&str> = Ids::default();
        let added = owned.iter().filter(|id| ids.insert(id.as_str())).count();
        assert_eq!(added, 30);
        assert!(ids.contains("t29") && !ids.contains("t30"));
    }
}
