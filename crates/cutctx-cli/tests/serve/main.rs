//! `cutctx serve` as a process: the one `listening on` line, a graceful stop on SIGTERM, a
//! startup refusal, and a SIGKILL mid-conversation after which a restart on the same SQLite
//! state continues the session with the same prefix; and, in [`shared`], what a shared
//! deployment relies on of the process: nothing a client sends reaches its log or its store,
//! a damaged store does not stop it, and the descriptor limit does not make it spin.

// The fake upstream and raw client the serve crate's own tests use.
#[path = "../../../cutctx-serve/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod shared;

use std::sync::{Arc, Mutex};

use common::{Reply, Upstream, call};
use serde_json::{Value, json};

/// Starts the binary with `args`; its address, from the one line it prints once listening.
fn serve(args: &[&str]) -> (Child, SocketAddr) {
    let (child, addr, _) = serve_logged(Command::new(env!("CARGO_BIN_EXE_cutctx")), args);
    (child, addr)
}

/// Starts `command` (the binary, or a shell that execs it) with `serve` and `args`; its
/// address, and the log lines it writes after the first, as they come.
fn serve_logged(
    mut command: Command,
    args: &[&str],
) -> (Child, SocketAddr, Arc<Mutex<Vec<String>>>) {
    let mut child = command
        .arg("serve")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    err.read_line(&mut line).expect("a first line");
    let addr = line
        .trim_end()
        .strip_prefix("cutctx serve: listening on 127.0.0.1:")
        .map(|port| format!("127.0.0.1:{port}"))
        .unwrap_or_else(|| panic!("the first line: {line:?}"));
    // The structured log follows: one JSON object a line.
    let log = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&log);
    std::thread::spawn(move || {
        for l in err.lines() {
            let l = l.expect("a log line");
            assert!(
                serde_json::from_str::<Value>(&l).is_ok(),
                "a log line is JSON: {l}"
            );
            kept.lock().expect("log").push(l);
        }
    });
    (child, addr.parse().expect("an address"), log)
}

fn history(calls: usize) -> Vec<Value> {
    let mut h = vec![json!({"role": "user", "content": "read the files"})];
    for i in 0..calls {
        h.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("c{i}"), "type": "function", "function": {"name": "read", "arguments": "{}"}}]}));
        h.push(
            json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": "data ".repeat(80)}),
        );
    }
    h
}

fn body(calls: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({"model": "gpt-4o", "messages": history(calls)})).expect("json")
}

fn sent(up: &Upstream, n: usize) -> Vec<Value> {
    up.requests()[n].json()["messages"]
        .as_array()
        .expect("messages")
        .clone()
}

#[test]
fn a_killed_proxy_restarts_on_its_state_and_the_session_keeps_its_prefix() {
    let dir = common::scratch("kill");
    let state = format!("sqlite:{}", dir.join("state.db").display());
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let url = up.url();
    let args = [
        "--listen",
        "127.0.0.1:0",
        "--openai-upstream",
        &url,
        "--state",
        &state,
        "--window",
        "2000",
    ];
    let (mut child, addr) = serve(&args);
    let mut calls = 0;
    let mut fired = false;
    while calls < 60 && !fired {
        assert_eq!(
            call(addr, "POST", "/v1/chat/completions", &[], &body(calls)).status,
            200
        );
        fired = sent(&up, calls).len() < history(calls).len();
        calls += 1;
    }
    assert!(fired, "the session fired");
    // Two calls after the firing, re-sending its prefix.
    for _ in 0..2 {
        assert_eq!(
            call(addr, "POST", "/v1/chat/completions", &[], &body(calls)).status,
            200
        );
        assert!(sent(&up, calls).starts_with(&sent(&up, calls - 1)));
        calls += 1;
    }
    child.kill().expect("SIGKILL");
    let _ = child.wait();
    let (mut child, addr) = serve(&args);
    assert_eq!(
        call(addr, "POST", "/v1/chat/completions", &[], &body(calls)).status,
        200
    );
    let before = sent(&up, calls - 1);
    let after = sent(&up, calls);
    assert!(
        after.len() < history(calls).len(),
        "still compacted after the restart"
    );
    assert!(
        after.starts_with(&before),
        "the session continued with the same prefix"
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn sigterm_stops_it_gracefully_and_a_bad_setting_stops_the_start() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let url = up.url();
    let (mut child, addr) = serve(&[
        "--listen",
        "127.0.0.1:0",
        "--openai-upstream",
        &url,
        "--state",
        "memory",
    ]);
    assert_eq!(call(addr, "GET", "/healthz", &[], b"").text(), "ok");
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let started = Instant::now();
    let exit = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "it stopped");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "exit 0 on SIGTERM: {exit:?}");

    let out = Command::new(env!("CARGO_BIN_EXE_cutctx"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--state",
            "memory",
            "--openai-upstream",
            "http://192.0.2.1:80",
        ])
        .output()
        .expect("runs");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("VALIDATION_ERROR") && err.contains("plain http"),
        "{err}"
    );
}
