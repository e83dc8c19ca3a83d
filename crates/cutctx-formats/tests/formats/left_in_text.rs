//! The text path with turn contents left in the request (`from_text_deferred`, `plan`): the
//! same plans, the same output bytes and the same reports as the text path that reads every
//! content, for every policy (each reads what it reads: the shape, the structure with masks
//! hashed from the request's bytes, or every content), whether the request spells its strings
//! as the canonical writer does or not.

use cutctx_formats::{Format, ProviderTranscript};
use cutctx_model::{CompactionBudget, ErrorCode};
use cutctx_policies::{CharRatioEstimator, CompactionPolicy, ObservationMaskingPolicy};

use crate::{corpus, policies, summaries_for};

/// `text` with every non-ASCII character and every `/` escaped: the same request, spelled
/// as the canonical writer never spells it.
fn escaped_otherwise(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            // JSON has `/` only inside strings.
            '/' => out.push_str("\\/"),
            c if c.is_ascii() => out.push(c),
            c => {
                let mut units = [0; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04X}"));
                }
            }
        }
    }
    out
}

/// Compacts `text` both ways and checks that they agree; whether anything was left in it.
fn agrees(
    format: Format,
    text: &str,
    policy: &dyn CompactionPolicy,
    budget: &CompactionBudget,
) -> bool {
    let estimator = CharRatioEstimator::default();
    let Some(whole) = ProviderTranscript::from_text_with(format, text, &estimator) else {
        assert!(ProviderTranscript::from_text_deferred(format, text, &estimator).is_none());
        return false;
    };
    let mut deferred =
        ProviderTranscript::from_text_deferred(format, text, &estimator).expect("read as text");
    let left = deferred.has_deferred_contents();
    // The same structure: ids, roles, estimates, calls; contents aside.
    assert_eq!(deferred.transcript().len(), whole.transcript().len());
    for (a, b) in deferred
        .transcript()
        .turns()
        .iter()
        .zip(whole.transcript().turns())
    {
        assert_eq!(
            (
                a.turn_id(),
                a.role(),
                a.token_estimate(),
                a.tool_call_id(),
                a.pinned()
            ),
            (
                b.turn_id(),
                b.role(),
                b.token_estimate(),
                b.tool_call_id(),
                b.pinned()
            )
        );
        assert!(a.content().is_empty() || a.content() == b.content());
    }
    let expected = policy.decide(whole.transcript(), budget);
    let planned = deferred.plan(policy, budget, text);
    let (expected, planned) = match (expected, planned) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(a), Err(b)) => {
            assert_eq!(a.to_string(), b.to_string());
            assert_eq!(a.code(), ErrorCode::BudgetUnsatisfiable);
            return left;
        }
        (a, b) => panic!("one failed: {a:?} / {b:?}"),
    };
    assert_eq!(planned, expected);
    let summaries = summaries_for(&planned);
    let a = whole
        .apply_text(&expected, &summaries, text)
        .expect("applies");
    let b = deferred
        .apply_text(&planned, &summaries, text)
        .expect("applies");
    assert_eq!(a.text, b.text);
    assert_eq!(a.report, b.report);
    // Every content read in, the transcript is the one read whole.
    deferred
        .read_deferred_contents(text)
        .expect("the same text");
    assert!(!deferred.has_deferred_contents());
    assert_eq!(deferred.transcript(), whole.transcript());
    left
}

#[test]
fn leaving_contents_in_the_request_plans_and_renders_what_reading_them_does() {
    let (mut compared, mut left) = (0, 0);
    for case in corpus() {
        let compact = case.document.to_string();
        let pretty = serde_json::to_string_pretty(&case.document).expect("writes");
        let otherwise = escaped_otherwise(&compact);
        let total = ProviderTranscript::parse(case.format, &case.document)
            .expect("corpus parses")
            .transcript()
            .token_estimate();
        for text in [&compact, &pretty, &otherwise] {
            for (name, policy) in policies() {
                for budget in [0, total / 4, total / 2, total] {
                    for protected in [0, 1] {
                        let budget =
                            CompactionBudget::new(budget).with_protected_recent_turns(protected);
                        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            agrees(case.format, text, policy.as_ref(), &budget)
                        }));
                        match run {
                            Ok(l) => left += usize::from(l),
                            Err(_) => panic!("{} / {name} / {budget:?}: {text}", case.name),
                        }
                        compared += 1;
                    }
                }
            }
        }
    }
    assert!(compared > 1_000, "{compared}");
    // Most requests leave something in their text.
    assert!(left * 2 > compared, "{left} of {compared}");
}

#[test]
fn a_plan_or_a_read_against_another_text_is_refused() {
    let text =
        r#"{"messages":[{"role":"user","content":"hello there"},{"role":"user","content":"hi"}]}"#;
    let estimator = CharRatioEstimator::default();
    let mut pt = ProviderTranscript::from_text_deferred(Format::OpenAiChat, text, &estimator)
        .expect("plain");
    let policy = ObservationMaskingPolicy::new(0).expect("a policy");
    let budget = CompactionBudget::new(1).with_protected_recent_turns(1);
    let shorter = &text[..text.len() - 1];
    let err = pt
        .plan(&policy, &budget, shorter)
        .expect_err("another text");
    assert_eq!(err.code(), "FORMAT_VIEW_MISMATCH");
    let err = pt
        .read_deferred_contents(shorter)
        .expect_err("another text");
    assert_eq!(err.code(), "FORMAT_VIEW_MISMATCH");
    // Nothing was read in by the refused calls.
    assert!(pt.has_deferred_contents());
    // A text of the same length whose strings do not decode where they lay.
    let broken = text.replacen("hello", "\\x lo", 1);
    assert_eq!(broken.len(), text.len());
    let err = pt
        .read_deferred_contents(&broken)
        .expect_err("does not decode");
    assert_eq!(err.code(), "FORMAT_VIEW_MISMATCH");
}
