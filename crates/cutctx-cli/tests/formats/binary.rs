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
