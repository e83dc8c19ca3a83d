//! `cutctx batch`: order kept, failures isolated, the per-line output equal to `cutctx compact
//! --format`'s, compressed and standard input, receipts, and memory bounded on a file larger
//! than the memory the process is allowed.
//!
//! Every test runs the real binary on JSONL files it generates in a scratch folder.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use cutctx::formats::Format;
use cutctx_ops::formats::{self, FormatOptions};
use serde_json::{Value, json};

/// Content that must never appear in an error line.
const SECRET: &str = "SECRET-CONTENT-xyz";

/// A fresh scratch folder for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("batch")
        .join(test);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("an old scratch folder can be removed");
    }
    std::fs::create_dir_all(&dir).expect("a scratch folder can be created");
    dir
}

/// An OpenAI Chat request of `rounds` tool rounds, each result `result_chars` long; `seed`
/// makes requests differ.
fn request(seed: usize, rounds: usize, result_chars: usize) -> Value {
    let mut messages = vec![json!({"role": "system", "content": format!("Agent {seed}.")})];
    for r in 0..rounds {
        let id = format!("call_{seed}_{r}");
        messages.push(json!({"role": "user", "content": format!("Step {r} of task {seed}.")}));
        messages.push(
            json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": id, "type": "function",
            "function": {"name": "read", "arguments": format!("{{\"n\":{r}}}")}}]}),
        );
        let body: String = (0..result_chars)
            .map(|i| char::from(b'a' + u8::try_from((i + seed + r) % 26).unwrap_or(0)))
            .collect();
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": body}));
        messages.push(json!({"role": "assistant", "content": format!("Done {r}.")}));
    }
    json!({"model": "gpt-4o", "messages": messages})
}

/// `n` requests, one per line: sizes vary so that some fit the budget and most do not.
fn lines(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| request(i, 1 + i % 7, 200 + (i * 37) % 900).to_string())
        .collect()
}

fn args(policy: &str) -> FormatOptions {
    FormatOptions {
        format: Some(Format::OpenAiChat),
        max_tokens: Some(600),
        policy: Some(policy.to_owned()),
        ..FormatOptions::default()
    }
}

const FLAGS: [&str; 6] = [
    "--format",
    "openai-chat",
    "--max-tokens",
    "600",
    "--policy",
    "observation_masking",
];

/// Runs `cutctx ARGS` with `stdin`.
fn cutctx(args: &[&str], stdin: &[u8]) -> Output {
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
    child.wait_with_output().expect("the binary finishes")
}

fn batch(extra: &[&str], input: &str, stdin: &[u8]) -> Output {
    let mut all = vec!["batch"];
    all.extend(FLAGS);
    all.extend(extra);
    all.push(input);
    cutctx(&all, stdin)
}

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).expect("UTF-8")
}

fn write_jsonl(path: &Path, lines: &[String]) -> Vec<u8> {
    let bytes = lines.iter().map(|l| format!("{l}\n")).collect::<String>();
    std::fs::write(path, &bytes).expect("written");
    bytes.into_bytes()
}

#[test]
fn every_line_is_what_compact_format_prints_for_it_in_the_input_order() {
    let dir = scratch("order");
    let lines = lines(60);
    let input = dir.join("in.jsonl");
    write_jsonl(&input, &lines);
    let out = batch(&["--jobs", "3"], input.to_str().expect("a path"), b"");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let got: Vec<&str> = text(&out.stdout).split_inclusive('\n').collect();
    assert_eq!(got.len(), lines.len());
    let mut compacted = 0;
    for (i, line) in lines.iter().enumerate() {
        let want = formats::compact(&args("observation_masking"), line, None).expect("compacts");
        assert_eq!(got[i], want.output, "line {}", i + 1);
        compacted += usize::from(got[i] != format!("{line}\n"));
    }
    assert!(compacted > 10 && compacted < lines.len(), "{compacted}");
    // And through the single-request binary, for a few lines.
    for i in [0, 13, 59] {
        let one = dir.join(format!("one-{i}.json"));
        std::fs::write(&one, &lines[i]).expect("written");
        let mut all = vec!["compact"];
        all.extend(FLAGS);
        all.push(one.to_str().expect("a path"));
        let single = cutctx(&all, b"");
        assert_eq!(text(&single.stdout), got[i], "line {}", i + 1);
    }
    // The summary counts them.
    let summary = text(&out.stderr);
    assert!(
        summary.contains(&format!("60 lines: {compacted} compacted")),
        "{summary}"
    );
}

#[test]
fn a_failed_line_is_null_its_error_is_listed_and_the_others_go_on() {
    let dir = scratch("failures");
    // Across the readers' chunks of 32 lines: failures on both sides of the first boundary.
    let mut lines = lines(70);
    lines[2] = format!("{{\"messages\": [\"{SECRET}");
    lines[31] =
        json!({"messages": [{"role": "tool", "tool_call_id": "x", "content": SECRET}]}).to_string();
    // A budget no compaction can meet: one message larger than it, and protected.
    lines[32] = request(32, 1, 40_000).to_string();
    let mut bytes = write_jsonl(&dir.join("unused"), &lines);
    // Line 71 is not UTF-8.
    bytes.extend_from_slice(b"{\"messages\": \xff}\n");
    let input = dir.join("in.jsonl");
    std::fs::write(&input, &bytes).expect("written");
    let errors = dir.join("errors.jsonl");
    let out = batch(
        &["--errors", errors.to_str().expect("a path"), "--jobs", "2"],
        input.to_str().expect("a path"),
        b"",
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let got: Vec<&str> = text(&out.stdout).lines().collect();
    assert_eq!(got.len(), 71);
    for (i, line) in got.iter().enumerate() {
        let failed = [2, 31, 32, 70].contains(&i);
        assert_eq!(*line == "null", failed, "line {}", i + 1);
    }
    let listed = std::fs::read_to_string(&errors).expect("the errors file is written");
    assert!(!listed.contains(SECRET));
    let rows: Vec<Value> = listed
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    let codes: Vec<(u64, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["line"].as_u64().unwrap_or(0),
                r["code"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        codes,
        [
            (3, "INPUT_ERROR"),
            (32, "FORMAT_INVALID_REQUEST"),
            (33, "COMPACTION_BUDGET_UNSATISFIABLE"),
            (71, "INPUT_ERROR"),
        ]
    );
    assert!(
        text(&out.stderr).contains("4 failed"),
        "{}",
        text(&out.stderr)
    );
    // No temporary file is left beside the errors file.
    let names: Vec<_> = std::fs::read_dir(&dir)
        .expect("listed")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}

#[test]
fn gzip_zstd_and_standard_input_give_the_same_lines() {
    let dir = scratch("compressed");
    let lines = lines(20);
    let plain = dir.join("in.jsonl");
    let bytes = write_jsonl(&plain, &lines);
    let want = batch(&[], plain.to_str().expect("a path"), b"");
    assert_eq!(want.status.code(), Some(0));

    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&bytes).expect("compressed");
    let gz = gz.finish().expect("compressed");
    std::fs::write(dir.join("in.jsonl.gz"), &gz).expect("written");
    let zst =
        ruzstd::encoding::compress_to_vec(&bytes[..], ruzstd::encoding::CompressionLevel::Fastest);
    std::fs::write(dir.join("in.jsonl.zst"), &zst).expect("written");

    for (input, stdin) in [
        (dir.join("in.jsonl.gz"), &b""[..]),
        (dir.join("in.jsonl.zst"), &b""[..]),
        (PathBuf::from("-"), &bytes[..]),
        (PathBuf::from("-"), &gz[..]),
    ] {
        let out = batch(&[], input.to_str().expect("a path"), stdin);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert_eq!(out.stdout, want.stdout, "{}", input.display());
    }
}

#[test]
fn a_ledger_gets_one_verified_receipt_per_compacted_line() {
    let dir = scratch("ledger");
    let lines = lines(10);
    let input = dir.join("in.jsonl");
    write_jsonl(&input, &lines);
    let ledger = dir.join("ledger.jsonl");
    let out = batch(
        &["--ledger", ledger.to_str().expect("a path")],
        input.to_str().expect("a path"),
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let compacted = text(&out.stdout)
        .lines()
        .zip(&lines)
        .filter(|(got, line)| got != line)
        .count();
    assert!(compacted > 0);
    let rows = std::fs::read_to_string(&ledger).expect("the ledger exists");
    assert_eq!(rows.lines().count(), compacted);
    let verify = cutctx(&["ledger", "verify", ledger.to_str().expect("a path")], b"");
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify.stdout));
}

#[test]
fn a_line_whose_receipt_cannot_be_appended_is_null_and_the_others_are_written() {
    let dir = scratch("ledger-unwritable");
    let lines = lines(40);
    let input = dir.join("in.jsonl");
    write_jsonl(&input, &lines);
    // A folder is not a ledger that can be appended to.
    let out = batch(
        &["--ledger", dir.to_str().expect("a path"), "--jobs", "2"],
        input.to_str().expect("a path"),
        b"",
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let got: Vec<&str> = text(&out.stdout).split_inclusive('\n').collect();
    assert_eq!(got.len(), lines.len());
    let (mut unchanged, mut failed) = (0, 0);
    for (i, line) in lines.iter().enumerate() {
        let want = formats::compact(&args("observation_masking"), line, None).expect("compacts");
        if want.output == format!("{line}\n") {
            assert_eq!(got[i], want.output, "line {}", i + 1);
            unchanged += 1;
        } else {
            assert_eq!(got[i], "null\n", "line {}", i + 1);
            failed += 1;
        }
    }
    assert!(unchanged > 0 && failed > 0, "{unchanged} {failed}");
}

#[test]
fn lines_ending_in_crlf_and_empty_lines_are_read_as_lines() {
    let dir = scratch("crlf");
    let lines = lines(5);
    let input = dir.join("in.jsonl");
    // Only a line's own `\r\n` is taken off: the first line keeps its other `\r` (JSON
    // whitespace), and the empty line after it fails alone.
    let first = format!("{}\r", lines[0]);
    let bytes = format!("{first}\r\n\n{}\r\n{}", lines[1], lines[2]);
    std::fs::write(&input, bytes).expect("written");
    let out = batch(&[], input.to_str().expect("a path"), b"");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let got: Vec<&str> = text(&out.stdout).split_inclusive('\n').collect();
    let want = |line: &str| {
        formats::compact(&args("observation_masking"), line, None)
            .expect("compacts")
            .output
    };
    // The first line fits: it comes back as it was, `\r` and all.
    assert_eq!(got[0], format!("{first}\n"));
    assert_eq!(
        got,
        [
            want(&first),
            "null\n".to_owned(),
            want(&lines[1]),
            want(&lines[2])
        ]
    );
}

#[test]
fn without_a_format_or_with_a_report_it_is_a_usage_error() {
    let out = cutctx(
        &["--error-format", "json", "batch", "--max-tokens", "10", "-"],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("USAGE_ERROR"));
    let out = batch(&["--report", "r.json"], "-", b"");
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("USAGE_ERROR"));
    let out = cutctx(
        &[
            "batch",
            "--format",
            "anthropic",
            "--max-tokens",
            "9",
            "/nonexistent/x.jsonl",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("INPUT_ERROR"));
}

/// Memory: under an address-space-free limit on its heap (`prlimit --data`), `batch` reads a
/// gzip file whose lines add up to several times that limit, while `compact --format`, which
/// holds its whole request, fails under the same limit on a request of that size: the limit
/// bites, and batch stays under it.
#[cfg(target_os = "linux")]
#[test]
fn memory_stays_bounded_on_a_file_larger_than_the_limit() {
    const LIMIT: u64 = 64 << 20;
    if Command::new("prlimit").arg("--version").output().is_err() {
        eprintln!("skipped: prlimit is not installed");
        return;
    }
    let dir = scratch("memory");
    // 1,300 lines of about 100 KB: 130 MB, twice the limit.
    let one = request(1, 8, 12_000).to_string();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let count = 1_300;
    for _ in 0..count {
        gz.write_all(one.as_bytes()).expect("compressed");
        gz.write_all(b"\n").expect("compressed");
    }
    std::fs::write(dir.join("big.jsonl.gz"), gz.finish().expect("compressed")).expect("written");
    let limited = |args: &[&str]| {
        Command::new("prlimit")
            .arg(format!("--data={LIMIT}"))
            .arg(env!("CARGO_BIN_EXE_cutctx"))
            .args(args)
            .output()
            .expect("prlimit runs")
    };
    let input = dir.join("big.jsonl.gz");
    // A budget the protected tail (one 3,000-token result) fits in.
    let flags = [
        "--format",
        "openai-chat",
        "--max-tokens",
        "5000",
        "--policy",
        "observation_masking",
    ];
    let mut all = vec!["batch", "--jobs", "2"];
    all.extend(flags);
    all.push(input.to_str().expect("a path"));
    let out = limited(&all);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let summary = text(&out.stderr);
    assert!(
        summary.contains(&format!("{count} lines: {count} compacted")),
        "{summary}"
    );
    assert_eq!(out.stdout.iter().filter(|b| **b == b'\n').count(), count);

    // A request of that size, read whole as `compact` reads it, does not fit under the limit.
    let big = dir.join("whole.json");
    let filler = "x".repeat(1 << 20);
    let mut file = std::fs::File::create(&big).expect("created");
    file.write_all(b"{\"messages\": [{\"role\": \"user\", \"content\": \"")
        .expect("written");
    for _ in 0..((2 * LIMIT) >> 20) {
        file.write_all(filler.as_bytes()).expect("written");
    }
    file.write_all(b"\"}]}").expect("written");
    drop(file);
    let mut all = vec!["compact"];
    all.extend(flags);
    all.push(big.to_str().expect("a path"));
    let out = limited(&all);
    assert_ne!(
        out.status.code(),
        Some(0),
        "the limit must bite on a whole request"
    );
    std::fs::remove_dir_all(&dir).expect("the scratch folder is removed");
}

/// `--errors` on something that is not a regular file is written to, never replaced by a
/// rename (which would put a regular file where the device was).
#[cfg(unix)]
#[test]
fn errors_to_a_device_write_through_it() {
    let out = batch(&["--errors", "/dev/null"], "-", b"not json\n");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "null\n");
    let kind = std::fs::metadata("/dev/null").expect("exists").file_type();
    assert!(!kind.is_file(), "/dev/null is still a device");
}

/// `--repair`: each drop is one line on standard error naming the input line, never content,
/// and the summary counts them; its token totals are whole prompts (tools, system, messages
/// and the reserve), as `cutctx estimate` totals them, before and as the reports give after.
#[test]
fn repairs_are_listed_by_line_and_counted_and_totals_are_whole_prompts() {
    let dir = scratch("repairs");
    let mut with_tools = request(3, 4, 800);
    with_tools["tools"] = json!([{"type": "function", "function": {
        "name": "read", "description": "Reads a file.", "parameters": {"type": "object"}}}]);
    with_tools["max_tokens"] = json!(40);
    let unanswered = json!({"model": "gpt-4o", "messages": [
        {"role": "user", "content": SECRET},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "user", "content": SECRET}
    ]});
    let lines = vec![
        with_tools.to_string(),
        unanswered.to_string(),
        request(5, 6, 600).to_string(),
    ];
    let input = dir.join("in.jsonl");
    write_jsonl(&input, &lines);
    let mut all = vec!["--error-format", "json", "batch"];
    all.extend(FLAGS);
    all.extend(["--repair", input.to_str().expect("a path")]);
    let out = cutctx(&all, b"");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(!stderr.contains(SECRET));
    let notes: Vec<&str> = stderr.lines().filter(|l| l.contains("repair:")).collect();
    assert_eq!(
        notes,
        [
            "cutctx: line 2: repair: dropped_call at position 1 (id \"c1\")",
            "cutctx: line 2: repair: dropped_empty_message at position 1",
        ]
    );
    let summary: Value =
        serde_json::from_str(stderr.lines().last().unwrap_or("")).expect("a JSON summary");
    assert_eq!(summary["repairs"], 2);
    let mut a = args("observation_masking");
    a.repair = true;
    let (mut before, mut after) = (0, 0);
    for line in &lines {
        let count: Value = serde_json::from_str(
            &formats::estimate(Format::OpenAiChat, None, None, true, line).expect("counts"),
        )
        .expect("JSON");
        let report: Value =
            serde_json::from_str(&formats::compact(&a, line, None).expect("compacts").report)
                .expect("JSON");
        let outside = count["tools"].as_u64().unwrap_or(0) + count["reserve"].as_u64().unwrap_or(0);
        before += count["total"].as_u64().unwrap_or(0);
        after += outside
            + report["report"]["tokens_after_estimate"]
                .as_u64()
                .unwrap_or(0);
    }
    assert!(before > after, "{before} {after}");
    assert_eq!(summary["tokens_before"], before);
    assert_eq!(summary["tokens_after"], after);
}

/// A line whose figures overflow (an output reserve near 2^64) fails alone: in a debug build
/// it once panicked a worker, and the run then waited for that line for ever.
#[test]
fn a_line_whose_reserve_overflows_fails_alone() {
    let dir = scratch("overflow");
    let mut huge = request(2, 2, 400);
    huge["max_tokens"] = json!(u64::MAX);
    huge["tools"] = json!([{"type": "function", "function": {"name": "read", "parameters": {}}}]);
    let lines = vec![request(1, 2, 400).to_string(), huge.to_string()];
    let input = dir.join("in.jsonl");
    write_jsonl(&input, &lines);
    let errors = dir.join("errors.jsonl");
    let mut all = vec!["batch", "--format", "openai-chat", "--max-tokens"];
    let max = u64::MAX.to_string();
    all.extend([max.as_str(), "--errors", errors.to_str().expect("a path")]);
    all.push(input.to_str().expect("a path"));
    let out = cutctx(&all, b"");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).lines().nth(1), Some("null"));
    let listed = std::fs::read_to_string(&errors).expect("written");
    assert!(
        listed.contains("\"code\":\"COMPACTION_BUDGET_UNSATISFIABLE\""),
        "{listed}"
    );
}
