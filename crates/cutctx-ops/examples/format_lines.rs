//! The single-request path's own cost, for `scripts/batch-bench.py`: compacts each line of a
//! JSONL file with `formats::compact_detailed` (the function behind `cutctx compact --format`,
//! with no report made, as the command without `--report`), one
//! after another on this thread, and prints `{"lines", "failed", "seconds"}`, where `seconds`
//! sums the time of those calls alone (no process start, no reading, no writing).
//!
//! `cargo run --release -p cutctx-ops --example format_lines -- FILE FORMAT MAX_TOKENS POLICY`

use std::io::BufRead as _;
use std::time::{Duration, Instant};

use cutctx::formats::Format;
use cutctx_ops::formats::{self, FormatOptions};

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [file, format, max_tokens, policy] = args.as_slice() else {
        eprintln!("usage: format_lines FILE FORMAT MAX_TOKENS POLICY");
        return std::process::ExitCode::from(2);
    };
    let (Ok(format), Ok(max_tokens)) = (format.parse::<Format>(), max_tokens.parse::<u64>()) else {
        eprintln!("unknown format or a MAX_TOKENS that is not a number");
        return std::process::ExitCode::from(2);
    };
    let options = FormatOptions {
        format: Some(format),
        max_tokens: Some(max_tokens),
        policy: Some(policy.clone()),
        ..FormatOptions::default()
    };
    let reader = match std::fs::File::open(file) {
        Ok(f) => std::io::BufReader::new(f),
        Err(e) => {
            eprintln!("cannot read {file}: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let (mut lines, mut failed, mut spent) = (0u64, 0u64, Duration::ZERO);
    for line in reader.lines() {
        let Ok(line) = line else {
            eprintln!("cannot read {file}");
            return std::process::ExitCode::from(2);
        };
        let start = Instant::now();
        // What `cutctx compact --format` does without `--report`: the report is not made.
        let out = formats::compact_detailed(&options, &line, None, formats::Keep::default());
        spent += start.elapsed();
        lines += 1;
        failed += u64::from(out.is_err());
        drop(out);
    }
    println!(
        "{{\"failed\":{failed},\"lines\":{lines},\"seconds\":{}}}",
        spent.as_secs_f64()
    );
    std::process::ExitCode::SUCCESS
}
