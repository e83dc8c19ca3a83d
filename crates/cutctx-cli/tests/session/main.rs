//! `cutctx session` and `cutctx replay` through the real binary: the state file across calls,
//! a corrupt state refused, a rewind announced, a firing's receipt in the ledger, the replay's
//! table, JSON and SVG, and (when `../shared` is present) one tau-bench run.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cutctx"))
        .args(args)
        .output()
        .expect("the binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("session")
        .join(test);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("an old scratch folder can be removed");
    }
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

/// A chat request holding `n` exchanges of `size` characters.
fn chat(n: usize, size: usize) -> Value {
    let mut messages = vec![json!({"role": "system", "content": "Be brief."})];
    for i in 0..n {
        let id = format!("c{i}");
        messages.push(json!({"role": "user", "content": format!("{i} {}", "q".repeat(size))}));
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": "f", "arguments": "{}"}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": "r".repeat(size)}));
        messages.push(json!({"role": "assistant", "content": format!("answer {i}")}));
    }
    json!({"model": "m", "messages": messages})
}

fn session(dir: &Path, request: &Value, extra: &[&str]) -> (Option<i32>, String, String) {
    let path = dir.join("request.json");
    std::fs::write(&path, request.to_string()).expect("written");
    let state = dir.join("state.json");
    let mut args = vec![
        "session",
        "--format",
        "openai-chat",
        "--window",
        "2000",
        "--policy",
        "drop_oldest",
        "--state",
    ];
    args.push(state.to_str().expect("utf-8"));
    args.push(path.to_str().expect("utf-8"));
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn the_state_carries_the_prefix_from_call_to_call() {
    let dir = scratch("carries");
    let ledger = dir.join("ledger.jsonl");
    let ledger_arg = ["--ledger", ledger.to_str().expect("utf-8")];
    let mut previous: Option<Vec<Value>> = None;
    let mut fired = 0;
    for n in 1..30 {
        let (status, out, err) = session(&dir, &chat(n, 200), &ledger_arg);
        assert_eq!(status, Some(0), "{err}");
        let sent: Value = serde_json::from_str(&out).expect("json");
        let list = sent["messages"].as_array().expect("messages").clone();
        let tokens = cutctx::session::prompt_tokens(
            cutctx::formats::Format::OpenAiChat,
            &sent,
            &cutctx::CharRatioEstimator::default(),
        )
        .expect("counts");
        assert!(tokens <= 2000, "call {n}: {tokens} tokens");
        if let Some(prev) = &previous
            && list.get(..prev.len()) != Some(&prev[..])
        {
            fired += 1;
        }
        previous = Some(list);
    }
    assert!((1..=6).contains(&fired), "{fired} firings");
    let rows = std::fs::read_to_string(&ledger).expect("a ledger");
    assert_eq!(rows.lines().count(), fired, "one receipt per firing");
    let (status, _, err) = run(&["ledger", "verify", ledger.to_str().expect("utf-8")]);
    assert_eq!(status, Some(0), "{err}");
}

#[test]
fn a_corrupt_state_is_refused_and_a_rewind_announced() {
    let dir = scratch("corrupt");
    let (status, _, err) = session(&dir, &chat(20, 200), &[]);
    assert_eq!(status, Some(0), "{err}");
    let (status, _, err) = session(&dir, &chat(10, 200), &[]);
    assert_eq!(status, Some(0), "{err}");
    assert!(err.contains("starting a new session"), "{err}");
    let state = dir.join("state.json");
    let text = std::fs::read_to_string(&state).expect("state");
    std::fs::write(&state, text.replacen("\"messages\":", "\"messages\":9", 1)).expect("written");
    let (status, out, err) = session(&dir, &chat(11, 200), &["--error-format", "json"]);
    assert_eq!(status, Some(2));
    assert!(out.is_empty());
    assert!(err.contains("\"code\":\"VALIDATION_ERROR\""), "{err}");
    assert!(!err.contains("qqqq"), "no content in errors");
}

#[test]
fn replay_prints_a_table_json_and_a_deterministic_svg() {
    let dir = scratch("replay");
    let run_path = dir.join("run.json");
    std::fs::write(&run_path, chat(25, 300).to_string()).expect("written");
    let svg = dir.join("chart.svg");
    let args = [
        "replay",
        "--format",
        "openai-chat",
        run_path.to_str().expect("utf-8"),
        "--window-fraction",
        "0.6",
        "--policy",
        "drop_oldest",
        "--svg",
        svg.to_str().expect("utf-8"),
    ];
    let (status, table, err) = run(&args);
    assert_eq!(status, Some(0), "{err}");
    for name in ["none", "stateless", "session", "cache_hit", "over_window"] {
        assert!(table.contains(name), "{table}");
    }
    let first = std::fs::read_to_string(&svg).expect("svg");
    assert!(first.starts_with("<svg") && first.ends_with("</svg>\n"));
    let (_, again, _) = run(&args);
    assert_eq!(table, again);
    assert_eq!(first, std::fs::read_to_string(&svg).expect("svg"));
    let mut json_args = args[..8].to_vec();
    json_args.push("--json");
    let (status, out, _) = run(&json_args);
    assert_eq!(status, Some(0));
    let v: Value = serde_json::from_str(&out).expect("json");
    let s = v["strategies"].as_array().expect("strategies");
    assert!(
        s[2]["cost_units"].as_f64() < s[1]["cost_units"].as_f64(),
        "{out}"
    );
    assert_eq!(s[2]["over_window"], 0);
    let prices = dir.join("prices.json");
    std::fs::write(&prices, r#"{"name":"mine","model":"x","input_per_million":1.0,"cache_read":0.2,"cache_write":1.0,"min_cached_tokens":0,"cache_block_tokens":1}"#).expect("written");
    json_args.extend(["--pricing", prices.to_str().expect("utf-8")]);
    let (status, out, err) = run(&json_args);
    assert_eq!(status, Some(0), "{err}");
    assert!(out.contains("\"prices\":\"mine\""));
}

#[test]
fn replay_compares_peers_and_prices_an_external_strategy_with_retention() {
    let dir = scratch("replay-external");
    let run_path = dir.join("run.json");
    let whole = chat(25, 300);
    std::fs::write(&run_path, whole.to_string()).expect("written");
    // The external strategy sends every call uncompacted, as none does; its fourth line is
    // the wrapped form, charging a summarizing call.
    let messages = whole["messages"].as_array().expect("a list");
    let points: Vec<usize> = (0..messages.len())
        .filter(|&i| {
            messages[i]["role"] == "assistant" && (i == 0 || messages[i - 1]["role"] != "assistant")
        })
        .collect();
    let mut lines = String::new();
    for (k, &len) in points.iter().enumerate() {
        let request = json!({"model": whole["model"], "messages": messages[..len]});
        let line = if k == 3 {
            json!({"request": request, "summary_input_tokens": 1000, "summary_cached_tokens": 1000, "summary_output_tokens": 10})
        } else {
            request
        };
        lines.push_str(&line.to_string());
        lines.push('\n');
    }
    let external = dir.join("mine.jsonl");
    std::fs::write(&external, &lines).expect("written");
    let svg = dir.join("chart.svg");
    let spec = format!("mine={}", external.to_str().expect("utf-8"));
    let args = [
        "replay",
        "--format",
        "openai-chat",
        run_path.to_str().expect("utf-8"),
        "--window-fraction",
        "0.6",
        "--compare",
        "--external",
        spec.as_str(),
        "--json",
        "--svg",
        svg.to_str().expect("utf-8"),
    ];
    let (status, out, err) = run(&args);
    assert_eq!(status, Some(0), "{err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    let s = v["strategies"].as_array().expect("strategies");
    let names: Vec<&str> = s.iter().filter_map(|x| x["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "none",
            "stateless",
            "session",
            "hindsight",
            "claude-code",
            "codex",
            "openhands",
            "clear-tool-uses",
            "server-compaction",
            "deep-agents",
            "mine"
        ]
    );
    let bound = v["bound_units"].as_f64().expect("a bound");
    for x in s {
        assert!(x["cost_units"].as_f64() >= Some(bound), "{x}");
        for k in ["identifiers", "task_intact", "recent_results"] {
            let r = x["retention"][k].as_f64().expect("a share");
            assert!((0.0..=1.0).contains(&r), "{x}");
        }
    }
    // 1,000 cached at 0.1 and 10 out at 5: 150 units over none's.
    let (none, mine) = (&s[0], &s[10]);
    assert_eq!(mine["summary_units"].as_f64(), Some(150.0));
    let extra =
        mine["cost_units"].as_f64().expect("cost") - none["cost_units"].as_f64().expect("cost");
    assert!((extra - 150.0).abs() < 1e-6, "{out}");
    assert_eq!(mine["retention"], none["retention"]);
    let frontier = std::fs::read_to_string(dir.join("chart-frontier.svg")).expect("frontier svg");
    assert!(
        frontier.starts_with("<svg") && frontier.contains("hindsight") && frontier.contains("mine")
    );
    // One line short: refused, with both figures.
    let short: String = lines.lines().skip(1).map(|l| format!("{l}\n")).collect();
    std::fs::write(&external, short).expect("written");
    let (status, _, err) = run(&args);
    assert_eq!(status, Some(2), "{err}");
    assert!(
        err.contains("VALIDATION_ERROR")
            && err.contains(&format!("{}", points.len() - 1))
            && err.contains(&format!("{}", points.len())),
        "{err}"
    );
}

#[test]
fn replay_prices_by_the_run_model_unless_pricing_names_a_table() {
    let dir = scratch("replay-model-prices");
    let first_line = |model: &str, extra: &[&str]| {
        let mut whole = chat(12, 300);
        whole["model"] = json!(model);
        let path = dir.join(format!("{model}.json"));
        std::fs::write(&path, whole.to_string()).expect("written");
        let mut args = vec![
            "replay",
            "--format",
            "openai-chat",
            path.to_str().expect("utf-8"),
        ];
        args.extend_from_slice(extra);
        let (status, out, err) = run(&args);
        assert_eq!(status, Some(0), "{err}");
        out.lines().next().expect("a first line").to_owned()
    };
    // A model picks its row.
    let line = first_line("gpt-4.1-2025-04-14", &[]);
    assert!(
        line.contains("prices openai/gpt-4.1 (gpt-4.1, USD 2.5/M input, cache read 0.25x")
            && line.contains("picked for the run's model gpt-4.1-2025-04-14"),
        "{line}"
    );
    let line = first_line("claude-opus-5-5", &[]);
    assert!(
        line.contains("prices anthropic/claude-opus-5-5 ("),
        "{line}"
    );
    assert!(line.contains("cache read 0.05x, uncached 1.25x"), "{line}");
    // An unknown model falls back to the default table.
    let line = first_line("m", &[]);
    assert!(
        line.contains("prices anthropic (claude-sonnet-4,")
            && line.contains("the default: no table for the run's model m"),
        "{line}"
    );
    // --pricing NAME still wins, the default's name included.
    let line = first_line("gpt-5.6", &["--pricing", "openai"]);
    assert!(
        line.contains("prices openai (gpt-4o,") && line.contains("named by --pricing openai"),
        "{line}"
    );
    let line = first_line("gpt-4o", &["--pricing", "anthropic"]);
    assert!(
        line.contains("prices anthropic (claude-sonnet-4,"),
        "{line}"
    );
}

#[test]
fn a_tau_bench_run_replays_when_shared_is_present() {
    let shared = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/realworld/tau-bench/tau-bench-airline-gpt4o-task2-idx52.chat.json");
    if !shared.exists() {
        eprintln!("skipped: ../shared is absent");
        return;
    }
    let (status, out, err) = run(&[
        "replay",
        "--format",
        "openai-chat",
        shared.to_str().expect("utf-8"),
        // The marks matter under breakpoint (Anthropic) pricing, not the run model's (gpt-4o).
        "--pricing",
        "anthropic",
        "--json",
    ]);
    assert_eq!(status, Some(0), "{err}");
    let v: Value = serde_json::from_str(&out).expect("json");
    let s = v["strategies"].as_array().expect("strategies");
    assert!(
        s[2]["cost_units"].as_f64() <= s[1]["cost_units"].as_f64(),
        "{out}"
    );
    // Without the shared system mark, stateless compaction re-bills the system prompt at
    // each compaction and costs more.
    let (status, favoured, err) = run(&[
        "replay",
        "--format",
        "openai-chat",
        shared.to_str().expect("utf-8"),
        // The marks matter under breakpoint (Anthropic) pricing, not the run model's (gpt-4o).
        "--pricing",
        "anthropic",
        "--json",
        "--marks",
        "session-only",
    ]);
    assert_eq!(status, Some(0), "{err}");
    let w: Value = serde_json::from_str(&favoured).expect("json");
    let t = w["strategies"].as_array().expect("strategies");
    assert!(
        t[1]["cost_units"].as_f64() > s[1]["cost_units"].as_f64(),
        "{favoured} vs {out}"
    );
    // The lower bound is under every strategy, and a warm prefix lowers every figure.
    let bound = v["bound_units"].as_f64().expect("a bound");
    assert!(
        s.iter().all(|x| x["cost_units"].as_f64() >= Some(bound)),
        "{out}"
    );
    let (status, warm, err) = run(&[
        "replay",
        "--format",
        "openai-chat",
        shared.to_str().expect("utf-8"),
        // The marks matter under breakpoint (Anthropic) pricing, not the run model's (gpt-4o).
        "--pricing",
        "anthropic",
        "--json",
        "--warm-prefix",
    ]);
    assert_eq!(status, Some(0), "{err}");
    let h: Value = serde_json::from_str(&warm).expect("json");
    assert_eq!(h["warm_prefix"], true);
    assert!(h["bound_units"].as_f64() < Some(bound), "{warm}");
    for (cold, warm) in s
        .iter()
        .zip(h["strategies"].as_array().expect("strategies"))
    {
        assert!(warm["cost_units"].as_f64() < cold["cost_units"].as_f64());
        assert!(warm["cost_units"].as_f64() >= h["bound_units"].as_f64());
    }
}

#[test]
fn repair_drops_what_the_provider_would_refuse_and_says_so() {
    let dir = scratch("repair");
    let mut request = chat(2, 20);
    // A result whose call is not in the history: the provider refuses it.
    request["messages"]
        .as_array_mut()
        .expect("a list")
        .push(json!({"role": "tool", "tool_call_id": "gone", "content": "late"}));
    let (code, _, stderr) = session(&dir, &request, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("FORMAT_INVALID_REQUEST"), "{stderr}");
    let (code, stdout, stderr) = session(&dir, &request, &["--repair"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("cutctx: repair:"), "{stderr}");
    let sent: Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(sent["messages"], chat(2, 20)["messages"]);
}

/// A summarizer in Rust that counts what it is asked.
struct Counting(usize);

impl cutctx_ops::summarizer::Summarizer for Counting {
    fn summarize(&mut self, group_id: &str, input: &Value) -> Result<String, cutctx_ops::OpsError> {
        // Beside the span, the request that reads the cache: the history as the session
        // would send it, the instruction last.
        let cached = input["cached_request"]["messages"]
            .as_array()
            .expect("a cached request");
        assert_eq!(
            cached.last().map(|m| &m["content"]),
            Some(&json!(cutctx::session::SUMMARY_INSTRUCTION))
        );
        assert!(cached.len() > input["messages"].as_array().map_or(0, Vec::len));
        self.0 += 1;
        Ok(format!("Summary of {group_id}"))
    }

    fn what(&self) -> &'static str {
        "the counting summarizer returned"
    }
}

#[test]
fn with_no_summarizer_and_no_policy_a_session_fires_and_never_fails() {
    let dir = scratch("default-policy");
    let state = dir.join("state.json");
    for n in [5, 20, 40] {
        let path = dir.join("request.json");
        std::fs::write(&path, chat(n, 200).to_string()).expect("written");
        let (status, out, err) = run(&[
            "session",
            "--format",
            "openai-chat",
            "--window",
            "2000",
            "--state",
            state.to_str().expect("utf-8"),
            path.to_str().expect("utf-8"),
        ]);
        assert_eq!(status, Some(0), "{n} turns: {err}");
        let sent: Value = serde_json::from_str(&out).expect("a request");
        let kept = sent["messages"].as_array().expect("messages").len();
        if n > 5 {
            assert!(
                kept < 1 + 4 * n,
                "{n} turns: it fired ({kept} messages sent)"
            );
        }
    }
}

#[test]
fn a_session_asks_the_callers_summarizer_at_a_firing_and_without_one_says_what_is_missing() {
    use cutctx_ops::session::{Breakpoints, SessionOptions, Tuning, session_with};
    let options = SessionOptions {
        format: cutctx::formats::Format::OpenAiChat,
        window: 2000,
        tuning: Tuning {
            trigger: None,
            target: None,
            policy: Some("summarizing".into()),
            prompt_id: None,
            estimator: None,
            protected_recent: None,
            reserve_output: 0,
            reasoning: cutctx::formats::ReasoningMode::Strip,
            fire_early: false,
            summarizes: false,
            front_end: cutctx_ops::summarizer::FrontEnd::CommandLine,
        },
        summarize_with: None,
        cache_breakpoints: Breakpoints::default(),
        repair: false,
        pin: Vec::new(),
    };
    let request = chat(20, 200).to_string();
    let mut counting = Counting(0);
    let out = session_with(&options, &request, None, Some(&mut counting)).expect("fires");
    assert!(out.firing.is_some(), "the history is over the window");
    assert!(counting.0 >= 1, "asked at the firing");
    assert!(out.output.contains("Summary of "), "its summary is sent");
    let e = session_with(&options, &request, None, None).expect_err("no summarizer");
    assert_eq!(e.code, "COMPACTION_SUMMARY_MISSING");
    assert!(e.details["group_id"].is_string());
}

#[test]
fn a_firing_strips_the_thinking_it_invalidates_and_says_so_on_standard_error() {
    let dir = scratch("reasoning");
    let mut messages = vec![json!({"role": "user", "content": "Fix the build."})];
    for i in 0..6 {
        messages.push(json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": format!("file {i} next. ").repeat(10), "signature": format!("sig{i}")},
            {"type": "tool_use", "id": format!("t{i}"), "name": "read", "input": {}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("t{i}"), "content": "x".repeat(4000)}]}));
    }
    let request = json!({"model": "m", "max_tokens": 100, "messages": messages});
    let path = dir.join("request.json");
    std::fs::write(&path, request.to_string()).expect("written");
    let state = dir.join("state.json");
    let (status, out, err) = run(&[
        "session",
        "--format",
        "anthropic",
        "--window",
        "5000",
        "--policy",
        "observation_masking",
        "--state",
        state.to_str().expect("utf-8"),
        path.to_str().expect("utf-8"),
    ]);
    assert_eq!(status, Some(0), "{err}");
    let sent: Value = serde_json::from_str(&out).expect("json");
    assert_ne!(sent, request, "the session fired");
    let stale =
        cutctx::formats::stale_reasoning(cutctx::formats::Format::Anthropic, &request, &sent);
    assert!(stale.is_empty(), "{stale:?}");
    assert_eq!(
        err.lines()
            .filter(|l| l.contains("thinking block(s)"))
            .count(),
        1,
        "one line on standard error: {err}"
    );
}

fn open_options() -> cutctx_ops::session::SessionOptions {
    use cutctx_ops::session::{Breakpoints, SessionOptions, Tuning};
    SessionOptions {
        format: cutctx::formats::Format::OpenAiChat,
        window: 2000,
        tuning: Tuning {
            trigger: None,
            target: None,
            policy: Some("drop_oldest".into()),
            prompt_id: None,
            estimator: None,
            protected_recent: None,
            reserve_output: 0,
            reasoning: cutctx::formats::ReasoningMode::Strip,
            fire_early: false,
            summarizes: false,
            front_end: cutctx_ops::summarizer::FrontEnd::CommandLine,
        },
        summarize_with: None,
        cache_breakpoints: Breakpoints::default(),
        repair: false,
        pin: Vec::new(),
    }
}

#[test]
fn a_session_held_open_answers_appended_messages_as_the_full_call_would() {
    use cutctx_ops::session::{Appended, session_with};
    let options = open_options();
    let whole = chat(40, 200);
    let messages = whole["messages"].as_array().expect("messages").clone();
    let mut out = session_with(
        &options,
        &json!({"model": "m", "messages": messages[..5]}).to_string(),
        None,
        None,
    )
    .expect("the first call");
    let (mut sent, mut at, mut appended, mut fired) = (5, 5, 0, 0);
    while at < messages.len() {
        let next = (at + 4).min(messages.len());
        let request = json!({"model": "m", "messages": messages[..next]}).to_string();
        let full = session_with(&options, &request, Some(&out.state), None).expect("the full call");
        let mut open = out.session;
        match open.append(&messages[at..next]).expect("valid messages") {
            Appended::Send { .. } => {
                appended += 1;
                assert!(full.firing.is_none(), "no firing at {next}");
                // The full call sends what was sent last time with the new messages.
                let last: Value = serde_json::from_str(&out.output).expect("json");
                let now: Value = serde_json::from_str(&full.output).expect("json");
                let now = now["messages"].as_array().expect("messages");
                assert_eq!(now.len(), sent + next - at);
                assert_eq!(
                    now[..sent],
                    last["messages"].as_array().expect("messages")[..]
                );
                assert_eq!(
                    open.state_json().as_deref(),
                    Some(full.state.as_str()),
                    "the state the full call writes"
                );
                assert_eq!(open.messages(), next);
                sent += next - at;
                out = full;
                out.session = open;
            }
            Appended::Full => {
                fired += 1;
                assert!(full.firing.is_some(), "the full call fires at {next}");
                let now: Value = serde_json::from_str(&full.output).expect("json");
                sent = now["messages"].as_array().expect("messages").len();
                out = full;
            }
        }
        at = next;
    }
    assert!(
        appended >= 5 && fired >= 1,
        "{appended} appended, {fired} fired"
    );
}

#[test]
fn a_session_held_open_refuses_a_message_its_provider_would_and_stays_as_it_was() {
    use cutctx_ops::session::{Appended, session_with};
    let request = chat(1, 10).to_string();
    let mut open = session_with(&open_options(), &request, None, None)
        .expect("a call")
        .session;
    let before = open.state_json();
    let orphan = json!({"role": "tool", "tool_call_id": "nowhere", "content": "x"});
    let e = open
        .append(&[orphan])
        .expect_err("a result without its call");
    assert!(e.code.starts_with("FORMAT_"), "{}", e.code);
    assert!(!e.to_string().contains("\"x\""), "no content in the error");
    assert_eq!(open.state_json(), before);
    assert_eq!(open.messages(), 5);
    let fine = json!({"role": "user", "content": "and then?"});
    assert!(matches!(
        open.append(&[fine]).expect("valid"),
        Appended::Send { .. }
    ));
    assert_eq!(open.messages(), 6);
    let e = open
        .append_text("{\"not\": \"a list\"}")
        .expect_err("not an array");
    assert_eq!(e.code, "VALIDATION_ERROR");
    let e = open.append_text("[{\"role\"").expect_err("torn");
    assert_eq!(e.code, "INPUT_ERROR");
    assert_eq!(open.messages(), 6);
}
