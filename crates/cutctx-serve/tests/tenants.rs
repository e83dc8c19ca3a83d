//! A proxy many tenants share, attacked as a shared deployment would be: each test reproduces
//! one way one caller could reach, move, slow or evict another's state, or hold the proxy's
//! resources, and checks that it no longer can.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::{Reply, Upstream, call, proxy, scratch};
use serde_json::{Value, json};

/// A conversation every tenant opens the same way, grown by `calls` tool calls.
fn history(calls: usize) -> Vec<Value> {
    let mut h = vec![
        json!({"role": "system", "content": "You are the shared scaffold's agent."}),
        json!({"role": "user", "content": "read the files"}),
    ];
    for i in 0..calls {
        h.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("c{i}"), "type": "function", "function": {"name": "read", "arguments": "{}"}}]}));
        h.push(json!({"role": "tool", "tool_call_id": format!("c{i}"),
            "content": format!("file {i}: ") + &"data ".repeat(60)}));
    }
    h
}

fn body(messages: &[Value]) -> Vec<u8> {
    serde_json::to_vec(&json!({"model": "gpt-4o", "messages": messages})).expect("json")
}

fn key(k: &str) -> String {
    format!("Bearer {k}")
}

fn chat(addr: SocketAddr, auth: &str, messages: &[Value], extra: &[(&str, &str)]) -> u16 {
    let mut headers = vec![("authorization", auth)];
    headers.extend_from_slice(extra);
    call(
        addr,
        "POST",
        "/v1/chat/completions",
        &headers,
        &body(messages),
    )
    .status
}

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn metrics(addr: SocketAddr, headers: &[(&str, &str)]) -> String {
    call(addr, "GET", "/metrics", headers, b"").text()
}

fn started(addr: SocketAddr) -> u64 {
    metric(
        &metrics(addr, &[]),
        "cutctx_serve_sessions_total{source=\"history\"}",
    )
}

#[test]
fn tenants_with_the_same_opening_get_sessions_of_their_own() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let p = proxy(&up, |_| {});
    let h = history(2);
    assert_eq!(chat(p.addr(), &key("alice"), &h, &[]), 200);
    assert_eq!(chat(p.addr(), &key("bob"), &h, &[]), 200);
    assert_eq!(started(p.addr()), 2, "a session per credential");
    // The same credential extending its own history finds its session.
    assert_eq!(chat(p.addr(), &key("alice"), &history(3), &[]), 200);
    assert_eq!(started(p.addr()), 2);
    // Another system prompt (the untouchable part) is another session.
    let mut other = history(3);
    other[0] = json!({"role": "system", "content": "Another scaffold."});
    assert_eq!(chat(p.addr(), &key("alice"), &other, &[]), 200);
    assert_eq!(started(p.addr()), 3);
    let with_tools = serde_json::to_vec(&json!({"model": "gpt-4o", "messages": history(4),
        "tools": [{"type": "function", "function": {"name": "read"}}]}))
    .expect("json");
    let auth = key("alice");
    let r = call(
        p.addr(),
        "POST",
        "/v1/chat/completions",
        &[("authorization", &auth)],
        &with_tools,
    );
    assert_eq!(r.status, 200);
    assert_eq!(started(p.addr()), 4, "other tools, another session");
}

/// A window the conversation outgrows after a few calls: the session fires, and its prefix
/// is what the provider caches.
const WINDOW: u64 = 700;

/// The owner's conversation: ten calls past the window, then (`meddle`) whatever another
/// credential does, then the owner's eleventh call; the bodies the provider received for the
/// owner's calls.
fn owner_run(meddle: impl Fn(SocketAddr)) -> Vec<Vec<u8>> {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let p = proxy(&up, |o| o.window = Some(WINDOW));
    let owner = key("owner");
    let named = [("x-cutctx-session", "shared-name")];
    for calls in 1..=10 {
        assert_eq!(chat(p.addr(), &owner, &history(calls), &[]), 200);
        assert_eq!(chat(p.addr(), &owner, &history(calls), &named), 200);
    }
    meddle(p.addr());
    assert_eq!(chat(p.addr(), &owner, &history(11), &[]), 200);
    assert_eq!(chat(p.addr(), &owner, &history(11), &named), 200);
    let restarts = metric(
        &metrics(p.addr(), &[]),
        "cutctx_serve_session_restarts_total",
    );
    assert_eq!(restarts, 0, "no session started over");
    up.requests()
        .into_iter()
        .filter(|r| r.header("authorization") == Some(owner.as_str()))
        .map(|r| r.body)
        .collect()
}

#[test]
fn another_credential_cannot_move_or_restart_a_tenants_session() {
    let alone = owner_run(|_| {});
    let meddled = owner_run(|a| {
        let intruder = key("intruder");
        // The owner's history and two messages more, to take the session over; a rewound
        // history under the owner's name, to restart it.
        assert_eq!(chat(a, &intruder, &history(11), &[]), 200);
        assert_eq!(chat(a, &intruder, &history(12), &[]), 200);
        let named = [("x-cutctx-session", "shared-name")];
        assert_eq!(chat(a, &intruder, &history(2), &named), 200);
    });
    assert_eq!(alone.len(), 22);
    assert!(
        alone == meddled,
        "the owner's calls went out byte for byte as they would have alone"
    );
    let last: Value = serde_json::from_slice(&alone[20]).expect("json");
    assert!(
        last["messages"].as_array().expect("list").len() < 24,
        "and they were compacted"
    );
}

#[test]
fn a_client_that_never_reads_holds_no_one_back_not_even_its_own_conversation() {
    // A long streamed answer: the client that never reads leaves it stuck in the proxy's
    // buffers, with the session's call still open.
    let big = vec![b'x'; 4 * 1024 * 1024];
    let up = Upstream::start(move |r, _| {
        if r.header("x-test-slow").is_some() {
            Reply::Stream {
                headers: vec![("content-type".into(), "text/event-stream".into())],
                chunks: vec![big.clone(); 8],
                gap: Duration::from_millis(1),
            }
        } else {
            Reply::json(200, &json!({}))
        }
    });
    let p = proxy(&up, |_| {});
    let owner = key("owner");
    assert_eq!(chat(p.addr(), &owner, &history(1), &[]), 200);
    // The stuck client: its request sent, its response never read.
    let stuck = {
        let payload = body(&history(2));
        let mut s = TcpStream::connect(p.addr()).expect("connect");
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: {owner}\r\nx-test-slow: 1\r\ncontent-length: {}\r\n\r\n",
            payload.len()
        );
        s.write_all(head.as_bytes()).expect("write");
        s.write_all(&payload).expect("write");
        s
    };
    while up.requests().len() < 2 {
        std::thread::sleep(Duration::from_millis(10));
    }
    // Its own conversation's next call, and another tenant's with the same opening, are
    // answered while it stays stuck.
    let t = Instant::now();
    assert_eq!(chat(p.addr(), &owner, &history(3), &[]), 200);
    assert_eq!(chat(p.addr(), &key("other"), &history(3), &[]), 200);
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "answered beside the stuck client in {:?}",
        t.elapsed()
    );
    drop(stuck);
}

#[test]
fn the_proxys_own_token_guards_every_route_but_health_and_is_never_forwarded() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let token = "0123456789abcdef0123";
    let p = proxy(&up, |o| o.auth_tokens = vec![token.to_owned()]);
    let a = p.addr();
    assert_eq!(call(a, "GET", "/healthz", &[], b"").status, 200);
    for (method, path) in [
        ("GET", "/metrics"),
        ("POST", "/v1/compact"),
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/messages"),
        ("GET", "/v1/models"),
    ] {
        let r = call(
            a,
            method,
            path,
            &[("authorization", "Bearer sk-x")],
            &body(&history(1)),
        );
        assert_eq!(r.status, 401, "{method} {path}");
        assert!(r.text().contains("x-cutctx-auth"), "{}", r.text());
        let wrong = call(
            a,
            method,
            path,
            &[("x-cutctx-auth", "0123456789abcdef0124")],
            b"{}",
        );
        assert_eq!(wrong.status, 401, "{method} {path}");
    }
    assert!(
        up.requests().is_empty(),
        "nothing unauthenticated went upstream"
    );
    let with = [("x-cutctx-auth", token), ("authorization", "Bearer sk-x")];
    assert_eq!(chat(a, "Bearer sk-x", &history(1), &with[..1]), 200);
    let bearer = format!("Bearer {token}");
    let proxy_auth = [("proxy-authorization", bearer.as_str())];
    assert_eq!(chat(a, "Bearer sk-x", &history(2), &proxy_auth), 200);
    for r in up.requests() {
        assert_eq!(r.header("x-cutctx-auth"), None);
        assert_eq!(r.header("proxy-authorization"), None);
        assert_eq!(r.header("authorization"), Some("Bearer sk-x"));
    }
    assert_eq!(
        metric(&metrics(a, &with[..1]), "cutctx_serve_unauthorized_total"),
        10
    );
}

#[test]
fn compact_calls_of_one_tenant_evict_no_one_elses_session() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let p = proxy(&up, |o| {
        o.max_sessions = 4;
        o.max_sessions_per_tenant = 2;
    });
    let a = p.addr();
    assert_eq!(chat(a, &key("victim"), &history(1), &[]), 200);
    // A flood of distinct conversations through /v1/compact under another key.
    for i in 0..20 {
        let mut h = history(1);
        h[1] = json!({"role": "user", "content": format!("flood {i}")});
        let r = call(
            a,
            "POST",
            "/v1/compact",
            &[("authorization", "Bearer flood")],
            &body(&h),
        );
        assert_eq!(r.status, 200);
    }
    let before = started(a);
    assert_eq!(chat(a, &key("victim"), &history(2), &[]), 200);
    assert_eq!(started(a), before, "the victim's session is still there");
    // New tenants past a full store are answered, and evict nothing either.
    for i in 0..4 {
        assert_eq!(chat(a, &key(&format!("late{i}")), &history(1), &[]), 200);
    }
    assert_eq!(chat(a, &key("victim"), &history(3), &[]), 200);
    assert_eq!(started(a), before + 4);
    assert!(metric(&metrics(a, &[]), "cutctx_serve_store_full_total") >= 1);
}

#[test]
fn a_call_the_provider_refuses_for_its_credential_changes_no_session() {
    let up = Upstream::start(|r, _| {
        if r.header("authorization") == Some("Bearer revoked") {
            Reply::json(401, &json!({"error": {"message": "invalid key"}}))
        } else {
            Reply::json(200, &json!({}))
        }
    });
    let p = proxy(&up, |o| o.window = Some(WINDOW));
    let a = p.addr();
    assert_eq!(chat(a, &key("revoked"), &history(1), &[]), 401);
    assert_eq!(chat(a, &key("revoked"), &history(2), &[]), 401);
    let m = metrics(a, &[]);
    assert_eq!(metric(&m, "cutctx_serve_rolled_back_total"), 2);
    assert_eq!(
        started(a),
        2,
        "each refused call found no session: none was kept"
    );
}

#[test]
fn a_refused_call_of_a_tenant_rolls_its_own_session_back() {
    // The provider refuses the owner's key for one call (revoked, then restored): the
    // session is as if that call had never been made. What went out, and how many firings it
    // took, for: a refused rewound call, one that was answered, and none.
    let run = |rewind: Option<u16>| {
        let up = Upstream::start(|r, _| {
            if r.header("x-test-refuse").is_some() {
                Reply::json(403, &json!({"error": {"message": "forbidden"}}))
            } else {
                Reply::json(200, &json!({}))
            }
        });
        let p = proxy(&up, |o| o.window = Some(WINDOW));
        let owner = key("owner");
        let named = [("x-cutctx-session", "mine")];
        for calls in 1..=12 {
            assert_eq!(chat(p.addr(), &owner, &history(calls), &named), 200);
        }
        if let Some(status) = rewind {
            // A rewound history: kept, it would start the named session over.
            let refuse = [named[0], ("x-test-refuse", "1")];
            let extra: &[(&str, &str)] = if status == 403 { &refuse } else { &named };
            assert_eq!(chat(p.addr(), &owner, &history(3), extra), status);
        }
        assert_eq!(chat(p.addr(), &owner, &history(13), &named), 200);
        let firings = metric(&metrics(p.addr(), &[]), "cutctx_serve_firings_total");
        (up.requests().last().expect("sent").body.clone(), firings)
    };
    let never = run(None);
    assert!(never.1 >= 1, "the conversation fired");
    assert!(
        run(Some(403)) == never,
        "the refused call left nothing behind"
    );
    let answered = run(Some(200));
    assert_eq!(
        answered.1,
        never.1 + 1,
        "an answered rewind starts the session over"
    );
}

/// Opens a connection and sends `head` (not a whole request); the connection.
fn open(addr: SocketAddr, head: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(head).expect("write");
    s
}

/// How long until the proxy closes `s` (reads until EOF), at most `most`.
fn closed_within(mut s: TcpStream, most: Duration) -> Option<Duration> {
    let t = Instant::now();
    s.set_read_timeout(Some(most)).expect("timeout");
    let mut buf = [0_u8; 1024];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Some(t.elapsed()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Some(t.elapsed()),
            Err(_) => return None,
        }
    }
}

#[test]
fn idle_and_slow_connections_are_closed_and_the_cap_holds_while_health_answers() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let p = proxy(&up, |o| {
        o.idle_timeout = Duration::from_millis(800);
        o.header_timeout = Duration::from_millis(300);
        o.max_connections = Some(3);
    });
    let a = p.addr();
    // Idle: nothing sent.
    let idle = open(a, b"");
    // A head that dribbles in a byte at a time (slowloris).
    let mut slow = open(a, b"GET /healthz HTTP/1.1\r\n");
    let dribble = std::thread::spawn(move || {
        for _ in 0..40 {
            if slow.write_all(b"x").is_err() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    });
    // With two of three connections taken, /healthz still answers.
    assert_eq!(call(a, "GET", "/healthz", &[], b"").status, 200);
    let idle_closed = closed_within(idle, Duration::from_secs(5)).expect("the idle one closed");
    assert!(idle_closed >= Duration::from_millis(500), "{idle_closed:?}");
    assert!(dribble.join().expect("thread"), "the slow head was cut off");
    // The cap: three idle connections hold every place; a fourth waits until the idle
    // timeout frees one, then is answered.
    let held: Vec<TcpStream> = (0..3).map(|_| open(a, b"")).collect();
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    assert_eq!(call(a, "GET", "/healthz", &[], b"").status, 200);
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "it waited: {:?}",
        t.elapsed()
    );
    drop(held);
    // A keep-alive connection that goes quiet after its response is closed too.
    let mut ka = open(a, b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n");
    let mut first = [0_u8; 64];
    let _ = ka.read(&mut first).expect("a response");
    assert!(closed_within(ka, Duration::from_secs(5)).is_some());
}

#[test]
fn a_body_that_stalls_gets_408_and_frees_its_connection() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let p = proxy(&up, |o| o.header_timeout = Duration::from_millis(300));
    let mut s = open(
        p.addr(),
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 100\r\n\r\n{\"mo",
    );
    let mut answer = String::new();
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(up.requests().is_empty());
}

/// The store file of a test, and a proxy on it.
fn on_file(up: &Upstream, name: &str) -> (cutctx_serve::Running, std::path::PathBuf) {
    let path = scratch(name).join("s.db");
    let p = proxy(up, |o| {
        o.state = cutctx_serve::StateSpec::Sqlite(path.clone());
        o.window = Some(WINDOW);
    });
    (p, path)
}

/// Whether every request the upstream received fits the window (by cutctx's own estimate).
fn sent_fit(up: &Upstream) -> bool {
    let estimator = cutctx::CharRatioEstimator::default();
    up.requests().iter().all(|r| {
        let doc = r.json();
        let tokens =
            cutctx::session::prompt_tokens(cutctx::formats::Format::OpenAiChat, &doc, &estimator)
                .expect("counted");
        tokens <= WINDOW
    })
}

#[test]
fn a_damaged_row_is_quarantined_and_the_conversation_goes_on_compacted() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let (p, path) = on_file(&up, "damaged-row");
    for calls in 1..=8 {
        assert_eq!(chat(p.addr(), &key("k"), &history(calls), &[]), 200);
    }
    let db = rusqlite::Connection::open(&path).expect("open");
    let changed = db
        .execute("UPDATE sessions SET state = '{\"not\": \"a state\"'", [])
        .expect("damage");
    assert_eq!(changed, 1);
    for calls in 9..=14 {
        assert_eq!(chat(p.addr(), &key("k"), &history(calls), &[]), 200);
    }
    let m = metrics(p.addr(), &[]);
    assert_eq!(metric(&m, "cutctx_serve_sessions_quarantined_total"), 1);
    assert_eq!(metric(&m, "cutctx_serve_fail_open_total"), 0);
    assert!(sent_fit(&up), "nothing over the window went out");
    let kept: i64 = db
        .query_row("SELECT COUNT(*) FROM quarantine", [], |r| r.get(0))
        .expect("quarantine");
    assert_eq!(kept, 1);
}

#[test]
fn a_damaged_file_is_moved_aside_and_the_proxy_starts_and_compacts() {
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    for (name, damage) in [
        ("truncated", 0_usize),
        ("overwritten", 1),
        ("random-middle", 2),
    ] {
        let (p, path) = on_file(&up, name);
        for calls in 1..=6 {
            assert_eq!(chat(p.addr(), &key("k"), &history(calls), &[]), 200);
        }
        p.stop();
        let mut bytes = std::fs::read(&path).expect("read");
        let wal = std::fs::read(path.with_extension("db-wal")).unwrap_or_default();
        assert!(
            bytes.len() + wal.len() > 4096,
            "{name}: something was stored"
        );
        match damage {
            0 => bytes.truncate(bytes.len() / 3),
            1 => bytes.iter_mut().take(200).for_each(|b| *b = 0x5a),
            _ => {
                let mid = bytes.len() / 2;
                for (i, b) in bytes.iter_mut().skip(mid).take(2048).enumerate() {
                    *b = u8::try_from(i * 7919 % 251).expect("a byte");
                }
            }
        }
        std::fs::write(&path, &bytes).expect("write");
        let _ = std::fs::remove_file(path.with_extension("db-wal"));
        let _ = std::fs::remove_file(path.with_extension("db-shm"));
        let (p, _) = {
            let p = proxy(&up, |o| {
                o.state = cutctx_serve::StateSpec::Sqlite(path.clone());
                o.window = Some(WINDOW);
            });
            (p, ())
        };
        for calls in 7..=12 {
            assert_eq!(
                chat(p.addr(), &key("k"), &history(calls), &[]),
                200,
                "{name}"
            );
        }
        let m = metrics(p.addr(), &[]);
        assert_eq!(metric(&m, "cutctx_serve_fail_open_total"), 0, "{name}");
        assert!(sent_fit(&up), "{name}: nothing over the window went out");
        let dir = path.parent().expect("dir");
        let aside = std::fs::read_dir(dir)
            .expect("dir")
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().contains(".damaged-"));
        if damage < 2 {
            assert!(aside, "{name}: the damaged file was moved aside");
        }
    }
}

#[cfg(unix)]
#[test]
fn the_store_and_its_journal_are_readable_by_their_owner_alone() {
    use std::os::unix::fs::PermissionsExt as _;
    let up = Upstream::start(|_, _| Reply::json(200, &json!({})));
    let dir = scratch("modes");
    let path = dir.join("s.db");
    let ledger = dir.join("firings.jsonl");
    let p = proxy(&up, |o| {
        o.state = cutctx_serve::StateSpec::Sqlite(path.clone());
        o.window = Some(WINDOW);
        o.ledger = Some(ledger.clone());
    });
    for calls in 1..=12 {
        assert_eq!(chat(p.addr(), &key("k"), &history(calls), &[]), 200);
    }
    for f in ["s.db", "s.db-wal", "s.db-shm", "firings.jsonl"] {
        let mode = std::fs::metadata(dir.join(f))
            .expect(f)
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{f}: {mode:o}");
    }
    drop(p);
    drop(up);
}
