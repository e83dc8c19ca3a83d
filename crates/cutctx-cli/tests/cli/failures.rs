//! Failures: nothing on standard output, the contract's exit status, one JSON error line with
//! `--error-format json`, and never any turn content on standard error.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support::{
    Format, SECRET, assert_fails, assert_failure, details, mask_and_summary_request, request, run,
    scratch, simple_chat, simple_request, turn, with, write, write_json,
};

/// The three subcommands on one request file; `apply` gets a well-formed plan for
/// [`simple_request`], so only the request can be at fault.
fn every_subcommand(dir: &Path, request: &Path) -> Vec<Vec<OsString>> {
    let plan = write(
        dir,
        "valid-plan.json",
        cutctx_ops::plan(&simple_request().to_string()).expect("simple_request plans"),
    );
    vec![
        vec!["plan".into(), request.into()],
        vec!["compact".into(), request.into()],
        vec!["apply".into(), request.into(), "--plan".into(), plan.into()],
    ]
}

/// Runs every subcommand on the request bytes and checks each fails with `code`; returns the
/// JSON errors, one per subcommand.
fn request_fails(test: &str, bytes: &[u8], code: &str) -> Vec<Value> {
    let dir = scratch(test);
    let req = write(&dir, "request.json", bytes);
    every_subcommand(&dir, &req)
        .iter()
        .map(|args| assert_fails(args, None, code, 2))
        .collect()
}

fn invalid(test: &str, doc: &Value) -> Vec<Value> {
    request_fails(test, doc.to_string().as_bytes(), "VALIDATION_ERROR")
}

fn message(err: &Value) -> &str {
    err["message"].as_str().expect("a message")
}

// ---- INPUT_ERROR ----------------------------------------------------------------------------

#[test]
fn a_missing_request_file_is_an_input_error() {
    let dir = scratch("a_missing_request_file_is_an_input_error");
    let missing: PathBuf = dir.join("no-such-request.json");
    for args in every_subcommand(&dir, &missing) {
        assert_fails(&args, None, "INPUT_ERROR", 2);
    }
}

#[test]
fn invalid_utf8_is_an_input_error() {
    let mut bytes = simple_request().to_string().into_bytes();
    let at = bytes
        .windows(SECRET.len())
        .position(|w| w == SECRET.as_bytes())
        .expect("the request carries the secret")
        + SECRET.len();
    bytes.splice(at..at, [0xff, 0xfe]);
    for err in request_fails("invalid_utf8_is_an_input_error", &bytes, "INPUT_ERROR") {
        assert_eq!(details(&err)["offset"], at, "the offset of the bad byte");
    }
}

#[test]
fn text_that_is_not_json_is_an_input_error() {
    let text = format!("{SECRET} is not a JSON document");
    request_fails(
        "text_that_is_not_json_is_an_input_error",
        text.as_bytes(),
        "INPUT_ERROR",
    );
    let truncated = simple_request().to_string();
    let truncated = &truncated[..truncated.len() / 2];
    request_fails(
        "text_that_is_not_json_is_an_input_error_truncated",
        truncated.as_bytes(),
        "INPUT_ERROR",
    );
}

#[test]
fn an_empty_file_is_an_input_error() {
    request_fails("an_empty_file_is_an_input_error", b"", "INPUT_ERROR");
}

#[test]
fn an_unreadable_or_non_json_plan_file_is_an_input_error() {
    let dir = scratch("an_unreadable_or_non_json_plan_file_is_an_input_error");
    let req = write_json(&dir, "request.json", &simple_request());
    let missing = dir.join("no-such-plan.json");
    let not_json = write(&dir, "not-json.json", "plan: keep everything");
    for plan in [missing, not_json] {
        let args: Vec<OsString> = vec![
            "apply".into(),
            req.clone().into(),
            "--plan".into(),
            plan.into(),
        ];
        assert_fails(&args, None, "INPUT_ERROR", 2);
    }
}

// ---- VALIDATION_ERROR -----------------------------------------------------------------------

#[test]
fn an_unknown_key_in_the_request_is_named() {
    let doc = with(simple_request(), "sumaries", json!({}));
    for err in invalid("an_unknown_key_in_the_request_is_named", &doc) {
        assert!(message(&err).contains("sumaries"), "{err}");
    }
}

#[test]
fn an_unknown_key_in_a_turn_is_named() {
    let mut doc = simple_request();
    doc["transcript"][2]["tool_call"] = json!("c1");
    for err in invalid("an_unknown_key_in_a_turn_is_named", &doc) {
        assert!(message(&err).contains("tool_call"), "{err}");
    }
}

#[test]
fn an_unknown_key_in_the_budget_is_named() {
    let mut doc = simple_request();
    doc["budget"] = json!({"max_tokens": 60, "protected_recent_turn": 1});
    for err in invalid("an_unknown_key_in_the_budget_is_named", &doc) {
        assert!(message(&err).contains("protected_recent_turn"), "{err}");
    }
}

#[test]
fn an_unknown_key_in_the_policy_is_named() {
    let mut doc = simple_request();
    doc["policy"] = json!({"name": "observation_masking", "keep_recent": 1});
    for err in invalid("an_unknown_key_in_the_policy_is_named", &doc) {
        assert!(message(&err).contains("keep_recent"), "{err}");
        assert_eq!(details(&err)["unknown_key"], "keep_recent");
    }
    // In a chain member too.
    doc["policy"] = json!({"name": "chain", "policies": [{"name": "drop_oldest", "keep": 1}]});
    for err in invalid("an_unknown_key_in_the_policy_is_named_chain", &doc) {
        assert!(message(&err).contains("keep"), "{err}");
    }
}

#[test]
fn duplicate_turn_ids_are_refused() {
    let mut doc = simple_request();
    doc["transcript"][3]["turn_id"] = json!("u1");
    for err in invalid("duplicate_turn_ids_are_refused", &doc) {
        assert_eq!(details(&err)["duplicate_turn_ids"], json!(["u1"]), "{err}");
    }
}

#[test]
fn a_negative_estimate_is_refused() {
    let mut doc = simple_request();
    doc["transcript"][1]["token_estimate"] = json!(-1);
    for err in invalid("a_negative_estimate_is_refused", &doc) {
        assert_eq!(details(&err)["turn_id"], "u1", "{err}");
        assert_eq!(details(&err)["token_estimate"], -1, "{err}");
    }
}

/// A request whose figures are JSON numbers that are not integers, or not numbers at all.
fn non_integer_figures() -> Vec<(&'static str, Value)> {
    let mut cases = Vec::new();
    for (name, value) in [
        ("float_estimate", json!(1.0)),
        ("fractional_estimate", json!(1.5)),
        ("string_estimate", json!("12")),
        ("null_estimate", Value::Null),
    ] {
        let mut doc = simple_request();
        doc["transcript"][1]["token_estimate"] = value;
        cases.push((name, doc));
    }
    let mut doc = simple_request();
    doc["budget"]["max_tokens"] = json!(60.0);
    cases.push(("float_max_tokens", doc));
    let mut doc = simple_request();
    doc["budget"]["protected_recent_turns"] = json!(1.0);
    cases.push(("float_protected_recent_turns", doc));
    cases
}

/// A float estimate fails with status 2, prints nothing on standard output, and reports one
/// well-formed JSON error without turn content; the code is checked by the test below.
#[test]
fn a_float_estimate_fails_with_status_2_and_no_output() {
    for (name, doc) in non_integer_figures() {
        let text = doc.to_string();
        for sub in ["plan", "compact"] {
            let out = run(&[sub, "-", "--error-format", "json"], Some(text.as_bytes()));
            assert_eq!(out.stdout, b"", "{name}: `{sub}` prints nothing");
            assert_eq!(out.status, Some(2), "{name}: `{sub}` exit status");
            assert!(!out.stderr.contains(SECRET), "{name}: {}", out.stderr);
            let last = out.stderr.lines().last().expect("an error line");
            let err: Value = serde_json::from_str(last).expect("one JSON error line");
            let keys: Vec<&str> = err
                .as_object()
                .expect("an object")
                .keys()
                .map(String::as_str)
                .collect();
            assert_eq!(keys, ["code", "details", "message"], "{name}");
        }
    }
}

/// CLI.md: "Integers are JSON integers (`1.0` is not a token estimate)", and a malformed request
/// is a `VALIDATION_ERROR`; `INPUT_ERROR` is for text that is not JSON.
#[test]
fn a_non_integer_figure_is_a_validation_error() {
    for (name, doc) in non_integer_figures() {
        let errs = invalid(&format!("a_non_integer_figure_{name}"), &doc);
        assert_eq!(errs.len(), 3, "{name}");
    }
}

#[test]
fn other_bad_turns_are_refused() {
    let cases = [
        ("role", json!("robot")),
        ("turn_id", json!("")),
        ("metadata", json!({"k": 5})),
        ("pinned", json!("yes")),
        ("tool_call_id", json!(7)),
    ];
    for (key, value) in cases {
        let mut doc = simple_request();
        doc["transcript"][1][key] = value;
        invalid(&format!("other_bad_turns_are_refused_{key}"), &doc);
    }
    let mut doc = simple_request();
    doc["budget"]["max_tokens"] = json!(-1);
    invalid("other_bad_turns_are_refused_budget", &doc);
}

#[test]
fn repeated_ids_are_named_sorted_and_capped_at_ten() {
    // d11..d00, each twice: twelve repeated ids, the first repeated being d11.
    let turns: Vec<Value> = (0..12)
        .rev()
        .flat_map(|i| {
            let id = format!("d{i:02}");
            [turn(&id, "user", SECRET, 1), turn(&id, "user", SECRET, 1)]
        })
        .collect();
    let doc = request(turns, 5, 0, json!({"name": "drop_oldest"}));
    for err in invalid("repeated_ids_are_named_sorted_and_capped_at_ten", &doc) {
        assert_eq!(
            err["details"],
            json!({"duplicate_turn_ids": ["d00", "d01", "d02", "d03", "d04", "d05", "d06", "d07", "d08", "d09"]}),
            "{err}"
        );
        assert!(message(&err).contains("12"), "{err}");
    }
}

/// CLI.md: the request, its turns and its budget are JSON objects. serde's derived
/// `Deserialize` also accepts a struct as a positional array.
#[test]
fn arrays_in_place_of_objects_are_refused() {
    let positional_budget = with(simple_request(), "budget", json!([60, 1]));
    invalid("arrays_in_place_of_objects_budget", &positional_budget);

    let mut positional_turn = simple_request();
    positional_turn["transcript"][1] = json!(["u1", "user", SECRET, 30]);
    invalid("arrays_in_place_of_objects_turn", &positional_turn);

    let doc = simple_request();
    let positional_request = json!([doc["transcript"], doc["budget"], doc["policy"]]);
    invalid("arrays_in_place_of_objects_request", &positional_request);
}

#[test]
fn an_unknown_policy_is_refused() {
    let doc = with(simple_request(), "policy", json!({"name": "drop_newest"}));
    for err in invalid("an_unknown_policy_is_refused", &doc) {
        assert_eq!(details(&err)["policy"], "drop_newest", "{err}");
    }
}

#[test]
fn a_chain_without_policies_is_refused() {
    let doc = with(
        simple_request(),
        "policy",
        json!({"name": "chain", "policies": []}),
    );
    invalid("a_chain_without_policies_is_refused", &doc);
}

#[test]
fn a_default_chain_without_prompt_id_is_refused() {
    let doc = with(simple_request(), "policy", json!({"name": "default_chain"}));
    for err in invalid("a_default_chain_without_prompt_id_is_refused", &doc) {
        assert!(message(&err).contains("prompt_id"), "{err}");
    }
}

// ---- COMPACTION_BUDGET_UNSATISFIABLE ----------------------------------------------------------

#[test]
fn an_unsatisfiable_budget_exits_3() {
    let dir = scratch("an_unsatisfiable_budget_exits_3");
    // s1 and the last four turns are untouchable: all 125 tokens, over 100.
    let doc = request(simple_chat(), 100, 4, json!({"name": "drop_oldest"}));
    let req = write_json(&dir, "request.json", &doc);
    // No plan exists for it; apply gets a forged all-KEEP one and still reports the budget.
    let keep_all: Vec<Value> = ["s1", "u1", "a1", "u2", "a2"]
        .into_iter()
        .map(|id| json!({"action": "keep", "replacement": null, "summary_group": null, "turn_id": id}))
        .collect();
    let forged = json!({
        "actions": keep_all,
        "budget_unmet": true,
        "estimator_ratio": null,
        "policy_name": "drop_oldest",
        "policy_version": "1.0.0",
        "summarization_requests": [],
        "tokens_after_estimate": 125,
        "tokens_before": 125,
    });
    let plan = write_json(&dir, "plan.json", &forged);
    let runs: [Vec<OsString>; 3] = [
        vec!["plan".into(), req.clone().into()],
        vec!["compact".into(), req.clone().into()],
        vec!["apply".into(), req.into(), "--plan".into(), plan.into()],
    ];
    for args in runs {
        let err = assert_fails(&args, None, "COMPACTION_BUDGET_UNSATISFIABLE", 3);
        assert_eq!(
            err["details"],
            json!({
                "max_tokens": 100,
                "protected_recent_turns": 4,
                "untouchable_tokens": 125,
                "untouchable_turn_count": 5,
            }),
            "{err}"
        );
    }
}

// ---- COMPACTION_SUMMARY_MISSING ---------------------------------------------------------------

#[test]
fn a_missing_summary_exits_4() {
    let dir = scratch("a_missing_summary_exits_4");
    let mut doc = mask_and_summary_request();
    let req = write_json(&dir, "request.json", &doc);
    // Planning needs no summary.
    let planned = run(&[OsString::from("plan"), req.clone().into()], None);
    let plan = crate::support::assert_success(&planned);
    let gid = plan["summarization_requests"][0]["group_id"].clone();
    let expected = json!({
        "group_id": gid,
        "prompt_id": "p.v1",
        "target_tokens": 16,
        "turn_ids": ["u1", "a1", "t1", "a2", "u2"],
    });
    let plan_file = write(&dir, "plan.json", &planned.stdout);

    let err = assert_fails(
        &[OsString::from("compact"), req.clone().into()],
        None,
        "COMPACTION_SUMMARY_MISSING",
        4,
    );
    assert_eq!(err["details"], expected, "{err}");
    let apply: Vec<OsString> = vec![
        "apply".into(),
        req.into(),
        "--plan".into(),
        plan_file.clone().into(),
    ];
    let err = assert_fails(&apply, None, "COMPACTION_SUMMARY_MISSING", 4);
    assert_eq!(err["details"], expected, "{err}");

    // A summary for another group does not stand in for it.
    doc["summaries"] = json!({"span-0000000000000000": SECRET});
    let req = write_json(&dir, "other-group.json", &doc);
    let err = assert_fails(
        &[OsString::from("compact"), req.into()],
        None,
        "COMPACTION_SUMMARY_MISSING",
        4,
    );
    assert_eq!(err["details"], expected, "{err}");
}

// ---- COMPACTION_PLAN_MISMATCH and stored plans --------------------------------------------------

/// Runs `apply` on [`simple_request`] with `plan` as the stored plan.
fn apply_simple(test: &str, plan: &Value, code: &str, exit: i32) -> Value {
    let dir = scratch(test);
    let req = write_json(&dir, "request.json", &simple_request());
    let plan = write_json(&dir, "plan.json", plan);
    let args: Vec<OsString> = vec!["apply".into(), req.into(), "--plan".into(), plan.into()];
    assert_fails(&args, None, code, exit)
}

fn simple_plan() -> Value {
    let text = cutctx_ops::plan(&simple_request().to_string()).expect("simple_request plans");
    serde_json::from_str(&text).expect("a plan is JSON")
}

#[test]
fn a_plan_for_another_transcript_exits_5() {
    let other = cutctx_ops::plan(&mask_and_summary_request().to_string()).expect("plans");
    let other: Value = serde_json::from_str(&other).expect("JSON");
    let err = apply_simple(
        "a_plan_for_another_transcript_exits_5",
        &other,
        "COMPACTION_PLAN_MISMATCH",
        5,
    );
    assert_eq!(
        err["details"],
        json!({
            "reordered": false,
            "unknown_turn_ids": ["a3", "a4", "t1", "t2", "u3"],
            "unplanned_turn_ids": [],
        }),
        "{err}"
    );

    // The request has a turn the plan does not name.
    let dir = scratch("a_plan_for_another_transcript_exits_5_unplanned");
    let mut turns = simple_chat();
    turns.push(turn("u3", "user", SECRET, 5));
    let req = write_json(
        &dir,
        "request.json",
        &request(turns, 60, 1, json!({"name": "drop_oldest"})),
    );
    let plan = write_json(&dir, "plan.json", &simple_plan());
    let args: Vec<OsString> = vec!["apply".into(), req.into(), "--plan".into(), plan.into()];
    let err = assert_fails(&args, None, "COMPACTION_PLAN_MISMATCH", 5);
    assert_eq!(
        err["details"],
        json!({"reordered": false, "unknown_turn_ids": [], "unplanned_turn_ids": ["u3"]}),
        "{err}"
    );
}

#[test]
fn a_reordered_plan_exits_5() {
    let mut plan = simple_plan();
    let actions = plan["actions"].as_array_mut().expect("actions");
    actions.swap(1, 2);
    let err = apply_simple(
        "a_reordered_plan_exits_5",
        &plan,
        "COMPACTION_PLAN_MISMATCH",
        5,
    );
    assert_eq!(
        err["details"],
        json!({"reordered": true, "unknown_turn_ids": [], "unplanned_turn_ids": []}),
        "{err}"
    );
}

#[test]
fn a_plan_naming_a_turn_twice_exits_5() {
    let mut plan = simple_plan();
    let actions = plan["actions"].as_array_mut().expect("actions");
    let repeated = actions[1].clone();
    actions.insert(1, repeated);
    let err = apply_simple(
        "a_plan_naming_a_turn_twice_exits_5",
        &plan,
        "COMPACTION_PLAN_MISMATCH",
        5,
    );
    assert!(message(&err).contains("6 turns"), "{err}");
}

#[test]
fn a_forged_estimate_is_a_validation_error() {
    let mut plan = simple_plan();
    assert_eq!(plan["tokens_after_estimate"], 52);
    plan["tokens_after_estimate"] = json!(40);
    let err = apply_simple(
        "a_forged_estimate_is_a_validation_error",
        &plan,
        "VALIDATION_ERROR",
        2,
    );
    assert_eq!(details(&err)["declared"], 40, "{err}");
    assert_eq!(details(&err)["derived"], 52, "{err}");
}

#[test]
fn a_plan_that_touches_an_untouchable_turn_is_a_validation_error() {
    // Masks the system turn, with arithmetic that adds up; the stub carries the secret.
    let mut plan = simple_plan();
    plan["actions"][0] = json!({
        "action": "mask",
        "replacement": {"content": SECRET, "token_estimate": 1},
        "summary_group": null,
        "turn_id": "s1",
    });
    plan["tokens_after_estimate"] = json!(41);
    let err = apply_simple(
        "a_plan_that_touches_an_untouchable_turn_is_a_validation_error",
        &plan,
        "VALIDATION_ERROR",
        2,
    );
    assert_eq!(details(&err)["touched_turn_ids"], json!(["s1"]), "{err}");
}

#[test]
fn a_plan_of_the_wrong_shape_is_a_validation_error() {
    apply_simple(
        "a_plan_of_the_wrong_shape_is_a_validation_error",
        &json!({"actions": 5}),
        "VALIDATION_ERROR",
        2,
    );
}

// ---- the command line itself --------------------------------------------------------------

#[test]
fn an_unknown_subcommand_prints_nothing_and_exits_2() {
    let text = run(&["frobnicate"], None);
    assert_eq!(text.stdout, b"");
    assert_eq!(text.status, Some(2));
    let json = run(&["frobnicate", "--error-format", "json"], None);
    assert_failure(&json, Format::Json, "USAGE_ERROR", 2);
}

// ---- errors that say what to do ---------------------------------------------------------------

/// The repository's examples folder.
fn example(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

#[test]
fn a_request_document_given_as_a_provider_request_is_named_and_the_fix_said() {
    let doc = example("request.json").into_os_string();
    let args: Vec<OsString> = ["compact", "--format", "openai-chat", "--max-tokens", "100"]
        .into_iter()
        .map(OsString::from)
        .chain([
            OsString::from("--error-format"),
            OsString::from("json"),
            doc,
        ])
        .collect();
    let err = assert_failure(&run(&args, None), Format::Json, "FORMAT_ERROR", 2);
    let message = err["message"].as_str().expect("a message");
    assert!(message.contains("cutctx request document"), "{message}");
    assert!(message.contains("without --format"), "{message}");
    assert_eq!(err["details"]["found"], "transcript");
}

#[test]
fn a_negative_token_count_is_told_what_a_count_of_tokens_is() {
    let request = example("openai-chat.json").into_os_string();
    for flag in ["--max-tokens", "--reserve-output"] {
        let mut args: Vec<OsString> = [
            "compact",
            "--format",
            "openai-chat",
            "--error-format",
            "json",
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        if flag != "--max-tokens" {
            args.extend(["--max-tokens", "100"].map(OsString::from));
        }
        args.extend([OsString::from(flag), OsString::from("-5"), request.clone()]);
        let err = assert_failure(&run(&args, None), Format::Json, "USAGE_ERROR", 2);
        let message = err["message"].as_str().expect("a message");
        assert!(
            message.contains("whole number of tokens"),
            "{flag}: {message}"
        );
        assert!(
            err["details"]["argument"]
                .as_str()
                .is_some_and(|a| a.starts_with(flag)),
            "{flag}: {err}"
        );
    }
}

#[test]
fn the_help_says_what_cutctx_does_and_shows_examples() {
    let help = run(&["--help"], None);
    assert_eq!(help.status, Some(0));
    let text = String::from_utf8(help.stdout).expect("UTF-8");
    assert!(
        text.starts_with("Fit an LLM transcript into a token budget"),
        "{text}"
    );
    assert!(text.contains("Examples"), "{text}");
    assert!(text.contains("Exit codes"), "{text}");
}
