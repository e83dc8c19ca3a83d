//! An Anthropic request read, checked and mapped in one walk over its messages.
//!
//! An Anthropic reading holds its blocks, several times the room of a Chat or Responses one,
//! so held for the whole list it would raise the run's peak by most of the input: the two-walk
//! reader lets the scan find each message's end first and reads each message afterwards,
//! walking every string twice.
//!
//! [`anthropic()`] walks once: it checks and maps each message as the scan finds it, then drops
//! its reading (most of a large list's readings made on another core, [`crate::read_ahead`], and
//! given back to it to be freed). Two things are not known yet at that point. One is the
//! list's length, which the check needs for one rule (a final assistant message may be
//! empty), so the check is [`Check::open_ended`], which takes no empty assistant message at
//! all. The other is the rest of the request (its `system` may come after `messages`), so the
//! system turn is put first at the end, and the request's other fields are checked then.
//! Either may only refuse what the two-walk reader takes, never the reverse: on `None` the
//! caller reads the request the other way, which gives the answer, so a request this cannot
//! take costs a second reading, and nothing else.

use std::ops::Range;

use cutctx_model::Parallelism;
use cutctx_policies::TokenEstimator;
use serde_json::Value;

use crate::anthropic::{self, Build, Check, Plain};
use crate::hand_read::{ReadMessage, value_end};
use crate::mapping::Built;
use crate::read_ahead::Ahead;
use crate::{NESTING_LIMIT, depth, text};

/// How deep a message not read by hand may nest for this walk to step over it (as the scan).
const DEPTH: usize = 64;

/// The request `text` (its list at `key`) read and its messages checked and mapped in one walk,
/// as the two-walk reader reads them when it accepts the request; `None` when this walk does
/// not take it (the two-walk reader then says what it is). A list of `ahead_from` bytes or
/// more is mostly read ahead on another core (the readers use [`crate::read_ahead::AHEAD_FROM_BYTES`]).
pub(crate) fn anthropic(
    text: &str,
    key: &str,
    estimator: &dyn TokenEstimator,
    defer: bool,
    ahead_from: usize,
) -> Option<(text::Read, Built)> {
    // The arrays and objects around a message: the list, and the request object around it.
    let around = if text.trim_start().starts_with('{') {
        2
    } else {
        1
    };
    let value = |span: Range<usize>| -> Option<Value> {
        let v: Value = serde_json::from_str(text.get(span)?).ok()?;
        (around + depth(&v) < NESTING_LIMIT).then_some(v)
    };
    let mut check = Check::open_ended();
    let mut build = Build::default();
    let mut taken = 0_usize;
    let mut refused = false;
    let read_at = |start: usize| Plain::read_at(text, start, defer);
    let (read, scanned) = std::thread::scope(|scope| {
        // Most of a large list read ahead on another core, as the Chat and Responses readers
        // do it ([`crate::read_ahead`]).
        let mut ahead = Ahead::start(
            scope,
            text,
            Parallelism::Automatic,
            ahead_from,
            text.len() / 10,
            &read_at,
        );
        // One message, at `start`: checked and mapped as the two-walk reader does it, by hand
        // where the check takes the reading, else as a value; where it ends.
        let mut step = |start: usize| -> Option<usize> {
            let i = taken;
            let (reading, read_ahead) = ahead.take_or_read(start, read_at);
            let end = match &reading {
                Some((_, end)) => *end,
                None => value_end(text.as_bytes(), start, DEPTH)?,
            };
            match reading {
                Some((m, _)) if check.plain(i, &m).is_some() => {
                    build.plain(i, &m, estimator).ok()?;
                    if read_ahead {
                        // The helper's reading is freed by the helper.
                        ahead.give_back(m, end);
                    }
                }
                _ => {
                    let m = value(start..end)?;
                    check.message(i, &m).ok()?;
                    build.message(i, &m, estimator).ok()?;
                }
            }
            taken += 1;
            Some(end)
        };
        text::read_with(text, key, &mut |start| {
            if refused {
                return None;
            }
            let end = step(start);
            refused = end.is_none();
            end
        })
    })?;
    // A scan given up for the parser's saw other messages than the parser's.
    if refused || !scanned || taken != read.layout.items.len() || taken == 0 {
        return None;
    }
    if let Value::Object(fields) = &read.shell
        && fields.values().any(|v| 1 + depth(v) >= NESTING_LIMIT)
    {
        return None;
    }
    anthropic::system_shape(&read.shell).ok()?;
    check.finish().ok()?;
    let built = build.finish_with_system(&read.shell, estimator).ok()?;
    Some((read, built))
}

#[cfg(test)]
mod tests {
    use cutctx_policies::CharRatioEstimator;

    use crate::{Format, Reading, read_and_map};

    /// A request of `steps` user prompts, tool calls and tool results, with its `system`
    /// after its `messages` when `system_last`.
    fn request(steps: usize, system_last: bool) -> String {
        let mut messages = Vec::new();
        for k in 0..steps {
            messages.push(format!(r#"{{"role":"user","content":"step {k}"}}"#));
            messages.push(format!(
                r#"{{"role":"assistant","content":[{{"type":"text","text":"on it"}},{{"type":"tool_use","id":"c{k}","name":"read","input":{{"path":"a/{k}"}}}}]}}"#
            ));
            messages.push(format!(
                r#"{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"c{k}","content":"line \"{k}\"\nnext"}}]}}"#
            ));
        }
        let list = messages.join(",");
        if system_last {
            format!(r#"{{"max_tokens":9,"messages":[{list}],"system":"be brief"}}"#)
        } else {
            format!(r#"{{"system":[{{"type":"text","text":"be brief"}}],"messages":[{list}]}}"#)
        }
    }

    #[test]
    fn one_walk_takes_usual_requests_to_the_turns_of_two() {
        let estimator = CharRatioEstimator::default();
        for system_last in [false, true] {
            for defer in [false, true] {
                let text = request(40, system_last);
                let one = super::anthropic(&text, "messages", &estimator, defer, usize::MAX)
                    .expect("a usual request is taken");
                let reading = if defer {
                    Reading::HandDeferring
                } else {
                    Reading::Hand
                };
                let two = crate::map_messages(
                    Format::Anthropic,
                    &one.0.shell,
                    &one.0.layout,
                    &text,
                    &estimator,
                    reading,
                    crate::Plains::None,
                )
                .expect("and by two walks");
                assert_eq!(one.1, two, "system last: {system_last}, deferring: {defer}");
                assert_eq!(one.1.turns[0].turn_id(), "system");
                if defer {
                    assert!(!one.1.deferred.is_empty());
                }
                // The same with most of the list read ahead on another core.
                let ahead = super::anthropic(&text, "messages", &estimator, defer, 0)
                    .expect("taken read ahead too");
                assert_eq!(ahead.1, one.1, "read ahead, system last: {system_last}");
            }
        }
    }

    #[test]
    fn what_one_walk_cannot_take_the_two_walk_reader_answers() {
        let estimator = CharRatioEstimator::default();
        // A prefill: an empty final assistant message, which only the list's length allows.
        let prefill =
            r#"{"messages":[{"role":"user","content":"go"},{"role":"assistant","content":""}]}"#;
        assert!(super::anthropic(prefill, "messages", &estimator, true, 0).is_none());
        assert!(
            read_and_map(
                Format::Anthropic,
                prefill,
                &estimator,
                Reading::HandDeferring,
                0
            )
            .is_some()
        );
        // A result without its call: neither takes it.
        let orphan = r#"{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"r"}]}]}"#;
        assert!(super::anthropic(orphan, "messages", &estimator, true, 0).is_none());
        assert!(
            read_and_map(
                Format::Anthropic,
                orphan,
                &estimator,
                Reading::HandDeferring,
                0
            )
            .is_none()
        );
        // No message at all.
        assert!(super::anthropic(r#"{"messages":[]}"#, "messages", &estimator, true, 0).is_none());
    }
}
