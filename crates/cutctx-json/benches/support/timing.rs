//! The timing loop of the benchmarks that report a ratio to one SHA-256 pass measured in the
//! same run (this crate's `string_walk`, and `cutctx-model`'s `digest`, which includes this
//! file): the best of several rounds, each long enough to dwarf the clock's resolution.

use std::time::{Duration, Instant};

/// The best of several timed rounds of `f`, each long enough to dwarf the clock's resolution.
pub(crate) fn best_per_call(mut f: impl FnMut()) -> Duration {
    let mut calls = 1_u32;
    // Grow the round until it takes at least 20 ms.
    loop {
        let start = Instant::now();
        for _ in 0..calls {
            f();
        }
        if start.elapsed() >= Duration::from_millis(20) {
            break;
        }
        calls = calls.saturating_mul(2);
    }
    (0..15)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..calls {
                f();
            }
            start.elapsed() / calls
        })
        .min()
        .unwrap_or(Duration::ZERO)
}
