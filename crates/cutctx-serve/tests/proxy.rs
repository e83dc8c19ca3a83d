//! The proxy as a client and a provider see it: what passes untouched (bytes, headers,
//! status, SSE streams), the faults (upstream errors, a cut stream, a slow upstream, a client
//! that goes away), the limits, the control endpoints and headers.

mod common;

use std::io::Read;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{Reply, Upstream, call, proxy, send};
use serde_json::json;

fn chat(n: usize) -> Vec<u8> {
    let messages: Vec<_> = (0..n)
        .map(|i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": format!("message {i}")}))
        .collect();
    // Spacing the proxy must keep: a fitting request goes out byte for byte.
    format!(
        "{{ \"model\" : \"gpt-4o\",\n  \"messages\": {} }}",
        serde_json::Value::from(messages)
    )
    .into_bytes()
}

#[test]
fn a_fitting_request_and_its_response_pass_byte_for_byte() {
    let up = Upstream::start(|_, _| Reply::Full {
        status: 201,
        headers: vec![
            ("content-type".into(), "application/json".into()),
            ("x-request-id".into(), "req-7".into()),
            ("openai-processing-ms".into(), "12".into()),
        ],
        body: b"{\"id\": \"r\",  \"usage\": {\"prompt_tokens\": 9}}".to_vec(),
    });
    let p = proxy(&up, |_| {});
    let body = chat(3);
    let r = call(
        p.addr(),
        "POST",
        "/v1/chat/completions?trace=1",
        &[
            ("authorization", "Bearer sk-test"),
            ("content-type", "application/json"),
            ("x-custom", "kept"),
            ("x-cutctx-session", "s1"),
            // A header the connection names is this hop's.
            ("connection", "x-hop"),
            ("x-hop", "1"),
        ],
        &body,
    );
    assert_eq!(r.status, 201);
    assert_eq!(
        r.body,
        b"{\"id\": \"r\",  \"usage\": {\"prompt_tokens\": 9}}"
    );
    assert_eq!(r.header("x-request-id"), Some("req-7"));
    assert_eq!(r.header("openai-processing-ms"), Some("12"));
    let got = &up.requests()[0];
    assert_eq!(got.method, "POST");
    assert_eq!(got.path, "/v1/chat/completions?trace=1");
    assert_eq!(got.body, body, "forwarded byte for byte");
    assert_eq!(got.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(got.header("x-custom"), Some("kept"));
    assert_eq!(
        got.header("x-cutctx-session"),
        None,
        "control headers are stripped"
    );
    assert_eq!(got.header("host"), Some(up.addr.to_string().as_str()));
    assert_eq!(
        got.header("content-length"),
        Some(body.len().to_string().as_str())
    );
}

#[test]
fn an_sse_stream_passes_chunk_by_chunk_and_its_usage_is_counted() {
    let events: Vec<Vec<u8>> = vec![
        b"data: {\"choices\":[{\"delta\":{\"content\":\"he\"}}],\"usage\":null}\n\n".to_vec(),
        b"data: {\"choices\":[{\"delta\":{\"content\":\"llo\"}}],\"usage\":null}\n\n".to_vec(),
        b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":40,\"prompt_tokens_details\":{\"cached_tokens\":30}}}\n\n".to_vec(),
        b"data: [DONE]\n\n".to_vec(),
    ];
    let expected: Vec<u8> = events.concat();
    let up = Upstream::start(move |_, _| Reply::Stream {
        headers: vec![("content-type".into(), "text/event-stream".into())],
        chunks: events.clone(),
        gap: Duration::from_millis(20),
    });
    let p = proxy(&up, |_| {});
    let r = call(p.addr(), "POST", "/v1/chat/completions", &[], &chat(1));
    assert_eq!(r.status, 200);
    assert!(r.complete);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert_eq!(r.body, expected);
    // The usage is recorded once the stream has ended.
    std::thread::sleep(Duration::from_millis(100));
    let m = call(p.addr(), "GET", "/metrics", &[], b"").text();
    assert!(
        m.contains("cutctx_serve_provider_cached_tokens_total 30"),
        "{m}"
    );
    assert!(
        m.contains("cutctx_serve_provider_uncached_tokens_total 10"),
        "{m}"
    );
    assert!(
        m.contains("cutctx_serve_requests_total{format=\"openai-chat\",outcome=\"fits\"} 1"),
        "{m}"
    );
}

#[test]
fn upstream_errors_pass_unchanged() {
    let up = Upstream::start(|_, n| {
        if n == 0 {
            Reply::Full {
                status: 429,
                headers: vec![
                    ("retry-after".into(), "7".into()),
                    ("content-type".into(), "application/json".into()),
                ],
                body: b"{\"error\":{\"type\":\"rate_limit_error\"}}".to_vec(),
            }
        } else {
            Reply::json(
                500,
                &json!({"type": "error", "error": {"type": "api_error", "message": "boom"}}),
            )
        }
    });
    let p = proxy(&up, |_| {});
    let anthropic = br#"{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}"#;
    let r = call(p.addr(), "POST", "/v1/messages", &[], anthropic);
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("7"));
    assert_eq!(r.body, b"{\"error\":{\"type\":\"rate_limit_error\"}}");
    let r = call(p.addr(), "POST", "/v1/messages", &[], anthropic);
    assert_eq!(r.status, 500);
    assert_eq!(r.json()["error"]["message"], "boom");
}

#[test]
fn unreachable_slow_and_cut_upstreams() {
    // Nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let dead = format!("http://{}", closed.local_addr().expect("addr"));
    drop(closed);
    let up = Upstream::start(|r, _| {
        if r.path.starts_with("/v1/responses") {
            Reply::Late(
                Duration::from_millis(1500),
                Box::new(Reply::json(200, &json!({}))),
            )
        } else {
            Reply::Cut {
                promised: 1000,
                sent: b"{\"id\": \"partial".to_vec(),
            }
        }
    });
    let p = proxy(&up, |o| {
        o.anthropic_upstream = Some(dead.clone());
        o.upstream_timeout = Duration::from_millis(400);
    });
    let r = call(
        p.addr(),
        "POST",
        "/v1/messages",
        &[],
        br#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#,
    );
    assert_eq!(r.status, 502);
    assert_eq!(r.json()["type"], "error");
    assert_eq!(r.json()["error"]["type"], "cutctx_upstream_unreachable");
    let r = call(
        p.addr(),
        "POST",
        "/v1/responses",
        &[],
        br#"{"model":"gpt-4o","input":"hi"}"#,
    );
    assert_eq!(r.status, 504);
    assert_eq!(r.json()["error"]["type"], "cutctx_upstream_timeout");
    assert_eq!(r.json()["error"]["code"], "cutctx_upstream_timeout");
    assert!(r.json()["error"]["param"].is_null());
    // Headers came, then the connection closed mid-body: the client's response is cut too,
    // never completed as if whole.
    let r = call(p.addr(), "POST", "/v1/chat/completions", &[], &chat(1));
    assert_eq!(r.status, 200);
    assert!(!r.complete, "a cut upstream body must not look complete");
}

#[test]
fn a_stalled_stream_is_cut_and_a_client_that_goes_away_cancels_the_upstream() {
    let stream = |gap: u64| {
        Upstream::start(move |_, _| Reply::Stream {
            headers: vec![("content-type".into(), "text/event-stream".into())],
            chunks: (0..60)
                .map(|i| format!("data: {{\"n\":{i}}}\n\n").into_bytes())
                .collect(),
            gap: Duration::from_millis(gap),
        })
    };
    let stalling = stream(1500);
    let p = proxy(&stalling, |o| {
        o.upstream_timeout = Duration::from_millis(500)
    });
    let r = call(p.addr(), "POST", "/v1/chat/completions", &[], &chat(1));
    assert!(!r.complete, "a stream that stalls past the timeout is cut");
    assert!(r.body.starts_with(b"data: {\"n\":0}"));

    let up = stream(50);
    let p = proxy(&up, |_| {});
    let (status, _, mut reader) = send(p.addr(), "POST", "/v1/chat/completions", &[], &chat(1));
    assert_eq!(status, 200);
    let mut first = [0u8; 8];
    reader.read_exact(&mut first).expect("a first chunk");
    drop(reader);
    let mut waited = 0;
    while up.cancelled.load(Ordering::SeqCst) == 0 && waited < 100 {
        std::thread::sleep(Duration::from_millis(50));
        waited += 1;
    }
    assert_eq!(
        up.cancelled.load(Ordering::SeqCst),
        1,
        "the upstream stream was dropped"
    );
}

#[test]
fn limits_malformed_bodies_bypass_and_other_paths() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({"ok": true})));
    let open = proxy(&up, |o| o.max_body = 2000);
    let closed = proxy(&up, |o| o.fail_closed = true);
    let big = vec![b' '; 3000];
    let r = call(open.addr(), "POST", "/v1/messages", &[], &big);
    assert_eq!(r.status, 413);
    assert_eq!(r.json()["error"]["type"], "cutctx_request_too_large");
    let r = call(open.addr(), "POST", "/v1/chat/completions", &[], &big);
    assert_eq!(r.status, 413);
    assert_eq!(r.json()["error"]["code"], "cutctx_request_too_large");
    assert!(
        up.requests().is_empty(),
        "nothing over the limit is forwarded"
    );

    let bad = b"{\"model\": \"gpt-4o\", \"messages\": [";
    let r = call(open.addr(), "POST", "/v1/chat/completions", &[], bad);
    assert_eq!(r.status, 200, "fail-open forwards it");
    assert_eq!(up.requests()[0].body, bad);
    let r = call(closed.addr(), "POST", "/v1/chat/completions", &[], bad);
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["type"], "cutctx_unreadable_request");
    let r = call(closed.addr(), "POST", "/v1/messages", &[], bad);
    assert_eq!(r.json()["type"], "error");
    assert_eq!(r.json()["error"]["type"], "cutctx_unreadable_request");
    assert_eq!(up.requests().len(), 1, "fail-closed forwards nothing");

    // /v1/compact says what would be sent: the body unchanged (fail-open), or the refusal.
    let compact = [("x-cutctx-format", "openai-chat")];
    let r = call(open.addr(), "POST", "/v1/compact", &compact, bad);
    assert_eq!((r.status, r.body.as_slice()), (200, bad.as_slice()));
    let r = call(closed.addr(), "POST", "/v1/compact", &compact, bad);
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["type"], "cutctx_unreadable_request");
    assert_eq!(up.requests().len(), 1, "/v1/compact forwards nothing");

    let m = call(open.addr(), "GET", "/metrics", &[], b"").text();
    assert!(m.contains("cutctx_serve_fail_open_total 2"), "{m}");

    // Bypass and other paths: untouched, the control header stripped.
    let r = call(
        open.addr(),
        "POST",
        "/v1/chat/completions",
        &[("x-cutctx-bypass", "1")],
        &chat(2),
    );
    assert_eq!(r.status, 200);
    let r = call(open.addr(), "GET", "/v1/models", &[("x-api-key", "k")], b"");
    assert_eq!(r.status, 200);
    let got = up.requests();
    assert_eq!(got[1].body, chat(2));
    assert_eq!(got[1].header("x-cutctx-bypass"), None);
    assert_eq!(
        (got[2].method.as_str(), got[2].path.as_str()),
        ("GET", "/v1/models")
    );
    let m = call(open.addr(), "GET", "/metrics", &[], b"").text();
    assert!(m.contains("cutctx_serve_passthrough_total 2"), "{m}");
    assert!(m.contains("outcome=\"bypass\"} 1"), "{m}");
    for name in [
        "firings_total",
        "tokens_in_total",
        "tokens_out_total",
        "saved_units_total",
        "upstream_seconds_count",
        "added_seconds_sum",
    ] {
        assert!(
            m.contains(&format!("cutctx_serve_{name} ")),
            "{name} in {m}"
        );
    }
    let h = call(open.addr(), "GET", "/healthz", &[], b"");
    assert_eq!((h.status, h.text().as_str()), (200, "ok"));
}

#[test]
fn previous_response_id_passes_untouched() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let p = proxy(&up, |o| o.window = Some(50));
    let big = "x".repeat(4000);
    let body = serde_json::to_vec(&json!({"model": "gpt-5", "previous_response_id": "resp_1", "input": [{"role": "user", "content": big}]})).expect("json");
    let r = call(p.addr(), "POST", "/v1/responses", &[], &body);
    assert_eq!(r.status, 200);
    assert_eq!(up.requests()[0].body, body);
}

#[test]
fn bad_settings_stop_the_start() {
    let mut o = cutctx_serve::ServeOptions::new("127.0.0.1:0");
    o.state = cutctx_serve::StateSpec::Memory;
    o.openai_upstream = Some("http://192.0.2.1:80".into());
    let err = cutctx_serve::start(o).expect_err("plain http to a non-loopback host");
    assert_eq!(err.code, "VALIDATION_ERROR");
    assert!(err.message.contains("plain http"), "{}", err.message);
}
