//! Lossless compaction over every path: what a compaction keeps leaves with the bytes it
//! came with. Generated provider requests in each format (`requests.rs`: integers beyond 64
//! bits, `1e2`, `1E+2`, `-0`, `0.10`, string escapes, keys out of order, every spacing, in
//! tool-call inputs, arguments, message fields and top-level fields) go through
//! `cutctx compact --format`, the operations library's `formats::compact`, `cutctx batch`,
//! `cutctx session`, the library's `session::session` and the proxy's firing (`cutctx serve`
//! in front of a loopback fake upstream), each under about half the request's tokens so that
//! it compacts; `check.rs` holds each output to its input: every top-level field and every
//! kept message byte for byte, and no number written anew. The Python package's twin is
//! `crates/cutctx-python/tests/test_lossless.py`; the issue's own case through the proxy is
//! `crates/cutctx-serve/tests/lossless.rs`.

mod check;
mod requests;

// The fake upstream and raw client the serve crate's own tests use.
#[path = "../../../cutctx-serve/tests/common/mod.rs"]
mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use cutctx::formats::Format;
use cutctx_ops::formats::FormatOptions;
use cutctx_ops::session::{Breakpoints, SessionOptions, Tuning};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::Value;

use check::{Outcome, check};
use requests::{Request, Spec};

/// The policy `cutctx serve` runs by default: masking, then dropping the oldest turns.
const CHAIN: &str =
    r#"{"name":"chain","policies":[{"name":"observation_masking"},{"name":"drop_oldest"}]}"#;

/// How often a generated request holds twins: text messages repeated later with other bytes
/// and an equal serde_json value.
const SOME: f64 = 0.6;
const NONE: f64 = 0.0;
const ALWAYS: f64 = 1.0;

/// The policies the library and session paths are driven with.
const POLICIES: &[&str] = &["observation_masking", "drop_oldest", CHAIN];

/// `cases` cases (`PROPTEST_CASES` overrides it, for a longer run by hand).
fn config(cases: u32) -> Config {
    Config {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(cases),
        // Each failure prints its request; nothing is written beside the sources.
        failure_persistence: None,
        ..Config::default()
    }
}

/// The request's whole prompt and its output reserve, as `cutctx estimate` counts them.
fn estimate(r: &Request) -> (u64, u64) {
    let text = cutctx_ops::formats::estimate(r.format, None, None, false, &r.text)
        .unwrap_or_else(|e| panic!("estimate: {e:?}\n{}", r.text));
    let v: Value = serde_json::from_str(&text).expect("estimate is JSON");
    let n = |k: &str| v[k].as_u64().expect("a figure");
    (n("total"), n("reserve"))
}

/// About half the request's tokens: a budget that forces a compaction.
fn half(r: &Request) -> u64 {
    let (total, _) = estimate(r);
    total / 2
}

/// About half the request's tokens but its reserve: a session window that fires.
fn half_window(r: &Request) -> u64 {
    let (total, reserve) = estimate(r);
    (total - reserve) / 2
}

/// The session windows to try for `r`, smallest first: about half its tokens, then three
/// quarters for a request whose untouchable part with every result masked is over half (a
/// masking-only firing then fails with `COMPACTION_BUDGET_UNSATISFIABLE`).
fn windows(r: &Request) -> [u64; 2] {
    let (total, reserve) = estimate(r);
    [(total - reserve) / 2, (total - reserve) * 3 / 4]
}

/// `cutctx_ops::session::session` on `r` with `policy`, at the first window of [`windows`]
/// that can be met.
fn session_library(r: &Request, policy: &str) -> Result<String, TestCaseError> {
    let [half, more] = windows(r);
    let run = |window| {
        cutctx_ops::session::session(&session_options(r.format, window, policy), &r.text, None)
    };
    let out = match run(half) {
        Err(e) if e.code == "COMPACTION_BUDGET_UNSATISFIABLE" => run(more),
        other => other,
    };
    out.map(|o| o.output)
        .map_err(|e| TestCaseError::fail(format!("session failed: {e:?}\n{}", r.text)))
}

/// The binary with `args`, `stdin` on its standard input.
fn cutctx(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cutctx"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let mut pipe = child.stdin.take().expect("stdin");
    let text = stdin.to_owned();
    let writer = std::thread::spawn(move || pipe.write_all(text.as_bytes()));
    let out = child.wait_with_output().expect("the binary ends");
    writer.join().expect("the writer").expect("stdin written");
    out
}

fn stdout_of(out: &Output, what: &str, input: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({:?}): {}\ninput:\n{input}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("UTF-8 output")
}

/// A scratch directory of this test binary's own.
fn scratch() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("cutctx-lossless-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir
    })
    .clone()
}

/// A path in the scratch directory no other case uses.
fn fresh(name: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    scratch().join(format!("{}-{name}", N.fetch_add(1, Ordering::Relaxed)))
}

/// `output` held to `r`; the failure names the path and shows the request.
fn holds(path: &str, r: &Request, output: &str) -> Result<Outcome, TestCaseError> {
    check(r.format, &r.text, output).map_err(|e| {
        TestCaseError::fail(format!(
            "{path} ({}): {e}\n--- input:\n{}\n--- output:\n{output}",
            r.format.as_str(),
            r.text
        ))
    })
}

fn fired(path: &str, r: &Request, outcome: Outcome) -> Result<(), TestCaseError> {
    prop_assert!(
        outcome.fired() && outcome.kept > 0,
        "{path} ({}): nothing was compacted under half the budget, or nothing kept: {outcome:?}\n{}",
        r.format.as_str(),
        r.text
    );
    Ok(())
}

fn session_options(format: Format, window: u64, policy: &str) -> SessionOptions {
    SessionOptions {
        format,
        window,
        tuning: Tuning {
            trigger: None,
            target: None,
            policy: Some(policy.to_owned()),
            prompt_id: None,
            estimator: None,
            protected_recent: None,
            reserve_output: 0,
            reasoning: cutctx::formats::ReasoningMode::default(),
            fire_early: false,
            summarizes: false,
            front_end: cutctx_ops::summarizer::FrontEnd::CommandLine,
        },
        summarize_with: None,
        cache_breakpoints: Breakpoints::Off,
        repair: false,
        pin: Vec::new(),
    }
}

/// The proxy's path for `format`.
const fn endpoint(format: Format) -> &'static str {
    match format {
        Format::OpenAiChat => "/v1/chat/completions",
        Format::OpenAiResponses => "/v1/responses",
        Format::Anthropic => "/v1/messages",
    }
}

proptest! {
    #![proptest_config(config(24))]

    /// The generator's own requests are valid for their provider, and the check explains an
    /// untouched request as every message kept.
    #[test]
    fn generated_requests_are_valid_and_check_as_kept_whole(
        spec in requests::spec(None, true, false, SOME),
    ) {
        let r = requests::request(&spec);
        let fail = |e: String| TestCaseError::fail(format!("{e}\n{}", r.text));
        let doc: Value = serde_json::from_str(&r.text).map_err(|e| fail(e.to_string()))?;
        cutctx::formats::validate(r.format, &doc).map_err(|v| fail(v.to_string()))?;
        let scan = check::scan(&r.text, requests::list_key(r.format)).map_err(fail)?;
        prop_assert_eq!(scan.items.len(), r.messages);
        prop_assert_eq!(scan.fields.is_none(), r.bare);
        let outcome = holds("the request itself", &r, &r.text)?;
        prop_assert!(!outcome.fired());
    }

    /// `cutctx compact --format F --max-tokens N --policy observation_masking`: the text path.
    #[test]
    fn compact_command_keeps_kept_messages_and_fields_byte_for_byte(
        spec in requests::spec(None, true, false, SOME),
    ) {
        let r = requests::request(&spec);
        let n = half(&r).to_string();
        let out = cutctx(
            &[
                "compact", "--format", r.format.as_str(), "--max-tokens", &n,
                "--policy", "observation_masking", "-",
            ],
            &r.text,
        );
        let output = stdout_of(&out, "cutctx compact --format", &r.text);
        let outcome = holds("cutctx compact --format", &r, &output)?;
        fired("cutctx compact --format", &r, outcome)?;
    }

    /// `cutctx_ops::formats::compact`, what `compact --format` and the Python package run,
    /// under every shipped policy that needs no summarizer.
    #[test]
    fn compact_library_keeps_kept_messages_and_fields_byte_for_byte(
        spec in requests::spec(None, true, false, SOME),
        policy in proptest::sample::select(POLICIES),
    ) {
        let r = requests::request(&spec);
        let options = FormatOptions {
            format: Some(r.format),
            max_tokens: Some(half(&r)),
            policy: Some(policy.to_owned()),
            ..FormatOptions::default()
        };
        let out = cutctx_ops::formats::compact(&options, &r.text, None).map_err(|e| {
            TestCaseError::fail(format!("formats::compact failed: {e:?}\n{}", r.text))
        })?;
        let path = format!("cutctx_ops::formats::compact ({policy})");
        let outcome = holds(&path, &r, &out.output)?;
        fired("cutctx_ops::formats::compact", &r, outcome)?;
    }

    /// `cutctx session --window N`, fired: the path that writes through
    /// `cutctx_formats::to_string_as_written`.
    #[test]
    fn session_command_firing_keeps_kept_messages_and_fields_byte_for_byte(
        spec in requests::spec(None, true, false, NONE),
        policy in proptest::sample::select(&["observation_masking", CHAIN][..]),
    ) {
        let r = requests::request(&spec);
        let [half, more] = windows(&r);
        let run = |window: u64| {
            let state = fresh("state.json");
            cutctx(
                &[
                    "session", "--format", r.format.as_str(), "--window", &window.to_string(),
                    "--state", state.to_str().expect("a UTF-8 path"), "--policy", policy, "-",
                ],
                &r.text,
            )
        };
        let mut out = run(half);
        if out.status.code() == Some(3) {
            out = run(more);
        }
        let output = stdout_of(&out, "cutctx session", &r.text);
        let outcome = holds(&format!("cutctx session ({policy})"), &r, &output)?;
        fired("cutctx session", &r, outcome)?;
    }

    /// `cutctx_ops::session::session`, fired, under every policy that needs no summarizer.
    #[test]
    fn session_library_firing_keeps_kept_messages_and_fields_byte_for_byte(
        spec in requests::spec(None, true, false, NONE),
        policy in proptest::sample::select(POLICIES),
    ) {
        let r = requests::request(&spec);
        let output = session_library(&r, policy)?;
        let path = format!("cutctx_ops::session::session ({policy})");
        let outcome = holds(&path, &r, &output)?;
        fired("cutctx_ops::session::session", &r, outcome)?;
    }
}

proptest! {
    #![proptest_config(config(16))]

    /// `cutctx batch` over a JSONL file of such requests: each line held to its own input.
    #[test]
    fn batch_keeps_kept_messages_and_fields_byte_for_byte(
        format in proptest::sample::select(Format::ALL.to_vec()),
        specs in proptest::collection::vec(requests::spec(None, true, true, SOME), 3),
    ) {
        let requests: Vec<Request> = specs
            .into_iter()
            .map(|s| requests::request(&Spec { format, ..s }))
            .collect();
        let n = requests.iter().map(half).min().expect("three requests").to_string();
        let lines: String = requests.iter().map(|r| format!("{}\n", r.text)).collect();
        let file = fresh("lines.jsonl");
        std::fs::write(&file, &lines).expect("the JSONL file");
        let out = cutctx(
            &[
                "batch", "--format", format.as_str(), "--max-tokens", &n,
                "--policy", "observation_masking", "--jobs", "2",
                file.to_str().expect("a UTF-8 path"),
            ],
            "",
        );
        let output = stdout_of(&out, "cutctx batch", &lines);
        let got: Vec<&str> = output.lines().collect();
        prop_assert_eq!(got.len(), requests.len());
        for (r, line) in requests.iter().zip(got) {
            let outcome = holds("cutctx batch", r, line)?;
            fired("cutctx batch", r, outcome)?;
        }
    }

    /// The proxy's firing: `cutctx serve` with a window of about half the request, in front of
    /// a loopback upstream, which must receive every kept message and field byte for byte.
    #[test]
    fn proxy_firing_forwards_kept_messages_and_fields_byte_for_byte(
        spec in requests::spec(None, false, false, NONE),
    ) {
        let r = requests::request(&spec);
        let body = through_proxy(&r)?;
        let outcome = holds("cutctx serve (the upstream's body)", &r, &body)?;
        fired("cutctx serve", &r, outcome)?;
    }
}

/// The proxy's firing on `r`: the body the upstream received.
fn through_proxy(r: &Request) -> Result<String, TestCaseError> {
    let up = common::Upstream::start(|_, _| common::Reply::json(200, &serde_json::json!({})));
    let window = half_window(r);
    let proxy = common::proxy(&up, |o| o.window = Some(window));
    let response = common::call(
        proxy.addr(),
        "POST",
        endpoint(r.format),
        &[("content-type", "application/json")],
        r.text.as_bytes(),
    );
    prop_assert_eq!(response.status, 200, "{}", response.text());
    let got = up.requests();
    prop_assert_eq!(got.len(), 1);
    Ok(String::from_utf8(got[0].body.clone()).expect("a UTF-8 body"))
}

proptest! {
    #![proptest_config(config(16))]

    /// Twins on the session path (`to_string_as_written`): a kept message equal as a
    /// serde_json value to an older one the firing dropped or changed (another escape, key
    /// order, or a number beyond `f64`) is written with its own bytes, not the older one's.
    #[test]
    fn session_firing_never_writes_an_equal_older_message_in_place_of_a_kept_one(
        spec in requests::spec(None, true, false, ALWAYS),
        policy in proptest::sample::select(POLICIES),
    ) {
        let r = requests::request(&spec);
        let output = session_library(&r, policy)?;
        holds(&format!("cutctx_ops::session::session ({policy})"), &r, &output)?;
    }

    /// Twins through the proxy's firing: what the upstream receives.
    #[test]
    fn proxy_firing_never_forwards_an_equal_older_message_in_place_of_a_kept_one(
        spec in requests::spec(None, false, false, ALWAYS),
    ) {
        let r = requests::request(&spec);
        let body = through_proxy(&r)?;
        holds("cutctx serve (the upstream's body)", &r, &body)?;
    }
}

/// An Anthropic history in which the same assistant text comes back after each tool call, its
/// vendor field `x_meta.n` a 23-digit integer that differs in the last digits (equal as
/// `f64`): dropping the oldest exchanges keeps a later one, whose bytes must be its own.
fn twin_history() -> String {
    let mut messages = vec![r#"{"role": "user", "content": "start"}"#.to_owned()];
    for i in 0..5 {
        messages.push(format!(
            r#"{{"content": [{{"type": "tool_use", "id": "toolu_{i}", "name": "lookup", "input": {{"q": {i}}}}}], "role": "assistant"}}"#
        ));
        messages.push(format!(
            r#"{{"role": "user", "content": [{{"type": "tool_result", "tool_use_id": "toolu_{i}", "content": "{}"}}]}}"#,
            format!("result line {i} ").repeat(60)
        ));
        messages.push(format!(
            r#"{{"role":"assistant","content":"noted","x_meta":{{"n":1234567890123456789012{i}}}}}"#
        ));
        messages.push(r#"{"role":"user","content":"go on"}"#.to_owned());
    }
    format!(
        r#"{{"model": "claude-x", "max_tokens": 100, "messages": [{}]}}"#,
        messages.join(", ")
    )
}

/// The session path (library and command) on `twin_history`: the kept "noted" message is the
/// fourth one (`…123`); the first one (`…120`), dropped, must not lend it its bytes.
#[test]
fn a_dropped_message_never_lends_its_bytes_to_an_equal_kept_one() {
    let text = twin_history();
    let out =
        cutctx_ops::session::session(&session_options(Format::Anthropic, 600, CHAIN), &text, None)
            .expect("the session fires");
    let library = check(Format::Anthropic, &text, &out.output);
    let state = fresh("twin-state.json");
    let command = cutctx(
        &[
            "session",
            "--format",
            "anthropic",
            "--window",
            "600",
            "--state",
            state.to_str().expect("a UTF-8 path"),
            "--policy",
            CHAIN,
            "-",
        ],
        &text,
    );
    let command_output = stdout_of(&command, "cutctx session", &text);
    let command = check(Format::Anthropic, &text, &command_output);
    assert!(
        library.is_ok() && command.is_ok(),
        "cutctx_ops::session::session: {library:?}\ncutctx session: {command:?}\n--- output:\n{}",
        out.output
    );
}

/// The check refuses each rewrite a parse and a write would make, and explains masking and a
/// dropped run of the oldest messages.
#[test]
fn the_check_refuses_every_rewrite_a_parse_would_make() {
    let input = r#"{"metadata": {"n": 1E+2}, "messages": [{"role": "user", "content": "caf\u00e9"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {"order_id": 12345678901234567890123, "price": 1e2, "d": -0}}]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "long"}]}, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "thanks"}]}"#;
    let masked = input.replace(
        r#""content": "long""#,
        r#""content": "[tool result masked by cutctx] (original: 1 tokens)""#,
    );
    let outcome = check(Format::Anthropic, input, &masked).expect("masking is explained");
    assert_eq!((outcome.kept, outcome.masked, outcome.dropped), (4, 1, 0));
    let dropped = input.replace(
        r#"{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "x", "input": {"order_id": 12345678901234567890123, "price": 1e2, "d": -0}}]}, {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "long"}]}, "#,
        "",
    );
    let outcome = check(Format::Anthropic, input, &dropped).expect("a dropped run is explained");
    assert_eq!((outcome.kept, outcome.dropped), (3, 2));
    for (from, to) in [
        ("12345678901234567890123", "1.2345678901234568e22"),
        (r#""price": 1e2"#, r#""price": 100.0"#),
        (r#""d": -0"#, r#""d": 0"#),
        (r#""caf\u00e9""#, "\"café\""),
        (
            r#"{"role": "assistant", "content": "ok"}"#,
            r#"{"content": "ok", "role": "assistant"}"#,
        ),
        (r#"{"n": 1E+2}"#, r#"{"n": 100.0}"#),
    ] {
        let out = masked.replacen(from, to, 1);
        assert_ne!(out, masked, "{from}");
        assert!(
            check(Format::Anthropic, input, &out).is_err(),
            "{from} -> {to} passed"
        );
    }
}

/// An OpenAI Chat request with a top-level field whose key is written with an escape
/// (`"caf\u00e9"`, valid JSON for the key `café`), a 23-digit `metadata` figure and five large
/// tool results.
fn escaped_key_request() -> String {
    let mut messages = vec![r#"{"role": "user", "content": "go \/ caf\u00e9"}"#.to_owned()];
    for i in 0..5 {
        messages.push(format!(
            r#"{{"role": "assistant", "content": null, "tool_calls": [{{"id": "c{i}", "type": "function", "function": {{"name": "f", "arguments": "{{\"order_id\": 12345678901234567890123, \"price\": 1e2}}"}}}}], "x_vendor": {{"n": -0}}}}"#
        ));
        messages.push(format!(
            r#"{{"role": "tool", "tool_call_id": "c{i}", "content": "{}"}}"#,
            format!("data {i} ").repeat(100)
        ));
    }
    messages.push(r#"{"role": "assistant", "content": "done"}"#.to_owned());
    messages.push(r#"{"role": "user", "content": "thanks"}"#.to_owned());
    format!(
        r#"{{"model": "m", "caf\u00e9": 1e2, "metadata": {{"n": 12345678901234567890123}}, "messages": [{}]}}"#,
        messages.join(", ")
    )
}

/// A top-level key written with an escape changes nothing the compaction keeps: the text path
/// (`compact --format`) and the session path (`cutctx session`, the library's
/// `session::session`) each keep every kept message and every other field byte for byte.
#[test]
fn a_top_level_key_written_with_an_escape_rewrites_nothing_kept() {
    let text = escaped_key_request();
    let r = Request {
        format: Format::OpenAiChat,
        text: text.clone(),
        messages: 13,
        bare: false,
    };
    let options = FormatOptions {
        format: Some(Format::OpenAiChat),
        max_tokens: Some(half(&r)),
        policy: Some("observation_masking".to_owned()),
        ..FormatOptions::default()
    };
    let compacted = cutctx_ops::formats::compact(&options, &text, None).expect("compacts");
    let text_path = check(Format::OpenAiChat, &text, &compacted.output);
    let session = session_library(&r, "observation_masking").expect("the session fires");
    let session_path = check(Format::OpenAiChat, &text, &session);
    assert!(
        text_path.is_ok() && session_path.is_ok(),
        "formats::compact: {text_path:?}\nsession::session: {session_path:?}\n--- session output:\n{session}",
    );
}
