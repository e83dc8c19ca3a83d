//! Every path a large request takes through cutctx, in-process, against one SHA-256 pass over
//! what it reads, and against itself on a tenth of the input, measured in alternation.
//!
//! The paths: the request document compacted (`compact_text`, its output written to a sink) at
//! budgets of 5% and 50% of its estimate; the same request with the plan `plan` stored for it
//! applied (`apply_text`, the plan-file path); each provider format under drop-oldest and under
//! observation masking (`formats::compact_detailed`, as `cutctx batch` and the Python package
//! call it); and a receipts ledger verified (`ledger_verify`). The inputs are those the
//! benchmark scripts feed the command line, made by the same examples.
//!
//! Two floors come first, on the request document (5%): its file read into new memory by the
//! command's own reader (`input::read_file`, the file in the page cache), which every command
//! pays before its work, and the text checked as JSON while building nothing (`serde_json`
//! into `IgnoredAny`), which any reader that refuses a malformed request pays. Where touching
//! new memory is dear (a virtual machine whose host backs each new page on first touch), the
//! first says so in the same run.
//!
//! Each round times one SHA-256 pass over the input, one run of the path on it, and ten runs on
//! an input a tenth the size (one run's worth of work), the order reversed every other round.
//! The figures are the medians over the rounds of the path's time over the pass's (× SHA-256)
//! and of the large input's time over one small run's (growth: linear is 10, the target at most
//! 11). Ratios, not times, so that figures taken while the machine's speed drifts still compare.
//! Every run includes freeing what it made.
//!
//! The paths run on a rayon pool, as the `cutctx` binary runs its commands.
//!
//! This is the work itself, in a warm process. What only a fresh process pays (reading the file
//! into new memory, the first touch of every page, the exit) is in the command's figures, which
//! `scripts/request-bench.py`, `scripts/format-bench.py` and `scripts/ledger-bench.py` measure.
//!
//! Run with `cargo bench -p cutctx-ops --bench paths` (`-- --quick`: three rounds; `-- --smoke`:
//! one round on inputs a hundredth the size, to check that every path still runs, as CI does).

use std::hint::black_box;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cutctx::formats::Format;
use cutctx_ops::formats::{FormatOptions, Keep, compact_detailed};
use sha2::{Digest, Sha256};

#[expect(dead_code, reason = "the example's own `main`")]
#[path = "../examples/request_document.rs"]
mod request_document;

#[expect(dead_code, reason = "the example's own `main`")]
#[path = "../examples/format_request.rs"]
mod format_request;

#[expect(dead_code, reason = "the example's own `main`")]
#[path = "../examples/ledger_rows.rs"]
mod ledger_rows;

/// How large the inputs are and how many rounds are measured.
#[derive(Clone, Copy)]
struct Run {
    /// Turns of the large request document (and messages of each provider request).
    turns: usize,
    /// Rows of the large ledger.
    rows: usize,
    rounds: usize,
}

const FULL: Run = Run {
    turns: 100_000,
    rows: 50_000,
    rounds: 7,
};
const QUICK: Run = Run { rounds: 3, ..FULL };
const SMOKE: Run = Run {
    turns: 1_000,
    rows: 500,
    rounds: 1,
};
/// How much smaller the small input is.
const SCALE: usize = 10;
/// Bytes of each tool result.
const RESULT_BYTES: usize = 1_000;
/// The most time `SCALE` times the input may take, as a multiple of the small input's.
const GROWTH_TARGET: f64 = 11.0;
const WARM_UP_ROUNDS: usize = 1;

/// One path on one input: what it reads, for the SHA-256 pass, and a run of it that times
/// itself (so that a copy of its input made for it is not counted).
struct Input {
    /// The text the path reads, in the pieces it reads it from.
    read: Vec<Arc<str>>,
    run: Box<dyn FnMut() -> Duration>,
}

/// A path, on its large input and on its small one.
struct Case {
    name: String,
    large: Input,
    small: Input,
}

/// The time of one SHA-256 pass over `pieces`, as one hash.
fn sha256_pass(pieces: &[Arc<str>]) -> Duration {
    let start = Instant::now();
    let mut hash = Sha256::new();
    for piece in pieces {
        hash.update(black_box(piece.as_bytes()));
    }
    black_box(hash.finalize());
    start.elapsed()
}

/// The request document of `turns` turns under a budget of `percent`, compacted or, with
/// `apply`, the plan `plan` stores for it applied.
fn request_input(turns: usize, percent: u64, apply: bool) -> Input {
    let text: Arc<str> = request_document::document(turns, percent, RESULT_BYTES)
        .expect("a request")
        .into();
    let plan: Option<Arc<str>> =
        apply.then(|| cutctx_ops::plan(&text).expect("the request plans").into());
    let read = std::iter::once(&text).chain(&plan).cloned().collect();
    Input {
        read,
        run: Box::new(move || {
            // Both take the text, to hold the kept contents where they lie.
            let input = text.to_string();
            let start = Instant::now();
            let mut out = match &plan {
                None => cutctx_ops::compact_text(input),
                Some(plan) => cutctx_ops::apply_text(input, plan),
            }
            .expect("the request compacts");
            out.write_to(&mut io::sink())
                .expect("a sink takes everything");
            drop(out);
            start.elapsed()
        }),
    }
}

/// A provider request of `messages` messages in `format`, compacted by `policy` to about half
/// its estimate (4 bytes a token), as `scripts/format-bench.py` asks.
fn format_input(format: (&str, Format), messages: usize, policy: &str) -> Input {
    let request = format_request::request(format.0, messages, RESULT_BYTES).expect("a format");
    let text: Arc<str> = format!("{request}\n").into();
    let args = FormatOptions {
        format: Some(format.1),
        max_tokens: Some(text.len() as u64 / 8),
        policy: Some(policy.to_owned()),
        ..FormatOptions::default()
    };
    let keep = || Keep {
        compaction: false,
        report: false,
    };
    // Checked once, outside the timing: the budget holds and nothing asks for a summary.
    compact_detailed(&args, &text, None, keep()).expect("the request compacts");
    Input {
        read: vec![Arc::clone(&text)],
        run: Box::new(move || {
            let start = Instant::now();
            let out = compact_detailed(&args, &text, None, keep()).expect("the request compacts");
            drop(black_box(out));
            start.elapsed()
        }),
    }
}

/// A ledger of `rows` rows, written to a file of its own (the verifier reads a path), verified.
fn ledger_input(rows: usize) -> Input {
    let text: Arc<str> = ledger_rows::ledger(rows, 8).expect("a ledger").into();
    let path = TempFile::new("ledger", rows, &text);
    Input {
        read: vec![text],
        run: Box::new(move || {
            let start = Instant::now();
            let (status, verdict) =
                cutctx_ops::ledger::ledger_verify(&path.0, None, None, false).expect("it reads");
            assert_eq!(status, 0, "the ledger verifies");
            drop(black_box(verdict));
            start.elapsed()
        }),
    }
}

/// What any command on the request document of `turns` turns pays before its own work, as a
/// floor for the rows below it: with `Floor::Read`, reading its file into new memory (the
/// command's own reader, the file in the page cache); with `Floor::Json`, checking that it is
/// JSON while building nothing (`serde_json` into `IgnoredAny`).
fn floor_input(turns: usize, floor: Floor) -> Input {
    let text: Arc<str> = request_document::document(turns, 5, RESULT_BYTES)
        .expect("a request")
        .into();
    let read = vec![Arc::clone(&text)];
    let run: Box<dyn FnMut() -> Duration> = match floor {
        Floor::Read => {
            let path = TempFile::new("request", turns, &text);
            Box::new(move || {
                let start = Instant::now();
                let bytes = cutctx_ops::input::read_file(&path.0).expect("the file reads");
                drop(black_box(bytes));
                start.elapsed()
            })
        }
        Floor::Json => Box::new(move || {
            let start = Instant::now();
            let checked: serde::de::IgnoredAny =
                serde_json::from_str(black_box(&text)).expect("JSON");
            black_box(checked);
            start.elapsed()
        }),
    };
    Input { read, run }
}

/// The floors [`floor_input`] measures.
#[derive(Clone, Copy)]
enum Floor {
    Read,
    Json,
}

/// A temporary file, removed when the benchmark is done with it.
struct TempFile(PathBuf);

impl TempFile {
    fn new(what: &str, size: usize, text: &str) -> Self {
        let name = format!("cutctx-bench-{what}-{}-{size}", std::process::id());
        let path = std::env::temp_dir().join(name);
        std::fs::write(&path, text).expect("the temporary folder takes the file");
        Self(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn cases(run: Run) -> Vec<Case> {
    let small = run.turns / SCALE;
    let mut cases = Vec::new();
    for (name, floor) in [
        ("floor: the file read into new memory", Floor::Read),
        ("floor: checked as JSON, nothing built", Floor::Json),
    ] {
        cases.push(Case {
            name: name.to_owned(),
            large: floor_input(run.turns, floor),
            small: floor_input(small, floor),
        });
    }
    for (command, apply) in [("compact", false), ("apply", true)] {
        for percent in [5, 50] {
            cases.push(Case {
                name: format!("request document, {command} {percent}%"),
                large: request_input(run.turns, percent, apply),
                small: request_input(small, percent, apply),
            });
        }
    }
    let formats = [
        ("openai-chat", Format::OpenAiChat),
        ("openai-responses", Format::OpenAiResponses),
        ("anthropic", Format::Anthropic),
    ];
    for format in formats {
        for policy in ["drop_oldest", "observation_masking"] {
            cases.push(Case {
                name: format!("{}, {policy}", format.0),
                large: format_input(format, run.turns, policy),
                small: format_input(format, small, policy),
            });
        }
    }
    cases.push(Case {
        name: "ledger verify".to_owned(),
        large: ledger_input(run.rows),
        small: ledger_input(run.rows / SCALE),
    });
    cases
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// What one case measured, over its rounds.
struct Measured {
    /// The median time of the large run, in seconds.
    time: f64,
    /// The median of the large run's time over the SHA-256 pass's, and its range.
    ratio: f64,
    ratio_range: (f64, f64),
    /// The median of the large run's time over one small run's.
    growth: f64,
}

fn measure(case: &mut Case, rounds: usize) -> Measured {
    let (mut times, mut ratios, mut growths) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..WARM_UP_ROUNDS + rounds {
        let mut small_runs = || {
            (0..SCALE)
                .map(|_| (case.small.run)())
                .sum::<Duration>()
                .as_secs_f64()
                / SCALE as f64
        };
        let (sha, large, small) = if round % 2 == 0 {
            let sha = sha256_pass(&case.large.read);
            let large = (case.large.run)();
            (sha, large, small_runs())
        } else {
            let small = small_runs();
            let large = (case.large.run)();
            (sha256_pass(&case.large.read), large, small)
        };
        if round >= WARM_UP_ROUNDS {
            times.push(large.as_secs_f64());
            ratios.push(large.as_secs_f64() / sha.as_secs_f64());
            growths.push(large.as_secs_f64() / small);
        }
    }
    let ratio_range = (
        ratios.iter().copied().fold(f64::INFINITY, f64::min),
        ratios.iter().copied().fold(0.0, f64::max),
    );
    Measured {
        time: median(&mut times),
        ratio: median(&mut ratios),
        ratio_range,
        growth: median(&mut growths),
    }
}

fn main() {
    // On a pool, as the `cutctx` binary runs its commands, so that work that splits runs as the
    // command's does (`cutctx::model::beside`).
    match rayon::ThreadPoolBuilder::new()
        .num_threads(cutctx::Parallelism::Automatic.threads())
        .build()
    {
        Ok(pool) => pool.install(bench),
        Err(_) => bench(),
    }
}

fn bench() {
    let args: Vec<String> = std::env::args().collect();
    let run = if args.iter().any(|a| a == "--smoke") {
        SMOKE
    } else if args.iter().any(|a| a == "--quick") {
        QUICK
    } else {
        FULL
    };
    println!(
        "{:<40} {:>8} {:>10} {:>22} {:>8}",
        "path (large input)", "MB read", "time", "x SHA-256 (min-max)", "growth"
    );
    let mut over = Vec::new();
    for mut case in cases(run) {
        let bytes: usize = case.large.read.iter().map(|piece| piece.len()).sum();
        let Measured {
            time,
            ratio,
            ratio_range: (low, high),
            growth,
        } = measure(&mut case, run.rounds);
        println!(
            "{:<40} {:>8.1} {:>8.1} ms {:>8.2} ({low:.2}-{high:.2}) {growth:>8.1}",
            case.name,
            bytes as f64 / 1e6,
            time * 1e3,
            ratio,
        );
        if growth > GROWTH_TARGET {
            over.push(case.name);
        }
    }
    println!(
        "\nrounds: {} of each; growth from {} to {} turns or messages ({} to {} rows), linear is \
         {SCALE}, the target at most {GROWTH_TARGET}",
        run.rounds,
        run.turns / SCALE,
        run.turns,
        run.rows / SCALE,
        run.rows,
    );
    if !over.is_empty() {
        println!("grew faster than the target: {}", over.join("; "));
    }
}
