//! The exchange partition of a transcript: which turns belong together because a tool call
//! links them, made afresh or carried over from a source transcript.

use std::sync::Arc;

use crate::TranscriptTurn;

/// The exchange of each turn, numbered by first appearance, and the number of exchanges.
///
/// The `tool_call_id` key space is separate from turn ids, so a `tool_call_id` equal to some
/// turn's id merges nothing.
pub(crate) fn partition(turns: &[TranscriptTurn]) -> (Vec<usize>, usize) {
    let mut by_call: crate::idmap::IdMap<'_, usize> = crate::idmap::with_capacity(turns.len() / 2);
    let mut count = 0_usize;
    let mut of = Vec::with_capacity(turns.len());
    // Results usually follow their call: remember the last call seen and skip the lookup.
    let mut last: Option<(&Arc<str>, usize)> = None;
    for turn in turns {
        let exchange = match &turn.tool_call_id {
            Some(call) => match last {
                Some((prev, e)) if Arc::ptr_eq(prev, call) || prev == call => e,
                _ => {
                    let e = *by_call.entry(call).or_insert_with(|| {
                        count += 1;
                        count - 1
                    });
                    last = Some((call, e));
                    e
                }
            },
            None => {
                count += 1;
                count - 1
            }
        };
        of.push(exchange);
    }
    (of, count)
}

/// Whether two `tool_call_id`s are the same, by pointer first.
pub(crate) fn same_call(a: &Option<Arc<str>>, b: &Option<Arc<str>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
        _ => false,
    }
}

/// The exchange partition of a derived transcript, built from its source's while the turns
/// are taken in.
///
/// Kept turns with their source's `tool_call_id` stay in their source exchange (which only
/// loses members), renumbered by first appearance; new turns without one are exchanges of
/// their own. Anything else (a new turn with a `tool_call_id`, a kept turn whose
/// `tool_call_id` changed) breaks the derivation, and the caller partitions afresh.
pub(crate) struct DerivedPartition {
    /// Per source exchange, its number in the derived transcript; `usize::MAX` until seen.
    renumber: Vec<usize>,
    of: Vec<usize>,
    count: usize,
    broken: bool,
}

impl DerivedPartition {
    pub(crate) fn new(source_exchanges: usize, turns: usize) -> Self {
        Self {
            renumber: vec![usize::MAX; source_exchanges],
            of: Vec::with_capacity(turns),
            count: 0,
            broken: false,
        }
    }

    /// A kept turn from source exchange `exchange`, its `tool_call_id` unchanged or not.
    pub(crate) fn kept(&mut self, exchange: usize, unchanged: bool) {
        if self.broken || !unchanged {
            self.broken = true;
            return;
        }
        let slot = &mut self.renumber[exchange];
        if *slot == usize::MAX {
            *slot = self.count;
            self.count += 1;
        }
        self.of.push(*slot);
    }

    /// A new turn, with no `tool_call_id` or with one.
    pub(crate) fn new_turn(&mut self, without_call: bool) {
        if self.broken || !without_call {
            self.broken = true;
            return;
        }
        self.of.push(self.count);
        self.count += 1;
    }

    /// The assignment and the number of exchanges, unless the derivation broke.
    pub(crate) fn finish(self) -> Option<(Vec<usize>, usize)> {
        (!self.broken).then_some((self.of, self.count))
    }
}

#[cfg(test)]
mod tests {
    use crate::{DerivedTurn, Role, Transcript, TranscriptTurn};

    fn turn(id: &str, est: u64) -> TranscriptTurn {
        TranscriptTurn::new(id, Role::User, format!("content of {id}"), est).expect("valid turn")
    }

    proptest::proptest! {
        /// A derived transcript's partition, derived from its source's or made afresh when
        /// the derivation breaks, is the one a transcript of the same turns would have.
        #[test]
        fn a_derived_partition_equals_a_fresh_one(
            calls in proptest::collection::vec(proptest::option::of(0_u8..4), 1..14),
            plan in proptest::collection::vec(0_u8..6, 14),
        ) {
            let turns: Vec<TranscriptTurn> = calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let t = turn(&format!("t{i}"), 1);
                    match c {
                        Some(c) => t.with_tool_call_id(format!("c{c}")),
                        None => t,
                    }
                })
                .collect();
            let source = Transcript::new(turns).expect("unique ids");
            let mut parts = Vec::new();
            for (p, (t, action)) in source.turns().iter().zip(&plan).enumerate() {
                match action {
                    // Dropped.
                    0 => {}
                    // Kept with another tool_call_id: the derivation breaks.
                    1 => parts.push(DerivedTurn::Kept(p, t.clone().with_tool_call_id("other"))),
                    // A new turn before this one, with a tool_call_id or without.
                    2 => {
                        parts.push(DerivedTurn::New(turn(&format!("n{p}"), 1)));
                        parts.push(DerivedTurn::Kept(p, t.clone()));
                    }
                    3 => {
                        parts.push(DerivedTurn::New(
                            turn(&format!("n{p}"), 1).with_tool_call_id("c0"),
                        ));
                        parts.push(DerivedTurn::Kept(p, t.clone()));
                    }
                    _ => parts.push(DerivedTurn::Kept(p, t.clone())),
                }
            }
            let derived = source.derive(parts).expect("valid derivation");
            let fresh = Transcript::new(derived.turns().to_vec()).expect("unique ids");
            proptest::prop_assert_eq!(derived.exchange_assignment(), fresh.exchange_assignment());
            proptest::prop_assert_eq!(derived.exchange_count(), fresh.exchange_count());
        }
    }
}
