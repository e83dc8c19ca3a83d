//! How repair time grows with the history: each format from 10,000 to 100,000 messages and
//! from 100,000 to 1,000,000 (half of them broken), measured in alternation.
//!
//! The target is a ratio: 10× the messages may cost at most 12× the time (linear; the
//! drop-and-revalidate loop this replaced was quadratic, about 100×). It is judged on the
//! larger pair: from 10,000 messages, whose copy fits the processor's caches better, the ratio
//! also carries the caches' effect and is printed for information. Each round repairs the small history ten times and the large once,
//! back to back (the order alternating between rounds); the figure is the median of the
//! rounds' ratios, which a shared machine's drift in speed between windows of time does not
//! carry. Copying the input is outside the timed part. Absolute times are criterion's, in
//! `repair.rs`. Run with `cargo bench -p cutctx-formats --bench repair_scaling`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use cutctx_formats::{Format, repair};
use serde_json::Value;

mod support;
use support::histories;

/// The most time 10× the messages may take, as a multiple of the smaller case's.
const TARGET: f64 = 12.0;
const WARM_UP_ROUNDS: usize = 1;
const ROUNDS: usize = 5;
/// The sizes compared; the target is judged on the last pair.
const PAIRS: [(usize, usize); 2] = [(10_000, 100_000), (100_000, 1_000_000)];
/// Repairs of the small history per round: as much work as one repair of the large.
const SMALL_PER_ROUND: u32 = 10;

/// The time of `runs` repairs of `document`, its copies made outside the clock.
fn time(format: Format, document: &Value, runs: u32) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..runs {
        let copy = document.clone();
        let start = Instant::now();
        let repaired = black_box(repair(format, black_box(copy)));
        total += start.elapsed();
        drop(repaired);
    }
    total
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    println!(
        "{:<18}{:>10}{:>12}{:>12}{:>10}{:>16}  target <= {TARGET}x",
        "format", "messages", "small", "large", "ratio", "rounds' range"
    );
    for ((format, make), (n_small, n_large)) in histories()
        .into_iter()
        .flat_map(|h| PAIRS.into_iter().map(move |p| (h, p)))
    {
        let (small, large) = (make(n_small), make(n_large));
        for _ in 0..WARM_UP_ROUNDS {
            time(format, &small, SMALL_PER_ROUND);
            time(format, &large, 1);
        }
        let (mut smalls, mut larges, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            let (s, l) = if round % 2 == 0 {
                let s = time(format, &small, SMALL_PER_ROUND);
                (s, time(format, &large, 1))
            } else {
                let l = time(format, &large, 1);
                (time(format, &small, SMALL_PER_ROUND), l)
            };
            let s = s.as_secs_f64() / f64::from(SMALL_PER_ROUND);
            let l = l.as_secs_f64();
            smalls.push(s);
            larges.push(l);
            ratios.push(l / s);
        }
        let ratio = median(&mut ratios);
        let verdict = match (n_large == PAIRS[PAIRS.len() - 1].1, ratio <= TARGET) {
            (false, _) => "(information)",
            (true, true) => "met",
            (true, false) => "NOT MET",
        };
        println!(
            "{:<18}{:>10}{:>10.3}ms{:>10.3}ms{ratio:>9.2}x{:>9.2}-{:<6.2}  {verdict}",
            format.as_str(),
            format!("{}k>{}k", n_small / 1000, n_large / 1000),
            median(&mut smalls) * 1e3,
            median(&mut larges) * 1e3,
            ratios[0],
            ratios[ratios.len() - 1],
        );
    }
}
