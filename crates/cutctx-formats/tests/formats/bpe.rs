//! BPE counts (feature `bpe`): the estimator counts exactly what tiktoken-rs counts, on a fixed
//! sample whose counts are pinned, and turns built with it carry those counts.

use cutctx_formats::{BpeEncoding, BpeEstimator, EstimatorSpec, Format, ProviderTranscript};
use cutctx_policies::TokenEstimator;
use serde_json::json;

use crate::BPE_SAMPLES;

/// The counts of [`BPE_SAMPLES`], as tiktoken-rs 0.12 counts them. "hello world" and
/// "tiktoken is great!" match OpenAI's published examples for both vocabularies (2 and 6).
const O200K: [u64; 12] = [2, 6, 9, 14, 16, 29, 13, 8, 20, 8, 10, 0];
const CL100K: [u64; 12] = [2, 6, 9, 14, 17, 29, 15, 12, 23, 8, 10, 0];

#[test]
fn counts_match_the_pinned_reference_counts() {
    for (encoding, expected) in [
        (BpeEncoding::O200kBase, O200K),
        (BpeEncoding::Cl100kBase, CL100K),
    ] {
        let e = BpeEstimator::new(encoding).expect("the vocabulary builds");
        let counts: Vec<u64> = BPE_SAMPLES.iter().map(|s| e.estimate_tokens(s)).collect();
        assert_eq!(counts, expected, "{}", encoding.as_str());
    }
}

#[test]
fn counts_equal_the_crates_own_encoding_on_the_sample() {
    let o200k = tiktoken_rs::o200k_base().expect("o200k_base");
    let cl100k = tiktoken_rs::cl100k_base().expect("cl100k_base");
    for (encoding, reference) in [
        (BpeEncoding::O200kBase, &o200k),
        (BpeEncoding::Cl100kBase, &cl100k),
    ] {
        let e = BpeEstimator::new(encoding).expect("builds");
        for s in BPE_SAMPLES {
            assert_eq!(
                e.estimate_tokens(s),
                reference.encode_ordinary(s).len() as u64,
                "{} on {s:?}",
                encoding.as_str()
            );
        }
    }
}

#[test]
fn turns_built_with_a_bpe_estimator_carry_its_counts() {
    let spec: EstimatorSpec = "o200k_base".parse().expect("known");
    let estimator = spec.estimator().expect("the bpe feature is on");
    let doc = json!([
        {"role": "user", "content": BPE_SAMPLES[2]},
        {"role": "assistant", "content": BPE_SAMPLES[6]},
        {"role": "user", "content": [{"type": "text", "text": BPE_SAMPLES[7]}, {"type": "image_url", "image_url": {"url": "https://example.invalid/a.png"}}]},
    ]);
    let pt = ProviderTranscript::parse_with(Format::OpenAiChat, &doc, estimator.as_ref())
        .expect("valid");
    let estimates: Vec<u64> = pt
        .transcript()
        .turns()
        .iter()
        .map(cutctx_model::TranscriptTurn::token_estimate)
        .collect();
    assert_eq!(
        estimates,
        [
            O200K[2],
            O200K[6],
            O200K[7] + cutctx_formats::MEDIA_TOKEN_ESTIMATE
        ]
    );
}

#[test]
fn long_and_odd_inputs_are_counted_without_panicking() {
    let e = BpeEstimator::new(BpeEncoding::O200kBase).expect("builds");
    let spaces = " ".repeat(100_000) + "x";
    assert!(e.estimate_tokens(&spaces) > 0);
    let mixed = "a\u{0301}\u{200d}\r\n\t ".repeat(10_000);
    assert!(e.estimate_tokens(&mixed) > 0);
    assert_eq!(e.encoding(), BpeEncoding::O200kBase);
}
