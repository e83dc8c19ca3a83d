//! Outputs that cannot be delivered: a closed pipe ends the command quietly with 141, a
//! `--report` that cannot be written leaves neither a temporary file nor anything on standard
//! output, and a standard output that fails after the report leaves the report whole.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::{Format, Run, assert_failure, details, run, scratch, simple_request, write};

/// An OpenAI Chat request that fits any budget here, so `compact --format` keeps it as it is.
fn chat() -> String {
    json!({
        "model": "gpt-4.1",
        "messages": [
            {"role": "system", "content": format!("{} rules", crate::support::SECRET)},
            {"role": "user", "content": format!("{} question", crate::support::SECRET)},
            {"role": "assistant", "content": "an answer"},
        ],
    })
    .to_string()
}

/// `compact --format openai-chat --report REPORT CHAT`, with `--error-format json`.
fn compact_with_report(chat: &Path, report: &Path) -> Vec<String> {
    [
        "--error-format",
        "json",
        "compact",
        "--format",
        "openai-chat",
        "--max-tokens",
        "100000",
        "--report",
        &report.display().to_string(),
        &chat.display().to_string(),
    ]
    .map(str::to_owned)
    .to_vec()
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("the folder can be listed")
        .map(|e| {
            e.expect("an entry can be read")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn a_closed_pipe_ends_the_command_quietly_with_141() {
    let request = simple_request().to_string();
    for command in ["plan", "compact"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cutctx"))
            .args([command, "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the cutctx binary starts");
        // The reader goes before the request arrives, so the output meets a closed pipe
        // whatever the timing.
        drop(child.stdout.take());
        let mut stdin = child.stdin.take().expect("stdin is piped");
        stdin
            .write_all(request.as_bytes())
            .expect("the request is sent");
        drop(stdin);
        let out = child.wait_with_output().expect("the binary finishes");
        assert_eq!(out.status.code(), Some(141), "{command}: exit status");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "",
            "{command}: a closed pipe is not reported"
        );
    }
}

#[test]
fn a_report_that_cannot_replace_a_directory_leaves_no_temporary_file_and_no_output() {
    let dir = scratch("a_report_that_cannot_replace_a_directory");
    let chat = write(&dir, "chat.json", chat());
    let report = dir.join("report.json");
    std::fs::create_dir(&report).expect("a directory in the way");
    let run = run(&compact_with_report(&chat, &report), None);
    let err = assert_failure(&run, Format::Json, "OUTPUT_ERROR", 6);
    assert_eq!(details(&err)["target"], "report");
    assert_eq!(details(&err)["kind"], "IsADirectory");
    assert_eq!(details(&err)["path"], report.display().to_string());
    assert_eq!(
        listing(&dir),
        ["chat.json", "report.json"],
        "no temporary file"
    );
    assert!(
        listing(&report).is_empty(),
        "the directory is left as it was"
    );
}

#[test]
fn a_report_replaces_the_old_one_whole() {
    let dir = scratch("a_report_replaces_the_old_one_whole");
    let chat = write(&dir, "chat.json", chat());
    // Longer than the new report: any byte of it left behind would break the JSON.
    let report = write(&dir, "report.json", "x".repeat(100_000));
    let run = run(&compact_with_report(&chat, &report), None);
    assert_eq!(run.status, Some(0), "{}", run.stderr);
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("the report can be read"))
            .expect("the report is one JSON document");
    assert_eq!(doc["plan"]["budget_unmet"], false);
    assert_eq!(listing(&dir), ["chat.json", "report.json"]);
}

#[cfg(target_os = "linux")]
#[test]
fn standard_output_failing_after_the_report_leaves_the_report_whole() {
    let dir = scratch("standard_output_failing_after_the_report");
    let chat = write(&dir, "chat.json", chat());
    // The report a run that succeeds writes, to compare with.
    let good = dir.join("good-report.json");
    assert_eq!(
        run(&compact_with_report(&chat, &good), None).status,
        Some(0)
    );
    let report = dir.join("report.json");
    let out = Command::new(env!("CARGO_BIN_EXE_cutctx"))
        .args(compact_with_report(&chat, &report))
        .stdin(Stdio::null())
        .stdout(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .expect("/dev/full opens"),
        )
        .stderr(Stdio::piped())
        .output()
        .expect("the binary runs");
    let run = Run {
        status: out.status.code(),
        stdout: Vec::new(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    let err = assert_failure(&run, Format::Json, "OUTPUT_ERROR", 6);
    assert_eq!(details(&err)["target"], "stdout");
    assert_eq!(details(&err)["kind"], "StorageFull");
    assert_eq!(
        std::fs::read(&report).expect("the report was written"),
        std::fs::read(&good).expect("the good report can be read"),
        "the report is whole"
    );
    assert_eq!(
        listing(&dir),
        ["chat.json", "good-report.json", "report.json"]
    );
}
