//! The proxy as a client and a provider see it: what passes untouched (bytes, headers,
//! status, SSE streams), the faults (upstream errors, a cut stream, a slow upstream, a client
//! that goes away), the limits, the control endpoints and headers, compressed request bodies,
//! the names clients give their sessions, and the unreadable requests counted by reason.

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

/// A Responses `input` of a shape the proxy does not know (an object) is carried through
/// untouched, and not counted as unreadable.
#[test]
fn an_input_of_an_unknown_shape_passes_untouched() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let p = proxy(&up, |o| o.window = Some(50));
    let body = serde_json::to_vec(&json!({"model": "gpt-5", "input": {"type": "message", "role": "user", "content": "x".repeat(4000)}})).expect("json");
    let r = call(p.addr(), "POST", "/v1/responses", &[], &body);
    assert_eq!(r.status, 200);
    assert_eq!(up.requests()[0].body, body);
    let m = metrics(&p);
    assert!(!m.contains("cutctx_serve_unreadable_total{"), "{m}");
    assert_eq!(metric(&m, "cutctx_serve_passthrough_total"), 1, "{m}");
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

/// The value of the metric series `series` (its name and labels, as written), 0 when absent.
fn metric(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{series} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn metrics(p: &cutctx_serve::Running) -> String {
    call(p.addr(), "GET", "/metrics", &[], b"").text()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(data).expect("gzip");
    e.finish().expect("gzip")
}

fn zstd(data: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
}

/// A Chat history of `n` long messages, tagged `tag`, valid for the provider.
fn long_chat(n: usize, tag: &str) -> Vec<u8> {
    let messages: Vec<_> = (0..n)
        .map(|i| {
            json!({"role": if i % 2 == 0 { "user" } else { "assistant" },
                "content": format!("{tag} message {i}: ") + &"lorem ipsum dolor sit amet ".repeat(20)})
        })
        .collect();
    serde_json::to_vec(&json!({"model": "gpt-4o", "messages": messages})).expect("json")
}

#[test]
fn compressed_bodies_that_fit_pass_byte_for_byte_with_their_encoding() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let p = proxy(&up, |_| {});
    let body = chat(3);
    let sent = [("zstd", zstd(&body)), ("gzip", gzip(&body))];
    for (coding, bytes) in &sent {
        let headers = [
            ("content-encoding", *coding),
            ("content-type", "application/json"),
        ];
        let r = call(p.addr(), "POST", "/v1/chat/completions", &headers, bytes);
        assert_eq!(r.status, 200);
    }
    for (got, (coding, bytes)) in up.requests().iter().zip(&sent) {
        assert_eq!(&got.body, bytes, "{coding}: forwarded as it came");
        assert_eq!(got.header("content-encoding"), Some(*coding));
        assert_eq!(
            got.header("content-length"),
            Some(bytes.len().to_string().as_str())
        );
    }
    let m = metrics(&p);
    assert_eq!(
        metric(
            &m,
            "cutctx_serve_requests_total{format=\"openai-chat\",outcome=\"fits\"}"
        ),
        2,
        "both were read: {m}"
    );
    // /v1/compact answers what would be sent: the same bytes, with their encoding.
    let compact = [
        ("content-encoding", "zstd"),
        ("x-cutctx-format", "openai-chat"),
    ];
    let r = call(p.addr(), "POST", "/v1/compact", &compact, &sent[0].1);
    assert_eq!(r.status, 200);
    assert_eq!(
        (r.body.as_slice(), r.header("content-encoding")),
        (sent[0].1.as_slice(), Some("zstd"))
    );
}

#[test]
fn compressed_bodies_over_the_window_are_compacted_and_arrive_plain() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let p = proxy(&up, |o| o.window = Some(2000));
    let plain = long_chat(40, "zstd");
    let r = call(
        p.addr(),
        "POST",
        "/v1/chat/completions",
        &[("content-encoding", "zstd")],
        &zstd(&plain),
    );
    assert_eq!(r.status, 200);
    let plain = long_chat(40, "gzip");
    let r = call(
        p.addr(),
        "POST",
        "/v1/chat/completions",
        &[("content-encoding", "GZIP")],
        &gzip(&plain),
    );
    assert_eq!(r.status, 200);
    for got in up.requests() {
        assert_eq!(
            got.header("content-encoding"),
            None,
            "the session's request is plain"
        );
        assert_eq!(
            got.header("content-length"),
            Some(got.body.len().to_string().as_str())
        );
        let doc = got.json();
        cutctx::formats::validate(cutctx::formats::Format::OpenAiChat, &doc)
            .unwrap_or_else(|v| panic!("{v}"));
        assert!(
            doc["messages"].as_array().expect("messages").len() < 40,
            "compacted"
        );
    }
    let m = metrics(&p);
    assert_eq!(metric(&m, "cutctx_serve_firings_total"), 2, "{m}");
    // /v1/compact answers the compacted request plain too.
    let r = call(
        p.addr(),
        "POST",
        "/v1/compact",
        &[("content-encoding", "zstd")],
        &zstd(&long_chat(40, "c")),
    );
    assert_eq!((r.status, r.header("content-encoding")), (200, None));
    assert!(r.json()["messages"].as_array().expect("messages").len() < 40);
}

#[test]
fn a_decompression_bomb_is_refused_and_a_body_that_does_not_decode_goes_as_it_came() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let open = proxy(&up, |o| o.max_body = 100_000);
    let closed = proxy(&up, |o| o.fail_closed = true);
    // A few kilobytes that unpack to 8 MiB, far over the limit.
    let bomb = vec![b' '; 8 << 20];
    let z = zstd(&bomb);
    assert!(z.len() < 100_000);
    let r = call(
        open.addr(),
        "POST",
        "/v1/chat/completions",
        &[("content-encoding", "zstd")],
        &z,
    );
    assert_eq!(r.status, 413);
    assert_eq!(r.json()["error"]["code"], "cutctx_request_too_large");
    let r = call(
        open.addr(),
        "POST",
        "/v1/messages",
        &[("content-encoding", "gzip")],
        &gzip(&bomb),
    );
    assert_eq!(r.status, 413);
    assert_eq!(r.json()["type"], "error");
    assert_eq!(r.json()["error"]["type"], "cutctx_request_too_large");
    assert!(up.requests().is_empty(), "a bomb is never forwarded");

    // Truncated: it does not decode. Fail-open forwards it as it came; fail-closed refuses it.
    let good = zstd(&chat(2));
    let corrupt = &good[..good.len() - 4];
    let headers = [("content-encoding", "zstd")];
    let r = call(
        open.addr(),
        "POST",
        "/v1/chat/completions",
        &headers,
        corrupt,
    );
    assert_eq!(r.status, 200);
    let got = &up.requests()[0];
    assert_eq!(
        (got.body.as_slice(), got.header("content-encoding")),
        (corrupt, Some("zstd"))
    );
    let r = call(
        closed.addr(),
        "POST",
        "/v1/chat/completions",
        &headers,
        corrupt,
    );
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["type"], "cutctx_unreadable_request");
    // A coding the proxy does not know: forwarded untouched.
    let r = call(
        open.addr(),
        "POST",
        "/v1/chat/completions",
        &[("content-encoding", "br")],
        b"\x0b\x02\x80{}\x03",
    );
    assert_eq!(r.status, 200);
    let got = &up.requests()[1];
    assert_eq!(
        (got.body.as_slice(), got.header("content-encoding")),
        (&b"\x0b\x02\x80{}\x03"[..], Some("br"))
    );
    assert_eq!(up.requests().len(), 2, "fail-closed forwarded nothing");
    let m = metrics(&open);
    assert_eq!(
        metric(
            &m,
            "cutctx_serve_unreadable_total{format=\"openai-chat\",reason=\"encoding\"}"
        ),
        2,
        "{m}"
    );
    assert_eq!(
        metric(
            &m,
            "cutctx_serve_requests_total{format=\"openai-chat\",outcome=\"too_large\"}"
        ),
        1,
        "{m}"
    );
    assert_eq!(
        metric(
            &m,
            "cutctx_serve_requests_total{format=\"anthropic\",outcome=\"too_large\"}"
        ),
        1,
        "{m}"
    );
    assert_eq!(metric(&m, "cutctx_serve_fail_open_total"), 2, "{m}");
}

#[test]
fn unreadable_requests_are_counted_by_reason() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let p = proxy(&up, |_| {});
    let orphan = json!({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"},
        {"role": "tool", "tool_call_id": "call_1", "content": "42"}]});
    let cases: [(&str, Vec<u8>); 4] = [
        ("not_json", b"{\"model\": ".to_vec()),
        ("not_object", b"[1, 2]".to_vec()),
        (
            "no_messages",
            br#"{"model": "gpt-4o", "messages": []}"#.to_vec(),
        ),
        ("rule", serde_json::to_vec(&orphan).expect("json")),
    ];
    for (reason, body) in &cases {
        let r = call(p.addr(), "POST", "/v1/chat/completions", &[], body);
        assert_eq!(r.status, 200, "{reason}: forwarded (fail-open)");
    }
    let m = metrics(&p);
    for (reason, _) in &cases {
        let series =
            format!("cutctx_serve_unreadable_total{{format=\"openai-chat\",reason=\"{reason}\"}}");
        assert_eq!(metric(&m, &series), 1, "{reason} in {m}");
    }
    assert_eq!(metric(&m, "cutctx_serve_fail_open_total"), 4, "{m}");
    assert_eq!(
        metric(
            &m,
            "cutctx_serve_requests_total{format=\"openai-chat\",outcome=\"fail_open\"}"
        ),
        4
    );
    for (got, (_, body)) in up.requests().iter().zip(&cases) {
        assert_eq!(&got.body, body, "forwarded unchanged");
    }
}

/// An Anthropic request from Claude Code: `metadata.user_id` naming session `session`, the
/// first message carrying `reminder`, then `n` more messages.
fn claude_code(user_id: &str, reminder: &str, n: usize) -> Vec<u8> {
    let mut messages = vec![
        json!({"role": "user", "content": format!("<system-reminder>{reminder}</system-reminder> read the files")}),
    ];
    for i in 1..=n {
        let role = if i % 2 == 1 { "assistant" } else { "user" };
        messages.push(json!({"role": role, "content": format!("turn {i}: ") + &"lorem ipsum dolor sit amet ".repeat(20)}));
    }
    serde_json::to_vec(&json!({"model": "claude-sonnet-4-5", "max_tokens": 256,
        "metadata": {"user_id": user_id}, "messages": messages}))
    .expect("json")
}

#[test]
fn a_claude_code_session_survives_a_rewritten_first_message() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let p = proxy(&up, |o| o.window = Some(1500));
    let user_id = r#"{"device_id":"d1","account_uuid":"","session_id":"0b7e-42"}"#;
    // Fits; then message 0 rewritten (over the window: it fires); then rewound.
    for body in [
        claude_code(user_id, "OLD-REMINDER", 2),
        claude_code(user_id, "NEW-REMINDER", 24),
        claude_code("user_ab12_account__session_0b7e-42", "NEW-REMINDER", 4),
    ] {
        let r = call(p.addr(), "POST", "/v1/messages", &[], &body);
        assert_eq!(r.status, 200);
    }
    let m = metrics(&p);
    assert_eq!(
        metric(
            &m,
            "cutctx_serve_sessions_total{source=\"metadata.user_id\"}"
        ),
        1,
        "one session: {m}"
    );
    assert_eq!(
        metric(&m, "cutctx_serve_sessions_total{source=\"history\"}"),
        0,
        "{m}"
    );
    assert_eq!(
        metric(&m, "cutctx_serve_session_restarts_total"),
        2,
        "rewritten, then rewound: {m}"
    );
    assert_eq!(metric(&m, "cutctx_serve_firings_total"), 1, "{m}");
    let got = up.requests();
    let fired = got[1].json();
    cutctx::formats::validate(cutctx::formats::Format::Anthropic, &fired)
        .unwrap_or_else(|v| panic!("{v}"));
    assert!(!String::from_utf8_lossy(&got[1].body).contains("OLD-REMINDER"));
    assert_eq!(
        got[2].body,
        claude_code("user_ab12_account__session_0b7e-42", "NEW-REMINDER", 4),
        "it fits again: as it came"
    );

    // The same calls with no name: each rewrite is a session of its own.
    let anonymous = proxy(&up, |o| o.window = Some(1500));
    for reminder in ["OLD-REMINDER", "NEW-REMINDER"] {
        call(
            anonymous.addr(),
            "POST",
            "/v1/messages",
            &[],
            &claude_code("", reminder, 2),
        );
    }
    let m = metrics(&anonymous);
    assert_eq!(
        metric(&m, "cutctx_serve_sessions_total{source=\"history\"}"),
        2,
        "{m}"
    );
}

#[test]
fn session_names_are_taken_in_their_order_and_a_malformed_one_is_skipped() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let p = proxy(&up, |_| {});
    let responses = serde_json::to_vec(&json!({"model": "gpt-5", "prompt_cache_key": "pck-1",
        "input": [{"type": "message", "role": "user", "content": "hi"}]}))
    .expect("json");
    let all = [
        ("x-cutctx-session", "a"),
        ("x-session-id", "b"),
        ("session_id", "c"),
    ];
    // Each call drops the name the one before used: each starts the session of the next.
    for k in 0..=all.len() {
        let r = call(p.addr(), "POST", "/v1/responses", &all[k..], &responses);
        assert_eq!(r.status, 200);
    }
    // The first again: found, not started.
    call(p.addr(), "POST", "/v1/responses", &all, &responses);
    let m = metrics(&p);
    for source in [
        "x-cutctx-session",
        "x-session-id",
        "session_id",
        "prompt_cache_key",
    ] {
        let series = format!("cutctx_serve_sessions_total{{source=\"{source}\"}}");
        assert_eq!(metric(&m, &series), 1, "{source} in {m}");
    }
    let got = up.requests();
    assert_eq!(got[0].header("x-cutctx-session"), None);
    assert_eq!(
        (got[0].header("x-session-id"), got[0].header("session_id")),
        (Some("b"), Some("c")),
        "the client's own headers are forwarded"
    );

    // Anthropic: the session_id header before metadata.user_id; a malformed user id names
    // nothing, and the request goes on by its history.
    let valid = claude_code(r#"{"session_id":"s-1"}"#, "r", 2);
    call(
        p.addr(),
        "POST",
        "/v1/messages",
        &[("session_id", "c-2")],
        &valid,
    );
    call(p.addr(), "POST", "/v1/messages", &[], &valid);
    for malformed in [
        r#"{"session_id": 7"#,
        "alice@example.com",
        "user_x_account__session_",
    ] {
        let r = call(
            p.addr(),
            "POST",
            "/v1/messages",
            &[],
            &claude_code(malformed, malformed, 2),
        );
        assert_eq!(r.status, 200);
    }
    let m = metrics(&p);
    assert_eq!(
        metric(&m, "cutctx_serve_sessions_total{source=\"session_id\"}"),
        2,
        "{m}"
    );
    assert_eq!(
        metric(
            &m,
            "cutctx_serve_sessions_total{source=\"metadata.user_id\"}"
        ),
        1,
        "{m}"
    );
    assert_eq!(
        metric(&m, "cutctx_serve_sessions_total{source=\"history\"}"),
        3,
        "{m}"
    );
    assert!(!m.contains("cutctx_serve_unreadable_total{"), "{m}");
}

/// Claude Code's shape over the window: mid-conversation system messages after tool results,
/// a role and a block type the format does not know. The proxy reads it (nothing unreadable),
/// fires, sends a valid request holding every such item unchanged, and `/metrics` counts the
/// opaque ones by reason.
#[test]
fn mid_conversation_system_messages_and_unknown_items_are_read_compacted_and_counted() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let p = proxy(&up, |o| o.window = Some(2000));
    let mut messages = vec![json!({"role": "user", "content": "fix the build"})];
    for k in 0..10 {
        messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": format!("t{k}"), "name": "Bash", "input": {"command": "cat f"}}]}));
        let mut result = vec![
            json!({"type": "tool_result", "tool_use_id": format!("t{k}"), "content": "line of output ".repeat(60)}),
        ];
        if k == 3 {
            result.push(json!({"type": "future_block", "x": 1}));
        }
        messages.push(json!({"role": "user", "content": result}));
        if k % 3 == 1 {
            messages.push(json!({"role": "system", "content": format!("reminder {k}")}));
        }
        if k == 5 {
            messages.push(json!({"role": "critic", "content": "opaque"}));
        }
    }
    let body = serde_json::to_vec(&json!({"model": "claude-opus-5-5", "max_tokens": 256,
        "system": [{"type": "text", "text": "You are a coding agent."}], "messages": messages}))
    .expect("json");
    let r = call(p.addr(), "POST", "/v1/messages", &[], &body);
    assert_eq!(r.status, 200);
    let m = metrics(&p);
    assert!(!m.contains("cutctx_serve_unreadable_total{"), "{m}");
    assert_eq!(metric(&m, "cutctx_serve_firings_total"), 1, "{m}");
    for (reason, n) in [("unknown_role", 1), ("unknown_block", 1)] {
        let series =
            format!("cutctx_serve_opaque_items_total{{format=\"anthropic\",reason=\"{reason}\"}}");
        assert_eq!(metric(&m, &series), n, "{reason} in {m}");
    }
    let sent = up.requests()[0].json();
    cutctx::formats::validate(cutctx::formats::Format::Anthropic, &sent)
        .unwrap_or_else(|v| panic!("{v}"));
    let kept = sent["messages"].as_array().expect("messages");
    assert!(kept.len() < messages.len(), "compacted");
    for m in &messages {
        let carried = matches!(m["role"].as_str(), Some("system" | "critic"));
        assert!(!carried || kept.contains(m), "{m} was not carried");
    }
    assert!(
        String::from_utf8_lossy(&up.requests()[0].body)
            .contains(r#"{"type":"future_block","x":1}"#)
    );
}

/// `/v1/compact` without `x-cutctx-format` reads a Messages body holding a mid-conversation
/// `system` message (and no model or top-level `system` to tell) as Anthropic, and compacts
/// it as such, instead of taking the `system` role for Chat's.
#[test]
fn compact_guesses_anthropic_for_a_body_with_a_mid_conversation_system_message() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let p = proxy(&up, |o| o.window = Some(1500));
    let mut messages = vec![
        json!({"role": "user", "content": "fix the build"}),
        json!({"role": "system", "content": "Environment: /work"}),
    ];
    for k in 0..8 {
        messages.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": format!("t{k}"), "name": "Bash", "input": {"command": "cat f"}}]}));
        messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": format!("t{k}"), "content": "output line ".repeat(200)}]}));
    }
    let body = serde_json::to_vec(&json!({"max_tokens": 256, "messages": messages})).expect("json");
    let r = call(p.addr(), "POST", "/v1/compact", &[], &body);
    assert_eq!(r.status, 200);
    let sent = r.json();
    cutctx::formats::validate(cutctx::formats::Format::Anthropic, &sent)
        .unwrap_or_else(|v| panic!("{v}"));
    // Read as Anthropic, the results are tool turns, and the oldest are masked in place; read
    // as Chat they would be plain user content, never masked.
    let kept = sent["messages"].as_array().expect("messages");
    let masked = kept
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result" && !b["content"].to_string().contains("output line"))
        .count();
    assert!(masked > 0, "no result was masked: {sent}");
    assert!(kept.contains(&messages[1]), "the system message is kept");
    assert!(up.requests().is_empty(), "/v1/compact forwards nothing");
}
