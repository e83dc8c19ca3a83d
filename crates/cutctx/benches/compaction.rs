//! Criterion benchmarks of planning and applying on generated agent transcripts.
//!
//! The transcripts are what an agent session looks like: a system turn, then repeating
//! assistant-call / tool-result / user turns, with tool results of about 1 KB. Run with
//! `cargo bench -p cutctx --bench compaction`; filter with `... -- default_chain`.
//!
//! Targets (2-core machine): `default_chain` plan + apply over 100,000 turns under 50 ms;
//! drop-oldest planning over 2,000 turns under 1 ms; apply time does not grow with content size
//! (kept content is shared). The growth target (10× the turns at most 11× the time) is judged by
//! `scaling.rs`, which measures the two sizes in alternation; the `scaling_plan` group here gives
//! their absolute times.

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use cutctx::{CompactionBudget, CompactionPolicy, DropOldestPolicy, Transcript, default_chain};

mod support;
use support::{agent_transcript, every_policy};

fn budget(t: &Transcript, percent: u64) -> CompactionBudget {
    CompactionBudget::new(t.token_estimate() * percent / 100)
}

fn summaries_for(plan: &cutctx::CompactionPlan) -> BTreeMap<String, String> {
    plan.summarization_requests
        .iter()
        .map(|r| (r.group_id().to_owned(), "summary".to_owned()))
        .collect()
}

fn bench_default_chain(c: &mut Criterion) {
    let mut g = c.benchmark_group("default_chain_plan_apply");
    g.sample_size(20);
    let chain = default_chain("compaction.summarize.v1").expect("valid prompt id");
    for n in [10_000, 100_000] {
        let t = agent_transcript(n, 1024);
        for percent in [5, 50] {
            let b = budget(&t, percent);
            let plan = chain.decide(&t, &b).expect("plan");
            let summaries = summaries_for(&plan);
            g.throughput(Throughput::Elements(n as u64));
            g.bench_with_input(
                BenchmarkId::new(format!("budget{percent}pct"), n),
                &n,
                |bench, _| {
                    bench.iter(|| {
                        let plan = chain.decide(black_box(&t), &b).expect("plan");
                        cutctx::apply(&t, &plan, &summaries).expect("apply")
                    });
                },
            );
        }
    }
    g.finish();
}

fn bench_drop_oldest(c: &mut Criterion) {
    let mut g = c.benchmark_group("drop_oldest_plan");
    for n in [2_000, 20_000] {
        let t = agent_transcript(n, 1024);
        let b = CompactionBudget::new(50_000);
        g.throughput(Throughput::Elements(n as u64));
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |bench, _| {
            bench.iter(|| DropOldestPolicy.decide(black_box(&t), &b).expect("plan"));
        });
    }
    g.finish();
}

/// Every policy at 10k and 100k turns, for absolute times; `scaling.rs` measures their ratio.
fn bench_scaling(c: &mut Criterion) {
    let policies = every_policy();
    let sizes: Vec<(usize, Transcript)> = [10_000, 100_000]
        .into_iter()
        .map(|n| (n, agent_transcript(n, 1024)))
        .collect();
    let mut g = c.benchmark_group("scaling_plan");
    g.sample_size(10);
    // Each policy's two sizes run back to back, so that drift in the machine's speed between
    // the two measurements stays small.
    for (name, policy) in &policies {
        for (n, t) in &sizes {
            let b = budget(t, 50);
            g.throughput(Throughput::Elements(*n as u64));
            g.bench_with_input(BenchmarkId::new(*name, n), n, |bench, _| {
                bench.iter(|| policy.decide(black_box(t), &b).expect("plan"));
            });
        }
    }
    g.finish();
}

/// Apply over the same plan shape with 1 KB and 64 KB tool results: if kept content were
/// copied, the second would cost about 64× the first.
fn bench_apply_content_size(c: &mut Criterion) {
    let mut g = c.benchmark_group("apply_by_content_size");
    g.sample_size(20);
    for bytes in [1024, 65_536] {
        let t = agent_transcript(10_000, bytes);
        let b = CompactionBudget::new(t.token_estimate() / 2);
        let plan = DropOldestPolicy.decide(&t, &b).expect("plan");
        g.bench_with_input(BenchmarkId::from_parameter(bytes), &bytes, |bench, _| {
            bench.iter(|| cutctx::apply(black_box(&t), &plan, &BTreeMap::new()).expect("apply"));
        });
    }
    g.finish();
}

criterion_group!(
    benches,
    bench_default_chain,
    bench_drop_oldest,
    bench_scaling,
    bench_apply_content_size
);
criterion_main!(benches);
