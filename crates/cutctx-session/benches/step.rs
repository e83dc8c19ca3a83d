//! A session step that does not fire, at 10,000 messages of history: `push` (the new messages
//! alone) against `step` (the whole history, hashed again to detect edits). `push` hashes and
//! counts only the new messages, because the state carries the chained digest and the running
//! count; its time should not move between 1,000 and 10,000 messages of history.

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use cutctx_formats::{EstimatorSpec, Format, FormatError, ProviderTranscript, policy_named};
use cutctx_model::SummarizationRequest;
use cutctx_session::{SessionConfig, SessionState, push, step};
use serde_json::{Value, json};

fn config() -> SessionConfig {
    let spec = EstimatorSpec::default();
    SessionConfig {
        format: Format::OpenAiChat,
        window: u64::MAX / 4,
        reserve_output: 0,
        trigger: SessionConfig::DEFAULT_TRIGGER,
        target: SessionConfig::DEFAULT_TARGET,
        protected_recent: 4,
        policy: policy_named("drop_oldest", "p", &spec)
            .expect("policy")
            .expect("known"),
        estimator: spec.estimator().expect("estimator"),
        cache_breakpoints: false,
        reasoning: cutctx_formats::ReasoningMode::Strip,
        pinned_results: Default::default(),
        early: None,
    }
}

fn messages(n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            json!({"role": role, "content": format!("message {i}: {}", "x".repeat(400))})
        })
        .collect()
}

fn never(_: &ProviderTranscript, _: &SummarizationRequest) -> Result<String, FormatError> {
    Err(FormatError::from(
        cutctx_model::CompactionError::validation("no summaries here", Default::default()),
    ))
}

fn bench(c: &mut Criterion) {
    let cfg = config();
    let new = messages(2);
    for n in [1_000usize, 10_000] {
        let history = messages(n);
        let request = json!({"model": "m", "messages": history});
        let state = step(&cfg, None, &request, &mut never)
            .expect("a step")
            .state;
        c.bench_function(&format!("push 2 new messages onto {n}"), |b| {
            b.iter_batched(
                || state.clone(),
                |mut s| push(&cfg, &mut s, 4, &new),
                BatchSize::SmallInput,
            );
        });
        let mut longer = history.clone();
        longer.extend(new.clone());
        let longer = json!({"model": "m", "messages": longer});
        c.bench_function(&format!("step with the whole history of {n} + 2"), |b| {
            b.iter(|| step(&cfg, Some(&state), &longer, &mut never).expect("a step"));
        });
    }
    let _ = SessionState::new(Format::OpenAiChat);
}

criterion_group!(benches, bench);
criterion_main!(benches);
