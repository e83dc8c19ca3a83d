//! Criterion benchmarks of `repair` on long histories of which half the messages are broken,
//! at 10,000 and 100,000 messages per format: the time should grow tenfold, not a hundredfold.
//!
//! The histories are those of `support` (about every other message broken). Criterion measures
//! each case in its own window of time, which on a shared machine carries its drift into the
//! ratio of two cases; `repair_scaling.rs` measures the ratio itself. Run with
//! `cargo bench -p cutctx-formats --bench repair`.

use std::hint::black_box;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use cutctx_formats::{repair, validate};

mod support;
use support::histories;

fn bench_repair(c: &mut Criterion) {
    let mut group = c.benchmark_group("repair");
    group.sample_size(10);
    for (format, make) in histories() {
        for n in [10_000, 100_000] {
            let document = make(n);
            // The history is broken, and repair fixes it.
            assert!(validate(format, &document).is_err());
            let (fixed, repairs) = repair(format, document.clone()).expect("repairable");
            // Half the messages broken, give or take the last, partial block.
            assert!(validate(format, &fixed).is_ok() && repairs.len() + 3 >= n / 2);
            group.throughput(Throughput::Elements(n as u64));
            group.bench_with_input(BenchmarkId::new(format.as_str(), n), &document, |b, d| {
                b.iter_batched(
                    || d.clone(),
                    |d| black_box(repair(format, d)),
                    BatchSize::LargeInput,
                );
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_repair);
criterion_main!(benches);
