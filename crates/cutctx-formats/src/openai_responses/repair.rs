//! The Responses repair ([`crate::repair()`]): one walk over the items, with the validator's state (calls pending and answered
//! since the last prompt), the dropped items unlinked so that a reasoning item always sees
//! the item now after it.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::Repair;
use crate::openai_responses::{Kind, kind};
use crate::repair::{RepairKind, record};

/// The items still in the list, as a doubly linked list over input positions (`None` at
/// either end).
struct Links {
    prev: Vec<Option<usize>>,
    next: Vec<Option<usize>>,
    alive: Vec<bool>,
}

impl Links {
    fn new(n: usize) -> Self {
        Self {
            prev: (0..n).map(|i| i.checked_sub(1)).collect(),
            next: (0..n).map(|i| Some(i + 1).filter(|j| *j < n)).collect(),
            alive: vec![true; n],
        }
    }

    fn unlink(&mut self, i: usize) {
        let (p, n) = (self.prev[i], self.next[i]);
        if let Some(p) = p {
            self.next[p] = n;
        }
        if let Some(n) = n {
            self.prev[n] = p;
        }
        self.alive[i] = false;
    }
}

pub(crate) fn repair(items: Vec<Value>, repairs: &mut Vec<Repair>) -> Vec<Value> {
    let Ok(kinds) = items
        .iter()
        .enumerate()
        .map(|(i, item)| kind(i, item))
        .collect::<Result<Vec<_>, _>>()
    else {
        // A shape error: the validator names it.
        return items;
    };
    let mut links = Links::new(items.len());
    let mut null_status = vec![false; items.len()];
    {
        let mut drop = |i: usize, what: RepairKind, id: Option<&str>| {
            drop_item(&kinds, &mut links, repairs, i, what, id);
        };
        let mut pending: BTreeMap<&str, (&str, usize)> = BTreeMap::new();
        let mut answered: BTreeSet<&str> = BTreeSet::new();
        for (i, k) in kinds.iter().enumerate() {
            if !matches!(k, Kind::Output(..)) && items[i].get("status").is_some_and(Value::is_null)
            {
                // Only the field goes; `drop_item` records it and unlinks nothing.
                null_status[i] = true;
                drop(i, RepairKind::DroppedNullStatus, None);
            }
            match *k {
                Kind::Prompt(_) => {
                    unanswered(&pending, &mut drop);
                    pending.clear();
                    answered.clear();
                }
                Kind::Call(ty, id) => {
                    if pending.contains_key(id) || answered.contains(id) {
                        drop(i, RepairKind::DroppedDuplicateCall, Some(id));
                    } else {
                        pending.insert(id, (ty, i));
                    }
                }
                Kind::Output(ty, id) => match pending.get(id) {
                    Some((call_ty, _)) if *call_ty == ty => {
                        pending.remove(id);
                        answered.insert(id);
                    }
                    _ => drop(i, RepairKind::DroppedResult, Some(id)),
                },
                Kind::Reasoning => {
                    // Nothing after `i` is dropped yet: the next item is the input's.
                    if !kinds.get(i + 1).is_some_and(Kind::is_model_item) {
                        drop(i, RepairKind::DroppedReasoning, None);
                    }
                }
                Kind::Answer | Kind::Other => {}
            }
        }
        unanswered(&pending, &mut drop);
    }
    let alive = links.alive;
    items
        .into_iter()
        .zip(alive.into_iter().zip(null_status))
        .filter(|(_, (alive, _))| *alive)
        .map(|(mut item, (_, null))| {
            if null && let Value::Object(map) = &mut item {
                map.remove("status");
            }
            item
        })
        .collect()
}

/// The calls still pending at a prompt or at the end go, earliest first.
fn unanswered(
    pending: &BTreeMap<&str, (&str, usize)>,
    drop: &mut impl FnMut(usize, RepairKind, Option<&str>),
) {
    let mut calls: Vec<(usize, &str)> = pending.iter().map(|(id, (_, i))| (*i, *id)).collect();
    calls.sort_unstable();
    for (i, id) in calls {
        drop(i, RepairKind::DroppedCall, Some(id));
    }
}

/// Drops item `i` (or, for a null status, only records it) and then each reasoning item
/// the drop leaves without a model item after it, nearest first.
fn drop_item(
    kinds: &[Kind<'_>],
    links: &mut Links,
    repairs: &mut Vec<Repair>,
    i: usize,
    what: RepairKind,
    id: Option<&str>,
) {
    record(repairs, what, i, id);
    if what == RepairKind::DroppedNullStatus {
        return;
    }
    links.unlink(i);
    let follows = links.next[i].is_some_and(|n| kinds[n].is_model_item());
    let mut before = links.prev[i];
    while let Some(p) = before
        && kinds[p] == Kind::Reasoning
        && !follows
    {
        record(repairs, RepairKind::DroppedReasoning, p, None);
        links.unlink(p);
        before = links.prev[p];
    }
}
