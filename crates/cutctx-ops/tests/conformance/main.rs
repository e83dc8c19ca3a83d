//! Holds the CLI library against every recorded conformance case, in-process.
//!
//! This reproduces `../shared/conformance/run.py` check for check, through
//! `cutctx_ops::plan`, `compact` and `apply` instead of the binary:
//!
//! 1. `plan`: the bytes equal `canonical(expected.plan) + "\n"`;
//! 2. `compact`: the output parses as JSON whose `plan`, `report` and `transcript` equal the
//!    expected ones canonically;
//! 3. `apply` with the expected plan (as `canonical(plan) + "\n"`): the expected `report` and
//!    `transcript`;
//! 4. error cases: both `plan` and `compact` fail, and the JSON error line names the expected
//!    code.
//!
//! The cases live in the shared folder beside the project (`../shared`, which CI always has).
//! When it is absent the test says so and passes: the project's own goldens still run.

use std::fs;
use std::path::{Path, PathBuf};

use cutctx::model::canonical::canonical_json_value;
use serde_json::Value;

/// The number of request/expected pairs in `../shared/conformance/cases`.
const CASE_COUNT: usize = 185;

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/cases")
}

/// run.py's `canonical(value)`; `None` (a missing key) is Python's `None`, that is `null`.
fn canonical(value: Option<&Value>) -> String {
    canonical_json_value(value.unwrap_or(&Value::Null))
}

/// The code in the one-line JSON form of an error, as run.py reads it from standard error.
fn json_line_code(err: &cutctx_ops::OpsError) -> Option<String> {
    let line = err.to_json_line();
    let value: Value = serde_json::from_str(&line).ok()?;
    value.get("code")?.as_str().map(str::to_owned)
}

/// Runs one case; returns the first failure, worded as run.py words it.
fn check_case(name: &str, request: &str, expected: &Value) -> Result<(), String> {
    if let Some(code) = expected.get("error") {
        let code = code
            .as_str()
            .ok_or_else(|| format!("{name}: expected error is not a string"))?;
        for (sub, result) in [
            ("plan", cutctx_ops::plan(request)),
            ("compact", cutctx_ops::compact(request)),
        ] {
            match result {
                Ok(_) => return Err(format!("{name}: `{sub}` succeeded, expected error {code}")),
                Err(err) => {
                    let got = json_line_code(&err);
                    if err.code != code || got.as_deref() != Some(code) {
                        return Err(format!(
                            "{name}: `{sub}` error code {:?} (JSON line {got:?}), expected {code:?}",
                            err.code
                        ));
                    }
                    if err.exit_status() == 0 {
                        return Err(format!("{name}: `{sub}` error has exit status 0"));
                    }
                }
            }
        }
        return Ok(());
    }

    let want_plan = canonical(expected.get("plan")) + "\n";
    let got_plan = cutctx_ops::plan(request)
        .map_err(|e| format!("{name}: `plan` failed: {}: {}", e.code, e.message))?;
    if got_plan != want_plan {
        return Err(format!(
            "{name}: `plan` bytes differ from the expected plan\n  got:  {}\n  want: {}",
            abbreviate(&got_plan),
            abbreviate(&want_plan)
        ));
    }

    let out = cutctx_ops::compact(request)
        .map_err(|e| format!("{name}: `compact` failed: {}: {}", e.code, e.message))?;
    let got: Value = serde_json::from_str(&out)
        .map_err(|_| format!("{name}: `compact` output is not one JSON document"))?;
    for key in ["plan", "report", "transcript"] {
        if canonical(got.get(key)) != canonical(expected.get(key)) {
            return Err(format!("{name}: `compact` {key} differs from expected"));
        }
    }

    let out = cutctx_ops::apply(request, &want_plan)
        .map_err(|e| format!("{name}: `apply` failed: {}: {}", e.code, e.message))?;
    let got: Value = serde_json::from_str(&out)
        .map_err(|_| format!("{name}: `apply` output is not one JSON document"))?;
    for key in ["report", "transcript"] {
        if canonical(got.get(key)) != canonical(expected.get(key)) {
            return Err(format!("{name}: `apply` {key} differs from expected"));
        }
    }
    Ok(())
}

/// Reads one case from the shared folder.
fn load(dir: &Path, name: &str) -> (String, Value) {
    let request = fs::read_to_string(dir.join(format!("{name}.request.json")))
        .expect("a request document is UTF-8 text");
    let expected_text = fs::read_to_string(dir.join(format!("{name}.expected.json")))
        .expect("every request has its expected document");
    let expected = serde_json::from_str(&expected_text).expect("an expected document is JSON");
    (request, expected)
}

fn abbreviate(text: &str) -> String {
    const LIMIT: usize = 200;
    match text.char_indices().nth(LIMIT) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.trim_end().to_owned(),
    }
}

#[test]
fn every_recorded_case_passes_in_process() {
    let dir = cases_dir();
    if !dir.is_dir() {
        println!("conformance cases skipped: ../shared is absent");
        return;
    }
    let mut names: Vec<String> = fs::read_dir(&dir)
        .expect("the cases folder is readable")
        .map(|entry| {
            entry
                .expect("a cases folder entry is readable")
                .file_name()
                .into_string()
                .expect("case file names are UTF-8")
        })
        .filter_map(|file| file.strip_suffix(".request.json").map(str::to_owned))
        .collect();
    names.sort();

    let mut failures = Vec::new();
    let mut errors = 0;
    for name in &names {
        let (request, expected) = load(&dir, name);
        if expected.get("error").is_some() {
            errors += 1;
        }
        if let Err(failure) = check_case(name, &request, &expected) {
            failures.push(failure);
        }
    }

    println!(
        "{} conformance cases ({errors} error cases): {} passed, {} failed",
        names.len(),
        names.len() - failures.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} conformance cases failed:\n{}",
        failures.len(),
        names.len(),
        failures.join("\n")
    );
    assert_eq!(
        names.len(),
        CASE_COUNT,
        "every recorded case in {} ran",
        dir.display()
    );
}

/// The checker itself must be able to fail: a tampered expectation is caught at the step
/// run.py would catch it.
#[test]
fn the_checker_rejects_tampered_expectations() {
    let dir = cases_dir();
    if !dir.is_dir() {
        println!("conformance cases skipped: ../shared is absent");
        return;
    }
    // A success case: simple_chat under the default chain, budget 60, protected 1.
    let (request, expected) = load(&dir, "golden-chain-simple_chat-60-1");
    assert_eq!(check_case("untampered", &request, &expected), Ok(()));

    let mut plan = expected.clone();
    plan["plan"]["tokens_after_estimate"] = Value::from(53);
    let failure = check_case("t", &request, &plan).expect_err("a changed plan is caught");
    assert!(failure.starts_with("t: `plan` bytes differ"), "{failure}");

    let mut report = expected.clone();
    report["report"]["turns_after"] = Value::from(99);
    let failure = check_case("t", &request, &report).expect_err("a changed report is caught");
    assert_eq!(failure, "t: `compact` report differs from expected");

    let mut transcript = expected.clone();
    transcript["transcript"][0]["content"] = Value::from("changed");
    let failure =
        check_case("t", &request, &transcript).expect_err("a changed transcript is caught");
    assert_eq!(failure, "t: `compact` transcript differs from expected");

    // An error case whose expected code is wrong.
    let (request, _) = load(&dir, "bad-1-00");
    let wrong = serde_json::json!({"error": "COMPACTION_PLAN_MISMATCH"});
    let failure = check_case("b", &request, &wrong).expect_err("a wrong code is caught");
    assert!(
        failure.starts_with("b: `plan` error code \"VALIDATION_ERROR\""),
        "{failure}"
    );

    // A success case held to an error expectation.
    let (request, _) = load(&dir, "golden-chain-simple_chat-60-1");
    let failure = check_case("s", &request, &wrong).expect_err("a success is not an error");
    assert_eq!(
        failure,
        "s: `plan` succeeded, expected error COMPACTION_PLAN_MISMATCH"
    );
}
