//! Sessions: prefix stability between firings (a property), firing only over the trigger,
//! refusal of corrupt and foreign state, rewind and edit detection, the three formats,
//! Anthropic cache marks, the in-memory path, where a run's calls are, reasoning held off and
//! early firing, pinned results and the task statement. The replay of recorded runs is
//! tested in `cutctx-replay`.

use cutctx_formats::{
    EstimatorSpec, Format, FormatError, ProviderTranscript, policy_named, validate,
};
use cutctx_model::SummarizationRequest;
use cutctx_session::{
    Decision, Restart, SessionConfig, SessionState, Step, history, prompt_tokens, push, step,
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn config(format: Format, window: u64, policy: &str) -> SessionConfig {
    let spec = EstimatorSpec::default();
    SessionConfig {
        format,
        window,
        reserve_output: 0,
        trigger: SessionConfig::DEFAULT_TRIGGER,
        target: SessionConfig::DEFAULT_TARGET,
        protected_recent: 2,
        policy: policy_named(policy, "p", &spec)
            .expect("policy")
            .expect("known"),
        estimator: spec.estimator().expect("estimator"),
        cache_breakpoints: false,
        reasoning: cutctx_formats::ReasoningMode::Strip,
        pinned_results: Default::default(),
        early: None,
    }
}

fn stand_in(_: &ProviderTranscript, r: &SummarizationRequest) -> Result<String, FormatError> {
    Ok(format!("summary of {} turns", r.turn_ids().len()))
}

/// One exchange of an agent loop in `format`: a user message, a tool call, its result and an
/// answer, `size` characters each, numbered `i`.
fn exchange(format: Format, i: usize, size: usize) -> Vec<Value> {
    let text = format!("{i} {}", "w".repeat(size));
    let id = format!("call_{i}");
    match format {
        Format::OpenAiChat => vec![
            json!({"role": "user", "content": text}),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}}]}),
            json!({"role": "tool", "tool_call_id": id, "content": text}),
            json!({"role": "assistant", "content": text}),
        ],
        Format::OpenAiResponses => vec![
            json!({"role": "user", "content": text}),
            json!({"type": "function_call", "call_id": id, "name": "f", "arguments": "{}"}),
            json!({"type": "function_call_output", "call_id": id, "output": text}),
            json!({"role": "assistant", "content": text}),
        ],
        Format::Anthropic => vec![
            json!({"role": "user", "content": text}),
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "f", "input": {}}]}),
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": text}]}),
            json!({"role": "assistant", "content": text}),
        ],
    }
}

fn request(format: Format, messages: &[Value]) -> Value {
    match format {
        Format::OpenAiChat => {
            let mut all = vec![json!({"role": "system", "content": "Be brief."})];
            all.extend_from_slice(messages);
            json!({"model": "m", "messages": all})
        }
        Format::OpenAiResponses => {
            json!({"model": "m", "instructions": "Be brief.", "input": messages})
        }
        Format::Anthropic => {
            json!({"model": "m", "max_tokens": 100, "system": "Be brief.", "messages": messages})
        }
    }
}

/// Runs a session over the calls of a loop of `sizes.len()` exchanges (one call before each
/// model turn), checking at every call that a request not fired on is the previous one plus
/// the new messages. Returns every step.
fn run(config: &SessionConfig, sizes: &[usize]) -> Vec<Step> {
    let format = config.format;
    let mut messages: Vec<Value> = Vec::new();
    let mut state: Option<SessionState> = None;
    let mut steps: Vec<Step> = Vec::new();
    for (i, &size) in sizes.iter().enumerate() {
        let ex = exchange(format, i, size);
        for cut in [1, 3] {
            let mut now = messages.clone();
            now.extend_from_slice(&ex[..cut]);
            let req = request(format, &now);
            let s = step(config, state.as_ref(), &req, &mut stand_in).expect("a step");
            validate(format, &s.request).expect("a valid request");
            assert!(s.restarted.is_none());
            if let (Some(prev), None) = (steps.last(), &s.firing) {
                let before = history(format, &prev.request);
                let after = history(format, &s.request);
                assert_eq!(
                    &after[..before.len()],
                    before,
                    "the prefix is kept byte for byte"
                );
            }
            if s.firing.is_none() {
                assert!(
                    s.prompt_tokens <= config.window,
                    "fires only over the trigger"
                );
            }
            state = Some(s.state.clone());
            steps.push(s);
        }
        messages.extend(ex);
    }
    steps
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn between_firings_every_request_extends_the_previous(
        sizes in prop::collection::vec(10usize..400, 4..24),
        window in 600u64..3_000,
        f in 0usize..3,
    ) {
        let format = Format::ALL[f];
        let steps = run(&config(format, window, "drop_oldest"), &sizes);
        // The same calls give the same bytes.
        let again = run(&config(format, window, "drop_oldest"), &sizes);
        for (a, b) in steps.iter().zip(&again) {
            prop_assert_eq!(&a.request, &b.request);
            prop_assert_eq!(a.state.to_json(), b.state.to_json());
        }
    }
}

#[test]
fn a_session_that_fits_sends_the_request_as_it_is() {
    let steps = run(
        &config(Format::OpenAiChat, 1_000_000, "drop_oldest"),
        &[100; 10],
    );
    assert!(steps.iter().all(|s| s.firing.is_none()));
    assert_eq!(steps.last().expect("steps").state.firings(), 0);
}

#[test]
fn it_fires_only_over_the_trigger_and_cuts_below_the_window() {
    for format in Format::ALL {
        let cfg = config(format, 1_500, "default_chain");
        let steps = run(&cfg, &[200; 16]);
        let firings: Vec<_> = steps.iter().filter_map(|s| s.firing.as_ref()).collect();
        assert!(
            !firings.is_empty(),
            "{format}: the loop outgrows the window"
        );
        assert!(
            firings.len() < steps.len() / 3,
            "{format}: it fires rarely ({} of {})",
            firings.len(),
            steps.len()
        );
        for f in firings {
            assert!(f.before_tokens > 1_500);
            assert!(
                f.after_tokens <= 1_500,
                "{format}: {} after",
                f.after_tokens
            );
        }
    }
}

#[test]
fn corrupt_and_foreign_states_are_refused() {
    let steps = run(&config(Format::OpenAiChat, 1_200, "drop_oldest"), &[200; 8]);
    let text = steps.last().expect("steps").state.to_json();
    let back = SessionState::from_json(&text, Format::OpenAiChat).expect("its own state");
    assert_eq!(back, steps.last().expect("steps").state);
    let edited = text.replacen("\"firings\":", "\"firings\":1", 1);
    let cases = [
        ("not json", "{".to_owned(), Format::OpenAiChat),
        ("not ours", "{\"a\":1}".to_owned(), Format::OpenAiChat),
        ("edited", edited, Format::OpenAiChat),
        (
            "other version",
            text.replace("\"cutctx_session\":1", "\"cutctx_session\":9"),
            Format::OpenAiChat,
        ),
        ("other format", text.clone(), Format::Anthropic),
    ];
    for (why, text, format) in cases {
        let err = SessionState::from_json(&text, format).expect_err(why);
        assert_eq!(err.code().as_str(), "VALIDATION_ERROR", "{why}");
    }
}

#[test]
fn a_rewound_or_edited_history_starts_a_new_session() {
    let cfg = config(Format::OpenAiChat, 100_000, "drop_oldest");
    let mut messages = Vec::new();
    for i in 0..5 {
        messages.extend(exchange(Format::OpenAiChat, i, 50));
    }
    let first = step(
        &cfg,
        None,
        &request(Format::OpenAiChat, &messages),
        &mut stand_in,
    )
    .expect("step");
    let rewound = step(
        &cfg,
        Some(&first.state),
        &request(Format::OpenAiChat, &messages[..8]),
        &mut stand_in,
    )
    .expect("step");
    assert_eq!(
        rewound.restarted,
        Some(Restart::Rewound {
            known: 21,
            given: 9
        })
    );
    let mut changed = messages.clone();
    changed[4] = json!({"role": "user", "content": "edited"});
    changed.push(json!({"role": "user", "content": "more"}));
    let s = step(
        &cfg,
        Some(&first.state),
        &request(Format::OpenAiChat, &changed),
        &mut stand_in,
    )
    .expect("step");
    assert_eq!(s.restarted, Some(Restart::Diverged { known: 21 }));
    let extended = step(
        &cfg,
        Some(&first.state),
        &request(
            Format::OpenAiChat,
            &[
                messages.clone(),
                vec![json!({"role": "user", "content": "more"})],
            ]
            .concat(),
        ),
        &mut stand_in,
    )
    .expect("step");
    assert_eq!(extended.restarted, None);
}

#[test]
fn an_untouchable_part_over_the_window_is_unsatisfiable() {
    let cfg = config(Format::OpenAiChat, 300, "drop_oldest");
    let mut messages = Vec::new();
    for i in 0..4 {
        messages.extend(exchange(Format::OpenAiChat, i, 600));
    }
    let err = step(
        &cfg,
        None,
        &request(Format::OpenAiChat, &messages),
        &mut stand_in,
    )
    .expect_err("too small");
    assert_eq!(err.code(), "COMPACTION_BUDGET_UNSATISFIABLE");
}

#[test]
fn anthropic_marks_the_prefix_end_and_keeps_the_users_marks() {
    let mut cfg = config(Format::Anthropic, 1_500, "drop_oldest");
    cfg.cache_breakpoints = true;
    let mut messages = Vec::new();
    for i in 0..12 {
        messages.extend(exchange(Format::Anthropic, i, 200));
    }
    let mut req = request(Format::Anthropic, &messages);
    req["system"] =
        json!([{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]);
    let s = step(&cfg, None, &req, &mut stand_in).expect("step");
    assert!(s.firing.is_some());
    let text = s.request.to_string();
    assert_eq!(
        text.matches("cache_control").count(),
        2,
        "the user's mark and one at the prefix end"
    );
    let last = history(Format::Anthropic, &s.request)
        .last()
        .expect("messages");
    assert!(last.to_string().contains("cache_control"));
    validate(Format::Anthropic, &s.request).expect("valid");
}

/// Claude Code's marks: one on the newest message, moved on at every call, and that message
/// written as a marked block, then as a string once the mark has moved. The session goes on
/// (no restart, its compacted prefix kept), and the mark it adds takes the client's one-hour
/// TTL, since the provider refuses a 5-minute mark ahead of a 1-hour one.
#[test]
fn a_client_that_moves_its_marks_keeps_its_session_and_its_ttl() {
    let mut cfg = config(Format::Anthropic, 3_000, "drop_oldest");
    cfg.cache_breakpoints = true;
    let one_hour = json!({"type": "ephemeral", "ttl": "1h"});
    // The newest message marked, as the client sends it; the others as plain strings.
    let marked = |messages: &[Value]| -> Value {
        let mut all = messages.to_vec();
        if let Some(last) = all.last_mut()
            && let Some(text) = last["content"].as_str().map(str::to_owned)
        {
            last["content"] = json!([{"type": "text", "text": text, "cache_control": one_hour}]);
        }
        let mut req = request(Format::Anthropic, &all);
        req["system"] = json!([{"type": "text", "text": "Be brief.", "cache_control": one_hour}]);
        req
    };
    let mut messages = Vec::new();
    let mut state: Option<SessionState> = None;
    let mut firings = 0;
    for i in 0..40 {
        messages.extend(exchange(Format::Anthropic, i, 400));
        let s = step(&cfg, state.as_ref(), &marked(&messages), &mut stand_in).expect("step");
        assert!(s.restarted.is_none(), "call {i} restarted the session");
        firings += usize::from(s.firing.is_some());
        validate(Format::Anthropic, &s.request).expect("valid");
        let text = s.request.to_string();
        assert!(text.matches("cache_control").count() <= 4, "call {i}");
        assert!(
            !text.contains(r#""cache_control":{"type":"ephemeral"}"#),
            "call {i}: a 5-minute mark"
        );
        state = Some(s.state);
    }
    assert!(firings >= 2, "only {firings} firings");
}

/// A Responses request that ends in `compaction_trigger` asks the provider to compact the
/// history itself: it goes as it came, whole, even over the window and after firings, and the
/// session starts afresh for the request that carries the provider's `compaction` item.
#[test]
fn a_compaction_trigger_goes_as_it_came_and_the_session_starts_afresh() {
    let cfg = config(Format::OpenAiResponses, 2_000, "drop_oldest");
    let mut messages = Vec::new();
    let mut state: Option<SessionState> = None;
    let mut fired = false;
    for i in 0..20 {
        messages.extend(exchange(Format::OpenAiResponses, i, 300));
        let s = step(
            &cfg,
            state.as_ref(),
            &request(Format::OpenAiResponses, &messages),
            &mut stand_in,
        )
        .expect("step");
        fired |= s.firing.is_some();
        state = Some(s.state);
    }
    assert!(fired, "the session never fired");
    let mut asking = messages.clone();
    asking.push(json!({"type": "compaction_trigger"}));
    let req = request(Format::OpenAiResponses, &asking);
    let s = step(&cfg, state.as_ref(), &req, &mut stand_in).expect("step");
    assert_eq!(s.request, req, "the trigger request went as it came");
    assert!(s.firing.is_none() && s.restarted.is_none());
    // The provider's answer replaces the history: the next request carries its compaction
    // item and goes on from a fresh session, with nothing of the old prefix.
    let next = vec![
        json!({"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"}),
        json!({"role": "user", "content": "go on"}),
    ];
    let req = request(Format::OpenAiResponses, &next);
    let after = step(&cfg, Some(&s.state), &req, &mut stand_in).expect("step");
    assert!(after.restarted.is_none());
    assert_eq!(after.request, req);
}

#[test]
fn push_decides_as_step_does_on_new_messages_alone() {
    let cfg = config(Format::OpenAiChat, 3_000, "drop_oldest");
    let mut messages = exchange(Format::OpenAiChat, 0, 100);
    let first = step(
        &cfg,
        None,
        &request(Format::OpenAiChat, &messages),
        &mut stand_in,
    )
    .expect("step");
    let fixed = cutctx_session::fixed_tokens(
        Format::OpenAiChat,
        &request(Format::OpenAiChat, &messages),
        cfg.estimator.as_ref(),
    )
    .expect("count");
    let mut state = first.state;
    for i in 1..40 {
        let new = exchange(Format::OpenAiChat, i, 100);
        messages.extend(new.clone());
        let by_step = step(
            &cfg,
            Some(&state),
            &request(Format::OpenAiChat, &messages),
            &mut stand_in,
        )
        .expect("step");
        let decision = push(&cfg, &mut state, fixed, &new).expect("push");
        match decision {
            Decision::Append { prompt_tokens } => {
                assert!(by_step.firing.is_none());
                assert_eq!(prompt_tokens, by_step.prompt_tokens);
                assert_eq!(state, by_step.state);
            }
            Decision::Fire { prompt_tokens } => {
                assert!(by_step.firing.is_some());
                assert_eq!(prompt_tokens, by_step.prompt_tokens);
                // Left as it was: step from it over the whole history is the firing itself.
                let again = step(
                    &cfg,
                    Some(&state),
                    &request(Format::OpenAiChat, &messages),
                    &mut stand_in,
                )
                .expect("step");
                assert_eq!(again.state, by_step.state);
                assert_eq!(again.request, by_step.request);
                return;
            }
        }
    }
    panic!("the loop outgrows the window");
}

/// Every Responses call item type the format knows is a model turn of a run's calls (those the
/// replay replays and early firing counts), as are reasoning and a server tool's items;
/// outputs and prompts are not. The replay once knew two of the five call types, so a run of
/// shell calls was priced as a single call.
#[test]
fn the_calls_of_a_run_are_where_the_format_says_a_model_item_is() {
    let mut items = vec![json!({"role": "user", "content": "Go."})];
    let calls = cutctx_formats::openai_responses::CALL_TYPES;
    for (i, ty) in calls.iter().enumerate() {
        items.push(json!({"type": ty, "call_id": format!("c{i}"), "id": format!("fc{i}")}));
        items.push(
            json!({"type": format!("{ty}_output"), "call_id": format!("c{i}"), "output": "ok"}),
        );
    }
    items.push(json!({"type": "reasoning", "id": "rs1", "summary": []}));
    items.push(json!({"type": "web_search_call", "id": "ws1", "status": "completed"}));
    items.push(json!({"type": "function_call_output", "call_id": "c0", "output": "late"}));
    items.push(json!({"type": "web_search_call", "id": "ws2", "status": "completed"}));
    items.push(json!({"role": "assistant", "content": "Done."}));
    let points = cutctx_session::call_points(Format::OpenAiResponses, &items);
    // A call at each call item (each follows the prompt or an output), one at the reasoning
    // (the search and the answer after it are the same call's), and one at the second search.
    let mut expected: Vec<usize> = (0..calls.len()).map(|i| 1 + 2 * i).collect();
    expected.extend([1 + 2 * calls.len(), 4 + 2 * calls.len()]);
    assert_eq!(points, expected);
    let chat = [
        json!({"role": "user", "content": "Go."}),
        json!({"role": "assistant", "content": "On it."}),
        json!({"role": "tool", "tool_call_id": "c1", "content": "ok"}),
        json!({"role": "assistant", "content": "Done."}),
    ];
    assert_eq!(
        cutctx_session::call_points(Format::OpenAiChat, &chat),
        [1, 3]
    );
}

/// An Anthropic agent run with signed thinking: `turns` assistant messages, each a thinking
/// block of `thought` characters and a `tool_use`, each answered by a result of `size`
/// characters; it ends with the last result (a tool loop in progress) when `open`, else with
/// the model's answer.
fn thinking_run(turns: usize, thought: usize, size: usize, open: bool) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "Audit the repository."})];
    for i in 0..turns {
        messages.push(json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "t".repeat(thought), "signature": format!("sig-{i}")},
            {"type": "tool_use", "id": format!("toolu_{i}"), "name": "read", "input": {}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{i}"), "content": "r".repeat(size)}]}));
    }
    if !open {
        messages.push(json!({"role": "assistant", "content": "Done."}));
    }
    json!({"model": "m", "max_tokens": 100, "thinking": {"type": "adaptive"}, "messages": messages})
}

#[test]
fn a_firing_inside_a_tool_loop_with_reasoning_waits_while_the_request_fits() {
    let run = thinking_run(6, 400, 2000, true);
    let estimator = cutctx_policies::CharRatioEstimator::default();
    let size = prompt_tokens(Format::Anthropic, &run, &estimator).expect("count");
    // Over the trigger, under the window: held off, sent as it is.
    let mut cfg = config(Format::Anthropic, size + 10, "observation_masking");
    cfg.trigger = 0.5;
    let s = step(&cfg, None, &run, &mut stand_in).expect("steps");
    assert!(s.firing.is_none());
    assert_eq!(
        s.held_off,
        Some(1),
        "the loop began at the first assistant message"
    );
    assert_eq!(s.request, run);
    // With keep, nothing is invalidated in the provider's eyes it is not told of: it fires.
    cfg.reasoning = cutctx_formats::ReasoningMode::Keep;
    let s = step(&cfg, None, &run, &mut stand_in).expect("steps");
    assert!(s.firing.is_some() && s.held_off.is_none());
    // Over the window, it must fire, and strips what it invalidates.
    let mut cfg = config(Format::Anthropic, size * 6 / 10, "observation_masking");
    cfg.trigger = 0.5;
    let s = step(&cfg, None, &run, &mut stand_in).expect("steps");
    let firing = s.firing.expect("fired");
    assert!(!firing.reasoning.is_empty());
    assert!(cutctx_formats::stale_reasoning(Format::Anthropic, &run, &s.request).is_empty());
    // A closed loop fires at the trigger.
    let closed = thinking_run(6, 400, 2000, false);
    let mut cfg = config(Format::Anthropic, size + 100, "observation_masking");
    cfg.trigger = 0.5;
    let s = step(&cfg, None, &closed, &mut stand_in).expect("steps");
    assert!(s.firing.is_some() && s.held_off.is_none());
}

#[test]
fn early_firing_fires_below_the_trigger_only_where_the_cache_model_says_it_pays() {
    // 120 exchanges of 400 characters into a window that they never fill: without early
    // firing nothing fires; with Anthropic's prices it fires below the trigger, keeping the
    // prefix byte for byte between firings (checked by `run`), and each firing sends less.
    let sizes = vec![400; 120];
    let cfg = config(Format::Anthropic, 100_000, "observation_masking");
    assert!(run(&cfg, &sizes).iter().all(|s| s.firing.is_none()));
    let mut cfg = config(Format::Anthropic, 100_000, "observation_masking");
    cfg.early = Some(cutctx_session::EarlyFiring::from_prices(
        &cutctx_session::PriceTable::anthropic(),
    ));
    let steps = run(&cfg, &sizes);
    let firings: Vec<_> = steps.iter().filter_map(|s| s.firing.as_ref()).collect();
    assert!(!firings.is_empty(), "early firing fired");
    for f in &firings {
        assert!(f.before_tokens < 100_000, "below the trigger");
        assert!(f.after_tokens < f.before_tokens, "and it compacted");
    }
    // The in-memory path leaves every call to step, which holds the early rule.
    let mut state = steps.last().expect("steps").state.clone();
    let next = [json!({"role": "user", "content": "next"})];
    assert!(matches!(
        push(&cfg, &mut state, 10, &next).expect("push"),
        Decision::Fire { .. }
    ));
    // Free cache reads make every firing a loss: none.
    cfg.early = Some(cutctx_session::EarlyFiring {
        cache_read: 0.0,
        cache_write: 1.0,
    });
    assert!(run(&cfg, &sizes).iter().all(|s| s.firing.is_none()));
}

#[test]
fn a_manual_thinking_loop_over_the_window_sends_the_sessions_own_request_not_the_history() {
    // A closed run fires; the next call ends in a manual-thinking tool loop over the window,
    // where any compaction would invalidate the thinking its last assistant message must
    // start with. The session holds off, over the window, with its own request: the
    // compacted prefix and the new messages, never the whole history, and never an error.
    let mut run = thinking_run(6, 400, 2000, false);
    run["thinking"] = json!({"type": "enabled", "budget_tokens": 1024});
    let estimator = cutctx_policies::CharRatioEstimator::default();
    let size = prompt_tokens(Format::Anthropic, &run, &estimator).expect("count");
    let mut cfg = config(Format::Anthropic, size * 6 / 10, "observation_masking");
    cfg.trigger = 0.5;
    let first = step(&cfg, None, &run, &mut stand_in).expect("steps");
    assert!(
        first.firing.is_some(),
        "the closed run over the window fires"
    );
    let mut longer = run.clone();
    let list = longer["messages"].as_array_mut().expect("a list");
    list.push(json!({"role": "user", "content": "Now the tests."}));
    let loop_start = list.len();
    for i in 0..4 {
        list.push(json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "u".repeat(400), "signature": format!("late-{i}")},
            {"type": "tool_use", "id": format!("toolu_late_{i}"), "name": "read", "input": {}}]}));
        list.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_late_{i}"), "content": "s".repeat(3000)}]}));
    }
    let s = step(&cfg, Some(&first.state), &longer, &mut stand_in)
        .expect("holds off instead of refusing");
    assert!(s.firing.is_none());
    assert!(s.over_window, "the request is over the window, and says so");
    assert_eq!(
        s.held_off,
        Some(loop_start),
        "the loop starts at its first assistant message"
    );
    let sent = s.request["messages"].as_array().expect("a list");
    let before = first.request["messages"].as_array().expect("a list");
    let (sent_tokens, history_tokens) = (
        prompt_tokens(Format::Anthropic, &s.request, &estimator).expect("count"),
        prompt_tokens(Format::Anthropic, &longer, &estimator).expect("count"),
    );
    assert!(
        sent_tokens < history_tokens,
        "{sent_tokens} tokens sent of {history_tokens}"
    );
    assert_eq!(
        &sent[..before.len()],
        &before[..],
        "the compacted prefix, as sent last time"
    );
    assert_eq!(
        &sent[before.len()..],
        &longer["messages"].as_array().expect("a list")
            [run["messages"].as_array().expect("a list").len()..],
        "the new messages appended verbatim, thinking included"
    );
    // The loop's answer lets the firing happen.
    let mut answered = longer.clone();
    answered["messages"]
        .as_array_mut()
        .expect("a list")
        .push(json!({"role": "assistant", "content": "All read."}));
    answered["messages"]
        .as_array_mut()
        .expect("a list")
        .push(json!({"role": "user", "content": "Summarize."}));
    let s = step(&cfg, Some(&s.state), &answered, &mut stand_in).expect("steps");
    assert!(s.firing.is_some() && !s.over_window);
}

#[test]
fn a_firing_keeps_the_results_it_is_told_to_pin_and_their_calls() {
    for format in Format::ALL {
        let mut messages = Vec::new();
        for i in 0..12 {
            messages.extend(exchange(format, i, 400));
        }
        let req = request(format, &messages);
        let unpinned = config(format, 3_000, "default_chain");
        let plain = step(&unpinned, None, &req, &mut stand_in).expect("a step");
        let mut pinned = config(format, 3_000, "default_chain");
        pinned.pinned_results = ["call_1".to_owned()].into();
        let kept = step(&pinned, None, &req, &mut stand_in).expect("a step");
        assert!(
            plain.firing.is_some() && kept.firing.is_some(),
            "{format}: both fire"
        );
        validate(format, &kept.request).expect("a valid request");
        let result = &exchange(format, 1, 400)[2];
        let call = &exchange(format, 1, 400)[1];
        let sent = history(format, &kept.request);
        assert!(
            sent.contains(result),
            "{format}: the pinned result is sent as it was"
        );
        assert!(sent.contains(call), "{format}: and its call");
        assert!(
            !history(format, &plain.request).contains(result),
            "{format}: without the pin the firing takes it"
        );
    }
}

#[test]
fn a_session_firing_keeps_the_task_statement() {
    for format in Format::ALL {
        let mut messages = Vec::new();
        for i in 0..12 {
            messages.extend(exchange(format, i, 400));
        }
        let task = messages[0].clone();
        let req = request(format, &messages);
        let cfg = config(format, 3_000, "default_chain");
        let fired = step(&cfg, None, &req, &mut stand_in).expect("a step");
        assert!(fired.firing.is_some(), "{format}: fires");
        validate(format, &fired.request).expect("a valid request");
        // Sent as it was (Anthropic merges it with a summary that follows it into one user
        // message, its text block unchanged).
        let text = task["content"].as_str().expect("text");
        let first = history(format, &fired.request)
            .iter()
            .find(|m| m["role"] == "user")
            .expect("a user message");
        assert!(
            first == &task || first["content"][0]["text"].as_str() == Some(text),
            "{format}: the first user message is sent as it was: {first}"
        );
    }
}

/// Replaces `from` with `to` in the text of `message` (wherever the format keeps it).
fn with_text(message: &Value, from: &str, to: &str) -> Value {
    serde_json::from_str(&message.to_string().replacen(from, to, 1)).expect("JSON")
}

#[test]
fn a_firing_keeps_the_result_the_latest_model_message_refers_to() {
    for format in Format::ALL {
        let mut messages = Vec::new();
        for i in 0..12 {
            messages.extend(exchange(format, i, 400));
        }
        // Exchange 1's result is the first to show a file the last answer goes on to open.
        let result = with_text(&messages[6], "1 w", "1 src/app_io.py w");
        messages[6] = result.clone();
        let plain = messages.clone();
        let last = messages.len() - 1;
        messages[last] = with_text(&messages[last], "11 w", "11 now open src/app_io.py w");
        let cfg = config(format, 3_000, "default_chain");
        let referred =
            step(&cfg, None, &request(format, &messages), &mut stand_in).expect("a step");
        let unreferred = step(&cfg, None, &request(format, &plain), &mut stand_in).expect("a step");
        assert!(
            referred.firing.is_some() && unreferred.firing.is_some(),
            "{format}: both fire"
        );
        validate(format, &referred.request).expect("a valid request");
        assert!(
            history(format, &referred.request).contains(&result),
            "{format}: the result referred to is sent as it was"
        );
        assert!(
            !history(format, &unreferred.request).contains(&result),
            "{format}: unreferred, the firing takes it"
        );
    }
}

/// Chat messages: a long task, eight small exchanges, a short turn and then `latest`.
fn task_run(latest: &str) -> Vec<Value> {
    let mut messages =
        vec![json!({"role": "user", "content": format!("task {}", "t".repeat(1_600))})];
    for i in 0..8 {
        messages.extend(exchange(Format::OpenAiChat, i + 10, 200));
    }
    messages.push(json!({"role": "user", "content": "go on"}));
    messages.push(json!({"role": "assistant", "content": "ok"}));
    messages.push(json!({"role": "user", "content": latest}));
    messages
}

#[test]
fn a_firing_keeps_the_latest_user_message_beyond_the_protected_turns() {
    for format in Format::ALL {
        let mut messages = Vec::new();
        for i in 0..10 {
            messages.extend(exchange(format, i, 400));
        }
        let latest = json!({"role": "user", "content": "Now check the other branch too."});
        messages.push(latest.clone());
        // A tool loop follows it: the protected turns are the loop's last call and result.
        for i in 20..28 {
            messages.extend(exchange(format, i, 400)[1..3].iter().cloned());
        }
        let cfg = config(format, 3_000, "default_chain");
        let s = step(&cfg, None, &request(format, &messages), &mut stand_in).expect("a step");
        assert!(s.firing.is_some(), "{format}: fires");
        validate(format, &s.request).expect("a valid request");
        assert!(
            history(format, &s.request).contains(&latest),
            "{format}: the latest user message is kept"
        );
    }
}

#[test]
fn a_task_a_firing_had_to_let_go_comes_back_at_the_first_call_where_it_fits() {
    let format = Format::OpenAiChat;
    let cfg = config(format, 1_000, "default_chain");
    // The latest user message is too long to go with the task: the firing keeps it alone.
    let mut messages = task_run(&format!("paste {}", "p".repeat(2_400)));
    let task = messages[0].clone();
    let first = step(&cfg, None, &request(format, &messages), &mut stand_in).expect("a step");
    assert!(first.firing.is_some(), "fires");
    assert!(
        !history(format, &first.request).contains(&task),
        "no room for the task"
    );
    // The next user message is short: the session fires again to send the task. The fast
    // path that reads the new messages alone leaves that call to step, as the rule says.
    messages.push(json!({"role": "assistant", "content": "ok"}));
    messages.push(json!({"role": "user", "content": "thanks, go on"}));
    let fixed =
        cutctx_session::fixed_tokens(format, &request(format, &messages), cfg.estimator.as_ref())
            .expect("count");
    let mut pushed = first.state.clone();
    let new = &messages[messages.len() - 2..];
    assert!(matches!(
        push(&cfg, &mut pushed, fixed, new).expect("push"),
        Decision::Fire { .. }
    ));
    let next = step(
        &cfg,
        Some(&first.state),
        &request(format, &messages),
        &mut stand_in,
    )
    .expect("a step");
    assert!(next.prompt_tokens <= cfg.window, "nothing forces a firing");
    assert!(next.firing.is_some(), "it fires to bring the task back");
    let sent = history(format, &next.request);
    assert!(sent.contains(&task) && sent.contains(&messages[messages.len() - 1]));
    // Once back, the calls after it extend the request as usual.
    messages.push(json!({"role": "assistant", "content": "ok"}));
    messages.push(json!({"role": "user", "content": "and again"}));
    let after = step(
        &cfg,
        Some(&next.state),
        &request(format, &messages),
        &mut stand_in,
    )
    .expect("a step");
    assert!(after.firing.is_none());
}

mod ahead;
