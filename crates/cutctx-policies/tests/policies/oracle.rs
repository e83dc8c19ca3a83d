//! Naive re-implementations of the three shipped policies, straight from the pseudo-code of
//! BEHAVIOUR.md §6.1 and §7.1 to §7.3, for the property tests to compare plans against.
//!
//! They favour obviousness over speed: ids are looked up by scanning, sets are vectors.

use cutctx_model::{CompactionBudget, Role, Transcript};

use crate::{digest, group_id};

/// One planned action, as the oracle sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Planned {
    Keep,
    Drop,
    /// The stub's content and estimate.
    Mask(String, u64),
    /// The group id.
    Summarize(String),
}

/// What the summarizing oracle decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Summary {
    pub(crate) actions: Vec<Planned>,
    /// `(group_id, turn_ids, target_tokens)`, when a span was chosen.
    pub(crate) request: Option<(String, Vec<String>, u64)>,
    /// Whether the chosen span leaves part of some exchange outside it.
    pub(crate) splits_an_exchange: bool,
}

/// The exchange key of a turn: its `tool_call_id`, or the turn itself. Kept apart by variant.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    Call(String),
    Turn(usize),
}

/// `exchanges(T)`: positions grouped by key, each in transcript order, ordered by first member.
pub(crate) fn exchanges(t: &Transcript) -> Vec<Vec<usize>> {
    let mut keys: Vec<Key> = Vec::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (i, turn) in t.turns().iter().enumerate() {
        let key = turn
            .tool_call_id()
            .map_or(Key::Turn(i), |c| Key::Call(c.to_owned()));
        match keys.iter().position(|k| *k == key) {
            Some(g) => groups[g].push(i),
            None => {
                keys.push(key);
                groups.push(vec![i]);
            }
        }
    }
    groups
}

/// `untouchable_turn_ids(T, B)`, by position.
pub(crate) fn untouchable(t: &Transcript, b: &CompactionBudget) -> Vec<bool> {
    let n = t.len();
    let protected = usize::try_from(b.protected_recent_turns).unwrap_or(usize::MAX);
    let from = n.saturating_sub(protected);
    t.turns()
        .iter()
        .enumerate()
        .map(|(i, turn)| turn.role() == Role::System || turn.pinned() || i >= from)
        .collect()
}

/// `removable_turn_ids(T, B)`, by position.
pub(crate) fn removable(t: &Transcript, b: &CompactionBudget) -> Vec<bool> {
    let locked = untouchable(t, b);
    let mut out = vec![false; t.len()];
    for exchange in exchanges(t) {
        if exchange.iter().all(|&p| !locked[p]) {
            for p in exchange {
                out[p] = true;
            }
        }
    }
    out
}

/// `DropOldestPolicy` (§7.1).
pub(crate) fn drop_oldest(t: &Transcript, b: &CompactionBudget) -> Vec<Planned> {
    let free = removable(t, b);
    let mut running = t.token_estimate();
    let mut out = vec![Planned::Keep; t.len()];
    for exchange in exchanges(t) {
        if running <= b.max_tokens {
            break;
        }
        if !free[exchange[0]] {
            continue;
        }
        for p in exchange {
            out[p] = Planned::Drop;
            running -= t.turns()[p].token_estimate();
        }
    }
    out
}

/// `ObservationMaskingPolicy` (§7.2), with `estimate` standing for the estimator.
pub(crate) fn masking(
    t: &Transcript,
    b: &CompactionBudget,
    keep: usize,
    placeholder: &str,
    estimate: &dyn Fn(&str) -> u64,
) -> Vec<Planned> {
    let locked = untouchable(t, b);
    let results: Vec<usize> = (0..t.len())
        .filter(|&p| t.turns()[p].role() == Role::Tool)
        .collect();
    let kept_recent: Vec<usize> = if keep > 0 {
        results[results.len().saturating_sub(keep)..].to_vec()
    } else {
        vec![]
    };
    let mut running = t.token_estimate();
    let mut out = vec![Planned::Keep; t.len()];
    for p in results {
        if running <= b.max_tokens {
            break;
        }
        if locked[p] || kept_recent.contains(&p) {
            continue;
        }
        let turn = &t.turns()[p];
        let content = format!(
            "{placeholder} (original: {} tokens, sha256:{})",
            turn.token_estimate(),
            digest(turn.content())
        );
        let stub = estimate(&content);
        if stub >= turn.token_estimate() {
            continue;
        }
        running -= turn.token_estimate() - stub;
        out[p] = Planned::Mask(content, stub);
    }
    out
}

/// `_spans(T, B)`: runs of removable turns, trimmed to whole exchanges, split again.
fn spans(t: &Transcript, b: &CompactionBudget) -> Vec<Vec<usize>> {
    let free = removable(t, b);
    let all = exchanges(t);
    let exchange_of = |p: usize| {
        all.iter()
            .find(|e| e.contains(&p))
            .expect("every turn is in an exchange")
    };
    let mut runs: Vec<Vec<usize>> = Vec::new();
    for (p, _) in free.iter().enumerate().filter(|(_, free)| **free) {
        match runs.last_mut() {
            Some(run) if p > 0 && run.last() == Some(&(p - 1)) => run.push(p),
            _ => runs.push(vec![p]),
        }
    }
    let mut out = Vec::new();
    for run in runs {
        let inside: Vec<usize> = run
            .iter()
            .copied()
            .filter(|&p| exchange_of(p).iter().all(|m| run.contains(m)))
            .collect();
        let mut current: Vec<usize> = Vec::new();
        for p in inside {
            if current.last().is_some_and(|&l| l + 1 != p) {
                out.push(std::mem::take(&mut current));
            }
            current.push(p);
        }
        if !current.is_empty() {
            out.push(current);
        }
    }
    out
}

/// `SummarizingPolicy` (§7.3).
// The `as` casts are Python's int-to-float product and round(), as the spec states them.
pub(crate) fn summarizing(
    t: &Transcript,
    b: &CompactionBudget,
    ratio: f64,
    min_span: usize,
) -> Summary {
    let mut chosen = None;
    if t.token_estimate() > b.max_tokens {
        for span in spans(t, b) {
            if span.len() < min_span {
                continue;
            }
            let tokens: u64 = span.iter().map(|&p| t.turns()[p].token_estimate()).sum();
            let target = ((tokens as f64 * ratio).round_ties_even() as u64).max(1);
            if target >= tokens {
                continue;
            }
            chosen = Some((span, target));
            break;
        }
    }
    let mut actions = vec![Planned::Keep; t.len()];
    let Some((span, target)) = chosen else {
        return Summary {
            actions,
            request: None,
            splits_an_exchange: false,
        };
    };
    let ids: Vec<&str> = span.iter().map(|&p| t.turns()[p].turn_id()).collect();
    let gid = group_id(&ids);
    for &p in &span {
        actions[p] = Planned::Summarize(gid.clone());
    }
    let splits_an_exchange = exchanges(t)
        .iter()
        .any(|e| e.iter().any(|p| span.contains(p)) && !e.iter().all(|p| span.contains(p)));
    Summary {
        actions,
        request: Some((gid, ids.iter().map(|s| (*s).to_owned()).collect(), target)),
        splits_an_exchange,
    }
}
