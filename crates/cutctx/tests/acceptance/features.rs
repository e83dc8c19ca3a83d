//! The optional re-exports, one test per cargo feature: each compiles only with its feature,
//! so `cargo test -p cutctx --all-features` runs them all.

#[cfg(feature = "formats")]
#[test]
fn formats_maps_a_provider_request_through_the_facade() {
    use cutctx::formats::{Format, ProviderTranscript};
    let request = serde_json::json!({
        "model": "gpt-4.1",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hello"},
        ],
    });
    let pt = ProviderTranscript::parse(Format::OpenAiChat, &request).expect("a valid request");
    let ids: Vec<_> = pt.transcript().turn_ids().collect();
    assert_eq!(ids.len(), 2);
    assert_eq!(pt.transcript().turns()[0].role(), cutctx::Role::System);
}

#[cfg(feature = "replay")]
#[test]
fn replay_prices_a_recorded_run_through_the_facade() {
    use cutctx::formats::{EstimatorSpec, Format, ReasoningMode, policy_named};
    use cutctx::session::{PriceTable, SessionConfig};
    let spec = EstimatorSpec::default();
    let config = SessionConfig {
        format: Format::OpenAiChat,
        window: 100_000,
        reserve_output: 0,
        trigger: SessionConfig::DEFAULT_TRIGGER,
        target: SessionConfig::DEFAULT_TARGET,
        protected_recent: 2,
        policy: policy_named("drop_oldest", "p", &spec)
            .expect("a policy")
            .expect("known"),
        estimator: spec.estimator().expect("an estimator"),
        cache_breakpoints: false,
        reasoning: ReasoningMode::Strip,
        pinned_results: Default::default(),
        early: None,
    };
    let run = serde_json::json!({"model": "m", "messages": [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi"},
    ]});
    let r = cutctx::replay::replay(&config, &PriceTable::openai(), &run).expect("replayed");
    assert_eq!(r.strategies.len(), 3);
    assert_eq!(r.strategies[0].calls, 1);
}

#[cfg(feature = "receipts")]
#[test]
fn receipts_seal_into_a_ledger_through_the_facade() {
    use cutctx::ledger::{Ledger, ledger::verify_file};
    use cutctx::receipts::{CompactionReceipt, FixedClock, Item, Labels};
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("facade-receipts");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("an old scratch folder can be removed");
    }
    let ledger = Ledger::new(dir.join("receipts.jsonl"));
    let clock = FixedClock::new("2026-08-15T00:00:00Z");
    let mut receipt = CompactionReceipt::open(&[Item::Str("a".into())], &clock).expect("opens");
    receipt.record_kept(&[]).expect("records");
    let appended = ledger
        .seal(&mut receipt, &Labels::new("facade", "drop-all"), &clock)
        .expect("appends");
    assert!(receipt.is_sealed());
    assert_eq!(ledger.last_chain().expect("readable"), appended.chain);
    assert_eq!(verify_file(ledger.path(), true).ok, Some(true));
}

#[cfg(feature = "bpe")]
#[test]
fn bpe_counts_real_tokens_through_the_facade() {
    use cutctx::TokenEstimator;
    use cutctx::formats::{BpeEncoding, BpeEstimator};
    let e = BpeEstimator::new(BpeEncoding::Cl100kBase).expect("the vocabulary loads");
    assert_eq!(e.estimate_tokens("tiktoken is great!"), 6);
}
