//! The JSON path (`cutctx.formats.compact_json`: request bytes in, compacted request bytes out)
//! taken apart in-process, each stage against one SHA-256 pass over the request and against
//! the least any reader of the request must do.
//!
//! The request is the one `crates/cutctx-python/bench/bench.py` feeds `compact_json`, byte for
//! byte (`json.dumps` of an OpenAI Chat request of 100,000 turns: a system prompt, then an
//! assistant call, a tool result of about 1 KB and a user prompt per step), under the same
//! budget (a tenth of the turns' estimates) and the default chain with every summary supplied.
//! Each round times, in an order reversed every other round:
//!
//! - one SHA-256 pass over the request;
//! - checking that it is JSON and nothing more (`serde_json` into `IgnoredAny`: no value, no
//!   turn, no provider rule): what any reader that refuses a malformed request must pay;
//! - reading it into a transcript (`ProviderTranscript::from_text_deferred`, contents left in
//!   the text, as `compact_json` reads it);
//! - the first half of `compact_json` (`cli::prepare`: reading, counting the prompt, the plan);
//! - the whole of it (`prepare`, then `finish`: applying the plan and writing the request).
//!
//! and prints the medians, in milliseconds and as multiples of the SHA-256 pass, with the plan's
//! share (`prepare` less the reading) and the finish's (the whole less `prepare`).
//! `-- --reference-seconds S` also prints what the issue's 150× target allows for a reference
//! time of `S` (the reference's in-process plan + apply, which `bench.py` measures), and the
//! least the JSON path can cost with the core's plan and finish as they are: the JSON check,
//! the plan and the finish.
//!
//! Run with `cargo bench -p cutctx-ops --bench json_path` (`-- --smoke`: one round on a request
//! a hundredth the size, as CI runs it, to check that it still runs).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::hint::black_box;
use std::time::{Duration, Instant};

use cutctx::formats::{EstimatorSpec, Format, ProviderTranscript};
use cutctx_ops::formats::{FormatOptions, Keep, finish, prepare};
use sha2::{Digest, Sha256};

const FULL_TURNS: usize = 100_000;
const FULL_ROUNDS: usize = 7;
const WARM_UP_ROUNDS: usize = 1;
/// The issue's target for the JSON path, as a multiple of the reference's speed.
const TARGET: f64 = 150.0;

/// The request `bench.py` writes for `turns` turns, as `json.dumps` writes it, and its budget.
fn request(turns: usize) -> (String, u64) {
    let mut out = String::from(r#"{"model": "gpt-4.1", "messages": ["#);
    out.push_str(r#"{"role": "system", "content": "You are a build agent."}"#);
    let mut estimates = 6_u64;
    let mut made = 1;
    let mut step = 0;
    // Each step adds its assistant call, tool result and user prompt while turns are left;
    // a trailing call without its result is left out, as `bench.py` leaves it.
    while made < turns {
        let body = format!(
            "step {step}: {}",
            "log line with a path /src/m{0}.rs and a status ok; ".repeat(20)
        );
        if made + 1 >= turns {
            estimates += 8;
            break;
        }
        let _ = write!(
            out,
            r#", {{"role": "assistant", "content": "Running check {step}.", "tool_calls": [{{"id": "call_{step}", "type": "function", "function": {{"name": "run_check", "arguments": "{{}}"}}}}]}}"#
        );
        let _ = write!(
            out,
            r#", {{"role": "tool", "tool_call_id": "call_{step}", "content": "{body}"}}"#
        );
        estimates += 8 + body.len() as u64 / 4;
        made += 2;
        if made < turns {
            let _ = write!(
                out,
                r#", {{"role": "user", "content": "Continue with {}."}}"#,
                step + 1
            );
            estimates += 6;
            made += 1;
        }
        step += 1;
    }
    out.push_str("]}");
    (out, estimates / 10)
}

fn args(budget: u64) -> FormatOptions {
    FormatOptions {
        format: Some(Format::OpenAiChat),
        max_tokens: Some(budget),
        prompt_id: Some("bench.summarize.v1".to_owned()),
        ..FormatOptions::default()
    }
}

const KEEP: Keep = Keep {
    compaction: false,
    report: false,
};

/// The stages, each a run that times itself and frees what it made.
struct Stages {
    text: String,
    args: FormatOptions,
    summaries: BTreeMap<String, String>,
}

impl Stages {
    fn new(turns: usize) -> Self {
        let (text, budget) = request(turns);
        let args = args(budget);
        let prepared = prepare(&args, &text).expect("the request reads and plans");
        let summaries = prepared
            .plan()
            .summarization_requests
            .iter()
            .map(|r| (r.group_id().to_owned(), "Earlier checks passed.".to_owned()))
            .collect();
        Self {
            text,
            args,
            summaries,
        }
    }

    fn sha256(&self) -> Duration {
        let start = Instant::now();
        black_box(Sha256::digest(black_box(self.text.as_bytes())));
        start.elapsed()
    }

    fn json_check(&self) -> Duration {
        let start = Instant::now();
        let checked: serde::de::IgnoredAny =
            serde_json::from_str(black_box(&self.text)).expect("JSON");
        black_box(checked);
        start.elapsed()
    }

    fn reading(&self) -> Duration {
        let estimator = EstimatorSpec::default()
            .estimator()
            .expect("the default estimator");
        let start = Instant::now();
        let read =
            ProviderTranscript::from_text_deferred(Format::OpenAiChat, &self.text, &*estimator)
                .expect("the request reads from its text");
        drop(black_box(read));
        start.elapsed()
    }

    fn prepare(&self) -> Duration {
        let start = Instant::now();
        let prepared = prepare(&self.args, &self.text).expect("the request plans");
        drop(black_box(prepared));
        start.elapsed()
    }

    fn whole(&self) -> Duration {
        let start = Instant::now();
        let prepared = prepare(&self.args, &self.text).expect("the request plans");
        let done = finish(prepared, &self.text, &self.summaries, KEEP).expect("it compacts");
        drop(black_box(done));
        start.elapsed()
    }
}

/// One stage's timed run.
type Stage = fn(&Stages) -> Duration;

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let smoke = argv.iter().any(|a| a == "--smoke");
    let reference = argv
        .iter()
        .position(|a| a == "--reference-seconds")
        .and_then(|k| argv.get(k + 1))
        .map(|s| s.parse::<f64>().expect("--reference-seconds takes seconds"));
    let (turns, rounds) = if smoke {
        (FULL_TURNS / 100, 1)
    } else {
        (FULL_TURNS, FULL_ROUNDS)
    };
    let stages = Stages::new(turns);
    let runs: [(&str, Stage); 5] = [
        ("one SHA-256 pass", Stages::sha256),
        (
            "JSON check only (serde_json, nothing built)",
            Stages::json_check,
        ),
        ("reading into a transcript", Stages::reading),
        ("prepare: reading, prompt count, plan", Stages::prepare),
        ("the whole: prepare + finish", Stages::whole),
    ];
    let mut times = vec![Vec::new(); runs.len()];
    for round in 0..WARM_UP_ROUNDS + rounds {
        let order: Vec<usize> = if round % 2 == 0 {
            (0..runs.len()).collect()
        } else {
            (0..runs.len()).rev().collect()
        };
        for k in order {
            let took = (runs[k].1)(&stages);
            if round >= WARM_UP_ROUNDS {
                times[k].push(took.as_secs_f64() * 1e3);
            }
        }
    }
    let ms: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
    let sha = ms[0];
    println!(
        "request: {} turns, {:.1} MB; medians of {rounds} rounds",
        turns,
        stages.text.len() as f64 / 1e6
    );
    let row = |name: &str, value: f64| {
        println!("{name:<48} {value:>8.1} ms {:>7.2} x SHA-256", value / sha);
    };
    for (k, (name, _)) in runs.iter().enumerate() {
        row(name, ms[k]);
    }
    let (check, reading, prepared, whole) = (ms[1], ms[2], ms[3], ms[4]);
    row("  the plan (prepare - reading)", prepared - reading);
    row("  the finish (whole - prepare)", whole - prepared);
    let least = check + (prepared - reading) + (whole - prepared);
    row("least with this plan and finish (check + both)", least);
    if let Some(seconds) = reference {
        let allowed = seconds * 1e3 / TARGET;
        println!(
            "reference {seconds:.3} s: {TARGET}x allows {allowed:.1} ms; the whole is {:.1}x, \
             the least above {:.1}x",
            seconds * 1e3 / whole,
            seconds * 1e3 / least,
        );
    }
}
