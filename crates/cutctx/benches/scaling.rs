//! How planning time grows with the transcript: every policy at 10,000 and 100,000 turns,
//! measured in alternation.
//!
//! The target is a ratio: 10× the turns may cost at most 11× the time. Criterion measures each
//! case in its own window of time, and on a shared machine whose speed drifts by a third from
//! one window to the next, the ratio of two such measurements carries the drift. This harness
//! measures the ratio itself: each round times ten plans of the small transcript and one of
//! the large, back to back (the order alternating between rounds), and the figure reported is
//! the median of the rounds' ratios. Absolute times are criterion's, in `compaction.rs`.
//!
//! Run with `cargo bench -p cutctx --bench scaling`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use cutctx::{CompactionBudget, CompactionPolicy, Transcript};

mod support;
use support::{agent_transcript, every_policy};

/// The most time 10× the turns may take, as a multiple of the smaller case's.
const TARGET: f64 = 11.0;
const WARM_UP_ROUNDS: usize = 3;
const ROUNDS: usize = 21;
/// Plans of the small transcript per round: as much work as one plan of the large.
const SMALL_PER_ROUND: u32 = 10;

/// The time of `runs` plans of `t` under half its estimate.
fn time(policy: &dyn CompactionPolicy, t: &Transcript, runs: u32) -> Duration {
    let b = CompactionBudget::new(t.token_estimate() / 2);
    let start = Instant::now();
    for _ in 0..runs {
        black_box(policy.decide(black_box(t), &b).expect("plan"));
    }
    start.elapsed()
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`, and a filter when one is given: run the policies whose
    // name contains it.
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let policies = every_policy();
    let small = agent_transcript(10_000, 1024);
    let large = agent_transcript(100_000, 1024);
    println!(
        "{:<22}{:>12}{:>12}{:>10}{:>16}  target <= {TARGET}x",
        "policy", "10k turns", "100k turns", "ratio", "rounds' range"
    );
    for (name, policy) in &policies {
        if filter.as_ref().is_some_and(|f| !name.contains(f.as_str())) {
            continue;
        }
        let policy = policy.as_ref();
        for _ in 0..WARM_UP_ROUNDS {
            time(policy, &small, SMALL_PER_ROUND);
            time(policy, &large, 1);
        }
        let (mut smalls, mut larges, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            let (s, l) = if round % 2 == 0 {
                let s = time(policy, &small, SMALL_PER_ROUND);
                (s, time(policy, &large, 1))
            } else {
                let l = time(policy, &large, 1);
                (time(policy, &small, SMALL_PER_ROUND), l)
            };
            let s = s.as_secs_f64() / f64::from(SMALL_PER_ROUND);
            let l = l.as_secs_f64();
            smalls.push(s);
            larges.push(l);
            ratios.push(l / s);
        }
        let ratio = median(&mut ratios);
        println!(
            "{name:<22}{:>10.3}ms{:>10.3}ms{ratio:>9.2}x{:>9.2}-{:<6.2}  {}",
            median(&mut smalls) * 1e3,
            median(&mut larges) * 1e3,
            ratios[0],
            ratios[ratios.len() - 1],
            if ratio <= TARGET { "met" } else { "NOT MET" },
        );
    }
}
