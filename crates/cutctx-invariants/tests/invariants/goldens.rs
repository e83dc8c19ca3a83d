//! Conformance round-trip: every plan the reference recorded in `../shared/conformance/cases`
//! validates against its own transcript and budget, and re-serializes to the reference's bytes.
//!
//! The cases are read from `../shared` beside the project root when it is present (CI always
//! has it); without it these tests say so and pass.

use std::fs;
use std::path::{Path, PathBuf};

use cutctx_invariants::{CompactionPlan, PlanDraft};
use cutctx_model::canonical::{canonical_json_value, sha256_hex};
use cutctx_model::{CompactionBudget, ErrorCode, Transcript, TranscriptTurn};
use serde_json::{Value, json};

use crate::oracle::naive_rules;

/// How many plan cases the shared folder holds today: 53 goldens and 110 recorded runs.
const PLAN_CASES_AT_LEAST: usize = 163;
/// The reference's published plan goldens, converted to cases.
const GOLDEN_PLAN_CASES: usize = 53;

/// One recorded case whose expected document holds a plan.
struct PlanCase {
    name: String,
    transcript: Transcript,
    budget: CompactionBudget,
    expected: Value,
    raw: Vec<u8>,
}

fn cases_dir() -> Option<PathBuf> {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/conformance/cases")
        .canonicalize()
        .ok()
}

fn read_json(path: &Path) -> (Vec<u8>, Value) {
    let raw = fs::read(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let value = serde_json::from_slice(&raw)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    (raw, value)
}

/// Every plan case, sorted by name, and how many expected documents there are in all; `None`
/// when `../shared` is absent.
fn plan_cases() -> Option<(Vec<PlanCase>, usize)> {
    let Some(dir) = cases_dir() else {
        println!(
            "conformance cases skipped: ../shared is absent (no {})",
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../../shared/conformance/cases")
                .display()
        );
        return None;
    };
    let mut names: Vec<String> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| {
            entry
                .expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter_map(|name| name.strip_suffix(".expected.json").map(str::to_owned))
        .collect();
    names.sort();
    let all = names.len();
    let mut cases = Vec::new();
    for name in names {
        let (raw, expected) = read_json(&dir.join(format!("{name}.expected.json")));
        if expected.get("plan").is_none() {
            continue;
        }
        let (_, request) = read_json(&dir.join(format!("{name}.request.json")));
        let turns: Vec<TranscriptTurn> = serde_json::from_value(request["transcript"].clone())
            .unwrap_or_else(|e| panic!("{name}: transcript: {e}"));
        let transcript =
            Transcript::new(turns).unwrap_or_else(|e| panic!("{name}: transcript: {e}"));
        let budget: CompactionBudget = serde_json::from_value(request["budget"].clone())
            .unwrap_or_else(|e| panic!("{name}: budget: {e}"));
        cases.push(PlanCase {
            name,
            transcript,
            budget,
            expected,
            raw,
        });
    }
    Some((cases, all))
}

fn parse_draft(case: &PlanCase) -> PlanDraft {
    serde_json::from_value(case.expected["plan"].clone())
        .unwrap_or_else(|e| panic!("{}: plan: {e}", case.name))
}

#[test]
fn conformance_plans_validate_and_round_trip_byte_for_byte() {
    let Some((cases, all)) = plan_cases() else {
        return;
    };
    let mut failures = Vec::new();
    let mut checked = 0;
    let mut goldens = 0;
    for case in &cases {
        let plan = match CompactionPlan::validate(parse_draft(case), &case.transcript, &case.budget)
        {
            Ok(plan) => plan,
            Err(e) => {
                failures.push(format!(
                    "{}: refused: {} {} {:?}",
                    case.name,
                    e.code(),
                    e.message(),
                    e.details()
                ));
                continue;
            }
        };
        let bytes = plan.canonical_json();
        // The reference's canonical form of the same value: sorted keys, Python floats.
        let reference = canonical_json_value(&case.expected["plan"]);
        if bytes != reference {
            failures.push(format!(
                "{}: canonical form differs\n  ours: {bytes}\n  ref:  {reference}",
                case.name
            ));
            continue;
        }
        // The file's own bytes: the expected document is canonical JSON, so it opens with
        // `{"plan":` followed by the plan's exact bytes.
        let mut prefix = b"{\"plan\":".to_vec();
        prefix.extend_from_slice(bytes.as_bytes());
        prefix.push(b',');
        if !case.raw.starts_with(&prefix) {
            failures.push(format!("{}: the file's raw plan bytes differ", case.name));
            continue;
        }
        // The report the reference recorded names the plan by the hash of those bytes.
        let recorded = case.expected["report"]["plan_hash"]
            .as_str()
            .unwrap_or_default();
        if plan.plan_hash() != recorded || sha256_hex(bytes.as_bytes()) != recorded {
            failures.push(format!(
                "{}: plan_hash {} != recorded {recorded}",
                case.name,
                plan.plan_hash()
            ));
            continue;
        }
        checked += 1;
        if case.name.starts_with("golden-") {
            goldens += 1;
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} conformance plans fail:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
    assert_eq!(checked, cases.len());
    assert!(
        all > checked,
        "the error cases ({}) hold no plan and are not counted",
        all - checked
    );
    assert!(
        checked >= PLAN_CASES_AT_LEAST,
        "only {checked} plan cases were checked"
    );
    assert_eq!(goldens, GOLDEN_PLAN_CASES);
}

#[test]
fn conformance_known_golden_bytes() {
    let Some((cases, _)) = plan_cases() else {
        return;
    };
    let case = cases
        .iter()
        .find(|c| c.name == "golden-masking-tool_heavy-700-0")
        .expect("the masking tool_heavy 700/0 golden is among the cases");
    let plan =
        CompactionPlan::validate(parse_draft(case), &case.transcript, &case.budget).expect("valid");
    let bytes = plan.canonical_json();
    // BEHAVIOUR.md §4: sha256_of("L" * 1200) hashes the JSON literal, quotes included.
    assert!(bytes.contains(
        r#"{"action":"mask","replacement":{"content":"[tool result masked by cutctx] (original: 300 tokens, sha256:d1fd6a834c71465d6eeb3623b9c5a2ac60c49d069ffc469bc131b4ff506e55a2)","token_estimate":32},"summary_group":null,"turn_id":"t1"}"#
    ));
    assert!(bytes.ends_with(
        r#""budget_unmet":true,"estimator_ratio":4.0,"policy_name":"observation_masking","policy_version":"1.0.0","summarization_requests":[],"tokens_after_estimate":802,"tokens_before":1070}"#
    ));
    assert_eq!(
        plan.plan_hash(),
        "5572b30a97e98ce1e62c7595f120298ec0d1ba0b5019bd71cd2b79f14a5d05eb"
    );
}

#[test]
fn conformance_plans_agree_with_the_naive_rules_and_refuse_forged_figures() {
    let Some((cases, _)) = plan_cases() else {
        return;
    };
    for case in &cases {
        let (t, b) = (&case.transcript, &case.budget);
        let d = parse_draft(case);
        assert_eq!(
            naive_rules(t, b, &d),
            Ok(()),
            "{}: the oracle refuses a reference plan",
            case.name
        );

        let mut flipped = d.clone();
        flipped.budget_unmet = !d.budget_unmet;
        let err = CompactionPlan::validate(flipped.clone(), t, b).expect_err("a flipped flag");
        let expected = json!({
            "declared": !d.budget_unmet,
            "tokens_after_estimate": d.tokens_after_estimate,
            "max_tokens": b.max_tokens,
        });
        assert_eq!(err.code(), ErrorCode::Validation, "{}", case.name);
        assert_eq!(
            serde_json::to_value(err.details()).expect("json"),
            expected,
            "{}",
            case.name
        );
        assert_eq!(
            naive_rules(t, b, &flipped).map_err(|r| r.details),
            Err(expected),
            "{}",
            case.name
        );

        let mut forged = d.clone();
        forged.tokens_before += 1;
        let err = CompactionPlan::validate(forged, t, b).expect_err("a forged tokens_before");
        assert_eq!(
            serde_json::to_value(err.details()).expect("json"),
            json!({"declared": d.tokens_before + 1, "transcript": d.tokens_before}),
            "{}",
            case.name
        );
    }
}
