//! `formats::compact` in-process: outputs, summaries (given, missing, from a command), the
//! report, and failures.

use cutctx::formats::{Format, validate};
use serde_json::json;

use crate::formats;
use crate::{SECRET, args, example, json, no_content, scratch, summarizer};

const FORMATS: [(Format, &str); 3] = [
    (Format::OpenAiChat, "openai-chat"),
    (Format::OpenAiResponses, "openai-responses"),
    (Format::Anthropic, "anthropic"),
];

#[test]
fn a_budget_that_fits_gives_the_file_back_byte_for_byte() {
    for (name, file) in FORMATS {
        let text = example(file);
        let out = formats::compact(&args(name, 1_000_000), &text, None).expect("compacts");
        assert_eq!(out.output, text, "{file}");
        let report = json(&out.report);
        assert_eq!(report["report"]["masked_turn_ids"], json!([]));
        assert_eq!(report["plan"]["budget_unmet"], false);
    }
}

#[test]
fn masking_and_dropping_give_valid_smaller_requests_in_the_same_format() {
    for (format, file) in FORMATS {
        let name = format;
        let text = example(file);
        for policy in ["observation_masking", "drop_oldest"] {
            let mut a = args(name, 900);
            a.policy = Some(policy.into());
            a.protected_recent = Some(2);
            let out = formats::compact(&a, &text, None).expect("compacts");
            let doc = json(&out.output);
            validate(format, &doc).unwrap_or_else(|v| panic!("{file} / {policy}: {v}"));
            assert!(out.output.len() < text.len(), "{file} / {policy}");
            // The request's other fields are untouched.
            assert_eq!(doc["model"], json(&text)["model"]);
            assert_eq!(doc["tools"], json(&text)["tools"]);
            let report = json(&out.report);
            if policy == "drop_oldest" {
                assert!(report["plan"]["tokens_after_estimate"].as_u64() <= Some(900));
            } else {
                assert!(
                    report["report"]["masked_turn_ids"]
                        .as_array()
                        .is_some_and(|m| !m.is_empty())
                );
            }
        }
    }
}

#[test]
fn with_no_summarizer_the_default_policy_never_needs_a_summary() {
    for (name, file) in FORMATS {
        let mut a = args(name, 810);
        a.protected_recent = Some(2);
        let out = formats::compact(&a, &example(file), None).expect("compacts without summaries");
        assert!(
            !out.output.contains("Summary of"),
            "{file}: masked and dropped"
        );
        // The same plan, named: it summarizes, so it needs summaries.
        a.policy = Some("default_chain".to_owned());
        assert!(
            formats::compact(&a, &example(file), None).is_err(),
            "{file}"
        );
        // A caller that brings summaries gets the chain that asks for them.
        a.policy = None;
        a.summarizes = true;
        assert!(
            formats::compact(&a, &example(file), None).is_err(),
            "{file}"
        );
    }
}

#[test]
fn a_plan_needing_summaries_without_them_lists_the_requests() {
    for (name, file) in FORMATS {
        let mut a = args(name, 810);
        a.protected_recent = Some(2);
        // A summarizing policy, named: with no summarizer the default never summarizes.
        a.policy = Some("default_chain".to_owned());
        let e = formats::compact(&a, &example(file), None).expect_err("summaries are missing");
        assert_eq!(e.code, "COMPACTION_SUMMARY_MISSING");
        assert_eq!(e.exit_status(), 4);
        let requests = e.details["requests"].as_array().expect("requests");
        assert!(!requests.is_empty());
        let group = requests[0]["group_id"].as_str().expect("a group id");
        assert!(e.message.contains(group), "{}", e.message);
        assert!(e.message.contains("--summarize-with"), "{}", e.message);
        assert_eq!(requests[0]["prompt_id"], formats::DEFAULT_PROMPT_ID);
        assert!(
            requests[0]["turn_ids"][0]
                .as_str()
                .is_some_and(|t| t.starts_with('m'))
        );
    }
}

#[test]
fn summaries_from_a_file_land_where_the_folded_turns_were() {
    let text = example("anthropic");
    let mut a = args(Format::Anthropic, 790);
    a.protected_recent = Some(2);
    // A summarizing policy, named: with no summarizer the default never summarizes.
    a.policy = Some("default_chain".to_owned());
    let e = formats::compact(&a, &text, None).expect_err("summaries are missing");
    let group = e.details["group_id"].as_str().expect("a group").to_owned();
    let summaries = json!({ &group: "The build broke on a cache key mismatch." }).to_string();
    let out = formats::compact(&a, &text, Some(&summaries)).expect("compacts");
    let doc = json(&out.output);
    validate(Format::Anthropic, &doc).expect("valid");
    assert_eq!(doc["messages"][0]["role"], "user");
    assert!(
        out.output
            .contains("The build broke on a cache key mismatch.")
    );
    let report = json(&out.report);
    assert_eq!(
        report["report"]["summary_turn_ids"],
        json!([format!("summary:{group}")])
    );
    // A summaries file that is not an object of strings is refused.
    let e = formats::compact(&a, &text, Some("{\"g\": 1}")).expect_err("not a string");
    assert_eq!(e.code, "VALIDATION_ERROR");
    let e = formats::compact(&a, &text, Some("{")).expect_err("not JSON");
    assert_eq!(e.code, "INPUT_ERROR");
}

#[cfg(unix)]
#[test]
fn summarize_with_runs_the_command_once_per_request_end_to_end() {
    for (format, file) in FORMATS {
        let name = format;
        let dir = scratch(&format!("summarize-with-{file}"));
        let script = summarizer(&dir);
        let mut a = args(name, 810);
        a.protected_recent = Some(2);
        a.summarize_with = Some(format!("sh {}", script.display()));
        let out = formats::compact(&a, &example(file), None).expect("compacts");
        let doc = json(&out.output);
        validate(format, &doc).unwrap_or_else(|v| panic!("{file}: {v}"));
        let report = json(&out.report);
        let groups = report["plan"]["summarization_requests"]
            .as_array()
            .expect("requests");
        assert!(!groups.is_empty());
        for (n, g) in groups.iter().enumerate() {
            let group = g["group_id"].as_str().expect("a group");
            assert!(
                out.output
                    .contains(&format!("Summary of {group}: the build broke")),
                "{file}: the summary is in the output"
            );
            // What the command read: the request, with the turns to fold and their messages.
            let seen = std::fs::read_to_string(dir.join(format!("request-{n}.json")))
                .expect("the script saved its input");
            let seen = json(&seen);
            assert_eq!(seen["group_id"], g["group_id"]);
            assert_eq!(seen["prompt_id"], g["prompt_id"]);
            assert_eq!(seen["target_tokens"], g["target_tokens"]);
            assert_eq!(seen["format"], file);
            let turns = seen["turns"].as_array().expect("turns");
            assert_eq!(turns.len(), g["turn_ids"].as_array().map_or(0, Vec::len));
            assert!(
                turns
                    .iter()
                    .all(|t| t["content"].is_string() && t["role"].is_string())
            );
            assert!(!seen["messages"].as_array().expect("messages").is_empty());
        }
    }
}

#[cfg(unix)]
#[test]
fn a_failing_summarizer_fails_the_compaction() {
    let mut a = args(Format::OpenAiChat, 795);
    a.protected_recent = Some(2);
    for (command, status) in [("exit 3", Some(3)), ("cat >/dev/null; printf ''", None)] {
        a.summarize_with = Some(command.into());
        let e = formats::compact(&a, &example("openai-chat"), None).expect_err("fails");
        assert_eq!(e.code, formats::SUMMARIZER_ERROR);
        assert!(e.details["group_id"].is_string());
        if let Some(s) = status {
            assert_eq!(e.details["status"], s);
        }
    }
    a.summarize_with = Some("/nonexistent/summarizer".into());
    let e = formats::compact(&a, &example("openai-chat"), None).expect_err("fails");
    assert_eq!(e.code, formats::SUMMARIZER_ERROR);
}

#[test]
fn policies_by_name_or_object_and_estimators() {
    let text = example("openai-responses");
    for policy in [
        "drop_oldest",
        "observation_masking",
        "{\"name\":\"observation_masking\",\"keep_recent_results\":0}",
        "{\"name\":\"chain\",\"policies\":[{\"name\":\"observation_masking\"},{\"name\":\"drop_oldest\"}]}",
    ] {
        let mut a = args(Format::OpenAiResponses, 1500);
        a.policy = Some(policy.into());
        a.estimator = Some("chars:3".into());
        let out = formats::compact(&a, &text, None).unwrap_or_else(|e| panic!("{policy}: {e:?}"));
        validate(Format::OpenAiResponses, &json(&out.output)).expect("valid");
    }
    let mut a = args(Format::OpenAiResponses, 1500);
    a.policy = Some("newest_first".into());
    assert_eq!(
        formats::compact(&a, &text, None).expect_err("unknown").code,
        "VALIDATION_ERROR"
    );
    a.policy = Some("{\"name\":\"drop_oldest\",\"x\":1}".into());
    assert_eq!(
        formats::compact(&a, &text, None)
            .expect_err("unknown key")
            .code,
        "VALIDATION_ERROR"
    );
    let mut a = args(Format::OpenAiResponses, 1500);
    a.estimator = Some("chars:-1".into());
    assert_eq!(
        formats::compact(&a, &text, None)
            .expect_err("bad ratio")
            .code,
        "VALIDATION_ERROR"
    );
    a.estimator = Some("o200k_base".into());
    match formats::compact(&a, &text, None) {
        Ok(out) => validate(Format::OpenAiResponses, &json(&out.output)).expect("valid"),
        Err(e) => assert_eq!(e.code, "FORMAT_UNSUPPORTED", "without the bpe feature"),
    }
}

#[test]
fn bad_inputs_fail_with_codes_and_without_content() {
    let a = args(Format::Anthropic, 100);
    let e = formats::compact(&a, "{\"messages\": [", None).expect_err("not JSON");
    assert_eq!((e.code, e.exit_status()), ("INPUT_ERROR", 2));
    let orphan = json!({"messages": [
        {"role": "user", "content": SECRET},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": SECRET}]}
    ]})
    .to_string();
    let e = formats::compact(&a, &orphan, None).expect_err("an orphaned result");
    assert_eq!(e.code, "FORMAT_INVALID_REQUEST");
    assert_eq!(e.details["rule"], "result_without_call");
    assert_eq!(e.details["index"], 1);
    no_content(&e);
    let e = formats::compact(&a, "[1]", None).expect_err("not a message");
    assert_eq!(e.code, "FORMAT_ERROR");
    let e = formats::compact(&args(Format::Anthropic, 0), &example("anthropic"), None)
        .expect_err("the system prompt alone is over 0");
    assert_eq!(e.code, "COMPACTION_BUDGET_UNSATISFIABLE");
    let mut a = args(Format::Anthropic, 100);
    a.max_tokens = None;
    assert_eq!(
        formats::compact(&a, "[]", None)
            .expect_err("no budget")
            .code,
        "USAGE_ERROR"
    );
}

#[test]
fn compact_inputs_give_compact_outputs_and_pretty_ones_pretty() {
    let doc = json(&example("openai-chat"));
    let compact_text = doc.to_string();
    let mut a = args(Format::OpenAiChat, 900);
    a.policy = Some("drop_oldest".into());
    let out = formats::compact(&a, &compact_text, None).expect("compacts");
    assert_eq!(out.output.matches('\n').count(), 1);
    let out = formats::compact(&a, &example("openai-chat"), None).expect("compacts");
    assert!(out.output.matches('\n').count() > 10);
}

/// An Anthropic request whose one tool has a 40,000-character description.
fn big_tool_request() -> String {
    json!({
        "model": "claude",
        "max_tokens": 256,
        "system": "Be brief.",
        "tools": [{"name": "lookup", "description": "d".repeat(40_000), "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "first question ".repeat(200)},
            {"role": "assistant", "content": "first answer ".repeat(200)},
            {"role": "user", "content": "second question"},
        ]
    })
    .to_string()
}

#[test]
fn tools_count_against_the_budget_and_too_small_a_budget_is_unsatisfiable() {
    let text = big_tool_request();
    let e = formats::compact(&args(Format::Anthropic, 500), &text, None)
        .expect_err("the tools alone exceed 500");
    assert_eq!(e.code, "COMPACTION_BUDGET_UNSATISFIABLE");
    assert_eq!(e.exit_status(), 3);
    assert_eq!(e.details["max_tokens"], 500);
    assert_eq!(e.details["tools_tokens"], 10_018);
    // The request's own max_tokens is the default reserve.
    let mut a = args(Format::Anthropic, 11_000);
    a.reserve_output = None;
    a.protected_recent = Some(1);
    a.policy = Some("drop_oldest".into());
    let out = formats::compact(&a, &text, None).expect("compacts");
    let report = json(&out.report);
    assert_eq!(report["prompt"]["tools_tokens"], 10_018);
    assert_eq!(report["prompt"]["reserve_tokens"], 256);
    assert_eq!(report["prompt"]["turn_budget"], 11_000 - 10_018 - 256);
    assert_eq!(report["plan"]["budget_unmet"], false);
    assert!(report["prompt"]["tokens_after_estimate"].as_u64() <= Some(11_000));
    // The messages alone (about 1,400 tokens) fit 11,000: the tools make the first one go.
    assert_eq!(report["report"]["dropped_turn_ids"], json!(["m0"]));
    validate(Format::Anthropic, &json(&out.output)).expect("valid");
}

#[test]
fn estimate_prints_every_part_canonically() {
    let text = big_tool_request();
    let out = formats::estimate(Format::Anthropic, None, None, false, &text).expect("counts");
    let v = json(&out);
    assert_eq!(v["tools"], 10_018);
    assert_eq!(v["reserve"], 256);
    assert_eq!(v["system"], 3);
    let turns: Vec<&str> = v["turns"]
        .as_array()
        .expect("turns")
        .iter()
        .map(|t| t["turn_id"].as_str().expect("id"))
        .collect();
    assert_eq!(turns, ["system", "m0", "m1", "m2"]);
    let sum: u64 = v["turns"]
        .as_array()
        .expect("turns")
        .iter()
        .map(|t| t["tokens"].as_u64().expect("n"))
        .sum();
    assert_eq!(v["total"].as_u64(), Some(10_018 + 256 + sum));
    assert_eq!(
        out,
        format!("{}\n", cutctx::model::canonical::canonical_json_value(&v))
    );
    let zero = formats::estimate(Format::Anthropic, None, Some(0), false, &text).expect("counts");
    assert_eq!(json(&zero)["reserve"], 0);
}

/// A valid Chat request of one user message.
fn plain_text() -> String {
    json!([{"role": "user", "content": "x"}]).to_string()
}

#[test]
fn an_invalid_history_names_the_repair_flag_and_repair_reports_each_drop() {
    let text = json!({"messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "user", "content": "well?"}
    ]})
    .to_string();
    let e = formats::compact(&args(Format::OpenAiChat, 1_000), &text, None)
        .expect_err("an unanswered call");
    assert_eq!(e.code, "FORMAT_INVALID_REQUEST");
    assert!(e.message.contains("--repair"), "{}", e.message);
    assert_eq!(e.details["hint"], "--repair");
    assert_eq!(e.details["index"], 1);
    let mut a = args(Format::OpenAiChat, 1_000);
    a.repair = true;
    let out = formats::compact(&a, &text, None).expect("repaired");
    assert_eq!(
        json(&out.output)["messages"].as_array().map(Vec::len),
        Some(2)
    );
    assert_eq!(
        json(&out.report)["repairs"],
        json!([
            {"kind": "dropped_call", "position": 1, "id": "c1"},
            {"kind": "dropped_empty_message", "position": 1, "id": null}
        ])
    );
    assert_eq!(
        out.repairs,
        [
            "cutctx: repair: dropped_call at position 1 (id \"c1\")",
            "cutctx: repair: dropped_empty_message at position 1"
        ]
    );
    // The estimate counts the repaired request and names the same drops.
    let counted =
        json(&formats::estimate(Format::OpenAiChat, None, None, true, &text).expect("repaired"));
    assert_eq!(counted["repairs"], json(&out.report)["repairs"]);
    assert_eq!(counted["turns"].as_array().map(Vec::len), Some(2));
    let unrepaired =
        formats::estimate(Format::OpenAiChat, None, None, false, &plain_text()).expect("valid");
    assert!(json(&unrepaired).get("repairs").is_none());
    // Requests without tools, reserve or repair keep their report's keys.
    let plain =
        formats::compact(&args(Format::OpenAiChat, 1_000), &plain_text(), None).expect("fits");
    let report = json(&plain.report);
    let keys: Vec<&String> = report.as_object().expect("object").keys().collect();
    assert_eq!(keys, ["plan", "report"]);
}

/// An output reserve near 2^64, given or the request's own, once made the sums behind the
/// turns' budget and the report wrap (a panic in a debug build, nonsense figures in a release
/// one); it is unsatisfiable, as any reserve beyond the budget is.
#[test]
fn an_output_reserve_near_two_to_the_64_is_unsatisfiable_not_a_wrap() {
    let text = json!({
        "model": "claude",
        "max_tokens": u64::MAX,
        "tools": [{"name": "t", "description": "d", "input_schema": {}}],
        "messages": [{"role": "user", "content": "hello there"}]
    })
    .to_string();
    let mut a = args(Format::Anthropic, u64::MAX);
    a.reserve_output = None;
    let e = formats::compact(&a, &text, None).expect_err("the tools and reserve overflow");
    assert_eq!(e.code, "COMPACTION_BUDGET_UNSATISFIABLE");
    assert_eq!(e.details["reserve_tokens"], u64::MAX);
    // No tools: the reserve leaves the turns 10 tokens, and the report's whole-prompt figures
    // would be the reserve plus the turns.
    let text = json!({"messages": [{"role": "user", "content": "x".repeat(4_000)}]}).to_string();
    let mut a = args(Format::OpenAiChat, u64::MAX);
    a.reserve_output = Some(u64::MAX - 10);
    let e = formats::compact(&a, &text, None).expect_err("the reserve and turns overflow");
    assert_eq!(e.code, "COMPACTION_BUDGET_UNSATISFIABLE");
    assert_eq!(e.details["messages_tokens"], 1_000);
    assert!(!e.message.contains("xxxx"));
}

/// A writer that accepts `room` bytes, then fails as a full disk does.
struct Full {
    room: usize,
}

impl std::io::Write for Full {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.room == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::StorageFull, "full"));
        }
        let n = buf.len().min(self.room);
        self.room -= n;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The command's own path writes, from the input's text, the bytes `compact` returns whole,
/// compacted or not, and a writer that fails fails the write.
#[test]
fn the_streamed_output_is_the_output_compact_returns() {
    for (name, file) in FORMATS {
        let text = example(file);
        for policy in ["observation_masking", "drop_oldest", "default_chain"] {
            for budget in [0, 300, 900, 1_000_000] {
                let mut a = args(name, budget);
                a.policy = Some(policy.into());
                a.protected_recent = Some(1);
                let whole = formats::compact(&a, &text, None);
                let streamed = formats::compact_owned(&a, text.clone(), None);
                let (whole, streamed) = match (whole, streamed) {
                    (Ok(w), Ok(s)) => (w, s),
                    (Err(w), Err(s)) => {
                        assert_eq!(w.code, s.code, "{file} / {policy} / {budget}");
                        continue;
                    }
                    (w, s) => panic!("{file} / {policy} / {budget}: {w:?} / {s:?}"),
                };
                let mut written = Vec::new();
                streamed.write_to(&mut written).expect("writes");
                assert_eq!(
                    String::from_utf8(written).expect("UTF-8"),
                    whole.output,
                    "{file} / {policy} / {budget}"
                );
                assert_eq!(streamed.repairs, whole.repairs);
                let half = whole.output.len() / 2;
                let e = streamed
                    .write_to(&mut Full { room: half })
                    .expect_err("the writer is full");
                assert_eq!(e.kind(), std::io::ErrorKind::StorageFull);
            }
        }
    }
}

/// A summarizer in Rust: each summary names its group; `blank` makes them all blank.
struct Naming {
    asked: Vec<String>,
    blank: bool,
}

impl cutctx_ops::summarizer::Summarizer for Naming {
    fn summarize(
        &mut self,
        group_id: &str,
        input: &serde_json::Value,
    ) -> Result<String, cutctx_ops::OpsError> {
        assert_eq!(input["group_id"], group_id);
        self.asked.push(group_id.to_owned());
        Ok(if self.blank {
            " \n".into()
        } else {
            format!("Summary of {group_id}")
        })
    }

    fn what(&self) -> &'static str {
        "the naming summarizer returned"
    }
}

#[test]
fn a_summarizer_of_the_callers_own_is_asked_once_per_request_and_its_summaries_applied() {
    for (format, file) in FORMATS {
        let text = example(file);
        let mut a = args(format, 810);
        a.protected_recent = Some(2);
        // A summarizing policy, named: with no summarizer the default never summarizes.
        a.policy = Some("default_chain".to_owned());
        let mut prepared = formats::prepare(&a, &text).expect("plans");
        let groups: Vec<String> = prepared
            .plan()
            .summarization_requests
            .iter()
            .map(|r| r.group_id().to_owned())
            .collect();
        assert!(!groups.is_empty(), "{file}: the plan summarizes");
        let mut naming = Naming {
            asked: Vec::new(),
            blank: false,
        };
        let summaries = prepared
            .summaries_from(&mut naming, &text)
            .expect("summarizes");
        assert_eq!(naming.asked, groups, "{file}: once per request, in order");
        let out = formats::finish(prepared, &text, &summaries, formats::Keep::default())
            .expect("applies");
        // The same summaries given as a file make the same bytes.
        let given = serde_json::to_string(&summaries).expect("a map");
        let same = formats::compact(&a, &text, Some(&given)).expect("compacts");
        assert_eq!(out.output.output, same.output, "{file}");
        for g in &groups {
            assert!(
                out.output.output.contains(&format!("Summary of {g}")),
                "{file}"
            );
        }
    }
}

#[test]
fn a_blank_summary_from_any_summarizer_is_a_summarizer_error_naming_the_group() {
    let text = example("openai-chat");
    let mut a = args(Format::OpenAiChat, 810);
    a.protected_recent = Some(2);
    // A summarizing policy, named: with no summarizer the default never summarizes.
    a.policy = Some("default_chain".to_owned());
    let mut prepared = formats::prepare(&a, &text).expect("plans");
    let first = prepared.plan().summarization_requests[0]
        .group_id()
        .to_owned();
    let mut naming = Naming {
        asked: Vec::new(),
        blank: true,
    };
    let e = prepared
        .summaries_from(&mut naming, &text)
        .expect_err("a blank summary");
    assert_eq!(e.code, formats::SUMMARIZER_ERROR);
    assert_eq!(e.details["group_id"], first.as_str());
    assert_eq!(
        e.message,
        format!("the naming summarizer returned no summary for group {first}.")
    );
    assert_eq!(naming.asked, [first], "the first error stops the rest");
}
