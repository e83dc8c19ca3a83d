//! The request document's operations (`plan`, `compact`, `apply`) held to each other
//! however the request is read (held whole, or where it lies in its file) and the output
//! written (whole, in parts, or copied from the file), and a file that changes while it is
//! read found out.

/// A request of `n` user turns of about a hundred bytes each, half of them kept.
fn request(n: usize) -> String {
    let turns: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"turn_id":"t{i}","role":"user","content":"{i} \"quoted\" {}","token_estimate":10}}"#,
                "x".repeat(80)
            )
        })
        .collect();
    format!(
        r#"{{"transcript":[{}],"budget":{{"max_tokens":{}}},"policy":{{"name":"drop_oldest"}}}}"#,
        turns.join(","),
        n * 5
    )
}

/// `request(n)` in a temporary file named for `name`, compacted where it lies.
fn compacted_file(name: &str, n: usize) -> (std::path::PathBuf, String, super::CompactedFile) {
    let text = request(n);
    let (path, file) = super::input::temp_request_file(name, text.as_bytes());
    let compacted =
        super::compact_file(file, |_| panic!("read where it lies")).expect("a valid request");
    (path, text, compacted)
}

/// A request of `n` turn records each written as the canonical writer writes its turn,
/// for dropping the older half: the view is one long run of records as they stand.
fn canonical_request(n: usize) -> String {
    let turns: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"content":"{i} \"quoted\" {}","metadata":{{}},"pinned":false,"role":"user","token_estimate":10,"tool_call_id":null,"turn_id":"t{i}"}}"#,
                "x".repeat(120)
            )
        })
        .collect();
    format!(
        r#"{{"budget":{{"max_tokens":{}}},"policy":{{"name":"drop_oldest"}},"transcript":[{}]}}"#,
        n * 5,
        turns.join(","),
    )
}

#[test]
fn a_long_run_of_kept_records_is_copied_from_the_file_as_it_would_be_written() {
    let text = canonical_request(20_000);
    let expected = super::compact(&text).expect("compacted");
    let (path, file) = super::input::temp_request_file("copied", text.as_bytes());
    let mut compacted =
        super::compact_file(file, |_| panic!("read where it lies")).expect("a valid request");
    let (left, located) = compacted
        .0
        .left
        .as_ref()
        .expect("contents left in the file");
    let runs = left.copied_runs(located, crate::request_text::COPIED_RUN_BYTES);
    assert_eq!(runs.len(), 1, "the newest half, one run");
    // Into a vector, and into a file through standard output's writer (a copy the
    // kernel makes).
    let mut written = Vec::new();
    compacted.write_copying_to(&mut written).expect("written");
    assert!(written == expected.as_bytes(), "into a vector");
    let out_path = path.with_extension("out");
    let out_file = std::fs::File::create(&out_path).expect("an output file");
    let mut out = super::output::Stdout::of_file(out_file);
    compacted.write_copying_to(&mut out).expect("written");
    drop(out);
    let copied = std::fs::read(&out_path).expect("the output");
    assert!(copied == expected.as_bytes(), "into a file");
    // The file cut short after planning, its first check passed: the copy comes up
    // short, an `INPUT_ERROR`, the output's end never written.
    let cut = text.len() - text.len() / 4;
    std::fs::write(&path, &text.as_bytes()[..cut]).expect("cut");
    let mut written = Vec::new();
    let err = compacted
        .0
        .write_out(&mut written, Some((crate::compacted::copy_from_file, 1)))
        .expect_err("cut short");
    let carried = err
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<super::OpsError>())
        .map(|cli| cli.code);
    assert_eq!(carried, Some(super::INPUT_ERROR));
    assert!(!written.is_empty() && !written.ends_with(b"}\n"));
    for p in [&path, &out_path] {
        std::fs::remove_file(p).expect("removed");
    }
}

#[test]
fn a_request_read_where_it_lies_gives_the_output_of_its_text() {
    let (path, text, mut compacted) = compacted_file("same", 3_000);
    let mut written = Vec::new();
    compacted.write_to(&mut written).expect("written");
    std::fs::remove_file(&path).expect("removed");
    assert_eq!(
        String::from_utf8(written).expect("UTF-8"),
        super::compact(&text).expect("compacted")
    );
}

#[test]
fn a_stored_plan_applied_to_a_request_read_where_it_lies_gives_the_output_of_its_text() {
    let text = request(3_000);
    let plan = super::plan(&text).expect("a plan");
    let (path, file) = super::input::temp_request_file("apply", text.as_bytes());
    let mut applied =
        super::apply_file(file, &plan, |_| panic!("read where it lies")).expect("applied");
    let mut written = Vec::new();
    applied.write_to(&mut written).expect("written");
    std::fs::remove_file(&path).expect("removed");
    let expected = super::apply(&text, &plan).expect("applied");
    assert_eq!(String::from_utf8(written).expect("UTF-8"), expected);
}

#[test]
fn a_request_read_where_it_lies_is_planned_as_its_text() {
    let text = request(3_000);
    let (path, file) = super::input::temp_request_file("plan", text.as_bytes());
    let planned = super::plan_file(file, |_| panic!("read where it lies"));
    std::fs::remove_file(&path).expect("removed");
    assert_eq!(planned, super::plan(&text));
}

#[test]
fn a_request_file_that_changes_after_it_is_read_is_an_input_error() {
    let carried = |e: &std::io::Error| {
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<super::OpsError>())
            .map(|cli| cli.code)
    };
    // Grown by a space after planning: found changed before the output's first byte.
    let (path, text, mut compacted) = compacted_file("grown", 3_000);
    std::fs::write(&path, format!("{text} ")).expect("rewritten");
    let mut written = Vec::new();
    let err = compacted.write_to(&mut written).expect_err("changed");
    assert_eq!(carried(&err), Some(super::INPUT_ERROR));
    assert!(written.is_empty());
    // Changed once that check is passed (the output written as `CompactedFile` writes it
    // after it): found after the view's last turn, the output's end never written.
    let err = compacted.0.write_to(&mut written).expect_err("changed");
    assert_eq!(carried(&err), Some(super::INPUT_ERROR));
    assert!(written.len() > 3 * crate::compacted::WRITE_PART_BYTES && !written.ends_with(b"}\n"));
    // The same length, a kept record in the middle of the view no longer UTF-8: found
    // where it is read again, the view's second half never written (a change found only
    // at the end would leave at most its last part unwritten). A view on one thread and
    // one long enough for two.
    for n in [8_000, 2 * crate::compacted::PARALLEL_REPORT_TURNS + 2_000] {
        let (path2, text2, mut compacted2) = compacted_file(&format!("broken-{n}"), n);
        let expected = super::compact(&text2).expect("compacted");
        let view = expected.len() - expected.find("\"transcript\":").expect("a view");
        // Inside the content of the turn three quarters in: a content is read again
        // whatever the record around it.
        let quarter = text2.len() * 3 / 4;
        let at = quarter + text2[quarter..].find("\"content\":\"").expect("a turn") + 12;
        let mut bytes = text2.into_bytes();
        bytes[at] = 0xff;
        std::fs::write(&path2, &bytes).expect("rewritten");
        let mut written = Vec::new();
        let err = compacted2.0.write_to(&mut written).expect_err("not UTF-8");
        assert_eq!(carried(&err), Some(super::INPUT_ERROR));
        assert!(view > 4 * crate::compacted::WRITE_PART_BYTES, "{view}");
        let unwritten = expected.len() - written.len();
        assert!(unwritten > view / 3, "{n}: {unwritten} of {view} unwritten");
        // Through the command's delivery: the `INPUT_ERROR` itself, before any output.
        let mut delivered_bytes = Vec::new();
        let delivered =
            super::output::deliver_with(&mut delivered_bytes, |w| compacted2.write_to(w));
        assert_eq!(
            delivered.map_err(|e| e.code).err(),
            Some(super::INPUT_ERROR)
        );
        assert!(delivered_bytes.is_empty());
        std::fs::remove_file(&path2).expect("removed");
    }
    std::fs::remove_file(&path).expect("removed");
}

#[test]
fn the_output_written_in_parts_is_the_output_made_whole() {
    // Large enough that the transcript is written in several parts.
    let text = request(3_000);
    let whole = super::compact(&text).expect("a valid request");
    let mut written = Vec::new();
    super::compact_retaining(text)
        .expect("a valid request")
        .write_to(&mut written)
        .expect("a vector takes every write");
    assert!(whole.len() > 3 * crate::compacted::WRITE_PART_BYTES);
    assert_eq!(String::from_utf8(written).expect("UTF-8"), whole);
}

#[test]
fn a_large_output_is_what_the_executor_reports() {
    // Enough actions that the plan is written and hashed beside the walk: the bytes are
    // the plan's, report's and view's canonical JSON as the executor makes them, its
    // `plan_hash` included.
    let n = crate::compacted::PARALLEL_PLAN_ACTIONS + 10;
    let text = request(n);
    let req = super::request::parse(&text).expect("a valid request");
    let plan = req
        .policy
        .decide(&req.transcript, &req.budget)
        .expect("a plan");
    let out = cutctx::apply(&req.transcript, &plan, &req.summaries).expect("applied");
    let expected = format!(
        "{{\"plan\":{},\"report\":{},\"transcript\":{}}}\n",
        plan.canonical_json(),
        out.report.canonical_json(),
        out.transcript.canonical_json()
    );
    assert_eq!(out.report.plan_hash.len(), 64);
    assert_eq!(super::compact(&text).expect("compacted"), expected);
    let mut written = Vec::new();
    super::compact_retaining(text)
        .expect("a valid request")
        .write_to(&mut written)
        .expect("a vector takes every write");
    assert_eq!(String::from_utf8(written).expect("UTF-8"), expected);
}

#[test]
fn a_failed_write_is_an_error() {
    /// Takes `room` bytes, then fails.
    struct Full {
        room: usize,
    }
    impl std::io::Write for Full {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::ErrorKind::StorageFull.into());
            }
            let n = buf.len().min(self.room);
            self.room -= n;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut compacted = super::compact_retaining(request(3_000)).expect("a valid request");
    for room in [0, 10, crate::compacted::WRITE_PART_BYTES + 7] {
        let e = compacted
            .write_to(&mut Full { room })
            .expect_err("the writer fills");
        assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{room}");
    }
}
