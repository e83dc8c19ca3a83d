//! Times the Rust core's session step on one request, for a front end's benchmark to compare
//! itself with in the same sitting (crates/cutctx-python/bench/prepare_bench.py).
//!
//! ```text
//! cargo run --release -p cutctx-ops --example session_step_timed -- FORMAT EARLIER.json REQUEST.json ROUNDS
//! ```
//!
//! A session (window far above the request, `drop_oldest`) takes `EARLIER.json` (the history
//! without its last messages), then `REQUEST.json` is stepped `ROUNDS` times, each on a fresh
//! copy of that session. Prints one JSON line: the median microseconds of the step on the parsed
//! request (`step`) and of parsing its bytes and stepping (`parse_step`).

use std::time::{Duration, Instant};

use cutctx_ops::session::{Breakpoints, Call, Session, SessionOptions, Tuning};
use cutctx_ops::{Format, ReasoningMode};
use serde_json::Value;

/// The settings of the timed session: a window far above any request, `drop_oldest`.
pub(crate) fn options(format: Format) -> SessionOptions {
    SessionOptions {
        format,
        window: 1_000_000_000,
        tuning: Tuning {
            trigger: None,
            target: None,
            policy: Some("drop_oldest".into()),
            prompt_id: None,
            estimator: None,
            protected_recent: None,
            reserve_output: 0,
            reasoning: ReasoningMode::Strip,
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

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v.get(v.len() / 2).map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, format, earlier, request, rounds] = &args[..] else {
        return Err("usage: session_step_timed FORMAT EARLIER.json REQUEST.json ROUNDS".into());
    };
    let format: Format = format.parse().map_err(|e| format!("{e:?}"))?;
    let earlier: Value = serde_json::from_str(&std::fs::read_to_string(earlier)?)?;
    let text = std::fs::read_to_string(request)?;
    let rounds: usize = rounds.parse()?;
    let held = || -> Result<Session, Box<dyn std::error::Error>> {
        let mut s = Session::new(&options(format)).map_err(|e| e.message)?;
        s.step(earlier.clone(), Call::default())
            .map_err(|e| e.message)?;
        Ok(s)
    };
    let (mut step, mut parse_step) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let mut session = held()?;
        let value: Value = serde_json::from_str(&text)?;
        let start = Instant::now();
        let out = session
            .step(value, Call::default())
            .map_err(|e| e.message)?;
        step.push(start.elapsed());
        drop(out);
        let mut session = held()?;
        let start = Instant::now();
        let value: Value = serde_json::from_str(&text)?;
        let out = session
            .step(value, Call::default())
            .map_err(|e| e.message)?;
        parse_step.push(start.elapsed());
        drop(out);
    }
    println!(
        "{{\"step\": {:.1}, \"parse_step\": {:.1}}}",
        median(step),
        median(parse_step)
    );
    Ok(())
}
