//! `cutctx serve` as a shared deployment runs it: what its log and its store may hold, a store
//! file that is not a database, and the descriptor limit.

use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Reply, Upstream, call, scratch};
use crate::serve_logged;

/// Every marker starts with this, so that one search finds them all.
const MARK: &str = "ZQXMARK";

fn mark(what: &str) -> String {
    format!("{MARK}-{what}")
}

/// A Chat Completions conversation with a marker in every field a client fills.
fn chat_body(calls: usize, fault: bool) -> Vec<u8> {
    let mut messages = vec![
        json!({"role": "system", "content": mark("system")}),
        json!({"role": "user", "content": mark("user"), "name": mark("username")}),
    ];
    for i in 0..calls {
        let id = mark(&format!("callid{i}"));
        messages.push(json!({"role": "assistant", "content": mark("assistant"), "tool_calls": [
            {"id": id, "type": "function", "function": {"name": mark("toolname"), "arguments": json!({"path": mark("args")}).to_string()}}]}));
        let result = mark("result") + &" output".repeat(60);
        if !(fault && i + 1 == calls) {
            messages.push(json!({"role": "tool", "tool_call_id": id, "content": result}));
        }
    }
    serde_json::to_vec(&json!({
        "model": mark("model"), "user": mark("enduser"), "metadata": {"k": mark("meta")},
        "tools": [{"type": "function", "function": {"name": mark("toolname"), "description": mark("tooldesc")}}],
        "messages": messages, "x_unknown_field": mark("extra"),
    }))
    .expect("json")
}

fn anthropic_body(calls: usize) -> Vec<u8> {
    let mut messages = vec![json!({"role": "user", "content": mark("user")})];
    for i in 0..calls {
        let id = mark(&format!("toolu{i}"));
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": mark("assistant")},
            {"type": "tool_use", "id": id, "name": mark("toolname"), "input": {"q": mark("args")}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": mark("result") + &" output".repeat(60)}]}));
    }
    let user_id =
        json!({"device_id": mark("device"), "session_id": mark("claudesession")}).to_string();
    serde_json::to_vec(&json!({
        "model": mark("claude"), "max_tokens": 100, "system": mark("system"),
        "metadata": {"user_id": user_id}, "messages": messages,
    }))
    .expect("json")
}

fn responses_body(calls: usize) -> Vec<u8> {
    let mut input = vec![json!({"type": "message", "role": "user", "content": mark("user")})];
    for i in 0..calls {
        let id = mark(&format!("fc{i}"));
        input.push(json!({"type": "function_call", "call_id": id, "name": mark("toolname"), "arguments": mark("args")}));
        input.push(json!({"type": "function_call_output", "call_id": id, "output": mark("result") + &" output".repeat(60)}));
    }
    serde_json::to_vec(&json!({
        "model": mark("gpt"), "instructions": mark("instructions"),
        "prompt_cache_key": mark("cachekey"), "input": input,
    }))
    .expect("json")
}

/// Every file under `dir`, as bytes, with its name.
fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    std::fs::read_dir(dir)
        .expect("dir")
        .filter_map(Result::ok)
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap_or_default())
        })
        .collect()
}

/// The markers in `bytes`: the word after each `ZQXMARK-`.
fn markers(bytes: &[u8]) -> std::collections::BTreeSet<String> {
    let text = String::from_utf8_lossy(bytes);
    text.match_indices(MARK)
        .map(|(i, _)| {
            text[i + MARK.len()..]
                .trim_start_matches('-')
                .chars()
                .take_while(char::is_ascii_alphabetic)
                .collect()
        })
        .collect()
}

#[test]
fn nothing_a_client_sends_reaches_the_log_and_the_store_keeps_only_ids_that_tie_calls_to_results() {
    let dir = scratch("markers");
    let up = Upstream::start(|r, _| {
        if r.header("authorization") == Some(&format!("Bearer {MARK}-refusedkey")) {
            return Reply::json(401, &json!({"error": {"message": mark("providererror")}}));
        }
        Reply::json(
            200,
            &json!({"id": mark("responseid"), "model": mark("answeringmodel")}),
        )
    });
    let url = up.url();
    let state = format!("sqlite:{}", dir.join("s.db").display());
    let ledger = dir.join("firings.jsonl").display().to_string();
    let token = mark("proxytoken0123456789");
    let (mut child, addr, log) = serve_logged(
        Command::new(env!("CARGO_BIN_EXE_cutctx")),
        &[
            "--listen",
            "127.0.0.1:0",
            "--openai-upstream",
            &url,
            "--anthropic-upstream",
            &url,
            "--state",
            &state,
            "--window",
            "700",
            "--ledger",
            &ledger,
            "--auth-token",
            &token,
        ],
    );
    let key = format!("Bearer {}", mark("apikey"));
    let headers = [
        ("x-cutctx-auth", token.as_str()),
        ("authorization", key.as_str()),
        ("x-api-key", key.as_str()),
        ("user-agent", &mark("agent")),
        ("x-request-id", &mark("requestid")),
    ];
    let named = [
        ("x-cutctx-session", mark("sessionname")),
        ("session_id", mark("codexsession")),
    ];
    for calls in 0..12 {
        for (path, body) in [
            ("/v1/chat/completions", chat_body(calls, false)),
            ("/v1/messages", anthropic_body(calls)),
            ("/v1/responses", responses_body(calls)),
        ] {
            let r = call(addr, "POST", path, &headers, &body);
            assert_eq!(r.status, 200, "{path}");
        }
        let mut with_name: Vec<(&str, &str)> = headers.to_vec();
        with_name.push((named[calls % 2].0, named[calls % 2].1.as_str()));
        let r = call(
            addr,
            "POST",
            "/v1/chat/completions",
            &with_name,
            &chat_body(calls, false),
        );
        assert_eq!(r.status, 200);
    }
    // What the proxy cannot read or compact, a refused token, a refused key, /v1/compact.
    for body in [
        chat_body(3, true),
        format!("{{\"{MARK}-notjson").into_bytes(),
    ] {
        let r = call(addr, "POST", "/v1/chat/completions", &headers, &body);
        assert_eq!(r.status, 200);
    }
    let wrong = [("x-cutctx-auth", mark("wrongtoken0123456789"))];
    let r = call(
        addr,
        "POST",
        "/v1/chat/completions",
        &[(wrong[0].0, wrong[0].1.as_str())],
        b"{}",
    );
    assert_eq!(r.status, 401);
    let refused = format!("Bearer {MARK}-refusedkey");
    let mut refused_headers: Vec<(&str, &str)> = headers.to_vec();
    refused_headers[1] = ("authorization", refused.as_str());
    let r = call(
        addr,
        "POST",
        "/v1/chat/completions",
        &refused_headers,
        &chat_body(4, false),
    );
    assert_eq!(r.status, 401);
    let r = call(addr, "POST", "/v1/compact", &headers, &chat_body(5, false));
    assert_eq!(r.status, 200);
    let metrics = call(addr, "GET", "/metrics", &headers, b"").text();
    assert!(metrics.contains("cutctx_serve_firings_total"));
    assert_eq!(
        markers(metrics.as_bytes()),
        Default::default(),
        "the metrics page"
    );
    std::thread::sleep(Duration::from_millis(200));
    let _ = child.kill();
    let _ = child.wait();
    let lines = log.lock().expect("log").clone();
    assert!(lines.len() > 40, "the log has its lines: {}", lines.len());
    assert!(
        lines.iter().any(|l| l.contains("\"fired\"")),
        "a firing was logged"
    );
    for l in &lines {
        assert_eq!(markers(l.as_bytes()), Default::default(), "a log line: {l}");
        assert!(l.len() < 2048, "a log line is bounded: {} bytes", l.len());
    }
    // The store and its journal hold the state documents: digests, ranges, and the messages
    // compaction wrote, whose call ids tie each masked result to its call. Nothing else of a
    // request: no key, no token, no name, no model, no text. (A marker split across two of
    // the database's pages reads as a shorter word, never as another marker.)
    let planted = [
        "system",
        "user",
        "username",
        "assistant",
        "toolname",
        "args",
        "result",
        "model",
        "enduser",
        "meta",
        "tooldesc",
        "extra",
        "claude",
        "device",
        "claudesession",
        "gpt",
        "instructions",
        "cachekey",
        "proxytoken",
        "apikey",
        "agent",
        "requestid",
        "sessionname",
        "codexsession",
        "notjson",
        "wrongtoken",
        "refusedkey",
        "providererror",
        "responseid",
        "answeringmodel",
    ];
    let mut ids = 0;
    for (name, bytes) in files(&dir) {
        let found = markers(&bytes);
        if name.starts_with("firings.jsonl") {
            assert_eq!(found, Default::default(), "the ledger {name}");
        }
        let beyond: Vec<&String> = found
            .iter()
            .filter(|m| planted.contains(&m.as_str()))
            .collect();
        assert!(beyond.is_empty(), "{name} holds {beyond:?}");
        ids += found
            .iter()
            .filter(|m| ["callid", "toolu", "fc"].contains(&m.as_str()))
            .count();
    }
    assert!(ids > 0, "the masked results' call ids are kept");
}

#[test]
fn a_store_file_that_is_not_a_database_is_moved_aside_and_the_proxy_starts() {
    let dir = scratch("not-a-db");
    let path = dir.join("s.db");
    std::fs::write(&path, vec![0x42_u8; 10_000]).expect("write");
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let url = up.url();
    let state = format!("sqlite:{}", path.display());
    let (mut child, addr, log) = serve_logged(
        Command::new(env!("CARGO_BIN_EXE_cutctx")),
        &[
            "--listen",
            "127.0.0.1:0",
            "--openai-upstream",
            &url,
            "--state",
            &state,
        ],
    );
    let body =
        serde_json::to_vec(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
            .expect("json");
    assert_eq!(
        call(addr, "POST", "/v1/chat/completions", &[], &body).status,
        200
    );
    let _ = child.kill();
    let _ = child.wait();
    let lines = log.lock().expect("log").clone();
    let moved: Vec<Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["event"] == "store_moved_aside")
        .collect();
    assert_eq!(moved.len(), 1, "{lines:?}");
    let aside = files(&dir)
        .into_iter()
        .find(|(n, _)| n.starts_with("s.db.damaged-"))
        .expect("the damaged file, moved aside");
    assert_eq!(aside.1, vec![0x42_u8; 10_000], "kept as it was");
}

/// The CPU time process `pid` has used, in clock ticks (Linux's `/proc/PID/stat`).
#[cfg(target_os = "linux")]
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // The fields after the command name (which may hold spaces) start after its `)`.
    let after = stat.rsplit_once(')').expect("a command name").1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

#[cfg(target_os = "linux")]
#[test]
fn at_the_descriptor_limit_it_backs_off_instead_of_spinning_and_answers_once_connections_close() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let url = up.url();
    let mut shell = Command::new("bash");
    shell.args([
        "-c",
        "ulimit -n 64 && exec \"$0\" \"$@\"",
        env!("CARGO_BIN_EXE_cutctx"),
    ]);
    let (mut child, addr, log) = serve_logged(
        shell,
        &[
            "--listen",
            "127.0.0.1:0",
            "--openai-upstream",
            &url,
            "--state",
            "memory",
            "--max-connections",
            "1000",
            "--idle-timeout-ms",
            "1500",
        ],
    );
    // More idle connections than the process has descriptors.
    let idle: Vec<TcpStream> = (0..100)
        .filter_map(|_| TcpStream::connect(addr).ok())
        .collect();
    assert!(idle.len() >= 60, "connected: {}", idle.len());
    std::thread::sleep(Duration::from_millis(300));
    let before = cpu_ticks(child.id());
    std::thread::sleep(Duration::from_secs(1));
    let used = cpu_ticks(child.id()) - before;
    // A spinning accept loop takes a whole core: 100 ticks a second.
    assert!(used < 30, "{used} ticks of CPU in one second at the limit");
    drop(idle);
    let t = Instant::now();
    let answered = loop {
        let ok = std::panic::catch_unwind(|| call(addr, "GET", "/healthz", &[], b"").status);
        if ok.is_ok_and(|s| s == 200) {
            break true;
        }
        if t.elapsed() > Duration::from_secs(10) {
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(answered, "/healthz answers once the connections close");
    let metrics = call(addr, "GET", "/metrics", &[], b"").text();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        metrics.contains("cutctx_serve_accept_errors_total"),
        "{metrics}"
    );
    let failures = log
        .lock()
        .expect("log")
        .iter()
        .filter(|l| l.contains("accept_failed"))
        .count();
    assert!(
        (1..=20).contains(&failures),
        "a line per burst, not per retry: {failures}"
    );
}

/// A field of `/proc/PID/status` in bytes (`VmRSS`, `VmHWM`).
#[cfg(target_os = "linux")]
fn status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .expect("the field");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("a figure");
    kib * 1024
}

#[cfg(target_os = "linux")]
#[test]
fn a_large_body_is_held_about_five_times_at_the_peak_of_its_step() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let url = up.url();
    let (mut child, addr, log) = serve_logged(
        Command::new(env!("CARGO_BIN_EXE_cutctx")),
        &[
            "--listen",
            "127.0.0.1:0",
            "--openai-upstream",
            &url,
            "--state",
            "memory",
        ],
    );
    let small = serde_json::to_vec(
        &json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}),
    )
    .expect("json");
    assert_eq!(
        call(addr, "POST", "/v1/chat/completions", &[], &small).status,
        200
    );
    let before = status_bytes(child.id(), "VmHWM");
    // About 12 MiB of 1 KB messages: far over gpt-4o's window, so the step fires.
    let messages: Vec<Value> = (0..12_000)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            json!({"role": role, "content": format!("{i} ") + &"word ".repeat(200)})
        })
        .collect();
    let body = serde_json::to_vec(&json!({"model": "gpt-4o", "messages": messages})).expect("json");
    let r = call(addr, "POST", "/v1/chat/completions", &[], &body);
    assert_eq!(r.status, 200);
    let peak = status_bytes(child.id(), "VmHWM");
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        log.lock()
            .expect("log")
            .iter()
            .any(|l| l.contains("\"fired\"")),
        "the step fired"
    );
    #[expect(clippy::cast_precision_loss, reason = "a ratio of two sizes")]
    let ratio = peak.saturating_sub(before) as f64 / body.len() as f64;
    // Measured 5.9 in this debug build, 4.2 in release (docs/BENCHMARKS.md); before, with the
    // request copied for the firing's transcript and the transcript copied again, 6.3 in
    // release for this shape, and 59 for one of tiny messages.
    assert!(ratio <= 6.5, "peak {ratio:.2} times the body");
}
