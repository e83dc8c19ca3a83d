//! `CompactionPlan::validate` against a naive, independent re-implementation of BEHAVIOUR.md §6.4.
//!
//! The oracle below is written from the reference's Python, quadratic and literal: it shares
//! no code with the crate beyond the model types. A proptest feeds both random small
//! transcripts, budgets and drafts, and requires the same verdict, code and details.

use cutctx_invariants::{CompactionPlan, PlanDraft};
use cutctx_model::{
    Action, CompactionBudget, ErrorCode, Role, SummarizationRequest, Transcript, TranscriptTurn,
    TurnAction,
};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{Value, json};

use crate::{naive_after, naive_before, stub};

/// A refusal by the oracle: which check (for coverage accounting), the code and the details.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    pub(crate) check: &'static str,
    pub(crate) code: ErrorCode,
    pub(crate) details: Value,
}

fn refuse(check: &'static str, details: Value) -> Result<(), Refusal> {
    Err(Refusal {
        check,
        code: ErrorCode::Validation,
        details,
    })
}

/// Sorted, deduplicated.
fn sorted_set(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}

/// The first ten.
fn cap(v: Vec<String>) -> Vec<String> {
    v.into_iter().take(10).collect()
}

fn is_removal(a: Action) -> bool {
    a == Action::Drop || a == Action::Summarize
}

/// The rules of §6.4, literally: the first broken check wins.
pub(crate) fn naive_rules(
    t: &Transcript,
    b: &CompactionBudget,
    d: &PlanDraft,
) -> Result<(), Refusal> {
    let turns = t.turns();
    let n = turns.len();
    let untouchable = |i: usize| {
        let turn = &turns[i];
        turn.role() == Role::System
            || turn.pinned()
            || (i as u128) + u128::from(b.protected_recent_turns) >= n as u128
    };

    // Rule 0.
    let floor: u64 = (0..n)
        .filter(|&i| untouchable(i))
        .map(|i| turns[i].token_estimate())
        .sum();
    if floor > b.max_tokens {
        return Err(Refusal {
            check: "0",
            code: ErrorCode::BudgetUnsatisfiable,
            details: json!({
                "untouchable_tokens": floor,
                "max_tokens": b.max_tokens,
                "untouchable_turn_count": (0..n).filter(|&i| untouchable(i)).count(),
                "protected_recent_turns": b.protected_recent_turns,
            }),
        });
    }

    // Rule 1.
    let planned: Vec<String> = d.actions.iter().map(|a| a.turn_id().to_owned()).collect();
    let expected: Vec<String> = turns.iter().map(|x| x.turn_id().to_owned()).collect();
    if planned != expected {
        let unplanned = expected
            .iter()
            .filter(|id| !planned.contains(id))
            .cloned()
            .collect();
        let unknown = planned
            .iter()
            .filter(|id| !expected.contains(id))
            .cloned()
            .collect();
        let repeated = planned
            .iter()
            .filter(|id| planned.iter().filter(|x| x == id).count() > 1)
            .cloned()
            .collect();
        return refuse(
            "1",
            json!({
                "unplanned_turn_ids": cap(sorted_set(unplanned)),
                "unknown_turn_ids": cap(sorted_set(unknown)),
                "repeated_turn_ids": cap(sorted_set(repeated)),
            }),
        );
    }
    let action_of = |id: &str| -> &TurnAction {
        d.actions
            .iter()
            .find(|a| a.turn_id() == id)
            .expect("coverage holds")
    };

    // Rule 2.
    let touched = sorted_set(
        (0..n)
            .filter(|&i| untouchable(i) && action_of(turns[i].turn_id()).action() != Action::Keep)
            .map(|i| turns[i].turn_id().to_owned())
            .collect(),
    );
    if !touched.is_empty() {
        let touched = cap(touched);
        let actions: Vec<&str> = touched
            .iter()
            .map(|id| action_of(id).action().as_str())
            .collect();
        return refuse(
            "2",
            json!({
                "touched_turn_ids": touched,
                "actions": actions,
                "protected_recent_turns": b.protected_recent_turns,
            }),
        );
    }

    // Rule 3: each exchange is visited at its earliest member.
    for turn in turns {
        let members: Vec<&TranscriptTurn> = match turn.tool_call_id() {
            Some(c) => turns
                .iter()
                .filter(|x| x.tool_call_id() == Some(c))
                .collect(),
            None => vec![turn],
        };
        if members[0].turn_id() != turn.turn_id() {
            continue;
        }
        let ids = |keep: &dyn Fn(&TurnAction) -> bool| -> Vec<String> {
            members
                .iter()
                .map(|m| action_of(m.turn_id()))
                .filter(|a| keep(a))
                .map(|a| a.turn_id().to_owned())
                .collect()
        };
        let removed = ids(&|a| is_removal(a.action()));
        if removed.is_empty() {
            continue;
        }
        if removed.len() != members.len() {
            let retained = ids(&|a| !is_removal(a.action()));
            return refuse(
                "3.split",
                json!({
                    "removed_turn_ids": cap(sorted_set(removed)),
                    "retained_turn_ids": cap(sorted_set(retained)),
                }),
            );
        }
        let signatures: Vec<(Action, Option<String>)> = members
            .iter()
            .map(|m| action_of(m.turn_id()))
            .map(|a| (a.action(), a.summary_group().map(str::to_owned)))
            .collect();
        if signatures.iter().any(|s| *s != signatures[0]) {
            let actions = sorted_set(
                signatures
                    .iter()
                    .map(|(a, _)| a.as_str().to_owned())
                    .collect(),
            );
            let groups = sorted_set(
                signatures
                    .iter()
                    .map(|(_, g)| g.clone().unwrap_or_default())
                    .collect(),
            );
            return refuse(
                "3.mixed",
                json!({
                    "turn_ids": cap(sorted_set(ids(&|_| true))),
                    "actions": actions,
                    "summary_groups": cap(groups),
                }),
            );
        }
    }

    // Rule 4.
    let requests = &d.summarization_requests;
    let group_ids: Vec<String> = requests.iter().map(|r| r.group_id().to_owned()).collect();
    if group_ids
        .iter()
        .any(|g| group_ids.iter().filter(|x| *x == g).count() > 1)
    {
        let mut all = group_ids.clone();
        all.sort();
        return refuse("4.duplicate", json!({"group_ids": cap(all)}));
    }
    let mut planned_groups: Vec<(String, Vec<String>)> = Vec::new();
    for a in &d.actions {
        if let Some(g) = a.summary_group() {
            match planned_groups.iter_mut().find(|(name, _)| name == g) {
                Some((_, ids)) => ids.push(a.turn_id().to_owned()),
                None => planned_groups.push((g.to_owned(), vec![a.turn_id().to_owned()])),
            }
        }
    }
    let without_request: Vec<String> = planned_groups
        .iter()
        .map(|(g, _)| g.clone())
        .filter(|g| !group_ids.contains(g))
        .collect();
    let without_turns: Vec<String> = group_ids
        .iter()
        .filter(|g| !planned_groups.iter().any(|(p, _)| p == *g))
        .cloned()
        .collect();
    if !without_request.is_empty() || !without_turns.is_empty() {
        return refuse(
            "4.sets",
            json!({
                "groups_without_request": cap(sorted_set(without_request)),
                "requests_without_turns": cap(sorted_set(without_turns)),
            }),
        );
    }
    for r in requests {
        let action_ids = planned_groups
            .iter()
            .find(|(g, _)| g == r.group_id())
            .map(|(_, ids)| ids.clone())
            .expect("sets agree");
        let request_ids: Vec<String> = r.turn_ids().iter().map(|s| s.to_string()).collect();
        if action_ids != request_ids {
            return refuse(
                "4.turns",
                json!({
                    "group_id": r.group_id(),
                    "request_turn_ids": cap(request_ids),
                    "action_turn_ids": cap(action_ids),
                }),
            );
        }
    }
    let collisions: Vec<String> = requests
        .iter()
        .filter(|r| expected.contains(&format!("summary:{}", r.group_id())))
        .map(|r| r.group_id().to_owned())
        .collect();
    if !collisions.is_empty() {
        return refuse(
            "4.collision",
            json!({"group_ids": cap(sorted_set(collisions))}),
        );
    }
    let positions: Vec<usize> = requests
        .iter()
        .map(|r| {
            expected
                .iter()
                .position(|id| *id == *r.turn_ids()[0])
                .expect("a planned turn")
        })
        .collect();
    if positions.windows(2).any(|w| w[0] > w[1]) {
        return refuse("4.order", json!({"group_ids": cap(group_ids)}));
    }

    // Rule 5.
    let before: u64 = turns.iter().map(TranscriptTurn::token_estimate).sum();
    if d.tokens_before != before {
        return refuse(
            "5.before",
            json!({"declared": d.tokens_before, "transcript": before}),
        );
    }
    let mut after = 0_u64;
    for (i, a) in d.actions.iter().enumerate() {
        after += match a.action() {
            Action::Keep => turns[i].token_estimate(),
            Action::Mask => a.replacement().map_or(0, |r| r.token_estimate),
            Action::Drop | Action::Summarize => 0,
        };
    }
    after += requests
        .iter()
        .map(SummarizationRequest::target_tokens)
        .sum::<u64>();
    if d.tokens_after_estimate != after {
        return refuse(
            "5.after",
            json!({"declared": d.tokens_after_estimate, "derived": after}),
        );
    }
    let unmet = after > b.max_tokens;
    if d.budget_unmet != unmet {
        return refuse(
            "5.unmet",
            json!({"declared": d.budget_unmet, "tokens_after_estimate": after, "max_tokens": b.max_tokens}),
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Random cases.

/// Call ids; "t1" is also a turn id, so the two key spaces are exercised.
const CALLS: [&str; 4] = ["c0", "c1", "c2", "t1"];
const GROUPS: [&str; 3] = ["g0", "g1", "g2"];
const ROLES: [Role; 4] = [Role::System, Role::User, Role::Assistant, Role::Tool];

#[derive(Debug, Clone)]
struct TurnSpec {
    role: usize,
    call: Option<usize>,
    pinned: bool,
    tokens: u64,
}

#[derive(Debug, Clone)]
struct ActSpec {
    kind: u8,
    stub: u64,
    group: usize,
}

#[derive(Debug, Clone)]
struct Case {
    turns: Vec<TurnSpec>,
    /// Name the last turn `summary:g0`.
    collide: bool,
    max_tokens: u64,
    protected: u64,
    acts: Vec<ActSpec>,
    repair_untouchable: bool,
    /// 0-1: leave exchanges alone; 2-7: make each exchange whole; 8-9: remove each touched
    /// exchange whole, every member by its own action (often mixed).
    repair_exchanges: u8,
    coverage: (u8, Index, Index),
    requests: (u8, Index),
    targets: [u64; 3],
    figures: (u8, u8, bool),
}

fn case_strategy() -> impl Strategy<Value = Case> {
    let turn = (
        0..ROLES.len(),
        prop::option::weighted(0.6, 0..CALLS.len()),
        prop::bool::weighted(0.15),
        0_u64..40,
    )
        .prop_map(|(role, call, pinned, tokens)| TurnSpec {
            role,
            call,
            pinned,
            tokens,
        });
    let act = (0_u8..4, 0_u64..20, 0..GROUPS.len()).prop_map(|(kind, stub, group)| ActSpec {
        kind,
        stub,
        group,
    });
    (
        prop::collection::vec(turn, 0..=8),
        prop::bool::weighted(0.2),
        0_u64..400,
        0_u64..7,
        prop::collection::vec(act, 8),
        prop::bool::weighted(0.7),
        0_u8..10,
        (0_u8..14, any::<Index>(), any::<Index>()),
        (0_u8..14, any::<Index>()),
        prop::array::uniform3(0_u64..30),
        (0_u8..6, 0_u8..6, prop::bool::weighted(0.15)),
    )
        .prop_map(
            |(
                turns,
                collide,
                max_tokens,
                protected,
                acts,
                repair_untouchable,
                repair_exchanges,
                coverage,
                requests,
                targets,
                figures,
            )| Case {
                turns,
                collide,
                max_tokens,
                protected,
                acts,
                repair_untouchable,
                repair_exchanges,
                coverage,
                requests,
                targets,
                figures,
            },
        )
}

fn with_id(a: &TurnAction, id: &str) -> TurnAction {
    TurnAction::new(
        id,
        a.action(),
        a.summary_group().map(Into::into),
        a.replacement().cloned(),
    )
    .expect("same shape")
}

fn with_action(id: &str, spec: &ActSpec) -> TurnAction {
    match spec.kind {
        0 => TurnAction::keep(id),
        1 => TurnAction::mask(id, stub(spec.stub)),
        2 => TurnAction::drop_turn(id),
        _ => TurnAction::summarize(id, GROUPS[spec.group].into()),
    }
}

fn adjust(value: u64, choice: u8) -> u64 {
    match choice {
        4 => value + 1,
        5 => value.saturating_sub(1),
        _ => value,
    }
}

/// The transcript, budget and draft a case describes.
fn materialize(c: &Case) -> (Transcript, CompactionBudget, PlanDraft) {
    let n = c.turns.len();
    let turns: Vec<TranscriptTurn> = c
        .turns
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let id = if c.collide && i + 1 == n {
                "summary:g0".to_owned()
            } else {
                format!("t{i}")
            };
            let turn = TranscriptTurn::new(id, ROLES[s.role], "x", s.tokens).expect("non-empty id");
            turn.with_tool_call_id_opt(s.call.map(|k| CALLS[k].into()))
                .with_pinned(s.pinned)
        })
        .collect();
    let t = Transcript::new(turns).expect("unique ids");
    let b = CompactionBudget::new(c.max_tokens).with_protected_recent_turns(c.protected);
    let untouchable = |i: usize| {
        let x = &t.turns()[i];
        x.role() == Role::System || x.pinned() || (i as u64) + c.protected >= n as u64
    };

    let mut actions: Vec<TurnAction> = t
        .turns()
        .iter()
        .zip(&c.acts)
        .map(|(x, s)| with_action(x.turn_id(), s))
        .collect();
    if c.repair_untouchable {
        for (i, a) in actions.iter_mut().enumerate() {
            if untouchable(i) {
                *a = TurnAction::keep(t.turns()[i].turn_id());
            }
        }
    }
    if c.repair_exchanges >= 2 {
        for i in 0..n {
            let Some(call) = t.turns()[i].tool_call_id() else {
                continue;
            };
            let members: Vec<usize> = (0..n)
                .filter(|&j| t.turns()[j].tool_call_id() == Some(call))
                .collect();
            if members[0] != i {
                continue;
            }
            let Some(&first) = members.iter().find(|&&j| actions[j].action().is_removal()) else {
                continue;
            };
            let locked = members.iter().any(|&j| untouchable(j));
            let template = actions[first].clone();
            for &j in &members {
                let id = t.turns()[j].turn_id();
                if c.repair_untouchable && locked {
                    if actions[j].action().is_removal() {
                        actions[j] = TurnAction::keep(id);
                    }
                } else if c.repair_exchanges >= 8 {
                    if !actions[j].action().is_removal() {
                        actions[j] = TurnAction::drop_turn(id);
                    }
                } else {
                    actions[j] = with_id(&template, id);
                }
            }
        }
    }

    let (kind, i, j) = &c.coverage;
    if !actions.is_empty() {
        let (i, j) = (i.index(actions.len()), j.index(actions.len()));
        match kind {
            6 => actions.swap(i, j),
            7 => {
                actions.remove(i);
            }
            8 => {
                let copy = actions[i].clone();
                actions.insert(j, copy);
            }
            9 => actions[i] = with_id(&actions[i], "zz"),
            _ => {}
        }
    }

    // Requests, one per group in order of first appearance, covering its turns in order.
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for a in &actions {
        if let Some(g) = a.summary_group() {
            let id = a.turn_id().to_owned();
            match groups.iter_mut().find(|(name, _)| name == g) {
                Some((_, ids)) if !ids.contains(&id) => ids.push(id),
                Some(_) => {}
                None => groups.push((g.to_owned(), vec![id])),
            }
        }
    }
    let (kind, at) = &c.requests;
    if !groups.is_empty() {
        let k = at.index(groups.len());
        match kind {
            6 => {
                groups.remove(k);
            }
            8 | 12 | 13 => groups.reverse(),
            9 => {
                let ids = &mut groups[k].1;
                if ids.len() > 1 {
                    ids.reverse();
                } else {
                    let extra = if ids[0] == "t0" { "t1" } else { "t0" };
                    ids.push(extra.to_owned());
                }
            }
            10 => {
                let copy = groups[k].clone();
                groups.push(copy);
            }
            11 => groups[k].0 = "g0".to_owned(),
            _ => {}
        }
    }
    if *kind == 7 {
        groups.push(("gx".to_owned(), vec!["t0".to_owned()]));
    }
    let requests: Vec<SummarizationRequest> = groups
        .iter()
        .map(|(g, ids)| {
            let target = GROUPS
                .iter()
                .position(|x| x == g)
                .map_or(5, |k| c.targets[k]);
            let ids = ids.iter().map(|id| id.as_str().into()).collect();
            SummarizationRequest::new(g.as_str(), ids, target, "p.v1").expect("well formed")
        })
        .collect();

    let (before_choice, after_choice, flip) = c.figures;
    let before = adjust(naive_before(&t), before_choice);
    let after = adjust(naive_after(&t, &actions, &requests), after_choice);
    let d = PlanDraft {
        actions,
        budget_unmet: (after > c.max_tokens) != flip,
        estimator_ratio: None,
        policy_name: "prop".to_owned(),
        policy_version: "0".to_owned(),
        summarization_requests: requests,
        tokens_after_estimate: after,
        tokens_before: before,
    };
    (t, b, d)
}

/// The verdicts of the crate and the oracle, compared; `Err` describes a disagreement.
fn compare(t: &Transcript, b: &CompactionBudget, d: &PlanDraft) -> Result<&'static str, String> {
    let got = CompactionPlan::validate(d.clone(), t, b);
    let want = naive_rules(t, b, d);
    match (got, want) {
        (Ok(_), Ok(())) => Ok("accepted"),
        (Err(e), Err(r)) => {
            let details = serde_json::to_value(e.details()).map_err(|x| x.to_string())?;
            if e.code() == r.code && details == r.details {
                Ok(r.check)
            } else {
                Err(format!(
                    "check {}: crate says {} {details}, oracle says {} {}",
                    r.check,
                    e.code(),
                    r.code,
                    r.details
                ))
            }
        }
        (Ok(_), Err(r)) => Err(format!(
            "crate accepts; oracle refuses at {}: {:?} {}",
            r.check, r.code, r.details
        )),
        (Err(e), Ok(())) => Err(format!(
            "crate refuses ({}: {:?}); oracle accepts",
            e.code(),
            e.details()
        )),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn validate_agrees_with_the_naive_rules(case in case_strategy()) {
        let (t, b, d) = materialize(&case);
        if let Err(disagreement) = compare(&t, &b, &d) {
            prop_assert!(false, "{disagreement}\ntranscript: {t:?}\nbudget: {b:?}\ndraft: {d:?}");
        }
    }
}

/// The generator reaches every check and acceptance, so the property above is not vacuous.
#[test]
fn random_cases_reach_every_check() {
    let mut runner = TestRunner::deterministic();
    let strategy = case_strategy();
    let mut seen: Vec<(&'static str, usize)> = Vec::new();
    for _ in 0..10_000 {
        let case = strategy.new_tree(&mut runner).expect("a case").current();
        let (t, b, d) = materialize(&case);
        let check = compare(&t, &b, &d).unwrap_or_else(|e| panic!("{e}"));
        match seen.iter_mut().find(|(c, _)| *c == check) {
            Some((_, count)) => *count += 1,
            None => seen.push((check, 1)),
        }
    }
    seen.sort_unstable();
    let reached: Vec<&str> = seen
        .iter()
        .filter(|(_, n)| *n >= 10)
        .map(|(c, _)| *c)
        .collect();
    assert_eq!(
        reached,
        [
            "0",
            "1",
            "2",
            "3.mixed",
            "3.split",
            "4.collision",
            "4.duplicate",
            "4.order",
            "4.sets",
            "4.turns",
            "5.after",
            "5.before",
            "5.unmet",
            "accepted",
        ],
        "checks reached (with counts): {seen:?}"
    );
}
