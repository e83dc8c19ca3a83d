//! A quick reader of one turn record in its usual form, for the request read in pieces:
//! whatever it does not take for certain it leaves to the strict parse.
//!
//! It reads an object of the seven turn keys (`turn_id`, `role`, `content`, `token_estimate`,
//! `tool_call_id`, `pinned`, `metadata`), each at most once, with JSON whitespace anywhere
//! between tokens. It answers `None` for anything else: another key, a key or role spelled
//! with escapes, a value of another type, a number that is not a plain non-negative integer
//! within `u64`, a control byte or an unknown escape in a string, a lone surrogate. The strict
//! parse of the same text then gives the turn or the error it always gave; whatever this
//! reader does answer is what the strict parse reads (a property the tests hold it to).

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use cutctx::Role;

/// One turn record as read. Its ids are left in the caller's id text, so that they can be
/// made into shared strings together, apart from the contents.
#[derive(Debug)]
pub(super) struct Record {
    /// The content, `""` when the key is missing; the caller's placeholder when the content
    /// is left as written (see [`Record::left`]).
    pub(super) content: Arc<str>,
    /// Where the content lies as written, quotes excluded, and whether every escape in it is
    /// the canonical writer's: set when the content is left in the text rather than decoded.
    pub(super) left: Option<(Range<usize>, bool)>,
    /// Where the whole record lies, braces included, when it is written exactly as the
    /// canonical writer writes its turn (see [`is_verbatim`]): set only with
    /// [`Record::left`], so that a kept turn can be copied whole from the text.
    pub(super) verbatim: Option<Range<usize>>,
    /// The `turn_id`, in the id text.
    pub(super) id: Range<usize>,
    /// The `tool_call_id`, in the id text, unless missing or `null`.
    pub(super) call: Option<Range<usize>>,
    pub(super) role: Role,
    pub(super) estimate: u64,
    pub(super) pinned: bool,
    pub(super) metadata: BTreeMap<String, String>,
}

/// The seven keys, each a bit of the set of keys seen.
const TURN_ID: u8 = 1;
const ROLE: u8 = 2;
const CONTENT: u8 = 4;
const ESTIMATE: u8 = 8;
const CALL: u8 = 16;
const PINNED: u8 = 32;
const METADATA: u8 = 64;

/// Each key as a record spells it, quotes included, by its bit's position: the one list of
/// the keys, for the literal comparison and the string read alike.
const KEY_LITERALS: [&[u8]; 7] = [
    b"\"turn_id\"",
    b"\"role\"",
    b"\"content\"",
    b"\"token_estimate\"",
    b"\"tool_call_id\"",
    b"\"pinned\"",
    b"\"metadata\"",
];

/// The keys of the record read last, in their order: the records of one transcript are
/// mostly written alike, so each key is first looked for as the one in its place in the last
/// record, by comparing its literal, before it is read as any string.
#[derive(Debug, Default)]
pub(super) struct KeyOrder {
    bits: [u8; 7],
    len: usize,
}

impl KeyOrder {
    /// The key at `i` in `b` when it is the literal of the `k`-th key of the last record: its
    /// bit and the position after its closing quote.
    fn expected(&self, b: &[u8], i: usize, k: usize) -> Option<(u8, usize)> {
        let bit = *self.bits.get(k).filter(|_| k < self.len)?;
        let literal = KEY_LITERALS.get(bit.trailing_zeros() as usize)?;
        b.get(i..)?
            .starts_with(literal)
            .then_some((bit, i + literal.len()))
    }
}

/// The bit of the key spelled `key` (without its quotes), if it is one of the seven.
fn key_bit(key: &str) -> Option<u8> {
    let k = KEY_LITERALS
        .iter()
        .position(|l| l.get(1..l.len() - 1) == Some(key.as_bytes()))?;
    Some(1 << k)
}

/// The record opening at or after `i` in `s` (after whitespace), its ids appended to `ids`;
/// `scratch` is room for decoding escapes, reused from record to record; `order` the keys of
/// the record read before, and afterwards this one's. With `left`, the content is checked but
/// not decoded: the record's content is that placeholder and [`Record::left`] says where the
/// content lies. The record and the position just after its closing brace; `None` for
/// anything this reader does not take (see the module's header) or a record `s` ends inside.
pub(super) fn record_at(
    s: &str,
    i: usize,
    ids: &mut String,
    scratch: &mut String,
    order: &mut KeyOrder,
    left: Option<&Arc<str>>,
) -> Option<(Record, usize)> {
    let b = s.as_bytes();
    let mut i = ws(b, i);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    let open = i;
    // Whether no whitespace was skipped anywhere in the record, as the canonical writer
    // writes none.
    let mut tight = true;
    // Whether every id was read without an escape: then each is written as the canonical
    // writer writes it (it escapes nothing else a JSON string may hold raw). A role spelled
    // with an escape is not taken at all.
    let mut plain = true;
    let mut seen = 0_u8;
    let mut rec = Record {
        content: Arc::from(""),
        left: None,
        verbatim: None,
        id: 0..0,
        call: None,
        role: Role::User,
        estimate: 0,
        pinned: false,
        metadata: BTreeMap::new(),
    };
    i = skip(b, i + 1, &mut tight);
    if b.get(i) == Some(&b'}') {
        return None;
    }
    let mut keys = KeyOrder::default();
    loop {
        let (bit, end) = match order.expected(b, i, keys.len) {
            Some(found) => found,
            None => {
                let (key, end) = string(s, i, scratch)?;
                let Text::Plain(key) = key else { return None };
                (key_bit(&s[key])?, end)
            }
        };
        if seen & bit != 0 {
            return None;
        }
        seen |= bit;
        // At most seven keys are seen, each once: there is room for each.
        keys.bits[keys.len] = bit;
        keys.len += 1;
        i = skip(b, end, &mut tight);
        if b.get(i) != Some(&b':') {
            return None;
        }
        i = skip(b, i + 1, &mut tight);
        i = match bit {
            TURN_ID => {
                let (id, escaped, end) = id_text(s, i, ids, scratch)?;
                rec.id = id;
                plain &= !escaped;
                end
            }
            CALL if b[i..].starts_with(b"null") => i + 4,
            CALL => {
                let (call, escaped, end) = id_text(s, i, ids, scratch)?;
                rec.call = Some(call);
                plain &= !escaped;
                end
            }
            ROLE => {
                let (role, end) = string(s, i, scratch)?;
                let Text::Plain(role) = role else { return None };
                rec.role = match &s[role] {
                    "system" => Role::System,
                    "user" => Role::User,
                    "assistant" => Role::Assistant,
                    "tool" => Role::Tool,
                    _ => return None,
                };
                end
            }
            CONTENT => match left {
                Some(placeholder) => {
                    let (span, canonical, end) = written(s, i)?;
                    rec.content = Arc::clone(placeholder);
                    rec.left = Some((span, canonical));
                    end
                }
                None => {
                    let (content, end) = string(s, i, scratch)?;
                    rec.content = Arc::from(content.of(s, scratch));
                    end
                }
            },
            ESTIMATE => {
                let (estimate, end) = integer(b, i)?;
                rec.estimate = estimate;
                end
            }
            PINNED if b[i..].starts_with(b"true") => {
                rec.pinned = true;
                i + 4
            }
            PINNED if b[i..].starts_with(b"false") => i + 5,
            METADATA => {
                let end = metadata(s, i, &mut rec.metadata, scratch)?;
                // `{}`, as the writer writes an empty map; a map with entries, or `{ }`, is
                // not the writer's spelling of a turn with no metadata.
                tight &= end == i + 2;
                end
            }
            _ => return None,
        };
        i = skip(b, i, &mut tight);
        match b.get(i) {
            Some(b',') => i = skip(b, i + 1, &mut tight),
            Some(b'}') => break,
            _ => return None,
        }
    }
    let required = TURN_ID | ROLE | ESTIMATE;
    if seen & required != required {
        return None;
    }
    let close = i + 1;
    if tight
        && plain
        && rec.left.as_ref().is_some_and(|(_, canonical)| *canonical)
        && is_verbatim(&keys)
    {
        rec.verbatim = Some(open..close);
    }
    *order = keys;
    Some((rec, close))
}

/// The keys in the order the canonical writer writes a turn's: all seven, sorted.
const CANONICAL_ORDER: [u8; 7] = [CONTENT, METADATA, PINNED, ROLE, ESTIMATE, CALL, TURN_ID];

/// Whether a record of the keys `keys` is written as the canonical writer writes its turn,
/// given that it holds no whitespace, no id or role spelled with an escape, empty metadata
/// and a content in its canonical spelling (which [`record_at`] checks): every key present,
/// in the writer's order. Each value is then the writer's own spelling: `true` or `false`;
/// a role or id with nothing to escape, as written; an integer without a sign, fraction,
/// exponent or leading zero, the only way the writer writes it; `null`; `{}`.
fn is_verbatim(keys: &KeyOrder) -> bool {
    keys.len == CANONICAL_ORDER.len() && keys.bits == CANONICAL_ORDER
}

/// The string at `i` appended to `ids`: where it lies there, whether it was spelled with an
/// escape, and the position after it.
fn id_text(
    s: &str,
    i: usize,
    ids: &mut String,
    scratch: &mut String,
) -> Option<(Range<usize>, bool, usize)> {
    let (text, end) = string(s, i, scratch)?;
    let start = ids.len();
    ids.push_str(text.of(s, scratch));
    Some((start..ids.len(), matches!(text, Text::Decoded), end))
}

/// The object of strings at `i` read into `map` (empty on entry); the position after it.
/// `None` for a repeated key, which the strict parse refuses.
fn metadata(
    s: &str,
    i: usize,
    map: &mut BTreeMap<String, String>,
    scratch: &mut String,
) -> Option<usize> {
    let b = s.as_bytes();
    if b.get(i) != Some(&b'{') {
        return None;
    }
    let mut i = ws(b, i + 1);
    if b.get(i) == Some(&b'}') {
        return Some(i + 1);
    }
    loop {
        let (key, end) = string(s, i, scratch)?;
        let key = key.of(s, scratch).to_owned();
        i = ws(b, end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let (value, end) = string(s, ws(b, i + 1), scratch)?;
        if map.insert(key, value.of(s, scratch).to_owned()).is_some() {
            return None;
        }
        i = ws(b, end);
        match b.get(i) {
            Some(b',') => i = ws(b, i + 1),
            Some(b'}') => return Some(i + 1),
            _ => return None,
        }
    }
}

/// A plain non-negative integer at `i` (`0`, or a digit other than `0` and more digits)
/// within `u64`, not followed by a fraction or exponent; the position after it.
fn integer(b: &[u8], i: usize) -> Option<(u64, usize)> {
    let digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 || (digits > 1 && b[i] == b'0') {
        return None;
    }
    let end = i + digits;
    if matches!(b.get(end), Some(b'.' | b'e' | b'E')) {
        return None;
    }
    let mut n = 0_u64;
    for &c in &b[i..end] {
        n = n.checked_mul(10)?.checked_add(u64::from(c - b'0'))?;
    }
    Some((n, end))
}

/// A string's text: a range of the input when it holds no escape, else decoded in the
/// scratch buffer.
enum Text {
    Plain(Range<usize>),
    Decoded,
}

impl Text {
    fn of<'a>(&self, s: &'a str, scratch: &'a str) -> &'a str {
        match self {
            Self::Plain(range) => &s[range.clone()],
            Self::Decoded => scratch,
        }
    }
}

/// The string whose opening quote is at `i`, and the position after its closing quote.
fn string(s: &str, i: usize, scratch: &mut String) -> Option<(Text, usize)> {
    let b = s.as_bytes();
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let start = i + 1;
    let mut j = start + special(&b[start..])?;
    if b[j] == b'"' {
        return Some((Text::Plain(start..j), j + 1));
    }
    scratch.clear();
    let mut run = start;
    loop {
        match b[j] {
            b'"' => {
                scratch.push_str(&s[run..j]);
                return Some((Text::Decoded, j + 1));
            }
            b'\\' => {
                scratch.push_str(&s[run..j]);
                j = cutctx_json::decode_escape(b, j + 1, scratch)?;
                run = j;
            }
            // A control byte, which JSON does not allow in a string.
            _ => return None,
        }
        j += special(&b[j..])?;
    }
}

/// The string whose opening quote is at `i`, checked as [`string`] checks it but not decoded:
/// where its text lies (quotes excluded), whether every escape in it is the one the canonical
/// writer would write (the text is then its own canonical spelling), and the position after
/// its closing quote.
fn written(s: &str, i: usize) -> Option<(Range<usize>, bool, usize)> {
    if s.as_bytes().get(i) != Some(&b'"') {
        return None;
    }
    let checked = cutctx_json::check_string(s.as_bytes(), i + 1)?;
    Some((i + 1..checked.end, checked.canonical, checked.end + 1))
}

/// The offset of the first `"`, `\` or control byte in `b`.
fn special(b: &[u8]) -> Option<usize> {
    cutctx_json::first_special(b, true)
}

/// The first position at or after `i` that is not JSON whitespace.
fn ws(b: &[u8], i: usize) -> usize {
    super::scan::ws(b, i)
}

/// [`ws`], clearing `tight` when it skipped any whitespace.
fn skip(b: &[u8], i: usize, tight: &mut bool) -> usize {
    let next = ws(b, i);
    *tight &= next == i;
    next
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use cutctx::TranscriptTurn;
    use cutctx::model::SharedTurnRecord;
    use cutctx::model::wire::ObjectOnly;
    use proptest::prelude::*;

    use super::super::pieces::build;
    use super::super::scan;
    use super::Record;

    /// The record `s` holds whole (an object and nothing else).
    fn record(s: &str, ids: &mut String, scratch: &mut String) -> Option<Record> {
        let (rec, end) =
            super::record_at(s, 0, ids, scratch, &mut super::KeyOrder::default(), None)?;
        (super::ws(s.as_bytes(), end) == s.len()).then_some(rec)
    }

    /// Where the record `s` holds whole lies as its turn's canonical writing, read with its
    /// content left in the text.
    fn verbatim(s: &str) -> Option<std::ops::Range<usize>> {
        let (mut ids, mut scratch) = (String::new(), String::new());
        let placeholder: std::sync::Arc<str> = std::sync::Arc::from("");
        let order = &mut super::KeyOrder::default();
        let (rec, end) = super::record_at(s, 0, &mut ids, &mut scratch, order, Some(&placeholder))?;
        assert_eq!(super::ws(s.as_bytes(), end), s.len(), "{s:?}");
        rec.verbatim
    }

    /// `turn` as the canonical writer writes it.
    fn canonical_writing(turn: &TranscriptTurn) -> String {
        let mut out = String::new();
        let w = &mut cutctx_json::Writer::new(&mut out, cutctx_json::Style::CANONICAL);
        cutctx_json::write_turn(w, turn.json_fields());
        out
    }

    /// Whether the content of `written`, a turn's canonical writing, is spelled with the
    /// canonical writer's escapes only: always, since the writer wrote it.
    fn canonical_content(written: &str) -> bool {
        cutctx_json::check_string(written.as_bytes(), 12).is_some_and(|c| c.canonical)
    }

    #[test]
    fn only_a_record_written_as_the_canonical_writer_writes_it_is_verbatim() {
        let canonical = r#"{"content":"a \"b\"\n","metadata":{},"pinned":false,"role":"tool","token_estimate":7,"tool_call_id":"c1","turn_id":"t1"}"#;
        assert_eq!(verbatim(canonical), Some(0..canonical.len()));
        let pinned = canonical
            .replace("false", "true")
            .replace(r#""c1""#, "null");
        assert_eq!(verbatim(&pinned), Some(0..pinned.len()));
        // Surrounding whitespace is the array's, not the record's.
        assert_eq!(
            verbatim(&format!(" {canonical}\n")),
            Some(1..canonical.len() + 1)
        );
        for near in [
            canonical.replacen(':', ": ", 1),
            canonical.replacen(',', " ,", 1),
            canonical.replacen("{}", "{ }", 1),
            canonical.replacen("{}", r#"{"k":"v"}"#, 1),
            canonical.replacen(r#""t1""#, r#""\u00741""#, 1),
            canonical.replacen(r#""c1""#, r#""\u00631""#, 1),
            // A content escape the canonical writer does not write.
            canonical.replacen(r#"\n"#, r#"\u000a"#, 1),
            canonical.replacen(r#"\n"#, r#"\/"#, 1),
            // Keys out of the writer's order, or one missing.
            canonical.replacen(
                r#""pinned":false,"role":"tool""#,
                r#""role":"tool","pinned":false"#,
                1,
            ),
            canonical.replacen(r#""pinned":false,"#, "", 1),
            canonical.replacen(r#""metadata":{},"#, "", 1),
        ] {
            assert_ne!(near, canonical);
            assert!(strict(&near).is_some(), "{near}");
            assert_eq!(verbatim(&near), None, "{near}");
        }
    }

    /// The turn the strict parse builds of `text`, if any.
    fn strict(text: &str) -> Option<TranscriptTurn> {
        let ObjectOnly(r): ObjectOnly<SharedTurnRecord> = serde_json::from_str(text).ok()?;
        TranscriptTurn::try_from(r).ok()
    }

    /// The turn this reader builds of `text`, as `build` makes it, if it takes the text.
    fn quick(text: &str) -> Option<TranscriptTurn> {
        let (mut ids, mut scratch) = (String::new(), String::new());
        record(text, &mut ids, &mut scratch)?;
        let spans = [std::ops::Range {
            start: 0,
            end: text.len(),
        }];
        let turns = build(text.as_bytes(), &spans)?;
        assert_eq!(turns.len(), 1);
        turns.into_iter().next()
    }

    /// Holds the reader to the strict parse on `text`: the same turn, or nothing. Whether it
    /// took the text.
    fn agrees(text: &str) -> bool {
        let (mut ids, mut scratch) = (String::new(), String::new());
        let took = record(text, &mut ids, &mut scratch).is_some();
        if took {
            assert_eq!(quick(text), strict(text), "{text:?}");
        }
        took
    }

    #[test]
    fn the_usual_forms_are_read_as_the_strict_parse_reads_them() {
        for text in [
            r#"{"content":"a\"b\\c\/d\b\f\n\r\t\u00e9\uD83D\uDE00 é 😀","metadata":{},"pinned":false,"role":"assistant","token_estimate":0,"tool_call_id":null,"turn_id":"a"}"#,
            r#" { "turn_id" : "\u0074" , "role":"tool","token_estimate":18446744073709551615,"tool_call_id":"c\n","pinned":true,"metadata":{"k":"v","\u006b2":"w\u0000"} } "#,
            "{\"turn_id\":\"x\",\r\n\t\"role\":\"system\",\"token_estimate\":12}",
        ] {
            assert!(agrees(text), "{text}");
            assert!(quick(text).is_some(), "{text}");
        }
    }

    #[test]
    fn anything_unusual_is_left_to_the_strict_parse() {
        let (mut ids, mut scratch) = (String::new(), String::new());
        for text in [
            r#"{}"#,
            r#"{"turn_id":"a","role":"user"}"#,
            r#"{"turn_id":"a","role":"user","token_estimate":1,"x":1}"#,
            r#"{"turn_id":"a","turn_id":"b","role":"user","token_estimate":1}"#,
            r#"{"turn_id":"a","role":"\u0075ser","token_estimate":1}"#,
            r#"{"turn\u005fid":"a","role":"user","token_estimate":1}"#,
            r#"{"turn_id":"a","role":"user","token_estimate":-1}"#,
            r#"{"turn_id":"a","role":"user","token_estimate":1.0}"#,
            r#"{"turn_id":"a","role":"user","token_estimate":1e2}"#,
            r#"{"turn_id":"a","role":"user","token_estimate":01}"#,
            r#"{"turn_id":"a","role":"user","token_estimate":18446744073709551616}"#,
            r#"{"turn_id":"\ud800","role":"user","token_estimate":1}"#,
            r#"{"turn_id":"\udc00","role":"user","token_estimate":1}"#,
            r#"{"turn_id":"\ud800\u0041","role":"user","token_estimate":1}"#,
            r#"{"turn_id":"\x","role":"user","token_estimate":1}"#,
            "{\"turn_id\":\"a\u{1}\",\"role\":\"user\",\"token_estimate\":1}",
            r#"{"turn_id":"a","role":"user","token_estimate":1,"metadata":{"k":"v","k":"w"}}"#,
            r#"{"turn_id":"a","role":"user","token_estimate":1,"metadata":{"k":1}}"#,
            r#"{"turn_id":"a","role":"user","token_estimate":1,"content":null}"#,
            r#"{"turn_id":"a","role":"user","token_estimate":1,"pinned":nul}"#,
            r#"{"turn_id":"a","role":"user","token_estimate":1,"tool_call_id":nullx}"#,
            r#"{"turn_id":"a","role":"user","token_estimate":1,}"#,
            r#"{"turn_id":"a","role":"user","token_estimate":1} x"#,
            r#"{"turn_id":"a","role":"user","token_estimate":1"#,
        ] {
            assert!(record(text, &mut ids, &mut scratch).is_none(), "{text}");
        }
    }

    /// Every element of every transcript in the documents under `dir` (recursively): the
    /// reader agrees with the strict parse on each. How many it took.
    fn agrees_on_documents(dir: &Path) -> usize {
        let mut took = 0;
        let Ok(entries) = std::fs::read_dir(dir) else {
            return 0;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                took += agrees_on_documents(&path);
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let b = text.as_bytes();
            let Some(start) = scan::array_start(b) else {
                continue;
            };
            let mut at = start + 1;
            loop {
                let i = scan::ws(b, at);
                if b.get(i) != Some(&b'{') {
                    break;
                }
                let Some(end) = scan::value_end(b, i) else {
                    break;
                };
                took += usize::from(agrees(&text[i..end]));
                at = scan::ws(b, end);
                if b.get(at) != Some(&b',') {
                    break;
                }
                at += 1;
            }
        }
        took
    }

    #[test]
    fn the_catalogue_and_the_conformance_cases_read_alike() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let took = agrees_on_documents(&root.join("tests/bad-input"));
        assert!(took > 0, "the catalogue holds usual turn records");
        let shared = root.join("../shared/conformance/cases");
        if shared.is_dir() {
            assert!(agrees_on_documents(&shared) > 1_000);
        }
    }

    /// A string token: pieces of text, escapes of every kind, some broken.
    fn string() -> impl Strategy<Value = String> {
        let good = prop::sample::select(vec![
            "a",
            "ab c",
            "é",
            "😀",
            "\\\"",
            "\\\\",
            "\\/",
            "\\b",
            "\\f",
            "\\n",
            "\\r",
            "\\t",
            "\\u00e9",
            "\\u00E9",
            "\\u0000",
            "\\u001f",
            "\\ud83d\\ude00",
            "\\uD83D\\uDE00",
            "0123456789abcdef",
        ]);
        let bad = prop::sample::select(vec![
            "\\ud800",
            "\\udc00",
            "\\ud800\\u0041",
            "\\x",
            "\u{1}",
            "\t",
        ]);
        let piece = prop_oneof![30 => good, 1 => bad];
        prop::collection::vec(piece, 0..12).prop_map(|p| format!("\"{}\"", p.concat()))
    }

    /// A value token of any type a turn record's key might be given.
    fn value() -> impl Strategy<Value = String> {
        let scalar = prop::sample::select(vec![
            "0",
            "1",
            "12",
            "-1",
            "-0",
            "1.0",
            "1e2",
            "01",
            "18446744073709551615",
            "18446744073709551616",
            "null",
            "true",
            "false",
            "[]",
            "{}",
            "nul",
        ])
        .prop_map(str::to_owned);
        let metadata = prop::collection::vec((string(), string()), 0..3).prop_map(|kv| {
            let inner: Vec<String> = kv.iter().map(|(k, v)| format!("{k} : {v}")).collect();
            format!("{{{}}}", inner.join(","))
        });
        let role = prop::sample::select(vec![
            "\"user\"",
            "\"tool\"",
            "\"system\"",
            "\"assistant\"",
            "\"bot\"",
        ])
        .prop_map(str::to_owned);
        prop_oneof![string(), scalar, metadata, role]
    }

    /// A value token likely to suit `key`.
    fn value_for(key: &'static str) -> BoxedStrategy<String> {
        match key {
            "role" => {
                prop::sample::select(vec!["\"user\"", "\"tool\"", "\"system\"", "\"assistant\""])
                    .prop_map(str::to_owned)
                    .boxed()
            }
            "token_estimate" => {
                prop_oneof![(0_u64..1000).prop_map(|n| n.to_string()), value()].boxed()
            }
            "pinned" => {
                prop_oneof![Just("true".to_owned()), Just("false".to_owned()), value()].boxed()
            }
            "tool_call_id" => prop_oneof![Just("null".to_owned()), string(), value()].boxed(),
            _ => prop_oneof![3 => string(), 1 => value()].boxed(),
        }
    }

    /// A turn record's text: the three required keys and some others, in any order, with
    /// whitespace anywhere between tokens.
    fn record_text() -> impl Strategy<Value = String> {
        let keys = [
            "turn_id",
            "role",
            "content",
            "token_estimate",
            "tool_call_id",
            "pinned",
            "metadata",
            "extra",
            "turn_id",
        ];
        let entry = prop::sample::select(keys.to_vec()).prop_flat_map(|k| (Just(k), value_for(k)));
        let required = (
            value_for("turn_id"),
            value_for("role"),
            value_for("token_estimate"),
        );
        let ws = prop::sample::select(vec!["", "", " ", "\n\t ", "\r\n"]);
        (
            required,
            prop::collection::vec(entry, 0..4),
            prop::collection::vec(ws, 40),
        )
            .prop_flat_map(|((id, role, est), more, ws)| {
                let mut entries = vec![("turn_id", id), ("role", role), ("token_estimate", est)];
                entries.extend(more);
                (Just(entries).prop_shuffle(), Just(ws))
            })
            .prop_map(|(entries, ws)| {
                let mut w = ws.iter().cycle();
                let mut text = format!("{}{{", w.next().unwrap_or(&""));
                for (n, (k, v)) in entries.iter().enumerate() {
                    if n > 0 {
                        text.push(',');
                    }
                    let pad = [w.next(), w.next(), w.next()].map(|p| *p.unwrap_or(&""));
                    text.push_str(&format!("{}\"{k}\"{}:{}{v}", pad[0], pad[1], pad[2]));
                }
                text.push_str(&format!(
                    "{}}}{}",
                    w.next().unwrap_or(&""),
                    w.next().unwrap_or(&"")
                ));
                text
            })
    }

    #[test]
    fn the_generated_records_are_often_taken() {
        use proptest::strategy::ValueTree;
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let strategy = record_text();
        let took = (0..500)
            .filter(|_| {
                let text = strategy.new_tree(&mut runner).expect("a record").current();
                agrees(&text)
            })
            .count();
        assert!(took >= 50, "only {took} of 500 taken");
    }

    /// What the reader gives for `text` with `order` as it stands, and the ids it read.
    fn read_with(text: &str, order: &mut super::KeyOrder) -> (String, String) {
        let (mut ids, mut scratch) = (String::new(), String::new());
        let read = super::record_at(text, 0, &mut ids, &mut scratch, order, None);
        (format!("{read:?}"), ids)
    }

    #[test]
    fn each_key_has_its_own_bit_and_nothing_else_has_one() {
        use super::{CALL, CONTENT, ESTIMATE, METADATA, PINNED, ROLE, TURN_ID, key_bit};
        for (key, bit) in [
            ("turn_id", TURN_ID),
            ("role", ROLE),
            ("content", CONTENT),
            ("token_estimate", ESTIMATE),
            ("tool_call_id", CALL),
            ("pinned", PINNED),
            ("metadata", METADATA),
        ] {
            assert_eq!(key_bit(key), Some(bit), "{key}");
        }
        for other in ["", "turn", "turn_ids", "Role", "\"role\""] {
            assert_eq!(key_bit(other), None, "{other}");
        }
    }

    #[test]
    fn keys_in_the_last_records_order_or_in_another_read_alike() {
        let mut order = super::KeyOrder::default();
        for text in [
            r#"{"turn_id":"a","role":"user","token_estimate":1}"#,
            r#"{"turn_id":"b","role":"tool","token_estimate":2,"tool_call_id":"c"}"#,
            r#"{"role":"user","turn_id":"c","token_estimate":3}"#,
            r#"{"turn_id":"d","rol\u0065":"user","token_estimate":4}"#,
            r#"{"turn_id":"e","roles":"user","token_estimate":5}"#,
            r#"{"turn_id":"f","role":"user","token_estimate":6,"role":"user"}"#,
            r#"{"turn_id" : "g", "role" : "user", "token_estimate" : 7}"#,
            r#"{"turn_id":"h","role":"user","token_estimate":8}"#,
        ] {
            let fresh = read_with(text, &mut super::KeyOrder::default());
            assert_eq!(read_with(text, &mut order), fresh, "{text}");
        }
    }

    /// A run of records one after another, some with a key spelled with an escape (which the
    /// reader does not take) or lengthened (another key).
    fn records_in_a_row() -> impl Strategy<Value = Vec<String>> {
        let respelled = (record_text(), 0..4_u8).prop_map(|(text, how)| match how {
            0 => text.replacen("\"role\"", "\"rol\\u0065\"", 1),
            1 => text.replacen("\"turn_id\"", "\"turn_idx\"", 1),
            _ => text,
        });
        prop::collection::vec(respelled, 1..8)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// On any record, the reader builds the turn the strict parse builds, or nothing.
        #[test]
        fn a_generated_record_reads_as_the_strict_parse_reads_it(text in record_text()) {
            agrees(&text);
        }

        /// A record taken as its turn's canonical writing is that writing, and the canonical
        /// writing of any turn with empty metadata and ids the writer does not escape is
        /// taken so: for any generated record, and for the writing of the turn it holds.
        #[test]
        fn a_record_is_verbatim_exactly_when_it_is_its_turns_canonical_writing(
            text in record_text(),
        ) {
            let Some(turn) = strict(&text) else { return Ok(()) };
            let written = canonical_writing(&turn);
            let verbatim = |t: &str| verbatim(t).map(|r| t[r].to_owned());
            if let Some(copied) = verbatim(&text) {
                prop_assert_eq!(&copied, &written);
            }
            let plain = |id: &str| !id.bytes().any(cutctx_json::escape::needs_escape);
            let expected = turn.metadata().is_empty()
                && plain(turn.turn_id())
                && turn.tool_call_id().is_none_or(plain)
                && canonical_content(&written);
            prop_assert_eq!(verbatim(&written).is_some(), expected, "{}", written);
        }

        /// Reading records one after another, each key looked for first in the place it had in
        /// the record before, gives what reading each on its own gives.
        #[test]
        fn records_read_in_a_row_read_as_each_alone(texts in records_in_a_row()) {
            let mut order = super::KeyOrder::default();
            for text in &texts {
                let fresh = read_with(text, &mut super::KeyOrder::default());
                prop_assert_eq!(read_with(text, &mut order), fresh, "{}", text);
            }
        }
    }
}
