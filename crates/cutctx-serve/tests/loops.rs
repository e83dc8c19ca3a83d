//! Agent loops through the proxy, 100 calls each, with a window small enough that the session
//! fires: every request the provider receives fits the window (by cutctx's own estimate), is
//! valid by the provider's rules (cutctx's own validation), re-sends the request before it as
//! its prefix except at a firing, and never carries a signed reasoning block after a prefix
//! other than the one it was produced after. Then sessions: concurrency, conversations that
//! share their first messages, `/v1/compact`, receipts, the provider's count; and the real
//! coding-agent runs of `../shared/realworld/long-runs`, replayed call by call (skipped with a
//! message when `../shared` is absent).

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{Reply, Upstream, call, proxy};
use cutctx::formats::Format;
use serde_json::{Value, json};

const WINDOW: u64 = 3000;

/// One simulated agent: its whole history, as a client keeps it.
struct Agent {
    format: Format,
    base: Value,
    history: Vec<Value>,
    tag: String,
}

fn result_text(tag: &str, i: usize) -> String {
    format!("{tag} result {i}: ") + &"lorem ipsum dolor sit amet ".repeat(20)
}

impl Agent {
    fn new(format: Format, tag: &str) -> Self {
        let (base, history) = match format {
            Format::OpenAiChat => (
                json!({"model": "gpt-4o", "tools": [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]}),
                vec![
                    json!({"role": "system", "content": "You are a careful agent."}),
                    json!({"role": "user", "content": format!("{tag}: read the files")}),
                ],
            ),
            Format::OpenAiResponses => (
                json!({"model": "gpt-5", "instructions": "You are a careful agent."}),
                vec![
                    json!({"type": "message", "role": "user", "content": format!("{tag}: read the files")}),
                ],
            ),
            Format::Anthropic => (
                json!({"model": "claude-sonnet-4-5", "max_tokens": 256, "system": "You are a careful agent.",
                       "thinking": {"type": "enabled", "budget_tokens": 1024}}),
                vec![json!({"role": "user", "content": format!("{tag}: read the files")})],
            ),
        };
        Self {
            format,
            base,
            history,
            tag: tag.to_owned(),
        }
    }

    fn key(&self) -> &'static str {
        match self.format {
            Format::OpenAiResponses => "input",
            Format::OpenAiChat | Format::Anthropic => "messages",
        }
    }

    fn request(&self) -> Vec<u8> {
        let mut r = self.base.clone();
        r[self.key()] = Value::from(self.history.clone());
        serde_json::to_vec(&r).expect("json")
    }

    /// What the model "answered" to call `i`, and the next turn: a tool call and its result,
    /// every tenth call an answer and a new question.
    fn advance(&mut self, i: usize) {
        let tag = self.tag.clone();
        let answer = i % 10 == 9;
        match self.format {
            Format::OpenAiChat => {
                if answer {
                    self.history
                        .push(json!({"role": "assistant", "content": format!("{tag} answer {i}")}));
                    self.history
                        .push(json!({"role": "user", "content": format!("{tag} question {i}")}));
                } else {
                    self.history.push(json!({"role": "assistant", "content": null, "tool_calls": [
                        {"id": format!("c{i}"), "type": "function", "function": {"name": "read", "arguments": format!("{{\"n\":{i}}}")}}]}));
                    self.history.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": result_text(&tag, i)}));
                }
            }
            Format::OpenAiResponses => {
                self.history.push(json!({"type": "reasoning", "id": format!("rs_{i}"), "summary": [], "encrypted_content": format!("sig-{i}")}));
                if answer {
                    self.history.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": format!("{tag} answer {i}")}]}));
                    self.history.push(json!({"type": "message", "role": "user", "content": format!("{tag} question {i}")}));
                } else {
                    self.history.push(json!({"type": "function_call", "call_id": format!("c{i}"), "name": "read", "arguments": format!("{{\"n\":{i}}}")}));
                    self.history.push(json!({"type": "function_call_output", "call_id": format!("c{i}"), "output": result_text(&tag, i)}));
                }
            }
            Format::Anthropic => {
                let thinking = json!({"type": "thinking", "thinking": format!("thinking {i}"), "signature": format!("sig-{i}")});
                if answer {
                    self.history.push(json!({"role": "assistant", "content": [thinking, {"type": "text", "text": format!("{tag} answer {i}")}]}));
                    self.history
                        .push(json!({"role": "user", "content": format!("{tag} question {i}")}));
                } else {
                    self.history.push(json!({"role": "assistant", "content": [thinking,
                        {"type": "tool_use", "id": format!("t{i}"), "name": "read", "input": {"n": i}}]}));
                    self.history.push(json!({"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": format!("t{i}"), "content": result_text(&tag, i)}]}));
                }
            }
        }
    }
}

fn path(format: Format) -> &'static str {
    match format {
        Format::OpenAiChat => "/v1/chat/completions",
        Format::OpenAiResponses => "/v1/responses",
        Format::Anthropic => "/v1/messages",
    }
}

/// The signature of a signed reasoning block in message `m`, if it has one.
fn signature(format: Format, m: &Value) -> Option<String> {
    match format {
        Format::OpenAiResponses => m
            .get("encrypted_content")
            .and_then(Value::as_str)
            .map(str::to_owned),
        Format::Anthropic => m["content"].as_array().and_then(|c| {
            c.iter().find_map(|b| {
                b.get("signature")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
        }),
        Format::OpenAiChat => None,
    }
}

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{name} in {text}"))
}

/// Runs `calls` calls of one agent and checks every request the upstream received.
fn agent_loop(format: Format, calls: usize) {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({"id": "r"})));
    let p = proxy(&up, |o| {
        o.window = Some(WINDOW);
        if format == Format::Anthropic {
            // A tool loop with thinking cannot be compacted before its answer (that would
            // invalidate the thinking it must start with): a trigger below the window lets the
            // firing wait for the answer while the requests still fit.
            o.tuning.trigger = Some(0.5);
        }
    });
    let mut agent = Agent::new(format, "A");
    for i in 0..calls {
        let r = call(
            p.addr(),
            "POST",
            path(format),
            &[("content-type", "application/json")],
            &agent.request(),
        );
        assert_eq!(r.status, 200, "call {i}");
        agent.advance(i);
    }
    let sent = up.requests();
    assert_eq!(sent.len(), calls);
    let estimator = cutctx::CharRatioEstimator::default();
    let key = agent.key();
    let lists: Vec<Vec<Value>> = sent
        .iter()
        .map(|r| r.json()[key].as_array().expect("list").clone())
        .collect();
    // Where each signed block was produced: after the message list of the call it answered.
    let mut produced_after: BTreeMap<String, usize> = BTreeMap::new();
    let mut breaks = 0;
    for (j, r) in sent.iter().enumerate() {
        let doc = r.json();
        let tokens = cutctx::session::prompt_tokens(format, &doc, &estimator).expect("counted");
        assert!(
            tokens <= WINDOW,
            "call {j}: {tokens} tokens over the window {WINDOW}"
        );
        if let Err(v) = cutctx::formats::validate(format, &doc) {
            panic!("call {j} is not valid: {v}");
        }
        for (k, v) in doc.as_object().expect("object") {
            if k != key {
                assert_eq!(v, &agent.base[k], "call {j}: {k} is sent unchanged");
            }
        }
        let list = &lists[j];
        if j > 0 && !list.starts_with(&lists[j - 1]) {
            breaks += 1;
        }
        for (pos, m) in list.iter().enumerate() {
            if let Some(sig) = signature(format, m) {
                let n: usize = sig
                    .trim_start_matches("sig-")
                    .parse()
                    .expect("a signature we wrote");
                produced_after.entry(sig.clone()).or_insert(n);
                assert_eq!(
                    &list[..pos],
                    &lists[n][..],
                    "call {j}: signed block {sig} follows a prefix other than the one it was produced after"
                );
            }
        }
    }
    let m = call(p.addr(), "GET", "/metrics", &[], b"").text();
    let firings = metric(&m, "cutctx_serve_firings_total");
    assert!(firings >= 2, "the loop fired: {firings}");
    assert!(firings <= 30, "it fires rarely: {firings}");
    assert_eq!(breaks, firings, "the prefix changes only at a firing");
    assert!(metric(&m, "cutctx_serve_saved_units_total") > 0);
    assert_eq!(metric(&m, "cutctx_serve_fail_open_total"), 0);
    if format != Format::OpenAiChat {
        assert!(!produced_after.is_empty(), "signed blocks were sent");
    }
}

#[test]
fn an_openai_chat_loop_fits_stays_valid_and_prefix_stable() {
    agent_loop(Format::OpenAiChat, 100);
}

#[test]
fn an_openai_responses_loop_fits_stays_valid_and_prefix_stable() {
    agent_loop(Format::OpenAiResponses, 100);
}

#[test]
fn an_anthropic_loop_with_thinking_fits_and_never_resends_a_signed_block_after_a_changed_prefix() {
    agent_loop(Format::Anthropic, 100);
}

#[test]
fn no_call_waits_for_another_calls_response_not_even_its_own_sessions() {
    let up = Upstream::start(|_, _| {
        Reply::Late(
            Duration::from_millis(1000),
            Box::new(Reply::json(200, &json!({}))),
        )
    });
    let p = proxy(&up, |_| {});
    let addr = p.addr();
    let run = |sessions: [&'static str; 2]| {
        let threads: Vec<_> = sessions
            .into_iter()
            .map(|s| {
                std::thread::spawn(move || {
                    let body = Agent::new(Format::OpenAiChat, "A").request();
                    call(
                        addr,
                        "POST",
                        "/v1/chat/completions",
                        &[("x-cutctx-session", s)],
                        &body,
                    )
                    .status
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("thread"))
            .collect::<Vec<_>>()
    };
    // The session's lock covers its step and commit, not the response: a slow answer holds
    // no one back.
    assert_eq!(run(["one", "one"]), [200, 200]);
    assert_eq!(
        up.most_in_flight.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "one session's calls are upstream together"
    );
    assert_eq!(run(["two", "three"]), [200, 200]);
    assert_eq!(
        up.most_in_flight.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "two sessions run beside each other"
    );
}

#[test]
fn conversations_sharing_their_first_messages_never_get_each_others_compactions() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let p = proxy(&up, |o| o.window = Some(WINDOW));
    // Both start with the same system and user message; they differ from the first answer on.
    let mut a = Agent::new(Format::OpenAiChat, "A");
    let mut b = Agent::new(Format::OpenAiChat, "A");
    b.tag = "B".into();
    for i in 0..60 {
        for agent in [&mut a, &mut b] {
            assert_eq!(
                call(
                    p.addr(),
                    "POST",
                    "/v1/chat/completions",
                    &[],
                    &agent.request()
                )
                .status,
                200
            );
            agent.advance(i);
        }
    }
    let sent = up.requests();
    let mut last: BTreeMap<bool, Vec<Value>> = BTreeMap::new();
    let mut breaks = 0;
    for (j, r) in sent.iter().enumerate() {
        let text = String::from_utf8_lossy(&r.body).into_owned();
        let is_b = j % 2 == 1;
        let (own, other) = if is_b { ("B ", "A ") } else { ("A ", "B ") };
        assert!(
            !text.contains(&format!("{other}result")) && !text.contains(&format!("{other}answer")),
            "call {j} carries the other conversation"
        );
        assert!(j < 2 || text.contains(own), "call {j} is its own");
        let list = r.json()["messages"].as_array().expect("messages").clone();
        if let Some(prev) = last.get(&is_b)
            && !list.starts_with(prev)
        {
            breaks += 1;
        }
        last.insert(is_b, list);
    }
    let m = call(p.addr(), "GET", "/metrics", &[], b"").text();
    let firings = metric(&m, "cutctx_serve_firings_total");
    assert!(firings >= 2);
    assert_eq!(
        breaks, firings,
        "each conversation's prefix changes only at its own firings"
    );
}

#[test]
fn compact_answers_what_would_be_sent_and_the_session_continues_from_it() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let p = proxy(&up, |o| o.window = Some(WINDOW));
    let mut agent = Agent::new(Format::Anthropic, "A");
    for i in 0..40 {
        agent.advance(i);
    }
    let body = agent.request();
    let headers = [("x-cutctx-session", "c1")];
    // The body's shape names the format when the header does not.
    let r = call(p.addr(), "POST", "/v1/compact", &headers, &body);
    assert_eq!(r.status, 200);
    let compacted = r.json();
    assert!(r.body.len() < body.len() / 2, "it compacted");
    assert!(up.requests().is_empty(), "nothing was forwarded");
    cutctx::formats::validate(Format::Anthropic, &compacted).expect("valid");
    agent.advance(40);
    let r = call(p.addr(), "POST", "/v1/messages", &headers, &agent.request());
    assert_eq!(r.status, 200);
    let sent = up.requests()[0].json();
    let before = compacted["messages"].as_array().expect("messages");
    let after = sent["messages"].as_array().expect("messages");
    assert!(
        after.starts_with(before),
        "the call after /v1/compact re-sends its prefix"
    );
    let r = call(
        p.addr(),
        "POST",
        "/v1/compact",
        &[("x-cutctx-format", "openai-chat")],
        br#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}"#,
    );
    assert_eq!(
        r.body,
        br#"{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}"#
    );
}

#[test]
fn a_receipt_is_appended_at_each_firing() {
    let dir = common::scratch("ledger");
    let ledger = dir.join("ledger.jsonl");
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let p = proxy(&up, |o| {
        o.window = Some(WINDOW);
        o.ledger = Some(ledger.clone());
    });
    let mut agent = Agent::new(Format::OpenAiChat, "A");
    for i in 0..50 {
        assert_eq!(
            call(
                p.addr(),
                "POST",
                "/v1/chat/completions",
                &[],
                &agent.request()
            )
            .status,
            200
        );
        agent.advance(i);
    }
    let m = call(p.addr(), "GET", "/metrics", &[], b"").text();
    let firings = metric(&m, "cutctx_serve_firings_total");
    assert!(firings >= 1);
    let text = std::fs::read_to_string(&ledger).expect("the ledger");
    assert_eq!(
        text.lines().count() as u64,
        firings,
        "one receipt per firing"
    );
    let verdict = cutctx::ledger::ledger::verify_file(&ledger, false);
    assert_eq!(verdict.ok, Some(true), "the ledger verifies");
}

#[test]
fn the_providers_count_calibrates_the_window() {
    // A provider that counts twice what cutctx estimates: once calibrated, the proxy keeps
    // the provider's count within the window, not its own estimate.
    let up = Upstream::start(|r, _| {
        let doc = r.json();
        let t = cutctx::session::prompt_tokens(
            Format::OpenAiChat,
            &doc,
            &cutctx::CharRatioEstimator::default(),
        )
        .expect("counted");
        Reply::json(
            200,
            &json!({"usage": {"prompt_tokens": 2 * t, "prompt_tokens_details": {"cached_tokens": t}}}),
        )
    });
    let p = proxy(&up, |o| o.window = Some(WINDOW));
    let mut agent = Agent::new(Format::OpenAiChat, "A");
    for i in 0..60 {
        assert_eq!(
            call(
                p.addr(),
                "POST",
                "/v1/chat/completions",
                &[],
                &agent.request()
            )
            .status,
            200
        );
        // The usage is recorded before the session's lock is released: the next call sees it.
        agent.advance(i);
    }
    let estimator = cutctx::CharRatioEstimator::default();
    let most = up
        .requests()
        .iter()
        .map(|r| {
            cutctx::session::prompt_tokens(Format::OpenAiChat, &r.json(), &estimator)
                .expect("counted")
        })
        .max()
        .expect("requests");
    assert!(
        2 * most <= WINDOW,
        "the provider's count {} fits the window {WINDOW}",
        2 * most
    );
    assert!(2 * most > WINDOW / 2, "and the window is used: {most}");
    let m = call(p.addr(), "GET", "/metrics", &[], b"").text();
    assert!(metric(&m, "cutctx_serve_provider_cached_tokens_total") > 0);
    assert!(metric(&m, "cutctx_serve_firings_total") >= 1);
}

#[test]
fn real_coding_agent_runs_replayed_call_by_call_through_the_proxy() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/realworld/long-runs");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("skipped: ../shared/realworld/long-runs is absent");
        return;
    };
    let mut files: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".chat.json"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let estimator = cutctx::CharRatioEstimator::default();
    let format = Format::OpenAiChat;
    let (mut calls, mut fired_runs, mut unchanged_over) = (0, 0, 0);
    for file in &files {
        let run: Value =
            serde_json::from_slice(&std::fs::read(file).expect("a run")).expect("json");
        let messages = run["messages"].as_array().expect("messages").clone();
        let whole = cutctx::session::prompt_tokens(format, &run, &estimator).expect("counted");
        // Half of the run's final size: every run outgrows it.
        let window = whole / 2;
        let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
        let p = proxy(&up, |o| o.window = Some(window));
        let points = cutctx::session::call_points(format, &messages);
        let mut previous: Option<Vec<Value>> = None;
        let mut breaks = 0;
        for (j, &n) in points.iter().enumerate() {
            let mut request = run.clone();
            request["messages"] = Value::from(messages[..n].to_vec());
            let body = serde_json::to_vec(&request).expect("json");
            assert_eq!(
                call(p.addr(), "POST", "/v1/chat/completions", &[], &body).status,
                200
            );
            let got = &up.requests()[j];
            let doc = got.json();
            let tokens = cutctx::session::prompt_tokens(format, &doc, &estimator).expect("counted");
            let name = file
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default();
            if tokens > window {
                // Only a request the session could not compact (its untouchable part alone is
                // over the window) goes out over it, and then unchanged.
                assert_eq!(
                    got.body, body,
                    "{name} call {j}: {tokens} over {window}, and compacted"
                );
                unchanged_over += 1;
            }
            cutctx::formats::validate(format, &doc)
                .unwrap_or_else(|v| panic!("{name} call {j}: {v}"));
            let list = doc["messages"].as_array().expect("messages").clone();
            if let Some(prev) = &previous
                && !list.starts_with(prev)
            {
                breaks += 1;
            }
            previous = Some(list);
            calls += 1;
        }
        let m = call(p.addr(), "GET", "/metrics", &[], b"").text();
        let firings = metric(&m, "cutctx_serve_firings_total");
        assert_eq!(
            breaks,
            firings,
            "{}: the prefix changes only at a firing",
            file.display()
        );
        if firings > 0 {
            fired_runs += 1;
        }
    }
    assert!(calls > 50, "{calls} calls replayed");
    eprintln!("{calls} calls, {unchanged_over} over the window unchanged, {fired_runs} runs fired");
    assert!(
        unchanged_over * 10 <= calls,
        "{unchanged_over} of {calls} calls over the window"
    );
    assert!(
        fired_runs * 2 >= files.len(),
        "most runs fired: {fired_runs} of {}",
        files.len()
    );
}
