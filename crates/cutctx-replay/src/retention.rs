//! What a strategy's requests keep of what the model goes on to use: per call and over a
//! replayed run, the share of the identifiers the model's recorded answer uses that the
//! request still shows, whether the task statement is intact, and how many of the latest
//! tool results are sent verbatim.
//!
//! **Identifiers.** A text's identifiers are its maximal runs of ASCII letters, digits and
//! `_ . / -`, with leading and trailing `.`, `/` and `-` trimmed, that are either all digits
//! and at least 2 long, or at least 3 long and hold a digit, `_`, `.` or `/` (a path, a file
//! name, a snake-case name, a version, a number with letters). Plain words are left out: they
//! say little about what was kept. Every string of a message counts (content, tool-call
//! arguments, tool names); object keys do not.
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
//! **Over the run.** Identifiers: kept over eligible, summed over calls (1 when no call has
//! any). Task: the share of calls at which it is intact. Recent results: kept over counted,
//! summed over calls (1 when there are none). A stand-in summary holds no identifiers, so a
//! strategy is credited only for what it sends verbatim.

use std::collections::BTreeSet;

use cutctx_formats::{Format, message_list as history};
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
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            identifiers: 1.0,
            task_intact: 1.0,
            recent_results: 1.0,
        }
    }
}

/// The identifiers of `text`, in order (see the module's definition).
///
/// ```
/// use cutctx_replay::retention::identifiers;
/// let found = identifiers("Open src/main.rs at line 42, then call parse_args (v1.2).");
/// assert_eq!(found, ["src/main.rs", "42", "parse_args", "v1.2"]);
/// ```
#[must_use]
pub fn identifiers(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    each_identifier(text, &mut |t| out.push(t));
    out
}

fn each_identifier<'a>(text: &'a str, f: &mut dyn FnMut(&'a str)) {
    let bytes = text.as_bytes();
    let part = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'/' | b'-');
    let mut i = 0;
    while i < bytes.len() {
        if !part(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && part(bytes[i]) {
            i += 1;
        }
        // The run is ASCII, so its ends are character boundaries.
        let run = text
            .get(start..i)
            .unwrap_or("")
            .trim_matches(|c| matches!(c, '.' | '/' | '-'));
        if qualifies(run) {
            f(run);
        }
    }
}

fn qualifies(token: &str) -> bool {
    let b = token.as_bytes();
    if b.len() >= 2 && b.iter().all(u8::is_ascii_digit) {
        return true;
    }
    b.len() >= 3
        && b.iter()
            .any(|c| c.is_ascii_digit() || matches!(c, b'_' | b'.' | b'/'))
}

/// Calls `f` on every string of `value` (not object keys).
fn each_string<'a>(value: &'a Value, f: &mut dyn FnMut(&'a str)) {
    match value {
        Value::String(s) => f(s),
        Value::Array(list) => list.iter().for_each(|v| each_string(v, f)),
        Value::Object(map) => map.values().for_each(|v| each_string(v, f)),
        _ => {}
    }
}

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

/// What retention is measured against at one call, the same for every strategy.
struct Target {
    eligible: BTreeSet<String>,
    task: Option<Value>,
    recent: Vec<String>,
}

/// The targets of every call of `run`, whose calls send the first `points[k]` messages.
pub(crate) struct Targets {
    calls: Vec<Target>,
    format: Format,
}

impl Targets {
    /// The targets of `run` at each call point, with the last `last` tool results.
    pub(crate) fn of(format: Format, run: &Value, points: &[usize], last: usize) -> Self {
        let messages = history(format, run);
        let task = messages
            .iter()
            .find(|m| m.get("role").and_then(Value::as_str) == Some(format.descriptor().roles.user))
            .cloned();
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
            let all = results(format, prior);
            let recent = all[all.len().saturating_sub(last)..].to_vec();
            let task = task
                .as_ref()
                .filter(|t| prior.iter().any(|m| m == *t))
                .cloned();
            calls.push(Target {
                eligible,
                task,
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
        for (target, request) in self.calls.iter().zip(sent) {
            let list = history(self.format, request);
            let wanted: BTreeSet<&str> = target.eligible.iter().map(String::as_str).collect();
            eligible += wanted.len();
            if !wanted.is_empty() {
                kept += present(request, &wanted);
            }
            if let Some(task) = &target.task {
                task_calls += 1;
                intact += usize::from(list.iter().any(|m| m == task || holds_all(m, task)));
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
        }
    }
}
