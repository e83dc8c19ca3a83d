//! The six rules, checked in the reference's order; the first failure is reported.

use std::collections::{BTreeMap, BTreeSet};

use cutctx_model::{
    Action, ActionView, CompactionBudget, CompactionError, Details, ID_SAMPLE_LIMIT, PlanDraft,
    SUMMARY_TURN_ID_PREFIX, Transcript, TurnAction, details, py_repr_str,
};
use serde_json::Value;

use crate::{Analysis, estimate_after};

fn sample<T: Into<Value> + Clone>(items: &[T]) -> Value {
    Value::Array(
        items
            .iter()
            .take(ID_SAMPLE_LIMIT)
            .cloned()
            .map(Into::into)
            .collect(),
    )
}

fn fail(message: String, details: Details) -> Result<(), CompactionError> {
    Err(CompactionError::validation(message, details))
}

pub(crate) fn validate(
    plan: &PlanDraft,
    transcript: &Transcript,
    budget: &CompactionBudget,
    analysis: &Analysis,
) -> Result<(), CompactionError> {
    analysis.require_satisfiable()?;
    if all_hold(plan, transcript, budget, analysis) {
        return Ok(());
    }
    coverage(&plan.actions, transcript)?;
    untouchable(&plan.actions, analysis, budget)?;
    exchanges(&plan.actions, analysis)?;
    summary_groups(plan, transcript)?;
    arithmetic(plan, transcript, budget)
}

/// Whether every rule holds, decided in one pass over the actions.
///
/// The rules one by one read the actions five times; on a large transcript that is memory
/// traffic, not computation. This pass checks the same conditions together, and a plan it
/// passes is valid. When it finds any fault it answers `false` and the rules run one by one,
/// in the reference's order, to name the first.
fn all_hold(
    plan: &PlanDraft,
    transcript: &Transcript,
    budget: &CompactionBudget,
    analysis: &Analysis,
) -> bool {
    plan.tokens_before == transcript.token_estimate()
        && structure_holds(plan, transcript, analysis)
            .is_some_and(|after| after == u128::from(plan.tokens_after_estimate))
        && plan.budget_unmet == (plan.tokens_after_estimate > budget.max_tokens)
}

/// Rules 1 to 4 in one pass over the actions; when they hold, the estimate of the view the
/// actions produce (what rule 5 compares). Rule 4 (summary groups) is checked in the pass only
/// in its trivial form, no group named and no request; otherwise its own check runs.
pub(crate) fn structure_holds(
    plan: &PlanDraft,
    transcript: &Transcript,
    analysis: &Analysis,
) -> Option<u128> {
    let actions = &plan.actions;
    let ids = transcript.turn_id_arcs();
    if actions.len() != ids.len() {
        return None;
    }
    let exchanges = &analysis.exchanges;
    let estimates = transcript.token_estimates();
    let mut grouped = false;
    let mut after: u128 = 0;
    for (p, (action, id)) in actions.iter().zip(ids).enumerate() {
        let kind = action.action();
        // Rules 1 and 2.
        if !action.names_id(id) || (analysis.untouchable[p] && kind != Action::Keep) {
            return None;
        }
        // Rule 3, turn by turn: each member is retained as the exchange's first member is, or
        // removed by the same action into the same group.
        let &first = exchanges.members(exchanges.exchange_of(p)).first()?;
        let lead = &actions[first];
        let removed = kind.is_removal();
        if removed != lead.action().is_removal()
            || (removed && (kind != lead.action() || !action.same_group(lead)))
        {
            return None;
        }
        grouped |= action.summary_group().is_some();
        after += match action.view() {
            ActionView::Keep => u128::from(estimates[p]),
            ActionView::Mask(r) => u128::from(r.token_estimate),
            ActionView::Drop | ActionView::Summarize(_) => 0,
        };
    }
    if grouped || !plan.summarization_requests.is_empty() {
        summary_groups_hold(plan, transcript).then_some(())?;
        after += plan
            .summarization_requests
            .iter()
            .map(|r| u128::from(r.target_tokens()))
            .sum::<u128>();
    }
    Some(after)
}

/// Rule 1: the actions name every turn exactly once, in transcript order.
fn coverage(actions: &[TurnAction], transcript: &Transcript) -> Result<(), CompactionError> {
    if actions.len() == transcript.len()
        && actions
            .iter()
            .zip(transcript.turns())
            .all(|(a, t)| a.names(t))
    {
        return Ok(());
    }
    let expected: BTreeSet<&str> = transcript.turn_ids().collect();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for a in actions {
        *counts.entry(a.turn_id()).or_default() += 1;
    }
    let unplanned: Vec<&str> = expected
        .iter()
        .copied()
        .filter(|id| !counts.contains_key(id))
        .collect();
    let unknown: Vec<&str> = counts
        .keys()
        .copied()
        .filter(|id| !expected.contains(id))
        .collect();
    let repeated: Vec<&str> = counts
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(id, _)| *id)
        .collect();
    let tail = if unplanned.is_empty() && unknown.is_empty() && repeated.is_empty() {
        ", order differs)"
    } else {
        ")"
    };
    fail(
        format!(
            "A plan names every turn of its transcript exactly once, in order; this one has {} \
             actions for {} turns ({} unplanned, {} unknown, {} repeated{tail}. A forgotten \
             turn would be neither kept nor dropped.",
            actions.len(),
            transcript.len(),
            unplanned.len(),
            unknown.len(),
            repeated.len(),
        ),
        details! {
            "unplanned_turn_ids" => sample(&unplanned),
            "unknown_turn_ids" => sample(&unknown),
            "repeated_turn_ids" => sample(&repeated),
        },
    )
}

/// Rule 2: every untouchable turn is `keep`.
fn untouchable(
    actions: &[TurnAction],
    analysis: &Analysis,
    budget: &CompactionBudget,
) -> Result<(), CompactionError> {
    let mut touched: Vec<(&str, Action)> = actions
        .iter()
        .zip(&analysis.untouchable)
        .filter(|(a, u)| **u && a.action() != Action::Keep)
        .map(|(a, _)| (a.turn_id(), a.action()))
        .collect();
    if touched.is_empty() {
        return Ok(());
    }
    touched.sort_unstable();
    let ids: Vec<&str> = touched.iter().map(|(id, _)| *id).collect();
    let acts: Vec<&str> = touched.iter().map(|(_, a)| a.as_str()).collect();
    fail(
        format!(
            "{} untouchable turns are acted on: system turns, pinned turns and the last {} \
             turns must be kept. A budget that cannot be met without touching them is \
             unsatisfiable instead.",
            touched.len(),
            budget.protected_recent_turns
        ),
        details! {
            "touched_turn_ids" => sample(&ids),
            "actions" => sample(&acts),
            "protected_recent_turns" => budget.protected_recent_turns,
        },
    )
}

/// Rule 3: an exchange is retained whole, or removed whole by one action into one group.
fn exchanges(actions: &[TurnAction], analysis: &Analysis) -> Result<(), CompactionError> {
    for members in analysis.exchanges.iter() {
        let removed = members
            .iter()
            .filter(|&&p| actions[p].action().is_removal())
            .count();
        if removed == 0 {
            continue;
        }
        let first = &actions[members[0]];
        if removed == members.len()
            && members
                .iter()
                .all(|&p| actions[p].action() == first.action() && actions[p].same_group(first))
        {
            continue;
        }
        let ids = |keep: &dyn Fn(&TurnAction) -> bool| -> Vec<&str> {
            let mut v: Vec<&str> = members
                .iter()
                .map(|&p| &actions[p])
                .filter(|a| keep(a))
                .map(TurnAction::turn_id)
                .collect();
            v.sort_unstable();
            v
        };
        if removed != members.len() {
            let gone = ids(&|a| a.action().is_removal());
            let kept = ids(&|a| !a.action().is_removal());
            return fail(
                format!(
                    "A tool exchange of {} turns is split: {} removed, {} retained. An orphaned \
                     call or result is a malformed transcript to every provider, so an exchange \
                     is removed whole or not at all.",
                    members.len(),
                    gone.len(),
                    kept.len()
                ),
                details! { "removed_turn_ids" => sample(&gone), "retained_turn_ids" => sample(&kept) },
            );
        }
        let all = ids(&|_| true);
        let acts: BTreeSet<&str> = members
            .iter()
            .map(|&p| actions[p].action().as_str())
            .collect();
        let groups: BTreeSet<&str> = members
            .iter()
            // The reference lists a member without a group as "" among the groups.
            .map(|&p| actions[p].summary_group().unwrap_or(""))
            .collect();
        let acts: Vec<&str> = acts.into_iter().collect();
        let groups: Vec<&str> = groups.into_iter().collect();
        return fail(
            format!(
                "A tool exchange of {} turns is removed by more than one action or into more \
                 than one summary group; it must be dropped together or summarized into one \
                 group.",
                members.len()
            ),
            details! {
                "turn_ids" => sample(&all),
                "actions" => acts,
                "summary_groups" => sample(&groups),
            },
        );
    }
    Ok(())
}

/// Rule 4, last part: no summary turn a request would produce takes the id of a turn of the
/// transcript.
fn summary_ids_free(
    requests: &[cutctx_model::SummarizationRequest],
    transcript: &Transcript,
) -> Result<(), CompactionError> {
    let wanted: BTreeSet<String> = requests
        .iter()
        .map(|r| format!("{SUMMARY_TURN_ID_PREFIX}{}", r.group_id()))
        .collect();
    if !wanted.is_empty() {
        // Only an id with the summary prefix can collide; most ids are ruled out by it. The
        // id column is read, not the turns: a few bytes a turn instead of seventy-two.
        let taken: BTreeSet<&str> = transcript
            .turn_id_arcs()
            .iter()
            .map(|id| &**id)
            .filter(|id| id.starts_with(SUMMARY_TURN_ID_PREFIX) && wanted.contains(*id))
            .collect();
        if !taken.is_empty() {
            let mut collisions: Vec<&str> = requests
                .iter()
                .filter(|r| taken.contains(r.summary_turn_id().as_str()))
                .map(|r| r.group_id())
                .collect();
            collisions.sort_unstable();
            return fail(
                format!(
                    "{} summarization groups would produce a summary turn whose id already \
                     names a turn of the transcript; summary ids are derived, not generated, \
                     so the collision is refused.",
                    collisions.len()
                ),
                details! { "group_ids" => sample(&collisions) },
            );
        }
    }
    Ok(())
}

/// Rule 4 as a yes or no, without the lists of positions [`summary_groups`] builds to name a
/// fault: each summarized action is matched against its request's next turn id as the actions
/// are read.
fn summary_groups_hold(plan: &PlanDraft, transcript: &Transcript) -> bool {
    let requests = &plan.summarization_requests;
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, r) in requests.iter().enumerate() {
        if index.insert(r.group_id(), i).is_some() {
            return false;
        }
    }
    // Per request: how many of its turns the actions have named, and where the first was.
    let mut matched = vec![0_usize; requests.len()];
    let mut first = vec![0_usize; requests.len()];
    // A group's actions are usually adjacent and share one string: look it up once a run.
    let mut last: Option<(&std::sync::Arc<str>, usize)> = None;
    for (p, a) in plan.actions.iter().enumerate() {
        let Some(g) = a.summary_group_arc() else {
            continue;
        };
        let i = match last {
            Some((run, i)) if std::sync::Arc::ptr_eq(run, g) => i,
            _ => {
                let Some(&i) = index.get(&**g) else {
                    return false;
                };
                last = Some((g, i));
                i
            }
        };
        let Some(expected) = requests[i].turn_ids().get(matched[i]) else {
            return false;
        };
        let named = a.turn_id_arc();
        if !(std::sync::Arc::ptr_eq(named, expected) || **named == **expected) {
            return false;
        }
        if matched[i] == 0 {
            first[i] = p;
        }
        matched[i] += 1;
    }
    requests
        .iter()
        .zip(&matched)
        .all(|(r, &m)| m > 0 && m == r.turn_ids().len())
        && first.windows(2).all(|w| w[0] <= w[1])
        && summary_ids_free(requests, transcript).is_ok()
}

/// Rule 4: summary groups and requests agree, and are well ordered and named.
fn summary_groups(plan: &PlanDraft, transcript: &Transcript) -> Result<(), CompactionError> {
    let requests = &plan.summarization_requests;
    let mut group_ids: Vec<&str> = requests.iter().map(|r| r.group_id()).collect();
    let distinct: BTreeSet<&str> = group_ids.iter().copied().collect();
    if distinct.len() != group_ids.len() {
        group_ids.sort_unstable();
        return fail(
            "A plan's summarization requests need distinct group ids; a repeat would make the \
             summaries ambiguous when the plan is applied."
                .to_owned(),
            details! { "group_ids" => sample(&group_ids) },
        );
    }
    // Group -> positions of its actions, in transcript order.
    let mut planned: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    // A group's actions are usually adjacent and share one string: batch them.
    let mut run: Option<(&std::sync::Arc<str>, Vec<usize>)> = None;
    for (p, a) in plan.actions.iter().enumerate() {
        let Some(g) = a.summary_group_arc() else {
            continue;
        };
        match &mut run {
            Some((current, positions)) if std::sync::Arc::ptr_eq(current, g) => positions.push(p),
            _ => {
                if let Some((done, positions)) = run.replace((g, vec![p])) {
                    planned.entry(done).or_default().extend(positions);
                }
            }
        }
    }
    if let Some((done, positions)) = run {
        planned.entry(done).or_default().extend(positions);
    }
    let planned_set: BTreeSet<&str> = planned.keys().copied().collect();
    if planned_set != distinct {
        let without_request: Vec<&str> = planned_set.difference(&distinct).copied().collect();
        let without_turns: Vec<&str> = distinct.difference(&planned_set).copied().collect();
        return fail(
            "Every summary group an action names needs a summarization request, and every \
             request needs turns; here the two disagree."
                .to_owned(),
            details! {
                "groups_without_request" => sample(&without_request),
                "requests_without_turns" => sample(&without_turns),
            },
        );
    }
    for request in requests {
        let positions = planned
            .get(request.group_id())
            .map_or(&[][..], Vec::as_slice);
        let matches = positions.len() == request.turn_ids().len()
            && positions.iter().zip(request.turn_ids()).all(|(&p, id)| {
                let named = plan.actions[p].turn_id_arc();
                std::sync::Arc::ptr_eq(named, id) || **named == **id
            });
        if !matches {
            let action_ids: Vec<&str> = positions
                .iter()
                .map(|&p| plan.actions[p].turn_id())
                .collect();
            let request_ids: Vec<&str> = request.turn_ids().iter().map(|s| &**s).collect();
            return fail(
                format!(
                    "Summarization request {} covers other turns than its group's actions, or \
                     in another order; the two must agree exactly, in transcript order.",
                    py_repr_str(request.group_id())
                ),
                details! {
                    "group_id" => request.group_id(),
                    "request_turn_ids" => sample(&request_ids),
                    "action_turn_ids" => sample(&action_ids),
                },
            );
        }
    }
    summary_ids_free(requests, transcript)?;
    // Each request's first turn is its group's first action, by the check above: every
    // request's group is planned, with at least one turn.
    let mut firsts: Vec<usize> = Vec::with_capacity(requests.len());
    for r in requests {
        let first = planned.get(r.group_id()).and_then(|v| v.first()).copied();
        debug_assert!(first.is_some(), "the groups were matched to requests above");
        match first {
            Some(first) => firsts.push(first),
            None => {
                return fail(
                    format!(
                        "Summarization request {} names a group no action has.",
                        py_repr_str(r.group_id())
                    ),
                    details! { "group_id" => r.group_id() },
                );
            }
        }
    }
    if firsts.windows(2).any(|w| w[0] > w[1]) {
        let in_order: Vec<&str> = requests.iter().map(|r| r.group_id()).collect();
        return fail(
            "Summarization requests must be ordered by the position of each group's first turn: \
             their order is part of the plan's bytes, which are byte-identical whenever the plan \
             is derived again."
                .to_owned(),
            details! { "group_ids" => sample(&in_order) },
        );
    }
    Ok(())
}

/// Rule 5 (the reference's 5 and 6): the figures follow from the actions.
fn arithmetic(
    plan: &PlanDraft,
    transcript: &Transcript,
    budget: &CompactionBudget,
) -> Result<(), CompactionError> {
    let before = transcript.token_estimate();
    if plan.tokens_before != before {
        return fail(
            format!(
                "tokens_before is {} but the transcript's turns are estimated at {before}; the \
                 figure is the transcript's own sum.",
                plan.tokens_before
            ),
            details! { "declared" => plan.tokens_before, "transcript" => before },
        );
    }
    let after = estimate_after(transcript, &plan.actions, &plan.summarization_requests);
    let derived = u64::try_from(after).ok();
    if derived != Some(plan.tokens_after_estimate) {
        let derived_json: Value =
            derived.map_or_else(|| Value::String(after.to_string()), Value::from);
        return fail(
            format!(
                "tokens_after_estimate is {} but the plan's own actions produce a view estimated \
                 at {after}; a report copies this figure, so it must be the derived one.",
                plan.tokens_after_estimate
            ),
            details! { "declared" => plan.tokens_after_estimate, "derived" => derived_json },
        );
    }
    let unmet = plan.tokens_after_estimate > budget.max_tokens;
    if plan.budget_unmet != unmet {
        let py = |b: bool| if b { "True" } else { "False" };
        return fail(
            format!(
                "budget_unmet is {} but an estimate of {} tokens against a budget of {} makes it \
                 {}; the flag is derived, never declared.",
                py(plan.budget_unmet),
                plan.tokens_after_estimate,
                budget.max_tokens,
                py(unmet)
            ),
            details! {
                "declared" => plan.budget_unmet,
                "tokens_after_estimate" => plan.tokens_after_estimate,
                "max_tokens" => budget.max_tokens,
            },
        );
    }
    Ok(())
}
