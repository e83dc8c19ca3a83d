//! The walks of a JSON string as it is written, against one plain SHA-256 pass over the same
//! bytes, measured in the same run.
//!
//! `cargo bench -p cutctx-json --bench string_walk` prints, for the string shapes requests
//! carry, the time of `check_string` (what the readers that leave contents in the text do to
//! every content), `string_end` and `first_special`, each divided by the time of
//! `Sha256::digest` over the same bytes. A ratio, not a time, so that figures from machines
//! under other load can be compared: below 1 is faster than hashing the string once.
#![forbid(unsafe_code)]

use std::hint::black_box;
use std::time::Duration;

use cutctx_json::{check_string, first_special, string_end};
use sha2::{Digest, Sha256};

#[path = "support/timing.rs"]
mod timing;

/// `text` as a JSON string literal, quotes included.
fn literal(text: &str) -> Vec<u8> {
    let mut out = String::new();
    cutctx_json::Writer::new(&mut out, cutctx_json::Style::CANONICAL).str(text);
    out.into_bytes()
}

fn main() {
    let shapes: [(&str, String); 4] = [
        ("id, 24 B", "call_0123456789abcdefghij".to_owned()),
        (
            // A quote or a newline escaped every 20 bytes or so: the request benchmark's logs.
            "log lines, 16 KiB",
            "2026-11-29T12:00:00Z INFO worker=0 \"cache\" key=0 hit=false\n".repeat(16_384 / 60),
        ),
        (
            // No escape at all: the Python benchmark's tool results.
            "plain output, 1 KiB",
            "log line with a path /src/m.rs and a status ok; ".repeat(1_024 / 48),
        ),
        (
            "prose, 64 KiB",
            "The quick brown fox, é. ".repeat(65_536 / 25),
        ),
    ];
    println!(
        "{:<22} {:>12} {:>12} {:>12} {:>12}",
        "shape", "sha256", "check", "end", "special"
    );
    for (name, text) in &shapes {
        let b = literal(text);
        let inner = &b[1..b.len() - 1];
        let sha = timing::best_per_call(|| {
            black_box(Sha256::digest(black_box(inner)));
        });
        let check = timing::best_per_call(|| {
            black_box(check_string(black_box(&b), 1));
        });
        let end = timing::best_per_call(|| {
            black_box(string_end(black_box(&b), 0));
        });
        let special = timing::best_per_call(|| {
            black_box(first_special(black_box(inner), true));
        });
        let ratio = |d: Duration| d.as_secs_f64() / sha.as_secs_f64();
        println!(
            "{name:<22} {:>12.2?} {:>12.3} {:>12.3} {:>12.3}",
            sha,
            ratio(check),
            ratio(end),
            ratio(special)
        );
    }
}
