//! The output of a request compacted with its contents left in its text held to the output
//! of the path that decodes every content, byte for byte and error for error: for every
//! policy and budget, whole and in parts, read where it lies in a file, on one thread and two.

use std::sync::{Arc, Mutex};

use cutctx::formats::left_in_text::HashAhead;
use cutctx::{CompactionBudget, CompactionPolicy, DropOldestPolicy};
use proptest::prelude::*;

use super::RequestText;
use crate::request::{parse, parse_leaving};
use cutctx_json::{Style, Writer, write_turn_with};

/// Content pieces as a request may spell them: plain, escaped as the canonical writer
/// escapes, escaped otherwise (`\/`, `\u0041`, upper-case hex, a surrogate pair), and
/// text that looks like the list's own punctuation.
const PIECES: [&str; 12] = [
    "log line ",
    r#"\"quoted\" "#,
    r"back\\slash ",
    r"\n\t",
    r"\u001f",
    r"a\/b ",
    r"\u0041",
    r"\u001F",
    r"\uD83D\uDE00",
    "é 😀 ",
    r#"]},{\"turn_id\":\"x\"} "#,
    "",
];

/// One turn record: `kind` picks the spelling (usual, keys reordered with whitespace,
/// the content key missing, a key spelled with an escape, which only the strict parse
/// takes).
fn record(i: usize, role: &str, call: Option<&str>, content: &str, kind: u8) -> String {
    let call = call.map_or_else(|| "null".to_owned(), |c| format!("\"{c}\""));
    // Large enough that a stub is worth it: masking replaces only what it shrinks.
    let estimate = 5 + content.len() * 4;
    // Written as the canonical writer writes the turn (kind 4, 5), or nearly so (6 to 9:
    // a space, metadata, an escaped id, an empty map with a space inside).
    let canonical = |metadata: &str, pinned: bool, id: &str| {
        format!(
            r#"{{"content":"{content}","metadata":{metadata},"pinned":{pinned},"role":"{role}","token_estimate":{estimate},"tool_call_id":{call},"turn_id":"{id}"}}"#
        )
    };
    match kind {
        0 => format!(
            r#"{{"turn_id":"t{i}","role":"{role}","content":"{content}","token_estimate":{estimate},"tool_call_id":{call}}}"#
        ),
        1 => format!(
            r#" {{ "tool_call_id" : {call}, "content" : "{content}" , "token_estimate":{estimate},"metadata":{{"k":"v"}},"role":"{role}","turn_id":"t{i}"}} "#
        ),
        2 => format!(
            r#"{{"turn_id":"t{i}","role":"{role}","token_estimate":{estimate},"tool_call_id":{call}}}"#
        ),
        3 => format!(
            r#"{{"turn\u005fid":"t{i}","role":"{role}","content":"{content}","token_estimate":{estimate},"tool_call_id":{call}}}"#
        ),
        4 => canonical("{}", false, &format!("t{i}")),
        5 => canonical("{}", true, &format!("t{i}")),
        6 => canonical("{}", false, &format!("t{i}")).replacen("\"pinned\":", "\"pinned\": ", 1),
        7 => canonical(r#"{"k":"v"}"#, false, &format!("t{i}")),
        8 => canonical("{}", false, &format!("\\u0074{i}")),
        _ => canonical("{ }", false, &format!("t{i}")),
    }
}

/// A request of `contents.len()` turns after a system turn, in repeating assistant-call /
/// tool-result / user turns, with `policy` and a budget of `share` percent of the turns'
/// estimates.
fn request(contents: &[(Vec<usize>, u8)], policy: &str, share: u64, protected: u64) -> String {
    let mut turns = vec![record(0, "system", None, "rules", 0)];
    for (k, (pieces, kind)) in contents.iter().enumerate() {
        let i = k + 1;
        let content: String = pieces.iter().map(|&p| PIECES[p % PIECES.len()]).collect();
        let cycle = k / 3;
        let (role, call) = match k % 3 {
            0 => ("assistant", Some(format!("c{cycle}"))),
            1 => ("tool", Some(format!("c{cycle}"))),
            _ => ("user", None),
        };
        turns.push(record(i, role, call.as_deref(), &content, *kind));
    }
    let total: u64 = turns
        .iter()
        .filter_map(|t| {
            let at = t.find("\"token_estimate\":")? + 17;
            t[at..].split([',', '}']).next()?.trim().parse::<u64>().ok()
        })
        .sum();
    let budget = total * share / 100;
    let summaries: Vec<String> = (0..contents.len())
        .map(|k| format!(r#""g{k}":"summary {k}""#))
        .collect();
    format!(
        r#"{{"transcript":[{}],"budget":{{"max_tokens":{budget},"protected_recent_turns":{protected}}},"policy":{policy},"summaries":{{{}}}}}"#,
        turns.join(","),
        summaries.join(",")
    )
}

const POLICIES: [&str; 6] = [
    r#"{"name":"drop_oldest"}"#,
    r#"{"name":"observation_masking","keep_recent_results":0}"#,
    r#"{"name":"observation_masking","keep_recent_results":2}"#,
    r#"{"name":"summarizing","prompt_id":"p.v1"}"#,
    r#"{"name":"default_chain","prompt_id":"p.v1","keep_recent_results":1}"#,
    r#"{"name":"chain","policies":[{"name":"observation_masking","keep_recent_results":0},{"name":"drop_oldest"}]}"#,
];

/// The output, or the error as its JSON line.
fn outcome(r: Result<String, crate::OpsError>) -> Result<String, String> {
    r.map_err(|e| e.to_json_line())
}

/// The compaction of `text` read where it lies in a file, in windows of 64 bytes on
/// `threads` threads, written out (with `copied`, each run of turns written as the file
/// spans them and at least that long copied from the file); `None` when it is not read
/// so (left to the whole).
fn compacted_from_file(
    text: &str,
    threads: usize,
    copied: Option<usize>,
) -> Option<Result<String, String>> {
    let (path, file) = crate::input::temp_request_file("left", text.as_bytes());
    let leaving = crate::request::parse_leaving_file_in(&file, 64, threads);
    let out = leaving.map(|leaving| {
        let compacted = leaving.and_then(|leaving| {
            let (mut req, mut left) = RequestText::in_file(leaving, file);
            let plan = left.plan(&mut req)?;
            crate::compacted::compacted_with(req, plan, Some(left))
        });
        let mut written = Vec::new();
        compacted
            .map_err(|e| e.to_json_line())
            .and_then(|c| {
                match copied {
                    None => crate::CompactedFile(c).write_to(&mut written),
                    Some(shortest) => {
                        crate::CompactedFile(c).write_copying_runs_to(&mut written, shortest)
                    }
                }
                .map_err(|e| e.to_string())
            })
            .map(|()| String::from_utf8(written).expect("UTF-8"))
    });
    std::fs::remove_file(&path).expect("removed");
    out
}

/// A compaction's output made whole, and written in parts, each as an [`outcome`].
fn whole_and_in_parts(
    compacted: Result<crate::Compacted, crate::OpsError>,
) -> (Result<String, String>, Result<String, String>) {
    let mut written = Vec::new();
    let mut compacted = compacted;
    let in_parts = match &mut compacted {
        Ok(c) => outcome(
            c.write_to(&mut written)
                .map(|()| String::from_utf8(written).expect("UTF-8"))
                .map_err(|_| unreachable!("a vector takes every write")),
        ),
        Err(e) => Err(e.to_json_line()),
    };
    (
        outcome(compacted.map(crate::Compacted::into_text)),
        in_parts,
    )
}

#[test]
fn a_view_long_enough_for_two_writers_is_written_as_one_writes_it() {
    // Contents of every spelling, most kept: the view is written in blocks on two threads.
    let n = super::view::PARALLEL_WRITE_TURNS + 2 * super::view::WRITE_BLOCK_TURNS + 5;
    let contents: Vec<(Vec<usize>, u8)> = (0..n)
        .map(|k| (vec![k, k / 7, k / 3 + 1], if k % 11 == 5 { 1 } else { 4 }))
        .collect();
    let text = request(
        &contents,
        r#"{"name":"observation_masking","keep_recent_results":2}"#,
        90,
        4,
    );
    let expected = crate::compact(&text).expect("a valid request");
    let (whole, in_parts) = whole_and_in_parts(crate::compact_text(text.clone()));
    assert_eq!(whole.as_deref(), Ok(expected.as_str()));
    assert_eq!(in_parts.as_deref(), Ok(expected.as_str()));
    // The two writers, called directly whatever the machine's cores: drained in parts,
    // and kept whole by a drain that keeps what it is given.
    let c = crate::compact_text(text.clone()).expect("a valid request");
    let (left, located) = c.left.as_ref().expect("contents left in the text");
    let view = &c.out.transcript;
    let transcript = expected
        .rfind("\"transcript\":")
        .and_then(|at| expected.get(at + 13..expected.len() - 2))
        .expect("the output's transcript");
    for part in [1, crate::compacted::WRITE_PART_BYTES, usize::MAX] {
        let mut written = String::new();
        let mut buf = String::from("[");
        let drained = left.write_turns_on_two(
            view.turns(),
            0..view.len(),
            located,
            &mut buf,
            part,
            &mut |b: &mut String| {
                if part < usize::MAX {
                    written.push_str(b);
                    b.clear();
                }
                Ok::<(), ()>(())
            },
            &|_| (),
        );
        assert_eq!(drained, Ok(()));
        written.push_str(&buf);
        written.push(']');
        assert_eq!(written, transcript, "{part}");
    }
    // A writer that fails partway fails the writing, wherever it fails.
    struct Full(usize);
    impl std::io::Write for Full {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.0 == 0 {
                return Err(std::io::ErrorKind::StorageFull.into());
            }
            let n = buf.len().min(self.0);
            self.0 -= n;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = crate::compact_text(text).expect("a valid request");
    for room in [expected.len() / 3, expected.len() - 10] {
        let e = c.write_to(&mut Full(room)).expect_err("the writer fills");
        assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{room}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Left in the text or decoded, the output's bytes (or the error) are the same, for
    /// every policy and budget, whether written whole or in parts.
    #[test]
    fn contents_left_in_the_text_give_the_bytes_decoded_ones_give(
        contents in prop::collection::vec(
            (prop::collection::vec(0..PIECES.len(), 0..6), prop_oneof![6 => 0_u8..3, 1 => Just(3_u8), 6 => 4_u8..10]),
            0..30,
        ),
        policy in 0..POLICIES.len(),
        share in 1_u64..=100,
        protected in 0_u64..4,
    ) {
        let text = request(&contents, POLICIES[policy], share, protected);
        // Every content the quick reader takes (a usual record's) is left in the text, the
        // system turn's among them: the text path is the one tested. A record only the
        // strict parse takes is built decoded, beside them.
        let usual = 1 + contents.iter().filter(|(_, kind)| !matches!(kind, 2 | 3)).count();
        match parse_leaving(&text).expect("a valid document") {
            Ok(leaving) => prop_assert_eq!(leaving.left.len(), usual),
            Err(e) => prop_assert!(crate::compact(&text).is_err(), "{}", e.to_json_line()),
        }
        let expected = outcome(crate::compact(&text));
        let (whole, in_parts) = whole_and_in_parts(crate::compact_text(text.clone()));
        prop_assert_eq!(&whole, &expected);
        prop_assert_eq!(&in_parts, &expected);
        // With the tool results' digests hashed ahead on a second thread, however far it
        // got before they were asked for: the same.
        let ahead = parse_leaving(&text).expect("a valid document").and_then(|leaving| {
            let (mut req, mut lt) = RequestText::new(leaving, text.clone());
            let plan = super::plan_hashing(&mut req, &lt.text, &mut lt.left, HashAhead::Always)?;
            crate::compacted::compacted_with(req, plan, Some(lt))
        });
        prop_assert_eq!(&outcome(ahead.map(crate::Compacted::into_text)), &expected);
        // Read where it lies in a file, in windows of a few elements, on two threads and
        // on one: the same, when the file is read so at all.
        // Written with every run of turns the file spans as they are written copied
        // from the file, or those of a few records or more: the same.
        for (threads, copied) in [(2, None), (1, None), (1, Some(1)), (1, Some(300))] {
            match compacted_from_file(&text, threads, copied) {
                Some(from_file) => prop_assert_eq!(
                    &from_file, &expected, "{} threads, copied {:?}", threads, copied
                ),
                // Read whole by the text's reader, so on one thread by the file's.
                None => prop_assert!(threads > 1, "a usual request is read on one thread"),
            }
        }
        // `cutctx plan` plans with the contents left too.
        let decoded_plan = parse(&text).and_then(|r| {
            let plan = r.policy.decide(&r.transcript, &r.budget)?;
            Ok(plan.canonical_json() + "\n")
        });
        prop_assert_eq!(outcome(crate::plan(&text)), outcome(decoded_plan));
        // `cutctx apply` leaves the contents in the text too: for the request's own plan,
        // one made for another policy and budget (most break a rule here), and the own
        // plan with its last kept turn dropped (breaking the arithmetic, or a protected
        // turn) or a turn renamed (a mismatch), the same bytes, whole and in parts, or the
        // same error.
        if let Ok(own) = crate::plan(&text) {
            let other = request(&contents, POLICIES[(policy + 1) % POLICIES.len()], share.div_ceil(2), protected);
            let foreign = crate::plan(&other).unwrap_or_else(|_| own.clone());
            let broken = match own.rfind(r#"{"action":"keep""#) {
                Some(at) => format!("{}{{\"action\":\"drop\"{}", &own[..at], &own[at + 16..]),
                None => own.clone(),
            };
            let renamed = own.replacen(r#""turn_id":"t0""#, r#""turn_id":"x0""#, 1);
            for stored in [&own, &foreign, &broken, &renamed] {
                let expected = outcome(crate::apply(&text, stored));
                let (whole, in_parts) = whole_and_in_parts(crate::apply_text(text.clone(), stored));
                prop_assert_eq!(&whole, &expected);
                prop_assert_eq!(&in_parts, &expected);
            }
        }
    }
}

/// A policy that reads contents: it notes every content it is given, then drops the
/// oldest turns.
struct Reading(Arc<Mutex<Vec<String>>>);

impl CompactionPolicy for Reading {
    fn name(&self) -> &str {
        "reading"
    }

    fn version(&self) -> &str {
        "1"
    }

    fn decide(
        &self,
        t: &cutctx::Transcript,
        b: &CompactionBudget,
    ) -> Result<cutctx::CompactionPlan, cutctx::CompactionError> {
        if let Ok(mut seen) = self.0.lock() {
            *seen = t.turns().iter().map(|x| x.content().to_owned()).collect();
        }
        DropOldestPolicy.decide(t, b)
    }
}

#[test]
fn a_policy_that_reads_contents_is_given_them_all_decoded() {
    let contents: Vec<(Vec<usize>, u8)> = (0..12).map(|k| ((0..k % 7).collect(), 0)).collect();
    let text = request(&contents, POLICIES[0], 50, 1);
    let whole = parse(&text).expect("a valid request");
    let leaving = parse_leaving(&text).expect("usual records").expect("valid");
    assert!(!leaving.left.is_empty());
    let (mut req, mut left) = RequestText::new(leaving, text.clone());
    assert!(
        req.transcript
            .turns()
            .iter()
            .all(|t| t.content().is_empty())
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    req.policy = Box::new(Reading(Arc::clone(&seen)));
    let plan = left.plan(&mut req).expect("a plan");
    let decoded: Vec<String> = whole
        .transcript
        .turns()
        .iter()
        .map(|t| t.content().to_owned())
        .collect();
    assert_eq!(req.transcript, whole.transcript);
    assert!(left.left.is_empty(), "no turn shows a placeholder any more");
    let expected = crate::compact(&text).expect("compacted");
    let out = crate::compacted::compacted_with(req, plan, Some(left)).expect("applied");
    assert_eq!(out.into_text(), expected);
    assert!(decoded.iter().any(|c| c.contains('"')));
    assert_eq!(*seen.lock().expect("not poisoned"), decoded);
}

#[test]
fn digests_hashed_ahead_are_those_hashed_when_asked() {
    use std::sync::atomic::AtomicBool;

    use cutctx::model::canonical::sha256_of_str_bytes;

    use cutctx::formats::left_in_text::LeftDigests;
    use cutctx::policies::ContentDigests;
    use cutctx::policies::ahead::{HASHED_AHEAD_BYTES, WithAhead};

    // Every piece in every place: canonical contents and contents spelled otherwise.
    let contents: Vec<(Vec<usize>, u8)> = (0..60)
        .map(|k| (vec![k % 12, (k / 12 + 5) % 12, k % 5], 0))
        .collect();
    let text = request(&contents, POLICIES[0], 50, 1);
    let whole = parse(&text).expect("a valid request");
    let leaving = parse_leaving(&text).expect("usual records").expect("valid");
    let (req, left) = RequestText::new(leaving, text.clone());
    let contents = LeftDigests::new(&left.text, &left.left, &req.transcript);
    let tools: Vec<usize> = (0..whole.transcript.len())
        .filter(|&p| whole.transcript.turns()[p].role() == cutctx::Role::Tool)
        .collect();
    assert!(tools.len() >= 20);
    assert!(
        left.left.iter().any(|l| !l.is_canonical()),
        "both spellings"
    );
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let ahead = contents.hash_tools_ahead(scope, &stop);
        while !ahead.ran_out() {
            std::thread::yield_now();
        }
        assert_eq!(ahead.hashed().len(), tools.len());
        let digests = WithAhead::new(&contents, &ahead);
        for (p, turn) in whole.transcript.turns().iter().enumerate() {
            let expected = sha256_of_str_bytes(turn.content());
            assert_eq!(digests.digest(p).expect("hashed"), expected, "position {p}");
            assert_eq!(contents.hash(p).expect("hashed"), expected, "position {p}");
            let len = if tools.contains(&p) {
                HASHED_AHEAD_BYTES
            } else {
                contents.content_len(p)
            };
            assert_eq!(digests.content_len(p), len, "position {p}");
        }
    });
}

#[test]
fn kept_contents_are_located_where_they_were_left_and_a_view_of_another_plan_is_refused() {
    let contents: Vec<(Vec<usize>, u8)> = (0..40)
        .map(|k| (vec![k % 12, k / 3], [4, 0, 5, 7, 8, 4, 9, 6][k % 8]))
        .collect();
    let policy = r#"{"name":"observation_masking","keep_recent_results":1}"#;
    let text = request(&contents, policy, 60, 2);
    let c = crate::compact_text(text.clone()).expect("a valid request");
    let (left, located) = c.left.as_ref().expect("contents left in the text");
    // The view was applied in place: the input read again to compare.
    let input = &parse(&text).expect("a valid request").transcript;
    let view = &c.out.transcript;
    let (mut kept, mut whole) = (0, 0);
    for (at, turn) in view.turns().iter().enumerate() {
        match located.at(at) {
            // A content left in the text: the input's turn of the same id left it. A
            // record copied whole is the bytes the turn's fields and that content make;
            // a kept turn is written from its fields only when its record is not
            // written as the canonical writer writes it.
            Some(found @ (super::Kept::Record(k) | super::Kept::Content(k))) => {
                kept += 1;
                let l = &left.left[k];
                assert_eq!(input.turns()[l.position()].turn_id(), turn.turn_id());
                match (found, l.record()) {
                    (super::Kept::Record(_), Some(record)) => {
                        let span = l.span();
                        let read = |range| left.text.with_str(range, str::to_owned);
                        let literal = read(span.start - 1..span.end + 1).expect("in the text");
                        let mut fields = String::new();
                        let w = &mut Writer::new(&mut fields, Style::CANONICAL);
                        write_turn_with(w, turn.json_fields(), |w| w.raw(&literal));
                        assert_eq!(read(record).expect("in the text"), fields);
                        whole += 1;
                    }
                    (super::Kept::Content(_), None) => {}
                    (found, record) => panic!("{found:?} with record {record:?}"),
                }
            }
            // Its own: no placeholder shown (a stub, a summary).
            None => assert!(
                left.placeholders
                    .iter()
                    .all(|p| !std::ptr::eq(turn.content(), &**p))
            ),
        }
    }
    assert!(whole > 0 && whole < kept, "{whole} of {kept}");
    assert!(kept > 0 && kept < view.turns().len(), "{kept}");
    // The view located with another plan: one of the same turns under other ids, whose
    // actions name none of the view's turns; one that keeps nothing.
    let renamed = input
        .turns()
        .iter()
        .map(|t| {
            cutctx::TranscriptTurn::new(format!("x{}", t.turn_id()), t.role(), "", 1)
                .expect("a turn")
        })
        .collect();
    let other = cutctx::Transcript::new(renamed).expect("unique ids");
    let keeps_all = DropOldestPolicy
        .decide(&other, &CompactionBudget::new(1 << 40))
        .expect("a plan");
    // Keeps only the newest turns (and the system and pinned ones): the view keeps others.
    let keeps_newest = DropOldestPolicy
        .decide(
            input,
            &CompactionBudget::new(input.token_estimate() / 4).with_protected_recent_turns(1),
        )
        .expect("a plan");
    for plan in [&keeps_all, &keeps_newest] {
        let e = left.locate(plan, view).err().expect("another plan's view");
        assert_eq!(e.code, crate::INTERNAL_ERROR);
        assert!(e.details.contains_key("turn_id"), "{:?}", e.details);
    }
}
