//! Success: each subcommand prints one line of canonical JSON, the library's exact bytes, and
//! exits 0; `-` reads the request from standard input.

use serde_json::{Value, json};

use crate::support::{
    Format, assert_failure, assert_success, request, run, scratch, simple_request, turn, with,
    write, write_json,
};

fn ids(values: &Value) -> Vec<&str> {
    values
        .as_array()
        .expect("an array")
        .iter()
        .map(|v| {
            v.as_str()
                .or_else(|| v["turn_id"].as_str())
                .expect("an id or an object with a turn_id")
        })
        .collect()
}

#[test]
fn plan_prints_the_plan_and_exits_0() {
    let dir = scratch("plan_prints_the_plan_and_exits_0");
    let doc = simple_request();
    let req = write_json(&dir, "request.json", &doc);
    let out = run(&[OsArg::from("plan"), req.as_os_str().into()], None);
    let plan = assert_success(&out);
    assert_eq!(
        out.stdout,
        cutctx_ops::plan(&doc.to_string())
            .expect("the library plans it")
            .into_bytes(),
        "the binary prints the library's bytes"
    );
    let keys: Vec<&str> = plan
        .as_object()
        .expect("a plan is an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "actions",
            "budget_unmet",
            "estimator_ratio",
            "policy_name",
            "policy_version",
            "summarization_requests",
            "tokens_after_estimate",
            "tokens_before"
        ]
    );
    let actions: Vec<(&str, &str)> = plan["actions"]
        .as_array()
        .expect("actions")
        .iter()
        .map(|a| {
            (
                a["turn_id"].as_str().expect("turn_id"),
                a["action"].as_str().expect("action"),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("s1", "keep"),
            ("u1", "drop"),
            ("a1", "drop"),
            ("u2", "drop"),
            ("a2", "keep")
        ]
    );
    assert_eq!(plan["tokens_before"], 125);
    assert_eq!(plan["tokens_after_estimate"], 52);
    assert_eq!(plan["budget_unmet"], false);
    assert_eq!(plan["estimator_ratio"], Value::Null);
    assert_eq!(plan["policy_name"], "drop_oldest");
    assert_eq!(plan["policy_version"], "1.0.0");
}

#[test]
fn compact_prints_plan_report_and_transcript_and_exits_0() {
    let dir = scratch("compact_prints_plan_report_and_transcript_and_exits_0");
    let mut doc = simple_request();
    // Non-ASCII is written raw; control characters are escaped in lower-case hex.
    doc["transcript"][4]["content"] = json!("Weil é中😀\u{1b}\u{7f}");
    let req = write_json(&dir, "request.json", &doc);
    let out = run(&[OsArg::from("compact"), req.as_os_str().into()], None);
    let value = assert_success(&out);
    assert_eq!(
        out.stdout,
        cutctx_ops::compact(&doc.to_string())
            .expect("the library compacts it")
            .into_bytes()
    );
    let stdout = String::from_utf8(out.stdout).expect("UTF-8");
    assert!(
        stdout.contains("\"Weil é中😀\\u001b\u{7f}\""),
        "raw UTF-8, lower-case escapes, DEL unescaped: {stdout}"
    );
    let keys: Vec<&str> = value
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["plan", "report", "transcript"]);
    assert_eq!(value["plan"]["tokens_after_estimate"], 52);
    assert_eq!(ids(&value["transcript"]), ["s1", "a2"]);
    assert_eq!(value["transcript"][1]["content"], "Weil é中😀\u{1b}\u{7f}");
    let report = &value["report"];
    assert_eq!(ids(&report["kept_turn_ids"]), ["s1", "a2"]);
    assert_eq!(ids(&report["dropped_turn_ids"]), ["u1", "a1", "u2"]);
    assert_eq!(report["turns_before"], 5);
    assert_eq!(report["turns_after"], 2);
    assert_eq!(report["tokens_before"], 125);
    assert_eq!(report["tokens_after_estimate"], 52);
    let plan_hash = cutctx::model::canonical::sha256_hex(
        cutctx::model::canonical::canonical_json_value(&value["plan"]).as_bytes(),
    );
    assert_eq!(report["plan_hash"], plan_hash.as_str());
}

#[test]
fn apply_prints_report_and_transcript_and_exits_0() {
    let dir = scratch("apply_prints_report_and_transcript_and_exits_0");
    let doc = simple_request();
    let text = doc.to_string();
    let req = write(&dir, "request.json", &text);
    let plan_text = cutctx_ops::plan(&text).expect("the library plans it");
    let plan = write(&dir, "plan.json", &plan_text);
    let out = run(
        &[
            OsArg::from("apply"),
            req.as_os_str().into(),
            "--plan".into(),
            plan.as_os_str().into(),
        ],
        None,
    );
    let value = assert_success(&out);
    assert_eq!(
        out.stdout,
        cutctx_ops::apply(&text, &plan_text)
            .expect("the library applies it")
            .into_bytes()
    );
    let keys: Vec<&str> = value
        .as_object()
        .expect("an object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["report", "transcript"]);
    let compacted: Value = serde_json::from_str(&cutctx_ops::compact(&text).expect("compacts"))
        .expect("compact output is JSON");
    assert_eq!(value["report"], compacted["report"]);
    assert_eq!(value["transcript"], compacted["transcript"]);
    assert_eq!(ids(&value["transcript"]), ["s1", "a2"]);
}

#[test]
fn a_dash_reads_the_request_from_standard_input() {
    let dir = scratch("a_dash_reads_the_request_from_standard_input");
    let text = simple_request().to_string();
    let req = write(&dir, "request.json", &text);
    let plan = write(
        &dir,
        "plan.json",
        cutctx_ops::plan(&text).expect("the library plans it"),
    );
    for sub in ["plan", "compact"] {
        let from_file = run(&[OsArg::from(sub), req.as_os_str().into()], None);
        let from_stdin = run(&[sub, "-"], Some(text.as_bytes()));
        assert_success(&from_stdin);
        assert_eq!(from_stdin.stdout, from_file.stdout, "`{sub} -`");
    }
    let args = |request: OsArg| {
        vec![
            OsArg::from("apply"),
            request,
            "--plan".into(),
            plan.as_os_str().into(),
        ]
    };
    let from_file = run(&args(req.as_os_str().into()), None);
    let from_stdin = run(&args("-".into()), Some(text.as_bytes()));
    assert_success(&from_stdin);
    assert_eq!(from_stdin.stdout, from_file.stdout, "`apply - --plan P`");
    // Standard input is read, not ignored: an empty one is an input error.
    let empty = run(&["plan", "-", "--error-format", "json"], Some(b""));
    assert_failure(&empty, Format::Json, "INPUT_ERROR", 2);
}

#[test]
fn a_plan_over_budget_is_not_a_failure() {
    // p1's call is pinned, so its result t1 cannot be dropped; dropping u1 is not enough.
    let turns = vec![
        with(
            with(
                turn("p1", "assistant", "call", 10),
                "tool_call_id",
                json!("c1"),
            ),
            "pinned",
            json!(true),
        ),
        with(
            turn("t1", "tool", "result", 100),
            "tool_call_id",
            json!("c1"),
        ),
        turn("u1", "user", "question", 10),
    ];
    let doc = request(turns, 50, 0, json!({"name": "drop_oldest"}));
    for sub in ["plan", "compact"] {
        let out = run(&[sub, "-"], Some(doc.to_string().as_bytes()));
        let value = assert_success(&out);
        let plan = if sub == "plan" {
            &value
        } else {
            &value["plan"]
        };
        assert_eq!(plan["budget_unmet"], true, "`{sub}`");
        assert_eq!(plan["tokens_before"], 120, "`{sub}`");
        assert_eq!(plan["tokens_after_estimate"], 110, "`{sub}`");
    }
}

#[test]
fn an_empty_transcript_plans_to_nothing() {
    let doc = request(vec![], 0, 4, json!({"name": "drop_oldest"}));
    let out = run(&["plan", "-"], Some(doc.to_string().as_bytes()));
    assert_success(&out);
    assert_eq!(
        String::from_utf8(out.stdout).expect("UTF-8"),
        "{\"actions\":[],\"budget_unmet\":false,\"estimator_ratio\":null,\
         \"policy_name\":\"drop_oldest\",\"policy_version\":\"1.0.0\",\
         \"summarization_requests\":[],\"tokens_after_estimate\":0,\"tokens_before\":0}\n"
    );
}

#[test]
fn the_error_format_may_come_before_the_subcommand() {
    let dir = scratch("the_error_format_may_come_before_the_subcommand");
    let missing = dir.join("missing.json");
    let out = run(
        &[
            OsArg::from("--error-format"),
            "json".into(),
            "plan".into(),
            missing.as_os_str().into(),
        ],
        None,
    );
    assert_failure(&out, Format::Json, "INPUT_ERROR", 2);
}

#[test]
fn protected_recent_turns_defaults_to_4() {
    // s1 12 · u1 30 · a1 25 c1 · u2 18 c1 · a2 40 · u3 10 · a3 10 = 145, budget 100.
    // Protecting 4 reaches u2, so the exchange {a1, u2} stays: only u1 goes, 115 (unmet).
    // Protecting 3 does not: u1 and the exchange go, 72.
    let call = |t: Value| with(t, "tool_call_id", json!("c1"));
    let turns = vec![
        turn("s1", "system", "rules", 12),
        turn("u1", "user", "q1", 30),
        call(turn("a1", "assistant", "calling", 25)),
        call(turn("u2", "user", "answer", 18)),
        turn("a2", "assistant", "a2", 40),
        turn("u3", "user", "u3", 10),
        turn("a3", "assistant", "a3", 10),
    ];
    let plan_with = |budget: Value| {
        let mut doc = request(turns.clone(), 0, 0, json!({"name": "drop_oldest"}));
        doc["budget"] = budget;
        run(&["plan", "-"], Some(doc.to_string().as_bytes()))
    };
    let implicit = plan_with(json!({"max_tokens": 100}));
    let plan = assert_success(&implicit);
    assert_eq!(plan["tokens_after_estimate"], 115);
    assert_eq!(plan["budget_unmet"], true);
    let four = plan_with(json!({"max_tokens": 100, "protected_recent_turns": 4}));
    assert_eq!(implicit.stdout, four.stdout);
    let three = plan_with(json!({"max_tokens": 100, "protected_recent_turns": 3}));
    assert_eq!(assert_success(&three)["tokens_after_estimate"], 72);
}

#[test]
fn apply_accepts_a_plan_file_in_any_json_layout() {
    let dir = scratch("apply_accepts_a_plan_file_in_any_json_layout");
    let text = simple_request().to_string();
    let req = write(&dir, "request.json", &text);
    let plan_text = cutctx_ops::plan(&text).expect("the library plans it");
    let plan: Value = serde_json::from_str(&plan_text).expect("JSON");
    let pretty = serde_json::to_string_pretty(&plan).expect("a plan pretty-prints") + "\r\n";
    let pretty = write(&dir, "pretty.json", pretty);
    let canonical = write(&dir, "canonical.json", &plan_text);
    let apply = |plan: &std::path::Path| {
        run(
            &[
                OsArg::from("apply"),
                req.as_os_str().into(),
                "--plan".into(),
                plan.as_os_str().into(),
            ],
            None,
        )
    };
    let from_pretty = apply(&pretty);
    assert_success(&from_pretty);
    assert_eq!(from_pretty.stdout, apply(&canonical).stdout);
}

/// An owned command-line argument.
type OsArg = std::ffi::OsString;
