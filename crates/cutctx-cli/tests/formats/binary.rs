//! The real binary: `cutctx compact --format ...` end to end.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use cutctx::formats::{Format, validate};

use crate::{example, json, scratch};

/// Runs `cutctx ARGS` with `stdin`; returns (exit status, stdout, stderr).
fn run(args: &[&str], stdin: &[u8]) -> (Option<i32>, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cutctx"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the cutctx binary starts");
    if let Some(mut pipe) = child.stdin.take() {
        let _ = pipe.write_all(stdin);
    }
    let out = child.wait_with_output().expect("the binary finishes");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[cfg(unix)]
#[test]
fn compact_format_with_summarize_with_and_report_end_to_end() {
    let dir = scratch("binary-summarize-with");
    let script = crate::summarizer(&dir);
    let input = dir.join("anthropic.json");
    std::fs::write(&input, example("anthropic")).expect("written");
    let report = dir.join("report.json");
    let command = format!("sh {}", script.display());
    let (status, stdout, stderr) = run(
        &[
            "compact",
            "--format",
            "anthropic",
            "--max-tokens",
            "790",
            "--reserve-output",
            "0",
            "--protected-recent",
            "2",
            "--summarize-with",
            &command,
            "--report",
            &report.display().to_string(),
            &input.display().to_string(),
        ],
        b"",
    );
    assert_eq!(status, Some(0), "{stderr}");
    let doc = json(&stdout);
    validate(Format::Anthropic, &doc).expect("valid");
    assert!(stdout.contains("the build broke on a cache key mismatch"));
    let report = json(&std::fs::read_to_string(&report).expect("the report is written"));
    assert!(
        report["report"]["summary_turn_ids"]
            .as_array()
            .is_some_and(|s| !s.is_empty())
    );
}

#[test]
fn compact_format_reads_standard_input_and_fails_writing_nothing() {
    let text = example("openai-chat");
    let (status, stdout, _) = run(
        &[
            "compact",
            "--format",
            "openai-chat",
            "--max-tokens",
            "1000000",
            "-",
        ],
        text.as_bytes(),
    );
    assert_eq!(status, Some(0));
    assert_eq!(stdout, text, "a request that fits comes back byte for byte");

    let (status, stdout, stderr) = run(
        &[
            "--error-format",
            "json",
            "compact",
            "--format",
            "openai-chat",
            "--max-tokens",
            "795",
            "--reserve-output",
            "0",
            "--protected-recent",
            "2",
            "--policy",
            "default_chain",
            "-",
        ],
        text.as_bytes(),
    );
    assert_eq!(status, Some(4), "{stderr}");
    assert!(stdout.is_empty());
    let last = stderr.lines().last().expect("an error line");
    let err = json(last);
    assert_eq!(err["code"], "COMPACTION_SUMMARY_MISSING");
    assert!(err["details"]["requests"].is_array());

    let (status, stdout, _) = run(
        &[
            "compact",
            "--format",
            "anthropic",
            "--max-tokens",
            "10",
            "-",
        ],
        b"[{\"role\": \"assistant\", \"content\": \"x\"}]",
    );
    assert_eq!((status, stdout.as_str()), (Some(2), ""));
    // Options of --format need --format.
    let (status, _, _) = run(&["compact", "--max-tokens", "10", "-"], b"");
    assert_eq!(status, Some(2));
    assert!(Path::new(env!("CARGO_BIN_EXE_cutctx")).exists());
}

/// The request of the reasoning issue: six assistant messages, each a signed thinking block
/// and a `tool_use`, each answered by a 4,000-character result, then the answer and a
/// question; `extra` goes after the first user message.
fn signed_thinking_request(extra: &[serde_json::Value]) -> serde_json::Value {
    use serde_json::json;
    let mut messages = vec![json!({"role": "user", "content": "Audit the repository."})];
    messages.extend_from_slice(extra);
    for i in 0..6 {
        messages.push(json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": format!("Step {i}: read the next file."), "signature": format!("sig-{i}")},
            {"type": "tool_use", "id": format!("toolu_{i}"), "name": "read_file", "input": {}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{i}"), "content": "x".repeat(4000)}]}));
    }
    messages.push(json!({"role": "assistant", "content": "Found three issues."}));
    messages.push(json!({"role": "user", "content": "Summarize them."}));
    json!({"model": "claude-fable-5-1", "max_tokens": 1024,
        "thinking": {"type": "enabled", "budget_tokens": 1024}, "messages": messages})
}

#[test]
fn compact_strips_the_thinking_its_masks_invalidate_and_reports_it() {
    let dir = scratch("binary-reasoning");
    let request = signed_thinking_request(&[]);
    let input = dir.join("request.json");
    std::fs::write(&input, request.to_string()).expect("written");
    let report = dir.join("report.json");
    let args = |mode: &'static str| {
        vec![
            "compact".to_owned(),
            "--format".into(),
            "anthropic".into(),
            "--max-tokens".into(),
            "5000".into(),
            "--policy".into(),
            "observation_masking".into(),
            "--reasoning".into(),
            mode.into(),
            "--report".into(),
            report.display().to_string(),
            input.display().to_string(),
        ]
    };
    let owned = args("strip");
    let (status, stdout, stderr) = run(&owned.iter().map(String::as_str).collect::<Vec<_>>(), b"");
    assert_eq!(status, Some(0), "{stderr}");
    let out = json(&stdout);
    assert!(cutctx::formats::stale_reasoning(Format::Anthropic, &request, &out).is_empty());
    validate(Format::Anthropic, &out).expect("valid");
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.contains("thinking block(s)"))
            .count(),
        1,
        "{stderr}"
    );
    let section = &json(&std::fs::read_to_string(&report).expect("report"))["reasoning"];
    assert_eq!(section["mode"], "strip");
    assert_eq!(section["removed"], true);
    assert_eq!(section["first_changed"], 2);
    assert_eq!(section["invalidated"].as_array().map(Vec::len), Some(5));
    // Refuse: the stable code, nothing on standard output, no report written.
    std::fs::remove_file(&report).expect("removed");
    let owned = args("refuse");
    let (status, stdout, stderr) = run(&owned.iter().map(String::as_str).collect::<Vec<_>>(), b"");
    assert_eq!(status, Some(2), "{stderr}");
    assert!(stdout.is_empty());
    assert!(stderr.contains("FORMAT_REASONING_INVALIDATED"), "{stderr}");
    assert!(!report.exists());
}

#[test]
fn a_repair_before_signed_thinking_strips_it_though_the_request_fits() {
    use serde_json::json;
    // A call that never got its result, before the thinking: --repair drops it, which
    // changes the prefix every later thinking block was produced with.
    let unanswered = [
        json!({"role": "assistant", "content": [{"type": "tool_use", "id": "lost", "name": "f", "input": {}}]}),
        json!({"role": "user", "content": "Go on."}),
    ];
    let request = signed_thinking_request(&unanswered);
    let dir = scratch("binary-reasoning-repair");
    let input = dir.join("request.json");
    std::fs::write(&input, request.to_string()).expect("written");
    let path = input.display().to_string();
    let (status, stdout, stderr) = run(
        &[
            "compact",
            "--format",
            "anthropic",
            "--max-tokens",
            "1000000",
            "--repair",
            &path,
        ],
        b"",
    );
    assert_eq!(status, Some(0), "{stderr}");
    let out = json(&stdout);
    assert!(cutctx::formats::stale_reasoning(Format::Anthropic, &request, &out).is_empty());
    let thinking = stdout.matches("\"thinking\",").count();
    assert_eq!(
        thinking, 0,
        "every thinking block followed the dropped call: {stdout}"
    );
    assert!(stderr.contains("thinking block(s)"), "{stderr}");
}
