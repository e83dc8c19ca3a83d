//! Summaries made ahead of a firing (`cutctx_session::ahead`): where the cut goes, what is
//! asked, what a provider's answer becomes, and the swap at the firing that follows: taken only
//! while it applies, the state that keeps it refused when forged.

use cutctx_formats::{Format, FormatError, validate};
use cutctx_session::ahead::{SummaryKind, ask};
use cutctx_session::{SessionState, history, step};
use serde_json::{Value, json};

use super::{config, exchange, request, stand_in};

/// The history of `n` exchanges of `size` characters.
fn grown(format: Format, n: usize, size: usize) -> Vec<Value> {
    (0..n).flat_map(|i| exchange(format, i, size)).collect()
}

/// The provider's answer to a summarizing call of `format`, `kind`.
fn answer(format: Format, kind: SummaryKind) -> Value {
    match (format, kind) {
        (Format::Anthropic, SummaryKind::Native) => json!({"stop_reason": "compaction",
            "content": [{"type": "compaction", "content": "so far", "signature": "s"}]}),
        (Format::OpenAiResponses, SummaryKind::Native) => json!({"output": [
            {"type": "compaction", "id": "cmp_1", "encrypted_content": "e"}]}),
        (Format::Anthropic, _) => {
            json!({"content": [{"type": "text", "text": "So far: reading."}]})
        }
        (Format::OpenAiResponses, _) => json!({"output": [{"type": "message",
            "content": [{"type": "output_text", "text": "So far: reading."}]}]}),
        (Format::OpenAiChat, _) => {
            json!({"choices": [{"message": {"content": "So far: reading."}}]})
        }
    }
}

fn no_summaries(
    _: &cutctx_formats::ProviderTranscript,
    _: &cutctx_model::SummarizationRequest,
) -> Result<String, FormatError> {
    unreachable!("the swap needs no plan summary")
}

/// Runs a loop with a summary asked at 80% of the trigger and answered at once; returns every
/// request sent and whether a swap happened.
fn run(format: Format, kind: SummaryKind) -> (Vec<Value>, usize) {
    let config = config(format, 2_000, "drop_oldest");
    let mut state: Option<SessionState> = None;
    let mut sent = Vec::new();
    let mut swaps = 0;
    for n in 1..40 {
        let req = request(format, &grown(format, n, 120));
        let mut previous = state.clone();
        if let Some(asked) = ask(&config, previous.as_ref(), &req, kind, 0.8, None).expect("asked")
        {
            // What goes to the provider is itself a valid request of the format (less the
            // compaction trigger it ends with).
            let mut checked = asked.request.clone();
            if format == Format::OpenAiResponses && kind == SummaryKind::Native {
                checked["input"].as_array_mut().expect("items").pop();
            }
            if let Some(m) = checked.as_object_mut() {
                m.remove("compaction");
            }
            validate(format, &checked).expect("a valid summarizing request");
            assert_eq!(asked.request["stream"], false);
            let ready = asked.ready(format, &answer(format, kind)).expect("read");
            let mut s = previous.take().unwrap_or_else(|| SessionState::new(format));
            assert!(s.offer(ready));
            previous = Some(s);
        }
        let out = step(&config, previous.as_ref(), &req, &mut no_summaries).expect("stepped");
        if out.swapped.is_some() {
            swaps += 1;
            assert_eq!(out.swapped.as_ref().map(|s| s.kind), Some(kind));
        }
        validate(format, &out.request).expect("a valid request");
        sent.push(out.request);
        state = Some(out.state);
    }
    (sent, swaps)
}

#[test]
fn every_format_swaps_its_summary_in_and_the_prefix_holds_between_firings() {
    for (format, kind) in [
        (Format::OpenAiChat, SummaryKind::Cached),
        (Format::OpenAiResponses, SummaryKind::Native),
        (Format::OpenAiResponses, SummaryKind::Cached),
        (Format::Anthropic, SummaryKind::Native),
        (Format::Anthropic, SummaryKind::Cached),
    ] {
        let (sent, swaps) = run(format, kind);
        assert!(swaps >= 1, "{format:?} {kind:?}: a summary was swapped in");
        let lists: Vec<&[Value]> = sent.iter().map(|r| history(format, r)).collect();
        let breaks = lists.windows(2).filter(|w| !w[1].starts_with(w[0])).count();
        assert_eq!(
            breaks, swaps,
            "{format:?} {kind:?}: the prefix changes only at a swap"
        );
        let last = lists.last().expect("sent");
        match kind {
            SummaryKind::Native => {
                let at = last.iter().position(|m| {
                    m["type"] == "compaction"
                        || m["content"]
                            .as_array()
                            .is_some_and(|c| c.iter().any(|b| b["type"] == "compaction"))
                });
                assert_eq!(at, Some(0), "{format:?}: the compaction goes first");
            }
            SummaryKind::Cached => {
                let text = serde_json::to_string(last).expect("json");
                assert!(
                    text.contains("So far: reading."),
                    "{format:?}: the summary is sent"
                );
            }
        }
    }
}

#[test]
fn the_cut_never_opens_the_tail_with_a_tool_result_nor_splits_a_call_from_its_result() {
    for format in [
        Format::OpenAiChat,
        Format::OpenAiResponses,
        Format::Anthropic,
    ] {
        let config = config(format, 2_000, "drop_oldest");
        let req = request(format, &grown(format, 30, 120));
        let asked = ask(&config, None, &req, SummaryKind::Cached, 0.5, None)
            .expect("asked")
            .expect("over half the trigger");
        let ready = asked
            .ready(format, &answer(format, SummaryKind::Cached))
            .expect("read");
        let mut state = SessionState::new(format);
        assert!(state.offer(ready));
        let sent = step(&config, Some(&state), &req, &mut no_summaries).expect("stepped");
        assert!(sent.swapped.is_some(), "{format:?}: swapped");
        // A valid request: every call keeps its result and every result its call.
        validate(format, &sent.request).expect("valid");
        let list = history(format, &sent.request);
        let summary = list
            .iter()
            .position(|m| {
                serde_json::to_string(m)
                    .expect("json")
                    .contains("So far: reading.")
            })
            .expect("the summary message");
        if let Some(first_kept) = list.get(summary + 1) {
            assert!(
                !format.descriptor().is_tool_result(first_kept),
                "{format:?}"
            );
        }
    }
}

#[test]
fn a_summary_for_a_history_that_changed_is_not_swapped_in() {
    let format = Format::OpenAiChat;
    let config = config(format, 2_000, "drop_oldest");
    let req = request(format, &grown(format, 30, 120));
    let asked = ask(&config, None, &req, SummaryKind::Cached, 0.5, None)
        .expect("asked")
        .expect("asked");
    let ready = asked
        .ready(format, &answer(format, SummaryKind::Cached))
        .expect("read");
    let mut state = SessionState::new(format);
    assert!(state.offer(ready));
    // The same length of history, but its first message edited: the session restarts and the
    // summary, made of the old text, is not used.
    let mut edited = req.clone();
    edited["messages"][1]["content"] = json!("another task");
    let sent = step(&config, Some(&state), &edited, &mut stand_in).expect("stepped");
    assert!(sent.swapped.is_none());
    assert!(
        !serde_json::to_string(&sent.request)
            .expect("json")
            .contains("So far")
    );
}

#[test]
fn an_answer_without_its_compaction_is_unreadable_and_names_no_content() {
    let format = Format::Anthropic;
    let config = config(format, 2_000, "drop_oldest");
    let req = request(format, &grown(format, 30, 120));
    let asked = ask(&config, None, &req, SummaryKind::Native, 0.5, None)
        .expect("asked")
        .expect("asked");
    assert!(asked.request["compaction"].is_object());
    let text_only =
        json!({"stop_reason": "end_turn", "content": [{"type": "text", "text": "secret"}]});
    let e = asked.ready(format, &text_only).expect_err("no compaction");
    assert_eq!(e.details()["reason"], "SUMMARY_UNREADABLE");
    assert!(!e.to_string().contains("secret"));
    let two = json!({"stop_reason": "compaction", "content": [
        {"type": "compaction", "content": "a"}, {"type": "compaction", "content": "b"}]});
    assert!(asked.ready(format, &two).is_err());
}

#[test]
fn a_state_keeping_a_summary_reads_back_and_a_forged_one_is_refused() {
    let format = Format::OpenAiChat;
    let config = config(format, 2_000, "drop_oldest");
    let req = request(format, &grown(format, 30, 120));
    let asked = ask(&config, None, &req, SummaryKind::Cached, 0.5, None)
        .expect("asked")
        .expect("asked");
    let mut state = SessionState::new(format);
    assert!(
        state.offer(
            asked
                .ready(format, &answer(format, SummaryKind::Cached))
                .expect("read")
        )
    );
    let text = state.to_json();
    let back = SessionState::from_json(&text, format).expect("reads back");
    assert_eq!(back, state);
    assert!(back.has_ready());
    // A second summary is not taken while one waits.
    let mut twice = back.clone();
    assert!(
        !twice.offer(
            asked
                .ready(format, &answer(format, SummaryKind::Cached))
                .expect("read")
        )
    );
    // A forged range past what the summary covers is refused, whatever its check says.
    let mut doc: Value = serde_json::from_str(&text).expect("json");
    let ready = &mut doc["state"]["ready"];
    ready["prefix"]
        .as_array_mut()
        .expect("items")
        .push(json!({"keep": [1000, 1001]}));
    let body = doc["state"].to_string();
    use sha2::Digest as _;
    let check: String = sha2::Sha256::digest(body.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    doc["check"] = json!(check);
    let e = SessionState::from_json(&doc.to_string(), format).expect_err("forged");
    assert_eq!(e.details()["field"], "ready");
}
