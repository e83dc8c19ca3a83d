//! A session's call that does not fire, in-process, against the floor of reading the request
//! once: what the proxy and Python add to a model call beyond what any reader of it pays.
//!
//! The request is an Anthropic Messages request shaped as a coding agent's after a long task: 12
//! tools, a 7 KB system prompt, and tool calls with their results (about 4.6 KB each), at 150
//! messages (about 400 KB), 1,000 and 10,000. The session has taken the same history without its
//! last two messages (a call and its result), as it would have at the previous call; the window
//! is one the request fits, so nothing fires. Measured, alternately within each round:
//!
//! * `floor`: the request's bytes parsed and its whole prompt counted, once;
//! * `read_once`: the proxy's reading of a call: parsed, counted, and its history's chained
//!   digests taken (the key that finds its session), once each;
//! * `step`: `Session::step` on the parsed request with its digests, the session held in memory
//!   (what the proxy does after reading it);
//! * `text`: the text path the binary takes (`session_with`: the request and the state file's
//!   text in, the request and the state's text out), for comparison.
//!
//! Printed: each one's median time, `step` over `floor`, and the growth of `step` from 1,000 to
//! 10,000 messages (flat is 1; linear is 10). Ratios, not times, so that figures taken while the
//! machine's speed drifts still compare.
//!
//! Run with `cargo bench -p cutctx-ops --bench session_step` (`-- --quick`: three rounds;
//! `-- --smoke`: one round on small inputs, to check that it still runs, as CI does).

use std::hint::black_box;
use std::time::{Duration, Instant};

use cutctx::formats::Format;
use cutctx_ops::session::{Call, Session, SessionOptions, session_with};
use serde_json::{Value, json};

#[expect(dead_code, reason = "the example's own `main`")]
#[path = "../examples/session_step_timed.rs"]
mod session_step_timed;

/// One tool definition of a coding agent's size.
fn tool(i: usize) -> Value {
    let properties: serde_json::Map<String, Value> = (0..8)
        .map(|j| {
            let description = format!("argument {j} of tool {i}: {}", "what it names. ".repeat(6));
            (
                format!("arg_{j}"),
                json!({"type": "string", "description": description}),
            )
        })
        .collect();
    json!({
        "name": format!("tool_{i}"),
        "description": format!("Tool {i}. {}", "It does one thing well. ".repeat(20)),
        "input_schema": {"type": "object", "properties": properties, "required": ["arg_0"]},
    })
}

/// A file's view of about 4.6 KB, as a tool result.
fn file_view(n: usize) -> String {
    let mut out = String::new();
    let mut k = 0;
    while out.len() < 4_600 {
        out.push_str(&format!(
            "{k:5}  def function_{n}_{k}(value): return value * {k}  # step {n}\n"
        ));
        k += 1;
    }
    out
}

/// The request at `messages` messages.
fn request(messages: usize) -> Value {
    let mut history = vec![json!({"role": "user", "content": "Fix the failing test."})];
    let mut n = 0;
    while history.len() + 2 <= messages {
        let id = format!("toolu_{n:06}");
        history.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Reading file {n}.")},
            {"type": "tool_use", "id": id, "name": format!("tool_{}", n % 12), "input": {"arg_0": format!("src/file_{n}.py")}}]}));
        history.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": file_view(n)}]}));
        n += 1;
    }
    json!({
        "model": "claude-bench",
        "max_tokens": 4096,
        "system": [{"type": "text", "text": format!("You are a coding agent. {}", "Follow the rules. ".repeat(380))}],
        "tools": (0..12).map(tool).collect::<Vec<_>>(),
        "messages": history,
    })
}

/// The settings the core's timed step uses (a window far above the request, `drop_oldest`).
fn options() -> SessionOptions {
    session_step_timed::options(Format::Anthropic)
}

/// One size's inputs: the request's text and value, and the session and state that took the
/// history without its last two messages.
struct Input {
    text: String,
    value: Value,
    earlier: Value,
    state: String,
}

fn input(messages: usize) -> Input {
    let value = request(messages);
    let mut earlier = value.clone();
    if let Some(list) = earlier["messages"].as_array_mut() {
        list.truncate(list.len() - 2);
    }
    let state = held(&earlier).state_json().expect("a state");
    Input {
        text: value.to_string(),
        value,
        earlier,
        state,
    }
}

/// A session held in memory that has taken `earlier`, as a front end keeps it between calls.
fn held(earlier: &Value) -> Session {
    let mut session = Session::new(&options()).expect("settings");
    session
        .step(earlier.clone(), Call::default())
        .expect("the earlier call");
    session
}

fn time(f: impl FnOnce()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

/// The four measures of one size, once each, in an order reversed every other round.
fn round(input: &Input, reverse: bool) -> [Duration; 4] {
    let estimator = cutctx::CharRatioEstimator::default();
    let floor = || {
        time(|| {
            let v: Value = serde_json::from_str(&input.text).expect("json");
            black_box(cutctx::session::prompt_tokens(Format::Anthropic, &v, &estimator).ok());
        })
    };
    let read_once = || {
        time(|| {
            let v: Value = serde_json::from_str(&input.text).expect("json");
            black_box(cutctx::session::prompt_tokens(Format::Anthropic, &v, &estimator).ok());
            let list = cutctx_ops::provider::history(Format::Anthropic, &v);
            black_box(cutctx_ops::provider::history_digests(
                Format::Anthropic,
                list,
            ));
        })
    };
    let step = || {
        let mut session = held(&input.earlier);
        let value = input.value.clone();
        let list = cutctx_ops::provider::history(Format::Anthropic, &value);
        let digests = cutctx_ops::provider::history_digests(Format::Anthropic, list);
        let call = Call {
            digests: Some(&digests),
            ..Call::default()
        };
        // The request moved in and handed back is freed after the clock stops, as the
        // proxy's is after it has been forwarded.
        let start = Instant::now();
        let prepared = black_box(session.step(value, call).expect("a step"));
        let took = start.elapsed();
        assert!(!prepared.changed, "nothing fires");
        drop(prepared);
        took
    };
    let text = || {
        time(|| {
            black_box(
                session_with(&options(), &input.text, Some(&input.state), None).expect("a call"),
            );
        })
    };
    if reverse {
        let t = text();
        let s = step();
        let r = read_once();
        [floor(), r, s, t]
    } else {
        [floor(), read_once(), step(), text()]
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let smoke = args.iter().any(|a| a == "--smoke");
    let rounds = if smoke {
        1
    } else if args.iter().any(|a| a == "--quick") {
        3
    } else {
        9
    };
    let sizes: &[usize] = if smoke {
        &[20, 60]
    } else {
        &[150, 1_000, 10_000]
    };
    let mut step_medians = Vec::new();
    for &messages in sizes {
        let input = input(messages);
        let mut all: [Vec<Duration>; 4] = Default::default();
        for r in 0..rounds {
            for (k, d) in round(&input, r % 2 == 1).into_iter().enumerate() {
                all[k].push(d);
            }
        }
        let [floor, read_once, step, text] = all.map(median);
        step_medians.push(step);
        println!(
            "{messages} messages ({} bytes): floor {floor:?}, read_once {read_once:?}, step {step:?} ({:.2}x floor), text {text:?} ({:.2}x floor)",
            input.text.len(),
            step.as_secs_f64() / floor.as_secs_f64(),
            text.as_secs_f64() / floor.as_secs_f64(),
        );
    }
    if let [.., a, b] = step_medians[..] {
        println!(
            "step growth from {} to {} messages: {:.2}x",
            sizes[sizes.len() - 2],
            sizes[sizes.len() - 1],
            b.as_secs_f64() / a.as_secs_f64()
        );
    }
}
