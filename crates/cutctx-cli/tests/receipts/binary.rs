//! The `cutctx` binary end to end, once `compact --ledger`, `receipt seal` and `ledger` are
//! wired into it: exit statuses, byte-identical `compact` output, and concurrent appenders as
//! real processes.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::support::{
    compaction_content, mask_and_summary_request, read, sample_dir, scratch, with_summaries, write,
};

fn cutctx<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cutctx"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("the cutctx binary runs")
}

/// Whether the binary knows the ledger subcommands yet; says so when it does not.
fn wired() -> bool {
    let dir = scratch("wired_probe");
    let out = cutctx(&[
        "ledger".as_ref(),
        "head".as_ref(),
        dir.join("probe.jsonl").as_os_str(),
    ]);
    if out.status.success() {
        return true;
    }
    eprintln!(
        "SKIP: the cutctx binary does not run `ledger head` yet (wire src/ledger.rs into \
         main.rs): {}",
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .next()
            .unwrap_or_default()
    );
    false
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

#[test]
fn ledger_verify_exit_statuses() {
    let Some(sample) = sample_dir() else { return };
    if !wired() {
        return;
    }
    let ledger = sample.join("receipts.jsonl");
    let pin = sample.join("receipts.head.txt");
    let content = sample.join("content.json");
    let out = cutctx(&[
        "ledger".as_ref(),
        "verify".as_ref(),
        ledger.as_os_str(),
        "--pin".as_ref(),
        pin.as_os_str(),
        "--content".as_ref(),
        content.as_os_str(),
    ]);
    assert_eq!(
        code(&out),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("a JSON verdict");
    assert_eq!(v["verdict"], "VERIFIED");

    let dir = scratch("binary_verify");
    let edited = write(
        &dir,
        "edited.jsonl",
        &read(&ledger).replacen("\"count\": 6", "\"count\": 7", 1),
    );
    let out = cutctx(&["ledger".as_ref(), "verify".as_ref(), edited.as_os_str()]);
    assert_eq!(code(&out), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).expect("a JSON verdict");
    assert_eq!(v["first_failure"]["line"], 1);

    let out = cutctx(&[
        "ledger".as_ref(),
        "verify".as_ref(),
        dir.join("missing.jsonl").as_os_str(),
    ]);
    assert_eq!(code(&out), Some(2));
    assert!(out.stdout.is_empty());

    let out = cutctx(&["ledger".as_ref(), "head".as_ref(), ledger.as_os_str()]);
    assert_eq!(code(&out), Some(0));
    let printed = String::from_utf8(out.stdout).expect("UTF-8");
    assert!(
        printed.starts_with(
            "arcaeon-ledger head chain=f1169c094c7a99b2afbb9a283da4535b rows=3 as_of="
        )
    );
}

#[test]
fn compact_with_a_ledger_prints_what_compact_prints() {
    if !wired() {
        return;
    }
    let dir = scratch("binary_compact");
    let request = with_summaries(mask_and_summary_request());
    let req = write(&dir, "request.json", &request.to_string());
    let ledger = dir.join("receipts.jsonl");
    let plain = cutctx(&["compact".as_ref(), req.as_os_str()]);
    let with = cutctx(&[
        "compact".as_ref(),
        req.as_os_str(),
        "--ledger".as_ref(),
        ledger.as_os_str(),
        "--compactor".as_ref(),
        "agent-7".as_ref(),
    ]);
    assert_eq!(
        code(&with),
        Some(0),
        "{}",
        String::from_utf8_lossy(&with.stderr)
    );
    assert_eq!(with.stdout, plain.stdout);
    let content = write(
        &dir,
        "content.json",
        &compaction_content(
            1,
            &request,
            std::str::from_utf8(&with.stdout).expect("UTF-8"),
        ),
    );
    let out = cutctx(&[
        "ledger".as_ref(),
        "verify".as_ref(),
        ledger.as_os_str(),
        "--content".as_ref(),
        content.as_os_str(),
    ]);
    assert_eq!(
        code(&out),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn concurrent_receipt_seals_never_interleave_or_fork_the_chain() {
    if !wired() {
        return;
    }
    let dir = scratch("binary_concurrent");
    let ledger = dir.join("receipts.jsonl");
    let pre = write(
        &dir,
        "pre.json",
        &format!(
            "[{}]",
            (0..200)
                .map(|i| format!("\"item {i} {}\"", "z".repeat(i * 40)))
                .collect::<Vec<_>>()
                .join(",")
        ),
    );
    let post = write(&dir, "post.json", "[\"item 0 \", \"summary\"]");
    let seal = |i: usize, ledger: &Path| {
        Command::new(env!("CARGO_BIN_EXE_cutctx"))
            .args(["receipt", "seal", "--pre"])
            .arg(&pre)
            .arg("--post")
            .arg(&post)
            .arg("--ledger")
            .arg(ledger)
            .args(["--compactor", &format!("writer-{i}"), "--method", "test"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cutctx starts")
    };
    let writers = 12;
    let children: Vec<_> = (0..writers).map(|i| seal(i, &ledger)).collect();
    for child in children {
        let out = child.wait_with_output().expect("cutctx finishes");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let out = cutctx(&[
        "ledger".as_ref(),
        "verify".as_ref(),
        ledger.as_os_str(),
        "--strict".as_ref(),
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("a JSON verdict");
    assert_eq!(code(&out), Some(0), "{v}");
    assert_eq!(v["ledger"]["rows"], writers);
    assert_eq!(v["ledger"]["chained"], writers);
}
