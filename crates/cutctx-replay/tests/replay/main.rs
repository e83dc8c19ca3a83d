//! The replay lab: the three strategies' figures, one marking rule for all, the lower bound
//! under every strategy, the warm start, invalidated reasoning, external strategies, the
//! summarizing calls, the peers' thresholds, retention of what each format calls a tool
//! result and of the task statement, each summarizing firing priced cached and fresh by one
//! rule, and the recorded corpora of `../shared` when present.

use cutctx_formats::{EstimatorSpec, Format, policy_named};
use cutctx_replay::summaries::{SummaryKind, summary_tokens};
use cutctx_replay::{
    External, ExternalCall, Marking, ReplayExtras, ReplayOptions, SummaryInput, replay,
    replay_extended, replay_with,
};
use cutctx_session::{
    PriceTable, SessionConfig, call_points, fixed_tokens, message_tokens, prompt_tokens,
};
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

#[test]
fn the_replay_prices_three_strategies() {
    let mut messages = Vec::new();
    for i in 0..20 {
        messages.extend(exchange(Format::OpenAiChat, i, 300));
    }
    let run = request(Format::OpenAiChat, &messages);
    let full = prompt_tokens(
        Format::OpenAiChat,
        &run,
        &cutctx_policies::CharRatioEstimator::default(),
    )
    .expect("count");
    let cfg = config(Format::OpenAiChat, full * 6 / 10, "drop_oldest");
    let r = replay(&cfg, &PriceTable::anthropic(), &run).expect("replay");
    let [none, stateless, session] = &r.strategies[..] else {
        panic!("three strategies")
    };
    assert_eq!(
        (
            none.name.as_str(),
            stateless.name.as_str(),
            session.name.as_str()
        ),
        ("none", "stateless", "session")
    );
    // Two model turns per exchange: the call and the answer.
    assert_eq!(none.calls, 40);
    assert_eq!(none.busts, 0);
    assert!(none.over_window > 0);
    assert_eq!((stateless.over_window, session.over_window), (0, 0));
    assert!(session.compactions < stateless.compactions);
    assert!(
        session.cost_units < stateless.cost_units,
        "{} vs {}",
        session.cost_units,
        stateless.cost_units
    );
    assert!(session.hit_rate() > stateless.hit_rate());
    // drop_oldest never summarizes: no firing priced, and the sums over none are +0 (an empty
    // `f64` sum is -0, which the JSON would print as `-0.0`).
    for s in &r.strategies {
        assert!(s.summary_firings.is_empty(), "{}", s.name);
        for units in [s.summary_cached_prefix_units(), s.summary_fresh_units()] {
            assert_eq!(units.to_bits(), 0.0_f64.to_bits(), "{}: {units}", s.name);
        }
    }
    // Everything fits: the session is exactly no compaction.
    let cfg = config(Format::OpenAiChat, full, "drop_oldest");
    let r = replay(&cfg, &PriceTable::openai(), &run).expect("replay");
    assert_eq!(r.strategies[0].cost_units, r.strategies[2].cost_units);
}

/// A run whose system prompt is cacheable on its own (over 1,024 tokens) and that outgrows a
/// window of 70% of its final size.
fn long_system_run() -> (Value, u64) {
    let mut messages = vec![json!({"role": "system", "content": "rule ".repeat(1_300)})];
    for i in 0..20 {
        messages.extend(exchange(Format::OpenAiChat, i, 300));
    }
    let run = json!({"model": "m", "messages": messages});
    let estimator = cutctx_policies::CharRatioEstimator::default();
    let system = fixed_tokens(Format::OpenAiChat, &run, &estimator).expect("count")
        + message_tokens(Format::OpenAiChat, &messages[0], &estimator).expect("count");
    assert!(system >= 1_024, "the system prefix is cacheable on its own");
    (run, system)
}

#[test]
fn the_replay_marks_every_strategy_by_one_rule() {
    let (run, system) = long_system_run();
    let full = prompt_tokens(
        Format::OpenAiChat,
        &run,
        &cutctx_policies::CharRatioEstimator::default(),
    )
    .expect("count");
    let mut cfg = config(Format::OpenAiChat, full * 7 / 10, "drop_oldest");
    cfg.cache_breakpoints = true;
    let prices = PriceTable::anthropic();
    // Every call after the first reads at least the system prefix, whatever the strategy did
    // to the messages after it: all three mark its end.
    let shared = replay(&cfg, &prices, &run).expect("replay");
    assert_eq!(
        shared,
        replay_with(&cfg, &prices, &run, Marking::Shared.into()).expect("replay")
    );
    for s in &shared.strategies {
        assert!(s.compactions > 0 || s.name == "none", "{} compacts", s.name);
        let floor = (s.calls as u64 - 1) * system;
        assert!(
            s.cached_tokens >= floor,
            "{}: {} < {floor}",
            s.name,
            s.cached_tokens
        );
    }
    // The asymmetric setting: stateless marks the last message alone, so each of its
    // compactions re-bills the system prompt. The session's firings keep the task in place
    // after the system prompt, so its first firing (whose system mark comes with it) re-bills
    // it at most once. Everything else is read alike.
    let asymmetric = replay_with(&cfg, &prices, &run, Marking::SessionOnly.into()).expect("replay");
    for (fair, favoured) in shared.strategies.iter().zip(&asymmetric.strategies) {
        let lost = fair.cached_tokens - favoured.cached_tokens;
        if fair.name == "session" {
            assert!(lost <= system, "session: {lost}");
        } else {
            assert_eq!(lost, fair.compactions as u64 * system, "{}", fair.name);
        }
    }
    assert!(asymmetric.strategies[1].cost_units > shared.strategies[1].cost_units);
    // Marks matter only where the provider caches at breakpoints.
    let openai = PriceTable::openai();
    assert_eq!(
        replay_with(&cfg, &openai, &run, Marking::Shared.into()).expect("replay"),
        replay_with(&cfg, &openai, &run, Marking::SessionOnly.into()).expect("replay")
    );
}

#[test]
fn no_strategy_pays_less_than_the_lower_bound() {
    let (run, _) = long_system_run();
    let full = prompt_tokens(
        Format::OpenAiChat,
        &run,
        &cutctx_policies::CharRatioEstimator::default(),
    )
    .expect("count");
    for fraction in [10, 7, 5] {
        let cfg = config(Format::OpenAiChat, full * fraction / 10, "drop_oldest");
        for prices in [PriceTable::anthropic(), PriceTable::openai()] {
            for warm_prefix in [false, true] {
                let options = ReplayOptions {
                    marking: Marking::Shared,
                    warm_prefix,
                };
                let r = replay_with(&cfg, &prices, &run, options).expect("replay");
                assert!(r.bound_units > 0.0);
                for s in &r.strategies {
                    assert!(
                        s.cost_units >= r.bound_units,
                        "{} at {fraction}/10, {}, warm {warm_prefix}: {} < {}",
                        s.name,
                        prices.name,
                        s.cost_units,
                        r.bound_units
                    );
                }
            }
        }
    }
}

#[test]
fn a_warm_prefix_reads_the_system_prompt_at_the_first_call_for_every_strategy() {
    let (run, system) = long_system_run();
    let full = prompt_tokens(
        Format::OpenAiChat,
        &run,
        &cutctx_policies::CharRatioEstimator::default(),
    )
    .expect("count");
    let cfg = config(Format::OpenAiChat, full * 7 / 10, "drop_oldest");
    let prices = PriceTable::anthropic();
    let cold = replay(&cfg, &prices, &run).expect("replay");
    let warm = replay_with(
        &cfg,
        &prices,
        &run,
        ReplayOptions {
            marking: Marking::Shared,
            warm_prefix: true,
        },
    )
    .expect("replay");
    assert!(warm.bound_units < cold.bound_units);
    for (c, w) in cold.strategies.iter().zip(&warm.strategies) {
        // The first call reads the tools and system prompt instead of writing them; the rest
        // of the run is the same.
        assert_eq!(w.cached_tokens, c.cached_tokens + system, "{}", c.name);
        assert!(w.cost_units < c.cost_units);
        assert_eq!((w.busts, w.compactions), (c.busts, c.compactions));
    }
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
fn the_replay_counts_invalidated_reasoning_once_and_prices_it_at_the_output_price() {
    let run = thinking_run(12, 800, 3000, false);
    let estimator = cutctx_policies::CharRatioEstimator::default();
    let size = prompt_tokens(Format::Anthropic, &run, &estimator).expect("count");
    let cfg = config(Format::Anthropic, size * 6 / 10, "observation_masking");
    let prices = PriceTable::anthropic();
    let r = replay(&cfg, &prices, &run).expect("replay");
    let [none, stateless, session] = &r.strategies[..] else {
        panic!("three strategies")
    };
    assert_eq!(
        none.reasoning_tokens, 0,
        "sending everything invalidates nothing"
    );
    assert_eq!(none.reasoning_units, Some(0.0));
    assert!(stateless.compactions > 1 && session.compactions >= 1);
    // Each block is counted once however often it is invalidated: at most all of them.
    let all = 12 * estimator_tokens(800);
    for s in [stateless, session] {
        assert!(s.reasoning_tokens > 0, "{}", s.name);
        assert!(
            s.reasoning_tokens <= all,
            "{}: {} > {all}",
            s.name,
            s.reasoning_tokens
        );
        assert_eq!(s.reasoning_tokens % estimator_tokens(800), 0);
        #[expect(clippy::cast_precision_loss, reason = "small counts")]
        let priced = s.reasoning_tokens as f64 * 5.0;
        assert_eq!(s.reasoning_units, Some(priced));
    }
    // A table without an output price counts it and prices nothing.
    let mut unpriced = prices.clone();
    unpriced.output = None;
    let r = replay(&cfg, &unpriced, &run).expect("replay");
    assert!(r.strategies[1].reasoning_tokens > 0);
    assert_eq!(r.strategies[1].reasoning_units, None);
}

/// Tokens of a text of `n` characters at four characters a token.
fn estimator_tokens(n: usize) -> u64 {
    u64::try_from(n.div_ceil(4)).expect("small")
}

/// The long coding-agent runs of `../shared/realworld/long-runs`, by file name; `None` (with a
/// message) when the directory is absent.
fn long_runs() -> Option<Vec<(String, Value)>> {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/realworld/long-runs");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        eprintln!("skipped: ../shared/realworld/long-runs is absent");
        return None;
    };
    let mut names: Vec<_> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".chat.json"))
        .collect();
    names.sort();
    Some(
        names
            .into_iter()
            .map(|n| {
                let text = std::fs::read_to_string(dir.join(&n)).expect("readable");
                let run: Value = serde_json::from_str(&text).expect("JSON");
                (n, run)
            })
            .collect(),
    )
}

/// The settings `cutctx replay` uses by default (`default_chain`, four protected turns) at
/// `fraction` of the run's final size.
fn replay_config(run: &Value, fraction: f64) -> SessionConfig {
    let full = prompt_tokens(
        Format::OpenAiChat,
        run,
        &cutctx_policies::CharRatioEstimator::default(),
    )
    .expect("count");
    let mut cfg = config(
        Format::OpenAiChat,
        (full as f64 * fraction) as u64,
        "default_chain",
    );
    cfg.protected_recent = 4;
    cfg
}

/// The replay of `run` at `fraction` of its final size, warm, with every strategy.
fn compared(run: &Value, fraction: f64, prices: &PriceTable) -> cutctx_replay::Replay {
    let cfg = replay_config(run, fraction);
    let options = ReplayOptions {
        marking: Marking::Shared,
        warm_prefix: true,
    };
    let extras = ReplayExtras {
        compare: true,
        ..ReplayExtras::default()
    };
    replay_extended(&cfg, prices, run, options, &extras).expect("replay")
}

/// The invariants every compared replay holds: the bound under every strategy (the offline
/// reference and the peers included), and the constructed strategies over the window only
/// where the untouchable part alone is.
fn assert_invariants(name: &str, fraction: f64, r: &cutctx_replay::Replay) {
    assert!(r.bound_units > 0.0, "{name}");
    assert_eq!(
        r.strategies.len(),
        10,
        "{name}: three, hindsight and six peers"
    );
    for s in &r.strategies {
        assert!(
            s.cost_units >= r.bound_units,
            "{name} at {fraction}: {} pays {} under the bound {}",
            s.name,
            s.cost_units,
            r.bound_units
        );
        assert!(s.summary_units <= s.cost_units, "{name}: {}", s.name);
        if matches!(s.name.as_str(), "stateless" | "session" | "hindsight") {
            assert_eq!(
                s.over_window, s.fixed_over,
                "{name} at {fraction}: {}",
                s.name
            );
        }
    }
    // Sending everything keeps everything.
    let none = &r.strategies[0];
    assert_eq!(
        (
            none.retention.identifiers,
            none.retention.task_intact,
            none.retention.recent_results
        ),
        (1.0, 1.0, 1.0),
        "{name}"
    );
}

#[test]
fn every_long_run_replays_under_the_window_and_above_the_bound() {
    let Some(runs) = long_runs() else { return };
    assert_eq!(runs.len(), 9, "the corpus holds nine runs");
    let prices = PriceTable::anthropic();
    for (name, run) in &runs {
        for fraction in [0.5, 0.3] {
            let r = compared(run, fraction, &prices);
            assert_invariants(name, fraction, &r);
            let cost = |n: &str| {
                r.strategies
                    .iter()
                    .find(|s| s.name == n)
                    .map(|s| s.cost_units)
                    .expect("present")
            };
            // The offline schedule is chosen on estimates; exact, it stays near or under the
            // session's own.
            assert!(
                cost("hindsight") <= cost("session") * 1.05,
                "{name} at {fraction}: hindsight {} against session {}",
                cost("hindsight"),
                cost("session")
            );
        }
    }
}

#[test]
fn a_sample_of_tau_bench_replays_above_the_bound_under_every_strategy() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/realworld/tau-bench");
    let (Ok(runs), Ok(tools)) = (
        std::fs::read_to_string(dir.join("gpt-4o-airline.json")),
        std::fs::read_to_string(dir.join("airline_tools.json")),
    ) else {
        eprintln!("skipped: ../shared/realworld/tau-bench is absent");
        return;
    };
    let runs: Value = serde_json::from_str(&runs).expect("JSON");
    let tools: Value = serde_json::from_str(&tools).expect("JSON");
    let runs = runs.as_array().expect("a list of runs");
    assert_eq!(runs.len(), 200);
    // Every 25th run in debug builds; the whole corpus is measured by the benchmark script.
    let step = if cfg!(debug_assertions) { 25 } else { 1 };
    let prices = PriceTable::anthropic();
    for (i, r) in runs.iter().enumerate().step_by(step) {
        let run = json!({"model": "gpt-4o", "messages": r["traj"], "tools": tools});
        for fraction in [0.7, 0.5] {
            assert_invariants(
                &format!("run {i}"),
                fraction,
                &compared(&run, fraction, &prices),
            );
        }
    }
}

#[test]
fn an_external_strategy_is_priced_as_the_same_requests_are() {
    let mut messages = Vec::new();
    for i in 0..10 {
        messages.extend(exchange(Format::OpenAiChat, i, 300));
    }
    let run = request(Format::OpenAiChat, &messages);
    let cfg = config(Format::OpenAiChat, 2_000, "drop_oldest");
    let points = call_points(Format::OpenAiChat, &messages);
    let as_none: Vec<ExternalCall> = points
        .iter()
        .map(|&len| ExternalCall {
            request: request(Format::OpenAiChat, &messages[..len]),
            summary: None,
        })
        .collect();
    let mut with_summary = as_none.clone();
    with_summary[3].summary = Some(cutctx_session::cache::SummaryCall {
        input_tokens: 1_000,
        cached_tokens: 800,
        output_tokens: 100,
    });
    let extras = ReplayExtras {
        external: vec![
            External {
                name: "mine".into(),
                calls: as_none,
            },
            External {
                name: "summarized".into(),
                calls: with_summary,
            },
        ],
        ..ReplayExtras::default()
    };
    let prices = PriceTable::anthropic();
    let r =
        replay_extended(&cfg, &prices, &run, ReplayOptions::default(), &extras).expect("replay");
    let [none, _, _, mine, summarized] = &r.strategies[..] else {
        panic!("five strategies")
    };
    assert_eq!(mine.name, "mine");
    assert_eq!(
        (mine.cost_units, mine.cached_tokens, mine.over_window),
        (none.cost_units, none.cached_tokens, none.over_window)
    );
    assert_eq!(mine.retention, none.retention);
    // 800 read at 0.1, 200 at 1, 100 out at 5.
    let charged = 80.0 + 200.0 + 500.0;
    assert!((summarized.summary_units - charged).abs() < 1e-9);
    assert!((summarized.cost_units - none.cost_units - charged).abs() < 1e-6);
    // One request short: refused, naming both figures.
    let mut short = extras.clone();
    short.external[0].calls.pop();
    let err = replay_extended(&cfg, &prices, &run, ReplayOptions::default(), &short)
        .expect_err("refused");
    assert_eq!(err.code(), "VALIDATION_ERROR");
    let text = err.to_string();
    assert!(
        text.contains(&format!("{}", points.len() - 1))
            && text.contains(&format!("{}", points.len())),
        "{text}"
    );
}

#[test]
fn a_summary_asked_with_the_cached_prefix_reads_it() {
    let Some(runs) = long_runs() else { return };
    let (name, run) = &runs[0];
    let cfg = replay_config(run, 0.3);
    let prices = PriceTable::anthropic();
    let options = ReplayOptions {
        marking: Marking::Shared,
        warm_prefix: true,
    };
    let by = |summary_input| {
        let extras = ReplayExtras {
            summary_input,
            ..ReplayExtras::default()
        };
        replay_extended(&cfg, &prices, run, options, &extras).expect("replay")
    };
    let (span, cached) = (by(SummaryInput::Span), by(SummaryInput::Cached));
    let (a, b) = (&span.strategies[2], &cached.strategies[2]);
    assert_eq!(a.summaries > 0, b.summaries > 0, "{name}");
    // The requests sent are the same; only the summarizing calls' bills differ.
    assert_eq!(
        (a.tokens_sent, a.cached_tokens),
        (b.tokens_sent, b.cached_tokens)
    );
    assert!(
        (a.cost_units - a.summary_units - (b.cost_units - b.summary_units)).abs() < 1e-6,
        "{name}"
    );
}

#[test]
fn the_peers_fire_where_their_published_thresholds_say() {
    use cutctx_replay::peers::{Rule, trigger};
    assert_eq!(trigger(Rule::ClaudeCode, 200_000), 167_000);
    assert_eq!(trigger(Rule::Codex, 200_000), 180_000);
    assert_eq!(trigger(Rule::ClearToolUses, 200_000), 100_000);
    assert_eq!(trigger(Rule::ServerCompaction, 200_000), 150_000);
    assert_eq!(trigger(Rule::DeepAgents, 200_000), 170_000);
    // Scaled to the window.
    assert_eq!(trigger(Rule::ClaudeCode, 20_000), 16_700);
    assert_eq!(trigger(Rule::ServerCompaction, 20_000), 15_000);
}

/// The peers keep what they keep at their published budgets, not scaled to the window:
/// Claude Code restores files of up to 5,000 tokens each and 50,000 in all, Codex keeps user
/// messages up to 20,000 tokens, each capped only by what fits under the window after the
/// summary; the clearing's `clear_at_least` (5,000, the docs' example) is scaled like its
/// trigger. Scaled as they were, a 20,000-token window would have restored files of at most
/// 500 tokens and kept 2,000 tokens of user messages.
#[test]
fn the_peers_keep_their_published_budgets() {
    use cutctx_replay::peers::{clear_at_least, codex_user_budget, restore_budget};
    assert_eq!(clear_at_least(200_000), 5_000);
    assert_eq!(clear_at_least(20_000), 500);
    // Room under a 20,000-token window after the summary.
    assert_eq!(restore_budget(15_000), (5_000, 15_000));
    assert_eq!(restore_budget(500_000), (5_000, 50_000));
    assert_eq!(restore_budget(800), (800, 800));
    assert_eq!(codex_user_budget(15_000), 15_000);
    assert_eq!(codex_user_budget(500_000), 20_000);
    assert_eq!(codex_user_budget(0), 0);
}

/// Anthropic's tool-result clearing applies only when it clears at least `clear_at_least`
/// tokens: over its trigger with tool results too small to be worth a cache bust, it sends
/// the requests as they are; with large ones it clears.
#[test]
fn clear_tool_uses_clears_only_when_it_clears_at_least_its_minimum() {
    for format in Format::ALL {
        let mut small = Vec::new();
        let mut large = Vec::new();
        for i in 0..20 {
            let mut e = exchange(format, i, 2_000);
            large.extend(e.clone());
            // The tool result: a few tokens.
            match format {
                Format::OpenAiChat => e[2]["content"] = json!("ok"),
                Format::OpenAiResponses => e[2]["output"] = json!("ok"),
                Format::Anthropic => e[2]["content"][0]["content"] = json!("ok"),
            }
            small.extend(e);
        }
        for (messages, clears) in [(small, false), (large, true)] {
            let run = request(format, &messages);
            let full = prompt_tokens(
                format,
                &run,
                &cutctx_policies::CharRatioEstimator::default(),
            )
            .expect("count");
            // The trigger (half the window) is passed well before the end.
            let cfg = config(format, full * 13 / 10, "drop_oldest");
            let extras = ReplayExtras {
                compare: true,
                ..ReplayExtras::default()
            };
            let r = replay_extended(
                &cfg,
                &PriceTable::anthropic(),
                &run,
                ReplayOptions::default(),
                &extras,
            )
            .expect("replay");
            let cleared = r
                .strategies
                .iter()
                .find(|s| s.name == "clear-tool-uses")
                .expect("present");
            assert_eq!(cleared.compactions > 0, clears, "{format}: clears {clears}");
        }
    }
}

/// Stateless compaction (the replay's `cutctx compact`) does not pin the task statement; the
/// session's firings do.
#[test]
fn the_session_keeps_the_task_statement_at_least_as_often_as_stateless_compaction() {
    for format in Format::ALL {
        let mut messages = Vec::new();
        for i in 0..12 {
            messages.extend(exchange(format, i, 400));
        }
        let req = request(format, &messages);
        let cfg = config(format, 3_000, "default_chain");
        let r = replay(&cfg, &PriceTable::anthropic(), &req).expect("replay");
        assert!(
            r.strategies[2].compactions > 0,
            "{format}: the session fires"
        );
        assert!(r.strategies[2].retention.task_intact >= r.strategies[1].retention.task_intact);
    }
}

/// Retention counts what each format calls a tool result (its `Descriptor`): sending
/// everything keeps every recent result, and Anthropic's tool-result clearing, which replaces
/// all but the three latest, keeps fewer of the last ten, in every format alike.
#[test]
fn retention_counts_the_tool_results_each_format_names() {
    for format in Format::ALL {
        let mut messages = Vec::new();
        for i in 0..16 {
            messages.extend(exchange(format, i, 300));
        }
        let run = request(format, &messages);
        let full = prompt_tokens(
            format,
            &run,
            &cutctx_policies::CharRatioEstimator::default(),
        )
        .expect("count");
        let cfg = config(format, full * 8 / 10, "drop_oldest");
        let extras = ReplayExtras {
            compare: true,
            retention_last: 10,
            ..ReplayExtras::default()
        };
        let r = replay_extended(
            &cfg,
            &PriceTable::anthropic(),
            &run,
            ReplayOptions::default(),
            &extras,
        )
        .expect("replay");
        let by = |name: &str| {
            r.strategies
                .iter()
                .find(|s| s.name == name)
                .expect("present")
        };
        assert_eq!(by("none").retention.recent_results, 1.0, "{format}");
        let cleared = by("clear-tool-uses");
        assert!(cleared.compactions > 0, "{format}: the clearing fires");
        assert!(
            cleared.retention.recent_results < 1.0,
            "{format}: {}",
            cleared.retention.recent_results
        );
    }
}

/// The replay's stand-in summary (`replay::stand_in`), so that a session stepped here sends
/// the requests the replay's does.
fn stand_in_summary(
    _: &cutctx_formats::ProviderTranscript,
    r: &cutctx_model::SummarizationRequest,
) -> Result<String, cutctx_formats::FormatError> {
    let n = usize::try_from(r.target_tokens()).unwrap_or(0).max(1);
    let mut text = format!("[summary of {} turns] ", r.turn_ids().len());
    while text.len() < n * 4 {
        text.push_str("summary ");
    }
    Ok(text)
}

/// The calls (from 1) before which a session over `run` under `cfg` fires with a summary,
/// stepped here call by call, apart from the replay.
fn summarizing_firings(cfg: &SessionConfig, run: &Value) -> Vec<usize> {
    let messages = run["messages"].as_array().expect("a list");
    let mut state: Option<cutctx_session::SessionState> = None;
    let mut out = Vec::new();
    for (k, &len) in call_points(Format::OpenAiChat, messages).iter().enumerate() {
        let request = json!({"model": run["model"], "messages": messages[..len]});
        let s = cutctx_session::step::<cutctx_formats::FormatError>(
            cfg,
            state.as_ref(),
            &request,
            &mut stand_in_summary,
        )
        .expect("step");
        if s.firing
            .as_ref()
            .is_some_and(|f| !f.plan.summarization_requests.is_empty())
        {
            out.push(k + 1);
        }
        state = Some(s.state);
    }
    out
}

/// A run with a system prompt cacheable on its own and 40 exchanges, over which a summarizing
/// session at half its final size fires several times.
fn summarizing_run() -> Value {
    let mut messages = vec![json!({"role": "system", "content": "rule ".repeat(1_300)})];
    for i in 0..40 {
        messages.extend(exchange(Format::OpenAiChat, i, 300));
    }
    json!({"model": "m", "messages": messages})
}

/// The instruction's tokens: what every summarizing call adds to what it summarizes.
fn instruction_tokens() -> u64 {
    message_tokens(
        Format::OpenAiChat,
        &json!({"role": "user", "content": cutctx_session::SUMMARY_INSTRUCTION}),
        &cutctx_policies::CharRatioEstimator::default(),
    )
    .expect("count")
}

/// Each summarizing firing of the session is reported once, priced as a cached-prefix request
/// (the prefix read at the cache price) and fresh (nothing cached), and charged by how it was
/// asked; the strategy's cost with summaries free is its cost less `summary_units`.
#[test]
fn each_summarizing_firing_is_priced_cached_and_fresh_and_charged_by_one_rule() {
    let run = summarizing_run();
    let full = prompt_tokens(
        Format::OpenAiChat,
        &run,
        &cutctx_policies::CharRatioEstimator::default(),
    )
    .expect("count");
    let cfg = config(Format::OpenAiChat, full / 2, "summarizing");
    let prices = PriceTable::anthropic();
    let out_price = prices.output.expect("an output price");
    let by = |summary_input| {
        let extras = ReplayExtras {
            summary_input,
            ..ReplayExtras::default()
        };
        replay_extended(&cfg, &prices, &run, ReplayOptions::default(), &extras).expect("replay")
    };
    let (cached, span) = (by(SummaryInput::Cached), by(SummaryInput::Span));
    let firings = summarizing_firings(&cfg, &run);
    assert!(firings.len() >= 2, "the session summarizes: {firings:?}");
    let (c, s) = (&cached.strategies[2], &span.strategies[2]);
    for r in [c, s] {
        let calls: Vec<usize> = r.summary_firings.iter().map(|f| f.call).collect();
        assert_eq!(calls, firings, "one report per summarizing firing");
        let charged: f64 = r.summary_firings.iter().map(|f| f.charged.units).sum();
        assert!((charged - r.summary_units).abs() < 1e-6);
        assert!((r.summaries_free_units() - (r.cost_units - r.summary_units)).abs() < 1e-9);
    }
    assert_eq!(c.summaries, firings.len(), "cached: one call per firing");
    let instruction = instruction_tokens();
    for (a, b) in c.summary_firings.iter().zip(&s.summary_firings) {
        let (prefix, fresh) = (
            a.cached_prefix.expect("priced cached"),
            a.fresh.expect("priced fresh"),
        );
        assert_eq!(a.kind, SummaryKind::CachedPrefix);
        assert_eq!(a.charged, prefix, "cached is charged as cached");
        // It reads the prefix the last call wrote, at the read price: charged like fresh (the
        // whole input at the base price) it would cost more.
        assert!(prefix.cached_tokens > 0 && prefix.cached_tokens < prefix.input_tokens);
        let expected = prefix.cached_tokens as f64 * prices.cache_read
            + (prefix.input_tokens - prefix.cached_tokens) as f64
            + prefix.output_tokens as f64 * out_price;
        assert!((prefix.units - expected).abs() < 1e-6, "{prefix:?}");
        assert!(
            prefix.units < prefix.input_tokens as f64 + prefix.output_tokens as f64 * out_price
        );
        // Fresh: each span plus the instruction, nothing cached.
        assert_eq!(fresh.cached_tokens, 0);
        assert!(fresh.input_tokens > instruction * fresh.calls as u64);
        let expected = fresh.input_tokens as f64 + fresh.output_tokens as f64 * out_price;
        assert!((fresh.units - expected).abs() < 1e-6, "{fresh:?}");
        assert_eq!(
            prefix.output_tokens, fresh.output_tokens,
            "one summary length"
        );
        // Asked as spans, the same firing is charged the fresh figures.
        assert_eq!(b.kind, SummaryKind::Fresh);
        assert_eq!(
            (b.charged, b.cached_prefix, b.fresh),
            (fresh, Some(prefix), Some(fresh))
        );
    }
    assert!((s.summary_units - c.summary_fresh_units()).abs() < 1e-6);
    assert!((c.summary_units - s.summary_cached_prefix_units()).abs() < 1e-6);
    // Every strategy that summarizes reports its firings; none reports none.
    assert!(cached.strategies[0].summary_firings.is_empty());
    assert_eq!(
        cached.strategies[1].summary_firings.len(),
        cached.strategies[1].summaries
    );
}

/// The peers' summaries take the one length rule (the summarizing policy's, for the tokens
/// they replace) and are charged by how each peer asks: server compaction natively, Claude
/// Code and Codex with the cached prefix, OpenHands and Deep Agents fresh.
#[test]
fn the_peers_summaries_follow_the_one_length_rule_and_their_way_of_asking() {
    let (run, _) = long_system_run();
    let full = prompt_tokens(
        Format::OpenAiChat,
        &run,
        &cutctx_policies::CharRatioEstimator::default(),
    )
    .expect("count");
    let cfg = config(Format::OpenAiChat, full / 2, "default_chain");
    let extras = ReplayExtras {
        compare: true,
        ..ReplayExtras::default()
    };
    let r = replay_extended(
        &cfg,
        &PriceTable::anthropic(),
        &run,
        ReplayOptions::default(),
        &extras,
    )
    .expect("replay");
    let instruction = instruction_tokens();
    for (name, kind) in [
        ("claude-code", SummaryKind::CachedPrefix),
        ("codex", SummaryKind::CachedPrefix),
        ("server-compaction", SummaryKind::Native),
        ("openhands", SummaryKind::Fresh),
        ("deep-agents", SummaryKind::Fresh),
    ] {
        let s = r.strategies.iter().find(|s| s.name == name).expect(name);
        assert!(!s.summary_firings.is_empty(), "{name} summarizes");
        assert_eq!(s.summary_firings.len(), s.summaries, "{name}");
        for f in &s.summary_firings {
            assert_eq!(f.kind, kind, "{name}");
            let fresh = f.fresh.expect("priced fresh");
            let prefix = f.cached_prefix.expect("priced cached");
            let replaced = fresh.input_tokens - instruction;
            assert_eq!(fresh.output_tokens, summary_tokens(replaced), "{name}");
            let expected = if kind == SummaryKind::Fresh {
                fresh
            } else {
                prefix
            };
            assert_eq!(f.charged, expected, "{name}");
        }
    }
    let cleared = r
        .strategies
        .iter()
        .find(|s| s.name == "clear-tool-uses")
        .expect("present");
    assert!(cleared.summary_firings.is_empty());
}

/// The summarizing policy's plan asks for the length the one rule gives the span it
/// summarizes, so the session's summaries and the peers' are sized alike.
#[test]
fn the_policys_summary_length_is_the_one_rule() {
    let (run, _) = long_system_run();
    let full = prompt_tokens(
        Format::OpenAiChat,
        &run,
        &cutctx_policies::CharRatioEstimator::default(),
    )
    .expect("count");
    let cfg = config(Format::OpenAiChat, full / 2, "summarizing");
    let extras = ReplayExtras {
        summary_input: SummaryInput::Span,
        ..ReplayExtras::default()
    };
    let r = replay_extended(
        &cfg,
        &PriceTable::anthropic(),
        &run,
        ReplayOptions::default(),
        &extras,
    )
    .expect("replay");
    let session = &r.strategies[2];
    assert!(!session.summary_firings.is_empty());
    let instruction = instruction_tokens();
    for f in &session.summary_firings {
        let fresh = f.fresh.expect("priced fresh");
        assert_eq!(
            fresh.calls, 1,
            "the summarizing policy asks one summary per firing"
        );
        assert_eq!(
            fresh.output_tokens,
            summary_tokens(fresh.input_tokens - instruction)
        );
    }
}

/// A small Chat run for the needed-information measure: the task, a listing whose result first
/// shows `src/app_io.py`, a second user message, then an answer that opens that file (the
/// second of three calls), its result and a last answer.
fn needed_run() -> (Value, Vec<Value>) {
    let call = |id: &str, args: &str| {
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": id, "type": "function", "function": {"name": "run", "arguments": args}}]})
    };
    let messages = vec![
        json!({"role": "user", "content": "Fix the failing test."}),
        call("c1", "{\"cmd\": \"ls\"}"),
        json!({"role": "tool", "tool_call_id": "c1", "content": "src/app_io.py src/app_cli.py"}),
        json!({"role": "user", "content": "Start with the reader, please."}),
        call("c2", "{\"cmd\": \"cat src/app_io.py\"}"),
        json!({"role": "tool", "tool_call_id": "c2", "content": "def read_all(): pass"}),
        json!({"role": "assistant", "content": "Done."}),
    ];
    (request(Format::OpenAiChat, &messages), messages)
}

/// An identifier first seen in a tool result and used by the next answer counts as recalled
/// when sent verbatim, apart when only a digest stub of its result is left, and as lost when
/// the result is gone; the latest user message is checked as the task is.
#[test]
fn recall_counts_needed_identifiers_verbatim_behind_a_digest_and_lost_apart() {
    let (run, messages) = needed_run();
    let points = call_points(Format::OpenAiChat, &messages);
    assert_eq!(points, [1, 4, 6]);
    let at = |edit: &dyn Fn(&mut Vec<Value>)| -> Vec<ExternalCall> {
        points
            .iter()
            .map(|&len| {
                let mut sent = messages[..len].to_vec();
                if len >= 4 {
                    edit(&mut sent);
                }
                ExternalCall {
                    request: request(Format::OpenAiChat, &sent),
                    summary: None,
                }
            })
            .collect()
    };
    let stub = format!("[masked] (original: 9 tokens, sha256:{})", "ab".repeat(32));
    let external = |name: &str, calls| External {
        name: name.into(),
        calls,
    };
    let extras = ReplayExtras {
        external: vec![
            external("verbatim", at(&|_| {})),
            external(
                "digest",
                at(&|m| m[2]["content"] = Value::String(stub.clone())),
            ),
            external(
                "placeholder",
                at(&|m| m[2]["content"] = Value::String("[cleared]".into())),
            ),
            external(
                "no-latest-user",
                at(&|m| {
                    m.remove(3);
                }),
            ),
        ],
        ..ReplayExtras::default()
    };
    let cfg = config(Format::OpenAiChat, 10_000, "drop_oldest");
    let r = replay_extended(
        &cfg,
        &PriceTable::anthropic(),
        &run,
        ReplayOptions::default(),
        &extras,
    )
    .expect("replay");
    let by = |name: &str| {
        r.strategies
            .iter()
            .find(|s| s.name == name)
            .expect("present")
            .retention
    };
    // One needed identifier, src/app_io.py (the answer's "cat" and "cmd" are plain words).
    let verbatim = by("verbatim");
    assert_eq!((verbatim.needed, verbatim.needed_behind_digest), (1.0, 0.0));
    let digest = by("digest");
    assert_eq!((digest.needed, digest.needed_behind_digest), (0.0, 1.0));
    let placeholder = by("placeholder");
    assert_eq!(
        (placeholder.needed, placeholder.needed_behind_digest),
        (0.0, 0.0)
    );
    // The latest user message is the task at the first call, the second one after.
    assert_eq!(verbatim.latest_user, 1.0);
    let dropped = by("no-latest-user");
    assert!((dropped.latest_user - 1.0 / 3.0).abs() < 1e-12);
    assert_eq!(dropped.task_intact, 1.0);
    assert!((dropped.users_where_they_fit - 1.0 / 3.0).abs() < 1e-12);
    assert_eq!(dropped.users_cannot_fit, 0);
}

/// Where the system prompt, the task and the latest user message together exceed the window,
/// the call is counted apart and not held against a strategy.
#[test]
fn calls_where_the_task_and_the_latest_user_message_cannot_fit_are_counted_apart() {
    let (_, mut messages) = needed_run();
    messages[0] = json!({"role": "user", "content": format!("Fix it. {}", "detail ".repeat(400))});
    let run = request(Format::OpenAiChat, &messages);
    let points = call_points(Format::OpenAiChat, &messages);
    // A request without the task at every call.
    let calls = points
        .iter()
        .map(|&len| ExternalCall {
            request: request(Format::OpenAiChat, &messages[1..len]),
            summary: None,
        })
        .collect();
    let extras = ReplayExtras {
        external: vec![External {
            name: "taskless".into(),
            calls,
        }],
        ..ReplayExtras::default()
    };
    let cfg = config(Format::OpenAiChat, 300, "drop_oldest");
    let r = replay_extended(
        &cfg,
        &PriceTable::anthropic(),
        &run,
        ReplayOptions::default(),
        &extras,
    )
    .expect("replay");
    let taskless = r
        .strategies
        .iter()
        .find(|s| s.name == "taskless")
        .expect("present")
        .retention;
    assert_eq!(taskless.task_intact, 0.0);
    assert_eq!(taskless.users_cannot_fit, 3);
    assert_eq!(taskless.users_where_they_fit, 1.0);
}
