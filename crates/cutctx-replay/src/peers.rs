//! Peer strategies for `cutctx replay --compare`: how other agent frameworks and provider
//! features compact, each modelled from its published rules and defaults, scaled to the
//! replay's window.
//!
//! **Scaling.** Thresholds published in tokens are for a 200,000-token window; each is scaled
//! by `window / 200,000` (so Claude Code's 167,000 of 200,000 fires at 83.5% of any window),
//! and so is the clearing's `clear_at_least`, which is measured against the trigger.
//! Thresholds published as fractions of the window are used as they are; counts of events
//! are not scaled. What a peer keeps after compacting (Claude Code's restored files, Codex's
//! user messages) is kept at its published budget, not scaled: a budget is a size the peer
//! keeps, not a share of a window. It is capped only by what fits under the window after the
//! summary ([`restore_budget`], [`codex_user_budget`]).
//!
//! **Summaries.** A peer's summary is sized and charged by the replay's one rule for every
//! strategy ([`summaries`](crate::summaries)). Its length is
//! [`summary_tokens`] of the tokens it replaces: the length
//! the default summarizing policy plans for a span of that size
//! (`crates/cutctx-policies/src/summarizing.rs`, `summary_target`), as the session's summaries
//! are; earlier versions gave peers a rule of their own, `min(2,000, 10% of what it
//! replaces)`. It is stood in for by text of that length with no identifiers in it:
//! retention credits only what a peer keeps verbatim. It is charged by how the peer asks
//! ([`SummaryKind`]): Anthropic's server compaction is
//! `native` (billed as the provider bills its compaction step: the conversation as sent, read
//! from the cache as far as it is held, the instruction, the output); Claude Code and Codex,
//! which send the conversation as last sent plus an instruction, `cached-prefix`; OpenHands
//! and Deep Agents, which send the span to summarize in a prompt of its own, `fresh`. The
//! instruction and a prompt's framing are counted at the length of the replay's instruction.
//!
//! **What every peer keeps.** The leading system turns, and the messages the call answers
//! (those after the last model turn, with the model turn whose tool calls they answer), so
//! that every request still asks what the recorded call asked. A peer that still exceeds the
//! window after compacting is sent as it is and counted over the window: the replay does not
//! improve on the peer's rule.
//!
//! Each peer's source is named in its doc comment.

use cutctx_formats::{Format, FormatError};
use serde_json::Value;

use cutctx_session::{fraction, with_instruction};

use crate::replay::{Asked, Context, Sent};
use crate::summaries::{SummaryKind, summary_tokens};

/// The window the peers' published token thresholds are for.
pub const REFERENCE_WINDOW: u64 = 200_000;

/// A peer: its name in the report and its rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// The strategy's name.
    pub name: &'static str,
    /// How it fires and what it keeps.
    pub rule: Rule,
}

/// The peers' rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Claude Code's auto-compact: fires when the prompt exceeds the window less the output
    /// reserve (`min(max_output, 20,000)`) and a 13,000-token buffer, 167,000 of 200,000
    /// (83.5%); replaces the whole history with one summary and restores up to 5 recently
    /// read files, modelled as the latest tool results. The summary is asked by sending the
    /// conversation with a summarization prompt. Settings and sources:
    /// * trigger, `window - min(max_output, 20,000) - 13,000` (`AUTOCOMPACT_BUFFER_TOKENS`
    ///   13,000, the 20,000 output cap), scaled: Claude Code's compaction constants as read
    ///   from its published package (`services/compact/autoCompact.ts`; analysed in the public
    ///   repository `ranpox/claude-code-navel-gazing`,
    ///   `claude-code-docs/11-context-compaction-strategies.md`; quoted in
    ///   anthropics/claude-code#31806 and #12004, and Ruya-AI/cozempic#38; decompiled or
    ///   secondary), and Anthropic's Claude Code documentation on `/compact` and auto-compact
    ///   (<https://docs.claude.com/en/docs/claude-code/costs>);
    /// * restored files, at most [`RESTORE_MAX_FILES`] 5 (`POST_COMPACT_MAX_FILES_TO_RESTORE`),
    ///   each at most [`RESTORE_TOKENS_PER_FILE`] 5,000 tokens
    ///   (`POST_COMPACT_MAX_TOKENS_PER_FILE`), at most [`RESTORE_TOKEN_BUDGET`] 50,000 in all
    ///   (`POST_COMPACT_TOKEN_BUDGET`): the same sources. Not scaled; capped only by what fits
    ///   under the window after the summary ([`restore_budget`]).
    ClaudeCode,
    /// Codex CLI's auto-compaction: the new history is the initial context, the most recent
    /// user messages, and the summary as a user message; tool calls and results are dropped.
    /// The summary is asked by sending the history with the compaction prompt. Settings and
    /// sources (<https://github.com/openai/codex>):
    /// * trigger, 90% of the window (`auto_compact_token_limit`):
    ///   `codex-rs/protocol/src/openai_models.rs` (fn `auto_compact_token_limit`; earlier
    ///   `codex-rs/core/src/openai_model_info.rs`);
    /// * user messages kept, at most [`CODEX_USER_MESSAGE_MAX_TOKENS`] 20,000 tokens
    ///   (`COMPACT_USER_MESSAGE_MAX_TOKENS`): `codex-rs/core/src/compact.rs`. Not scaled;
    ///   capped only by what fits under the window after the summary ([`codex_user_budget`]).
    Codex,
    /// OpenHands' `LLMSummarizingCondenser` (its default condenser): when the events exceed
    /// `max_size` 120 (not scaled: a count), or the request exceeds the window (its
    /// context-window condensation), keeps the first `keep_first` 4 events and the latest
    /// `max_size / 2 - keep_first - 1` and summarizes the rest, condensing to about half;
    /// halved again while it still exceeds the window. The forgotten events are sent in a
    /// prompt of their own. Source: `OpenHands/software-agent-sdk`,
    /// `openhands-sdk/openhands/sdk/context/condenser/llm_summarizing_condenser.py`, and
    /// <https://docs.openhands.dev/sdk/guides/context-condenser>.
    OpenHands,
    /// Anthropic's tool-result clearing, `clear_tool_uses_20250919`: when the input exceeds
    /// the trigger, replaces every tool result but the latest `keep` with a placeholder, on
    /// the server, before each request, if that clears at least `clear_at_least` tokens;
    /// otherwise the request is sent as it is. It never summarizes, so it may still exceed the
    /// window. Settings, all from
    /// <https://docs.claude.com/en/docs/build-with-claude/context-editing> (now
    /// <https://platform.claude.com/docs/en/build-with-claude/context-editing>):
    /// * `trigger`, 100,000 input tokens (the documented default), scaled;
    /// * `keep`, 3 tool uses (the documented default);
    /// * `clear_at_least`, [`CLEAR_AT_LEAST`] 5,000 input tokens, scaled like the trigger
    ///   ([`clear_at_least`]): the docs give it no default (none: any clearing is applied)
    ///   but recommend setting it, so that a clearing is worth the cache it invalidates
    ///   ("Context editing and prompt caching"); 5,000 is the value of the docs' own
    ///   example ("Advanced configuration");
    /// * `exclude_tools` `[]` and `clear_tool_inputs` `false` (the documented defaults): every
    ///   tool's results are cleared, tool calls are kept.
    ClearToolUses,
    /// Anthropic's server-side compaction, `compact_20260112`: when the input exceeds the
    /// trigger (150,000 tokens, scaled), the API summarizes the conversation as sent and later
    /// requests drop everything before the compaction block. Source:
    /// <https://platform.claude.com/docs/en/build-with-claude/compaction>.
    ServerCompaction,
    /// LangChain Deep Agents' summarization middleware: for a model with a known profile,
    /// fires at 85% of the window (`trigger=("fraction", 0.85)`) and keeps the most recent
    /// messages up to 10% of it (`keep=("fraction", 0.10)`), never splitting a tool call from
    /// its results; the older messages are summarized in a prompt of their own and replaced
    /// by one summary message. Source: `langchain-ai/deepagents`,
    /// `libs/deepagents/deepagents/middleware/summarization.py`, and LangChain's
    /// `SummarizationMiddleware` (<https://docs.langchain.com/oss/python/langchain/middleware>).
    DeepAgents,
}

/// Every peer, in the report's order.
pub const PEERS: [Peer; 6] = [
    Peer {
        name: "claude-code",
        rule: Rule::ClaudeCode,
    },
    Peer {
        name: "codex",
        rule: Rule::Codex,
    },
    Peer {
        name: "openhands",
        rule: Rule::OpenHands,
    },
    Peer {
        name: "clear-tool-uses",
        rule: Rule::ClearToolUses,
    },
    Peer {
        name: "server-compaction",
        rule: Rule::ServerCompaction,
    },
    Peer {
        name: "deep-agents",
        rule: Rule::DeepAgents,
    },
];

/// Anthropic's `clear_at_least` for [`Rule::ClearToolUses`], in tokens of a 200,000-token
/// window: the value of the context-editing docs' example (the API has no default).
pub const CLEAR_AT_LEAST: u64 = 5_000;

/// Claude Code's `POST_COMPACT_MAX_FILES_TO_RESTORE`.
pub const RESTORE_MAX_FILES: usize = 5;

/// Claude Code's `POST_COMPACT_MAX_TOKENS_PER_FILE`.
pub const RESTORE_TOKENS_PER_FILE: u64 = 5_000;

/// Claude Code's `POST_COMPACT_TOKEN_BUDGET`.
pub const RESTORE_TOKEN_BUDGET: u64 = 50_000;

/// Codex's `COMPACT_USER_MESSAGE_MAX_TOKENS` (`codex-rs/core/src/compact.rs`).
pub const CODEX_USER_MESSAGE_MAX_TOKENS: u64 = 20_000;

/// The fewest tokens [`Rule::ClearToolUses`] clears for `window`: [`CLEAR_AT_LEAST`] scaled
/// like its trigger.
///
/// ```
/// assert_eq!(cutctx_replay::peers::clear_at_least(200_000), 5_000);
/// assert_eq!(cutctx_replay::peers::clear_at_least(20_000), 500);
/// ```
#[must_use]
pub const fn clear_at_least(window: u64) -> u64 {
    scaled(CLEAR_AT_LEAST, window)
}

/// Claude Code's restore budget, `(per file, in all)`, when `room` tokens fit under the
/// window after the summary: the published 5,000 and 50,000, not scaled, capped by `room`.
///
/// ```
/// use cutctx_replay::peers::restore_budget;
/// assert_eq!(restore_budget(1_000_000), (5_000, 50_000));
/// assert_eq!(restore_budget(12_000), (5_000, 12_000));
/// assert_eq!(restore_budget(3_000), (3_000, 3_000));
/// ```
#[must_use]
pub fn restore_budget(room: u64) -> (u64, u64) {
    (
        RESTORE_TOKENS_PER_FILE.min(room),
        RESTORE_TOKEN_BUDGET.min(room),
    )
}

/// Codex's budget for the user messages it keeps when `room` tokens fit under the window
/// after the summary: the published 20,000, not scaled, capped by `room`.
///
/// ```
/// use cutctx_replay::peers::codex_user_budget;
/// assert_eq!(codex_user_budget(1_000_000), 20_000);
/// assert_eq!(codex_user_budget(7_000), 7_000);
/// ```
#[must_use]
pub fn codex_user_budget(room: u64) -> u64 {
    CODEX_USER_MESSAGE_MAX_TOKENS.min(room)
}

/// `tokens` of a 200,000-token window, scaled to `window`.
///
/// ```
/// assert_eq!(cutctx_replay::peers::scaled(167_000, 100_000), 83_500);
/// ```
#[must_use]
pub const fn scaled(tokens: u64, window: u64) -> u64 {
    tokens * window / REFERENCE_WINDOW
}

/// The prompt tokens (with the reserve) above which `rule` fires, for `window`.
#[must_use]
pub fn trigger(rule: Rule, window: u64) -> u64 {
    match rule {
        Rule::ClaudeCode => window.saturating_sub(scaled(20_000 + 13_000, window)),
        Rule::Codex => fraction(window, 0.9),
        Rule::OpenHands => window,
        Rule::ClearToolUses => scaled(100_000, window),
        Rule::ServerCompaction => scaled(150_000, window),
        Rule::DeepAgents => fraction(window, 0.85),
    }
}

/// A user message of `format` holding `text` ([`Descriptor::user_text`](cutctx_formats::Descriptor::user_text)).
fn user(format: Format, text: &str) -> Value {
    format.descriptor().user_text(text)
}

/// Whether `message` is, or holds, a tool result of `format`
/// ([`Descriptor::is_tool_result`](cutctx_formats::Descriptor::is_tool_result)).
fn is_result(format: Format, message: &Value) -> bool {
    format.descriptor().is_tool_result(message)
}

/// Stand-in text of about `tokens` tokens at four characters a token.
fn filler(tokens: u64, what: &str) -> String {
    let n = usize::try_from(tokens).unwrap_or(0).max(1) * 4;
    let mut text = format!("[{what}] ");
    while text.len() < n {
        text.push_str("summary ");
    }
    text
}

/// The text of a tool result message or block (its strings, joined).
fn text_of(value: &Value) -> String {
    let mut out = String::new();
    fn walk(v: &Value, out: &mut String) {
        match v {
            Value::String(s) => {
                out.push_str(s);
                out.push('\n');
            }
            Value::Array(l) => l.iter().for_each(|x| walk(x, out)),
            Value::Object(m) => m
                .iter()
                .filter(|(k, _)| k.as_str() != "tool_call_id" && k.as_str() != "role")
                .for_each(|(_, x)| walk(x, out)),
            _ => {}
        }
    }
    walk(value, &mut out);
    out
}

/// Where the messages the call answers start in `list`: after the last model turn, or at
/// that model turn when what follows it holds its tool results.
fn pending_start(format: Format, list: &[Value]) -> usize {
    let Some(last_model) = list
        .iter()
        .rposition(|m| cutctx_formats::is_model_item(format, m))
    else {
        return list.len().min(leading_system(format, list));
    };
    let after = last_model + 1;
    if list[after..].iter().any(|m| is_result(format, m)) {
        // Responses: a model step is several items; keep the whole step.
        let mut start = last_model;
        while start > 0 && cutctx_formats::is_model_item(format, &list[start - 1]) {
            start -= 1;
        }
        start
    } else {
        after
    }
}

fn leading_system(format: Format, list: &[Value]) -> usize {
    list.iter()
        .take_while(|m| cutctx_formats::is_system_message(format, m))
        .count()
}

/// What one compaction produced: the new list, and its summary as asked (how, the tokens it
/// replaces, the summary's tokens).
struct Compacted {
    list: Vec<Value>,
    summary: Option<(SummaryKind, u64, u64)>,
}

/// The calls `peer` makes over `context`'s run.
///
/// # Errors
///
/// `FORMAT_ERROR` for a message without its format's shape.
pub(crate) fn plan(context: &Context<'_>, peer: Peer) -> Result<Vec<Sent>, FormatError> {
    let format = context.format();
    let config = context.config;
    let window = config.window;
    let messages = context.messages();
    let fire_at = trigger(peer.rule, window);
    let mut out = Vec::with_capacity(context.points.len());
    // The peer's own history: what it sends in place of the first `covered` messages.
    let mut kept: Option<(Vec<Value>, usize)> = None;
    let mut cleared_before = 0_usize;
    for (k, &len) in context.points.iter().enumerate() {
        let mut list = match &kept {
            Some((list, covered)) => {
                let mut l = list.clone();
                l.extend_from_slice(messages.get(*covered..len).unwrap_or(&[]));
                l
            }
            None => messages.get(..len).unwrap_or(&[]).to_vec(),
        };
        let size = context.fixed + context.list_tokens(&list)? + config.reserve_output;
        let mut compacted = false;
        let mut summary = None;
        if peer.rule == Rule::ClearToolUses {
            // Applied on the server to each request as the client sends it (the whole history),
            // only when it clears at least `clear_at_least`; otherwise sent as it is.
            let mut cleared_list = list.clone();
            let cleared = if size > fire_at {
                clear_results(format, &mut cleared_list, 3)
            } else {
                0
            };
            let freed = context
                .list_tokens(&list)?
                .saturating_sub(context.list_tokens(&cleared_list)?);
            let applied = cleared > 0 && freed >= clear_at_least(window);
            if applied {
                list = cleared_list;
                compacted = cleared > cleared_before;
            }
            cleared_before = if applied { cleared } else { 0 };
        } else {
            let events = list.len() - leading_system(format, &list);
            let fires = match peer.rule {
                Rule::OpenHands => events > 120 || size > window,
                _ => size > fire_at,
            };
            if fires {
                let as_sent = context.with_list(list.clone());
                let c = compact(context, peer.rule, &list)?;
                if let Some((kind, replaced, output)) = c.summary {
                    summary = Some(Asked {
                        kind,
                        prefix: Some(with_instruction(format, &as_sent)),
                        spans: vec![(replaced, output)],
                        given: None,
                    });
                }
                list = c.list;
                kept = Some((list.clone(), len));
                compacted = true;
            }
        }
        let request = context.with_list(list);
        let marks = context.marks(&request);
        let mut sent = Sent::plain(request, marks, context.stuck[k]);
        sent.compacted = compacted;
        sent.summary = summary;
        out.push(sent);
    }
    Ok(out)
}

/// Replaces every tool result of `list` but the `keep` latest with a placeholder (in the
/// field holding what the tool returned); returns how many are cleared.
fn clear_results(format: Format, list: &mut [Value], keep: usize) -> usize {
    const PLACEHOLDER: &str = "[tool result cleared]";
    let descriptor = format.descriptor();
    // Anthropic holds several results in one message, each a block: each is one.
    let units: Vec<(usize, Option<usize>)> = list
        .iter()
        .enumerate()
        .flat_map(|(i, m)| descriptor.tool_results(m).map(move |(b, _)| (i, b)))
        .collect();
    let clear = units.len().saturating_sub(keep);
    let payload = descriptor.tool_result.payload;
    for &(i, b) in &units[..clear] {
        let result = match b {
            Some(b) => list[i].get_mut("content").and_then(|c| c.get_mut(b)),
            None => Some(&mut list[i]),
        };
        if let Some(result) = result {
            result[payload] = Value::String(PLACEHOLDER.to_owned());
        }
    }
    clear
}

/// One compaction of `list` under `rule`.
fn compact(context: &Context<'_>, rule: Rule, list: &[Value]) -> Result<Compacted, FormatError> {
    let format = context.format();
    let window = context.config.window;
    let system = leading_system(format, list);
    let pending = pending_start(format, list).max(system);
    let head = &list[..system];
    let middle = &list[system..pending];
    let tail = &list[pending..];
    let tokens = |l: &[Value]| context.list_tokens(l);
    // The tokens that fit under the window beside the head, the tail and `extra`.
    let room = |extra: &[Value]| -> Result<u64, FormatError> {
        let used = context.fixed
            + context.config.reserve_output
            + tokens(head)?
            + tokens(extra)?
            + tokens(tail)?;
        Ok(window.saturating_sub(used))
    };
    let mut out: Vec<Value> = head.to_vec();
    let summary = match rule {
        Rule::ClaudeCode => {
            let replaced = tokens(middle)?;
            let s = summary_tokens(replaced);
            let mut text = filler(s, "summary of the conversation");
            let (per_file, budget) = restore_budget(room(&[user(format, &text)])?);
            let mut used = 0;
            let mut restored = Vec::new();
            for m in middle
                .iter()
                .rev()
                .filter(|m| is_result(format, m))
                .take(RESTORE_MAX_FILES)
            {
                let t = tokens(std::slice::from_ref(m))?;
                if t <= per_file && used + t <= budget {
                    used += t;
                    restored.push(text_of(m));
                }
            }
            for r in restored.iter().rev() {
                text.push_str("\n[restored file]\n");
                text.push_str(r);
            }
            out.push(user(format, &text));
            Some((SummaryKind::CachedPrefix, replaced, s))
        }
        Rule::Codex => {
            let replaced = tokens(middle)?;
            let s = summary_tokens(replaced);
            let summary = user(format, &filler(s, "summary of the conversation"));
            let budget = codex_user_budget(room(std::slice::from_ref(&summary))?);
            let mut used = 0;
            let mut chosen = Vec::new();
            for m in middle.iter().rev() {
                let is_user = m.get("role").and_then(Value::as_str)
                    == Some(format.descriptor().roles.user)
                    && !is_result(format, m);
                if !is_user {
                    continue;
                }
                let t = tokens(std::slice::from_ref(m))?;
                if used + t > budget {
                    break;
                }
                used += t;
                chosen.push(m.clone());
            }
            chosen.reverse();
            out.extend(chosen);
            out.push(summary);
            Some((SummaryKind::CachedPrefix, replaced, s))
        }
        Rule::ServerCompaction => {
            let replaced = tokens(middle)?;
            let s = summary_tokens(replaced);
            out.push(user(format, &filler(s, "compaction")));
            Some((SummaryKind::Native, replaced, s))
        }
        Rule::DeepAgents => {
            let keep = fraction(window, 0.10);
            let mut start = middle.len();
            let mut used = 0;
            while start > 0 {
                let t = tokens(&middle[start - 1..start])?;
                if used + t > keep {
                    break;
                }
                used += t;
                start -= 1;
            }
            // Never start the kept part on a tool result: its call would be summarized.
            while start < middle.len() && is_result(format, &middle[start]) {
                start += 1;
            }
            let forgotten = tokens(&middle[..start])?;
            let s = summary_tokens(forgotten);
            out.push(user(format, &filler(s, "summary of the conversation")));
            out.extend_from_slice(&middle[start..]);
            Some((SummaryKind::Fresh, forgotten, s))
        }
        Rule::OpenHands => {
            let keep_first = 4.min(middle.len());
            let events = middle.len() + tail.len();
            let mut from_tail = (120 / 2 - 4 - 1).min(events / 2);
            loop {
                let mut start = middle
                    .len()
                    .saturating_sub(from_tail.saturating_sub(tail.len()));
                start = start.max(keep_first);
                while start < middle.len() && is_result(format, &middle[start]) {
                    start += 1;
                }
                let forgotten = tokens(&middle[keep_first..start])?;
                let s = summary_tokens(forgotten);
                let mut candidate = out.clone();
                candidate.extend_from_slice(&middle[..keep_first]);
                candidate.push(user(format, &filler(s, "condensation")));
                candidate.extend_from_slice(&middle[start..]);
                candidate.extend_from_slice(tail);
                let size = context.fixed + tokens(&candidate)? + context.config.reserve_output;
                if size <= window || from_tail <= tail.len() {
                    return Ok(Compacted {
                        list: candidate,
                        summary: Some((SummaryKind::Fresh, forgotten, s)),
                    });
                }
                from_tail /= 2;
            }
        }
        Rule::ClearToolUses => None,
    };
    out.extend_from_slice(tail);
    Ok(Compacted { list: out, summary })
}
