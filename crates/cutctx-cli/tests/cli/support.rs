//! Running the binary, scratch files, request documents and the assertions every test shares.

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use cutctx::model::canonical::canonical_json_value;
use serde_json::{Map, Value, json};

/// Content that must never appear on standard error: every request in these tests carries it.
pub(crate) const SECRET: &str = "SECRET-CONTENT-xyz";

/// The seven keys of every turn in an output, in canonical order.
pub(crate) const TURN_KEYS: [&str; 7] = [
    "content",
    "metadata",
    "pinned",
    "role",
    "token_estimate",
    "tool_call_id",
    "turn_id",
];

/// What one run of the binary did.
#[derive(Debug)]
pub(crate) struct Run {
    /// The exit status; `None` when killed by a signal.
    pub(crate) status: Option<i32>,
    /// Standard output, as bytes.
    pub(crate) stdout: Vec<u8>,
    /// Standard error, lossily decoded.
    pub(crate) stderr: String,
}

/// Runs `cutctx ARGS`, with `stdin` on standard input (empty when `None`).
pub(crate) fn run<S: AsRef<OsStr>>(args: &[S], stdin: Option<&[u8]>) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cutctx"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the cutctx binary starts");
    let mut pipe = child.stdin.take().expect("stdin is piped");
    // A binary that fails before reading its input closes the pipe; that is its business.
    if let Err(e) = pipe.write_all(stdin.unwrap_or_default()) {
        assert_eq!(
            e.kind(),
            std::io::ErrorKind::BrokenPipe,
            "writing standard input: {e}"
        );
    }
    drop(pipe);
    let out = child
        .wait_with_output()
        .expect("the cutctx binary finishes");
    Run {
        status: out.status.code(),
        stdout: out.stdout,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A fresh, empty scratch folder for one test.
pub(crate) fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli")
        .join(test);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("an old scratch folder can be removed");
    }
    std::fs::create_dir_all(&dir).expect("a scratch folder can be created");
    dir
}

/// Writes `bytes` to `dir/name` and returns the path.
pub(crate) fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).expect("a scratch file can be written");
    path
}

/// Writes a JSON document to `dir/name`.
pub(crate) fn write_json(dir: &Path, name: &str, doc: &Value) -> PathBuf {
    write(dir, name, doc.to_string())
}

/// A turn with every key spelled out.
pub(crate) fn turn(id: &str, role: &str, content: &str, tokens: i64) -> Value {
    json!({
        "turn_id": id,
        "role": role,
        "content": content,
        "token_estimate": tokens,
        "tool_call_id": null,
        "pinned": false,
        "metadata": {},
    })
}

/// Sets one key of a JSON object (a turn, a request, a policy) and returns it.
pub(crate) fn with(mut value: Value, key: &str, v: Value) -> Value {
    value
        .as_object_mut()
        .expect("only objects get keys")
        .insert(key.to_owned(), v);
    value
}

/// A request document.
pub(crate) fn request(turns: Vec<Value>, max_tokens: i64, protected: i64, policy: Value) -> Value {
    json!({
        "transcript": turns,
        "budget": {"max_tokens": max_tokens, "protected_recent_turns": protected},
        "policy": policy,
    })
}

/// simple_chat (BEHAVIOUR.md §10.1) with the secret in every turn's content: 125 tokens.
pub(crate) fn simple_chat() -> Vec<Value> {
    [
        ("s1", "system", 12),
        ("u1", "user", 30),
        ("a1", "assistant", 25),
        ("u2", "user", 18),
        ("a2", "assistant", 40),
    ]
    .into_iter()
    .map(|(id, role, tokens)| turn(id, role, &format!("{SECRET} of {id}"), tokens))
    .collect()
}

/// simple_chat under drop-oldest with budget 60, protected 1: keeps s1 and a2, 52 tokens.
pub(crate) fn simple_request() -> Value {
    request(simple_chat(), 60, 1, json!({"name": "drop_oldest"}))
}

/// A transcript whose default-chain plan masks one result and summarizes a span:
///
/// s1 system 10 · u1 20 · a1 10 c1 · t1 tool 300 c1 · a2 10 · u2 10 · a3 10 c2 pinned ·
/// t2 tool 300 c2 {"source": "db"} · a4 10 · u3 10 = 690 tokens.
///
/// With budget 150, protected 2, `keep_recent_results` 0: masking stubs t1 and t2 at 32
/// (154 left); summarizing folds u1..u2 (82 projected tokens, target round(16.4) = 16), 88 left.
/// t2 stays masked: its call a3 is pinned, so the exchange is retained.
pub(crate) fn mask_and_summary_request() -> Value {
    let turns = vec![
        turn("s1", "system", &format!("rules {SECRET}"), 10),
        turn("u1", "user", &format!("question {SECRET}"), 20),
        with(
            turn("a1", "assistant", "calling", 10),
            "tool_call_id",
            json!("c1"),
        ),
        with(
            turn("t1", "tool", &format!("{SECRET}{}", "x".repeat(1200)), 300),
            "tool_call_id",
            json!("c1"),
        ),
        turn("a2", "assistant", "ok", 10),
        turn("u2", "user", "more", 10),
        with(
            with(
                turn("a3", "assistant", "calling db", 10),
                "tool_call_id",
                json!("c2"),
            ),
            "pinned",
            json!(true),
        ),
        with(
            with(
                turn("t2", "tool", &format!("{SECRET}{}", "y".repeat(1200)), 300),
                "tool_call_id",
                json!("c2"),
            ),
            "metadata",
            json!({"source": "db"}),
        ),
        turn("a4", "assistant", "done", 10),
        turn("u3", "user", "thanks", 10),
    ];
    request(
        turns,
        150,
        2,
        json!({"name": "default_chain", "prompt_id": "p.v1", "keep_recent_results": 0}),
    )
}

/// Asserts a successful run printed exactly one line of canonical JSON; returns it parsed.
pub(crate) fn assert_success(run: &Run) -> Value {
    assert_eq!(run.status, Some(0), "exit status; stderr: {}", run.stderr);
    assert_eq!(run.stderr, "", "nothing on standard error on success");
    let text = std::str::from_utf8(&run.stdout).expect("standard output is UTF-8");
    assert!(text.ends_with('\n'), "the output ends with a newline");
    assert_eq!(
        text.matches('\n').count(),
        1,
        "the output is exactly one line"
    );
    let value: Value = serde_json::from_str(text).expect("the output is one JSON document");
    assert_eq!(
        canonical_json_value(&value) + "\n",
        text,
        "the output is canonical JSON"
    );
    value
}

/// The error format a failing run was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    /// `--error-format text` (the default).
    Text,
    /// `--error-format json`.
    Json,
}

/// Asserts a run failed as the contract says: nothing on standard output, the exit status, no
/// turn content anywhere on standard error, and the error line in the requested format.
/// Returns the JSON error object for [`Format::Json`], `Value::Null` for [`Format::Text`].
pub(crate) fn assert_failure(run: &Run, format: Format, code: &str, exit: i32) -> Value {
    assert_eq!(
        run.stdout, b"",
        "nothing on standard output on failure ({code})"
    );
    assert_eq!(
        run.status,
        Some(exit),
        "exit status for {code}: {}",
        run.stderr
    );
    assert!(
        !run.stderr.contains(SECRET),
        "standard error leaks turn content: {}",
        run.stderr
    );
    let last = run
        .stderr
        .lines()
        .last()
        .expect("a failure says something on standard error");
    match format {
        Format::Text => {
            assert!(
                last.starts_with(&format!("error[{code}]: ")),
                "the text form names the code: {last}"
            );
            Value::Null
        }
        Format::Json => {
            let err: Value = serde_json::from_str(last).expect("the last stderr line is JSON");
            let obj = err.as_object().expect("the error line is one JSON object");
            let keys: Vec<&str> = obj.keys().map(String::as_str).collect();
            assert_eq!(keys, ["code", "details", "message"], "error keys: {last}");
            assert_eq!(obj["code"], code, "error code: {last}");
            assert!(obj["message"].is_string(), "message is a string: {last}");
            assert!(obj["details"].is_object(), "details is an object: {last}");
            assert_eq!(
                canonical_json_value(&err),
                last,
                "the error line is canonical JSON"
            );
            err
        }
    }
}

/// Runs `args` (a subcommand and its operands) once per error format, checks both failures,
/// and returns the JSON error object.
pub(crate) fn assert_fails<S: AsRef<OsStr>>(
    args: &[S],
    stdin: Option<&[u8]>,
    code: &str,
    exit: i32,
) -> Value {
    let mut text: Vec<&OsStr> = args.iter().map(AsRef::as_ref).collect();
    let text_run = run(&text, stdin);
    assert_failure(&text_run, Format::Text, code, exit);
    text.extend([OsStr::new("--error-format"), OsStr::new("json")]);
    let json_run = run(&text, stdin);
    assert_failure(&json_run, Format::Json, code, exit)
}

/// The details object of a JSON error.
pub(crate) fn details(err: &Value) -> &Map<String, Value> {
    err["details"].as_object().expect("details is an object")
}
