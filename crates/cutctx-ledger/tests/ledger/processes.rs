//! Real processes: concurrent appenders and crashes mid-write.
//!
//! The child processes are this test binary itself, re-invoked with `--exact
//! processes::child_role` and `CUTCTX_RECEIPTS_CHILD` naming the role; run normally,
//! `child_role` sees no role and returns at once.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cutctx_ledger::ledger::verify_file;
use cutctx_ledger::{Ledger, SystemClock};
use cutctx_receipts::chain::BreakKind;
use cutctx_receipts::json::Value;

use crate::support::{lines_of, object, scratch};

const ROLE: &str = "CUTCTX_RECEIPTS_CHILD";

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

fn env(key: &str) -> String {
    std::env::var(key).unwrap_or_default()
}

fn env_num(key: &str) -> u128 {
    env(key).parse().unwrap_or(0)
}

/// The child side. Roles:
///
/// * `append`: wait until `START_MS`, then append `ROWS` rows `{"writer", "seq", "pad"}`;
/// * `torn`: append `ROWS` rows, write half of one more line, and abort (a crash mid-write);
/// * `flood`: append rows of `PAD` bytes until killed;
/// * `interop`: write the ledger `scripts/arcaeon-check.sh` holds to arcaeon's verifier when
///   the `cutctx` binary cannot (see [`crate::interop`]).
#[test]
fn child_role() {
    let role = env(ROLE);
    if role.is_empty() {
        return;
    }
    let ledger = Ledger::new(env("LEDGER")).with_lock_timeout(Duration::from_secs(120));
    let writer = env("WRITER");
    let rows = env_num("ROWS");
    let pad = "p".repeat(usize::try_from(env_num("PAD")).unwrap_or(0));
    let row = |seq: u128| {
        let mut o = object(r#"{"writer": null, "seq": null}"#);
        o.insert("writer", Value::str(&writer));
        o.insert("seq", Value::str(&seq.to_string()));
        o.insert("pad", Value::str(&pad));
        o
    };
    match role.as_str() {
        "append" => {
            let start = env_num("START_MS");
            while now_ms() < start {
                std::thread::sleep(Duration::from_millis(1));
            }
            for seq in 0..rows {
                ledger.append(&row(seq), &SystemClock).expect("appends");
            }
        }
        "torn" => {
            for seq in 0..rows {
                ledger.append(&row(seq), &SystemClock).expect("appends");
            }
            let line = r#"{"writer": "torn", "seq": "99", "pad": "", "ts": "2026-01-01T00:00:00Z", "chain": "0123"#;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(ledger.path())
                .expect("opens");
            f.write_all(line.as_bytes()).expect("writes");
            f.sync_all().expect("syncs");
            std::process::abort();
        }
        "interop" => crate::interop::write(
            Path::new(&env("LEDGER")),
            Path::new(&env("CONTENT_OUT")),
            Path::new(&env("PIN_OUT")),
        ),
        "flood" => {
            for seq in 0.. {
                ledger.append(&row(seq), &SystemClock).expect("appends");
            }
        }
        other => panic!("unknown child role {other}"),
    }
}

fn spawn(role: &str, ledger: &Path, vars: &[(&str, String)]) -> Child {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(exe);
    cmd.args([
        "--exact",
        "processes::child_role",
        "--test-threads",
        "1",
        "--quiet",
    ])
    .env(ROLE, role)
    .env("LEDGER", ledger)
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.spawn().expect("the child starts")
}

#[test]
fn concurrent_writers_never_interleave_or_fork_the_chain() {
    let dir = scratch("concurrent");
    let path = dir.join("log.jsonl");
    let (writers, rows) = (6_usize, 40_usize);
    let start = now_ms() + 400;
    let children: Vec<Child> = (0..writers)
        .map(|w| {
            spawn(
                "append",
                &path,
                &[
                    ("WRITER", format!("w{w}")),
                    ("ROWS", rows.to_string()),
                    ("PAD", (w * 700).to_string()),
                    ("START_MS", start.to_string()),
                ],
            )
        })
        .collect();
    for child in children {
        let out = child.wait_with_output().expect("the child finishes");
        assert!(
            out.status.success(),
            "a writer failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let v = verify_file(&path, true);
    assert_eq!(v.all_breaks, []);
    assert_eq!(
        (v.ok, v.rows, v.chained),
        (Some(true), writers * rows, writers * rows)
    );
    // Every writer's rows are all there, whole, once each, in its own order.
    let mut seen: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for line in lines_of(&path) {
        let row = object(&line);
        let writer = row
            .get("writer")
            .and_then(Value::as_str)
            .expect("writer")
            .to_owned();
        let seq: u64 = row
            .get("seq")
            .and_then(Value::as_str)
            .and_then(|s| s.parse().ok())
            .expect("seq");
        seen.entry(writer).or_default().push(seq);
    }
    assert_eq!(seen.len(), writers);
    for (writer, seqs) in seen {
        assert_eq!(seqs, (0..rows as u64).collect::<Vec<_>>(), "{writer}");
    }
}

#[test]
fn a_crash_mid_write_tears_only_the_last_line_and_the_next_append_heals_it() {
    let dir = scratch("torn_process");
    let path = dir.join("log.jsonl");
    let out = spawn(
        "torn",
        &path,
        &[("WRITER", "t".into()), ("ROWS", "3".into())],
    )
    .wait_with_output()
    .expect("the child finishes");
    assert!(!out.status.success(), "the child crashed on purpose");
    let v = verify_file(&path, false);
    assert_eq!((v.rows, v.breaks), (3, 1));
    assert_eq!(v.all_breaks[0].kind, BreakKind::TornLine);
    assert_eq!(v.first_break.as_deref(), Some("line 4: unparseable"));
    let intact = lines_of(&path);

    let ledger = Ledger::new(&path);
    let appended = ledger
        .append(&object(r#"{"after": "crash"}"#), &SystemClock)
        .expect("appends");
    assert!(appended.healed);
    let now = lines_of(&path);
    assert_eq!(now[..4], intact[..4]);
    let v = verify_file(&path, false);
    assert_eq!((v.rows, v.chained, v.breaks), (4, 4, 1));
    assert_eq!(v.all_breaks[0].kind, BreakKind::Unparseable);
    assert_eq!(v.all_breaks[0].line, 4);
}

#[test]
fn killing_writers_at_random_never_breaks_the_chain_before_the_tear() {
    let dir = scratch("killed");
    let path = dir.join("log.jsonl");
    let mut torn_lines = 0;
    let rounds = 6_u64;
    for round in 0..rounds {
        let mut child = spawn(
            "flood",
            &path,
            &[
                ("WRITER", format!("r{round}")),
                ("PAD", (100_000 + round * 33_333).to_string()),
            ],
        );
        let base = std::fs::metadata(&path).map_or(0, |m| m.len());
        let deadline = Instant::now() + Duration::from_secs(60);
        // Let it write a few rows, then kill it at an arbitrary moment.
        while std::fs::metadata(&path).map_or(0, |m| m.len()) < base + 400_000
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_micros(round * 1_700));
        child.kill().expect("the child is killed");
        let _ = child.wait();
        let v = verify_file(&path, false);
        // Only the last line may be damaged, and only as a tear.
        for b in &v.all_breaks {
            assert!(
                matches!(b.kind, BreakKind::TornLine | BreakKind::Unparseable),
                "round {round}: {b:?}"
            );
        }
        if v.all_breaks.iter().any(|b| b.kind == BreakKind::TornLine) {
            torn_lines += 1;
        }
        assert_eq!(v.breaks, torn_lines, "round {round}");
        // The next writer heals and chains on.
        Ledger::new(&path)
            .append(&object(r#"{"heal": true}"#), &SystemClock)
            .expect("appends");
        let v = verify_file(&path, false);
        assert!(
            v.all_breaks
                .iter()
                .all(|b| b.kind == BreakKind::Unparseable)
        );
        assert_eq!(v.breaks, torn_lines);
    }
    eprintln!("killed {rounds} writers mid-stream; {torn_lines} left a torn line");
}
