//! What a strategy's requests keep of what the model goes on to use: per call and over a
//! replayed run, the share of the identifiers the model's recorded answer uses that the
//! request still shows, whether the task statement is intact, and how many of the latest
//! tool results are sent verbatim.
//!
//! **Identifiers** are those of `cutctx_session::mentions`, the one rule by which the session
//! too tells what a model message refers to: runs of letters, digits and `_ . / -` that look
//! like a path, a file name, a snake-case name, a version or a number, read from every string
//! of a message (content, tool-call arguments, tool names), not object keys.
//!
//! **Per call `k`.** The *answer* is the model turn the recorded run holds at call `k` (the
//! assistant message answering it, with its tool calls' arguments; for Responses, every model
//! item of that step). The *eligible* identifiers are the answer's that the uncompacted
//! history at call `k` also holds (what the model could have read there rather than made up);
//! the share is how many of them the request the strategy sent at call `k` holds anywhere.
//! The *task* is the first user message of the history, intact when the sent request holds
//! it unchanged, or a message holding every string of it unchanged (Anthropic merges
//! consecutive user messages, so a summary placed after the task shares its message). The
//! *recent results* are the last `N` tool results of the history at call `k`, as the format
//! says what a tool result is (`cutctx_formats::Descriptor::tool_results`: Chat `tool`
//! messages, Anthropic `tool_result` blocks of user messages, Responses outputs of its call
//! types), kept when the sent request holds each unchanged.
//!
//! **Needed information.** The *needed* identifiers at call `k` are the answer's identifiers
//! whose first appearance in the run (the fixed part first, then the messages in order) is in
//! a tool result before call `k`: what the model read in a tool's output and then used. Each
//! is *verbatim* when the request sent at call `k` holds it anywhere, else *behind a digest*
//! when the request still holds a result for the call it first appeared in that carries a
//! `sha256:` digest (a masking stub, from which a caller can restore it), else lost. The
//! *latest user message* is the last user message of the history at call `k` that is not only
//! tool results (for Anthropic, its tool-result blocks set aside), intact when the sent
//! request holds a message with every string of it unchanged, as the task is checked.
//!
//! The task and the latest user message are also counted together, over the calls where they
//! can fit beside what no compaction may touch: where the request's fixed part, its system
//! messages, the output reserve, the two messages and the last `N` messages (`N` the protected
//! recent turns) are within the window; the calls where they cannot are counted apart.
//!
//! **Over the run.** Identifiers and needed identifiers: kept over eligible, summed over calls
//! (1 when no call has any; behind a digest, 0 when none is needed). Task and latest user
//! message: the share of calls at which each is intact. Recent results: kept over counted,
//! summed over calls (1 when there are none). A stand-in summary holds no identifiers, so a
//! strategy is credited only for what it sends verbatim.

use std::collections::BTreeSet;

use cutctx_formats::{Format, message_list as history};
use cutctx_session::mentions::{Origin, each_identifier, each_string, first_seen};
use serde_json::Value;

/// A strategy's retention over a run (each a share in `[0, 1]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Retention {
    /// Eligible identifiers of the answers still visible in the requests sent.
    pub identifiers: f64,
    /// Calls at which the task statement (the first user message) is sent intact.
    pub task_intact: f64,
    /// The last `N` tool results at each call sent verbatim.
    pub recent_results: f64,
    /// Needed identifiers (first seen in a tool result, used by the answer) sent verbatim.
    pub needed: f64,
    /// Needed identifiers not sent verbatim but behind a digest of the result they came from.
    pub needed_behind_digest: f64,
    /// Calls at which the latest user message is sent intact.
    pub latest_user: f64,
    /// Calls at which both the task and the latest user message are sent intact, among those
    /// where they fit beside what no compaction may touch (see the module's definition; 1
    /// when there are none).
    pub users_where_they_fit: f64,
    /// Calls at which they do not: no request there holds both and the protected turns.
    pub users_cannot_fit: usize,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            identifiers: 1.0,
            task_intact: 1.0,
            recent_results: 1.0,
            needed: 1.0,
            needed_behind_digest: 0.0,
            latest_user: 1.0,
            users_where_they_fit: 1.0,
            users_cannot_fit: 0,
        }
    }
}

pub use cutctx_session::mentions::identifiers;

/// Whether `message` holds every string of `part` (its role among them) unchanged.
fn holds_all(message: &Value, part: &Value) -> bool {
    let mut have: BTreeSet<&str> = BTreeSet::new();
    each_string(message, &mut |s| {
        have.insert(s);
    });
    let mut all = true;
    each_string(part, &mut |s| all &= have.contains(s));
    all
}

/// The identifiers of `wanted` that `value` holds.
fn present(value: &Value, wanted: &BTreeSet<&str>) -> usize {
    let mut found: BTreeSet<&str> = BTreeSet::new();
    each_string(value, &mut |s| {
        each_identifier(s, &mut |t| {
            if let Some(w) = wanted.get(t) {
                found.insert(w);
            }
        });
    });
    found.len()
}

/// The tool results of a message list, each as its JSON text.
fn results(format: Format, list: &[Value]) -> Vec<String> {
    let descriptor = format.descriptor();
    list.iter()
        .flat_map(|m| descriptor.tool_results(m))
        .map(|(_, result)| result.to_string())
        .collect()
}

/// The ids of the calls whose results `list` holds as a stub carrying a digest.
fn digest_stubs(format: Format, list: &[Value]) -> BTreeSet<&str> {
    let descriptor = format.descriptor();
    let mut out = BTreeSet::new();
    for m in list {
        for (block, result) in descriptor.tool_results(m) {
            let mut stub = false;
            each_string(result, &mut |s| stub |= s.contains("sha256:"));
            if stub && let Some(id) = descriptor.answered_call(m, block) {
                out.insert(id);
            }
        }
    }
    out
}

/// A user message as the latest-user check compares it: Anthropic's tool-result blocks set
/// aside; `None` when nothing else is left (a message of tool results alone).
fn user_part(format: Format, message: &Value) -> Option<Value> {
    if message.get("role").and_then(Value::as_str) != Some(format.descriptor().roles.user) {
        return None;
    }
    if format.descriptor().is_tool_result(message) {
        return None;
    }
    let Some(Value::Array(blocks)) = message.get("content") else {
        return Some(message.clone());
    };
    let rest: Vec<Value> = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) != Some("tool_result"))
        .cloned()
        .collect();
    if rest.is_empty() {
        return None;
    }
    let mut part = message.clone();
    part["content"] = Value::Array(rest);
    Some(part)
}

/// What retention is measured against at one call, the same for every strategy.
struct Target {
    eligible: BTreeSet<String>,
    /// Needed identifiers and the id of the call whose result they first appeared in.
    needed: Vec<(String, String)>,
    task: Option<Value>,
    latest_user: Option<Value>,
    /// Whether the task and the latest user message fit the window together.
    users_fit: bool,
    recent: Vec<String>,
}

/// What [`Targets::of`] needs to tell whether the task and the latest user message can fit:
/// each message's tokens, the tokens every request sends besides its messages (the fixed
/// part and the reserve), how many of the latest messages are protected, and the window.
pub(crate) struct Room<'a> {
    pub(crate) tokens: &'a [u64],
    pub(crate) besides: u64,
    pub(crate) protected: usize,
    pub(crate) window: u64,
}

/// The targets of every call of `run`, whose calls send the first `points[k]` messages.
pub(crate) struct Targets {
    calls: Vec<Target>,
    format: Format,
}

impl Targets {
    /// The targets of `run` at each call point, with the last `last` tool results.
    pub(crate) fn of(
        format: Format,
        run: &Value,
        points: &[usize],
        last: usize,
        room: &Room<'_>,
    ) -> Self {
        let messages = history(format, run);
        let user = format.descriptor().roles.user;
        let task_at = messages
            .iter()
            .position(|m| m.get("role").and_then(Value::as_str) == Some(user));
        let task = task_at.map(|i| messages[i].clone());
        let seen = first_seen(format, run);
        let mut calls = Vec::with_capacity(points.len());
        for &len in points {
            let answer_end = messages
                .get(len..)
                .unwrap_or(&[])
                .iter()
                .take_while(|m| cutctx_formats::is_model_item(format, m))
                .count()
                + len;
            let mut wanted: BTreeSet<&str> = BTreeSet::new();
            for m in messages.get(len..answer_end).unwrap_or(&[]) {
                each_string(m, &mut |s| {
                    each_identifier(s, &mut |t| {
                        wanted.insert(t);
                    });
                });
            }
            // Eligible: what the uncompacted request at this call holds (the fixed part too).
            let mut eligible = BTreeSet::new();
            let prior = messages.get(..len).unwrap_or(&[]);
            let mut note = |s: &str| {
                each_identifier(s, &mut |t| {
                    if let Some(w) = wanted.get(t) {
                        eligible.insert((*w).to_owned());
                    }
                });
            };
            for m in prior {
                each_string(m, &mut note);
            }
            if let Value::Object(map) = run {
                for (k, v) in map {
                    if k != cutctx_formats::list_key(format) {
                        each_string(v, &mut note);
                    }
                }
            }
            let needed = wanted
                .iter()
                .filter_map(|t| match seen.get(*t) {
                    Some(Origin {
                        message: Some(i),
                        call: Some(call),
                    }) if *i < len => Some(((*t).to_owned(), call.clone())),
                    _ => None,
                })
                .collect();
            let latest = prior
                .iter()
                .enumerate()
                .rev()
                .find_map(|(i, m)| user_part(format, m).map(|part| (i, part)));
            // What every request must hold besides: the system messages and the protected
            // recent messages, counted once with the task and the latest user message.
            let latest_at = latest.as_ref().map(|(i, _)| *i);
            let recent_from = len.saturating_sub(room.protected);
            let held: u64 = prior
                .iter()
                .enumerate()
                .filter(|(i, m)| {
                    Some(*i) == task_at
                        || Some(*i) == latest_at
                        || *i >= recent_from
                        || cutctx_formats::is_system_message(format, m)
                })
                .map(|(i, _)| room.tokens.get(i).copied().unwrap_or(0))
                .sum();
            let users_fit = room.besides + held <= room.window;
            let latest_user = latest.map(|(_, part)| part);
            let all = results(format, prior);
            let recent = all[all.len().saturating_sub(last)..].to_vec();
            let task = task
                .as_ref()
                .filter(|t| prior.iter().any(|m| m == *t))
                .cloned();
            calls.push(Target {
                eligible,
                needed,
                task,
                latest_user,
                users_fit,
                recent,
            });
        }
        Self { calls, format }
    }

    /// The retention of the requests `sent`, one per call in order.
    #[expect(clippy::cast_precision_loss, reason = "counts are far below 2^52")]
    pub(crate) fn measure<'a>(&self, sent: impl Iterator<Item = &'a Value>) -> Retention {
        let (mut kept, mut eligible) = (0_usize, 0_usize);
        let (mut task_calls, mut intact) = (0_usize, 0_usize);
        let (mut results_kept, mut results_counted) = (0_usize, 0_usize);
        let (mut needed, mut verbatim, mut behind) = (0_usize, 0_usize, 0_usize);
        let (mut user_calls, mut user_intact) = (0_usize, 0_usize);
        let (mut fit_calls, mut fit_intact, mut cannot) = (0_usize, 0_usize, 0_usize);
        for (target, request) in self.calls.iter().zip(sent) {
            let list = history(self.format, request);
            let wanted: BTreeSet<&str> = target.eligible.iter().map(String::as_str).collect();
            eligible += wanted.len();
            if !wanted.is_empty() {
                kept += present(request, &wanted);
            }
            if !target.needed.is_empty() {
                let wanted: BTreeSet<&str> =
                    target.needed.iter().map(|(t, _)| t.as_str()).collect();
                let mut found: BTreeSet<&str> = BTreeSet::new();
                each_string(request, &mut |s| {
                    each_identifier(s, &mut |t| {
                        if let Some(w) = wanted.get(t) {
                            found.insert(w);
                        }
                    });
                });
                let stubs = digest_stubs(self.format, list);
                needed += target.needed.len();
                for (t, call) in &target.needed {
                    if found.contains(t.as_str()) {
                        verbatim += 1;
                    } else if stubs.contains(call.as_str()) {
                        behind += 1;
                    }
                }
            }
            let user_sent = target
                .latest_user
                .as_ref()
                .map(|user| list.iter().any(|m| holds_all(m, user)));
            let task_sent = target
                .task
                .as_ref()
                .map(|task| list.iter().any(|m| m == task || holds_all(m, task)));
            if let Some(sent) = user_sent {
                user_calls += 1;
                user_intact += usize::from(sent);
            }
            if let Some(sent) = task_sent {
                task_calls += 1;
                intact += usize::from(sent);
            }
            if user_sent.is_some() || task_sent.is_some() {
                if target.users_fit {
                    fit_calls += 1;
                    fit_intact +=
                        usize::from(user_sent.unwrap_or(true) && task_sent.unwrap_or(true));
                } else {
                    cannot += 1;
                }
            }
            if !target.recent.is_empty() {
                let sent_results: BTreeSet<String> =
                    results(self.format, list).into_iter().collect();
                results_counted += target.recent.len();
                results_kept += target
                    .recent
                    .iter()
                    .filter(|r| sent_results.contains(*r))
                    .count();
            }
        }
        let share = |a: usize, b: usize| if b == 0 { 1.0 } else { a as f64 / b as f64 };
        Retention {
            identifiers: share(kept, eligible),
            task_intact: share(intact, task_calls),
            recent_results: share(results_kept, results_counted),
            needed: share(verbatim, needed),
            needed_behind_digest: if needed == 0 {
                0.0
            } else {
                behind as f64 / needed as f64
            },
            latest_user: share(user_intact, user_calls),
            users_where_they_fit: share(fit_intact, fit_calls),
            users_cannot_fit: cannot,
        }
    }
}
