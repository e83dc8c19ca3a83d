//! The readings of a request document held to the strict pass: in pieces of any size, on
//! any number of threads, from a text or a file read where it lies, each gives what the
//! strict pass gives or leaves the document to it.

use cutctx::{CompactionBudget, Transcript};

use super::pieces::{LONGEST_ELEMENT_BYTES, PIECE_BYTES, read_in_pieces};
use super::split::{Slot, Source, take_split};
use super::wire::{finish, parse_whole};
use super::{Leaving, Left, parse, parse_leaving, parse_leaving_file, parse_leaving_file_in};
use super::{parse_reader, scan};
use crate::error::OpsError;

fn code(text: &str) -> &'static str {
    match parse(text) {
        Ok(_) => "OK",
        Err(e) => e.code,
    }
}

/// What the strict parse builds of `text`, as canonical bytes: the transcript and budget.
fn whole(text: &str) -> Result<(String, CompactionBudget), OpsError> {
    parse_whole(text).map(|r| (r.transcript.canonical_json(), r.budget))
}

/// What reading `text` in pieces of `piece` bytes builds, when it builds anything.
fn pieces(text: &str, piece: usize, threads: usize) -> Option<(String, CompactionBudget)> {
    let (turns, wire) = read_in_pieces(text.as_bytes(), piece, threads)?;
    let r = finish(Transcript::with_packed_ids(turns), wire).ok()?;
    Some((r.transcript.canonical_json(), r.budget))
}

const TAIL: &str = r#""budget":{"max_tokens":10},"policy":{"name":"drop_oldest"}"#;

#[test]
fn pieces_of_any_size_build_what_the_whole_builds() {
    let turns = [
        r#"{"turn_id":"s","role":"system","content":"rules ]},{\"x\":[","token_estimate":3}"#,
        r#"{"metadata":{"k":"v"},"turn_id":"a","role":"assistant","token_estimate":2,"tool_call_id":"c"}"#,
        r#" {"turn_id":"t","role":"tool","content":"é \u00e9 \\","token_estimate":1,"tool_call_id":"c","pinned":true} "#,
    ]
    .join(" ,\n");
    for text in [
        format!(r#"{{"transcript":[{turns}],{TAIL}}}"#),
        format!(r#" {{ {TAIL}, "summaries": {{}}, "transcript" : [ {turns} ] }} "#),
    ] {
        let expected = whole(&text).expect("a valid request");
        for piece in [1, 2, 7, 64, 1 << 20] {
            for threads in [1, 2, 5] {
                assert_eq!(
                    pieces(&text, piece, threads).as_ref(),
                    Some(&expected),
                    "{piece} {threads}"
                );
            }
        }
    }
}

#[test]
fn cuts_that_are_not_element_starts_are_caught() {
    // Contents that end in `},{` put a false cut before their closing quote, and a
    // chain's members after the array put one outside it.
    let turns: Vec<String> = (0..60)
        .map(|i| {
            let content = if i % 7 == 3 {
                "x},{"
            } else {
                r#"plain \\ \"text\""#
            };
            format!(
                r#"{{"turn_id":"t{i}","role":"user","content":"{content}","token_estimate":1}}"#
            )
        })
        .collect();
    let text = format!(
        r#"{{"transcript":[{}],"budget":{{"max_tokens":10}},"policy":{{"name":"chain","policies":[{{"name":"drop_oldest"}},{{"name":"drop_oldest"}}]}}}}"#,
        turns.join(",")
    );
    let expected = whole(&text).expect("a valid request");
    for piece in [1, 13, 100, 1 << 20] {
        for threads in [1, 2, 3, 8] {
            assert_eq!(
                pieces(&text, piece, threads).as_ref(),
                Some(&expected),
                "{piece} {threads}"
            );
        }
    }
    // Read without a scan, whatever the cuts, the turns are the whole's or none.
    let b = text.as_bytes();
    let at = scan::array_start(b).expect("an array") + 1;
    let all = parse_whole(&text).expect("valid").transcript.into_turns();
    let mut split = 0;
    for threads in 2..6 {
        // The slots go from attempt to attempt, as from piece to piece, failed or not.
        let mut slots: Vec<Slot> = std::iter::repeat_with(Slot::default)
            .take(threads)
            .collect();
        for n in (at..b.len()).step_by(5) {
            let mut turns = Vec::new();
            if take_split(
                Source::Bytes(&b[..n]),
                at,
                &mut slots,
                &mut turns,
                &mut Vec::new(),
            )
            .is_some()
            {
                assert_eq!(turns, all[..turns.len()], "{n} {threads}");
                split += 1;
            } else {
                assert!(turns.is_empty(), "{n} {threads}");
            }
        }
    }
    assert!(split > 100, "{split}");
}

/// What reading with the contents left builds, as comparable parts: the request's
/// transcript and budget, where the contents were left, and whether any placeholder is
/// shown; or the error's code.
type LeftParts = Result<(Transcript, CompactionBudget, Vec<Left>, bool), &'static str>;

fn left_parts(leaving: Option<Result<Leaving, OpsError>>) -> Option<LeftParts> {
    leaving.map(|r| {
        r.map(|l| {
            let shown = !l.placeholders.is_empty();
            (l.request.transcript, l.request.budget, l.left, shown)
        })
        .map_err(|e| e.code)
    })
}

#[test]
fn a_file_read_where_it_lies_in_parts_and_windows_reads_what_the_text_reads() {
    let turns: Vec<String> = (0..90)
        .map(|i| {
            // Contents that end in `},{` put false cuts before their closing quote.
            let content = match i % 7 {
                3 => "x},{",
                5 => r#"esc \u00e9 \/ \"q\""#,
                _ => r#"plain \\ \"text\" é"#,
            };
            let role = ["user", "assistant", "tool"][i % 3];
            let call = if i % 3 == 0 { "" } else { r#","tool_call_id":"c""# };
            format!(
                r#"{{"content":"{content}","metadata":{{}},"pinned":false,"role":"{role}","token_estimate":{},"tool_call_id":null,"turn_id":"t{i}"}}"#,
                i % 9 + 1
            )
            .replace(r#","tool_call_id":null"#, call)
        })
        .collect();
    let long = "y".repeat(3000);
    for (name, text) in [
        (
            "usual",
            format!(r#"{{"transcript":[{}],{TAIL}}}"#, turns.join(",")),
        ),
        (
            "spaced",
            format!(
                r#" {{ {TAIL}, "transcript" : [ {} ] }} "#,
                turns.join(" , ")
            ),
        ),
        (
            "long",
            format!(
                r#"{{"transcript":[{{"turn_id":"s","role":"system","content":"{long}","token_estimate":1}},{}],{TAIL}}}"#,
                turns.join(",")
            ),
        ),
        (
            "budget",
            format!(
                r#"{{"transcript":[{}],"budget":{{"max_tokens":-1}},"policy":{{"name":"drop_oldest"}}}}"#,
                turns.join(",")
            ),
        ),
    ] {
        let expected = left_parts(parse_leaving(&text))
            .unwrap_or_else(|| panic!("{name}: {:?}", parse(&text).err()));
        let (path, file) = crate::input::temp_request_file(name, text.as_bytes());
        let mut split = 0;
        for piece in [1, 64, 500, 4096, 1 << 20] {
            for threads in [1, 2, 3, 7] {
                let read = left_parts(parse_leaving_file_in(&file, piece, threads));
                if threads == 1 {
                    assert!(read.is_some(), "{name} {piece}: on one thread, always read");
                } else if read.is_some() {
                    split += 1;
                }
                if let Some(read) = read {
                    assert_eq!(read, expected, "{name} {piece} {threads}");
                }
            }
            assert_eq!(
                left_parts(parse_leaving_file(&file)),
                Some(expected.clone()),
                "{name}"
            );
        }
        // Most cuts fall between elements: read in parts, not only on one thread (a cut
        // is looked for as `},{"`, which spaced separators never spell).
        assert!(
            split >= 6 || name == "spaced",
            "{name}: {split} reads in parts"
        );
        std::fs::remove_file(&path).expect("removed");
    }
}

#[test]
fn a_file_with_anything_amiss_is_left_to_the_whole() {
    let t = r#"{"turn_id":"a","role":"user","token_estimate":1}"#;
    let texts = [
        format!(r#"{{"transcript":[{t},],{TAIL}}}"#),
        format!(r#"{{"transcript":[{t} {t}],{TAIL}}}"#),
        format!(r#"{{"transcript":[{t},1],{TAIL}}}"#),
        format!(r#"{{"transcript":[{t}],{TAIL}}} x"#),
        format!(r#"{{"transcript":[{t}],"transcript":[{t}],{TAIL}}}"#),
        format!(r#"{{"transcript":[{t}],{TAIL}"#),
        format!(r#"{{"transcript":[{t}"#),
        format!(r#"{{"transcript":[{t},{t}"#),
    ];
    // Bytes that are not UTF-8, inside an element or around the array.
    let good = format!(r#"{{"transcript":[{t},{t},{t}],{TAIL}}}"#);
    for at in [good.find("user").expect("a role") + 1, good.len() - 3, 3] {
        let mut bad = good.clone().into_bytes();
        bad[at] = 0xff;
        let (path, file) = crate::input::temp_request_file(&format!("bad-{at}"), &bad);
        for piece in [1, 5, 1 << 20] {
            for threads in [1, 2] {
                assert!(
                    parse_leaving_file_in(&file, piece, threads).is_none(),
                    "{at}"
                );
            }
        }
        std::fs::remove_file(&path).expect("removed");
    }
    for (k, text) in texts.iter().enumerate() {
        let (path, file) = crate::input::temp_request_file(&format!("amiss-{k}"), text.as_bytes());
        for piece in [1, 5, 1 << 20] {
            for threads in [1, 2] {
                assert!(
                    parse_leaving_file_in(&file, piece, threads).is_none(),
                    "{piece} {threads} {text}"
                );
            }
        }
        std::fs::remove_file(&path).expect("removed");
    }
}

#[test]
fn anything_amiss_is_left_to_the_whole() {
    let t = r#"{"turn_id":"a","role":"user","token_estimate":1}"#;
    for text in [
        format!(r#"{{"transcript":[],{TAIL}}}"#),
        format!(r#"{{"transcript":[{t},],{TAIL}}}"#),
        format!(r#"{{"transcript":[{t} {t}],{TAIL}}}"#),
        format!(r#"{{"transcript":[{t},1],{TAIL}}}"#),
        format!(r#"{{"transcript":[{t}],{TAIL}}} x"#),
        format!(r#"{{"transcript":[{t}],"transcript":[{t}],{TAIL}}}"#),
        format!(r#"{{"transcript":[{t}],{TAIL},"extra":1}}"#),
        format!(r#"{{"transcript":[{t}],{TAIL}"#),
        format!(r#"{{"transcript":[{t}"#),
        format!(r#"{{"transcript":[{{"turn_id":"a","role":"user","token_estimate":-1}}],{TAIL}}}"#),
        format!(
            r#"{{"transcript":[{{"turn_id":"a","turn_id":"b","role":"user","token_estimate":1}}],{TAIL}}}"#
        ),
        format!(
            r#"{{"transcript":[{{"turn_id":"a","role":"user","token_estimate":18446744073709551616}}],{TAIL}}}"#
        ),
        format!(
            r#"{{"transcript":[{{"turn_id":"\ud800","role":"user","token_estimate":1}}],{TAIL}}}"#
        ),
        format!(
            r#"{{"transcript":[{{"turn_id":"a","role":"user","token_estimate":1,"metadata":{{"k":[[[[]]]]}}}}],{TAIL}}}"#
        ),
    ] {
        for piece in [1, 5, 1 << 20] {
            assert!(pieces(&text, piece, 2).is_none(), "{piece} {text}");
        }
    }
    // Bytes that are not UTF-8, inside an element or around the array.
    let good = format!(r#"{{"transcript":[{t}],{TAIL}}}"#);
    assert!(read_in_pieces(good.as_bytes(), 3, 2).is_some());
    for at in [good.find("user").expect("a role") + 1, good.len() - 3] {
        let mut bad = good.clone().into_bytes();
        bad[at] = 0xff;
        assert!(read_in_pieces(&bad[..], 3, 2).is_none(), "{at}");
    }
}

#[test]
fn an_element_longer_than_the_limit_is_left_to_the_whole_parse() {
    let long = "x".repeat(2 * LONGEST_ELEMENT_BYTES);
    let text = format!(
        r#"{{"transcript":[{{"turn_id":"s","role":"system","content":"{long}","token_estimate":1}},{{"turn_id":"u","role":"user","token_estimate":1}}],{TAIL}}}"#
    );
    // A piece at a time would rescan the long element at every read.
    assert!(read_in_pieces(text.as_bytes(), PIECE_BYTES, 2).is_none());
    // Just under the limit it is still read in pieces.
    let short = "x".repeat(LONGEST_ELEMENT_BYTES - 200);
    let ok = text.replace(&long, &short);
    assert!(read_in_pieces(ok.as_bytes(), PIECE_BYTES, 2).is_some());
    // Either way the request parses, to the same transcript as the strict pass.
    let (Ok(whole), Ok(split)) = (parse_whole(&text), parse(&text)) else {
        panic!("the request parses");
    };
    assert_eq!(split.transcript, whole.transcript);
}

#[test]
fn a_reader_that_fails_asks_for_the_whole_text() {
    let text =
        format!(r#"{{"transcript":[{{"turn_id":"a","role":"user","token_estimate":-1}}],{TAIL}}}"#);
    let e = parse_reader(text.as_bytes(), || Ok(text.clone()))
        .err()
        .expect("negative estimate");
    assert_eq!(e.details["turn_id"], "a");
    let e = parse_reader(text.as_bytes(), || {
        Err(OpsError::input("gone", cutctx::model::details! {}))
    })
    .err()
    .expect("unreadable");
    assert_eq!(e.message, "gone");
    let good = text.replace("-1", "1");
    let r = parse_reader(good.as_bytes(), || unreachable!("read in pieces")).ok();
    assert_eq!(r.map(|r| r.transcript.len()), Some(1));
}

#[test]
fn a_broken_turn_waits_for_the_rest_of_the_document() {
    let negative = r#"{"turn_id":"a","role":"user","token_estimate":-1}"#;
    let fine = r#"{"turn_id":"b","role":"user","token_estimate":1}"#;
    let tail = r#""budget":{"max_tokens":10},"policy":{"name":"drop_oldest"}}"#;
    // Alone, the broken turn is the error, with its id.
    let e = parse(&format!(r#"{{"transcript":[{negative},{fine}],{tail}"#))
        .err()
        .expect("negative estimate");
    assert_eq!(e.code, "VALIDATION_ERROR");
    assert_eq!(e.details["turn_id"], "a");
    // Text that is not JSON after it is named first, as when every record was read first.
    assert_eq!(
        code(&format!(r#"{{"transcript":[{negative},{fine}],"budget":"#)),
        "INPUT_ERROR"
    );
    // Of two broken turns, the first is reported.
    let empty = r#"{"turn_id":"","role":"tool","token_estimate":1}"#;
    let e = parse(&format!(r#"{{"transcript":[{negative},{empty}],{tail}"#))
        .err()
        .expect("two broken turns");
    assert_eq!(e.details["turn_id"], "a");
    // A transcript that is not an array says so as before.
    let e = parse(&format!(r#"{{"transcript":{{}},{tail}"#))
        .err()
        .expect("not an array");
    assert!(e.message.contains("expected a sequence"), "{}", e.message);
}
