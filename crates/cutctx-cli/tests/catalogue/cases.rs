//! Runs every case of the catalogue in both error formats and checks it, reporting every
//! failing case by name at once; and checks that the valid inputs the cases were cut from
//! succeed, so that each case fails for its hostile part alone.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::case::{self, Case, Expect};
use crate::process::{self, Run};
use crate::{SECRET, catalogue_dir, scratch_root, serial};

/// A case slower than this fails: a guard against hangs, not a benchmark.
const CASE_LIMIT: Duration = Duration::from_secs(20);

/// The catalogue must hold at least this many cases.
const MIN_CASES: usize = 60;

/// The two error formats every case runs in.
const FORMATS: [&str; 2] = ["json", "text"];

/// Every case folder, sorted by name; folders starting with `_` hold shared material.
fn case_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(catalogue_dir())
        .expect("tests/bad-input can be listed")
        .map(|e| e.expect("a catalogue entry can be read").path())
        .filter(|p| p.is_dir())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !n.starts_with('_'))
        })
        .collect();
    dirs.sort();
    dirs
}

fn copy_dir_files(from: &[(String, PathBuf)], to: &Path) {
    for (name, path) in from {
        std::fs::copy(path, to.join(name)).expect("a case input can be copied");
    }
}

fn link_or_copy(from: &Path, to: &Path) {
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).expect("a generated input can be copied");
    }
}

fn snapshot(dir: &Path, files: &[String]) -> Vec<Option<Vec<u8>>> {
    files
        .iter()
        .map(|f| std::fs::read(dir.join(f)).ok())
        .collect()
}

fn excerpt(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut short: String = text.chars().take(300).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}

/// The last line of standard error, without its newline.
fn last_line(stderr: &str) -> &str {
    stderr
        .trim_end_matches('\n')
        .rsplit('\n')
        .next()
        .unwrap_or_default()
}

/// Everything wrong with one run of `case` in `format`.
fn check(
    case: &Case,
    format: &str,
    run: &Run,
    before: &[Option<Vec<u8>>],
    after: &[Option<Vec<u8>>],
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut problem = |p: String| problems.push(format!("--error-format {format}: {p}"));
    if run.killed {
        problem(format!("killed after {} s", process::KILL_AFTER.as_secs()));
    } else if run.elapsed > CASE_LIMIT {
        problem(format!(
            "took {:.1} s, over the {} s limit",
            run.elapsed.as_secs_f64(),
            CASE_LIMIT.as_secs()
        ));
    }
    match run.status {
        None => problem("killed by a signal (a crash, or an abort)".to_owned()),
        Some(s) if s != case.status => {
            problem(format!("exit status {s}, expected {}", case.status))
        }
        Some(_) => {}
    }
    let stderr = String::from_utf8_lossy(&run.stderr);
    if process::contains(&run.stderr, SECRET.as_bytes()) {
        problem(format!(
            "standard error echoes the planted content: {}",
            excerpt(&run.stderr)
        ));
    }
    if process::contains(&run.stdout, SECRET.as_bytes()) {
        problem("standard output echoes the planted content".to_owned());
    }
    match &case.expect {
        Expect::Error(code) => {
            if !run.stdout.is_empty() {
                problem(format!(
                    "{} bytes on standard output on failure: {}",
                    run.stdout.len(),
                    excerpt(&run.stdout)
                ));
            }
            if !stderr.ends_with('\n') {
                problem(format!(
                    "standard error does not end with a newline: {}",
                    excerpt(&run.stderr)
                ));
            }
            let line = last_line(&stderr);
            if format == "json" {
                check_json_line(case, code, line, &mut problem);
            } else if code == "USAGE_ERROR" {
                if !stderr.starts_with("error:") {
                    problem(format!(
                        "usage text does not start with `error:`: {}",
                        excerpt(&run.stderr)
                    ));
                }
            } else {
                let head = format!("error[{code}]: ");
                if !line.starts_with(&head) {
                    problem(format!(
                        "last line of standard error is not `{head}…`: {line:?}"
                    ));
                }
                if let Some(want) = &case.message_contains
                    && !line.contains(want.as_str())
                {
                    problem(format!("the message does not contain {want:?}: {line:?}"));
                }
            }
        }
        Expect::Verdict(codes) => {
            if !run.stderr.is_empty() {
                problem(format!(
                    "a verdict, yet standard error says: {}",
                    excerpt(&run.stderr)
                ));
            }
            check_verdict(codes, &run.stdout, &mut problem);
        }
    }
    for ((name, b), a) in case.untouched.iter().zip(before).zip(after) {
        if b != a {
            problem(format!(
                "{name} was {} by a failed command",
                if b.is_none() { "created" } else { "changed" }
            ));
        }
    }
    problems
}

fn check_json_line(case: &Case, code: &str, line: &str, problem: &mut impl FnMut(String)) {
    let Ok(Value::Object(err)) = serde_json::from_str::<Value>(line) else {
        problem(format!(
            "the last line of standard error is not a JSON object: {line:?}"
        ));
        return;
    };
    let keys: Vec<&str> = err.keys().map(String::as_str).collect();
    if keys != ["code", "details", "message"] {
        problem(format!(
            "the error line has keys {keys:?}, not code, details and message"
        ));
    }
    if err.get("code").and_then(Value::as_str) != Some(code) {
        problem(format!(
            "code {}, expected {code}",
            err.get("code").unwrap_or(&Value::Null)
        ));
    }
    if !err.get("message").is_some_and(Value::is_string) {
        problem("the message is not a string".to_owned());
    }
    let Some(details) = err.get("details").and_then(Value::as_object) else {
        problem("details is not an object".to_owned());
        return;
    };
    for (k, want) in &case.details {
        match details.get(k) {
            Some(got) if got == want => {}
            got => problem(format!(
                "details.{k} is {}, expected {want}",
                got.map_or_else(|| "absent".to_owned(), Value::to_string)
            )),
        }
    }
    if let Some(want) = &case.message_contains {
        let message = err
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !message.contains(want.as_str()) {
            problem(format!(
                "the message does not contain {want:?}: {message:?}"
            ));
        }
    }
}

fn check_verdict(codes: &[String], stdout: &[u8], problem: &mut impl FnMut(String)) {
    let text = String::from_utf8_lossy(stdout);
    if text.matches('\n').count() != 1 || !text.ends_with('\n') {
        problem(format!(
            "the verdict is not one line and one newline: {}",
            excerpt(stdout)
        ));
    }
    let Ok(verdict) = serde_json::from_str::<Value>(&text) else {
        problem(format!("the verdict is not JSON: {}", excerpt(stdout)));
        return;
    };
    if verdict["ok"] != Value::Bool(false) || verdict["verdict"] != "BROKEN" {
        problem(format!(
            "verdict {} with ok {}, expected BROKEN with ok false",
            verdict["verdict"], verdict["ok"]
        ));
    }
    let got: Vec<&str> = verdict["failures"]
        .as_array()
        .map(|f| f.iter().filter_map(|x| x["code"].as_str()).collect())
        .unwrap_or_default();
    if got != codes {
        problem(format!("failure codes {got:?}, expected {codes:?}"));
    }
}

/// How a case came out.
enum Outcome {
    Pass,
    Fail(Vec<String>),
    KnownBug(String, Vec<String>),
    FixedBug(String),
}

/// Runs one case in both formats: `(outcome, milliseconds per format)`.
fn run_case(case: &Case) -> (Outcome, Vec<u128>) {
    let work = scratch_root().join("cases").join(&case.name);
    if work.exists() {
        std::fs::remove_dir_all(&work).expect("an old scratch folder can be removed");
    }
    let generated = work.join("generated");
    std::fs::create_dir_all(&generated).expect("a scratch folder can be created");
    let mut problems = Vec::new();
    if case.plants(SECRET) != case.planted {
        problems.push(if case.planted {
            format!("no input plants {SECRET}: plant it, or set \"planted\": false")
        } else {
            format!("an input plants {SECRET}: drop \"planted\": false")
        });
    }
    for (name, g) in &case.generate {
        if let Err(e) = case::generate(g, &case.dir, &generated.join(name)) {
            problems.push(format!("generate {name}: {e}"));
        }
    }
    let inputs = case.inputs();
    let mut millis = Vec::new();
    if problems.is_empty() {
        for format in FORMATS {
            let dir = work.join(format);
            std::fs::create_dir_all(&dir).expect("a scratch folder can be created");
            copy_dir_files(&inputs, &dir);
            for (name, _) in &case.generate {
                link_or_copy(&generated.join(name), &dir.join(name));
            }
            let before = snapshot(&dir, &case.untouched);
            let mut args = vec!["--error-format".to_owned(), format.to_owned()];
            args.extend(case.args.iter().cloned());
            let run = process::run(
                &args,
                &dir,
                case.stdin.as_deref().map(str::as_bytes),
                // Relative to the case's copy, like `args`; `/dev/full` stays itself.
                case.stdout.as_deref().map(|out| dir.join(out)).as_deref(),
            );
            let after = snapshot(&dir, &case.untouched);
            millis.push(run.elapsed.as_millis());
            problems.extend(check(case, format, &run, &before, &after));
        }
    }
    // Generated inputs can be large: never leave them behind. Keep the rest of a failing
    // case's folder for a look.
    let _ = std::fs::remove_dir_all(&generated);
    for format in FORMATS {
        for (name, _) in &case.generate {
            let _ = std::fs::remove_file(work.join(format).join(name));
        }
    }
    let outcome = match (&case.xfail, problems.is_empty()) {
        (None, true) => Outcome::Pass,
        (None, false) => Outcome::Fail(problems),
        (Some(why), false) => Outcome::KnownBug(why.clone(), problems),
        (Some(why), true) => Outcome::FixedBug(why.clone()),
    };
    if matches!(outcome, Outcome::Pass | Outcome::KnownBug(..)) {
        let _ = std::fs::remove_dir_all(&work);
    }
    (outcome, millis)
}

/// The category of a case: its name up to the first `-`.
fn category(name: &str) -> &str {
    name.split('-').next().unwrap_or(name)
}

#[test]
fn every_case_fails_cleanly_with_its_code_and_status() {
    let _serial = serial();
    let start = Instant::now();
    let dirs = case_dirs();
    let mut failures = String::new();
    let mut known = String::new();
    let mut table = String::new();
    let mut per_category: BTreeMap<String, usize> = BTreeMap::new();
    let mut cases = 0;
    for dir in &dirs {
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("?")
            .to_owned();
        let case = match Case::load(dir) {
            Ok(case) => case,
            Err(e) => {
                let _ = writeln!(failures, "{name}: {e}");
                continue;
            }
        };
        cases += 1;
        *per_category
            .entry(category(&case.name).to_owned())
            .or_default() += 1;
        let (outcome, millis) = run_case(&case);
        let tag = match &outcome {
            Outcome::Pass => "ok",
            Outcome::Fail(problems) => {
                let _ = writeln!(failures, "{} ({}):", case.name, case.about);
                for p in problems {
                    let _ = writeln!(failures, "    {p}");
                }
                "FAILED"
            }
            Outcome::KnownBug(why, problems) => {
                let _ = writeln!(known, "{}: {why}", case.name);
                for p in problems {
                    let _ = writeln!(known, "    {p}");
                }
                "known bug"
            }
            Outcome::FixedBug(why) => {
                let _ = writeln!(
                    failures,
                    "{}: passes now, but is marked xfail ({why}); remove the mark",
                    case.name
                );
                "FIXED: remove xfail"
            }
        };
        let _ = writeln!(table, "{:<55} {tag:<20} {millis:?} ms", case.name);
    }
    println!("{table}");
    println!(
        "{cases} cases in {:.1} s; by category: {per_category:?}",
        start.elapsed().as_secs_f64()
    );
    if !known.is_empty() {
        println!("known bugs (xfail), reported and not failed on:\n{known}");
    }
    assert!(
        cases >= MIN_CASES,
        "the catalogue holds {cases} cases; it needs at least {MIN_CASES}"
    );
    assert!(failures.is_empty(), "failing cases:\n{failures}");
}

/// Runs `cutctx ARGS` on the controls in `dir` and insists on success.
fn succeeds(dir: &Path, args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|&a| a.to_owned()).collect();
    let run = process::run(&args, dir, None, None);
    assert_eq!(
        run.status,
        Some(0),
        "cutctx {args:?} on the controls: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(
        run.stderr.is_empty(),
        "cutctx {args:?} wrote to standard error"
    );
    String::from_utf8(run.stdout).expect("the output is UTF-8")
}

/// The inputs in `tests/bad-input/_controls` are the valid documents most cases are cut from;
/// each command succeeds on them, so a case fails only for what was changed.
#[test]
fn the_controls_succeed() {
    let _serial = serial();
    let controls = catalogue_dir().join("_controls");
    let dir = scratch_root().join("controls");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("an old scratch folder can be removed");
    }
    std::fs::create_dir_all(&dir).expect("a scratch folder can be created");
    for entry in std::fs::read_dir(&controls).expect("the controls can be listed") {
        let path = entry.expect("a control can be listed").path();
        let name = path.file_name().expect("a control has a name");
        std::fs::copy(&path, dir.join(name)).expect("a control can be copied");
    }
    let plan: Value =
        serde_json::from_str(&succeeds(&dir, &["plan", "request.json"])).expect("the plan is JSON");
    assert_eq!(plan["budget_unmet"], false);
    succeeds(&dir, &["compact", "request.json"]);
    let applied: Value = serde_json::from_str(&succeeds(
        &dir,
        &["apply", "apply-request.json", "--plan", "apply-plan.json"],
    ))
    .expect("apply prints JSON");
    assert_eq!(applied["report"]["tokens_after_estimate"], 190);
    assert_eq!(
        applied["report"]["masked_turn_ids"],
        serde_json::json!(["t2"])
    );
    let verdict: Value = serde_json::from_str(&succeeds(
        &dir,
        &[
            "ledger",
            "verify",
            "ledger.jsonl",
            "--pin",
            "pin.txt",
            "--content",
            "content.json",
        ],
    ))
    .expect("the verdict is JSON");
    assert_eq!(verdict["ok"], true, "{verdict}");
    assert_eq!(
        verdict["checked"]["content_lines"],
        serde_json::json!([1, 3])
    );
    assert_eq!(verdict["checked"]["receipts_recomputed_in_full"], 2);
    let head = succeeds(&dir, &["ledger", "head", "ledger.jsonl"]);
    let pin = std::fs::read_to_string(dir.join("pin.txt")).expect("the pin can be read");
    let chain_and_rows = |line: &str| line.split(' ').take(4).collect::<Vec<_>>().join(" ");
    assert_eq!(
        chain_and_rows(&head),
        chain_and_rows(&pin),
        "the pin is the ledger's head"
    );
    let row = succeeds(
        &dir,
        &[
            "receipt",
            "seal",
            "--pre",
            "pre.json",
            "--post",
            "post.json",
            "--ledger",
            "new-ledger.jsonl",
            "--compactor",
            "catalogue",
            "--method",
            "drop",
        ],
    );
    assert!(row.starts_with('{') && row.ends_with("}\n"), "{row}");
    assert!(
        !row.contains(SECRET),
        "a receipt holds digests, never content"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
