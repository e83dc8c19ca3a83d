//! String digests against one plain SHA-256 pass, measured in the same run.
//!
//! `cargo bench -p cutctx-model --bench digest` prints, for a few text shapes, the time of
//! `sha256_of_str` divided by the time of `Sha256::digest` over the same bytes. A ratio, not a
//! time, so that figures from machines under other load can be compared.
#![forbid(unsafe_code)]

use std::hint::black_box;

use cutctx_model::canonical::sha256_of_str;
use sha2::{Digest, Sha256};

#[path = "../../cutctx-json/benches/support/timing.rs"]
mod timing;

fn main() {
    let shapes: [(&str, String); 5] = [
        ("id, 24 B", "call_0123456789abcdefghij".to_owned()),
        ("prose, 4 KiB", "The quick brown fox, é. ".repeat(4096 / 25)),
        (
            "tool output, 64 KiB",
            "line of output\twith a tab\n".repeat(65_536 / 26),
        ),
        ("escape-dense, 4 KiB", "\"q\"\\\n\u{1}".repeat(4096 / 7)),
        ("plain, 1 MiB", "x".repeat(1 << 20)),
    ];
    println!(
        "{:<22} {:>12} {:>12} {:>7}",
        "shape", "digest", "sha256", "ratio"
    );
    for (name, text) in &shapes {
        let ours = timing::best_per_call(|| {
            black_box(sha256_of_str(black_box(text)));
        });
        let plain = timing::best_per_call(|| {
            black_box(Sha256::digest(black_box(text.as_bytes())));
        });
        println!(
            "{name:<22} {:>10.2?} {:>10.2?} {:>7.3}",
            ours,
            plain,
            ours.as_secs_f64() / plain.as_secs_f64()
        );
    }
}
