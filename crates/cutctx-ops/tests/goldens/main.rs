//! The project's own goldens: named request documents and the exact bytes the CLI prints.
//!
//! Each scenario in `tests/goldens/` (at the workspace root) is a request document,
//! `<name>.request.json`, beside the recorded output of `cutctx plan` (`<name>.plan.json`) and of
//! `cutctx compact` (`<name>.compact.json`). This test runs both commands in-process and compares
//! byte for byte. It also checks that the three documents agree with each other: the plan inside
//! the compact output is the plan, and `apply` with the recorded plan reproduces the report and
//! the transcript.
//!
//! `CUTCTX_BLESS=1 cargo test -p cutctx-ops --test goldens` rewrites the recorded outputs instead
//! of comparing them. A policy version bump is the only legitimate reason to do that; see
//! `tests/goldens/README.md`.

use std::fs;
use std::path::{Path, PathBuf};

use cutctx::model::canonical::canonical_json_value;
use serde_json::Value;

/// Every scenario, by name. A request document in the folder that is not listed here fails the
/// test, so a scenario cannot be added without being checked.
const SCENARIOS: [&str; 7] = [
    "agent-parallel-calls-default-chain",
    "chain-escalates-through-summary",
    "displaced-result-drop-oldest",
    "long-chat-summarized",
    "masking-custom-placeholder-estimator",
    "pinned-everything-budget-unmet",
    "unicode-control-characters",
];

fn goldens_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/goldens")
}

fn blessing() -> bool {
    std::env::var_os("CUTCTX_BLESS").is_some_and(|v| v == "1")
}

/// The outputs of one scenario, computed now, with the cross-document checks applied.
struct Outputs {
    plan: String,
    compact: String,
}

fn compute(name: &str, request: &str) -> Result<Outputs, String> {
    let plan = cutctx_ops::plan(request)
        .map_err(|e| format!("{name}: `plan` failed: {}", e.to_json_line()))?;
    let compact = cutctx_ops::compact(request)
        .map_err(|e| format!("{name}: `compact` failed: {}", e.to_json_line()))?;
    let applied = cutctx_ops::apply(request, &plan).map_err(|e| {
        format!(
            "{name}: `apply` of its own plan failed: {}",
            e.to_json_line()
        )
    })?;

    let compact_value: Value = serde_json::from_str(&compact)
        .map_err(|e| format!("{name}: `compact` output is not JSON: {e}"))?;
    let applied_value: Value = serde_json::from_str(&applied)
        .map_err(|e| format!("{name}: `apply` output is not JSON: {e}"))?;
    let part = |v: &Value, key: &str| canonical_json_value(v.get(key).unwrap_or(&Value::Null));

    if part(&compact_value, "plan") + "\n" != plan {
        return Err(format!(
            "{name}: the plan inside `compact` is not the `plan` output"
        ));
    }
    for key in ["report", "transcript"] {
        if part(&compact_value, key) != part(&applied_value, key) {
            return Err(format!(
                "{name}: `apply` with the plan gives another {key} than `compact`"
            ));
        }
    }
    Ok(Outputs { plan, compact })
}

/// Compares one recorded file with the computed bytes, or rewrites it when blessing.
fn settle(path: &Path, computed: &str, failures: &mut Vec<String>) {
    if blessing() {
        fs::write(path, computed).expect("a golden file is writable");
        return;
    }
    match fs::read_to_string(path) {
        Err(e) => failures.push(format!("{}: cannot be read: {e}", path.display())),
        Ok(recorded) if recorded != computed => failures.push(format!(
            "{}: differs from the output, first at byte {}",
            path.display(),
            first_difference(&recorded, computed)
        )),
        Ok(_) => {}
    }
}

fn first_difference(a: &str, b: &str) -> usize {
    a.bytes()
        .zip(b.bytes())
        .position(|(x, y)| x != y)
        .unwrap_or_else(|| a.len().min(b.len()))
}

#[test]
fn every_scenario_matches_its_recorded_output() {
    let dir = goldens_dir();
    let mut failures = Vec::new();
    for name in SCENARIOS {
        let request = fs::read_to_string(dir.join(format!("{name}.request.json")))
            .expect("every listed scenario has a request document");
        match compute(name, &request) {
            Err(failure) => failures.push(failure),
            Ok(out) => {
                settle(
                    &dir.join(format!("{name}.plan.json")),
                    &out.plan,
                    &mut failures,
                );
                settle(
                    &dir.join(format!("{name}.compact.json")),
                    &out.compact,
                    &mut failures,
                );
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} golden failures (regenerate only for a policy version bump, see tests/goldens/README.md):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// No stray files: everything beside the README belongs to a listed scenario, and every listed
/// scenario has its request. (A missing recorded output is reported by the test above.)
#[test]
fn the_folder_holds_only_the_listed_scenarios() {
    let mut requests = Vec::new();
    let mut strays = Vec::new();
    for entry in fs::read_dir(goldens_dir()).expect("tests/goldens is readable") {
        let file = entry
            .expect("a goldens folder entry is readable")
            .file_name()
            .into_string()
            .expect("golden file names are UTF-8");
        let scenario = [".request.json", ".plan.json", ".compact.json"]
            .iter()
            .find_map(|suffix| file.strip_suffix(suffix))
            .filter(|name| SCENARIOS.contains(name));
        match scenario {
            Some(name) if file.ends_with(".request.json") => requests.push(name.to_owned()),
            Some(_) => {}
            None if file == "README.md" => {}
            None => strays.push(file),
        }
    }
    requests.sort();
    assert_eq!(strays, Vec::<String>::new(), "files of no listed scenario");
    assert_eq!(
        requests, SCENARIOS,
        "every listed scenario has a request document"
    );
}
